"""Edit history and propagation: the user's last edit read as a rename, proposed where the old name still stands."""
from __future__ import annotations

import asyncio

from tabd.daemon.edits.history import GAP_S, DocHistory
from tabd.daemon.edits import propagation
from tabd.daemon.edits.edit_service import EditService

TEXT = "def f(count):\n    return count + recount + count_x + self.count\n"


def typed(history: DocHistory, text: str, start: int, removed: int, keys: str, t0: float = 0.0) -> str:
    """Select `removed` characters at start and type `keys` one by one; the text after."""
    history.edited(start, text[start:start + removed], keys[0], t0)
    text = text[:start] + keys[0] + text[start + removed:]
    for i, ch in enumerate(keys[1:], 1):
        history.edited(start + i, "", ch, t0 + 0.1 * i)
        text = text[:start + i] + ch + text[start + i:]
    return text


def test_keystrokes_in_one_place_are_one_group_holding_what_was_there():
    h = DocHistory()
    text = typed(h, TEXT, 6, 5, "total")
    g = h.last
    assert (g.old, text[g.start:g.end]) == ("count", "total") and len(h.groups) == 1
    # a backspace inside the group stays in it
    h.edited(g.end - 1, "l", "", 0.6)
    assert h.last.old == "count" and len(h.groups) == 1


def test_a_pause_or_another_place_starts_a_new_group_and_earlier_ones_shift():
    h = DocHistory()
    text = typed(h, TEXT, 6, 5, "total")
    h.edited(0, "", "# x\n", 0.5 + GAP_S * 2)
    assert len(h.groups) == 2 and h.groups[0].start == 10  # shifted by the 4 characters inserted before it


def test_a_rename_is_read_as_whole_names_even_when_only_a_suffix_changed():
    h = DocHistory()
    text = typed(h, TEXT, 11, 0, "er")  # count -> counter: the edit inserted `er` only
    sub = propagation.substitution(text, h.last)
    assert (sub.old, sub.new) == ("count", "counter")


def test_only_whole_name_renames_propagate():
    h = DocHistory()
    text = TEXT[:6] + "count + 1" + TEXT[11:]
    h.edited(6, "count", "count + 1", 0.0)
    assert propagation.substitution(text, h.last) is None  # an expression, not a rename


def test_the_next_site_is_a_whole_token_after_the_cursor_never_part_of_another_name():
    h = DocHistory()
    text = typed(h, TEXT, 6, 5, "total")
    p = propagation.propose(text, h.last, 13, now=10.0)
    assert (p.start, p.end, p.text) == (text.index("return count") + 7, text.index("return count") + 12, "total")
    assert propagation.occurrences(text, "count") == [p.start]  # not recount, count_x nor self.count


def test_not_while_the_name_is_still_being_typed():
    h = DocHistory()
    text = typed(h, TEXT, 6, 5, "tot")
    assert propagation.propose(text, h.last, 9, now=0.3) is None
    assert propagation.propose(text, h.last, 9, now=0.3 + propagation.PAUSE_S) is not None  # a pause: done


def test_the_service_answers_the_accepted_edit_s_next_from_memory_and_drops_a_rejected_one():
    async def run() -> None:
        clock = [10.0]
        svc = EditService(clock=lambda: clock[0])
        text = "a = count\nb = count\nc = count\n"
        svc.edited("d", 4, "count", "total")
        text = "a = total" + text[9:]
        first = await svc.suggest("d", 2, text, 10)
        assert (first.start, first.text, first.origin) == (14, "total", "computed")
        await svc.speculate(first, text)
        svc.edited("d", first.start, "count", "total")
        text = text[:14] + "total" + text[19:]
        assert svc.accept(first.id) and not svc.accept(first.id)
        second = await svc.suggest("d", 3, text, 19)
        assert (second.start, second.origin) == (24, "cache")
        assert svc.reject(second.id) and svc.stats.rejected == 1

    asyncio.run(run())


def test_the_gate_holds_back_what_the_model_scores_low():
    async def low(doc: str, prefix: str, suffix: str, new: str, background: bool) -> float:
        return 0.1

    async def run() -> None:
        svc = EditService(low, min_confidence=0.5, clock=lambda: 10.0)
        svc.edited("d", 4, "count", "total")
        assert await svc.suggest("d", 2, "a = total\nb = count\n", 10) is None
        assert svc.stats.gated == 1

    asyncio.run(run())


def test_a_changed_string_literal_propagates_to_the_same_literal():
    text = 'a = paint("red")\nb = paint("red")\nc = "reddish"\n'
    h = DocHistory()
    h.edited(11, "red", "crimson", 0.0)
    text = text[:11] + "crimson" + text[14:]
    sub = propagation.substitution(text, h.last)
    assert (sub.kind, sub.old, sub.new) == ("string", '"red"', '"crimson"')
    p = propagation.propose(text, h.last, 0, now=5.0)
    assert text[p.start:p.end] == '"red"' and p.start == text.index('b = paint("red")') + 10
    assert len(propagation.sites(text, sub)) == 1  # not "reddish"


def test_an_argument_added_to_a_call_propagates_to_the_callee_s_other_calls():
    text = "fetch(url)\nfetch(other, retries=2)\nrefetch(url)\nx.fetch(url)\nfetch(url, timeout=5)\n"
    h = DocHistory()
    h.edited(9, "", ", timeout=5", 0.0)
    text = text[:9] + ", timeout=5" + text[9:]
    sub = propagation.substitution(text, h.last)
    assert (sub.kind, sub.old, sub.new) == ("argument", "fetch", ", timeout=5")
    found = propagation.sites(text, sub)
    # only `fetch(other, retries=2)`: not refetch, not x.fetch, not the calls that already have it
    assert [(p.start, p.end, p.text) for p in found] == [(text.index("retries=2") + 9,) * 2 + (", timeout=5",)]


def test_other_changes_do_not_propagate():
    for text, start, removed, inserted in (("f(a)\nf(a)\n", 3, "", " + 1"),  # not an argument: no `, `
                                           ("x = 1\nx = 1\n", 4, "1", "2")):  # a number is no name nor string
        h = DocHistory()
        h.edited(start, removed, inserted, 0.0)
        after = text[:start] + inserted + text[start + len(removed):]
        assert propagation.substitution(after, h.last) is None, (text, inserted)


def test_nothing_while_typing_is_not_remembered_so_the_pause_brings_the_edit():
    async def run() -> None:
        clock = [0.0]
        svc = EditService(clock=lambda: clock[0])
        svc.edited("d", 4, "count", "total")
        text = "a = total\nb = count\n"
        assert await svc.suggest("d", 2, text, 9) is None  # the cursor at the end of the name just typed
        clock[0] = 5.0  # a pause
        edit = await svc.suggest("d", 2, text, 9)
        assert edit is not None and edit.start == text.index("count")

    asyncio.run(run())


def test_a_user_who_takes_the_edits_gets_more_of_the_chain_computed_ahead():
    async def run() -> None:
        svc = EditService(clock=lambda: 10.0)
        text = "a = total\n" + "b = count\n" * 5
        svc.edited("d", 4, "count", "total")
        first = await svc.suggest("d", 2, text, 10)
        await svc.speculate(first, text)
        assert svc.stats.speculated == 1  # nothing measured yet: one ahead
        svc.stats.shown, svc.stats.accepted = 10, 9
        assert svc.depth() == 3
        await svc.speculate(first, text)
        assert svc.stats.speculated == 3  # the two after the one already known

    asyncio.run(run())
