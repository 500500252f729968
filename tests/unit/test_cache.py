"""cache/ without a server: keys, bounds, type-through, in-flight table and the planner."""
from __future__ import annotations

from tabd.cache.store import InflightTable
from tabd.cache.state import state_key
from tabd.daemon.speculation.planner import next_line, next_word, plan_after
from tabd.cache.state import DocState, Window
from tabd.cache.store import CompletionCache, Entry, entry_bytes
from tabd.cache.store import Shown, TypeThroughIndex, typed_length

DOC = "".join(f"line {i} of the document\n" for i in range(400))


def state_at(text: str, offset: int) -> DocState:
    return DocState.from_text(text, offset, 4000, 1000)


def test_key_depends_on_exactly_model_settings_and_windows():
    w = Window(0, "def f(", ")\n")
    k = state_key("m", "s", w)
    assert k == state_key("m", "s", Window(0, "def f(", ")\n"))
    assert k != state_key("m2", "s", w)
    assert k != state_key("m", "s2", w)
    assert k != state_key("m", "s", Window(0, "def g(", ")\n"))
    assert k != state_key("m", "s", Window(0, "def f(", "]\n"))
    # no ambiguity from where one field ends and the next starts
    assert state_key("ab", "c", w) != state_key("a", "bc", w)


def test_typing_at_the_cursor_only_appends_to_the_prefix_window():
    offset = len(DOC) // 2
    s0 = state_at(DOC, offset)
    w0 = s0.window(2000, 500)
    s1 = s0.insert("abc")
    w1 = s1.window(2000, 500)
    assert w1.start == w0.start
    assert w1.prefix == w0.prefix + "abc"
    assert w1.suffix == w0.suffix
    assert w0.prefix.startswith("line ")  # snapped to a line start
    assert 2000 <= len(w0.prefix) <= 2500 + 40


def test_window_of_an_inserted_state_equals_the_window_of_the_real_document():
    offset = len(DOC) // 3
    planned = state_at(DOC, offset).insert("xyz = 1")
    real_text = DOC[:offset] + "xyz = 1" + DOC[offset:]
    real = state_at(real_text, offset + len("xyz = 1"))
    assert planned.window(2000, 500) == real.window(2000, 500)


def test_lru_is_bounded_in_entries_and_bytes():
    cache = CompletionCache(max_entries=3, max_bytes=10_000)
    for i in range(5):
        cache.put(f"k{i}", Entry(f"text {i}", 0))
    assert len(cache) == 3 and "k0" not in cache and "k4" in cache
    cache.get("k2")  # recently used survives
    cache.put("k5", Entry("t", 0))
    assert "k2" in cache and "k3" not in cache
    big = CompletionCache(max_entries=1000, max_bytes=5_000)
    for i in range(100):
        big.put(f"k{i}", Entry("x" * 100, 0))
        assert big.bytes <= 5_000
    assert 0 < len(big) < 100
    assert big.bytes == sum(entry_bytes(big.get(k)) for k in list(big._lru.keys()))


def test_typed_length_finds_how_much_of_a_suggestion_was_typed():
    base = Window(0, "x = ", "\n")
    assert typed_length(base, "compute(1)", Window(0, "x = co", "\n")) == 2
    assert typed_length(base, "compute(1)", Window(0, "x = cx", "\n")) is None
    assert typed_length(base, "compute(1)", Window(0, "x = co", ")\n")) is None
    assert typed_length(base, "compute(1)", base) is None
    assert typed_length(base, "compute(1)", Window(0, "x = compute(1)", "\n")) is None  # fully typed: a cache lookup's job
    # the window start moved: compare the overlap
    assert typed_length(Window(10, "abc = ", "\n"), "foo()", Window(12, "c = fo", "\n")) == 2


def test_type_through_serves_the_remainder_of_any_length():
    index = TypeThroughIndex()
    text = "result = compute(alpha, beta)\n    return result"
    index.add(Shown(Window(0, "def f():\n    ", "\n"), text, "k", 0))
    hit = index.lookup(Window(0, "def f():\n    result = comp", "\n"))
    assert hit is not None and hit[1] == text[len("result = comp") :]
    assert index.lookup(Window(0, "def f():\n    resulx", "\n")) is None


def test_inflight_table_keeps_one_handle_per_key():
    table: InflightTable[object] = InflightTable()
    a, b = object(), object()
    table.add("k", a)
    assert table.get("k") is a
    table.discard("k", b)  # someone else's handle does not remove ours
    assert table.get("k") is a
    table.discard("k", a)
    assert table.get("k") is None and len(table) == 0


def test_planner_plans_whole_word_and_line_accepts_up_to_depth():
    s = state_at("def f():\n    ", len("def f():\n    "))
    plans = plan_after(s, "return a + b", 0, 2)
    assert [p.inserted for p in plans] == ["return a + b", "return"]  # one line: the line accept is the whole
    assert plans[0].state.before.endswith("return a + b") and plans[0].depth == 1
    assert plans[1].partial and plans[1].kinds == ("word",)
    assert plan_after(s, "return a + b", 2, 2) == []
    two_lines = plan_after(s, "x = 1\n    return x", 0, 2)
    assert [(p.inserted, p.branch) for p in two_lines] == [("x = 1\n    return x", "all"), ("x", "word"), ("x = 1\n", "line")]
    deeper = plan_after(plans[0].state, "\n    x = 1", 1, 2, kinds=("all",))
    assert [p.inserted for p in deeper] == ["\n    x = 1"]  # partial accepts only for what the user sees
    assert deeper[0].branch == "all.all"
    assert plan_after(s, "", 0, 2) == []


def test_the_planner_asks_the_policy_for_each_branch():
    class OnlyLines:
        def wants(self, doc, kinds, depth):
            return kinds == ("line",)

    s = state_at("", 0)
    assert [p.branch for p in plan_after(s, "a b\nc", 0, OnlyLines(), doc="d")] == ["line"]


def test_next_word_is_what_vscodes_word_accept_inserts():
    assert next_word("foo.bar(1)") == "foo"
    assert next_word("  return x") == "  "  # the blanks before a word, then the word
    assert next_word("return x") == "return"
    assert next_word("(a, b)") == "("
    assert next_word("x") == "x"
    assert next_word("\n    return z") == "\n    "  # the case: Neovim and the daemon now agree
    assert next_line("(a, b):\n    return") == "(a, b):\n"
