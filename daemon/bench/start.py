"""`tabd bench start`: cold start as the editor meets it, from spawning `tabd serve` to the first non-empty suggestion.

The client is a few lines of JSON-RPC over the child's pipes (no pygls here), so
what is timed is the server alone: the process start, its imports, the LSP
handshake, the model load and the first answer. The editor sends `initialize`
as soon as it spawns the server, and an inline-completion request as soon as a
document is open; so does this. Rounds run one after another; medians reported.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from tabd.daemon.bench.naive_full import SAMPLES, shared_flags
from tabd.lsp.framing import frame, read_message

URI = "file:///bench/start.py"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("start section")
    g.add_argument("--start-rounds", type=int, default=5, help="cold starts measured (default 5)")


class Child:
    """A `tabd serve` child and a blocking reader of its framed messages."""

    def __init__(self, command: list[str]) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        self.ids = 0

    def send(self, method: str, params, request: bool = True) -> int:
        msg: dict = {"jsonrpc": "2.0", "method": method, "params": params}
        if request:
            self.ids += 1
            msg["id"] = self.ids
        self.proc.stdin.write(frame(msg))
        self.proc.stdin.flush()
        return self.ids

    def read(self) -> dict:
        message = read_message(self.proc.stdout)
        if message is None:
            raise RuntimeError("tabd serve exited during the cold start")
        return message

    def answer(self, request_id: int) -> dict:
        while True:
            msg = self.read()
            if msg.get("id") == request_id and "method" not in msg:
                return msg

    def close(self) -> None:
        try:
            self.answer(self.send("shutdown", None))
            self.send("exit", None, request=False)
            self.proc.wait(timeout=10)
        except (OSError, RuntimeError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


def _positions(text: str) -> list[tuple[int, int]]:
    """Cursor positions at line ends inside function bodies: where a code model has something to say."""
    lines = text.splitlines()
    return [(i, len(line)) for i, line in enumerate(lines) if line.startswith("        ") and line.strip()][:40]


def one_start(command: list[str], text: str) -> dict:
    t0 = time.perf_counter()
    child = Child(command)
    try:
        init = child.send("initialize", {"processId": os.getpid(), "capabilities": {"textDocument": {"inlineCompletion": {}}}})
        child.answer(init)
        t_init = time.perf_counter()
        child.send("initialized", {}, request=False)
        child.send("textDocument/didOpen", {"textDocument": {"uri": URI, "languageId": "python", "version": 1, "text": text}},
                   request=False)
        for tries, (line, character) in enumerate(_positions(text), 1):
            rid = child.send("textDocument/inlineCompletion", {
                "textDocument": {"uri": URI}, "position": {"line": line, "character": character},
                "context": {"triggerKind": 2}})
            result = child.answer(rid).get("result") or {}
            items = result.get("items", []) if isinstance(result, dict) else result
            if items and items[0].get("insertText"):
                t_first = time.perf_counter()
                served = child.answer(child.send("tabd/stats", {})).get("result") or {}  # after the clock stopped
                return {"initialize_ms": (t_init - t0) * 1000, "first_suggestion_ms": (t_first - t0) * 1000, "tries": tries,
                        "served_by": served.get("served_by"),
                        "torch_free": served.get("torch_free_answers") == sum((served.get("served_by") or {}).values())}
        raise RuntimeError("no suggestion at any of the sample's positions")
    finally:
        child.close()


def run_section(args: argparse.Namespace) -> dict:
    command = [sys.executable, "-m", "tabd.daemon", "serve", *shared_flags(args)]
    text = (Path(SAMPLES) / "inventory.py").read_text()
    rounds = [one_start(command, text) for _ in range(max(1, args.start_rounds))]

    def median(key: str) -> float:
        return round(statistics.median(r[key] for r in rounds), 1)

    return {
        "rounds": len(rounds),
        "initialize_ms_p50": median("initialize_ms"),
        "first_suggestion_ms_p50": median("first_suggestion_ms"),
        "first_suggestion_ms_max": round(max(r["first_suggestion_ms"] for r in rounds), 1),
        "first_suggestion_ms": [round(r["first_suggestion_ms"], 1) for r in rounds],
        "requests_until_first": [r["tries"] for r in rounds],
        # which engine computed the answers up to the first suggestion, and whether all came before torch's import
        "served_by": [r["served_by"] for r in rounds],
        "torch_free": all(r["torch_free"] for r in rounds),
    }
