"""Globs in linear time (daemon/runtime/globs.py): the same answers as the regular expressions they replace, on
random globs and paths, and answers at all on the globs that froze the server (#41)."""
from __future__ import annotations

import random
import re

import pytest

from tabd.daemon.runtime.exclusion import Exclusion, excluding_rule, Rule
from tabd.daemon.runtime.globs import (MAX_ALTERNATIVES, MAX_BRACE_DEPTH, MAX_GLOB_CHARS, Automaton, GlobError,
                                       parse_glob)


def reference_regex(glob: str) -> str:
    """The regular expression a glob was before (#41): what the automaton must agree with."""
    out: list[str] = []
    braces = 0
    i, n = 0, len(glob)
    while i < n:
        ch = glob[i]
        if ch == "*":
            if glob.startswith("**", i):
                i += 2
                if glob.startswith("/", i):
                    out.append("(?:.*/)?")
                    i += 1
                else:
                    out.append(".*")
                continue
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            end = glob.find("]", i + 2 if glob.startswith(("[!", "[^"), i) else i + 1)
            body = glob[i + 1:end]
            negate = body[:1] in ("!", "^")
            body = body[1:] if negate else body
            out.append(("[^/" if negate else "[") + body.replace("\\", "\\\\").replace("[", "\\[") + "]")
            i = end
        elif ch == "{":
            braces += 1
            out.append("(?:")
        elif ch == "}":
            braces -= 1
            out.append(")")
        elif ch == "," and braces:
            out.append("|")
        elif ch == "\\":
            i += 1
            out.append(re.escape(glob[i]))
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def matches(glob: str, text: str) -> bool:
    return bool(Automaton([parse_glob(glob)]).run(text.lower())[0])


PIECES = ["a", "b", "/", "*", "**", "**/", "?", "[ab]", "[!a]", "{a,b/}", "{,a*}", "A", ".", "\\*"]
TEXT = "ab/.*A"


def test_random_globs_agree_with_the_regular_expressions_they_replace():
    rng = random.Random(41)
    checked = 0
    for _ in range(1500):
        glob = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 6)))
        regex = re.compile(reference_regex(glob), re.IGNORECASE | re.DOTALL)
        automaton = Automaton([parse_glob(glob)])
        for _ in range(12):
            text = "".join(rng.choice(TEXT) for _ in range(rng.randint(0, 9)))
            assert bool(automaton.run(text.lower())[0]) == bool(regex.fullmatch(text)), (glob, text)
            checked += 1
    assert checked == 18000


def test_runs_of_like_characters_agree_with_the_regular_expressions():
    """The automaton skips a character whose step would change nothing; runs of one character test the skip."""
    rng = random.Random(4141)
    for _ in range(1500):
        glob = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 7)))
        regex = re.compile(reference_regex(glob), re.IGNORECASE | re.DOTALL)
        automaton = Automaton([parse_glob(glob)])
        for _ in range(8):
            text = "".join(rng.choice("aab//.*A") * rng.randint(1, 4) for _ in range(rng.randint(0, 8)))
            assert bool(automaton.run(text.lower())[0]) == bool(regex.fullmatch(text)), (glob, text)


def test_a_suffix_run_in_the_same_pass_agrees_with_a_run_of_its_own():
    rng = random.Random(7)
    for _ in range(500):
        glob = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 5)))
        automaton = Automaton([parse_glob(glob)])
        text = "".join(rng.choice(TEXT) for _ in range(rng.randint(0, 9)))
        at = rng.randint(0, len(text))
        both = bool(automaton.run(text, at)[0])
        assert both == bool(automaton.run(text)[0] or automaton.run(text[at:])[0]), (glob, text, at)


def test_several_globs_in_one_automaton_answer_each_for_itself():
    globs = ["*.py", "src/**", "{a,b}?c", "**/x/*"]
    automaton = Automaton(parse_glob(g) for g in globs)
    for text in ["m.py", "src/a/b.py", "abc", "q/x/y", "x/y", "zz"]:
        assert [bool(h) for h in automaton.run(text)] == [matches(g, text) for g in globs], text


@pytest.mark.parametrize("glob,text", [
    ("**/" * 20 + "*a", "/".join(["d"] * 10) + "/b"),  # backtracked for over 10 s
    ("*a" * 7 + "b", "a" * 100),  # likewise
    ("**/" * 6 + "*a", "/".join(["d"] * 40) + "/b"),  # 1.35 s per didOpen
    ("*a*a*a*a*a*a*a*a*a*a*ab", "a" * 4000),
    ("{*a,*b}" * 6 + "c", "ab" * 2000),
    ("**a**a**a**a**a**ab", "a/" * 2000),
])
def test_pathological_globs_are_answered(glob, text):
    assert not matches(glob, text)
    assert matches(glob, text[:-1] + ("b" if glob.endswith("b") else "c" if glob.endswith("c") else "a"))


@pytest.mark.parametrize("glob,why", [
    ("[z-a]", "does not parse"),  # re.error escaped as an internal error and disabled the session
    ("{" * 500 + "a" + "}" * 500, "nested deeper"),  # 900 of them raised RecursionError, likewise
    ("{a,b}" * 7, "alternatives"),
    ("a" * (MAX_GLOB_CHARS + 1), "longer than"),
])
def test_globs_past_the_bounds_are_glob_errors(glob, why):
    with pytest.raises(GlobError, match=why):
        parse_glob(glob)
    exclusion = Exclusion([glob, "*.ok"], use_git=False)
    assert len(exclusion.problems) == 1 and "ignored" in exclusion.problems[0] and len(exclusion.problems[0]) < 300
    assert exclusion.why("/w/x.ok", ["/w"]).startswith("*.ok")
    assert MAX_BRACE_DEPTH < 500 and 2 ** 7 > MAX_ALTERNATIVES


def test_include_lets_an_excluded_folder_back_in_but_never_a_secret():
    roots = ["/home/me/project"]
    exclusion = Exclusion(["vendor", "scratch/**"], use_git=False, include=["vendor/mylib/**", "scratch/*.py", "**/.env"])
    assert exclusion.rule("/home/me/project/vendor/other/x.py", roots) == Rule("exclude", "vendor")
    assert exclusion.rule("/home/me/project/vendor/mylib/x.py", roots) is None
    assert exclusion.rule("/home/me/project/scratch/try.py", roots) is None
    assert exclusion.rule("/home/me/project/scratch/notes.md", roots) == Rule("exclude", "scratch/**")
    # the deny list is not the user's to undo by a glob that happens to cover a secret
    assert exclusion.rule("/home/me/project/vendor/mylib/.env", roots) == Rule("default", ".env*")
    assert exclusion.rule("/home/me/project/scratch/secret.py", roots) == Rule("default", "*secret*")
    assert str(excluding_rule("/home/me/project/.env", roots, use_git=False)) == ".env* (the default deny list)"
    assert excluding_rule("/home/me/project/app.py", roots, exclude=["*.py"], use_git=False) == Rule("exclude", "*.py")


def test_a_path_longer_than_any_file_has_is_excluded():
    exclusion = Exclusion(["**/deep/*.py"], use_git=False)
    assert exclusion.rule("/w/" + "d/" * 3000 + "x.py", ["/w"]) == Rule("length")  # past PATH_MAX: no file's path
    assert exclusion.rule("/w/" + "d/" * 2000 + "deep/x.py", ["/w"]) == Rule("exclude", "**/deep/*.py")
    assert exclusion.rule("/w/" + "d/" * 2000 + "x.py", ["/w"]) is None
