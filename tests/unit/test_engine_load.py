"""A shared engine's load as the daemon sees it: prefetches go one ahead when it is twice as slow as unloaded, none
at four times, and a local engine is never capped."""
from __future__ import annotations

from tabd.daemon.runtime.engine_load import EngineLoad


def loaded(ms: list[float], shared: bool = True) -> EngineLoad:
    load = EngineLoad(shared)
    for m in ms:
        load.observe(m)
    return load


def test_an_unloaded_engine_is_not_capped():
    assert loaded([40.0] * 20).depth_cap() is None


def test_twice_as_slow_goes_one_ahead_and_four_times_none():
    assert loaded([40.0] * 20 + [90.0] * 8).depth_cap() == 1
    assert loaded([40.0] * 20 + [200.0] * 8).depth_cap() == 0
    assert loaded([40.0] * 20 + [200.0] * 8 + [42.0] * 8).depth_cap() is None  # it eased


def test_a_local_engine_and_a_quick_one_are_never_capped():
    assert loaded([40.0] * 20 + [200.0] * 8, shared=False).depth_cap() is None
    assert loaded([2.0] * 20 + [20.0] * 8).depth_cap() is None  # 10x, but 20 ms: noise on a quick engine
