"""`tabd session from-file FILE... | from-diff OLD NEW | from-git REPO -o SESSION.jsonl`: sessions that type real
files, a real diff, or the commits of a real git history, as a person would."""
from __future__ import annotations

import argparse
import sys

from tabd.daemon.sessions.format import write_session


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="session_command", metavar="ACTION")
    p = sub.add_parser("from-file", help="retype spans of real files keystroke by keystroke",
                       description="Remove spans (function bodies, blocks, lines) from each FILE and retype them "
                                   "at a human rate, with pauses, typos fixed by backspace and auto-indent, in an editor that "
                                   "auto-closes brackets and quotes as VS Code does (--editor plain: it does not).")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("-o", "--output", required=True, metavar="SESSION.jsonl")
    p.add_argument("--seed", type=int, default=0, help="same files and seed give the same session (default 0)")
    p.add_argument("--cps", type=float, default=8.0, help="mean keystrokes per second (default 8)")
    p.add_argument("--spans", type=int, default=3, help="spans retyped per file (default 3)")
    p.add_argument("--max-span-chars", type=int, default=400, help="longest span retyped (default 400)")
    p.add_argument("--typo-rate", type=float, default=0.02, help="chance of a typo per letter (default 0.02)")
    p.add_argument("--editor", choices=["vscode", "plain"], default="vscode",
                   help="vscode (default): VS Code's auto-closed pairs, overtype and Enter between brackets, with "
                        "cursor moves where it sends no change; plain: every character typed into a plain buffer")
    d = sub.add_parser("from-diff", help="type the diff between two files or directories as a person would",
                       description="Open each OLD file and turn it into the NEW one as a person would: move to each "
                                   "hunk in file order, select and delete the old text, type the new text at a human "
                                   "rate (pauses, typos fixed, Enter with auto-indent), pause between hunks. OLD and "
                                   "NEW are two files or two directories (files paired by relative path); binary and "
                                   "non-UTF-8 files, and files only in OLD, are skipped with a note.")
    d.add_argument("old", metavar="OLD")
    d.add_argument("new", metavar="NEW")
    d.add_argument("-o", "--output", required=True, metavar="SESSION.jsonl")
    d.add_argument("--seed", type=int, default=0, help="same diff and seed give the same session (default 0)")
    d.add_argument("--cps", type=float, default=8.0, help="mean keystrokes per second (default 8)")
    d.add_argument("--typo-rate", type=float, default=0.02, help="chance of a typo per letter (default 0.02)")
    d.add_argument("--editor", choices=["vscode", "plain"], default="vscode",
                   help="vscode (default): VS Code's auto-closed pairs and overtype; plain: a plain buffer")
    g = sub.add_parser("from-git", help="type the last commits of a git history as a person would",
                       description="Read the last N non-merge commits of REPO (a work tree or a bare git directory) "
                                   "that modify source files of a language tabd knows, and type each commit's changes, "
                                   "oldest commit first, file by file: open the old file, move to each place, select "
                                   "and delete, type the new text, a pause of a second or more between places. Files "
                                   "over 200 KB, not UTF-8, added, deleted or renamed are left out, and commits with "
                                   "more than 40 hunks (reformats) skipped.")
    g.add_argument("repo", metavar="REPO")
    g.add_argument("--commits", type=int, default=10, help="commits typed, the newest ones (default 10)")
    g.add_argument("--rev", metavar="RANGE", help="the revision or range to read commits from (default HEAD)")
    g.add_argument("-o", "--output", required=True, metavar="SESSION.jsonl")
    g.add_argument("--seed", type=int, default=0, help="same history and seed give the same session (default 0)")
    g.add_argument("--cps", type=float, default=8.0, help="mean keystrokes per second (default 8)")
    g.add_argument("--typo-rate", type=float, default=0.02, help="chance of a typo per letter (default 0.02)")
    g.add_argument("--editor", choices=["vscode", "plain"], default="vscode",
                   help="vscode (default): VS Code's auto-closed pairs and overtype; plain: a plain buffer")


