"""`tabd bench bigdoc`: does a keystroke cost more in a big document? One edit plus a request, big vs small.

One `tabd serve` child (no speculation, so nothing runs in the background)
holds two documents of the same kind of code: a small one (--bigdoc-small
lines, 300 by default) and a big one (--bigdoc-lines, 200,000). Near the top
of each (where an edit shifts every line after it), a character is typed and
deleted again, and an inline completion is asked for after each edit: after
the first round both states are in the completion cache, so the figure is the
document work plus the LSP round trip, measured by the client from the edit
sent to the answer read. The rounds alternate between the documents so that
load on the machine falls on both alike; the ratio big/small is the figure.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

from tabd.daemon.bench.soak import Client

LINE = "    total = compute_value(items[index], scale=2.5)  # a line of ordinary code\n"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("bigdoc section")
    g.add_argument("--bigdoc-lines", type=int, default=200_000, help="lines in the big document (default 200000)")
    g.add_argument("--bigdoc-small", type=int, default=300, help="lines in the small document (default 300)")
    g.add_argument("--bigdoc-rounds", type=int, default=200, help="edit+request pairs per document (default 200)")


def document(lines: int) -> str:
    return "def f(items, index):\n" + LINE * (lines - 2) + "    return total\n"


def _change(client: Client, uri: str, version: int, line: int, char: int, end_char: int, text: str) -> None:
    rng = {"start": {"line": line, "character": char}, "end": {"line": line, "character": end_char}}
    client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                             "contentChanges": [{"range": rng, "text": text}]})


def _ask(client: Client, uri: str, line: int, char: int) -> dict:
    return client.call("textDocument/inlineCompletion", {
        "textDocument": {"uri": uri}, "position": {"line": line, "character": char}, "context": {"triggerKind": 2}})


def _round(client: Client, uri: str, version: int, line: int) -> tuple[float, float]:
    """(ms for typing "x" then asking, ms for deleting it then asking) at the end of `line`."""
    char = len(LINE) - 1
    t0 = time.perf_counter()
    _change(client, uri, version, line, char, char, "x")
    _ask(client, uri, line, char + 1)
    t1 = time.perf_counter()
    _change(client, uri, version + 1, line, char, char + 1, "")
    _ask(client, uri, line, char)
    t2 = time.perf_counter()
    return (t1 - t0) * 1000, (t2 - t1) * 1000


def _p(values: list[float], q: float) -> float:
    return round(sorted(values)[min(len(values) - 1, int(q * len(values)))], 3)


def measure(server_cmd: list[str], small: int, big: int, rounds: int) -> dict:
    client = Client(server_cmd)
    try:
        client.call("initialize", {"processId": None, "capabilities": {}, "rootUri": None})
        client.notify("initialized", {})
        docs = {"small": (small, "file:///bench/small.py"), "big": (big, "file:///bench/big.py")}
        for lines, uri in docs.values():
            client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                                    "text": document(lines)}})
        while client.call("tabd/stats", {}).get("model") == "loading":
            time.sleep(0.1)
        times: dict[str, list[float]] = {"small": [], "big": []}
        version = 2
        for i in range(rounds + 2):  # the first two rounds fill the cache: not counted
            for name, (lines, uri) in docs.items():
                typed, deleted = _round(client, uri, version, min(50, lines // 2))
                if i >= 2:
                    times[name] += [typed, deleted]
            version += 2
        stats = client.call("tabd/stats", {})
    finally:
        client.close()
    report = {name: {"lines": docs[name][0], "p50_ms": round(statistics.median(v), 3), "p95_ms": _p(v, 0.95)}
              for name, v in times.items()}
    report["ratio_p50"] = round(report["big"]["p50_ms"] / report["small"]["p50_ms"], 2)
    report["sources"] = stats.get("sources", {})
    return report


def run_section(args: argparse.Namespace) -> dict:
    cmd = [sys.executable, "-m", "tabd.daemon", "serve", "--depth", "0", "--no-speculation"]
    if args.model:
        cmd += ["--model", args.model]
    return measure(cmd, args.bigdoc_small, args.bigdoc_lines, args.bigdoc_rounds)
