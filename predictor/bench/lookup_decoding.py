"""`tabd bench lookup`: prompt-lookup decoding on and off over a session with repetition, in one process.

Two sessions over `engines.repetitive_states()`, a file of near-identical
methods typed through its second half: "line_ends" (a request at the end of
each line, the rest of the file after the cursor) and "keystrokes" (a request
every 12 characters, mid-line as while typing, nothing after the cursor: new
code repeating the pattern above it). Each runs `--lookup-passes` times with
lookup on and off alternating state by state, so the machine's noise falls on
both; medians over the passes. `tabd bench engines` reports the same figures
for its first weight format beside llama.cpp; this section runs them alone, on
the embedded model or a `--shape`, at `--lookup-threads` threads.
"""
from __future__ import annotations

import argparse

KEYSTROKE_EVERY = 12  # characters between two requests of the "keystrokes" session


def _at_least_1(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"--lookup-passes must be at least 1, not {value!r}")
    return n


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("bench lookup")
    g.add_argument("--lookup-passes", type=_at_least_1, default=7, help="times over the session's states (medians; default 7)")
    g.add_argument("--lookup-threads", type=int, default=1,
                   help="model threads (default 1: on a shared pair of cores a multi-token pass waits for its second thread)")


def run_section(args: argparse.Namespace) -> dict:
    from tabd.predictor.bench import shapes
    from tabd.predictor.bench.engines import TabdEngine
    from tabd.predictor.loading.engine_names import TORCH_NATIVE

    passes = max(1, args.lookup_passes)
    model_dir = args.model or str(shapes.model_dir(args.shape))
    threads = max(1, args.lookup_threads)
    eng = TabdEngine(model_dir, threads, TORCH_NATIVE, args.weights)
    report = {}
    for name, every in (("line_ends", 0), ("keystrokes", KEYSTROKE_EVERY)):
        eng.lookup(1, every)  # warm-up: the native build, the slots' first prefills
        report[name] = eng.lookup(passes, every)
    report.update({"shape": args.shape, "threads": threads, "weights": eng.backend.weights_why,
                   "tabd_engine": eng.backend.engine_name, "pass_costs": pass_costs(eng.runner)})
    return report


def pass_costs(runner, context: int = 300, calls: int = 300) -> dict:
    """ms of a verify pass of 1..8 tokens against a one-token step after `context` tokens (medians, in turn):
    what a draft costs, the other half of a lookup speed-up."""
    import statistics
    import time

    from tabd.predictor.engine import generate

    if getattr(runner, "verify", None) is None or runner.verify([0], runner.new_cache(4)) is None:
        return {"skipped": "no multi-token pass in this engine"}
    ids = [(7 * i) % 1000 + 10 for i in range(context + 8)]
    cache = runner.new_cache(context + 16)
    generate.prefill(runner, ids[:context], cache, context)
    times: dict[int, list[float]] = {n: [] for n in range(9)}
    for _ in range(calls):
        for n in range(9):
            cache.truncate(context)
            t0 = time.perf_counter()
            runner.decode_greedy(ids[context], cache) if n == 0 else runner.verify(ids[context : context + n], cache)
            times[n].append((time.perf_counter() - t0) * 1000)
    med = {n: statistics.median(t) for n, t in times.items()}
    return {"context": context, "step_ms": round(med[0], 3), "pass_ms": {n: round(med[n], 3) for n in range(1, 9)},
            "pass_over_step": {n: round(med[n] / med[0], 2) for n in range(1, 9)}}
