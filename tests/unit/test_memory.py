"""Memory (daemon/runtime/memory.py): the cache, type-through and in-flight runs, together and switched together."""
from __future__ import annotations

from tabd.cache.state import DocState, Window
from tabd.daemon.runtime.jobs import Computation
from tabd.daemon.runtime.config import Config
from tabd.daemon.runtime.memory import Memory
from tabd.predictor.types import GenSettings, Prediction

BASE = Window(0, "x = ", "\n")


def _comp(key: str = "k1") -> Computation:
    return Computation(key, "d", DocState(4, "x = ", "\n"), BASE, GenSettings(), 0)


def test_a_finished_run_is_recalled_whole_with_its_probabilities():
    memory = Memory(Config())
    comp = _comp()
    memory.started(comp)
    assert memory.running("k1") is comp and memory.has("k1")
    memory.ended(comp, Prediction("compute(1)", confidence=((7, 0.9), (10, 0.2))))
    assert memory.running("k1") is None
    got = memory.recall("k1", BASE)
    assert (got.text, got.source, got.confidence) == ("compute(1)", "cache", ((7, 0.9), (10, 0.2)))


def test_the_rest_of_a_shown_suggestion_is_recalled_when_its_start_was_typed():
    memory = Memory(Config())
    memory.shown(BASE, "compute(1)", "k1", 2)
    got = memory.recall("other", Window(0, "x = comp", "\n"))
    assert (got.text, got.source, got.depth, got.key) == ("ute(1)", "typed", 2, "k1")
    assert memory.recall("other", Window(0, "x = y", "\n")) is None


def test_a_failed_run_leaves_nothing_behind():
    memory = Memory(Config())
    comp = _comp()
    memory.started(comp)
    memory.ended(comp, None)
    assert not memory.has("k1") and memory.recall("k1", BASE) is None


def test_with_the_cache_off_nothing_is_remembered_or_shared():
    memory = Memory(Config(cache=False))
    comp = _comp()
    memory.started(comp)
    assert memory.running("k1") is None
    memory.ended(comp, Prediction("compute(1)"))
    memory.shown(BASE, "compute(1)", "k1", 0)
    assert memory.recall("k1", BASE) is None and memory.recall("k", Window(0, "x = co", "\n")) is None
