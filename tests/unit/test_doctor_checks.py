"""`tabd doctor`'s verdicts from what it saw: a daemon that cannot import part of tabd (a wheel built without a
package) is told to reinstall; one that lacks a dependency is told which."""
from __future__ import annotations

from tabd.daemon.commands.doctor import check_daemon

CMD = ["python", "-m", "tabd.daemon", "serve"]
TRACE = "Traceback (most recent call last):\n  File \"x\", line 1\n{error}\n"


def test_a_daemon_missing_one_of_its_own_modules_is_told_to_reinstall():
    stderr = TRACE.format(error="ModuleNotFoundError: No module named 'tabd.daemon.edits'")
    check = check_daemon({"started": False, "error": "ConnectionGone", "stderr": stderr}, CMD)
    assert check.ok is False
    assert "ModuleNotFoundError: No module named 'tabd.daemon.edits'" in check.detail
    assert check.fix.startswith("this install of tabd lacks tabd.daemon.edits")
    assert "pipx install --force" in check.fix


def test_a_daemon_missing_a_dependency_names_it():
    stderr = TRACE.format(error="ModuleNotFoundError: No module named 'pygls'")
    check = check_daemon({"started": False, "stderr": stderr}, CMD)
    assert check.ok is False and "a dependency is missing (pygls)" in check.fix


def test_a_daemon_that_answered_passes_with_its_times():
    check = check_daemon({"started": True, "answered": True, "initialize_ms": 900, "first_ms": 30}, CMD)
    assert check.ok is True and check.figures == {"initialize_ms": 900, "first_ms": 30}
    assert check.detail.startswith("`tabd serve` answered initialize in 900 ms")
