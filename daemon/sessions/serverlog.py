"""The server child's JSONL log, read after a replay: the prompt reuse of each keystroke request that ran the model.

`tabd serve --log` writes one `completion` event per answer with `origin` (which
layer had it), `after_accept`, and the model's `prefill_tokens` (prompt tokens
run) and `reused_tokens` (prompt tokens whose keys and values were kept). A
keystroke request that ran the model is `origin == "model"` and not after an
accept. Replay gives the child a log of its own when the flags name none, and
reads what was appended to it during the run.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence


@dataclass(frozen=True)
class ModelRun:
    reused_tokens: int
    prefill_tokens: int

    @property
    def reuse(self) -> float:
        total = self.reused_tokens + self.prefill_tokens
        return self.reused_tokens / total if total else 0.0


def log_in(server_args: Sequence[str]) -> str | None:
    """The --log FILE among `tabd serve` flags (the last one wins, as argparse has it), or None."""
    found = None
    for n, flag in enumerate(server_args):
        if flag == "--log" and n + 1 < len(server_args):
            found = server_args[n + 1]
        elif flag.startswith("--log="):
            found = flag[len("--log="):]
    return found


def size_of(path: str) -> int:
    """Where the run's lines will start: the log appends."""
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def keystroke_runs(path: str, start: int = 0) -> list[ModelRun]:
    """The keystroke requests that ran the model, in the log from byte `start` on (none when there is no log)."""
    try:
        with open(Path(path), "rb") as fh:
            fh.seek(start)
            data = fh.read()
    except OSError:
        return []
    runs = []
    for line in data.decode("utf-8", "replace").splitlines():
        try:
            e = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn line from a killed server
        if not isinstance(e, dict) or e.get("event") != "completion" or e.get("origin") != "model" or e.get("after_accept"):
            continue
        reused, prefill = e.get("reused_tokens"), e.get("prefill_tokens")
        if isinstance(reused, int) and isinstance(prefill, int) and reused + prefill > 0:
            runs.append(ModelRun(reused, prefill))
    return runs
