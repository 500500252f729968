"""`tabd bench editors [FILES...] [--json]`: the same typing in a plain buffer and in VS Code, side by side.

A keystroke is fast because the prompt's keys and values are kept and only the
tokens that changed run. Sessions typed into a plain buffer change the prompt
only at the cursor; VS Code does not type that way: `(` inserts `()`, the `)`
typed later is an overtype that sends no change, Enter between brackets moves
the closer down (daemon/sessions/editor.py). With the suffix first in the
prompt, a change right after the cursor costs what the tokens after it cost.

This section types the same spans of the same files (FILES, else the held-out
stdlib files `tabd bench quality` samples) as a `plain` and as a `vscode`
session (daemon/sessions/typist.py), and replays each at full speed (each
keystroke waits for its answer) through a real `tabd serve` by the Tab user.
Per editor: keystroke prompt reuse (p50, p10: from the server's log), tokens
prefilled per keystroke, model-path latency (p50, p99), the share of typing
saved, accepts per suggestion shown and the after-accept hit rate; then
vscode / plain of each. `--shape qwen2.5-coder-0.5b` serves that shape's random
weights instead (suggestions are noise there; reuse and latency are not).
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

EDITORS = ("plain", "vscode")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("editors section (FILES: the files to type)")
    g.add_argument("--editors-count", type=int, default=2, help="held-out files sampled when no FILES (default 2)")
    g.add_argument("--editors-seed", type=int, default=11, help="sample and typist seed (default 11)")
    g.add_argument("--editors-spans", type=int, default=3, help="spans typed per file (default 3)")
    g.add_argument("--editors-max-chars", type=int, default=400, help="longest span typed (default 400)")
    g.add_argument("--editors-user", choices=["tab", "words"], default="tab",
                   help="the simulated user: tab (default, whole suggestions) or words")


def files_to_type(args: argparse.Namespace, workdir: Path) -> list[str]:
    from tabd.daemon.bench import quality

    return quality.files_to_type(args, workdir, args.editors_count, args.editors_seed)


def server_flags(args: argparse.Namespace) -> list[str]:
    from tabd.daemon.commands.replay import server_flags as shared_flags

    flags = shared_flags(args)
    shape = args.shape
    if shape != "embedded" and not args.model:
        from tabd.predictor.bench import shapes

        flags += ["--model", str(shapes.model_dir(shape))]
    return flags


def replayed(files: list[str], editor: str, flags: list[str], args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """The replay summary of `files` typed in `editor`."""
    from tabd.daemon.sessions.driver import ReplayOptions
    from tabd.daemon.sessions.format import read_session, write_session
    from tabd.daemon.sessions.replayer import run_replay
    from tabd.daemon.sessions.typist import typed_session

    language, events = typed_session(files, seed=args.editors_seed, spans=args.editors_spans,
                                     max_chars=args.editors_max_chars, editor=editor)
    path = workdir / f"{editor}.jsonl"
    write_session(path, events, language)
    options = ReplayOptions(speed=0.0, think_ms=250.0, server_args=flags, accept=args.editors_user,
                            progress=not args.json, check_sync=True)
    measured = run_replay([read_session(path)], options)
    if measured.error:
        raise RuntimeError(f"replay of the {editor} session failed: {measured.error}")
    return measured.summary()


def figures(summary: dict[str, Any]) -> dict[str, Any]:
    """One editor's column."""
    reuse = summary["prompt_reuse"]["keystroke"]
    model = summary["latency_ms"]["model"]
    keys = summary["keystrokes"]
    return {
        "prompt_reuse_p50": reuse["p50"],
        "prompt_reuse_p10": reuse["p10"],
        "prefill_tokens_per_keystroke": round(reuse["prefill_tokens"] / keys, 1) if keys else 0.0,
        "prefill_tokens_p50": reuse["prefill_tokens_p50"],
        "model_p50_ms": model["p50"],
        "model_p99_ms": model["p99"],
        # a keystroke right after an opening bracket: VS Code has auto-closed it, a plain buffer has not
        "model_after_opener_p50_ms": summary["latency_ms"]["model_after_opener"]["p50"],
        "saved_share": summary["saved_share"],
        "acceptance_rate": summary["acceptance_rate"],
        "after_accept_hit_rate": summary["after_accept"]["hit_rate"],
        "keystrokes": keys,
        "moves": summary.get("moves", 0),
        "model_runs": reuse["requests"],
        "sync_mismatches": summary.get("sync", {}).get("mismatches", 0),
    }


def ratios(plain: dict[str, Any], vscode: dict[str, Any]) -> dict[str, float | None]:
    return {key: (round(vscode[key] / plain[key], 3) if plain[key] else None)
            for key in ("prompt_reuse_p50", "prompt_reuse_p10", "prefill_tokens_per_keystroke", "model_p50_ms",
                        "model_p99_ms", "model_after_opener_p50_ms", "saved_share", "acceptance_rate", "after_accept_hit_rate")}


def run_section(args: argparse.Namespace) -> dict[str, Any]:
    flags = server_flags(args)
    with tempfile.TemporaryDirectory(prefix="tabd-editors-") as tmp:
        workdir = Path(tmp)
        files = files_to_type(args, workdir)
        columns = {editor: figures(replayed(files, editor, flags, args, workdir)) for editor in EDITORS}
    return {"files": [Path(f).name for f in files], "user": args.editors_user,
            "shape": args.shape, **columns,
            "ratios": ratios(columns["plain"], columns["vscode"])}
