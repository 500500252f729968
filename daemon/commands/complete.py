"""`tabd complete FILE --line L --character C [--json]`: one suggestion, for scripts and smoke tests.

It runs the same service the server runs (cache, model, speculation), without LSP.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from tabd.cache.state import DocState
from tabd.daemon.runtime.backends import make_backend
from tabd.daemon.runtime.config import ConfigError
from tabd.daemon.runtime.options import add_model_arguments, config_from_args
from tabd.daemon.runtime.request import Asked
from tabd.daemon.runtime.service import compose
from tabd.lsp import positions


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="source file")
    parser.add_argument("--line", type=int, required=True, help="0-based line")
    parser.add_argument("--character", type=int, required=True, help="0-based character (code points)")
    parser.add_argument("--json", action="store_true", help="print a JSON object")
    add_model_arguments(parser)


def offset_of(text: str, line: int, character: int) -> int:
    """Offset of (line, character in code points), clamped to the line and the document."""
    return positions.offset_at(text, line, character, "utf-32")


async def complete_once(config, text: str, offset: int) -> dict:
    service = compose(config, make_backend)
    try:
        state = DocState.from_text(text, offset, config.prefix_chars * 2, config.suffix_chars * 2)
        answer = await service.complete(Asked("cli", 1, state))
        if service.model.error:
            raise ConfigError(service.model.error)
        return {"text": answer.text, "source": answer.source, "latency_ms": round(answer.latency_ms, 3),
                "model": service.model.model_id}
    finally:
        service.close()


def run(args: argparse.Namespace) -> int:
    try:
        config = config_from_args(args)
        text = Path(args.file).read_text(encoding="utf-8")
        offset = offset_of(text, args.line, args.character)
        result = asyncio.run(complete_once(config, text, offset))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        print(f"tabd complete: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result))
    else:
        print(result["text"])
    return 0
