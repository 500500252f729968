"""`tabd bench edits --edits-git` and `tabd session from-git` through a real `tabd serve` (the copy backend: quick and
deterministic), on a git history built here: a commit that renames a name at four places and then keeps editing.

The bench plays each state as copilot-lsp asks (500 ms after the last keystroke, one request); a whole-name rename is
the simplest repeated edit there is, so the server's first edit shown must be the next site at each state, the next
one must come from its memory once that is taken, and nothing may be shown once the commit's file is done."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

OLD = """def restock(count, shelf):
    shelf.add(count)
    if count > 10:
        log("big", count)
    return shelf
"""


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=T", "-c", "user.email=t@t", *args], check=True,
                   capture_output=True)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    r = tmp_path_factory.mktemp("hist") / "shop"
    r.mkdir()
    git(r, "init", "-q")
    (r / "stock.py").write_text(OLD)
    git(r, "add", "-A")
    git(r, "commit", "-q", "-m", "first")
    (r / "stock.py").write_text(OLD.replace("count", "total"))
    git(r, "commit", "-q", "-am", "rename count")
    return r


def bench(*args: str) -> tuple[dict, subprocess.CompletedProcess]:
    proc = subprocess.run([sys.executable, "-m", "tabd.daemon", "bench", "edits", *args, "--backend", "copy",
                           "--no-warmup", "--json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc


@pytest.mark.slow
def test_a_rename_is_walked_site_by_site_as_copilot_lsp_asks(repo: Path, tmp_path: Path):
    cases = tmp_path / "cases.jsonl"
    report, _ = bench("--edits-git", str(repo), "--edits-cases-out", str(cases))
    e = report["edits"]
    assert e["mode"] == "git" and e["repos"][0]["commits"] == 1 and e["cases"] == 4
    # four places: three states with a repeat due, then one with nothing left
    assert e["repeat_due"]["states"] == 3 and e["other_due"]["states"] == 0 and e["none_due"]["states"] == 1
    assert e["repeat_due"]["exact"] == 3, e
    assert e["none_due"]["shown"] == 0
    # the plain-text baseline gets a whole-name rename too (computed without the server)
    assert e["baseline"]["repeat_due"]["exact"] == 3
    # each taken edit is followed by a request; the answer comes from the server's memory
    assert e["after_accept"]["asks"] == 3 and e["after_accept"]["from_memory"] == 3
    assert e["sync_mismatches"] == 0
    assert e["latency_ms"]["answer"]["p50"] is not None
    rows = [json.loads(line) for line in cases.read_text().splitlines()]
    assert [(r["k"], r["due"], r["verdict"]) for r in rows] == [
        (1, "repeat", "exact"), (2, "repeat", "exact"), (3, "repeat", "exact"), (4, "none", "none")]
    assert rows[0]["edit"]["text"] == "total" and rows[0]["edit"]["range"]["start"]["line"] == 1


def test_a_path_that_is_no_repository_is_said(tmp_path: Path):
    proc = subprocess.run([sys.executable, "-m", "tabd.daemon", "bench", "edits", "--edits-git", str(tmp_path),
                           "--backend", "copy", "--json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "not a git repository" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_a_from_git_session_replays_through_the_server(repo: Path, tmp_path: Path):
    session = tmp_path / "s.jsonl"
    made = subprocess.run([sys.executable, "-m", "tabd.daemon", "session", "from-git", str(repo), "-o", str(session)],
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    proc = subprocess.run([sys.executable, "-m", "tabd.daemon", "replay", str(session), "--speed", "0", "--backend",
                           "copy", "--no-warmup", "--json", "--no-progress"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["sessions"] == 1 and report["requests"] > 0
    # the edit user read the session's four edits (one per place) and was offered next edits on them
    assert report["edits"]["shown"] >= 1
