"""Next edits that repeat whatever the user just did: the edit learned as a transformation (synthesis.py), the places
it applies, and the service that holds, remembers and forgets them (edit_service.py).

The shapes are the repeated edits of real commit histories (#44): a rename, a wrapper added, an annotation added,
a trailing comment removed, a constant replaced, a string turned into a name, a keyword argument added, an attribute
appended, a type widened."""
from __future__ import annotations

import asyncio

import pytest

from tabd.daemon.edits import edit_service, propagation
from tabd.daemon.edits.edit_service import EditService
from tabd.daemon.edits.history import DocHistory
from tabd.daemon.edits.synthesis import generalised, learn, next_site, sites

pytestmark = pytest.mark.unit


def first_change(before: str, old: str, new: str, fn: str = "m.py") -> tuple[str, list[tuple[str, str]]]:
    """`old` -> `new` made at its first place; the text after, and each place the transformation then proposes, as
    (what stands there, what it becomes)."""
    after = before.replace(old, new, 1)
    t = learn(before, after, fn)
    assert t is not None
    return after, [(after[s.start:s.end], s.text) for s in sites(after, t, fn)]


def applied_everywhere(before: str, old: str, new: str, fn: str = "m.py") -> str:
    """The text once the user made the change once and took every proposal in turn (Tab, Tab...)."""
    text = before.replace(old, new, 1)
    t = learn(before, text, fn)
    assert t is not None
    cursor = text.index(new) + len(new)
    for _ in range(20):
        site = next_site(text, t, cursor, fn)
        if site is None:
            return text
        text, cursor = text[:site.start] + site.text + text[site.end:], site.start + len(site.text)
    raise AssertionError("the walk did not end")


def made_twice(before: str, first: tuple[str, str], second: tuple[str, str], fn: str = "m.py") -> tuple[str, list]:
    """The user makes one change at two places; the text once every place the two examples then propose is taken,
    and those places, as (what stands there, what it becomes)."""
    one = before.replace(*first, 1)
    two = one.replace(*second, 1)
    a, b = learn(before, one, fn), learn(one, two, fn)
    assert a is not None and b is not None
    t = generalised(b, a)
    assert t is not None
    found = sites(two, t, fn)
    taken = two
    for site in reversed(found):
        taken = taken[:site.start] + site.text + taken[site.end:]
    return taken, [(two[site.start:site.end], site.text) for site in found]


def test_a_rename_applies_to_whole_names_only_never_an_attribute_or_part_of_another_name():
    before = 'def f(count):\n    print("Σ", count)\n    return count + recount + count_x + self.count\n'
    _, found = first_change(before, "count)", "total)")
    assert found == [("count", "total")] * 2  # not recount, count_x, self.count, nor the one inside no string


def test_an_annotation_added_at_each_decorator_as_one_change_of_the_line():
    before = "def deco(f):\n    return f\n\ndef other(f):\n    print(f)\n    return f\n"
    after = applied_everywhere(before, "def deco(f):", 'def deco(f: "F") -> "F":')
    assert after == before.replace("(f):", '(f: "F") -> "F":')  # print(f) untouched


def test_a_wrapper_added_where_the_same_name_is_passed_in_the_same_call():
    before = ("    return update_wrapper(new_func, f)\n\n    return update_wrapper(new_func, g)\n"
              "def new_func():\n    pass\n")
    after = applied_everywhere(before, "update_wrapper(new_func, f)", 'update_wrapper(t.cast("F", new_func), f)')
    assert after.count('t.cast("F", new_func)') == 2 and "def new_func():" in after  # not the definition


def test_a_trailing_comment_removed_at_each_call_with_its_spaces():
    before = "a = foo()  # type: ignore[no-untyped-call]\nb = bar()  # type: ignore[no-untyped-call]\n# type: x\n"
    after = applied_everywhere(before, "foo()  # type: ignore[no-untyped-call]", "foo()")
    assert after == "a = foo()\nb = bar()\n# type: x\n"


def test_a_constant_replaced_only_where_its_context_matches():
    before = "def f() -> None:\n    raise E(None)\n\ndef g() -> None:\n    x = None\n    raise E(x)\n"
    after = applied_everywhere(before, "f() -> None", "f() -> t.NoReturn")
    assert after == "def f() -> t.NoReturn:\n    raise E(None)\n\ndef g() -> t.NoReturn:\n    x = None\n    raise E(x)\n"


def test_never_returns_goes_only_over_functions_that_end_by_raising():
    before = ("def fail(m: str) -> None:\n    raise Invalid(m)\n\n"
              "def warn(m: str) -> None:\n    print(m)\n\n"
              "def check(m: str) -> None:\n    if m:\n        raise Invalid(m)\n\n"
              "def loop(m: str) -> None:\n    while True:\n        wait(m)\n\n"
              "def either(m: str) -> None:\n    if m:\n        raise Invalid(m)\n    else:\n        raise KeyError(m)\n\n"
              "def missing(m: str) -> None:\n    raise KeyError(m)\n")
    after = applied_everywhere(before, "fail(m: str) -> None", "fail(m: str) -> t.NoReturn")
    # `warn` returns, `check` returns when `m` is empty: the annotation would be false there
    assert after == before.replace("fail(m: str) -> None", "fail(m: str) -> t.NoReturn").replace(
        "loop(m: str) -> None", "loop(m: str) -> t.NoReturn").replace(
        "either(m: str) -> None", "either(m: str) -> t.NoReturn").replace(
        "missing(m: str) -> None", "missing(m: str) -> t.NoReturn")
    # a long `elif` chain is read without recursing once per branch (2,000 branches, each raising)
    chain = "".join(f"    elif m == '{i}':\n        raise KeyError(m)\n" for i in range(2000))
    long = before + "\ndef branches(m: str) -> None:\n    if not m:\n        raise Invalid(m)\n" + chain + "    else:\n        raise E\n"
    assert "branches(m: str) -> t.NoReturn" in applied_everywhere(long, "fail(m: str) -> None", "fail(m: str) -> t.NoReturn")
    # another annotation of None is not refused
    assert applied_everywhere("def f() -> int:\n    return 1\n\ndef g() -> int:\n    return 2\n", "f() -> int",
                              "f() -> str") == "def f() -> str:\n    return 1\n\ndef g() -> str:\n    return 2\n"


def test_a_name_the_change_carries_over_varies_from_place_to_place_made_once():
    # `Optional[Foo]` -> `Foo | None`: the name inside is what each place has; the word around it picks the places
    before = ("def f(a: Optional[Foo] = None, b: int = 0):\n    x: Optional[Bar] = None\n    y: List[Foo] = []\n"
              "    return Optional(a)\n\ndef g(c: Optional[Baz] = None):\n    pass\n")
    at = before.index("Optional[Foo]")
    history, text = DocHistory(), before.replace("Optional[Foo]", "Foo | None", 1)
    history.edited(at, "Optional[Foo]", "Foo | None", 100.0)
    p = propagation.propose(text, list(history.groups), at + len("Foo | None"), 105.0, "m.py")
    for n in range(10):  # Tab, Tab...
        if p is None:
            break
        history.edited(p.start, text[p.start:p.end], p.text, 110.0 + n)
        text = text[:p.start] + p.text + text[p.end:]
        p = propagation.propose(text, list(history.groups), p.start + len(p.text), 120.0 + n, "m.py",
                                active=p.transformation)
    after = text
    assert after == before.replace("Optional[Foo]", "Foo | None").replace("Optional[Bar]", "Bar | None").replace(
        "Optional[Baz]", "Baz | None")  # List[...] and the call Optional(a) stay


