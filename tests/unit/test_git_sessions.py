"""`tabd session from-git` and the next-edit cases of `tabd bench edits --edits-git`, on small git repositories built
here with `git init` (nothing fetched): which commits and files are read, the places a person edits, the session that
types them, what is due at each state, and the plain-text baseline."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tabd.daemon.sessions.diff_typist import final_text
from tabd.daemon.sessions.edit_cases import Case, baseline, cases_of, change, judge, same_change
from tabd.daemon.sessions.format import read_session
from tabd.daemon.sessions.git_history import GitError, history, places, repo_name
from tabd.daemon.sessions.hunks import hunks

OLD = """def restock(count, shelf):
    shelf.add(count)
    if count > 10:
        log("big", count)
    return shelf
"""
RENAMED = OLD.replace("count", "total")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=T", "-c", "user.email=t@t", *args],
                          check=True, capture_output=True, text=True).stdout


def commit(repo: Path, files: dict[str, str | bytes], message: str) -> str:
    for name, content in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "shop"
    r.mkdir()
    git(r, "init", "-q")
    commit(r, {"stock.py": OLD, "notes.txt": "a\n"}, "first")
    commit(r, {"stock.py": RENAMED}, "rename count")
    commit(r, {"notes.txt": "a\nb\n"}, "notes only: no source file")
    commit(r, {"stock.py": RENAMED.replace("return shelf", "return shelf.size()")}, "size")
    return r


def test_the_last_commits_that_edit_source_files_newest_first(repo: Path):
    found = history(repo, 5)
    assert [c.subject for c in found] == ["size", "rename count"]  # the notes-only and the first commit are not edits
    rename = found[1].files[0]
    assert rename.path == "stock.py" and rename.old == OLD and rename.new == RENAMED
    # each `count` is its own place: the four lines it is on
    assert len(rename.places) == 4 and all(len(p.hunks) == 1 for p in rename.places)
    assert [c.subject for c in history(repo, 1)] == ["size"]


def test_a_bare_mirror_reads_as_its_work_tree(repo: Path, tmp_path: Path):
    bare = tmp_path / "mirror" / "repo"
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(bare)], check=True)
    assert [(c.sha, [f.places for f in c.files]) for c in history(bare, 5)] == \
        [(c.sha, [f.places for f in c.files]) for c in history(repo, 5)]
    assert repo_name(bare) == "mirror" and repo_name(repo) == "shop"


def test_a_range_limits_the_commits_read(repo: Path):
    first, second = git(repo, "rev-list", "--reverse", "HEAD").split()[:2]
    assert [c.subject for c in history(repo, 5, f"{first}..{second}")] == ["rename count"]


def test_huge_commits_and_non_text_files_are_left_out(repo: Path):
    many = "".join(f"v{i} = {i}\n" for i in range(60))
    commit(repo, {"big.py": many}, "add big")
    commit(repo, {"big.py": many.replace(" = ", " == ")}, "reformat: 60 hunks")
    commit(repo, {"bin.py": b"\xff\xfe x = 1\n"}, "add binary")
    commit(repo, {"bin.py": b"\xff\xfe x = 2\n"}, "edit binary")
    assert [c.subject for c in history(repo, 2)] == ["size", "rename count"]


def test_places_join_the_hunks_of_one_line():
    old, new = "x = f(a)\ny = 1\n", "x = wrap(f(a))\ny = 2\n"
    found = places(old, hunks(old, new))
    assert [len(p.hunks) for p in found] == [2, 1]
    assert change(old, found[0]) == ("f(a)", "wrap(f(a))") or found[0].text(old).startswith("wrap(")


def test_a_directory_that_is_no_repository_is_a_clear_error(tmp_path: Path):
    with pytest.raises(GitError, match="not a git repository"):
        history(tmp_path, 3)
    with pytest.raises(GitError, match="no such directory"):
        history(tmp_path / "nope", 3)


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tabd.daemon", "session", "from-git", *args], capture_output=True,
                          text=True, timeout=120)


def test_from_git_types_each_commit_as_a_person_would(repo: Path, tmp_path: Path):
    out = tmp_path / "s.jsonl"
    proc = run_cli(str(repo), "--commits", "5", "-o", str(out), "--seed", "3")
    assert proc.returncode == 0, proc.stderr
    assert "2 commit(s)" in proc.stderr
    session = read_session(out)
    assert session.warnings == [] and session.language == "python"
    events = session.events
    opens = [e for e in events if e["op"] == "open"]
    # oldest commit first, each file opened at its old text, with its commit named
    assert [e["text"] for e in opens] == [OLD, RENAMED]
    shas = git(repo, "log", "--format=%H", "-n", "3").split()
    assert [e["commit"] for e in opens] == [shas[2], shas[0]]
    # the first file typed ends as the renamed file, one edit marked per place, a second or more between places
    first = events[:events.index(next(e for e in events if e["op"] == "close")) + 1]
    assert final_text(first, opens[0]["uri"]) == RENAMED
    marks = [e for e in first if e.get("hunk")]
    assert [m["hunk"] for m in marks] == [1, 2, 3, 4]
    for before, mark in zip(marks, marks[1:]):
        last = max(e["t"] for e in first if e["t"] < mark["t"])
        assert mark["t"] - last >= 1.0, "no human pause between places"
    assert [e["t"] for e in events] == sorted(e["t"] for e in events)
    # the same history and seed give the same session
    again = tmp_path / "again.jsonl"
    assert run_cli(str(repo), "--commits", "5", "-o", str(again), "--seed", "3").returncode == 0
    assert again.read_text() == out.read_text()


def test_from_git_on_bad_input_says_why(tmp_path: Path, repo: Path):
    proc = run_cli(str(tmp_path / "nope"), "-o", str(tmp_path / "s.jsonl"))
    assert proc.returncode == 1 and "no such directory" in proc.stderr and "Traceback" not in proc.stderr
    proc = run_cli(str(repo), "--rev", "no-such-branch", "-o", str(tmp_path / "s.jsonl"))
    assert proc.returncode == 1 and "no-such-branch" in proc.stderr and "Traceback" not in proc.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    commit(empty, {"a.txt": "x\n"}, "one")
    commit(empty, {"a.txt": "y\n"}, "two")
    proc = run_cli(str(empty), "-o", str(tmp_path / "s.jsonl"))
    assert proc.returncode == 1 and "no commit modifies a source file" in proc.stderr


# ---------------------------------------------------------------- cases


def test_what_is_due_at_each_state_of_a_rename(repo: Path):
    (file_cases,) = [g for g in cases_of("shop", history(repo, 5)) if g[0].path == "stock.py" and len(g) > 1]
    # four places: after the first rename every next one repeats it; after the last nothing is due
    assert [c.due for c in file_cases] == ["repeat", "repeat", "repeat", "none"]
    capped = cases_of("shop", history(repo, 5), max_places=3)
    assert [c.due for c in capped[0]] == ["repeat", "repeat", "repeat"]  # k stops at 3: something is still due


def test_same_change_up_to_one_name():
    assert same_change(("count", "total"), ("count", "total"))
    assert same_change(("", "  # x\n"), ("", "\t# x "))  # whitespace does not count
    assert same_change(("new_func", 't.cast("F", new_func)'), ("other", 't.cast("F", other)'))
    assert same_change(("f(start", "max(len(self) + start, 0"), ("f(stop", "max(len(self) + stop, 0"))
    assert not same_change(("count", "total"), ("count", "totals"))
    assert not same_change(("a", "b(a)"), ("c", "b(d)"))  # two names differ
    assert not same_change(("x", 'f("a")'), ("x", 'f("b")'))  # a string is not a name
    assert not same_change(("", "\n"), ("", "\n"))  # whitespace alone is no change to repeat


def test_a_rename_inside_a_word_is_the_whole_word():
    old, new = "count = 1\nprint(count)\n", "counter = 1\nprint(counter)\n"
    found = places(old, hunks(old, new))
    assert [h.text for p in found for h in p.hunks] == ["er", "er"]  # what is typed
    assert change(old, found[0]) == ("count", "counter") == change(old, found[1])


def case(old: str, new: str, k: int) -> Case:
    return Case("r", "c" * 40, "a.py", "python", old, tuple(places(old, hunks(old, new))), k)


def test_the_baseline_repeats_the_last_change_as_plain_text():
    c = case(OLD, RENAMED, 1)
    assert judge(c, baseline(c)) == "exact"
    # an insertion after the same word again
    old, new = "f(a: str)\ng(b: str)\n", "f(a: str | bytes)\ng(b: str | bytes)\n"
    assert judge(case(old, new, 1), baseline(case(old, new, 1))) == "exact"
    # a change whose text does not come again: nothing proposed
    old, new = "a = 1\nb = 2\n", "a = 10\nb = 3\n"
    assert baseline(case(old, new, 1)) is None or judge(case(old, new, 1), baseline(case(old, new, 1))) != "exact"


def test_an_edit_is_judged_by_the_document_it_leaves():
    c = case(OLD, RENAMED, 1)
    doc = c.doc()
    nxt = doc.index("count")
    assert judge(c, doc[:nxt] + "total" + doc[nxt + 5:]) == "exact"
    line = doc.index("    shelf.add(count)")  # the whole line rewritten the same way is the same edit
    assert judge(c, doc[:line] + "    shelf.add(total)" + doc[line + 20:]) == "exact"
    later = doc.index("count", nxt + 5)
    assert judge(c, doc[:later] + "total" + doc[later + 5:]) == "later"
    assert judge(c, doc.replace("shelf", "box", 1)) == "wrong"
    assert judge(c, None) == "none"


def test_cases_are_json_friendly(repo: Path):
    groups = cases_of("shop", history(repo, 5))
    assert json.dumps([[c.k, c.due] for g in groups for c in g])
