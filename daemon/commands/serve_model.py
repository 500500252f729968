"""`tabd serve-model`: the local engine as an OpenAI-compatible /v1/completions server.

Listens on 127.0.0.1 by default; another address needs --allow-remote. Port 0
picks a free port; the first line on stderr says where it listens:
`tabd serve-model: listening on http://HOST:PORT (model NAME, FIM TEMPLATE)`.
Exit codes: 0 on SIGINT/SIGTERM, 2 when a flag or the model is unusable.
Requests queue by their `priority` field (vLLM's: lower sooner); GET /tabd/stats
says in which order they were served (predictor/backends/serving.py).
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys
import threading

from tabd.daemon.runtime.config import ConfigError
from tabd.daemon.runtime.options import add_model_arguments, config_from_args, parse_host_port


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8012, help="port (default 8012; 0 picks a free one)")
    parser.add_argument("--allow-remote", action="store_true", help="allow listening on a non-loopback address")
    parser.add_argument("--name", default="tabd", help="model name clients send and /v1/models lists (default tabd)")
    add_model_arguments(parser)


def run(args: argparse.Namespace) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    try:
        config = config_from_args(args)
        host = f"[{args.host}]" if ":" in args.host else args.host
        host, port = parse_host_port(f"{host}:{args.port}", args.allow_remote, "--host/--port")
    except (ConfigError, ValueError) as exc:
        print(f"tabd serve-model: {exc}", file=sys.stderr)
        return 2
    if config.backend == "openai":
        print("tabd serve-model: serves the local engine; --backend openai makes no sense here", file=sys.stderr)
        return 2

    from tabd.daemon.runtime.backends import make_backend
    from tabd.predictor.backends.serving import make_server
    from tabd.predictor.loading.engine_names import AUTO, TORCH_NATIVE
    from tabd.predictor.types import ModelLoadError

    if config.engine == AUTO:  # a long-running server of whole prompts: torch's prefill, no torch-free start
        config = dataclasses.replace(config, engine=TORCH_NATIVE)
    try:
        backend = make_backend(config)
    except ModelLoadError as exc:
        print(f"tabd serve-model: {exc}", file=sys.stderr)
        return 2
    try:
        server = make_server(backend, host, port, args.name)
    except OSError as exc:
        print(f"tabd serve-model: cannot listen on {host}:{port}: {exc}", file=sys.stderr)
        return 2
    bound_host, bound_port = server.server_address[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    print(f"tabd serve-model: listening on http://{shown}:{bound_port} (model {args.name}, FIM {backend.template.name})",
          file=sys.stderr, flush=True)

    def stop(signum, frame) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