def test_an_insertion_made_once_waits_for_a_second_example():
    before = "def f(x: str, y: int):\n    pass\ndef g(name: str) -> str:\n    pass\ndef h(z: str):\n    pass\n"
    _, once = first_change(before, "x: str,", "x: str | bytes,")
    assert once == []  # a type widened once may be that parameter's only: no word of its own picks the others
    after, found = made_twice(before, ("x: str,", "x: str | bytes,"), ("name: str)", "name: str | bytes)"))
    assert found == [("", " | bytes")] and after.endswith("def h(z: str | bytes):\n    pass\n")
    assert "def g(name: str | bytes) -> str:" in after  # the return type is no parameter


def test_a_long_stretch_deleted_once_goes_where_the_same_tokens_stand():
    def proposed(text: str, gone: str) -> tuple[str, str] | None:
        """The first place proposed once the user deleted the first `gone`, as (what stands there, what it becomes)."""
        at = text.index(gone)
        history = DocHistory()
        history.edited(at, gone, "", 100.0)
        text = text[:at] + text[at + len(gone):]
        p = propagation.propose(text, list(history.groups), at, 105.0, "m.py")
        return None if p is None else (text[p.start:p.end], p.text)

    line = "@skip_if(x is None, reason='no x')\n"
    text = f"{line}def test_a():\n    pass\n\n@skip_if(y is None, reason='no y')\ndef test_b():\n    pass\n\n" \
           f"{line}def test_c():\n    pass\n"
    assert proposed(text, line) == (line, "")  # from one example: the same line, not the other decorator
    assert proposed("a = g(\n    1\n)\nb = g(\n    1\n)\n", "(\n    1\n)") is None  # across lines, 3 tokens: it waits


def test_a_name_dropped_from_a_frame_that_stays_made_twice_goes_wherever_the_frame_stands():
    # `super(A, self)` -> `super()`: each class names itself, and no example carries the name into its new text
    before = ("class A(B):\n    def f(self):\n        super(A, self).f()\n\n\nclass C(B):\n    def f(self):\n"
              "        super(C, self).f()\n\n\nclass D(B):\n    def g(self):\n"
              "        return super(D, self).g() + super(D, self).h() + other(D, self)\n")
    after, found = made_twice(before, ("super(A, self)", "super()"), ("super(C, self)", "super()"))
    assert found == [("D, self", "")] * 2 and after.endswith("super().g() + super().h() + other(D, self)\n")
    one = "x = f(a)\ny = f(b)\nz = f(c)\n"  # a name dropped where little else stands: which name is a guess
    a, b = learn(one, one.replace("f(a)", "f()"), "m.py"), learn(one.replace("f(a)", "f()"),
                                                                 one.replace("f(a)", "f()").replace("f(b)", "f()"), "m.py")
    assert a is not None and b is not None and generalised(b, a) is None


def test_a_name_renamed_in_code_and_in_a_string_that_spells_it_is_renamed_in_code_too():
    # a pytest fixture: `def pep695(` renamed, then its `"pep695"`; its parameters are next (the string alone may be
    # a value: two strings changed do not rename the code)
    before = ('@fixture\ndef pep695():\n    pass\n\ndef load():\n    return get("pep695")\n\n'
              'def test_a(pep695):\n    pep695.run()\n')
    after, found = made_twice(before, ("def pep695", "def dummy"), ('"pep695"', '"dummy"'))
    assert found == [("pep695", "dummy")] * 2 and after.endswith("def test_a(dummy):\n    dummy.run()\n")
    values = 'a = f("json")\nb = g("json")\nimport json\n'
    _, found = made_twice(values, ('f("json")', 'f("yaml")'), ('g("json")', 'g("yaml")'))
    assert found == []  # `import json` stays


def test_a_keyword_argument_added_twice_goes_to_each_call_of_that_function_only():
    before = ("fetch(url)\nfetch(base)\nfetch(other, retries=2)\nrefetch(url)\nx.fetch(url)\n"
              "fetch(url, timeout=5)\n")
    _, once = first_change(before, "fetch(url)", "fetch(url, timeout=5)")
    assert once == []  # one call given an argument: maybe that call only
    after, found = made_twice(before, ("fetch(url)", "fetch(url, timeout=5)"), ("fetch(base)", "fetch(base, timeout=5)"))
    assert found == [("", ", timeout=5")]  # fetch(other, retries=2): not refetch, x.fetch, nor one that has it
    assert "fetch(other, retries=2, timeout=5)" in after and "refetch(url)\nx.fetch(url)\n" in after


def test_an_attribute_appended_and_a_string_turned_into_a_name():
    before = "x = Color.RED\ny = Color.BLUE\nz = Color.GREEN\nw = Other.RED\n"
    assert first_change(before, "Color.RED", "Color.RED.value")[1] == []  # once: maybe that one only
    after, found = made_twice(before, ("Color.RED", "Color.RED.value"), ("Color.BLUE", "Color.BLUE.value"))
    assert found == [("", ".value")] and after.endswith("z = Color.GREEN.value\nw = Other.RED\n")  # not Other's
    before = 'register("Rule", a)\nregister("Rule", b)\nprint("Rule of thumb")\n'
    after = applied_everywhere(before, '"Rule", a', "RuleFactory, a")
    assert after == 'register(RuleFactory, a)\nregister(RuleFactory, b)\nprint("Rule of thumb")\n'


def test_inside_strings_and_comments_only_when_the_example_was_there():
    before = 'color = "red"\nother = "red"\n# red is the default\nred = 1\n'
    after = applied_everywhere(before, '"red"', '"crimson"')
    assert after == 'color = "crimson"\nother = "crimson"\n# red is the default\nred = 1\n'


def test_two_examples_generalise_the_name_that_varies():
    text = "a = wrap(x)\nb = wrap(y)\nc = wrap(z)\n"
    one = text.replace("wrap(x)", "wrap(t.cast(T, x))")
    two = one.replace("wrap(y)", "wrap(t.cast(T, y))")
    first, second = learn(text, one), learn(one, two)
    assert first is not None and second is not None
    general = generalised(second, first)
    assert general is not None and None in general.core
    site = next_site(two, general, 0)
    assert site is not None and (two[site.start:site.end], site.text) == ("z", "t.cast(T, z)")
    assert next_site(two, second, 0) is None  # one example alone: only where its own name stands


SCOPED = ("tree = load()\n\ndef f(data):\n    tree = parse(data)\n    return walk(tree)\n\n"
          "class C:\n    def g(self, tree):\n        return tree.root\n")


def test_a_local_variable_renamed_stays_in_its_function_and_a_module_name_goes_everywhere():
    # `tree` -> `module` where f binds it: f's other `tree`, not g's parameter nor the module's `tree` (other
    # variables of that spelling)
    text = SCOPED.replace("tree = load()\n", "")
    after = applied_everywhere(text, "    tree = parse", "    module = parse")
    assert "return walk(module)" in after and "def g(self, tree):\n        return tree.root" in after
    # the module binds `tree` too: a function's `tree` may be the module's, so the rename is not held to f
    after = applied_everywhere(SCOPED, "    tree = parse", "    module = parse")
    assert "return walk(module)" in after and "def g(self, module):\n        return module.root" in after
    # declared `global` in f, `tree` is the module's
    text = SCOPED.replace("tree = load()\n", "").replace("(data):\n", "(data):\n    global tree\n")
    after = applied_everywhere(text, "    tree = parse", "    module = parse")
    assert "def g(self, module)" in after
    # two functions of one name (one in each branch of an `if`): the one it was made in
    text = "if X:\n    def h(tree):\n        return tree\nelse:\n    def h(tree):\n        return tree + tree\n"
    after = applied_everywhere(text, "    def h(tree):\n        return tree +", "    def h(tree):\n        return module +")
    assert after.endswith("def h(module):\n        return module + module\n") and "return tree\n" in after


