"""`tabd bench [kv|replay|remote|soak|engines|lookup|quality|start|bigdoc|preempt|editors|edits|fleet|documents|realmodel] [--json]`: side-by-side figures measured in one run.

Each section lives in its own module with `add_arguments(parser)` (optional) and
`run_section(args) -> dict`; the dict is printed under the section's name.
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys

SECTIONS: dict[str, str] = {
    "kv": "tabd.predictor.bench.kv",
    "replay": "tabd.daemon.bench.naive_full",
    "soak": "tabd.daemon.bench.soak",
    "bigdoc": "tabd.daemon.bench.bigdoc",
    "preempt": "tabd.daemon.bench.preempt",
    "engines": "tabd.predictor.bench.engines",
    "lookup": "tabd.predictor.bench.lookup_decoding",
    "remote": "tabd.predictor.bench.remote_engines",
    "quality": "tabd.daemon.bench.quality",
    "start": "tabd.daemon.bench.start",
    "editors": "tabd.daemon.bench.editors",
    "edits": "tabd.daemon.bench.edits",
    "fleet": "tabd.daemon.bench.fleet",
    "documents": "tabd.daemon.bench.turns",
    "realmodel": "tabd.daemon.bench.realmodel",
}
DEFAULT_ALL = ("kv", "replay", "remote")  # soak, engines, quality and bigdoc take long or are narrow; name them to run them


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("section", nargs="?", choices=sorted(SECTIONS), help="one section; none means kv, replay and remote")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    from tabd.daemon.runtime.options import add_model_arguments

    add_model_arguments(parser)
    for module_name in SECTIONS.values():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue
        if hasattr(module, "add_arguments"):
            module.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    names = [args.section] if args.section else list(DEFAULT_ALL)
    report: dict = {}
    status = 0
    for name in names:
        try:
            module = importlib.import_module(SECTIONS[name])
        except ModuleNotFoundError as exc:
            print(f"tabd bench {name}: not available in this build ({exc.name})", file=sys.stderr)
            status = 2
            continue
        try:
            report[name] = module.run_section(args)
        except RuntimeError as exc:  # a section that cannot run says why (and reports what it could measure)
            if getattr(exc, "report", None) is not None:
                report[name] = exc.report
            print(f"tabd bench {name}: {exc}", file=sys.stderr)
            status = 1
    if args.json:
        print(json.dumps(report, indent=None))
    else:
        for name, section in report.items():
            print(f"== {name} ==")
            for key, value in section.items():
                print(f"  {key:32} {json.dumps(value)}")
    return status
