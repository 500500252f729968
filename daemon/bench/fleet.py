"""`tabd bench fleet [--users N|N,N,...] [--url URL] [--json]`: N editors, each its own daemon, sharing one engine.

A team puts one engine behind every editor; speculation multiplies what each editor asks of it, and every prefetch
competes with someone else's keystroke. This section starts (or is given, --url) one OpenAI-compatible engine
(`tabd serve-model` on the embedded model by default), then N simulated users, each a `tabd serve --backend openai`
daemon replaying a different typed session at human speed (the Tab user), all at once; once with speculation on and
once off, in the same run. Per user: after-accept answers from memory, latency p50/p99 at the client and the
model-path p50/p99; over the fleet: the slowest user's model-path p50 (speculation must not make it worse), requests
per keystroke (foreground and prefetch, from each daemon's tabd/stats), and the engine's own figures where it
exposes them (serve-model's /tabd/stats; vLLM's /metrics prefix-cache counters).

`--fleet-rounds R` runs each N R times, the order of the two modes alternating (on then off, off then on, ...), and
reports each user's figures over all R: the mode that runs second finds the engine's prefix cache warmed by the
first, and at 8 users one user's p50 rests on a few dozen model requests, so one round's ratio moves by tens of
percent between runs of the same code.

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

from tabd.daemon.sessions.measure import percentiles

MODES = ("speculation", "no_speculation")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("fleet section")
    g.add_argument("--users", type=users_list, default="4", metavar="N[,N...]",
                   help="simulated editors sharing the engine (default 4); a comma list (1,2,4,8) sweeps N in one run")
    g.add_argument("--fleet-seconds", type=float, default=60.0, help="how long each user types (default 60)")
    g.add_argument("--fleet-speed", type=float, default=1.0, help="replay speed: 1 is human speed (default 1)")
    g.add_argument("--fleet-seed", type=int, default=21, help="sample and typist seed (default 21)")
    g.add_argument("--fleet-rounds", type=rounds_count, default=1, metavar="R",
                   help="run each N R times, alternating which mode goes first, and pool each user's figures "
                        "(default 1)")


def rounds_count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of rounds") from None
    if not 1 <= n <= 20:
        raise argparse.ArgumentTypeError(f"--fleet-rounds must be between 1 and 20 (got {n})")
    return n


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


def user_figures(summary: dict[str, Any], stats: dict[str, Any] | None,
                 raw: dict[str, list[float]] | None = None) -> dict[str, Any]:
    keys = summary.get("keystrokes", 0) or 0
    prefetch = (stats or {}).get("prefetch", {}).get("started", 0)
    foreground = (stats or {}).get("requests_to_model", {}).get("started", 0)
    return {
        "after_accept_hit_rate": summary["after_accept"]["hit_rate"],
        "after_accept_requests": summary["after_accept"]["requests"],
        # where the after-accept answers came from: cache/typed (memory), inflight (a prefetch still running at the
        # Tab, joined: the Tab waited for its rest), model (no prefetch had it)
        "after_accept_sources": summary["after_accept"].get("sources", {}),
        "after_accept_empty": summary["after_accept"].get("empty", 0),  # of them, nothing to show (a memory one counts)
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
        # what the figures above are made of, so rounds can be pooled (pooled() drops them from the report)
        "raw": raw or {},
        "prefetch_started": prefetch,
        "foreground_started": foreground,
    }


def pooled(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One user's figures over several rounds: counts summed, percentiles over all the latencies seen."""
    if len(rounds) == 1:
        return {k: v for k, v in rounds[0].items() if k != "raw"}
    raw = {name: [x for r in rounds for x in r["raw"].get(name, [])] for name in ("all_ms", "model_ms", "after_accept_ms")}
    requests = sum(r["after_accept_requests"] for r in rounds)
    hits = sum(round(r["after_accept_hit_rate"] * r["after_accept_requests"]) for r in rounds)
    sources: dict[str, int] = {}
    for r in rounds:
        for name, n in r["after_accept_sources"].items():
            sources[name] = sources.get(name, 0) + n
    keys = sum(r["keystrokes"] for r in rounds)
    prefetch, foreground = (sum(r[k] for r in rounds) for k in ("prefetch_started", "foreground_started"))
    every = percentiles(raw["all_ms"])
    model = percentiles(raw["model_ms"])
    return {
        "after_accept_hit_rate": round(hits / requests, 4) if requests else 0.0,
        "after_accept_requests": requests,
        "after_accept_sources": sources,
        "after_accept_empty": sum(r.get("after_accept_empty", 0) for r in rounds),
        "after_accept_p50_ms": percentiles(raw["after_accept_ms"])["p50"],
        "latency_p50_ms": every["p50"], "latency_p99_ms": every["p99"],
        "model_p50_ms": model["p50"], "model_p99_ms": model["p99"],
        "model_requests": sum(r["model_requests"] for r in rounds),
        "keystrokes": keys,
        "foreground_per_keystroke": round(foreground / keys, 3) if keys else 0.0,
        "prefetch_per_keystroke": round(prefetch / keys, 3) if keys else 0.0,
        "saved_share": round(sum(r["saved_share"] * r["keystrokes"] for r in rounds) / keys, 4) if keys else 0.0,
        "prefetch_started": prefetch, "foreground_started": foreground,
        "rounds": len(rounds),
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
    raw = {"all_ms": list(measured.all_ms), "model_ms": list(measured.model_ms),
           "after_accept_ms": list(measured.after_accept_ms)}
    return user_figures(measured.summary(), measured.server_stats, raw)


def run_fleet(sessions: list[Path], url: str, extra: list[str], args: argparse.Namespace) -> list[dict[str, Any]]:
    """One round of one mode: each user's figures (raw latencies included)."""
    flags = ["--backend", "openai", "--url", url, "--no-warmup", *extra]
    with ThreadPoolExecutor(max_workers=len(sessions)) as pool:
        return list(pool.map(lambda p: one_user(p, flags, args), sessions))


def mode_report(rounds: list[list[dict[str, Any]]], engine: dict[str, Any]) -> dict[str, Any]:
    """A mode's report: each user over all rounds, the slowest user's model-path p50, the lowest hit rate."""
    users = [pooled([r[i] for r in rounds]) for i in range(len(rounds[0]))] if rounds else []
    slowest = max(u["model_p50_ms"] for u in users) if users else 0.0
    return {"users": users, "slowest_model_p50_ms": slowest,
            "slowest_latency_p50_ms": max(u["latency_p50_ms"] for u in users) if users else 0.0,
            "min_after_accept_hit_rate": min((u["after_accept_hit_rate"] for u in users if u["after_accept_requests"]),
                                             default=None),
            "engine": engine}


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
    """What a single-N run reports: N users with speculation on, then the same N with it off (each round after the
    first swaps which goes first)."""
    rounds = args.fleet_rounds
    if sweeping or rounds > 1:
        print(f"tabd bench fleet: {len(sessions)} users, speculation on and off, {rounds} round(s)",
              file=sys.stderr, flush=True)
    seen: dict[str, list[list[dict[str, Any]]]] = {mode: [] for mode in MODES}
    engine: dict[str, dict[str, Any]] = {}
    order = [list(MODES if r % 2 == 0 else MODES[::-1]) for r in range(rounds)]
    for modes in order:
        for mode in modes:
            seen[mode].append(run_fleet(sessions, url, [] if mode == "speculation" else ["--no-speculation"], args))
            engine[mode] = engine_figures(url)  # the engine's counters after this mode's last round
    out = {mode: mode_report(seen[mode], engine[mode]) for mode in MODES}
    on, off = out["speculation"], out["no_speculation"]
    return {"users": len(sessions), "engine_url": "serve-model" if not args.url else "given", "order": order, **out,
            "slowest_model_p50_ratio": ratio(on["slowest_model_p50_ms"], off["slowest_model_p50_ms"]),
            # what a user feels: every answer, memory and model alike (the model path alone leaves out the answers
            # speculation takes off it, which are not the same requests in the two modes)
            "slowest_latency_p50_ratio": ratio(on["slowest_latency_p50_ms"], off["slowest_latency_p50_ms"])}


def ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b else None