def test_the_module_s_name_renamed_outside_a_function_that_binds_it_skips_that_function_s_body():
    # `date` the class renamed `dt_date` in an annotation: `fromdate`'s parameter `date` is another variable, so its
    # body keeps `date.year`; its annotation, `today`'s and the code that uses the class are renamed
    before = ("from datetime import date\n\n\ndef first(x: date) -> date:\n    return x\n\n\n"
              "def fromdate(cls, date: date, tz=None):\n    return cls(date.year, date.month)\n\n\n"
              "def today() -> date:\n    return date.today()\n")
    after = applied_everywhere(before, "x: date", "x: dt_date")
    assert "def fromdate(cls, date: dt_date, tz=None):\n    return cls(date.year, date.month)\n" in after
    assert "def today() -> dt_date:\n    return dt_date.today()\n" in after
    # renamed on the parameter itself, it is that variable: its body goes with it
    after = applied_everywhere(before, "cls, date:", "cls, day:")
    assert "    return cls(day.year, day.month)\n" in after


def test_an_attribute_access_shortened_at_one_place_is_shortened_wherever_that_path_stands():
    # a local now holds `node.default_value`: the user drops `node.` at one use, and the other use in that function
    # follows; `other.node.default_value` (another object's), `g`'s `node` (another variable) and a string stay
    before = ("def f(node):\n    default_value = getattr(node, 'default_value', None)\n"
              "    if node.default_value:\n        children.extend(['=', node.default_value])\n"
              "    other.node.default_value\n    log('node.default_value')\n\n\n"
              "def g(node):\n    return node.default_value\n")
    after = applied_everywhere(before, "if node.default_value", "if default_value")
    assert "        children.extend(['=', default_value])\n" in after
    assert "    other.node.default_value\n    log('node.default_value')\n" in after
    assert "def g(node):\n    return node.default_value\n" in after
    # the parts both keep at the end are not the change: `node.func.value` -> `node.value` is `node.func` -> `node`
    before = "if (\n    isinstance(node.func.value, ast.Name) and\n    node.func.attr == 'open'\n):\n    pass\n"
    after = applied_everywhere(before, "node.func.value", "node.value")
    assert "    node.attr == 'open'\n" in after
    # a path that gains a part, or becomes another name, is no shortening: the same text elsewhere stays
    before = "a = key.value\nb = key.value\n"
    assert applied_everywhere(before, "a = key.value", "a = key.value.z") == "a = key.value.z\nb = key.value\n"


def test_a_version_or_a_year_changed_at_one_place_is_changed_wherever_that_number_stands_whole():
    # Sphinx's conf.py: `version` bumped, then `release` (the same number with a patch part) is due; a year in a
    # comment, then the same year in an f-string; numbers that only contain it stay
    before = ("# Copyright 2009-2025 J. Doe\nversion = u'23.3'\nrelease = u'23.3.0'\n"
              "x = 123.35 + 23.31 + 1.23.3\ncopyright = f'2009-2025 {author}'\n")
    after = applied_everywhere(before, "u'23.3'", "u'23.4'")
    assert "release = u'23.4.0'\n" in after and "x = 123.35 + 23.31 + 1.23.3\n" in after
    after = applied_everywhere(before, "2009-2025 J.", "2009-2026 J.")
    assert "copyright = f'2009-2026 {author}'\n" in after and "version = u'23.3'\n" in after
    # another number means another thing at each place: `5` -> `6` is not made wherever a 5 stands
    before = "if len(v) < 5:\n    v.extend([None] * (5 - len(v)))\n"
    assert applied_everywhere(before, "< 5", "< 6") == before.replace("< 5", "< 6")


def test_a_local_import_deleted_once_the_module_imports_it_at_the_top_goes_from_every_body():
    # `import warnings` moved to the top: deleted from setUp, it is due in tearDown; `import warningsx` and the top
    # line stay
    before = ("import os\nimport warnings\n\n\nclass T:\n    def setUp(self):\n        import warnings\n"
              "        warnings.simplefilter('x')\n\n    def tearDown(self):\n        import warnings\n        x = 1\n\n"
              "    def other(self):\n        import warningsx\n")
    after = applied_everywhere(before, "        import warnings\n        warnings", "        warnings")
    assert after == before.replace("        import warnings\n", "")
    # with no such import at the top, deleting a local import says nothing about the others
    before = before.replace("import warnings\n\n\nclass", "\n\nclass")
    after = applied_everywhere(before, "        import warnings\n        warnings", "        warnings")
    assert after.count("        import warnings\n") == 1


def test_a_local_variable_renamed_in_two_functions_is_renamed_in_every_function():
    text = SCOPED.replace("tree = load()\n", "") + "\ndef h(tree):\n    return tree\n"
    taken, places = made_twice(text, ("walk(tree)", "walk(module)"), ("return tree.root", "return module.root"))
    assert "def h(module):\n    return module\n" in taken


def test_a_string_prefix_removed_at_one_string_goes_from_every_string_that_has_it():
    before = "a = u'x'\nb = f(u\"y\", 2)\nu = 3\nc = 'u'\nd = u'''z'''\n"
    after = applied_everywhere(before, "u'x'", "'x'")
    assert after == "a = 'x'\nb = f(\"y\", 2)\nu = 3\nc = 'u'\nd = '''z'''\n"  # not the name u, not the letter


def test_a_builtin_or_a_name_made_an_expression_is_replaced_where_its_context_matches_not_everywhere():
    before = "def f(a):\n    x: int = 0\n    y: int = 1\n    return int(a) + y\n\ndef g() -> int:\n    z: int = 2\n"
    after = applied_everywhere(before, "x: int", "x: Any")
    assert "y: Any = 1" in after and "z: Any = 2" in after  # the annotated names, not `int(a)` nor the return
    assert "return int(a)" in after and "-> int:" in after
    before = "if isinstance(doc, Document):\n    pass\nrows: list[Document] = []\nif isinstance(doc, Document): x\n"
    after = applied_everywhere(before, "Document)", "self.document_class)")
    assert after.count("isinstance(doc, self.document_class)") == 2 and "list[Document]" in after


def test_two_changes_made_in_turn_propose_the_other_half_next():
    text = "def f(\n    a,\n):\n    ...\n\ndef g(\n    b,\n):\n    ...\n\ndef h(\n    c,\n):\n    ...\n"
    history = DocHistory()
    now = [100.0]

    def insert(after: str, new: str) -> None:
        nonlocal text
        at = text.index(after) + len(after)
        history.edited(at, "", new, now[0])
        text = text[:at] + new + text[at:]
        now[0] += 2.0

    insert("    a", ": int")  # A at f, then B at f: its return type
    insert("\n)", " -> None")
    insert("    b", ": int")  # A at g: B is due at g (the nearest), not A at h
    cursor = text.index("b: int,") + len("b: int,")
    p = propagation.propose(text, list(history.groups), cursor, now[0] + 5.0, "m.py")
    assert p is not None and p.text.strip() == "-> None"
    assert text.index("def g") < p.start < text.index("def h")


