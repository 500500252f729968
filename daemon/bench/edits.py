"""`tabd bench edits [--json]`: next-edit suggestions on real edits, from release diffs the model never trained on.

Two pinned releases of a few small pure-Python distributions are downloaded (`pip download --no-deps`, wheels, into
.cache/edits/), and the diffs of their .py files are cut into sessions (daemon/sessions/release_edits.py):
"propagation" sessions make the hunks of a file that repeat one rename, "rest" sessions the other hunks. A person
types each session (the from-diff typist: move to the hunk, select and delete, type, pause), and the sessions are
replayed at full speed through a real `tabd serve` by the Tab user, four ways in the same run:
- completion: today's completion-only user (no copilotInlineEdit requests);
- nes: the edit user, with the server's edit sources as shipped;
- propagation: the edit user, with the server's propagation source alone;
- model: the edit user, with the model edit source alone (null when the server offers none).
Per way and group (and "all": both groups together): edits shown, accepts per edit shown, the share of the person's keys saved (edits and completions
together; and by edits alone), edits shown that were not the next edit, and after an accepted edit the share of next
edits answered from memory with the client's latency p50/p99.

The distributions are held out twice over: none is in the training corpus list (predictor/training/distributions.txt)
and none is installed on this machine (`pip list`); the section refuses to run otherwise.

`--edits-git REPO [REPO...]` measures instead on real commit histories, case by case (edit_cases.py, played by
case_driver.py as copilot-lsp asks): per state "repeat due", "other due" or "none due", whether the first edit shown
is exactly the next place, the same figures for the plain-text baseline (no server), after a taken edit the share
of next answers from the server's memory, and the answer's latency after the pause (docs/next-edits-bench.md).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

# (name, old release, new release): small pure-Python wheels whose diffs rename things (bidict's and funcy's many
# times), never trained on
RELEASES = (("bidict", "0.21.4", "0.22.0"), ("funcy", "1.18", "2.0"), ("schedule", "0.6.0", "1.0.0"),
            ("parse", "1.19.1", "1.20.0"))
WAYS = ("completion", "nes", "propagation", "model")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("edits section")
    g.add_argument("--edits-propagation", type=int, default=6, help="propagation sessions replayed (default 6)")
    g.add_argument("--edits-rest", type=int, default=6, help="other release-diff sessions replayed (default 6)")
    g.add_argument("--edits-per-session", type=int, default=5, help="most hunks in one session (default 5)")
    g.add_argument("--edits-max-chars", type=int, default=200, help="most characters typed in a rest session (default 200)")
    g.add_argument("--edits-seed", type=int, default=11, help="session choice and typist seed (default 11)")
    g.add_argument("--edits-editor", choices=["vscode", "plain"], default="vscode", help="the typist's editor (default vscode)")
    g.add_argument("--edits-cache", default=".cache/edits", metavar="DIR", help="where the wheels go (default .cache/edits)")
    g.add_argument("--edits-git", nargs="+", metavar="REPO",
                   help="measure on these git histories (work trees or bare git directories) instead of the release "
                        "diffs: each commit-file's places made one by one, a next edit asked as copilot-lsp asks")
    g.add_argument("--edits-commits", type=int, default=30, help="commits per repository, newest first (default 30)")
    g.add_argument("--edits-rev", metavar="RANGE", help="the revision or range whose commits are read (default HEAD)")
    g.add_argument("--edits-max-places", type=int, default=8,
                   help="states per commit-file: k stops here (default 8); a file with more places has no none-due state")
    g.add_argument("--edits-servers", type=int, default=1,
                   help="servers run side by side, each with its share of the files (default 1; latency is only "
                        "comparable at 1)")
    g.add_argument("--edits-pause-ms", type=float,
                   help="the server's pause before it answers (default: tabd/stats edits.pause_ms, else 500)")
    g.add_argument("--edits-cases-out", metavar="FILE",
                   help="each case's result as JSONL (the tune repositories only: held-out cases are not looked at)")


# ---------------------------------------------------------------- the releases


def held_out_problems(names: list[str]) -> list[str]:
    """Why any of `names` is not held out (in the training list, or installed here); empty when all are."""
    from tabd.predictor.training.corpus import installed_names, normalize, read_distributions

    corpus = {name for name, _ in read_distributions()}
    installed = installed_names()
    out = []
    for name in names:
        n = normalize(name)
        if n in corpus:
            out.append(f"{name} is in the training corpus list")
        if n in installed:
            out.append(f"{name} is installed on this machine (pip list)")
    return out


def wheel(cache: Path, name: str, version: str) -> Path:
    """The wheel of name==version in `cache`, downloaded with pip when it is not there yet."""
    def found() -> Path | None:
        stem = name.replace("-", "_").lower()
        return next((p for p in sorted(cache.glob("*.whl")) if p.name.lower().startswith(f"{stem}-{version}-")), None)

    have = found()
    if have is not None:
        return have
    cache.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:", "-d", str(cache),
           f"{name}=={version}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    have = found()
    if proc.returncode != 0 or have is None:
        raise RuntimeError(f"cannot download {name}=={version}: {proc.stderr.strip()[-300:] or 'no wheel'}")
    return have


def sessions_by_group(args: argparse.Namespace) -> dict[str, list[Any]]:
    from tabd.daemon.sessions.release_edits import GROUPS, pick, python_sources, release_sessions

    cache = Path(args.edits_cache)
    found = []
    for name, old, new in RELEASES:
        found += release_sessions(name, python_sources(wheel(cache, name, old)), python_sources(wheel(cache, name, new)),
                                  max_edits=args.edits_per_session, max_chars=args.edits_max_chars)
    counts = {"propagation": args.edits_propagation, "rest": args.edits_rest}
    return {group: pick(found, group, counts[group], args.edits_seed) for group in GROUPS}


# ---------------------------------------------------------------- the server's edit sources


def source_flags(source: str) -> list[str] | None:
    """The `tabd serve` flags that leave only `source` ("propagation" or "model") proposing edits; None when the server
    has no such source."""
    from tabd.daemon.commands.serve import add_arguments as serve_arguments

    parser = argparse.ArgumentParser(add_help=False)
    serve_arguments(parser)
    option = next((a for a in parser._actions if "--edit-sources" in a.option_strings), None)
    if option is None:  # a server whose one edit source is propagation (#26's first): no flag needed, no model source
        return [] if source == "propagation" else None
    if option.choices is not None and source not in option.choices:
        return None
    return ["--edit-sources", source]


# ---------------------------------------------------------------- replaying


def replayed(sessions: list[Any], flags: list[str], edits: bool, args: argparse.Namespace, workdir: Path,
             name: str) -> Any:
    from tabd.daemon.sessions.driver import ReplayOptions
    from tabd.daemon.sessions.format import read_session, write_session
    from tabd.daemon.sessions.release_edits import session_events

    events = session_events(sessions, workdir / "src", seed=args.edits_seed, editor=args.edits_editor)
    path = workdir / f"{name}.jsonl"
    write_session(path, events, "python")
    options = ReplayOptions(speed=0.0, think_ms=250.0, server_args=flags, accept="tab", progress=not args.json,
                            check_sync=True, edits=edits)
    from tabd.daemon.sessions.replayer import run_replay

    measured = run_replay([read_session(path)], options)
    if measured.error:
        raise RuntimeError(f"replay of {name} failed: {measured.error}")
    return measured


def figures(summary: dict[str, Any]) -> dict[str, Any]:
    """One way's figures on one group."""
    e = summary["edits"]
    return {
        "edits_shown": e["shown"],
        "edits_accepted": e["accepted"],
        "accepts_per_edit_shown": e["acceptance_rate"],
        "keystrokes_saved_share": e["keystrokes_saved_share"],
        "edit_keystrokes_saved_share": e["edit_keystrokes_saved_share"],
        "shown_not_next": e["shown_not_next"],
        "after_accept_hit_rate": e["after_accept"]["hit_rate"],
        "after_accept_requests": e["after_accept"]["requests"],
        "after_accept_p50_ms": e["latency_ms"]["after_accept"]["p50"],
        "after_accept_p99_ms": e["latency_ms"]["after_accept"]["p99"],
        "edit_p50_ms": e["latency_ms"]["all"]["p50"],
        "completion_accepted": summary["accepted"],
        "keystrokes_recorded": e["keystrokes_recorded"],
        "sync_mismatches": summary.get("sync", {}).get("mismatches", 0),
    }


