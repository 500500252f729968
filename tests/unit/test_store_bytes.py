"""The completion cache's byte bound counts what its entries really hold (text, key, object, confidence pairs).

Measured with tracemalloc: what filling a cache allocates, against the bytes the cache says it holds. A count that
left out most of the per-token probabilities let the 8 MiB bound hold about 40 MB.
"""
from __future__ import annotations

import hashlib
import random
import tracemalloc

import pytest

from tabd.cache.store import CompletionCache, Entry


def _entries(n: int, tokens: int) -> list[tuple[str, Entry]]:
    rng = random.Random(tokens)
    return [(hashlib.blake2b(str(i).encode(), digest_size=16).hexdigest(),  # keys are 32 hex digits (cache/state.py)
             Entry("".join(rng.choice("abc_ ()") for _ in range(40)), 0,
                   tuple((1000 + 3 * j, rng.random()) for j in range(tokens))))
            for i in range(n)]


def _held(tokens: int, n: int = 1000) -> tuple[int, int]:
    """(bytes the cache counts, bytes tracemalloc saw allocated) for n entries of `tokens` probabilities."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        cache = CompletionCache(max_entries=10 * n, max_bytes=1 << 40)
        for key, entry in _entries(n, tokens):
            cache.put(key, entry)
        allocated = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(cache) == n
    return cache.bytes, allocated


@pytest.mark.parametrize("tokens", [0, 8, 48])  # 48: a full suggestion at the default max_new_tokens
def test_the_counted_bytes_are_what_the_entries_allocate(tokens):
    """No eviction here: an evicted entry's tuples and floats go to the interpreter's free lists, which tracemalloc
    still counts as held."""
    counted, allocated = _held(tokens)
    assert 0.8 * allocated <= counted <= 1.25 * allocated, (counted, allocated)