def test_two_names_renamed_together_go_on_in_the_order_they_stand():
    # `blacklist` -> `denylist`, then `add_blacklist` -> `add_denylist`: the next place is whichever of the two comes
    # first below, not the last rename's own next place further down
    text = ("blacklist = set()\ndef add_blacklist(x):\n    blacklist.add(x)\n\nadd_blacklist(1)\n"
            "print(blacklist)\n")
    text, p = changed_in_turn(text, [("", "blacklist", "denylist"), ("def ", "add_blacklist", "add_denylist")])
    assert p is not None and (text[p.start:p.end], p.text) == ("blacklist", "denylist")
    assert text[:p.start].endswith("def add_denylist(x):\n    ")


def test_a_change_made_twice_goes_on_right_below_a_fix_made_on_the_way():
    # ` from e` at two raises; at the third handler the user first names what it caught (` as e`, made once, it
    # applies nowhere else): ` from e` is due on the raise right below; not where the next raise is further down
    body = "try:\n    f()\nexcept {0}{1}:\n{2}    raise Bad(\"{0}\")\n\n"
    names = [("KeyError", " as e", ""), ("ValueError", " as e", ""), ("OSError", "", ""), ("IndexError", "", "")]
    made = [('raise Bad("KeyError")', "", " from e"), ('raise Bad("ValueError")', "", " from e"),
            ("except OSError", "", " as e")]
    text, p = changed_in_turn("".join(body.format(*n) for n in names), made)
    assert p is not None and (text[p.start:p.end], p.text) == ("", " from e")
    assert text[:p.start].endswith('raise Bad("OSError")')
    names[2] = ("OSError", "", "    log()\n")
    text, p = changed_in_turn("".join(body.format(*n) for n in names), made)
    assert p is None or p.text != " from e"


def test_a_turn_whose_other_half_stands_nowhere_near_gives_way_to_the_change_made_twice():
    # A (a name replaced), B (a walrus added to the `if` two lines under it), A again: B would be due within a few
    # lines under the last A, as it stood the last time; its only places are above the cursor or far below, so
    # the change made twice goes on, at the next line that has it
    filler = "".join(f"    step{i}()\n" for i in range(20))
    text = ("def f(node):\n    if one:\n        use(node.args.args)\n    pass\n    if node.ok:\n        pass\n"
            "    if node.ok:\n        pass\n    use(node.args.args)\n    pass\n    use(node.args.args)\n" + filler
            + "    if node.ok:\n        pass\n")
    text, p = changed_in_turn(text, [("if one:\n        use(", "node.args.args", "arglist"),
                                     ("pass\n    if ", "", "(arglist := node.args) and "),
                                     ("pass\n    if node.ok:\n        pass\n    use(", "node.args.args", "arglist")])
    assert p is not None and (text[p.start:p.end], p.text) == ("node.args.args", "arglist")
    assert text.count("\n", 0, p.start) == 10


def test_a_change_made_in_a_run_with_one_other_between_goes_on_not_the_other():
    # A, A, B, A (a default added to each parameter, one overload added between): A goes on; B was made once
    text = "a: int\nb: int\nx = abs(1)\nc: int\nd: int\ny = abs(2)\n"
    text, p = changed_in_turn(text, [("a: int", "", " = 0"), ("b: int", "", " = 0"), ("x = ", "abs", "math.fabs"),
                                     ("c: int", "", " = 0")])
    assert p is not None and (text[p.start:p.end], p.text) == ("", " = 0") and text[:p.start].endswith("d: int")


def test_a_stub_body_joined_to_its_signature_then_its_own_line_deleted_goes_on_to_the_line_under_the_next_one():
    # A (` ...` typed at the end of an overload's signature), B (the `...` line under it deleted), A again: the two
    # halves meet at the line's end, so they read as one change; B is still due under the second signature, though
    # a `...` line has no context of its own, and the blank line under it is no token
    stub = "    @overload\n    def {0}(self, x: {1}) -> {1}:\n        ...\n\n"
    text = "class C:\n" + stub.format("f", "int") + stub.format("f", "str") + \
        "    def f(self, x):\n        return x\n\n    def g(self) -> None:\n        ...\n"
    history = DocHistory()
    now = 100.0

    def change(after: str, removed: str, inserted: str) -> int:
        nonlocal text, now
        at = text.index(after) + len(after)
        assert text[at:at + len(removed)] == removed
        history.edited(at, removed, inserted, now)
        text = text[:at] + inserted + text[at + len(removed):]
        now += 2.0
        return at + len(inserted)

    change("-> int:", "", " ...")
    change("-> int: ...\n", "        ...\n", "")
    cursor = change("-> str:", "", " ...")
    p = propagation.propose(text, list(history.groups), cursor, now + 5.0, "m.py")
    assert p is not None and (text[p.start:p.end], p.text) == ("        ...\n", "")
    assert text[:p.start].endswith("-> str: ...\n")
    cursor = change("-> str: ...\n", "        ...\n", "")
    # both overloads done: the join goes on at g, whose body is a `...` too (joins.py), never at a signature whose
    # body is code
    p = propagation.propose(text, list(history.groups), cursor, now + 5.0, "m.py")
    assert p is not None and (p.text, text[:p.start].rsplit("\n", 1)[-1]) == (" ...", "    def g(self) -> None:")


def test_a_change_an_editor_sent_in_two_pieces_is_one_change_when_it_comes_due_again():
    # A (a loop line deleted), then B on the line below made in two pieces a moment apart, as an editor sends
    # `            yield v` -> `        yield from vals` (the indentation deleted, then `v` typed over), then A again:
    # B is due below it, read as the whole line's change, not its last piece (`v` -> `from vals`)
    body = "    if vals:\n        for v in vals:\n            yield v\n"
    text = "".join(f"def {f}(vals):\n{body}" for f in "fgh")
    history = DocHistory()
    now = [100.0]

    def change(after: str, removed: str, inserted: str, wait: float = 2.0) -> int:
        nonlocal text
        at = text.index(after) + len(after)
        assert text[at:at + len(removed)] == removed
        history.edited(at, removed, inserted, now[0])
        text = text[:at] + inserted + text[at + len(removed):]
        now[0] += wait
        return at + len(inserted)

    change("def f(vals):\n    if vals:", "\n        for v in vals:", "")  # A at f
    change("def f(vals):\n    if vals:\n        ", "    ", "", wait=0.4)  # B at f, the indentation first,
    change("def f(vals):\n    if vals:\n        yield ", "v", "from vals")  # then `v` typed over
    cursor = change("def g(vals):\n    if vals:", "\n        for v in vals:", "")  # A at g
    p = propagation.propose(text, list(history.groups), cursor, now[0] + 5.0, "m.py")
    assert p is not None, "nothing proposed"
    assert text[:p.start] + p.text + text[p.end:] == text.replace(
        "def g(vals):\n    if vals:\n            yield v", "def g(vals):\n    if vals:\n        yield from vals")


def test_an_attribute_renamed_on_two_objects_is_renamed_on_any_object_but_not_a_plain_name():
    before = "x = a.calls\ny = b.calls\nz = c.calls\ncalls = 1\n"
    taken, found = made_twice(before, ("a.calls", "a.call_args_list"), ("b.calls", "b.call_args_list"))
    assert found == [("calls", "call_args_list")]
    assert taken == "x = a.call_args_list\ny = b.call_args_list\nz = c.call_args_list\ncalls = 1\n"


