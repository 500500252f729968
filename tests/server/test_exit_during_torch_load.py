"""A process that exits while its hand-over thread loads torch exits cleanly (issue 43: the first `tabd complete`
with the default engine, on a loaded machine, died with a C++ abort in torch's operator registration).

The hand-over imports predictor/engine/swap.py off the model thread, which loads torch's libraries with the GIL
released; `tabd complete` exits once it has answered, and on a loaded machine the answer comes just as the
hand-over starts. Each child here starts that import in a daemon thread and exits after a delay that lands inside
the load; before the fix most of them died (SIGABRT with torch::jit::ErrorReport, double free, SIGSEGV).
"""
from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

CHILD = """
import sys, threading, time
threading.Thread(target=lambda: __import__("tabd.predictor.engine.swap"), daemon=True).start()
time.sleep(float(sys.argv[1]))
sys.exit(0)
"""


@pytest.mark.parametrize("delay", [0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4])
def test_exit_during_the_hand_over_import_of_torch_is_clean(delay: float) -> None:
    r = subprocess.run([sys.executable, "-c", CHILD, str(delay)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"exit code {r.returncode}: {r.stderr[-600:]}"
    assert "terminate called" not in r.stderr and "corruption" not in r.stderr
