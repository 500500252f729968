"""`tabd bench replay`: one typed session replayed by the naive server and the full one, alternating.

naive = `--no-cache --no-speculation --no-kv-reuse`: every request is a model call from
scratch. full = the defaults. Both replay the same session (typed from a sample file in
predictor/samples/ with a fixed seed) through a real `tabd serve` child; the ratios are
naive ÷ full of the client-measured p50 latencies.
"""
from __future__ import annotations

import argparse
import shlex
import tempfile
from pathlib import Path
from typing import Any

NAIVE_FLAGS = ["--no-cache", "--no-speculation", "--no-kv-reuse"]
SAMPLES = Path(__file__).resolve().parents[2] / "predictor" / "samples"
try:  # installed as a wheel, the samples sit in the tabd.predictor package
    import tabd.predictor as _predictor

    SAMPLES = Path(next(iter(_predictor.__path__))) / "samples"
except Exception:  # pragma: no cover - the source tree layout above is the fallback
    pass


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("replay section")
    g.add_argument("--replay-session", metavar="FILE", help="replay this session instead of typing a sample")
    g.add_argument("--replay-sample", metavar="FILE", help="file to type (default: predictor/samples/inventory.py)")
    g.add_argument("--replay-seed", type=int, default=7, help="typist seed (default 7)")
    g.add_argument("--replay-spans", type=int, default=2, help="spans retyped (default 2)")
    g.add_argument("--replay-max-chars", type=int, default=160, help="longest span retyped (default 160)")
    g.add_argument("--replay-editor", choices=["plain", "vscode"], default="vscode",
                   help="how the typist's editor types: vscode (default: auto-closed pairs, overtype) or plain")
    g.add_argument("--replay-speed", type=float, default=0.0,
                   help="replay speed (default 0: each keystroke waits for its answer)")
    g.add_argument("--replay-think-ms", type=float, default=250.0, help="pause before Tab (default 250)")
    g.add_argument("--replay-max-new-tokens", type=int, default=None,
                   help="suggestion length for both servers (default: tabd serve's)")
    g.add_argument("--replay-max-seconds", type=float, default=None,
                   help="cap on each replay; both then cover the part replayed (default: none)")
    g.add_argument("--replay-rounds", type=int, default=1, help="naive/full pairs, alternating order (default 1)")
    g.add_argument("--replay-echo-rounds", type=int, default=3,
                   help="also replay a session that types what the model suggests, this many suggestions after "
                        "each Enter (the \"accepting\" figures; 0: skip)")
    g.add_argument("--replay-debounce-ms", type=int, default=0, metavar="MS",
                   help="the servers' --debounce-ms (default 0: at speed 0 each keystroke waits for its answer, so "
                        "there is no rhythm to fit, and a wait would add the same constant to every model answer)")
    g.add_argument("--replay-server-cmd", default=None, help=argparse.SUPPRESS)  # tests: another server


def default_sample() -> Path:
    return SAMPLES / "inventory.py"


def _session_file(args: argparse.Namespace, workdir: Path) -> Path:
    if args.replay_session:
        return Path(args.replay_session)
    from tabd.daemon.sessions.format import write_session
    from tabd.daemon.sessions.typist import typed_session

    sample = Path(args.replay_sample or default_sample())
    language, events = typed_session([str(sample)], seed=args.replay_seed, spans=args.replay_spans,
                                     max_chars=args.replay_max_chars, editor=args.replay_editor)
    path = workdir / "bench-replay.jsonl"
    write_session(path, events, language)
    return path


def shared_flags(args: argparse.Namespace) -> list[str]:
    from tabd.daemon.runtime.options import flags_of

    # the engine and how it holds and runs the weights are the model's, as --model is: without them,
    # `tabd bench start --engine torch` measured the default engine
    flags = flags_of(args, ("model", "device", "backend", "url", "engine", "threads", "weights"))
    if args.replay_max_new_tokens:
        flags += ["--max-new-tokens", str(args.replay_max_new_tokens)]
    return flags


def _replay_flags(args: argparse.Namespace) -> list[str]:
    """Both replay servers' flags: the shared ones and the debounce (not for other sections' servers, e.g. start)."""
    return shared_flags(args) + ["--debounce-ms", str(args.replay_debounce_ms)]


def _ratio(naive: float, full: float) -> float | None:
    return round(naive / full, 2) if naive and full else None


