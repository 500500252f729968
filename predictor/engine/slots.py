"""The KV slot pool: the token ids and KV cache of the local backend's last few sequences, one per slot id.

A slot id is a document, or one speculation branch of it ("doc#all.word"). A
request takes its slot and learns how much of its prompt the slot's cache
already holds; a new branch is first given a copy of its parent's shared
prefix (copy-on-write), and least recently used slots go to stay within
max_slots and max_kv_bytes, branches before documents. LocalBackend (predictor/backends/local.py) owns one.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from tabd.predictor.engine.kvcache import KVCache

FORK_MIN_TOKENS = 4  # copy another slot's prefix when it holds more than this many more of the prompt
MAX_PINNED = 4  # pre-empted requests whose slots are kept from eviction


@dataclass
class Slot:
    ids: list[int] = field(default_factory=list)  # tokens whose keys and values the cache holds
    cache: KVCache | None = None
    used: float = 0.0


def common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class SlotPool:
    """The kept slots and their bounds; `new_cache(capacity)` is the runner's allocator (it changes at a hand-over)."""

    def __init__(self, new_cache: Callable[[int], KVCache], context: int, kv_reuse: bool = True, max_slots: int = 8,
                 max_kv_bytes: int = 256 << 20) -> None:
        self._allocate = new_cache
        self.context = context
        # what one position of keys and values takes (`tabd bench kv` reports it)
        self.kv_bytes_per_token = new_cache(1).nbytes()
        self.kv_reuse = kv_reuse
        self.max_slots = max_slots
        self.max_kv_bytes = max_kv_bytes
        self.slots: dict[str, Slot] = {}
        self.kv_copies = 0  # forks of one slot's prefix into another (copy-on-write)
        # slots of requests a newer one pre-empted, oldest first: kept from eviction until they resume
        self.pinned: list[str] = []

    def pin(self, slot_id: str) -> None:
        """Keep the slot while its run waits to resume (at most MAX_PINNED: the oldest pin goes first)."""
        if slot_id in self.pinned:
            self.pinned.remove(slot_id)
        self.pinned.append(slot_id)
        del self.pinned[:-MAX_PINNED]

    def unpin(self, slot_id: str) -> None:
        if slot_id in self.pinned:
            self.pinned.remove(slot_id)

    def held(self, ids: list[int]) -> int:
        """How many of `ids` the best kept slot holds (what a request for them would reuse), changing nothing."""
        if not self.kv_reuse:
            return 0
        return max((common_prefix(s.ids, ids) for s in list(self.slots.values()) if s.cache is not None), default=0)

    def new_cache(self, length: int) -> KVCache:
        return self._allocate(min(self.context, length + 64))

    def slot_for(self, slot_id: str, ids: list[int]) -> tuple[Slot, int]:
        """The slot to run in, and how many of `ids` its cache already holds.

        Each slot id (a document, or one speculation branch of it: "doc#all.word") has its own slot, so one
        branch never overwrites another's keys and values. A slot whose own cache shares less of `ids` than
        another slot's is first given a copy of that one's shared prefix (copy-on-write: copying keys and
        values costs far less than computing them), so a new branch starts where its parent's state ends.
        """
        best = max(self.slots.values(), key=lambda s: common_prefix(s.ids, ids), default=None)
        best_shared = common_prefix(best.ids, ids) if best is not None else 0
        slot = self.slots.get(slot_id)
        if slot is None:
            self._evict(keep={id(best)}, adding=True)
            slot = self.slots[slot_id] = Slot()
        slot.used = time.monotonic()
        if not self.kv_reuse or slot.cache is None:
            slot.cache, slot.ids = self.new_cache(len(ids)), []
        shared = common_prefix(slot.ids, ids)
        if self.kv_reuse and best is not None and best is not slot and best_shared > shared + FORK_MIN_TOKENS:
            self._copy_prefix(best, slot, best_shared)
            shared = best_shared
        self._evict(keep={id(slot)})  # within max_kv_bytes before this request runs
        return slot, shared

    def _copy_prefix(self, src: Slot, dst: Slot, n: int) -> None:
        """dst's cache := src's first n positions."""
        dst.cache.copy_prefix(src.cache, n)
        dst.ids = src.ids[:n]
        self.kv_copies += 1

    def _evict(self, keep: set[int], adding: bool = False) -> None:
        """Least recently used slots go until the slots fit in max_slots (one more to come if adding) and in
        max_kv_bytes; the slots in `keep` (by id) stay."""
        while self.slots:
            over = len(self.slots) + int(adding) > self.max_slots or self.kv_bytes() > self.max_kv_bytes
            victims = [k for k, v in self.slots.items() if id(v) not in keep and k not in self.pinned]
            if not over or not victims:
                return
            # a branch ("doc#all", a short window "doc#short") goes before any document's own slot: it is rebuilt
            # from its document's by a copy, while a document's is a whole prefill (with 4 documents edited in turn,
            # their branches took the 8 slots and each document came back to a cold prompt)
            del self.slots[min(victims, key=lambda k: ("#" not in k, self.slots[k].used))]

    def kv_bytes(self) -> int:
        """Bytes the slots' caches hold (allocated, not just used): what max_kv_bytes bounds."""
        # read from the LSP thread (tabd/stats) while the model thread may be making a slot: a slot whose cache is
        # not made yet holds nothing, and the dict is copied before it is walked
        return sum(s.cache.nbytes() for s in list(self.slots.values()) if s.cache is not None)

    def cut(self, slot: Slot, n: int) -> None:
        drop = len(slot.ids) - n
        if drop <= 0:
            return
        slot.cache.truncate(n)
        del slot.ids[n:]