def inserted_in_turn(text: str, blocks: list[tuple[str, str]]) -> tuple[str, propagation.Proposal | None]:
    """The user types each (after, block): `block` right after the first `after`, two seconds apart; the text then,
    and what is proposed once they pause."""
    history = DocHistory()
    now = 100.0
    for after, block in blocks:
        at = text.index(after) + len(after)
        history.edited(at, "", block, now)
        text = text[:at] + block + text[at:]
        now += 2.0
    return text, propagation.propose(text, list(history.groups), at + len(block), now + 5.0, "m.py")


def functions(*firsts: str) -> str:
    """Functions a, b, c... each with a docstring (b's on several lines), each beginning with one of `firsts`."""
    docs = ['"""A."""', '"""B.\n\n    More.\n    """', '"""C."""', '"""D."""', '"""E."""']
    return "".join(f"def {name}(x):\n    {doc}\n    {first}\n    return math.floor(x)\n\n\n"
                   for name, doc, first in zip("abcde", docs, firsts))


def test_a_line_added_at_the_top_of_two_functions_goes_to_the_top_of_the_next_whatever_it_starts_with():
    # the line under the block is whatever each function does first; the line above (the docstring's end) and the
    # indentation are what the places share
    before = functions("y = 1", 'if x:\n        """Not a docstring."""\n        x = 2', "while x:\n        x -= 1")
    block = "    import math\n\n"
    text, p = inserted_in_turn(before, [('"""A."""\n', block), ('    """\n', block)])
    # the next function's top, not the line under the string inside `if x:` (indented further)
    assert p is not None and (p.start, p.end, p.text) == (text.index("    while x:"), text.index("    while x:"), block)
    line = "    x = int(x)\n\n"
    _, once = inserted_in_turn(before, [('"""A."""\n', line)])
    assert once is None  # a line made once (not an import a function below lacks): one example says too little


MODULE = ('import os\n\n\ndef a(x):\n    """A."""\n    return re.sub("a", "b", x)\n\n\n'
          'def b(x):\n    """Uses no re: x.re is an attribute, "re" a string."""\n    return x.re + "re"\n\n\n'
          'def c(x):\n    """C."""\n    import re\n    return re.escape(x)\n\n\n'
          'def d(\n    x,\n    re_flags=0,\n):\n    y = 1\n    return re.compile(x, re_flags) or y\n\n\n'
          'def e(x):\n    """E."""\n\n    w = re.compile(x)\n    return w\n')


def taken_in_turn(text: str, after: str, block: str) -> tuple[str, list[str]]:
    """The user types `block` right after the first `after`, then takes each proposal (Tab); the text then, and the
    line each proposal went over."""
    text, p = inserted_in_turn(text, [(after, block)])
    history, over = DocHistory(), []
    at = text.index(after) + len(after)
    history.edited(at, "", block, 100.0)
    active = p.transformation if p is not None else None
    while p is not None and len(over) < 10:
        over.append(text[p.end:text.index("\n", p.end)])
        history.edited(p.start, "", p.text, 110.0 + len(over))
        text = text[:p.start] + p.text + text[p.end:]
        p = propagation.propose(text, list(history.groups), p.start + len(p.text), 130.0 + len(over), "m.py",
                                active=active)
    return text, over


def test_an_import_moved_into_a_function_goes_into_each_function_below_that_uses_the_name_made_once():
    # a module's import moved into the functions that use it: from one example, to each function whose body uses
    # the name it binds (not as an attribute or in a string), unless it imports it already; at the top of the body
    # (under the docstring, past a blank line), not inside the signature's brackets
    text, over = taken_in_turn(MODULE, '"""A."""\n', "    import re\n")
    assert over == ["    y = 1", "    w = re.compile(x)"], over
    assert text.count("import re") == 4 and "def b(x):\n    \"\"\"Uses" in text
    assert '"""E."""\n\n    import re\n    w = re.compile(x)' in text  # past the blank line under the docstring


def test_an_import_placed_right_over_its_first_use_goes_over_the_first_use_in_the_next_function():
    module = MODULE.replace('    return re.sub("a", "b", x)', '    x = x.strip()\n    return re.sub("a", "b", x)')
    _, over = taken_in_turn(module, "x = x.strip()\n", "    import re\n")
    assert over == ["    return re.compile(x, re_flags) or y", "    w = re.compile(x)"], over


def test_an_import_the_module_still_has_or_one_under_if_type_checking_is_not_repeated():
    assert taken_in_turn("import re\n" + MODULE, '"""A."""\n', "    import re\n")[1] == []  # bound: no need
    typed = MODULE.replace("import os\n", "import os\nif TYPE_CHECKING:\n    pass\n")
    assert taken_in_turn(typed, "if TYPE_CHECKING:\n", "    import re\n")[1] == []  # the module's own, once


HANDLERS = ("def f(x):\n    try:\n        a(x)\n    except KeyError as e:\n        raise BadKey(\n            'no key',\n"
            "        )\n    try:\n        b(x)\n    except ValueError as exc:\n        raise BadValue(str(exc))  # why\n"
            "    try:\n        c(x)\n    except OSError:\n        raise Other()\n    raise Outside()\n"
            "    try:\n        d(x)\n    except TypeError as err:\n        raise\n"
            "    try:\n        e(x)\n    except IndexError as err:\n        raise Done() from None\n")


def test_a_chain_added_to_a_raise_in_a_handler_goes_to_each_unchained_raise_in_a_handler_made_once():
    # ` from e` names what each handler caught: `exc` where the handler says `as exc`; a handler that binds nothing
    # gets none, nor a raise outside a handler, a bare `raise`, or one chained already; the end of the statement
    # is past its brackets' lines and before its comment
    after = applied_everywhere(HANDLERS, "        )\n", "        ) from e\n")
    assert after == HANDLERS.replace("        )\n", "        ) from e\n").replace(
        "raise BadValue(str(exc))  # why", "raise BadValue(str(exc)) from exc  # why")
    after = applied_everywhere(HANDLERS, "        )\n", "        ) from None\n")
    assert after == HANDLERS.replace("        )\n", "        ) from None\n").replace(
        "raise BadValue(str(exc))", "raise BadValue(str(exc)) from None").replace(
        "raise Other()", "raise Other() from None")


ALIASES = ('import typing as t\nT = t.TypeVar("T")\nOKT = t.Union[KT, MissingT]  #: optional key\n'
           'Items = Iterable[tuple[KT, VT]]\n_StrType = str\nMaybe = int | None\nflag = compute()\nLIMIT = 10\n'
           'first = rows[0]\nReader = RequiresContext\nDEFAULT = MISSING\nhandler = Handler\n'
           'Done: t.TypeAlias = bool\ndef f():\n    Inner = list[int]\nDOC = """\nInString = list[int]\n"""\n')


def test_a_type_alias_marked_once_marks_each_module_level_alias_of_a_type_and_nothing_else():
    # `: t.TypeAlias` after each name whose value reads as a type (subscripted, a union, a builtin type, a class's
    # name given another), as the example wrote it; not a TypeVar, a call, a number, a constant, a variable, a
    # nested or annotated assignment, or text in a string
    after = applied_everywhere(ALIASES, "OKT = ", "OKT: t.TypeAlias = ")
    marked = [line.split(":")[0] for line in after.splitlines() if ": t.TypeAlias =" in line]
    assert marked == ["OKT", "Items", "_StrType", "Maybe", "Reader", "Done"]  # Done was marked already, and stays
    assert "DEFAULT = MISSING" in after and "handler = Handler" in after  # a constant, a variable
    assert "Done: t.TypeAlias = bool\n" in after
    assert 'T = t.TypeVar("T")' in after and "flag = compute()" in after and "    Inner = list[int]" in after
    assert "InString = list[int]" in after and "LIMIT = 10" in after and "first = rows[0]" in after


