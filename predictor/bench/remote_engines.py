"""`tabd bench remote`: a suggestion's latency from the local backend beside remote engines.

The same states (a snippet typed one character at a time, so every engine's KV
reuse helps) go to the local backend in this process, to `tabd serve-model`
started here, and to any OpenAI-compatible server named with --bench-url
(llama.cpp's server, vLLM, Ollama). p50/p95 wall-clock ms per engine, and the
ratio of each remote p50 to the local one.
"""
from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import threading
import time

from tabd.predictor.bench import exits
from tabd.predictor.types import GenSettings, Query

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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("bench remote")
    g.add_argument("--bench-url", action="append", default=[], metavar="URL", help="also bench this OpenAI-compatible server")
    g.add_argument("--remote-steps", type=int, default=30, help="keystrokes typed (default 30)")


def states(steps: int, start: int = 120) -> list[tuple[str, str]]:
    return [(SNIPPET[: start + i], "\n") for i in range(steps)]


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return round(s[min(len(s) - 1, int(q * len(s)))], 1) if s else 0.0


def run(backend, label: str, todo: list[tuple[str, str]], settings: GenSettings) -> dict:
    backend.predict(Query(*todo[0], settings, slot_id="bench"))  # warm: first request pays the whole prompt
    wall, engine, over = [], [], []
    for prefix, suffix in todo[1:]:
        t0 = time.perf_counter()
        p = backend.predict(Query(prefix, suffix, settings, slot_id="bench"))
        wall.append((time.perf_counter() - t0) * 1000)
        engine.append(p.prefill_ms + p.decode_ms)
        over.append(wall[-1] - engine[-1])
    return {"engine": label, "requests": len(wall), "p50_ms": pct(wall, 0.5), "p95_ms": pct(wall, 0.95),
            "mean_ms": round(statistics.mean(wall), 1), "engine_p50_ms": pct(engine, 0.5),
            "overhead_p50_ms": pct(over, 0.5)}


def start_serve_model() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "tabd.daemon", "serve-model", "--port", "0"],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    said: list[str] = []
    for line in proc.stderr:
        m = re.search(r"listening on (http://\S+)", line)
        if m:
            threading.Thread(target=proc.stderr.read, daemon=True).start()
            return proc, m.group(1)
        said.append(line)
    # its last words first, then how it ended (a signal says what it means)
    raise SystemExit("".join(said[-10:]) + exits.ended("serve-model", proc).replace("worker", "process", 1))


def run_section(args: argparse.Namespace) -> dict:
    from tabd.predictor.backends.local import LocalBackend
    from tabd.predictor.backends.remote import RemoteBackend
    from tabd.predictor.backends.backend_settings import LocalSettings, RemoteSettings

    todo = states(args.remote_steps + 1)
    settings = GenSettings(args.max_new_tokens)
    local = run(LocalBackend(LocalSettings(args.model, threads=args.threads)), "local", todo, settings)
    engines = [local]
    proc, url = start_serve_model()
    try:
        for target in [url, *args.bench_url]:
            backend = RemoteBackend(RemoteSettings(target))
            engines.append(run(backend, backend.model_id, todo, settings))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    ratios = {e["engine"]: round(e["p50_ms"] / local["p50_ms"], 2) for e in engines[1:] if local["p50_ms"]}
    return {"engines": engines, "p50_ratio_to_local": ratios}