def run(args: argparse.Namespace) -> int:
    if args.session_command == "from-diff":
        return run_from_diff(args)
    if args.session_command == "from-git":
        return run_from_git(args)
    if args.session_command != "from-file":
        print("usage: tabd session from-file FILE... -o SESSION.jsonl [--seed N] [--cps 8] [--spans N] "
              "[--editor vscode|plain]\n       tabd session from-diff OLD NEW -o SESSION.jsonl [--seed N] [--cps 8] "
              "[--editor vscode|plain]\n       tabd session from-git REPO -o SESSION.jsonl [--commits N] [--rev RANGE] "
              "[--seed N]", file=sys.stderr)
        return 2
    from tabd.daemon.sessions.typist import TypingStyle, typed_session

    if args.cps <= 0 or args.spans < 0:
        print("tabd session: --cps must be > 0 and --spans >= 0", file=sys.stderr)
        return 2
    try:
        language, events = typed_session(args.files, seed=args.seed, spans=args.spans, max_chars=args.max_span_chars,
                                         style=TypingStyle(cps=args.cps, typo_rate=args.typo_rate), editor=args.editor)
    except (OSError, UnicodeDecodeError, RuntimeError) as exc:  # RuntimeError: the editor typist lost step (a bug)
        print(f"tabd session: {exc}", file=sys.stderr)
        return 1
    if not _written(args.output, events, language):
        return 1
    keys = sum(1 for e in events if e["op"] in ("change", "move"))
    duration = events[-1]["t"] if events else 0.0
    print(f"{args.output}: {len(args.files)} file(s), {keys} keystrokes ({args.editor}), {duration:.1f} s typed",
          file=sys.stderr)
    return 0


def run_from_diff(args: argparse.Namespace) -> int:
    from tabd.daemon.sessions.diff_typist import diff_session, pair_files
    from tabd.daemon.sessions.typist import TypingStyle

    if args.cps <= 0:
        print("tabd session: --cps must be > 0", file=sys.stderr)
        return 2
    try:
        pairs, notes = pair_files(args.old, args.new)
    except (OSError, ValueError) as exc:
        print(f"tabd session: {exc}", file=sys.stderr)
        return 1
    for note in notes:
        print(f"tabd session: {note}", file=sys.stderr)
    try:
        language, events = diff_session(pairs, seed=args.seed, style=TypingStyle(cps=args.cps, typo_rate=args.typo_rate),
                                        editor=args.editor)
    except RuntimeError as exc:  # a typist that lost step (a bug): said, not a traceback
        print(f"tabd session: {exc}", file=sys.stderr)
        return 1
    if not _written(args.output, events, language):
        return 1
    keys = sum(1 for e in events if e["op"] in ("change", "move"))
    edits = sum(1 for e in events if e["op"] == "move" and "hunk" in e)
    duration = events[-1]["t"] if events else 0.0
    print(f"{args.output}: {len(pairs)} file(s), {edits} edits, {keys} keystrokes ({args.editor}), "
          f"{duration:.1f} s typed", file=sys.stderr)
    return 0


def run_from_git(args: argparse.Namespace) -> int:
    from tabd.daemon.sessions.git_history import GitError, git_session, history, repo_name
    from tabd.daemon.sessions.typist import TypingStyle

    if args.cps <= 0 or args.commits < 1:
        print("tabd session: --cps must be > 0 and --commits >= 1", file=sys.stderr)
        return 2
    try:
        found = history(args.repo, args.commits, args.rev)
    except GitError as exc:
        print(f"tabd session: {exc}", file=sys.stderr)
        return 1
    if not found:
        print(f"tabd session: {args.repo}: no commit modifies a source file tabd knows", file=sys.stderr)
        return 1
    try:
        language, events = git_session(found, repo_name(args.repo), seed=args.seed,
                                       style=TypingStyle(cps=args.cps, typo_rate=args.typo_rate), editor=args.editor)
    except RuntimeError as exc:  # a typist that lost step (a bug): said, not a traceback
        print(f"tabd session: {exc}", file=sys.stderr)
        return 1
    if not _written(args.output, events, language):
        return 1
    files = sum(len(c.files) for c in found)
    places = sum(1 for e in events if e["op"] == "move" and "hunk" in e)
    keys = sum(1 for e in events if e["op"] in ("change", "move"))
    duration = events[-1]["t"] if events else 0.0
    print(f"{args.output}: {len(found)} commit(s), {files} file(s), {places} places, {keys} keystrokes "
          f"({args.editor}), {duration:.1f} s typed", file=sys.stderr)
    return 0


def _written(output: str, events: list, language: str) -> bool:
    """The session written to `output`; False, said on stderr, when it cannot be."""
    try:
        write_session(output, events, language)
    except OSError as exc:
        print(f"tabd session: cannot write {output}: {exc.strerror or exc}", file=sys.stderr)
        return False
    return True
