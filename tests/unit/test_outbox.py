"""The outbox (lsp/outbox.py): what the server writes, in order, in as few writes as the answers allow. A Tab's read
holds tabd.accept's answer (nobody waits on it) and writes it with the inline completion's, in one write, with no
timer set for it; an answer nobody waits on, alone in its read or outside one, still goes out within LAZY_S."""
from __future__ import annotations

import asyncio

from tabd.lsp.outbox import LAZY_S, Outbox


async def test_a_held_lazy_answer_goes_out_with_the_urgent_one_in_one_write_and_sets_no_timer():
    writes: list[bytes] = []
    box = Outbox(writes.append)
    box.hold()
    box.put(b"accept", lazy=True)
    assert box._timer is None  # the read's end decides; no timer to set and cancel on a Tab's path
    box.put(b"completion")
    assert writes == []  # held until the read is handled
    box.release()
    assert writes == [b"acceptcompletion"]


async def test_a_lazy_answer_alone_in_its_read_or_outside_one_goes_out_within_lazy_s():
    writes: list[bytes] = []
    box = Outbox(writes.append)
    box.hold()
    box.put(b"accept", lazy=True)
    box.release()
    assert writes == []  # waits for the next write...
    await asyncio.sleep(LAZY_S * 3)
    assert writes == [b"accept"]  # ...or goes alone
    box.put(b"dismiss", lazy=True)
    assert writes == [b"accept"]
    await asyncio.sleep(LAZY_S * 3)
    assert writes == [b"accept", b"dismiss"]
