"""`tabd bench fleet`: several daemons share one real engine (`tabd serve-model`), with speculation on and off in the
same run; each user's figures come from its own replay and its own daemon's tabd/stats."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_a_fleet_of_two_shares_one_engine_with_and_without_speculation():
    out = subprocess.run([sys.executable, "-m", "tabd.daemon", "bench", "fleet", "--users", "2", "--fleet-seconds", "4",
                          "--fleet-speed", "3", "--json"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    fleet = json.loads(out.stdout.strip().splitlines()[-1])["fleet"]
    on, off = fleet["speculation"], fleet["no_speculation"]
    assert len(on["users"]) == len(off["users"]) == 2
    assert all(u["keystrokes"] > 0 and u["foreground_per_keystroke"] > 0 for u in on["users"] + off["users"])
    assert all(u["prefetch_per_keystroke"] == 0 for u in off["users"])  # speculation off: no prefetch at all
    assert any(u["prefetch_per_keystroke"] > 0 for u in on["users"])
    assert "serve_model" in on["engine"] and fleet["slowest_model_p50_ratio"] is not None


def test_a_fleet_of_nobody_is_refused():
    out = subprocess.run([sys.executable, "-m", "tabd.daemon", "bench", "fleet", "--users", "0", "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "--users must be at least 1" in out.stderr
