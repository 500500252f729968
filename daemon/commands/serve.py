"""`tabd serve`: the LSP server on stdio (default) or TCP on loopback.

Exit codes: 0 after shutdown+exit or SIGTERM, 1 when the editor exits, dies or
closes stdin without shutdown, 2 when a flag or a file is unusable at start-up.
Files (--log, --record) are opened before serving, so a bad path fails here.
"""
from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys

from tabd.daemon.runtime.backends import make_backend
from tabd.daemon.runtime.config import Config, ConfigError
from tabd.daemon.runtime.events import EventLog, LogFile
from tabd.daemon.runtime.options import add_model_arguments, add_serve_arguments, config_from_args, parse_host_port


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stdio", action="store_true", help="serve on stdin/stdout (the default)")
    parser.add_argument("--tcp", metavar="HOST:PORT", help="serve on TCP instead, e.g. 127.0.0.1:2087")
    add_serve_arguments(parser)  # --log, --log-text, --record
    parser.add_argument("--metrics", metavar="HOST:PORT", help="serve Prometheus metrics, e.g. 127.0.0.1:9464")
    parser.add_argument("--allow-remote", action="store_true", help="allow listening on a non-loopback address")
    parser.add_argument("--verbose", action="store_true", help="log debug output to stderr")
    add_model_arguments(parser)


def edit_format_rules(config: Config) -> Config:
    """--edit-format sweep or zeta: a model that serves that format is why it was given, so it writes edits
    (--edit-sources both, unless model was said); only a remote engine can serve it (ConfigError otherwise)."""
    if config.edit_format == "tabd":
        return config
    if config.backend != "openai":
        raise ConfigError(f"--edit-format {config.edit_format} needs --backend openai --url URL: an engine serving "
                          f"that model (the {config.backend} backend runs tabd's own prompts only)")
    return dataclasses.replace(config, edit_sources="both") if config.edit_sources == "propagation" else config


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="tabd %(levelname)s %(name)s: %(message)s")
    # The model thread holds the GIL between torch ops; a short switch interval keeps
    # cache hits on the event loop from waiting up to 5 ms behind it.
    sys.setswitchinterval(0.0005)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    try:
        config = edit_format_rules(config_from_args(args))
        tcp = parse_host_port(args.tcp, args.allow_remote, "--tcp") if args.tcp else None
        metrics_addr = parse_host_port(args.metrics, args.allow_remote, "--metrics") if args.metrics else None
    except (ConfigError, ValueError) as exc:
        print(f"tabd serve: {exc}", file=sys.stderr)
        return 2

    if tcp is None:  # stdio: a log or recording there would write bytes into the LSP stream, outside any frame
        for flag, path in (("--log", config.log), ("--record", config.record)):
            if path and _is_stdio(path):
                print(f"tabd serve: {flag} {path} is the LSP connection itself (stdin or stdout); give a file",
                      file=sys.stderr)
                return 2

    events = EventLog()
    closers = []
    try:
        if config.log:
            log_file = LogFile(config.log)
            events.add_sink(log_file.write)
            closers.append(log_file.close)
        recorder = None
        if config.record:
            from tabd.daemon.sessions.record import SessionRecorder

            recorder = SessionRecorder(config.record)
            closers.append(recorder.close)
        if metrics_addr:
            from tabd.daemon.telemetry.metrics import Metrics

            metrics = Metrics()
            metrics.start_http(*metrics_addr, allow_remote=args.allow_remote)
            events.add_sink(metrics.on_event)
    except OSError as exc:
        print(f"tabd serve: {exc}", file=sys.stderr)
        return 2

    from tabd.lsp.server import build_server

    server = build_server(config, make_backend, events)
    server.recorder = recorder

    def close_files() -> None:
        for close in closers:
            try:
                close()
            except OSError:
                pass

    # SIGTERM/SIGINT/SIGHUP stop the event loop (lsp/transport.py install_stop_signals): we get here and flush.
    code = 1
    try:
        code = server.start_tcp(*tcp) if tcp else server.start_io()
    finally:
        server.close()  # stops the parent watch and joins the model worker
        close_files()
    return code


def _is_stdio(path: str) -> bool:
    """Whether `path` names the pipe or file this process's stdin or stdout is (/dev/stdout, /proc/self/fd/1)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return False  # not there yet (a new file), or not a path at all: opening it says why
    for fd in (0, 1):
        try:
            other = os.fstat(fd)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == (other.st_dev, other.st_ino):
            return True
    return False
