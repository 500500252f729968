"""`tabd demo`: the mechanism on a sample file, through a real LSP connection to `tabd serve`.

1. type the start of a line of the sample as VS Code does (an opener with its closer after the cursor) and ask
   for a suggestion (a model call),
2. press Tab (the item applied over the editor's closer it writes, tabd.accept),
3. ask again: the answer was pre-fetched while we "read" the first one; Tab again while there is one,
then type a session from the same file (tabd session from-file) and replay it
through a fresh `tabd serve` (tabd replay), printing its summary. The replay is
bounded by --max-seconds so that `make demo` stays within a few minutes.
"""
from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time
from pathlib import Path

from tabd.lsp import positions
from tabd.lsp.client import suggestions

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


def _position(text: str, offset: int) -> dict[str, int]:
    line, character = positions.position_at(text, offset)
    return {"line": line, "character": character}


CHAINS = 2  # places where the demo shows a suggestion, Tab and the next one from memory
TABS = 3  # at most this many Tabs in a row at one place
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*[(.\[]?")
CLOSER = {"(": ")", "[": "]", "{": "}"}


def places(source: str):
    """(text, cursor) states a user typing the file reaches, as VS Code types: each line's start typed up to a word
    (and an opener, with the closer VS Code puts after the cursor), the line's rest not written yet."""
    offset = 0
    for line in source.split("\n"):
        content = line.lstrip()
        start = offset + len(line) - len(content)
        end = offset + len(line)
        offset = end + 1
        if len(content) < 12 or content.startswith(("#", "\"\"\"", "def ", "class ", "@", "import ", "from ")):
            continue
        for m in list(WORD.finditer(content))[:3]:
            cursor = start + m.end()
            closer = CLOSER.get(source[cursor - 1], "")
            yield source[:cursor] + closer + source[end:], cursor


class Demo:
    """The chain on one document of a real `tabd serve`: ask, read, Tab as the editor applies the item, ask again."""

    def __init__(self, client, uri: str) -> None:
        self.client, self.uri, self.version = client, uri, 0
        self.text, self.cursor = "", 0

    def open(self, text: str, cursor: int) -> None:
        if self.version:
            self.client.close(self.uri)
        self.version, self.text, self.cursor = 1, text, cursor
        self.client.open(self.uri, "python", 1, text)

    async def ask(self):
        t0 = time.perf_counter()
        future = self.client.inline_completion(self.uri, _position(self.text, self.cursor))
        items = suggestions(await asyncio.wrap_future(future))
        ms = (time.perf_counter() - t0) * 1000
        return (items[0] if items else None), ms, (await self.stats())["last"]["source"]

    async def stats(self) -> dict:
        return await self.client.call("tabd/stats", {})

    async def read(self) -> None:
        """The user reads the ghost text (0.4 s at least, 3 s at most); the daemon pre-fetches meanwhile."""
        before = (await self.stats())["prefetch"]["finished"]
        t0 = time.monotonic()
        await asyncio.sleep(0.4)
        while (await self.stats())["prefetch"]["finished"] == before and time.monotonic() - t0 < 3.0:
            await asyncio.sleep(0.05)

    async def tab(self, item) -> None:
        """Tab: the item's range (the editor's closers it writes itself) replaced by its text, then tabd.accept."""
        start = positions.offset_at(self.text, item.range["start"]["line"], item.range["start"]["character"])
        end = positions.offset_at(self.text, item.range["end"]["line"], item.range["end"]["character"])
        self.version += 1
        self.client.change(self.uri, self.version, item.range, item.text)
        await asyncio.wrap_future(self.client.execute_command("tabd.accept", [item.item_id]))
        self.text = self.text[:start] + item.text + self.text[end:]
        self.cursor = start + len(item.text)


async def mechanism(path: Path) -> int:
    from tabd.lsp.client import Client

    client = Client("tabd-demo")
    await client.start([sys.executable, "-m", "tabd.daemon", "serve"])
    await client.initialize()
    demo = Demo(client, path.resolve().as_uri())
    shown_chains, lines_shown = 0, set()
    try:
        while (await demo.stats()).get("model") == "loading":  # time the model, not its loading
            await asyncio.sleep(0.1)
        for text, cursor in places(path.read_text(encoding="utf-8")):
            if _position(text, cursor)["line"] in lines_shown:
                continue  # one chain a line
            demo.open(text, cursor)
            item, first_ms, _ = await demo.ask()
            if item is None:
                continue  # unsure here (gated): a user sees nothing and types on
            chain = [(item, first_ms, "model")]
            while len(chain) <= TABS:
                await demo.read()
                await demo.tab(chain[-1][0])
                nxt, ms, source = await demo.ask()
                if nxt is None:
                    break
                chain.append((nxt, ms, source))
            if len(chain) < 2:
                continue
            shown_chains += 1
            lines_shown.add(_position(text, cursor)["line"])
            line = _position(text, cursor)["line"] + 1
            print(f"{path.name}:{line}  typed {text[text.rfind(chr(10), 0, cursor) + 1:cursor].strip()!r}, as VS Code "
                  "types it")
            for n, (it, ms, source) in enumerate(chain):
                what = "suggestion" if n == 0 else f"Tab {n}, next"
                print(f"    {what:<14} {ms:8.1f} ms  ({source:6}) {it.text!r}")
            memory = [ms for _, ms, source in chain[1:] if source in ("cache", "typed")]
            if memory:
                print(f"    after Tab the next suggestion came from memory, {first_ms / max(max(memory), 1e-3):.0f}x "
                      "faster than the first")
            if shown_chains == CHAINS:
                break
        if shown_chains < CHAINS:
            print(f"the model showed {shown_chains} chain(s) of a suggestion, Tab and a next one; {CHAINS} expected")
            return 1
    finally:
        await client.shutdown()
        await client.stop()
    return 0


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
