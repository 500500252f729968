"""The `tabd` command line: one subcommand per module, loaded only when used.

Each subcommand module exposes `add_arguments(parser)` and `run(args) -> int`.
Loading lazily keeps `tabd --help` and `tabd dashboard` free of torch start-up.
"""
from __future__ import annotations

import argparse
import importlib
import sys

# name -> (module, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("tabd.daemon.commands.serve", "run the LSP server (stdio by default)"),
    "complete": ("tabd.daemon.commands.complete", "print one suggestion for FILE at a position"),
    "demo": ("tabd.daemon.commands.demo", "show suggestion, accept, and the pre-fetched next suggestion"),
    "session": ("tabd.daemon.commands.session", "make edit sessions (from-file)"),
    "replay": ("tabd.daemon.commands.replay", "replay edit sessions through a real tabd serve"),
    "dashboard": ("tabd.daemon.telemetry.dashboard", "latency dashboard (HTML) from daemon logs"),
    "bench": ("tabd.daemon.commands.bench", "side-by-side benchmarks: kv, replay, soak, engines"),
    "train": ("tabd.predictor.training.commands", "train the embedded model (resumable); `train corpus` builds its PyPI corpus"),
    "serve-model": ("tabd.daemon.commands.serve_model", "serve the local engine as OpenAI-compatible /v1/completions"),
    "model": ("tabd.daemon.commands.model_import", "import a model file: import-gguf FILE makes a directory --model loads"),
    "doctor": ("tabd.daemon.commands.doctor", "check what this set-up lacks and print the fix for each"),
}


def _version() -> str:
    """The installed distribution's version (what a user reports), without importing anything heavy."""
    from importlib import metadata

    try:
        return metadata.version("tabd")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tabd", description="Editor tab-completion daemon.")
    parser.add_argument("--version", action="version", version=f"tabd {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_missing=None)  # the module that failed to load, set below
        if only is not None and name != only:
            continue
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            p.set_defaults(_missing=module_name)
            continue
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(only=command if command in SUBCOMMANDS else None)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    if args._missing:
        print(f"tabd {args.command}: not available in this build ({args._missing} missing)", file=sys.stderr)
        return 2
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
