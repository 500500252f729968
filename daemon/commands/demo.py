"""`tabd demo`: the mechanism on a sample file, through a real LSP connection to `tabd serve`.

1. ask for a suggestion at a position in the sample (a model call),
2. press Tab (insert it, run tabd.accept),
3. ask again: the answer was pre-fetched while we "read" the first one,
then type a session from the same file (tabd session from-file) and replay it
through a fresh `tabd serve` (tabd replay), printing its summary. The replay is
bounded by --max-seconds so that `make demo` stays within a few minutes.
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

from tabd.lsp import positions

SAMPLES = Path(__file__).resolve().parents[2] / "predictor" / "samples"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--file", default=str(SAMPLES / "inventory.py"), help="sample file (default: the shipped one)")
    parser.add_argument("--no-replay", action="store_true", help="show the mechanism only")
    parser.add_argument("--seed", type=int, default=1, help="typist seed for the replayed session (default 1)")
    parser.add_argument("--spans", type=int, default=2, help="spans of the file retyped (default 2)")
    parser.add_argument("--speed", type=float, default=0.0,
                        help="replay speed (default 0: each keystroke waits for its answer)")
    parser.add_argument("--max-seconds", type=float, default=100.0,
                        help="stop the replay after this long and summarise the part replayed (default 100)")
    parser.add_argument("--json", action="store_true", help="print the replay summary as JSON")


def _cursor_after(text: str, marker: str) -> int:
    at = text.find(marker)
    return at + len(marker) if at >= 0 else len(text) // 2


def _position(text: str, offset: int) -> dict[str, int]:
    line, character = positions.position_at(text, offset)
    return {"line": line, "character": character}


# where the demo asks, in order: the first place the model has something to say (the sample's own markers;
# another file falls back to its middle)
PLACES = ("        item = self.get(sku)\n        item.", "    def value(self) -> float:\n        return ",
          "    def needs_reorder(self) -> bool:\n        return ")


async def mechanism(path: Path) -> int:
    from tabd.lsp.client import Client, suggestions

    source = path.read_text(encoding="utf-8")
    uri = path.resolve().as_uri()
    client = Client("tabd-demo")
    await client.start([sys.executable, "-m", "tabd.daemon", "serve"])
    await client.initialize()
    text, offset = "", 0

    async def ask(at: int, invoked: bool = False):
        t0 = time.perf_counter()
        items = suggestions(await asyncio.wrap_future(client.inline_completion(uri, _position(text, at), invoked=invoked)))
        return items, (time.perf_counter() - t0) * 1000

    async def stats() -> dict:
        return await client.call("tabd/stats", {})

    status = 0
    try:
        while (await stats()).get("model") == "loading":  # time the model, not its loading
            await asyncio.sleep(0.1)
        items, shown, first_ms = [], "", 0.0
        for n, marker in enumerate(PLACES):
            offset = _cursor_after(source, marker)
            text = source[:offset] + source[source.find("\n", offset):]  # the line's end removed: the model writes it
            if n:
                client.close(uri)
            client.open(uri, "python", 1, text)
            items, first_ms = await ask(offset)
            shown = items[0].text if items else ""
            print(f"{path.name}:{_position(text, offset)['line'] + 1}  first suggestion  {first_ms:8.1f} ms  (model)   {shown!r}")
            if not shown:  # gated: the model is unsure here. Ask as a user does who wants its guess anyway (Alt+\\)
                items, invoked_ms = await ask(offset, invoked=True)
                shown = items[0].text if items else ""
                print(f"{' ' * len(path.name)}   hidden (unsure); invoked (Alt+\\) {invoked_ms:6.1f} ms   {shown!r}")
            if shown:
                break
        if not shown:
            print("the model had nothing to suggest at any of the demo's places; nothing to accept")
            return 1
        # the user reads the ghost text (at least 0.4 s, at most 3 s); the daemon pre-fetches meanwhile
        before = (await stats())["prefetch"]["finished"]
        t_read = time.monotonic()
        await asyncio.sleep(0.4)
        while (await stats())["prefetch"]["finished"] == before and time.monotonic() - t_read < 3.0:
            await asyncio.sleep(0.05)
        at = _position(text, offset)
        client.change(uri, 2, {"start": at, "end": at}, shown)
        await asyncio.wrap_future(client.execute_command("tabd.accept", [items[0].item_id]))
        text = text[:offset] + shown + text[offset:]
        offset += len(shown)
        items, next_ms = await ask(offset)
        source = (await stats())["last"]["source"]
        nxt = items[0].text if items else ""
        print(f"{' ' * len(path.name)}   Tab, then next    {next_ms:8.1f} ms  ({source})   {nxt!r}")
        print(f"after accept the next suggestion came {first_ms / max(next_ms, 1e-3):.0f}x faster")
    finally:
        await client.shutdown()
        await client.stop()
    return status


def replay_demo(path: Path, args: argparse.Namespace) -> int:
    """Type spans of `path` as a person would and replay them through a fresh `tabd serve`."""
    import json
    import tempfile

    from tabd.daemon.sessions.driver import ReplayOptions
    from tabd.daemon.sessions.measure import format_table
    from tabd.daemon.sessions.replayer import run_replay
    from tabd.daemon.sessions.format import read_session, write_session
    from tabd.daemon.sessions.typist import typed_session

    with tempfile.TemporaryDirectory(prefix="tabd-demo-") as tmp:
        session_path = Path(tmp) / "demo-session.jsonl"
        language, events = typed_session([str(path)], seed=args.seed, spans=args.spans, max_chars=200)
        write_session(session_path, events, language)
        session = read_session(session_path)
    print(f"\nreplaying {session.changes()} keystrokes ({session.duration:.0f} s of typing) retyped from {path.name}, "
          f"seed {args.seed}, through tabd serve ...", flush=True)
    measured = run_replay([session], ReplayOptions(speed=args.speed, think_ms=250.0, max_seconds=args.max_seconds,
                                                   progress=sys.stderr.isatty()))
    summary = measured.summary()
    summary.pop("server", None)
    if args.json:
        print(json.dumps(summary))
    else:
        print(format_table(summary))
        if summary.get("truncated"):
            print(f"(stopped after {args.max_seconds:.0f} s: the figures cover the part replayed)")
    if measured.error:
        print(f"tabd demo: {measured.error}", file=sys.stderr)
        return 3
    return 0


def run(args: argparse.Namespace) -> int:
    path = Path(args.file)
    if not path.is_file():
        print(f"tabd demo: {path} not found", file=sys.stderr)
        return 2
    status = asyncio.run(mechanism(path))
    if args.no_replay:
        return status
    return replay_demo(path, args) or status
