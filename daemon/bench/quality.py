"""`tabd bench quality [FILES...]`: suggestion quality the way users meet it.

Files are typed by the typist (`session from-file`) and the session is replayed
through a real `tabd serve` twice per engine, once for each simulated user:
`tab` takes only a whole suggestion that is exactly what comes next; `words`
also takes the leading words that match (`tabd replay`'s default). The engine
is the model the flags name, and beside it the copy baseline
(`--backend copy`: no model, what followed the last occurrence of the text
before the cursor). Model-level figures on the held-out stdlib split come from
predictor/bench/heldout.py.

Default files: a seeded sample of the held-out stdlib split, never trained on.
"""
from __future__ import annotations

import argparse
import random
import tempfile
from pathlib import Path
from typing import Any

USERS = ("tab", "words")
USER_KEYS = ("keystrokes_saved_share", "acceptance_rate", "chars_per_accept", "shown_per_100_keystrokes",
             "saved_share", "accepted", "full_accepts", "partial_accepts", "shown", "accepted_chars_full",
             "distinct_shown", "acceptance_rate_distinct")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("quality section")
    g.add_argument("quality_files", nargs="*", metavar="FILES", default=[],
                   help="quality: files to type (default: a seeded sample of the held-out stdlib split)")
    g.add_argument("--quality-count", type=int, default=3, help="held-out files sampled when none are given (default 3)")
    g.add_argument("--quality-seed", type=int, default=11, help="sample and typist seed (default 11)")
    g.add_argument("--quality-spans", type=int, default=3, help="spans typed per file (default 3)")
    g.add_argument("--quality-max-chars", type=int, default=400, help="longest span typed (default 400)")
    g.add_argument("--quality-editor", choices=["plain", "vscode"], default="vscode",
                   help="how the typist's editor types: vscode (default: auto-closed pairs, overtype) or plain")
    g.add_argument("--quality-cuts", type=int, default=120, help="held-out cuts for the model-level figures (default 120)")
    g.add_argument("--quality-thresholds", default="", metavar="T,T,...",
                   help="also replay the tab user at each --min-confidence (the calibration table)")
    g.add_argument("--quality-no-baseline", action="store_true", help="skip the copy baseline")
    g.add_argument("--quality-no-model-figures", action="store_true", help="skip the model-level figures")
    g.add_argument("--quality-cross-file", action="store_true",
                   help="cross-file mode: third-party modules typed with the modules they import open, with and without "
                        "workspace context (daemon/bench/crossfile.py), and the warm-up figures")
    g.add_argument("--quality-cross-parts", default="tab,warmup", metavar="PART,...",
                   help="cross-file mode: which of tab, words, warmup to run (default tab,warmup)")
    g.add_argument("--quality-cross-modes", default="edit,new", metavar="MODE,...",
                   help="cross-file mode: edit (spans of a module retyped, the rest present) and/or new (the code "
                        "after its imports written, nothing after the cursor); default edit,new")


def held_out_sample(count: int, seed: int, min_chars: int = 2_000, max_chars: int = 40_000) -> list[tuple[str, str]]:
    """(name, text) of `count` held-out stdlib files of an everyday size, chosen by seed."""
    from tabd.predictor.training.data import stdlib_sources

    _, val = stdlib_sources()
    fitting = [s for s in val if min_chars <= len(s.text) <= max_chars and not s.test]
    rng = random.Random(seed)
    return [(s.path, s.text) for s in rng.sample(fitting, min(count, len(fitting)))]


def files_to_type(args: argparse.Namespace, workdir: Path, count: int | None = None,
                  seed: int | None = None) -> list[str]:
    """FILES (the bench command's one positional list), else `count` held-out stdlib files written to workdir
    (--quality-count and --quality-seed by default).

    A given file is typed as a copy in workdir (under its own name): where it lies it may be a file the daemon keeps
    away from the model (content exclusion: a `.venv`'s site-packages is what git ignores in a repository), and the
    bench measures the model on its text, not the exclusion."""
    given = list(args.quality_files or [])
    for path in given:
        if not Path(path).is_file():
            raise RuntimeError(f"{path}: no such file")
    if given:
        copies = []
        for n, path in enumerate(given):
            copy = workdir / "given" / str(n) / Path(path).name
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_bytes(Path(path).read_bytes())
            copies.append(str(copy))
        return copies
    out = []
    for name, text in held_out_sample(args.quality_count if count is None else count,
                                      args.quality_seed if seed is None else seed):
        path = workdir / name.replace("/", "__")
        path.write_text(text, encoding="utf-8")
        out.append(str(path))
    return out


