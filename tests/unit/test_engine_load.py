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


# why_held: which prefetches a shared engine gets at all
UNLOADED = [40.0] * 20
MUCH = [40.0] * 20 + [200.0] * 8  # five times slower than unloaded


def test_a_local_engine_holds_nothing():
    load = loaded(MUCH, shared=False)
    for depth, kinds, p in [(1, ("all",), 0.0), (1, ("word",), 0.5), (3, ("all", "all", "all"), 0.9)]:
        assert load.why_held(depth, kinds, p) is None


def test_partial_branches_are_never_sent_to_a_shared_engine():
    assert loaded(UNLOADED).why_held(1, ("word",), 0.9) == "partial_branch"
    assert loaded(UNLOADED).why_held(1, ("line",), 0.9) == "partial_branch"
    assert loaded(UNLOADED).why_held(2, ("all", "word"), 0.9) == "partial_branch"


def test_the_tabs_own_prefetch_goes_under_load_when_the_user_takes_suggestions():
    assert loaded(UNLOADED).why_held(1, ("all",), 0.15) is None
    assert loaded(MUCH).why_held(1, ("all",), 0.5) is None
    assert loaded(MUCH).why_held(1, ("all",), 0.15) is None  # held, the Tab would go to the same engine, later
    assert loaded(MUCH).why_held(1, ("all",), 0.05) == "unlikely"
    assert loaded([40.0] * 20 + [90.0] * 8).why_held(1, ("all",), 0.05) == "unlikely"  # twice as slow: loaded


def test_an_idle_engine_gets_the_tabs_prefetch_however_seldom_suggestions_are_taken():
    """On an idle engine the prefetch costs no one anything; held, a Tab that does come is a miss for sure."""
    assert loaded(UNLOADED).why_held(1, ("all",), 0.05) is None
    assert loaded([2.0] * 20 + [20.0] * 8).why_held(1, ("all",), 0.01) is None  # 10x, but 20 ms: a quick engine


def test_deeper_prefetches_follow_the_load_cap():
    assert loaded(UNLOADED).why_held(3, ("all", "all", "all"), 0.9) is None
    assert loaded([40.0] * 20 + [90.0] * 8).why_held(2, ("all", "all"), 0.9) == "engine_loaded"
    assert loaded(MUCH).why_held(2, ("all", "all"), 0.9) == "engine_loaded"


def test_the_spread_of_an_idle_engines_first_tokens_is_not_load():
    """One user alone on vLLM (2 cores): first tokens in 20 to 55 ms by the size of what it prefills, the recent
    median (43.5 ms) over twice the floor (20 ms)."""
    idle = loaded([20.0, 45.0, 50.0, 40.0, 48.0, 42.0, 55.0, 38.0] * 4)
    assert idle.ratio() == 1.0  # under 60 ms: not load, whatever the ratio
    assert idle.depth_cap() is None and idle.why_held(1, ("all",), 0.05) is None


# pause_s: how long the Tab's prefetch waits for the user to stop typing
def test_the_pause_is_the_full_one_until_the_user_s_tabs_are_known():
    from tabd.daemon.runtime.engine_load import PAUSE_S
    load = EngineLoad(True)
    load.prefetched(0.16)
    load.tabbed(0.25)
    load.tabbed(0.25)
    assert load.pause_s() == PAUSE_S  # two Tabs: not enough to fit it to
    load.tabbed(0.25)
    assert load.pause_s() < PAUSE_S


def test_the_pause_leaves_a_prefetch_time_to_finish_before_the_user_s_tab():
    """Tabs 250 ms after the suggestion shows and prefetches of 150-170 ms: a prefetch that waits 100 ms is still
    running when the Tab comes, so it waits no more than the room left (about 80 ms); a slower engine, none; a user
    who reads for a second keeps the whole pause."""
    from tabd.daemon.runtime.engine_load import PAUSE_S
    load = EngineLoad(True)
    for s in (0.15, 0.16, 0.17, 0.16):
        load.prefetched(s)
    for s in (0.25, 0.26, 0.25, 0.27):
        load.tabbed(s)
    assert 0.07 < load.pause_s() < 0.1
    for _ in range(16):
        load.prefetched(0.4)  # the engine is slower than the user is quick: start at once
    assert load.pause_s() == 0.0
    reader = EngineLoad(True)
    reader.prefetched(0.16)
    for _ in range(4):
        reader.tabbed(1.0)
    assert reader.pause_s() == PAUSE_S


def test_the_pause_leaves_time_for_the_slowest_recent_prefetch_not_only_the_typical_one():
    """A single-request engine (llama-cpp-python, 8 users) answers most prefetches in 120 ms but some in 200 ms, as
    they queue behind other users: a Tab 250 ms after the suggestion finds those still running unless the prefetch
    starts early enough for the slowest of them."""
    load = EngineLoad(True)
    for s in [0.12] * 12 + [0.2] * 4:
        load.prefetched(s)
    for _ in range(4):
        load.tabbed(0.25)
    assert load.pause_s() + 0.2 <= 0.25 + 1e-9
