"""Commands that run no model import neither torch nor transformers: `tabd --help` answers at once."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("torch", "transformers", "safetensors", "tokenizers")
PROBE = """
import json, sys
from tabd.daemon.cli import main
try:
    code = main(json.loads(sys.argv[1]))
except SystemExit as exc:
    code = exc.code
heavy = sorted(m for m in {heavy!r} if m in sys.modules)
print(json.dumps({{"code": code, "heavy": heavy}}))
""".format(heavy=HEAVY)


def run_cli(args: list[str], cwd) -> dict:
    proc = subprocess.run([sys.executable, "-c", PROBE, json.dumps(args)], capture_output=True, text=True, timeout=120,
                          cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


COMMANDS = [
    ["--help"],
    *[[name, "--help"] for name in ("serve", "complete", "demo", "session", "replay", "dashboard", "bench", "serve-model")],
    ["serve", "--tcp", "not-a-port"],  # a bad flag is reported before any model is loaded
]


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_commands_that_run_no_model_import_no_torch(args, tmp_path):
    result = run_cli(args, tmp_path)
    assert result["heavy"] == [], f"tabd {' '.join(args)} imported {result['heavy']}"


def test_session_and_dashboard_import_no_torch(tmp_path):
    src = tmp_path / "a.py"
    src.write_text("def f(x):\n    return x + 1\n")
    session = tmp_path / "s.jsonl"
    result = run_cli(["session", "from-file", str(src), "-o", str(session)], tmp_path)
    assert result["code"] in (0, None) and session.exists() and result["heavy"] == []
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps({"ts": 1.0, "event": "completion", "source": "cache", "latency_ms": 0.4}) + "\n")
    result = run_cli(["dashboard", str(log), "-o", str(tmp_path / "r.html")], tmp_path)
    assert (tmp_path / "r.html").exists() and result["heavy"] == []
