"""KV per speculation branch (predictor/engine/slots.py): no branch evicts another, a new branch copies its parent's
prefix instead of prefilling it, and the slots stay within their byte bound. The fixture model (tests/fixture_model.py):
its tokens are the text's own tokenization, so a prompt that appends what it wrote is an exact extension of its KV
(a trained model may pick a non-canonical split, e.g. "start"+"swith", which re-tokenizes otherwise)."""
from __future__ import annotations

import pytest

from tabd.daemon.speculation.planner import next_line, next_word
from tabd.predictor.backends.local import LocalBackend
from tabd.predictor.backends.backend_settings import LocalSettings
from tabd.predictor.types import GenSettings, Query

from support.predictor_cases import CODE

SETTINGS = GenSettings(max_new_tokens=16, multiline=True, lookup_min_p=0.0)  # the model's own decode: its KV is the text


@pytest.fixture(scope="module")
def backend(fixture_model):
    return LocalBackend(LocalSettings(fixture_model, engine="torch+native", threads=1))


def reuse(p) -> float:
    return p.reused_tokens / (p.reused_tokens + p.prefill_tokens)


def test_every_branch_reuses_its_prompt_and_none_evicts_another(backend):
    cut = CODE.index("    def set")
    prefix, suffix = CODE[:cut] + "    def ", CODE[cut:]
    first = backend.predict(Query(prefix, suffix, SETTINGS, slot_id="d"))
    text = first.text or "get(self):\n        pass"
    branches = {"d#all": prefix + text, "d#word": prefix + next_word(text), "d#line": prefix + next_line(text)}
    results = {slot: backend.predict(Query(p, suffix, SETTINGS, slot_id=slot)) for slot, p in branches.items()}
    deeper = backend.predict(Query(branches["d#all"] + (results["d#all"].text or "x"), suffix, SETTINGS, slot_id="d#all.all"))
    for slot, p in [*results.items(), ("d#all.all", deeper)]:
        assert reuse(p) >= 0.99, f"{slot}: {p.reused_tokens} reused, {p.prefill_tokens} prefilled"
    # the word and line branches ran after the whole one, in their own slots: the whole one's KV is still there
    again = backend.predict(Query(branches["d#all"], suffix, SETTINGS, slot_id="d#all"))
    assert again.prefill_tokens <= 1 and {"d", "d#all", "d#word", "d#line", "d#all.all"} <= set(backend.pool.slots)


def test_a_new_branch_copies_its_parents_prefix(backend):
    before = backend.pool.kv_copies
    prefix = CODE[:900]
    backend.predict(Query(prefix, "", SETTINGS, slot_id="p"))
    child = backend.predict(Query(prefix + "    x", "", SETTINGS, slot_id="p#word"))
    assert backend.pool.kv_copies == before + 1 and reuse(child) >= 0.95


def test_slots_stay_within_their_byte_bound():
    small = LocalBackend(LocalSettings(engine="torch+native", threads=1, max_kv_bytes=4 << 20, max_slots=64))
    biggest = 0
    for i in range(12):
        small.predict(Query(f"# file {i}\n" + CODE[: 400 + 40 * i], "", GenSettings(max_new_tokens=4), slot_id=f"doc{i}"))
        biggest = max(biggest, max(s.cache.nbytes() for s in small.pool.slots.values()))
        assert small.kv_bytes() <= max(small.pool.max_kv_bytes, biggest)
    assert len(small.pool.slots) < 12  # some went, least recently used first
    assert "doc11" in small.pool.slots
