"""`make demo` runs `tabd demo`: on the shipped model, typing as VS Code does, it shows chains of a suggestion, Tab and
the next suggestion from memory, and no step of a chain it shows is empty."""
from __future__ import annotations

import ast
import re
import subprocess
import sys

STEP = re.compile(r"^    (suggestion|Tab \d+, next)\s+([\d.]+) ms\s+\((\w+)\s*\) (.*)$")


def test_the_demo_shows_chains_of_suggestion_tab_and_the_next_from_memory():
    out = subprocess.run([sys.executable, "-m", "tabd.daemon", "demo", "--no-replay"], capture_output=True, text=True,
                         timeout=240)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    chains: list[list[tuple[str, str, str]]] = []
    for line in out.stdout.splitlines():
        if "as VS Code types it" in line:
            chains.append([])
        m = STEP.match(line)
        if m:
            chains[-1].append((m.group(1), m.group(3), ast.literal_eval(m.group(4))))
    assert len(chains) >= 2, out.stdout
    for chain in chains:
        assert chain[0][0] == "suggestion" and len(chain) >= 2, out.stdout
        assert all(text.strip() for _, _, text in chain), f"an empty step: {chain}"
        assert chain[0][1] == "model" and chain[1][1] in ("cache", "typed"), chain
    assert "<tabd_" not in out.stdout  # no special token shown as text
