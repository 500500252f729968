"""`tabd bench fleet`: several daemons share one real engine (`tabd serve-model`), with speculation on and off in the
same run; each user's figures come from its own replay and its own daemon's tabd/stats. `--users 1,2` sweeps N in
one run, and the dashboard plots the sweep's own output (test_fleet_dashboard.py checks the plot in detail)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tabd.daemon.cli import main as tabd_main
from test_fleet_dashboard import expected_points, page_points  # noqa: E402

MODES = ("speculation", "no_speculation")


@pytest.mark.slow
def test_a_fleet_of_two_shares_one_engine_with_and_without_speculation():
    # at human speed: a shared engine's Tab prefetch waits for the user to pause on a suggestion (100 ms), which a
    # user replayed three times faster (83 ms before each Tab, 40 ms between keys) never does
    out = subprocess.run([sys.executable, "-m", "tabd.daemon", "bench", "fleet", "--users", "2", "--fleet-seconds", "6",
                          "--json"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    fleet = json.loads(out.stdout.strip().splitlines()[-1])["fleet"]
    on, off = fleet["speculation"], fleet["no_speculation"]
    assert len(on["users"]) == len(off["users"]) == 2
    assert all(u["keystrokes"] > 0 and u["foreground_per_keystroke"] > 0 for u in on["users"] + off["users"])
    assert all(u["prefetch_per_keystroke"] == 0 for u in off["users"])  # speculation off: no prefetch at all
    assert any(u["prefetch_per_keystroke"] > 0 for u in on["users"])
    # with nothing computed ahead, no Tab is answered from memory or from a prefetch still running
    assert all(not {"cache", "inflight"} & set(u["after_accept_sources"]) for u in off["users"])
    assert "serve_model" in on["engine"] and fleet["slowest_model_p50_ratio"] is not None


@pytest.mark.slow
def test_a_sweep_over_users_reports_each_n_and_the_dashboard_plots_it(tmp_path):
    out = subprocess.run([sys.executable, "-m", "tabd.daemon", "bench", "fleet", "--users", "2,1", "--fleet-seconds",
                          "6", "--fleet-speed", "3", "--json"], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    last = out.stdout.strip().splitlines()[-1]
    fleet = json.loads(last)["fleet"]
    sweep = fleet["sweep"]
    assert [run["users"] for run in sweep] == [1, 2]  # ascending, whatever order they were given in
    for run in sweep:
        assert set(run) == {"users", "engine_url", "order", "speculation", "no_speculation", "slowest_model_p50_ratio",
                            "slowest_latency_p50_ratio"}
        assert run["order"] == [list(MODES)]  # one round: on, then off
        n = run["users"]
        assert len(run["speculation"]["users"]) == len(run["no_speculation"]["users"]) == n
        assert all(u["prefetch_per_keystroke"] == 0 for u in run["no_speculation"]["users"])
        assert "serve_model" in run["speculation"]["engine"]
    typed = [u["keystrokes"] for run in sweep for m in ("speculation", "no_speculation") for u in run[m]["users"]]
    assert sum(typed) > 0, typed  # (how many each user gets through in a few seconds is the machine's load)
    # the top level is the largest N's single-N report, as `--users 2` alone prints it
    assert {k: v for k, v in fleet.items() if k != "sweep"} == sweep[-1]

    path = tmp_path / "fleet.json"
    path.write_text(last + "\n")
    page = tmp_path / "fleet.html"
    assert tabd_main(["dashboard", "--fleet", str(path), "-o", str(page)]) == 0
    points = page_points(page).points
    assert points == expected_points(sweep)
    engine_runs = {(run["users"], "on" if m == "speculation" else "off") for run in sweep for m in MODES
                   if any(u["model_requests"] > 0 for u in run[m]["users"])}
    assert {(n, s.split("-")[0]) for s, per_n in points.items() if s.endswith("p50") for n in per_n} == engine_runs


@pytest.mark.slow
def test_rounds_alternate_the_order_and_pool_each_users_figures():
    """--fleet-rounds 2: on then off, then off then on (the second mode finds the engine warmed by the first); each
    user's figures are over both rounds."""
    out = subprocess.run([sys.executable, "-m", "tabd.daemon", "bench", "fleet", "--users", "1", "--fleet-seconds", "4",
                          "--fleet-speed", "3", "--fleet-rounds", "2", "--json"], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    fleet = json.loads(out.stdout.strip().splitlines()[-1])["fleet"]
    assert fleet["order"] == [list(MODES), list(MODES[::-1])]
    for mode in MODES:
        (user,) = fleet[mode]["users"]
        assert user["rounds"] == 2 and user["keystrokes"] > 0 and "raw" not in user
    assert fleet["no_speculation"]["users"][0]["prefetch_per_keystroke"] == 0


def test_pooled_rounds_take_percentiles_over_every_latency_and_sum_the_counts():
    from tabd.daemon.bench.fleet import pooled

    def round_of(model_ms, hits, requests, keys, prefetch):
        return {"after_accept_hit_rate": hits / requests, "after_accept_requests": requests,
                "after_accept_sources": {"cache": hits, "model": requests - hits}, "after_accept_empty": 1,
                "model_requests": len(model_ms),
                "keystrokes": keys, "saved_share": 0.5, "model_p50_ms": 0.0, "prefetch_started": prefetch,
                "foreground_started": keys, "raw": {"all_ms": model_ms, "model_ms": model_ms, "after_accept_ms": []}}

    user = pooled([round_of([10.0, 20.0, 30.0], 1, 2, 10, 5), round_of([100.0, 200.0], 3, 3, 30, 1)])
    assert user["model_p50_ms"] == 30.0  # the middle of all five, not a mean of the two rounds' p50s (20, 150)
    assert user["model_requests"] == 5 and user["keystrokes"] == 40 and user["rounds"] == 2
    assert user["after_accept_requests"] == 5 and user["after_accept_hit_rate"] == 0.8
    assert user["after_accept_sources"] == {"cache": 4, "model": 1} and user["after_accept_empty"] == 2
    assert user["prefetch_per_keystroke"] == 0.15 and "raw" not in user


@pytest.mark.parametrize("rounds", ["0", "21", "two"])
def test_bad_round_counts_are_usage_errors(rounds):
    out = subprocess.run([sys.executable, "-m", "tabd.daemon", "bench", "fleet", "--fleet-rounds", rounds, "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "--fleet-rounds" in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_a_fleet_of_nobody_is_refused():
    out = subprocess.run([sys.executable, "-m", "tabd.daemon", "bench", "fleet", "--users", "0", "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "--users must be at least 1" in out.stderr


@pytest.mark.parametrize("users, says", [
    ("a,2", "'a' is not a whole number"),
    ("1,,2", "empty item"),
    ("", "empty item"),
    ("1,0", "--users must be at least 1"),
    ("2,2", "given twice"),
    ("1.5", "not a whole number"),
])
def test_bad_user_counts_are_usage_errors(users, says):
    out = subprocess.run([sys.executable, "-m", "tabd.daemon", "bench", "fleet", "--users", users, "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and says in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert out.stdout == ""
