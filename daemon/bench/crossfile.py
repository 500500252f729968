"""Cross-file figures: a module of a third-party distribution typed while the modules it imports are open.

The distributions come from the site-packages of the Python this runs on (none
of them is trained on). Each case's session opens the target's sibling modules
(open events of files never typed in), then types the target in one of two
ways: `edit` retypes spans of it with the rest of the file present, `new`
writes the code after its imports with nothing after the cursor. Each is replayed through a real `tabd serve` with and without
workspace context, the Tab user first, and the server's log gives the prompt
reuse of keystroke requests and after-accept prefetches. A second part measures
warm-up: `tabd/focus` at a new place, then the first request there, against a
keystroke request.

    tabd bench quality --quality-cross-file [--quality-cross-parts tab,words,warmup] [--quality-cross-modes edit,new] [--json]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PACKAGES = ("flask", "click", "jinja2", "itsdangerous", "attr", "jsonschema", "packaging", "docker", "blinker",
            "parso", "jedi", "networkx", "prompt_toolkit", "werkzeug", "markupsafe")
RELATIVE = re.compile(r"^\s*from\s+\.(\w+)\s+import\b|^\s*from\s+\.\s+import\s+(\w+)", re.M)


def site_packages() -> Path:
    """The base interpreter's site-packages: third-party code this machine has, never trained on."""
    v = sys.version_info
    return Path(sys.base_prefix) / "lib" / f"python{v.major}.{v.minor}" / "site-packages"


def cross_file_cases(count: int = 4, seed: int = 11, root: Path | None = None, max_open: int = 3,
                     min_chars: int = 3_000, max_chars: int = 25_000) -> list[tuple[Path, list[Path]]]:
    """(target, files open beside it) for `count` distributions: a module and the sibling modules it imports."""
    root = root or site_packages()
    rng = random.Random(seed)
    cases: list[tuple[Path, list[Path]]] = []
    packages = [p for p in PACKAGES if (root / p).is_dir()]
    rng.shuffle(packages)
    for name in packages:
        pkg = root / name
        targets = []
        for path in sorted(pkg.glob("*.py")):
            text = path.read_text(encoding="utf-8", errors="replace")
            if not min_chars <= len(text) <= max_chars:
                continue
            siblings = [pkg / f"{m}.py" for pair in RELATIVE.findall(text) for m in pair if m]
            siblings = list(dict.fromkeys(s for s in siblings if s.is_file() and s != path))
            if siblings:
                targets.append((path, siblings[:max_open]))
        if targets:
            cases.append(rng.choice(targets))
        if len(cases) >= count:
            break
    return cases


def new_code_lines(text: str, chars: int) -> tuple[int, int]:
    """(first, last) line of the code right after `text`'s import block, about `chars` characters of it."""
    from tabd.daemon.context.chunk_store import import_block

    lines = text.split("\n")
    block = import_block(text)
    start = min(block[0] + 1 if block else 1, len(lines) - 1)
    end, used = start, len(lines[start]) + 1
    while end + 1 < len(lines) and used + len(lines[end + 1]) + 1 <= chars:
        end += 1
        used += len(lines[end]) + 1
    return start, end


def cross_file_session(target: Path, others: list[Path], seed: int = 11, spans: int = 3,
                       max_chars: int = 400, mode: str = "edit") -> tuple[str, list[dict[str, Any]]]:
    """(language, events): open `others` (never typed in), then type `target` with them open.

    `edit`: retype `spans` spans of the file, the rest of it present (editing a module).
    `new`: open the file's lines up to its imports and write the code after them, about
    `spans * max_chars` characters, nothing after the cursor (writing a module against
    the open ones: where a first use of a name from another file is common).
    """
    from tabd.daemon.sessions.typist import (TypingStyle, candidate_spans, choose_spans, file_events, language_of,
                                             writing_events)

    rng = random.Random(seed)
    events: list[dict[str, Any]] = []
    for i, other in enumerate(others):
        text = other.read_text(encoding="utf-8").replace("\r\n", "\n")
        events.append({"t": round(0.01 * i, 3), "op": "open", "uri": other.resolve().as_uri(),
                       "language": language_of(str(other)), "text": text})
    text = target.read_text(encoding="utf-8").replace("\r\n", "\n")
    uri, language = target.resolve().as_uri(), language_of(str(target))
    if mode == "new":
        first, last = new_code_lines(text, spans * max_chars)
        typed, t = writing_events(text, uri, language, first, last, rng, TypingStyle(), 0.5)
    elif mode == "edit":
        chosen = choose_spans(candidate_spans(text, str(target), max_chars=max_chars), spans, rng)
        typed, t = file_events(text, uri, language, chosen, rng, TypingStyle(), 0.5)
    else:
        raise ValueError(f"cross-file mode: edit or new, got {mode!r}")
    events += typed
    events += [{"t": round(t + 0.1 + 0.01 * i, 3), "op": "close", "uri": o.resolve().as_uri()} for i, o in enumerate(others)]
    return language_of(str(target)), events


NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
MIN_LINE = 6  # a stripped line shorter than this is punctuation or a keyword: no copy worth counting


def name_figures(events: list[dict[str, Any]], target_uri: str) -> dict[str, int]:
    """What workspace context could give at most: of the names the typist types into the target, how many are
    the first use of a name that the open files spell and the target (as opened, and typed so far) does not;
    and the characters of the lines typed that an open file holds verbatim (stripped) and the target does not.
    A perfect completion saves each one's rest after one typed character, one Tab: `first_use_rest_chars` for
    the names, `open_line_rest_chars` for the lines, `context_rest_chars` for both (a character counted once)."""
    opened, others, other_lines, typed = "", set(), set(), []
    for e in events:
        if e["op"] == "open":
            if e["uri"] == target_uri:
                opened = e["text"]
            else:
                others |= set(NAME.findall(e["text"]))
                other_lines |= {line.strip() for line in e["text"].split("\n")}
        elif e["op"] == "change" and e["uri"] == target_uri:
            if e["text"]:
                typed.append(e["text"])
            elif typed:  # a typo's backspace: the typist deletes only what it has just typed
                typed[-1] = typed[-1][:-1]
    seen = set(NAME.findall(opened))
    names = first_from_open = 0
    text = "".join(typed)
    by_name: set[int] = set()  # offsets in `text` a perfect completion would have written
    for m in NAME.finditer(text):
        names += 1
        if m.group() not in seen and m.group() in others:
            first_from_open += 1
            by_name.update(range(m.start() + 1, m.end() - 1))
        seen.add(m.group())
    seen_lines, by_line, at = {line.strip() for line in opened.split("\n")}, set(), 0
    for line in text.split("\n"):
        stripped = line.strip()
        if len(stripped) >= MIN_LINE and stripped not in seen_lines and stripped in other_lines:
            start = at + len(line) - len(line.lstrip())
            by_line.update(range(start + 1, start + len(stripped) - 1))
        seen_lines.add(stripped)
        at += len(line) + 1
    return {"names_typed": names, "first_use_of_an_open_file_s_name": first_from_open,
            "typed_chars": len(text), "first_use_rest_chars": len(by_name),
            "open_line_rest_chars": len(by_line), "context_rest_chars": len(by_name | by_line)}


def names_ceiling_ratio(names: dict[str, int], without_share: float, key: str = "first_use_rest_chars") -> float | None:
    """The with/without ratio if context completed every first use of an open file's name after its first
    character, on top of what the run without context saved: an upper bound on what names can add (generous:
    the run without context already writes some of them). `key="context_rest_chars"`: names and the lines an
    open file holds verbatim, together."""
    total = names.get("typed_chars", 0)
    if not total or not without_share:
        return None
    return round((without_share + names.get(key, 0) / total) / without_share, 3)


def write_sessions(cases, workdir: Path, seed: int, spans: int, mode: str = "edit",
                   names_seen: dict[str, int] | None = None) -> list[Path]:
    """The cases' sessions as files; `names_seen` (if given) sums their name_figures."""
    from tabd.daemon.sessions.format import write_session

    names_seen = {} if names_seen is None else names_seen
    out = []
    for n, (target, others) in enumerate(cases):
        language, events = cross_file_session(target, others, seed + n, spans, mode=mode)
        figures = name_figures(events, target.resolve().as_uri())
        for k, v in figures.items():
            names_seen[k] = names_seen.get(k, 0) + v
        path = workdir / f"cross-{mode}-{n}.jsonl"
        write_session(path, events, language)
        out.append(path)
    return out


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 4) if values else 0.0


