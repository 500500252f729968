"""`tabd replay SESSION.jsonl...`: replay edit sessions through a real `tabd serve` child, headless.

Prints the summary (a table, or one JSON object with --json). Exit status: 0 when the
whole replay ran, 1 when a session file is unusable, 3 when the daemon died or stopped
answering, 130 when interrupted (in each case what was measured until then is printed).
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from typing import Any

EXIT_BAD_SESSION = 1
EXIT_DAEMON_DIED = 3


def _speed(value: str) -> float:
    try:
        speed = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if speed < 0 or speed != speed:
        raise argparse.ArgumentTypeError("speed must be >= 0 (0 or inf: as fast as the server answers)")
    return speed


def server_flags(args: argparse.Namespace, *, log: str | None = None) -> list[str]:
    """The shared model and backend flags the user set, as `tabd serve` arguments for the child."""
    from tabd.daemon.runtime.options import flags_of

    return flags_of(args) + (["--log", log] if log else [])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sessions", nargs="+", metavar="SESSION.jsonl")
    parser.add_argument("--speed", type=_speed, default=1.0,
                        help="replay speed relative to the recording (default 1; 0 or inf: no waiting between "
                             "keystrokes, each request answered before the next)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--log", metavar="FILE", help="the server child's JSONL log (tabd serve --log)")
    parser.add_argument("--accept", choices=["tab", "words"], default="words",
                        help="the simulated user: 'tab' takes only whole suggestions that are exactly what comes next; "
                             "'words' (default) also takes the leading words that match")
    parser.add_argument("--no-edits", action="store_true",
                        help="do not ask for next edits (textDocument/copilotInlineEdit), even from a server that offers "
                             "them: today's completion-only user")
    parser.add_argument("--think-ms", type=float, default=250.0,
                        help="pause before accepting a matching suggestion, scaled by --speed (default 250)")
    from tabd.daemon.runtime.options import add_model_arguments

    add_model_arguments(parser)  # passed on to the tabd serve child: --model, --depth, --no-cache, ...
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.add_argument("--timeout", type=float, default=60.0, help="longest wait for one answer (default 60 s)")
    parser.add_argument("--startup-timeout", type=float, default=180.0,
                        help="longest wait for the server to start and load its model (default 180 s)")
    parser.add_argument("--max-seconds", type=float, default=None,
                        help="stop after this long of replaying (the server's start not counted) and report the part replayed (summary gets \"truncated\": true)")
    parser.add_argument("--check-sync", action="store_true",
                        help="before closing each document, compare the server's copy (tabd/document) with ours")
    parser.add_argument("--server-cmd", default=None, help=argparse.SUPPRESS)  # tests: another server command


def options_from_args(args: argparse.Namespace) -> Any:
    from tabd.daemon.sessions.driver import ReplayOptions

    return ReplayOptions(
        speed=args.speed, think_ms=args.think_ms, server_args=server_flags(args, log=args.log),
        server_command=shlex.split(args.server_cmd) if args.server_cmd else None,
        request_timeout=args.timeout, startup_timeout=args.startup_timeout, progress=not args.no_progress,
        check_sync=args.check_sync, max_seconds=args.max_seconds, accept=args.accept, edits=not args.no_edits)


def run(args: argparse.Namespace) -> int:
    from tabd.daemon.sessions.measure import format_table
    from tabd.daemon.sessions.replayer import run_replay
    from tabd.daemon.sessions.format import SessionError, read_session

    sessions = []
    for path in args.sessions:
        try:
            session = read_session(path)
        except SessionError as exc:
            print(f"tabd replay: {exc}", file=sys.stderr)
            return EXIT_BAD_SESSION
        for warning in session.warnings:
            print(f"tabd replay: warning: {warning}", file=sys.stderr)
        if not session.events:
            print(f"tabd replay: {path}: no events to replay", file=sys.stderr)
            return EXIT_BAD_SESSION
        sessions.append(session)
    measured = run_replay(sessions, options_from_args(args))
    summary = measured.summary()
    if args.json:
        print(json.dumps(summary))
    else:
        print(format_table(summary))
    for warning in measured.warnings[len([w for s in sessions for w in s.warnings]):][:10]:
        print(f"tabd replay: warning: {warning}", file=sys.stderr)
    if measured.interrupted:
        print("tabd replay: interrupted; the figures above cover the part replayed", file=sys.stderr)
        return 130
    if measured.error:
        print(f"tabd replay: {measured.error}", file=sys.stderr)
        return EXIT_DAEMON_DIED
    return 0