CBOR_TESTS = ('import pytest\n\n\n@given(x())\ndef test_cbor2(e):\n    pass\n\n\ndef test_json(e):\n    pass\n\n\n'
              '@given(\n    y(),\n)\ndef test_cbor2_converter(e):\n    pass\n\n\n'
              '@pytest.mark.skipif(NO_CBOR2, reason="cbor2 not available")\ndef test_cbor2_done(e):\n    pass\n\n\n'
              'class T:\n    def test_cbor2_method(self):\n        pass\ndef test_cbor2_tight(e):\n    return 1\n')
SKIP_CBOR = '@pytest.mark.skipif(NO_CBOR2, reason="cbor2 not available")\n'


def test_a_decorator_added_once_goes_over_each_function_whose_name_it_names():
    # made once over `test_cbor2`: over each function at that indentation named for cbor2, at the top of its
    # decorators (a `@given(...)` over several lines) as the example went; not over `test_json`, not over one that has
    # it already, not over a method at another indentation
    after = applied_everywhere(CBOR_TESTS, "@given(x())\n", SKIP_CBOR + "@given(x())\n")
    assert after.count(SKIP_CBOR) == 4
    assert SKIP_CBOR + "@given(\n    y(),\n)\ndef test_cbor2_converter" in after
    assert "        pass\n" + SKIP_CBOR + "def test_cbor2_tight" in after
    assert "\n\n\ndef test_json" in after and "    def test_cbor2_method" in after
    # a decorator that names nothing of its function (`@slow`) says nothing about where else it goes
    text, p = changed_in_turn(CBOR_TESTS, [("import pytest\n\n\n", "", "@slow\n")])
    assert p is None
    text, p = changed_in_turn(CBOR_TESTS, [("import pytest\n\n\n", "", SKIP_CBOR)])
    assert p is not None and text[:p.start].endswith("    pass\n\n\n") and text[p.start:].startswith("@given(\n")


def test_each_earlier_instance_of_a_line_narrows_what_its_places_must_share():
    # three functions made: the last two both begin `name = ...`, the first does not; the next begins with `try`
    before = functions("if x:\n        x = 2", "z = x", "w = x", "try:\n        x = 3\n    finally:\n        pass")
    block = "    import math\n\n"
    text, p = inserted_in_turn(before, [('"""A."""\n', block), ('    """\n', block), ('"""C."""\n', block)])
    assert p is not None and (p.start, p.end, p.text) == (text.index("    try:"), text.index("    try:"), block)


def test_a_decorator_added_over_two_methods_goes_over_the_next_whatever_ends_the_method_above():
    # a blank line apart, the line above belongs to the method before: only the `def` under the block is its place
    before = ("class A(B):\n    def f(self):\n        return 1\n\n    def g(self):\n        return 2\n\n"
              "    def h(self):\n        pass\n\n    def i(self):\n        return 3\n")
    text, p = inserted_in_turn(before, [("return 1\n\n", "    @override\n"), ("return 2\n\n", "    @override\n")])
    assert p is not None and text[:p.start] + p.text + text[p.end:] == text.replace("    def i", "    @override\n    def i")


def changed_in_turn(text: str, changes: list[tuple[str, str, str]]) -> tuple[str, propagation.Proposal | None]:
    """The user makes each (anchor, removed, inserted): `removed`, right after the first `anchor`, replaced by
    `inserted`, two seconds apart; the text then, and what is proposed once they pause."""
    history = DocHistory()
    now = 100.0
    for anchor, removed, inserted in changes:
        at = text.index(anchor) + len(anchor)
        assert text[at:at + len(removed)] == removed
        history.edited(at, removed, inserted, now)
        text = text[:at] + inserted + text[at + len(removed):]
        now += 2.0
    return text, propagation.propose(text, list(history.groups), at + len(inserted), now + 5.0, "m.py")


def test_marks_removed_twice_where_the_line_holds_nothing_else_go_on_to_the_next_such_line():
    before = "def f():\n    raise Exception()\n\ndef g():\n    raise KeyError()\n\ndef h():\n    raise Custom()\n" \
             "    x = call()\n"
    text, p = changed_in_turn(before, [("raise Exception", "()", ""), ("raise KeyError", "()", "")])
    # `raise NAME()` is the whole line: that is context enough, though only `raise` is the same token
    assert p is not None and text[:p.start] + p.text + text[p.end:] == text.replace("Custom()", "Custom")


STUBS = "".join(f"@overload\ndef {f}(\n    {a}: int,\n) -> T:\n    ...  # stub\n\n\n" for f, a in zip("fgh", "abc"))


def joined(name: str, a: str) -> list[tuple[str, str, str]]:
    """A stub's `) -> T:` line joined to its `...`, as two edits: the old line deleted, then `) -> T:` typed over the
    spaces before `...` (how a formatter's change reads, hunk by hunk)."""
    return [(f"    {a}: int,", "\n) -> T:", ""), (f"    {a}: int,\n", "   ", ") -> T:")]


def test_a_line_deleted_beside_its_copy_is_learned_where_it_was_deleted():
    # after f and g are done, the text around g's deleted line holds f's and g's joined lines: read by a diff, the
    # deletion is the copy below, whose context is the other edit's text; where the user deleted it, it is
    # `a: int,` above and the line's end
    text, p = changed_in_turn(STUBS, [*joined("f", "a"), *joined("g", "b")])
    assert p is not None and text[:p.start] + p.text + text[p.end:] == text.replace("c: int,\n) -> T:\n", "c: int,\n")


def test_text_typed_over_the_spaces_before_a_token_replaces_them_at_each_place():
    text, p = changed_in_turn(STUBS, [*joined("f", "a"), *joined("g", "b"), joined("h", "c")[0]])
    assert p is not None and text[:p.start] + p.text + text[p.end:] == STUBS.replace(") -> T:\n    ...", ") -> T: ...")


def test_a_name_qualified_once_is_qualified_wherever_it_stands_unqualified():
    before = ("from typing import Self\n\ndef f(cls: type[Self]) -> Self:\n    return x.Self or Selfish\n\n"
              "def g(self) -> Self:  # Self\n    return 'Self'\n")
    after = applied_everywhere(before, "type[Self]", "type[t.Self]")
    # every unqualified `Self` in code, whatever stands around it; not an attribute, a longer name, a comment, a
    # string, nor the import (where `t.Self` cannot stand)
    assert after == before.replace("-> Self:", "-> t.Self:").replace("type[Self]", "type[t.Self]")


def test_text_typed_at_the_start_of_two_lines_in_turn_goes_down_the_block():
    before = ('def f():\n    """Use:\n\n        x = 1\n        y = f(x)\n\n        z = y\n    Done.\n    """\n'
              "    x = 1\n")
    text, p = changed_in_turn(before, [("Use:\n\n        ", "", ">>> "), ("x = 1\n        ", "", ">>> ")])
    # the next line of the block, past the blank line
    assert p is not None and text[:p.start] + p.text + text[p.end:] == text.replace("        z = y", "        >>> z = y")
    assert p.transformation is not None
    taken = text[:p.start] + p.text + text[p.end:]
    # and there the block ends: another indentation (`Done.`), code outside the string (`x = 1`)
    assert next_site(taken, p.transformation, p.start + len(p.text), "m.py", wrap=False) is None


