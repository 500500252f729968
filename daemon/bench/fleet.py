"""`tabd bench fleet [--users N|N,N,...] [--url URL] [--json]`: N editors, each its own daemon, sharing one engine.

A team puts one engine behind every editor; speculation multiplies what each editor asks of it, and every prefetch
competes with someone else's keystroke. This section starts (or is given, --url) one OpenAI-compatible engine
(`tabd serve-model` on the embedded model by default), then N simulated users, each a `tabd serve --backend openai`
daemon replaying a different typed session at human speed (the Tab user), all at once; once with speculation on and
once off, in the same run. Per user: after-accept answers from memory, latency p50/p99 at the client and the
model-path p50/p99; over the fleet: the slowest user's model-path p50 (speculation must not make it worse), requests
per keystroke (foreground and prefetch, from each daemon's tabd/stats), and the engine's own figures where it
exposes them (serve-model's /tabd/stats; vLLM's /metrics prefix-cache counters).

`--users 1,2,4,8` sweeps N on the same engine: each N runs as a single-N run would (on, then off, the first N of
the same sessions), and the report gains `sweep`, one single-N report per N, so per-user latency against N reads
from one run (`tabd dashboard --fleet` plots it); its top level stays the largest N's single-N report.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

MODES = ("speculation", "no_speculation")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("fleet section")
    g.add_argument("--users", type=users_list, default="4", metavar="N[,N...]",
                   help="simulated editors sharing the engine (default 4); a comma list (1,2,4,8) sweeps N in one run")
    g.add_argument("--fleet-seconds", type=float, default=60.0, help="how long each user types (default 60)")
    g.add_argument("--fleet-speed", type=float, default=1.0, help="replay speed: 1 is human speed (default 1)")
    g.add_argument("--fleet-seed", type=int, default=21, help="sample and typist seed (default 21)")


def users_list(text: str) -> list[int]:
    """--users: one count or a comma list, ascending; a bad one is argparse's usage error (exit 2), not a traceback."""
    counts: list[int] = []
    for item in (t.strip() for t in text.split(",")):
        if not item:
            raise argparse.ArgumentTypeError(f"empty item in {text!r}: give a count (4) or a comma list (1,2,4,8)")
        try:
            n = int(item)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{item!r} is not a whole number of users (e.g. 4 or 1,2,4,8)") from None
        if n < 1:
            raise argparse.ArgumentTypeError(f"--users must be at least 1 (got {n})")
        if n in counts:
            raise argparse.ArgumentTypeError(f"{n} is given twice in {text!r}")
        counts.append(n)
    return sorted(counts)


def engine_figures(url: str) -> dict[str, Any]:
    """What the engine says of itself: serve-model's /tabd/stats, or vLLM's prefix-cache counters; {} otherwise."""
    base = url.rstrip("/").removesuffix("/v1")
    try:
        with urllib.request.urlopen(base + "/tabd/stats", timeout=5) as r:
            stats = json.loads(r.read())
        queue = stats.get("queue")
        if isinstance(queue, dict):
            stats["queue"] = {k: v for k, v in queue.items() if k != "order"}  # every request's place: too long here
        return {"serve_model": stats}
    except Exception:  # not serve-model
        pass
    try:
        with urllib.request.urlopen(base + "/metrics", timeout=5) as r:
            text = r.read().decode("utf-8", "replace")
    except Exception:
        return {}
    counters: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("vllm:prefix_cache_") or line.startswith("vllm:prompt_tokens_total"):
            name, _, value = line.rpartition(" ")
            try:
                counters[name.split("{")[0]] = counters.get(name.split("{")[0], 0.0) + float(value)
            except ValueError:
                continue
    return {"vllm": counters} if counters else {}


