"""A long run keeps memory bounded: `tabd bench soak` reports the server's RSS and a cache within its byte bound.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_bench_soak_reports_rss_and_a_bounded_cache():
    r = subprocess.run([sys.executable, "-m", "tabd.daemon", "bench", "soak", "--requests", "120", "--soak-max-new-tokens", "4", "--json"],
                       capture_output=True, text=True, timeout=400, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr[-2000:]
    soak = json.loads(r.stdout.strip().splitlines()[-1])["soak"]
    assert soak["requests"] == 120 and soak["exit_code"] == 0
    assert {"rss_start_mb", "rss_end_mb", "rss_growth_pct", "cache_bytes_max", "cache_bytes_bound"} <= set(soak)
    assert 0 < soak["rss_start_mb"] and 0 < soak["rss_end_mb"]
    assert 0 <= soak["cache_bytes_max"] <= soak["cache_bytes_bound"]
