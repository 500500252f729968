"""`tabd model import-gguf FILE [-o DIR] [--json]`: a GGUF model file made into a directory `--model` loads.

`--model FILE.gguf` does the same on first use, into the user's cache; this command does it ahead of time (the
import reads and dequantizes every tensor: seconds for a small model) and says where the directory is.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="model_command", metavar="ACTION")
    p = sub.add_parser("import-gguf", help="convert a GGUF file once into a safetensors model directory",
                       description="Read a GGUF model file (llama.cpp's format) on this machine, dequantize its tensors "
                                   "to fp32, rebuild its tokenizer from the file's metadata, and save a Hugging Face "
                                   "directory that --model loads. Without -o the directory is the cache's, the one "
                                   "--model FILE.gguf uses. Nothing is downloaded.")
    p.add_argument("file", metavar="FILE.gguf")
    p.add_argument("-o", "--output", metavar="DIR", help="where to write the directory (default: the user's cache, "
                                                          "$TABD_CACHE/models or ~/.cache/tabd/models)")
    p.add_argument("--json", action="store_true", help="print a JSON object instead of the directory alone")


def run(args: argparse.Namespace) -> int:
    if args.model_command != "import-gguf":
        print("tabd model: say what to do (import-gguf)", file=sys.stderr)
        return 2
    from tabd.predictor.loading import gguf_import
    from tabd.predictor.types import ModelLoadError

    t0 = time.perf_counter()
    try:
        gguf_import.check_gguf(args.file)
        out = gguf_import.cached_dir(args.file) if args.output is None else Path(args.output)
        reused = (out / gguf_import.DONE).is_file()
        if not reused:
            gguf_import.import_gguf(args.file, out)
    except (ModelLoadError, OSError) as exc:
        print(f"tabd model import-gguf: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"model": str(out), "reused": reused, "seconds": round(time.perf_counter() - t0, 2)}))
    else:
        print(out)
    return 0