def user_figures(summary: dict[str, Any], stats: dict[str, Any] | None) -> dict[str, Any]:
    keys = summary.get("keystrokes", 0) or 0
    prefetch = (stats or {}).get("prefetch", {}).get("started", 0)
    foreground = (stats or {}).get("requests_to_model", {}).get("started", 0)
    return {
        "after_accept_hit_rate": summary["after_accept"]["hit_rate"],
        "after_accept_requests": summary["after_accept"]["requests"],
        # where the after-accept answers came from: cache/typed (memory), inflight (a prefetch still running at the
        # Tab, joined: the Tab waited for its rest), model (no prefetch had it)
        "after_accept_sources": summary["after_accept"].get("sources", {}),
        "after_accept_p50_ms": summary["latency_ms"]["after_accept"]["p50"],
        "latency_p50_ms": summary["latency_ms"]["all"]["p50"],
        "latency_p99_ms": summary["latency_ms"]["all"]["p99"],
        "model_p50_ms": summary["latency_ms"]["model"]["p50"],
        "model_p99_ms": summary["latency_ms"]["model"]["p99"],
        "model_requests": summary.get("sources", {}).get("model", 0),  # 0: the model figures above are no figures
        "keystrokes": keys,
        "foreground_per_keystroke": round(foreground / keys, 3) if keys else 0.0,
        "prefetch_per_keystroke": round(prefetch / keys, 3) if keys else 0.0,
        "saved_share": summary["saved_share"],
    }


def one_user(path: Path, flags: list[str], args: argparse.Namespace) -> dict[str, Any]:
    from tabd.daemon.sessions.driver import ReplayOptions
    from tabd.daemon.sessions.format import read_session
    from tabd.daemon.sessions.replayer import run_replay

    options = ReplayOptions(speed=args.fleet_speed, server_args=flags, accept="tab", progress=False,
                            max_seconds=args.fleet_seconds, check_sync=True)
    measured = run_replay([read_session(path)], options)
    if measured.error:
        raise RuntimeError(f"a fleet user's replay failed: {measured.error}")
    return user_figures(measured.summary(), measured.server_stats)


def run_fleet(sessions: list[Path], url: str, extra: list[str], args: argparse.Namespace) -> dict[str, Any]:
    flags = ["--backend", "openai", "--url", url, "--no-warmup", *extra]
    with ThreadPoolExecutor(max_workers=len(sessions)) as pool:
        users = list(pool.map(lambda p: one_user(p, flags, args), sessions))
    slowest = max(u["model_p50_ms"] for u in users) if users else 0.0
    return {"users": users, "slowest_model_p50_ms": slowest,
            "min_after_accept_hit_rate": min((u["after_accept_hit_rate"] for u in users if u["after_accept_requests"]),
                                             default=None),
            "engine": engine_figures(url)}


def run_section(args: argparse.Namespace) -> dict[str, Any]:
    from tabd.daemon.bench import quality
    from tabd.daemon.sessions.format import write_session
    from tabd.daemon.sessions.typist import typed_session
    from tabd.predictor.bench.remote_engines import start_serve_model

    try:
        counts = args.users if isinstance(args.users, list) else users_list(str(args.users))  # a caller's Namespace
    except argparse.ArgumentTypeError as exc:
        raise RuntimeError(str(exc)) from None
    most = max(counts)
    with tempfile.TemporaryDirectory(prefix="tabd-fleet-") as tmp:
        workdir = Path(tmp)
        files = quality.files_to_type(args, workdir, most, args.fleet_seed)
        sessions = []
        for n in range(most):  # user n types the same session at every N: N grows by adding users, not changing them
            language, events = typed_session([files[n % len(files)]], seed=args.fleet_seed + n, spans=3,
                                             max_chars=400, editor="vscode")
            path = workdir / f"user{n}.jsonl"
            write_session(path, events, language)
            sessions.append(path)
        proc, url = (None, args.url) if args.url else start_serve_model()
        try:
            sweep = [one_count(sessions[:n], url, args, len(counts) > 1) for n in counts]
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=30)
    report = dict(sweep[-1])
    if len(counts) > 1:
        report["sweep"] = sweep
    return report


def one_count(sessions: list[Path], url: str, args: argparse.Namespace, sweeping: bool) -> dict[str, Any]:
    """What a single-N run reports: N users with speculation on, then the same N with it off."""
    if sweeping:
        print(f"tabd bench fleet: {len(sessions)} users, speculation on and off", file=sys.stderr, flush=True)
    out = {mode: run_fleet(sessions, url, [] if mode == "speculation" else ["--no-speculation"], args)
           for mode in MODES}
    on, off = out["speculation"], out["no_speculation"]
    return {"users": len(sessions), "engine_url": "serve-model" if not args.url else "given", **out,
            "slowest_model_p50_ratio": round(on["slowest_model_p50_ms"] / off["slowest_model_p50_ms"], 3)
            if off["slowest_model_p50_ms"] else None}