def run_section(args: argparse.Namespace) -> dict[str, Any]:
    if getattr(args, "edits_git", None):
        return run_git_section(args)
    from tabd.daemon.commands.replay import server_flags

    problems = held_out_problems([name for name, _, _ in RELEASES])
    if problems:
        raise RuntimeError("the bench distributions must be held out: " + "; ".join(problems))
    flags = server_flags(args)
    groups = sessions_by_group(args)
    out: dict[str, Any] = {
        "releases": [f"{n} {a} -> {b}" for n, a, b in RELEASES],
        "editor": args.edits_editor,
        "sessions": {g: {"sessions": len(s), "edits": sum(len(x.chosen) for x in s),
                         "files": sorted({f"{x.dist}/{x.path}" for x in s})} for g, s in groups.items()},
    }
    ways: dict[str, tuple[list[str], bool] | None] = {"completion": (flags, False), "nes": (flags, True)}
    for source in ("propagation", "model"):
        extra = source_flags(source)
        ways[source] = None if extra is None else ([*flags, *extra], True)
    with tempfile.TemporaryDirectory(prefix="tabd-edits-") as tmp:
        workdir = Path(tmp)
        for way, setting in ways.items():
            if setting is None:
                out[way] = None
                continue
            same = next((w for w, other in ways.items() if w != way and other == setting and w in out), None)
            if same is not None:  # the same server and user as a way measured already (one source only): not rerun
                out[way] = out[same]
                out.setdefault("same_as", {})[way] = same
                continue
            from tabd.daemon.sessions.measure import Measurements

            way_flags, edits = setting
            measured = {group: replayed(sessions, way_flags, edits, args, workdir, f"{way}-{group}")
                        for group, sessions in groups.items() if sessions}
            out[way] = {group: figures(m.summary()) for group, m in measured.items()}
            out[way]["all"] = figures(Measurements.merged(list(measured.values())).summary())
            prop = out[way].get("propagation")
            if prop is not None:  # the edits after each session's first: the ones propagation can propose
                followups = out["sessions"]["propagation"]["edits"] - out["sessions"]["propagation"]["sessions"]
                prop["followups_taken_share"] = round(min(1.0, prop["edits_accepted"] / followups), 4) if followups else 0.0
    # the edit user's gain over the completion-only user, in points of the person's keys saved
    out["gain_points"] = {g: round(100 * (out["nes"][g]["keystrokes_saved_share"]
                                          - out["completion"][g]["keystrokes_saved_share"]), 1) for g in out["nes"]}
    return out


