"""`make demo` runs `tabd demo`: on the shipped model it must show a suggestion, take it with Tab, and serve the next one."""
from __future__ import annotations

import subprocess
import sys


def test_the_demo_shows_a_suggestion_takes_it_and_serves_the_next_from_memory():
    out = subprocess.run([sys.executable, "-m", "tabd.daemon", "demo", "--no-replay"], capture_output=True, text=True,
                         timeout=240)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "Tab, then next" in out.stdout and "faster" in out.stdout
    assert "<tabd_" not in out.stdout  # no special token shown as text
