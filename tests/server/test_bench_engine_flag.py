"""`tabd bench start --engine NAME` measures that engine: the engine flag reaches the `tabd serve` child the bench
spawns, as --model does (it once did not, and every engine's start figure was the default engine's)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tabd.predictor.loading.engine_names import TORCH, TRANSFORMERS

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("engine", [TORCH, TRANSFORMERS])
def test_bench_start_runs_the_engine_it_is_given(fixture_model, engine: str):
    r = subprocess.run([sys.executable, "-m", "tabd.daemon", "bench", "start", "--start-rounds", "1", "--json",
                        "--model", fixture_model, "--engine", engine], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    start = json.loads(r.stdout)["start"]
    # every request up to the first suggestion was computed by the engine asked for, none by the default
    assert start["served_by"] == [{engine: start["requests_until_first"][0]}], start