def test_a_context_whose_nearest_token_varies_is_found_by_the_next_one():
    before = "def f():\n    import a\n\ndef g():\n    import b\n\ndef h():\n    x = c\n    import c\n"
    text, p = changed_in_turn(before, [("import a", "", "  # noqa: PLC0415"), ("import b", "", "  # noqa: PLC0415")])
    # `import NAME` is the line: the name differs at each place, `import` is what finds the next one
    assert p is not None and text[:p.start] + p.text + text[p.end:] == text.replace("import c\n", "import c  # noqa: PLC0415\n")


def test_a_rename_goes_to_the_name_spelled_as_a_whole_string_only():
    before = ('__all__ = ["count"]\ndef count(x):\n    return getattr(x, "count")\n'
              'print("count of things", "counts", \'count\')\n')
    after = applied_everywhere(before, "def count", "def total")
    assert after == ('__all__ = ["total"]\ndef total(x):\n    return getattr(x, "total")\n'
                     'print("count of things", "counts", \'total\')\n')


def test_changes_that_are_not_repeatable_are_not_proposed():
    text = "x = 1\ny = 2\n"
    assert learn(text, "x = 1\n  y = 2\n") is None  # whitespace: the formatter's
    assert learn(text, text) is None


# ---------------------------------------------------------------- the service


class Clock:
    def __init__(self, t: float = 10.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    async def sleep(self, s: float) -> None:
        self.t += s
        await asyncio.sleep(0)


def service(clock: Clock) -> EditService:
    return EditService(clock=clock, sleep=clock.sleep)


def test_a_request_while_typing_is_held_until_the_pause_then_answered():
    async def run() -> None:
        clock = Clock()
        svc = service(clock)
        svc.edited("d", 4, "count", "total")
        text = "a = total\nb = count\n"
        edit = await svc.suggest("d", 2, text, 9)  # the cursor at the end of the name just typed: held
        assert edit is not None and edit.start == text.index("count") and svc.stats.held == 1
        assert clock.t >= 10.0 + propagation.PAUSE_S

    asyncio.run(run())


def test_a_held_request_is_answered_when_the_pause_ends_however_long_its_computing_took():
    async def run() -> None:
        clock = Clock()

        async def slow_scorer(doc: str, prefix: str, suffix: str, new: str, background: bool) -> float:
            clock.t += 0.3  # the computing (here the gate) takes 0.3 s of the user's pause
            return 1.0

        svc = EditService(scorer=slow_scorer, min_confidence=0.5, clock=clock, sleep=clock.sleep)
        svc.edited("d", 4, "count", "total")
        edit = await svc.suggest("d", 2, "a = total\nb = count\n", 9)
        # shown when the pause ends, not 0.3 s after it
        assert edit is not None and svc.stats.held == 1 and abs(clock.t - (10.0 + propagation.PAUSE_S)) < 1e-9

    asyncio.run(run())


def test_a_held_request_is_answered_empty_once_the_user_types_on():
    async def run() -> None:
        clock = Clock()
        svc = EditService(clock=clock, sleep=lambda s: asyncio.sleep(0.01))
        svc.edited("d", 4, "count", "tot")
        held = asyncio.ensure_future(svc.suggest("d", 2, "a = tot\nb = count\n", 7))
        await asyncio.sleep(0)
        svc.edited("d", 7, "", "a")  # the next keystroke
        assert await held is None and svc.stats.superseded == 1

    asyncio.run(run())


def test_a_trimmed_accept_is_recognised_and_the_chain_comes_from_memory_wherever_the_cursor_lands():
    async def run() -> None:
        clock = Clock()
        svc = service(clock)
        text = 's = "Σ"\na = count_all\nb = f("Σ", count)\nc = f("Σ", count)\nd = count\n'
        svc.edited("d", text.index("count_all"), "count", "count_all")
        first = await svc.suggest("d", 2, text, 0)
        assert first is not None and first.old == "count"
        await svc.speculate(first, text)
        # the client applies it itself, sending the change less what old and new share: `_all` inserted
        svc.edited("d", first.end, "", "_all")
        text = text[:first.start] + "count_all" + text[first.end:]
        line_end = text.index("\n", first.start)
        for cursor in (first.start + len("count_all"), first.start + len("count"), line_end):  # tabd's, copilot-lsp's, sidekick's
            second = await svc.suggest("d", 3, text, cursor)
            assert second is not None and second.origin == "cache" and second.start == text.index("c = f") + 11
        assert svc.stats.accepted == 1 and svc.stats.accepted_unreported == 1

    asyncio.run(run())


def test_a_rejected_edit_is_forgotten_and_its_change_not_proposed_again_in_that_document():
    async def run() -> None:
        clock = Clock()
        svc = service(clock)
        text = "a = total\nb = count\nc = count\n"
        svc.edited("d", 4, "count", "total")
        first = await svc.suggest("d", 2, text, 0)
        assert first is not None and svc.reject(first.id)
        assert await svc.suggest("d", 2, text, 0) is None
        assert await svc.suggest("d", 2, text, 12) is None  # nor at another place
        svc.edited("e", 4, "count", "total")
        assert await svc.suggest("e", 2, text, 0) is not None  # another document: still proposed

    asyncio.run(run())


def test_a_user_who_takes_the_edits_gets_more_of_the_chain_computed_ahead():
    async def run() -> None:
        svc = service(Clock())
        text = "a = total\n" + "b = count\n" * 5
        svc.edited("d", 4, "count", "total")
        first = await svc.suggest("d", 2, text, 10)
        await svc.speculate(first, text)
        assert svc.stats.speculated == 1  # nothing measured yet: one ahead
        svc.stats.shown, svc.stats.accepted = 10, 9
        assert edit_service.depth(svc.stats) == 3
        await svc.speculate(first, text)
        assert svc.stats.speculated == 3  # the two after the one already known

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


def test_tokens_come_from_the_file_s_language():
    from tabd.daemon.edits.tokens import tokens_of

    js = tokens_of("let s = 'a b'; // count\ncount += 1\n", "x.js")
    assert [t.kind for t in js if t.text == "count"] == ["comment", "name"]
    unknown = tokens_of("count = 'x'\n", "notes.unknownext")
    assert [(t.text, t.kind) for t in unknown][:2] == [("count", "name"), ("=", "mark")]


def test_the_pause_is_measured_from_the_keystroke_of_a_client_that_batches_its_changes():
    from tabd.lsp.inline_edit import client_lag

    async def run() -> None:
        clock = Clock()
        svc = EditService(clock=clock, sleep=clock.sleep, lag=client_lag({"name": "Neovim", "version": "0.11.4"}))
        svc.edited("d", 4, "count", "total")  # arrives 150 ms after the key was pressed
        await svc.suggest("d", 2, "a = total\nb = count\n", 9)
        assert abs(clock.t - (10.0 + propagation.PAUSE_S - 0.15)) < 1e-9
        assert client_lag({"name": "Visual Studio Code"}) == 0.0 and client_lag(None) == 0.0

    asyncio.run(run())


def test_a_few_changed_lines_are_lexed_alone_and_give_the_whole_lex_s_tokens():
    import random

    from tabd.daemon.edits import tokens as lexing

    rng = random.Random(7)
    text = open(lexing.__file__, encoding="utf-8").read()  # a real file with docstrings, strings and comments
    lexing.tokens_of(text, "t.py")
    pieces = ["x", "count", " ", "\n", "(", ")", '"', "'", "# c", ", y", "\n    z = 1\n", "", '"""', "\n\n"]
    for _ in range(200):
        i = rng.randrange(len(text))
        text = text[:i] + rng.choice(pieces) + text[min(len(text), i + rng.randrange(8)):]
        spliced = [(t.start, t.text, t.kind) for t in lexing.tokens_of(text, "t.py")]
        whole = [(t.start, t.text, t.kind) for t in lexing._lexed(text, lexing._language("t.py"))]
        assert spliced == whole


def test_any_sequence_of_edits_gets_an_edit_or_none_never_an_error():
    import random

    rng = random.Random(11)
    pieces = ["count", "total", "(", ")", "\n", "    ", '"', "x.", ", y", "# note", "None", "Σ", "", "\t", "'''", "\r\n"]
    for trial in range(60):
        clock = Clock()
        svc = service(clock)
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(0, 40)))
        name = rng.choice(["m.py", "m.js", "m.unknownext", ""])
        for step in range(12):
            a = rng.randrange(len(text) + 1)
            b = min(len(text), a + rng.randrange(6))
            new = rng.choice(pieces)
            clock.t += rng.choice([0.1, 1.5])
            svc.edited("d", a, text[a:b], new)
            text = text[:a] + new + text[b:]
            edit = asyncio.run(svc.suggest("d", step, text, rng.randrange(len(text) + 1), name))
            if edit is not None:  # a real range of this text, and never the text as it already is
                assert 0 <= edit.start <= edit.end <= len(text) and text[edit.start:edit.end] == edit.old
                assert text[:edit.start] + edit.text + text[edit.end:] != text


