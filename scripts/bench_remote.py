"""Latency of one suggestion: local backend in-process vs remote engines, on the same typed states.

    python scripts/bench_remote.py [--remote URL ...] [--serve-model] [--local] [--steps N]

Types a stdlib-like snippet one character at a time (a keystroke-later request
each step, so KV reuse helps every engine) and prints p50/p95 wall-clock ms per
engine, and for engines that report it, the engine's own compute time.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import threading
import time

from tabd.predictor.types import GenSettings

SNIPPET = '''import os
import sys


def read_config(path):
    """Read a key=value file into a dict."""
    result = {}
    with open(path) as handle:
        for line in handle:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            key, _, value = line.partition("=")
            result[key.strip()] = value.strip()
    return result
'''


def states(steps: int, start: int = 120) -> list[tuple[str, str]]:
    return [(SNIPPET[: start + i], "\n") for i in range(steps)]


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return round(s[min(len(s) - 1, int(q * len(s)))], 1) if s else 0.0


def run(backend, label: str, todo: list[tuple[str, str]], settings: GenSettings) -> dict:
    backend.predict(*todo[0], settings, slot_id="bench")  # warm: first request pays the whole prompt
    wall, engine, over = [], [], []
    for prefix, suffix in todo[1:]:
        t0 = time.perf_counter()
        p = backend.predict(prefix, suffix, settings, slot_id="bench")
        wall.append((time.perf_counter() - t0) * 1000)
        engine.append(p.prefill_ms + p.decode_ms)
        over.append(wall[-1] - engine[-1])
    return {"engine": label, "requests": len(wall), "p50_ms": pct(wall, 0.5), "p95_ms": pct(wall, 0.95),
            "mean_ms": round(statistics.mean(wall), 1), "engine_p50_ms": pct(engine, 0.5),
            "overhead_p50_ms": pct(over, 0.5)}


def start_serve_model() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "tabd.daemon", "serve-model", "--port", "0"],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    for line in proc.stderr:
        m = re.search(r"listening on (http://\S+)", line)
        if m:
            threading.Thread(target=proc.stderr.read, daemon=True).start()
            return proc, m.group(1)
    raise SystemExit("tabd serve-model did not start")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--remote", action="append", default=[], metavar="URL", help="an OpenAI-compatible server")
    parser.add_argument("--serve-model", action="store_true", help="start tabd serve-model and bench it")
    parser.add_argument("--local", action="store_true", help="bench the local backend in this process")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    args = parser.parse_args()
    todo = states(args.steps + 1)
    settings = GenSettings(args.max_new_tokens)
    results, procs = [], []
    try:
        if args.local:
            from tabd.predictor.local import LocalBackend

            results.append(run(LocalBackend(), "local", todo, settings))
        urls = list(args.remote)
        if args.serve_model:
            proc, url = start_serve_model()
            procs.append(proc)
            urls.insert(0, url)
        from tabd.predictor.remote import RemoteBackend

        for url in urls:
            backend = RemoteBackend(url)
            results.append(run(backend, backend.model_id, todo, settings))
    finally:
        for proc in procs:
            proc.terminate()
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
