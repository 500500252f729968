"""Content exclusion's rules (daemon/runtime/exclusion.py), the switches' checks (daemon/runtime/controls.py), and
how a recorded session reads an excluded document back (daemon/sessions/format.py)."""
from __future__ import annotations

import asyncio
import json
import shutil
import subprocess

import pytest

from tabd.daemon.runtime.exclusion import Exclusion, GlobError, compile_globs, git_ignores, parse_glob
from tabd.daemon.runtime.controls import EVERYWHERE, Controls, Switch, read_switch
from tabd.daemon.sessions.format import parse_session

ROOTS = ["/home/me/project"]


def why(path: str, *globs: str) -> str:
    return Exclusion(globs, use_git=False).why(path, ROOTS)


@pytest.mark.parametrize("path", [
    "/home/me/project/.env", "/home/me/project/.env.local", "/home/me/project/api/.envrc",
    "/home/me/project/certs/server.pem", "/home/me/project/tls.key", "/home/me/.ssh/id_rsa",
    "/home/me/.ssh/id_rsa.pub", "/home/me/project/credentials.json", "/home/me/project/aws_CREDENTIALS",
    "/home/me/project/config/Secrets.yaml", "/home/me/project/secrets/db.py", "/elsewhere/client_secret.txt",
])
def test_the_default_deny_list(path):
    assert "the default deny list" in why(path)


@pytest.mark.parametrize("path", [
    "/home/me/project/app.py", "/home/me/project/environment.py", "/home/me/project/keyboard.py",
    "/home/me/project/src/monkey.ts", "/home/me/secret-work/project/app.py",  # above the workspace folder: not asked
])
def test_ordinary_files_are_not_excluded(path):
    root = "/home/me/secret-work/project" if "secret-work" in path else ROOTS[0]
    assert Exclusion(use_git=False).why(path, [root]) == ""


def test_user_globs_on_a_part_or_on_the_whole_path():
    assert "exclude" in why("/home/me/project/a/b/generated.py", "generated.*")
    assert "exclude" in why("/home/me/project/vendor/x/lib.js", "vendor")  # a folder: everything in it
    assert "exclude" in why("/home/me/project/data/deep/x.csv", "data/**/*.csv")
    assert "exclude" in why("/home/me/project/data/x.csv", "data/**/*.csv")  # ** spans no folder too
    assert why("/home/me/project/other/data/x.csv", "data/*.csv") == ""  # a / glob is on the whole relative path
    assert "exclude" in why("/home/me/project/x.tf", "*.{tf,tfvars}")
    assert "exclude" in why("/home/me/project/x7.py", "x[0-9].py")
    assert why("/home/me/project/xa.py", "x[!a].py") == ""
    assert "exclude" in why("/srv/private/notes.md", "/srv/private/**")  # an absolute glob


@pytest.mark.parametrize("glob", ["", "[abc", "x[]", "{a,b", "a}", "trailing\\"])
def test_a_glob_that_does_not_parse_is_reported_and_left_out(glob):
    with pytest.raises(GlobError):
        parse_glob(glob)
    good, problems = compile_globs([glob, "*.ok"], "exclude")
    assert [g.text for g in good] == ["*.ok"] and len(problems) == 1 and "ignored" in problems[0]
    assert Exclusion([glob], use_git=False).problems == problems


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_ignored_files_are_excluded_and_no_repository_is_not(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / ".gitignore").write_text("build/\n*.log\n")
    assert git_ignores(str(repo / "build" / "out.py")) and git_ignores(str(repo / "run.log"))
    assert not git_ignores(str(repo / "main.py"))
    assert Exclusion().why(str(repo / "run.log"), [str(repo)]) == "git ignores it"
    assert not git_ignores(str(tmp_path / "loose.log"))  # not in a work tree: git is not even asked
    assert not git_ignores("untitled-1")  # not a file on disk


def test_switches_are_checked_in_words():
    assert read_switch({"enabled": False, "uri": "file:///a.py", "minutes": 0.5}) == Switch(False, "file:///a.py", 0.5)
    assert read_switch({"enabled": True}) == Switch(True, EVERYWHERE, 0.0)
    assert read_switch({"enabled": True, "minutes": 3}) == Switch(True, EVERYWHERE, 0.0)  # nothing to snooze
    for bad in ({"enabled": False, "minutes": 0}, {"enabled": False, "minutes": -1}, {"enabled": False,
                "minutes": float("inf")}, {"enabled": False, "minutes": True}, {"enabled": 1}, {}, {"enabled": True,
                "uri": ""}, None, [True]):
        problem = read_switch(bad)
        assert isinstance(problem, str) and problem.startswith("tabd/setEnabled") and "ignored" in problem, bad


async def test_a_snooze_switches_back_on_by_itself_and_a_newer_switch_replaces_it():
    changes: list[int] = []
    controls = Controls(lambda: changes.append(1))
    controls.set(Switch(False, "file:///a.py"))
    assert not controls.enabled("file:///a.py") and controls.enabled("file:///b.py")
    controls.set(Switch(False, EVERYWHERE, minutes=0.001))  # 60 ms
    assert not controls.enabled("file:///b.py") and controls.summary() == {"enabled": False, "off": 1, "snoozed": 1}
    for _ in range(200):
        if controls.enabled("file:///b.py"):
            break
        await asyncio.sleep(0.01)
    assert controls.enabled("file:///b.py") and not controls.enabled("file:///a.py") and len(changes) == 3
    controls.set(Switch(False, EVERYWHERE, minutes=0.001))
    controls.set(Switch(False, EVERYWHERE))  # off until switched on: the snooze's timer is gone
    await asyncio.sleep(0.15)
    assert not controls.enabled("file:///b.py") and controls.summary()["snoozed"] == 0
    controls.close()


def test_a_recorded_excluded_document_is_left_out_of_the_session():
    lines = [{"tabd_session": 1, "language": "python"},
             {"t": 0.0, "op": "open", "uri": "file:///w/.env", "language": "dotenv", "excluded": True},
             {"t": 0.1, "op": "open", "uri": "file:///w/a.py", "language": "python", "text": "x = 1\n"},
             {"t": 0.2, "op": "move", "uri": "file:///w/.env", "position": {"line": 0, "character": 3}},
             {"t": 0.3, "op": "change", "uri": "file:///w/a.py", "range": {"start": {"line": 1, "character": 0},
                                                                          "end": {"line": 1, "character": 0}},
              "text": "y"},
             {"t": 0.4, "op": "close", "uri": "file:///w/.env"}]
    session = parse_session([json.dumps(line) + "\n" for line in lines])
    assert [(e["op"], e["uri"]) for e in session.events] == [("open", "file:///w/a.py"), ("change", "file:///w/a.py")]
    assert len(session.warnings) == 1 and "excluded" in session.warnings[0]
