"""What is loaded to stay goes out of the garbage collector's sight, and how often that happened (tabd/stats)."""
from __future__ import annotations

import gc

freezes = 0  # settle_heap calls (tabd/stats "gc")


def settle_heap() -> None:
    """What is loaded now lives as long as the daemon: out of the collector's sight (gc.freeze), so that a full
    collection never pauses an answer (one walks every tracked object: 66 ms once torch is imported, measured). No
    gc.collect() first: after torch's import it freed 49 objects, and it would hold the GIL for those 66 ms."""
    global freezes
    gc.freeze()
    freezes += 1  # counted, not gc.get_freeze_count(): that walks the frozen objects (25 ms once torch is in)