def reuse_figures(log: Path) -> dict[str, Any]:
    """Prompt reuse from a serve log: keystroke requests (model runs, not after accept) and after-accept prefetches."""
    keys, prefetch = [], []
    for line in log.read_text().splitlines():
        e = json.loads(line)
        total = e.get("reused_tokens", 0) + e.get("prefill_tokens", 0)
        if not total:
            continue
        if e.get("event") == "completion" and e.get("origin") == "model" and not e.get("after_accept"):
            keys.append((e["reused_tokens"], total, e.get("context_tokens", 0)))
        elif e.get("event") == "prefetch" and e.get("outcome") == "finished" and e.get("depth") == 1:
            prefetch.append((e["reused_tokens"], total, e.get("context_tokens", 0)))

    def row(rows):
        return {"runs": len(rows), "median": _median([r / t for r, t, _ in rows]),
                "aggregate": round(sum(r for r, _, _ in rows) / max(1, sum(t for _, t, _ in rows)), 4),
                "context_tokens_median": _median([c for _, _, c in rows])}
    return {"keystroke": row(keys), "after_accept_prefetch": row(prefetch)}


def replay(sessions: list[Path], user: str, flags: list[str], log: Path, progress: bool) -> dict[str, Any]:
    from tabd.daemon.sessions.driver import ReplayOptions
    from tabd.daemon.sessions.format import read_session
    from tabd.daemon.sessions.replayer import run_replay

    options = ReplayOptions(speed=0.0, think_ms=250.0, server_args=[*flags, "--log", str(log)], accept=user,
                            progress=progress)
    measured = run_replay([read_session(s) for s in sessions], options)
    if measured.error:
        raise RuntimeError(f"cross-file replay ({user} user) failed: {measured.error}")
    s = measured.summary()
    return {"saved_share": s["saved_share"], "accepted": s["accepted"], "shown": s["shown"], "keystrokes": s["keystrokes"],
            "after_accept_hit_rate": s["after_accept"]["hit_rate"],
            "after_accept_p50_ms": s["latency_ms"]["after_accept"]["p50"], "reuse": reuse_figures(log)}


def run_cross_file(args: argparse.Namespace, flags: list[str]) -> dict[str, Any]:
    seed, count = args.quality_seed, args.quality_count
    parts = [p.strip() for p in args.quality_cross_parts.split(",") if p.strip()]
    if not parts or any(p not in ("tab", "words", "warmup") for p in parts):
        raise RuntimeError(f"--quality-cross-parts: a list of tab, words, warmup, got {parts!r}")
    modes = [m.strip() for m in args.quality_cross_modes.split(",") if m.strip()]
    if not modes or any(m not in ("edit", "new") for m in modes):
        raise RuntimeError(f"--quality-cross-modes: a list of edit, new, got {modes!r}")
    cases = cross_file_cases(count, seed)
    if not cases:
        raise RuntimeError(f"no cross-file cases: none of {', '.join(PACKAGES)} in {site_packages()}")
    progress = not args.json
    flags = [f for f in flags if f != "--no-context"]
    out: dict[str, Any] = {"cases": [{"target": str(t.relative_to(site_packages())),
                                      "open": [str(o.relative_to(site_packages())) for o in others]} for t, others in cases]}
    with tempfile.TemporaryDirectory(prefix="tabd-cross-") as tmp:
        workdir = Path(tmp)
        for mode in modes:
            names: dict[str, int] = {}
            sessions = write_sessions(cases, workdir, seed, args.quality_spans, mode, names)
            # edit mode's figures stay at the top level (as before); new code's go under "new"
            into = out if mode == "edit" else out.setdefault("new", {})
            out.setdefault("names", {})[mode] = names
            for user in (p for p in parts if p != "warmup"):
                with_ctx = replay(sessions, user, flags, workdir / f"{mode}-{user}-ctx.jsonl", progress)
                without = replay(sessions, user, [*flags, "--no-context"], workdir / f"{mode}-{user}-none.jsonl",
                                 progress)
                ratio = with_ctx["saved_share"] / without["saved_share"] if without["saved_share"] else None
                into[user] = {"with_context": with_ctx, "without_context": without,
                              "saved_share_ratio": round(ratio, 3) if ratio is not None else None,
                              "names_ceiling_ratio": names_ceiling_ratio(names, without["saved_share"]),
                              "context_ceiling_ratio": names_ceiling_ratio(names, without["saved_share"],
                                                                           "context_rest_chars")}
    if "warmup" in parts:
        out["warmup"] = asyncio.run(warmup_figures(cases, flags))
    return out