def make_session(files: list[str], args: argparse.Namespace, workdir: Path, name: str = "quality") -> Path:
    from tabd.daemon.sessions.format import write_session
    from tabd.daemon.sessions.typist import typed_session

    language, events = typed_session(files, seed=args.quality_seed, spans=args.quality_spans,
                                     max_chars=args.quality_max_chars, editor=args.quality_editor)
    path = workdir / f"{name}.jsonl"
    write_session(path, events, language)
    return path


def replay_user(session: Path, user: str, server_args: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """One replay at full speed (each keystroke waits for its answer) by the `user`."""
    from tabd.daemon.sessions.driver import ReplayOptions
    from tabd.daemon.sessions.format import read_session
    from tabd.daemon.sessions.replayer import run_replay

    options = ReplayOptions(speed=0.0, think_ms=250.0, server_args=server_args, accept=user,
                            progress=not args.json)
    measured = run_replay([read_session(session)], options)
    if measured.error:
        raise RuntimeError(f"replay ({user} user) failed: {measured.error}")
    summary = measured.summary()
    row = {k: summary[k] for k in USER_KEYS}
    row["after_accept_p50_ms"] = summary["latency_ms"]["after_accept"]["p50"]
    row["after_accept_hit_rate"] = summary["after_accept"]["hit_rate"]
    row["keystrokes"] = summary["keystrokes"]
    return row


def engine_rows(session: Path, server_args: list[str], args: argparse.Namespace) -> dict[str, Any]:
    return {user: replay_user(session, user, server_args, args) for user in USERS}


def by_language(files: list[str]) -> dict[str, list[str]]:
    """The files grouped by language (from the extension, as the daemon reads an unknown languageId)."""
    from tabd.daemon.context.languages import EXTENSIONS

    groups: dict[str, list[str]] = {}
    for f in files:
        groups.setdefault(EXTENSIONS.get(Path(f).suffix.lower(), "plaintext"), []).append(f)
    return groups


def without_backend(flags: list[str]) -> list[str]:
    out, skip = [], False
    for flag in flags:
        if skip:
            skip = False
        elif flag == "--backend":
            skip = True
        else:
            out.append(flag)
    return out


def thresholds(text: str) -> list[float]:
    if not text:
        return []
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise RuntimeError(f"--quality-thresholds: expected numbers like 0,0.2,0.4, got {text!r}") from None
    if any(not 0 <= v <= 1 for v in values):
        raise RuntimeError("--quality-thresholds: each value must be within 0..1")
    return values


def run_section(args: argparse.Namespace) -> dict[str, Any]:
    from tabd.daemon.commands.replay import server_flags

    calibrate = thresholds(args.quality_thresholds)
    flags = server_flags(args)
    if args.quality_cross_file:
        from tabd.daemon.bench.crossfile import run_cross_file

        return {"cross_file": run_cross_file(args, flags)}
    with tempfile.TemporaryDirectory(prefix="tabd-quality-") as tmp:
        workdir = Path(tmp)
        files = files_to_type(args, workdir)
        session = make_session(files, args, workdir)
        out: dict[str, Any] = {"files": [Path(f).name for f in files], "editor": args.quality_editor}
        out.update(engine_rows(session, flags, args))
        languages = by_language(files)
        if len(languages) > 1:  # files of several languages: the Tab user's figures per language too
            out["by_language"] = {lang: replay_user(make_session(group, args, workdir, f"quality-{lang}"), "tab",
                                                    flags, args) for lang, group in languages.items()}
        elif languages:
            out["language"] = next(iter(languages))
        if not args.quality_no_baseline:
            base = without_backend(flags)
            out["copy_baseline"] = engine_rows(session, [*base, "--backend", "copy"], args)
        if calibrate:
            out["calibration"] = [{"min_confidence": t, **replay_user(session, "tab", [*flags, "--min-confidence", str(t)], args)}
                                  for t in calibrate]
    if not args.quality_no_model_figures:
        from tabd.predictor.bench.heldout import model_figures

        out.update(model_figures(args))
    return out
