"""`tabd bench quality` and `tabd replay --accept`: the Tab user counts whole accepts only.

The engine here is the copy baseline (`--backend copy`), which is deterministic
and needs no model: on a file that repeats itself it suggests exactly what is
typed next, so both users are sure to accept, whatever any model writes.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tabd.daemon.sessions.replayer import acceptable
from tabd.predictor.text.lookup import copy_suggestion

REPEATS = "".join(f"def handler_{i}(request):\n    value = request.get('key')\n    return value\n\n\n"
                  for i in range(12))


def test_copy_suggestion_continues_the_last_occurrence_to_the_end_of_its_line():
    prefix = "x = compute(alpha, beta)\ny = 2\nz = compute(al"
    assert copy_suggestion(prefix) == "pha, beta)"
    assert copy_suggestion("nothing repeats here") == ""
    assert copy_suggestion("abc\nabc\n") == ""  # what follows the match is only a line break


def test_tab_user_takes_whole_suggestions_only():
    ahead, boundaries = "value = 1\n", {i: i for i in range(1, 11)}
    assert acceptable("value = 1", ahead, boundaries, words=False) == (9, False)
    assert acceptable("value = 2", ahead, boundaries, words=False) == (0, False)
    assert acceptable("value = 2", ahead, boundaries, words=True) == (7, True)  # "value =" matches


@pytest.mark.slow
def test_bench_quality_json_reports_both_users_and_the_tab_user_only_from_whole_accepts(tmp_path):
    src = tmp_path / "repeats.py"
    src.write_text(REPEATS)
    cmd = [sys.executable, "-m", "tabd.daemon", "bench", "quality", str(src), "--json", "--backend", "copy",
           "--quality-spans", "2", "--quality-max-chars", "120", "--quality-cuts", "3", "--quality-no-baseline"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    q = json.loads(out.stdout)["quality"]
    for user in ("tab", "words"):
        for key in ("keystrokes_saved_share", "acceptance_rate", "chars_per_accept", "shown_per_100_keystrokes",
                    "after_accept_p50_ms", "after_accept_hit_rate"):
            assert key in q[user], (user, key)
    tab, words = q["tab"], q["words"]
    assert tab["partial_accepts"] == 0 and tab["full_accepts"] == tab["accepted"] > 0
    assert tab["acceptance_rate"] == round(tab["accepted"] / tab["shown"], 4)
    assert tab["keystrokes_saved_share"] > 0
    assert words["accepted"] >= words["full_accepts"]
    for key in ("next_line_exact", "rest_of_line_exact", "edit_similarity", "gating"):
        assert key in q
    assert all({"precision", "coverage"} <= set(row) for row in q["gating"])


@pytest.mark.slow
def test_replay_accept_tab_json_adds_full_and_partial_counts(tmp_path):
    src = tmp_path / "repeats.py"
    src.write_text(REPEATS)
    session = tmp_path / "s.jsonl"
    made = subprocess.run([sys.executable, "-m", "tabd.daemon", "session", "from-file", str(src), "-o", str(session),
                           "--spans", "2", "--seed", "3"], capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    results = {}
    for user in ("tab", "words"):
        out = subprocess.run([sys.executable, "-m", "tabd.daemon", "replay", str(session), "--json", "--speed", "0",
                              "--backend", "copy", "--accept", user, "--no-progress"],
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        results[user] = json.loads(out.stdout)
    tab = results["tab"]
    assert {"full_accepts", "partial_accepts", "accepted_chars_full"} <= set(tab)
    assert tab["partial_accepts"] == 0 and tab["full_accepts"] > 0
    assert tab["accepted_chars_full"] == tab["accepted_chars"]
    assert results["words"]["accepted_chars"] >= results["words"]["accepted_chars_full"]


@pytest.mark.slow
def test_bench_quality_measures_a_file_that_git_ignores_where_it_lies(tmp_path):
    """The README's third-party run types files under a .venv's site-packages, which git ignores in a repository:
    the daemon keeps such a file away from the model (content exclusion), so the bench types a copy elsewhere."""
    repo = tmp_path / "repo"
    (repo / ".venv" / "pkg").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / ".gitignore").write_text(".venv/\n")
    src = repo / ".venv" / "pkg" / "repeats.py"
    src.write_text(REPEATS)
    assert subprocess.run(["git", "-C", str(repo), "check-ignore", "-q", str(src)]).returncode == 0
    cmd = [sys.executable, "-m", "tabd.daemon", "bench", "quality", str(src), "--json", "--backend", "copy",
           "--quality-spans", "2", "--quality-max-chars", "120", "--quality-no-baseline", "--quality-no-model-figures"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    q = json.loads(out.stdout)["quality"]
    assert q["files"] == ["repeats.py"]
    assert q["tab"]["shown"] > 0 and q["tab"]["accepted"] > 0