async def warmup_figures(cases, flags: list[str], places: int = 8) -> dict[str, Any]:
    """Latency of the first request at a newly focused place after warm-up, a cold one, and a keystroke request."""
    from tabd.daemon.sessions.driver import Driver, ReplayOptions

    # every request a model run, each decoding at most 8 tokens: the latencies then differ by their prefill, which is
    # what warm-up saves, not by how long the model happens to write at each place
    log = Path(tempfile.mkdtemp(prefix="tabd-warmup-")) / "serve.jsonl"
    args = [*flags, "--no-cache", "--no-speculation", "--max-new-tokens", "8", "--log", str(log)]
    d = Driver(ReplayOptions(speed=0.0, server_args=args, progress=False))
    await d.start()
    cold, warm, keystroke = [], [], []
    try:
        files = [p for target, others in cases for p in [target, *others]][: places]
        for path in files:
            uri, text = path.resolve().as_uri(), path.read_text(encoding="utf-8")
            d._open({"uri": uri, "text": text}, "python")
            lines = text.split("\n")
            a, b = len(lines) // 3, 2 * len(lines) // 3  # two places far apart in the file
            cold.append(await _timed(d, uri, a, len(lines[a])))
            for _ in range(3):  # keystrokes at the first place
                at = {"line": a, "character": len(lines[a])}
                d._did_change(uri, {"start": at, "end": at}, "x")
                lines[a] += "x"
                keystroke.append(await _timed(d, uri, a, len(lines[a])))
            d.client.notify("tabd/focus", {"uri": uri, "position": {"line": b, "character": len(lines[b])}})
            await _warmed(d)
            warm.append(await _timed(d, uri, b, len(lines[b])))
            d._close(uri)
    finally:
        await asyncio.wait_for(d.stop(), 30)
    k = statistics.median(keystroke)
    runs = [e for e in map(json.loads, log.read_text().splitlines()) if e.get("event") == "completion"]
    kinds = ["cold"] + ["keystroke"] * 3 + ["warm"]  # the order of the requests at each place
    prefill: dict[str, list[float]] = {"cold": [], "keystroke": [], "warm": []}
    for n, e in enumerate(runs[: len(kinds) * len(warm)]):
        prefill[kinds[n % len(kinds)]].append(e.get("prefill_tokens", 0))
    return {"places": len(warm), "prefill_tokens_p50": {kind: _median(v) for kind, v in prefill.items()}, "keystroke_ms_p50": round(k, 2), "after_warmup_ms_p50": round(statistics.median(warm), 2),
            "cold_ms_p50": round(statistics.median(cold), 2),
            "after_warmup_over_keystroke": round(statistics.median(warm) / k, 3),
            "cold_over_keystroke": round(statistics.median(cold) / k, 3)}


async def _timed(d, uri: str, line: int, character: int) -> float:
    t0 = time.perf_counter()
    await asyncio.wait_for(d.client.suggest(uri, {"line": line, "character": character}), 60)
    return (time.perf_counter() - t0) * 1000


async def _warmed(d, timeout: float = 30.0) -> None:
    """Until every warm-up started has ended."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        w = (await asyncio.wait_for(d.client.call("tabd/stats", {}), 30))["context"]["warmups"]
        if w["started"] and w["finished"] + w["cancelled"] >= w["started"]:
            return
        await asyncio.sleep(0.02)