# ---------------------------------------------------------------- real histories, case by case


def _quantiles(values: list[float]) -> dict[str, float | None]:
    ordered = sorted(values)

    def rank(q: float) -> float | None:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2) if ordered else None

    return {"p50": rank(0.5), "p95": rank(0.95)}


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def case_figures(results: list[Any]) -> dict[str, Any]:
    """The totals of a list of CaseResult: per due class, the baseline, after a taken edit, latency."""
    out: dict[str, Any] = {"cases": len(results)}
    base: dict[str, Any] = {}
    for due in ("repeat", "other", "none"):
        mine = [r for r in results if r.due == due]
        verdicts = {v: sum(1 for r in mine if r.verdict == v) for v in ("exact", "later", "wrong")}
        shown = sum(verdicts.values())
        row: dict[str, Any] = {"states": len(mine), "shown": shown}
        if due == "none":
            row["false_share"] = _share(shown, len(mine))
        else:
            row.update(verdicts, exact_share=_share(verdicts["exact"], len(mine)))
        out[f"{due}_due"] = row
        b_shown = sum(1 for r in mine if r.baseline != "none")
        b_exact = sum(1 for r in mine if r.baseline == "exact")
        base[f"{due}_due"] = ({"shown": b_shown, "false_share": _share(b_shown, len(mine))} if due == "none" else
                              {"shown": b_shown, "exact": b_exact, "exact_share": _share(b_exact, len(mine))})
    out["baseline"] = base
    taken = [r.after_accept for r in results if r.after_accept is not None]
    memory = sum(1 for a in taken if a["origin"] == "cache")
    out["after_accept"] = {"asks": len(taken), "from_memory": memory, "memory_share": _share(memory, len(taken)),
                           "exact": sum(1 for a in taken if a["verdict"] == "exact"),
                           "origin_unknown": sum(1 for a in taken if a["origin"] is None),
                           "answer_ms": _quantiles([a["answer_ms"] for a in taken if a["answer_ms"] is not None])}
    answered = [r for r in results if r.error is None]
    out["latency_ms"] = {"answer": _quantiles([r.answer_ms for r in answered]),
                         "after_pause": _quantiles([r.after_pause_ms for r in answered]),
                         "since_keystroke": _quantiles([r.since_key_ms for r in answered]),
                         "pause_ms": max((r.pause_ms for r in answered), default=None)}
    out["errors"] = len(results) - len(answered) + sum(1 for a in taken if a.get("error"))
    out["sync_mismatches"] = sum(1 for r in results if not r.sync)
    return out