def _compare(session: Any, args: argparse.Namespace) -> dict[str, Any]:
    """The session replayed by the naive and the full server, alternating; summaries and p50 ratios."""
    from tabd.daemon.sessions.driver import ReplayOptions
    from tabd.daemon.sessions.measure import Measurements
    from tabd.daemon.sessions.replayer import run_replay

    configs = {"naive": NAIVE_FLAGS, "full": []}
    measured: dict[str, list[Measurements]] = {name: [] for name in configs}
    rounds = max(1, args.replay_rounds)
    for r in range(rounds):
        order = ["naive", "full"] if r % 2 == 0 else ["full", "naive"]
        for name in order:
            m = run_replay([session], _options(args, configs[name]))
            if m.error:
                raise RuntimeError(f"{name} replay failed: {m.error}")
            measured[name].append(m)
    summaries = {name: Measurements.merged(ms).summary() for name, ms in measured.items()}
    for s in summaries.values():
        s.pop("server", None)
    lat = {name: s["latency_ms"] for name, s in summaries.items()}
    return {
        "naive": summaries["naive"],
        "full": summaries["full"],
        "after_accept_p50_ratio": _ratio(lat["naive"]["after_accept"]["p50"], lat["full"]["after_accept"]["p50"]),
        "all_p50_ratio": _ratio(lat["naive"]["all"]["p50"], lat["full"]["all"]["p50"]),
    }


def _options(args: argparse.Namespace, extra_flags: list[str]) -> Any:
    from tabd.daemon.sessions.driver import ReplayOptions

    return ReplayOptions(speed=args.replay_speed, think_ms=args.replay_think_ms,
                         server_args=_replay_flags(args) + extra_flags,
                         server_command=shlex.split(args.replay_server_cmd) if args.replay_server_cmd else None,
                         max_seconds=args.replay_max_seconds, progress=not args.json)


def _echo_session(args: argparse.Namespace, workdir: Path) -> Any:
    """A session that types what the model suggests after Enter at a few lines of the sample."""
    from tabd.daemon.sessions.replayer import echo_session
    from tabd.daemon.sessions.format import read_session, write_session
    from tabd.daemon.sessions.typist import candidate_spans, choose_spans, language_of

    import random

    sample = Path(args.replay_sample or default_sample())
    text = sample.read_text(encoding="utf-8")
    spans = choose_spans([s for s in candidate_spans(text, str(sample)) if s.kind == "body"],
                         args.replay_spans, random.Random(args.replay_seed))
    lines = text.split("\n")
    removed = {i for s in spans for i in range(s.start, s.end + 1)}
    opened = "\n".join(line for i, line in enumerate(lines) if i not in removed)
    anchors, gone = [], 0
    for s in spans:
        first = lines[s.start]
        anchors.append((s.start - 1 - gone, first[: len(first) - len(first.lstrip())]))
        gone += s.end - s.start + 1
    events = echo_session(opened, sample.resolve().as_uri(), anchors, _options(args, NAIVE_FLAGS),
                          rounds=args.replay_echo_rounds, language=language_of(str(sample)))
    path = workdir / "bench-echo.jsonl"
    write_session(path, events, language_of(str(sample)))
    return read_session(path)


def run_section(args: argparse.Namespace) -> dict[str, Any]:
    from tabd.daemon.sessions.format import SessionError, read_session

    with tempfile.TemporaryDirectory(prefix="tabd-bench-replay-") as tmp:
        path = _session_file(args, Path(tmp))
        try:
            session = read_session(path)
        except SessionError as exc:
            raise RuntimeError(str(exc)) from None
        report = _compare(session, args)
        report["session"] = {"keystrokes": session.keystrokes(), "seconds": round(session.duration, 1),
                             "file": None if args.replay_session is None else str(path),
                             "seed": args.replay_seed, "rounds": max(1, args.replay_rounds),
                             "speed": args.replay_speed, "server_flags": _replay_flags(args),
                             "editor": None if args.replay_session else args.replay_editor}
        if args.replay_echo_rounds > 0:
            echo = _echo_session(args, Path(tmp))
            report["accepting"] = _compare(echo, args)
            report["accepting"]["session"] = {"keystrokes": echo.changes(),
                                              "echo_rounds": args.replay_echo_rounds}
    return report
