"""How long a prefill chunk is for a model of a given size (no torch here: the LSP bench reads it too)."""
from __future__ import annotations

PREFILL_CHUNK = 256  # tokens per prefill chunk at 0.5B parameters: the longest a foreground request waits
CHUNK_WORK = 256 * 500_000_000  # tokens x parameters per chunk (see chunk_for)


def chunk_for(parameters: int) -> int:
    """Prefill chunk for a model of this size: a power of two in [64, 2048] near CHUNK_WORK / parameters.

    Measured here (2 cores, loaded): at Qwen2.5-Coder-0.5B's shape a 1k-token prefill took 13.1 s whole,
    14.6 s in chunks of 512, 16.0 s in 256 (4.1 s each), 21.5 s in 128 and 31.9 s in 64 (small GEMMs run
    far below peak); the embedded 4M-parameter model loses 37% in chunks of 256 and nothing at 2048,
    where the whole prompt takes tens of ms. So chunks shrink as the model grows."""
    target = CHUNK_WORK / max(1, parameters)
    chunk = 64
    while chunk < 2048 and chunk * 2 <= target * 1.41:
        chunk *= 2
    return chunk


CHUNK_MS = 250  # the longest one prefill chunk should take: what a request waits behind background work at most (a
# cold file's first request comes right after its didOpen warm-up started; at 500 it waited 440-660 ms here)
FOREGROUND_MS = 500  # ...and of a request the user waits for, which is itself the one to finish: another document's
# request waits this long at most (#43's bound), and its own prefill runs longer, cheaper passes
CHUNK_FLOOR = 8  # ...but no chunk shorter than this, one native pass of a verify's size: measured at Qwen2.5-Coder-0.5B's
# shape here (the torch-free runner's native prefill, bf16, 1 thread, CPU time), passes of 8 tokens ran 14.7 ms a token,
# 16 12.6-13.4, 32 12.0-12.9, 64 10.6-10.9: a short chunk costs a background prefill a third at most (an engine whose
# passes convert their weights keeps its long chunks: LocalBackend._chunk)


def chunk_within(largest: int, ms_per_token: float, most_ms: float = CHUNK_MS) -> int:
    """The prefill chunk for a machine that prefills at `ms_per_token`: a power of two taking at most most_ms, in
    [CHUNK_FLOOR, largest] (`largest`: chunk_for's, by the model's size). A keystroke that comes during a prefill
    waits for the chunk under way, and the same model on a slower or busier machine takes longer per chunk."""
    chunk = largest
    while chunk > CHUNK_FLOOR and chunk * ms_per_token > most_ms:
        chunk //= 2
    return max(1, min(largest, chunk))