def run_git_section(args: argparse.Namespace) -> dict[str, Any]:
    import dataclasses
    import json
    import time

    from tabd.daemon.commands.replay import server_flags
    from tabd.daemon.sessions.case_driver import CaseOptions, play
    from tabd.daemon.sessions.edit_cases import cases_of
    from tabd.daemon.sessions.git_history import GitError, history, repo_name, revision

    if args.edits_commits <= 0 or args.edits_max_places < 1 or args.edits_servers < 1:
        raise RuntimeError("--edits-commits, --edits-max-places and --edits-servers must be at least 1")
    began = time.monotonic()
    groups, repos = [], []
    for repo in args.edits_git:
        try:
            name = repo_name(repo)
            found = history(repo, args.edits_commits, args.edits_rev)
            head = revision(repo, args.edits_rev)
        except GitError as exc:
            raise RuntimeError(str(exc)) from None
        mine = cases_of(name, found, args.edits_max_places)
        groups.extend(mine)
        repos.append({"name": name, "rev": head, "commits": len(found), "files": sum(len(c.files) for c in found),
                      "files_with_cases": len(mine), "cases": sum(len(g) for g in mine)})
    if not args.json or sys.stderr.isatty():
        # about a second per place made before each request, and about 4 s per case around it (tune run, 2026-12-06)
        made = sum(c.k for g in groups for c in g)
        minutes = (made * 1.05 + sum(len(g) for g in groups) * 3.7) / args.edits_servers / 60
        print(f"tabd bench edits: {sum(len(g) for g in groups)} cases in {len(groups)} commit-files, about "
              f"{minutes:.0f} min with {args.edits_servers} server(s)", file=sys.stderr)
    options = CaseOptions(server_args=server_flags(args), seed=args.edits_seed, servers=args.edits_servers,
                          pause_s=None if args.edits_pause_ms is None else args.edits_pause_ms / 1000.0,
                          progress=not args.json)
    results = play(groups, options)
    if args.edits_cases_out:
        with open(args.edits_cases_out, "w", encoding="utf-8") as fh:
            for r in results:
                fh.write(json.dumps(dataclasses.asdict(r), ensure_ascii=False) + "\n")
    out: dict[str, Any] = {"mode": "git", "repos": repos, "server_args": options.server_args,
                           "servers": options.servers, **case_figures(results)}
    out["by_repo"] = {r["name"]: {k: v for k, v in case_figures([x for x in results if x.repo == r["name"]]).items()
                                  if k in ("cases", "repeat_due", "none_due", "after_accept")} for r in repos}
    out["seconds"] = round(time.monotonic() - began, 1)
    return out
