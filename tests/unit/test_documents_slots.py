"""The KV slot pool under several documents: speculation branches give way before any document's own slot."""
from __future__ import annotations

from tabd.predictor.engine.kvcache import NumpyKV
from tabd.predictor.engine.slots import SlotPool


def test_documents_edited_in_turn_keep_their_kv_while_branches_go():
    pool = SlotPool(lambda capacity: NumpyKV(2, 1, 8, capacity), context=512, max_slots=6)
    for doc in ("a", "b", "c"):  # each document asked, then its branches prefetched after it
        for slot in (doc, f"{doc}#all", f"{doc}#word"):
            s, _ = pool.slot_for(slot, [ord(doc)] * 40)
            s.ids = [ord(doc)] * 40
    assert {"a", "b", "c"} <= set(pool.slots)  # the oldest document is still there; the oldest branches went
    assert len(pool.slots) == 6
    _, kept = pool.slot_for("a", [ord("a")] * 40)
    assert kept == 40


def test_a_pinned_slot_stays_until_unpinned():
    pool = SlotPool(lambda capacity: NumpyKV(2, 1, 8, capacity), context=512, max_slots=2)
    pool.slot_for("a", [1] * 10)[0].ids = [1] * 10
    pool.pin("a")
    for doc in ("b", "c", "d"):
        pool.slot_for(doc, [2] * 10)[0].ids = [2] * 10
    assert "a" in pool.slots
    pool.unpin("a")
    pool.slot_for("e", [2] * 10)  # (a slot sharing its prefix with the newest, so that one is the copy kept)
    assert "a" not in pool.slots
