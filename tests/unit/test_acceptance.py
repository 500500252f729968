"""The acceptance model (daemon/speculation/acceptance.py) and the accept tracker (daemon/runtime/accepts.py) as plain objects."""
from __future__ import annotations

from tabd.daemon.speculation.acceptance import AcceptanceModel
from tabd.cache.state import DocState
from tabd.daemon.runtime.accepts import AcceptTracker

S = DocState(10, "x = 1\ny = ", "")


def tracker():
    outcomes = []
    return AcceptTracker(lambda doc, outcome, after: outcomes.append((doc, outcome, after))), outcomes


def test_an_edit_then_the_command_counts_once_and_so_does_the_other_order():
    t, outcomes = tracker()
    t.shown("1", "d", S, "compute(1)", continues=False)
    assert t.edit("d", 10, 0, "compute(1)").kind == "all"
    assert t.command("1", None, False)[1] is None  # VS Code sends no chars: the edit already counted it
    t.shown("2", "d", S.insert("compute(1)"), "\nz = 2", continues=False)
    assert t.command("2", 6, False)[1].via == "command"
    assert t.edit("d", 20, 0, "\nz = 2") is None  # the command came first
    assert [o[1] for o in outcomes] == ["all", "all"] and outcomes[1][2]  # the second was shown after an accept


def test_partial_accepts_move_on_and_typing_is_not_an_accept():
    t, outcomes = tracker()
    t.shown("1", "d", S, "compute(a, b)", continues=False)
    assert t.edit("d", 10, 0, "c") is None  # one keystroke typed into it
    t.shown("2", "d", S.insert("c"), "ompute(a, b)", continues=True)
    first = t.edit("d", 11, 0, "ompute")
    assert first.partial and first.kind == "word"
    rest = t.edit("d", 17, 0, "(a, b)")
    assert rest is not None and not rest.partial
    assert [o[1] for o in outcomes] == ["word"]  # one suggestion, one outcome: its first accept
    assert t.edit("d", 10, 0, "elsewhere") is None


def test_a_suggestion_replaced_by_another_is_passed_over():
    t, outcomes = tracker()
    t.shown("1", "d", S, "a", continues=False)
    t.shown("2", "d", S.insert("q"), "b", continues=False)
    t.dismiss("2")
    assert [o[1] for o in outcomes] == ["none", "none"]


def test_depth_follows_streaks_and_stops_for_a_user_who_never_accepts():
    m = AcceptanceModel(ceiling=4)
    assert m.depth("d") == 1  # before any outcome: one step (the streak prior waits for a streak)
    for i in range(8):
        m.record("d", "all", after_accept=i > 0)
    assert m.depth("d") == 4 and m.wants("d", ("all", "all", "all"), 3)
    other = AcceptanceModel(ceiling=4)
    for _ in range(60):
        other.record("e", "none")
    assert other.depth("e") == 0 and not other.wants("e", ("all",), 1)
    assert "no prefetch" in other.explain("e")["why"]


def test_a_user_who_takes_one_suggestion_in_fifty_still_gets_the_tabs_own_prefetch():
    """The whole accept one step ahead needs p(all) >= 0.01; a next-word branch at the same rate is not computed."""
    m = AcceptanceModel(ceiling=4)
    for outcome in ["none"] * 60 + ["all"] + ["none"] * 6 + ["word"] + ["none"] * 16:
        m.record("d", outcome)
    assert 0.01 <= m.rate("d", "all") < 0.03 and 0.01 <= m.rate("d", "word") < 0.03
    assert m.depth("d") == 1 and m.wants("d", ("all",), 1)
    assert not m.wants("d", ("word",), 1)
    assert "p(all)=0.0" in m.explain("d")["why"] and ">= 0.01" in m.explain("d")["why"]


def test_a_new_document_leans_on_the_users_rates():
    m = AcceptanceModel(ceiling=4)
    for i in range(8):
        m.record("a", "all", after_accept=i > 0)
    assert m.depth("fresh") == m.depth("a") == 4
    m.record("fresh", "none")
    assert m.rate("fresh", "all") > 0.5  # one outcome of its own barely moves it


def test_the_completion_after_a_taken_next_edit_is_planned_like_a_tab_s():
    from tabd.daemon.speculation.planner import plan_after

    model = AcceptanceModel(3)
    for _ in range(20):
        model.record("d", "all", after_accept=True)  # a user who takes what is shown
    after_edit = plan_after(S, "compute(1)", 1, model, doc="d", kinds=("edit",))  # raised KeyError: 'edit'
    after_tab = plan_after(S, "compute(1)", 1, model, doc="d", kinds=("all",))
    assert after_edit and [p.state for p in after_edit] == [p.state for p in after_tab]