def test_a_change_made_in_two_parts_goes_on_with_its_first_part_where_that_comes_first():
    before = "".join(f'def {n}(x):\n    log("start", level=1)\n    return compute(x)\n\n\n' for n in "fgh")
    # at f: the argument dropped, then the call awaited on the line below; at g the dropped argument comes first
    text, p = changed_in_turn(before, [('log("start"', ", level=1", ""), ("    return ", "", "await ")])
    g = text.index("def g")
    assert p is not None and (p.start, p.end, p.text) == (text.index(", level=1", g), text.index(", level=1", g) + 9, "")
    # two changes far apart are not one change's parts: the last goes on alone
    far = before.replace("def g", "def spacer():\n" + "    pass\n" * 8 + "\n\ndef g", 1)
    far = far.replace("    return compute(x)\n", "    x += 1\n" * 6 + "    return compute(x)\n", 1)
    text, p = changed_in_turn(far, [('log("start"', ", level=1", ""), ("    return ", "", "await ")])
    assert p is not None and p.text == "await " and p.start == text.index("return compute", text.index("def g")) + 7


def test_a_change_made_in_three_parts_at_each_place_goes_on_part_by_part():
    # at each function: A (its parameter annotated), B (its log call made a debug call), C (its result converted);
    # after A B C, then A at g, B is due at g (the nearest), not A again at h; after A B at g, C at g
    before = "".join(f'def {f}({a}):\n    log("{f}")\n    return total\n\n' for f, a in zip("fgh", "abc"))
    made = [("def f(", "a", "a: int"), ("    log", "", ".debug"), ("    return ", "total", "int(total)"),
            ("def g(", "b", "b: int")]
    text, p = changed_in_turn(before, made)
    assert p is not None and (text[p.start:p.end], p.text) == ("", ".debug")
    assert text.index("def g") < p.start < text.index("def h")
    text, p = changed_in_turn(before, [*made, ("def g(b: int):\n    log", "", ".debug")])
    assert p is not None and (text[p.start:p.end], p.text) == ("total", "int(total)")
    assert text.index("def g") < p.start < text.index("def h")


def test_a_word_replaced_in_prose_goes_on_wherever_that_word_stands_in_prose():
    # a docstring's `bits` fixed to `bytes`: the other docstrings' and comments' `bits` follow whatever sentence they
    # stand in; the code's `bits` (a variable) and a URL's piece in a docstring do not
    before = ('def parse(size):\n    """Parse a size into bits."""\n    bits = size * 8\n    return bits\n\n\n'
              'def show(n):\n    """Return n, in bits or None."""\n    # bits, rounded\n    return round(n)\n\n\n'
              'def mod():\n    """See https://bits/table for more."""\n')
    after, places = first_change(before, "into bits.", "into bytes.")
    assert places == [("bits", "bytes"), ("bits", "bytes")]
    assert [after.count("\n", 0, s.start) for s in sites(after, learn(before, after, "m.py"), "m.py")] == [7, 8]


def test_a_long_stretch_replaced_once_goes_on_where_it_stands_the_same():
    # a naive datetime localised by a call, written as an aware one: made once, it writes over 60 characters, but
    # the fourteen tokens it replaced stand the same in the next test, in the same context: proposed there; a
    # shorter expression replaced by as much new text waits for a second example
    old = "central.localize(dt.datetime(2013, 11, 10, 1, 23, 45), is_dst=False)"
    new = "dt.datetime(2013, 11, 10, 1, 23, 45, tzinfo=central_timezone_for_this_test_module)"
    before = "".join(f"def test_{n}():\n    value = {old}\n    check(value)\n\n" for n in "abc")
    text, p = changed_in_turn(before, [("test_a():\n    value = ", old, new)])
    assert p is not None and text[:p.start] + p.text + text[p.end:] == before.replace(old, new, 2)
    short = "dt.datetime(2013, 11, 10)"
    before = "".join(f"def test_{n}():\n    value = {short}\n    check(value)\n\n" for n in "abc")
    assert changed_in_turn(before, [("test_a():\n    value = ", short, new)])[1] is None


def test_a_rename_made_just_before_another_change_comes_first_at_the_next_place():
    # Python 3 ports each class: `__nonzero__` renamed `__bool__` (A), then the alias line under it deleted (B); at
    # the next class A is due first, on the line above B's next place, not B
    cls = "class {0}:\n    def __nonzero__(self):\n        return True\n\n    __bool__ = __nonzero__  # python 3\n\n"
    text, p = changed_in_turn("".join(cls.format(name) for name in "ABC"),
                              [("    def ", "__nonzero__", "__bool__"),
                               ("return True\n", "\n    __bool__ = __nonzero__  # python 3\n", "")])
    assert p is not None and (text[p.start:p.end], p.text) == ("__nonzero__", "__bool__")
    assert text.index("class B") < p.start < text.index("__bool__ = __nonzero__")


def test_a_change_that_names_its_places_goes_on_after_an_edit_made_between():
    # `: TypeAlias` given to one alias, then `TypeAlias` imported at the top (another change, made once): the user
    # goes on marking aliases, so the next alias is proposed
    before = ("from typing import Union\n\nIntOrStr = Union[int, str]\nLIMIT = 10\nPair = tuple[int, int]\n\n\n"
              "def f():\n    return LIMIT\n")
    text, p = changed_in_turn(before, [("IntOrStr", "", ": TypeAlias"), ("import Union", "", ", TypeAlias")])
    assert p is not None and text[:p.start] + p.text + text[p.end:] == text.replace("Pair =", "Pair: TypeAlias =")
    # a change of no such kind, set aside the same way, is not: a number changed once says nothing of the next
    text, p = changed_in_turn(before, [("LIMIT = ", "10", "20"), ("import Union", "", ", TypeAlias")])
    assert p is None
