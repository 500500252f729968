"""Next-edit cases (edit_cases.py) played through a real `tabd serve`, as copilot-lsp in Neovim asks for next edits.

Per case, in a fresh document (a uri of its own, closed after it): the old file is opened (and focused); each of the places
e1..ek is made about a second apart (CaseOptions.gap_s); the earlier ones as one change each (select and replace),
the last one typed key by key at a human rate when it is short (typed_max), an Enter with its indentation as one
key; Neovim's didChange batching (a batch at most every batch_s, flushed before any request). Then, as copilot-lsp
does, one `textDocument/copilotInlineEdit` 500 ms after the last keystroke, from where the typing left the cursor,
with the document's version; the first edit of the answer is the edit shown (and `didShowInlineEdit` is sent, as
copilot-lsp does). An exact edit is taken as copilot-lsp takes it: the client applies it itself (a didChange; its
command is never run), the cursor goes to the end of the old range, and the next request comes 500 ms later; its
answer's origin ("cache": from the server's memory) is read from `tabd/stats` edits.last.origin.

Times are the client's, on the monotonic clock: answer_ms from the request's send to its answer;
after_pause_ms from the end of the server's pause (tabd/stats edits.pause_ms when the server states one, else the
client's own 500 ms) to the answer. Nothing here knows how the server finds its edits.
"""
from __future__ import annotations

import asyncio
import random
import re
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from tabd.daemon.sessions.edit_cases import Case, baseline, judge
from tabd.daemon.sessions.format import offset_at, position_at
from tabd.lsp.client import ResponseError
from tabd.lsp import positions

KEYS = re.compile(r"\n[ \t]*|.", re.S)  # one key each; Enter with the indentation an editor adds is one
INLINE_EDIT = "textDocument/copilotInlineEdit"


@dataclass
class CaseOptions:
    server_args: list[str] = field(default_factory=list)
    server_command: list[str] | None = None  # replaces `python -m tabd.daemon serve` (tests)
    env: dict[str, str] | None = None
    gap_s: tuple[float, float] = (0.8, 1.3)  # between the user's edits
    select_s: tuple[float, float] = (0.2, 0.5)  # selecting old text before typing over it
    debounce_s: float = 0.5  # copilot-lsp: one request this long after the last keystroke
    batch_s: float = 0.15  # Neovim's didChange debounce
    cps: float = 8.0  # the last edit's keys per second (jittered)
    typed_max: int = 40  # the last edit is typed key by key up to this many characters, else pasted as one change
    pause_s: float | None = None  # the server's pause; None: tabd/stats edits.pause_ms, else debounce_s
    request_timeout: float = 30.0
    startup_timeout: float = 180.0
    seed: int = 0
    servers: int = 1  # servers run side by side, each with its share of the files (latency: use 1)
    progress: bool = False


@dataclass
class CaseResult:
    repo: str
    commit: str
    path: str
    k: int
    n: int
    due: str
    verdict: str  # exact / later / wrong / none (no edit shown)
    baseline: str
    answer_ms: float
    after_pause_ms: float
    origin: str | None
    edit: dict[str, Any] | None = None  # the edit shown (range, text): for the tune repositories' failures
    after_accept: dict[str, Any] | None = None  # {verdict, origin, answer_ms} of the request after taking the edit
    sync: bool = True  # the server's document was ours when the request was sent
    since_key_ms: float = 0.0  # from the last keystroke to the answer
    pause_ms: float = 0.0  # the server's pause after_pause_ms counts from
    error: str | None = None  # the request timed out or was answered with an error (counted as no edit shown)


class _Outbox:
    """didChange notifications as Neovim sends them: the changes of batch_s at most in one, flushed before a request."""

    def __init__(self, client: Any, uri: str, batch_s: float) -> None:
        self.client, self.uri, self.batch_s = client, uri, batch_s
        self.version = 1
        self.pending: list[dict[str, Any]] = []
        self.timer: asyncio.TimerHandle | None = None

    def change(self, text: str, start: int, end: int, new: str) -> None:
        self.pending.append({"range": {"start": position_at(text, start), "end": position_at(text, end)}, "text": new})
        if self.batch_s <= 0:
            self.flush()
        elif self.timer is None:
            self.timer = asyncio.get_running_loop().call_later(self.batch_s, self.flush)

    def flush(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.pending:
            self.version += 1
            self.client.notify("textDocument/didChange", {"textDocument": {"uri": self.uri, "version": self.version},
                                                          "contentChanges": self.pending})
            self.pending = []


def _uri(case: Case) -> str:
    from pathlib import PurePosixPath

    return "file://" + str(PurePosixPath("/w", case.repo, f"{case.commit[:7]}.{case.k}", case.path))


class CaseRunner:
    """One `tabd serve` child (through replay's Driver: start, readiness, death) and the cases played on it."""

    def __init__(self, options: CaseOptions, rng: random.Random) -> None:
        from tabd.daemon.sessions.driver import Driver, ReplayOptions

        self.options, self.rng = options, rng
        self.driver = Driver(ReplayOptions(server_args=list(options.server_args), server_command=options.server_command,
                                           env=options.env, progress=False, edits=True,
                                           startup_timeout=options.startup_timeout),
                             client_name="Neovim")  # it batches didChange as Neovim does, and says so as Neovim does
        self.pause_s = options.debounce_s

    @property
    def client(self) -> Any:
        return self.driver.client

    async def start(self) -> None:
        await self.driver.start()
        if not self.driver.edits_on:
            raise RuntimeError("the server does not offer textDocument/copilotInlineEdit "
                               "(capabilities.experimental.copilotInlineEdit)")
        pause = self.options.pause_s
        if pause is None:
            stated = ((await self._stats()).get("edits") or {}).get("pause_ms")
            pause = stated / 1000.0 if isinstance(stated, (int, float)) else self.options.debounce_s
        self.pause_s = max(pause, self.options.debounce_s)

    async def stop(self) -> None:
        await self.driver.stop()

    async def _call(self, method: str, params: Any) -> Any:
        from tabd.lsp.client import plain

        return plain(await self.driver._guard(asyncio.wrap_future(self.client.request(method, params)),
                                              self.options.request_timeout, method))

    async def _stats(self) -> dict[str, Any]:
        try:
            stats = await self._call("tabd/stats", {})
        except Exception:  # a server without tabd/stats: no origins
            return {}
        return stats if isinstance(stats, dict) else {}

    async def _origin(self) -> str | None:
        last = ((await self._stats()).get("edits") or {}).get("last") or {}
        origin = last.get("origin")
        return origin if isinstance(origin, str) else None

    async def _ask(self, uri: str, box: _Outbox, text: str, cursor: int) -> tuple[Any, float, float]:
        """(the first edit or None, when the request was sent, when its answer came)."""
        from tabd.lsp.client import inline_edits

        box.flush()
        sent = time.monotonic()
        future = self.client.inline_edit(uri, box.version, position_at(text, cursor))
        stamp: list[float] = []
        # stamped where the client reads the response frame, not after this task's next turn of a shared loop
        future.add_done_callback(lambda _: stamp.append(time.monotonic()))
        result = await self.driver._guard(asyncio.wrap_future(future), self.options.request_timeout, INLINE_EDIT)
        answered = stamp[0] if stamp else time.monotonic()
        edits = inline_edits(result)
        return (edits[0] if edits else None), sent, answered

    async def _in_sync(self, uri: str, text: str) -> bool:
        try:
            doc = await self._call("tabd/document", {"uri": uri})
        except Exception:
            return True  # a server that does not say: trusted
        return not isinstance(doc, dict) or doc.get("text") in (None, text)

    async def _sleep_until(self, when: float) -> None:
        delay = when - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)

    async def run(self, case: Case) -> CaseResult:
        o, rng = self.options, self.rng
        uri = _uri(case)
        self.client.open(uri, case.language, 1, case.old)
        self.client.notify("textDocument/didFocus", {"textDocument": {"uri": uri}})  # copilot-lsp, on BufEnter
        box = _Outbox(self.client, uri, o.batch_s)
        text, delta, cursor, last_key = case.old, 0, 0, time.monotonic()
        for i, place in enumerate(case.places[:case.k]):
            await asyncio.sleep(rng.uniform(*o.gap_s))
            keyed = i == case.k - 1 and len(place.text(case.old)) <= o.typed_max
            for j, hunk in enumerate(place.hunks):
                if j:
                    await asyncio.sleep(rng.uniform(0.2, 0.6))  # along the line to the place's next piece
                start, end = hunk.start + delta, hunk.end + delta
                if keyed:
                    if end > start:
                        await asyncio.sleep(rng.uniform(*o.select_s))
                        box.change(text, start, end, "")
                        text = text[:start] + text[end:]
                    at = start
                    for key in KEYS.findall(hunk.text):
                        await asyncio.sleep(rng.lognormvariate(0, 0.35) / o.cps)
                        box.change(text, at, at, key)
                        text = text[:at] + key + text[at:]
                        at += len(key)
                else:
                    box.change(text, start, end, hunk.text)
                    text = text[:start] + hunk.text + text[end:]
                cursor = start + len(hunk.text)
                delta += len(hunk.text) - (hunk.end - hunk.start)
                last_key = time.monotonic()
        assert text == case.doc(), "the typed document is not the case's (a case driver bug)"
        await self._sleep_until(last_key + o.debounce_s)
        box.flush()
        try:
            edit, sent, answered = await self._ask(uri, box, text, cursor)
        except (TimeoutError, ResponseError) as exc:  # one case's failure is counted, the others still run
            self.client.close(uri)
            return CaseResult(case.repo, case.commit, case.path, case.k, len(case.places), case.due, "none",
                              judge(case, baseline(case)), 0.0, 0.0, None, error=str(exc)[:200])
        origin = await self._origin()
        sync = await self._in_sync(uri, text)  # nothing was sent since the request: its document is this one
        result_doc = _applied(text, edit)
        verdict = judge(case, result_doc)
        out = CaseResult(case.repo, case.commit, case.path, case.k, len(case.places), case.due, verdict,
                         judge(case, baseline(case)), round((answered - sent) * 1000, 2),
                         round(max(0.0, answered - max(sent, last_key + self.pause_s)) * 1000, 2), origin,
                         None if edit is None else {"range": edit.range, "text": edit.text}, sync=sync,
                         since_key_ms=round((answered - last_key) * 1000, 2), pause_ms=round(self.pause_s * 1000))
        if edit is not None and edit.command is not None:
            self.client.did_show_inline_edit(edit.command)
        if verdict == "exact" and result_doc is not None:
            out.after_accept = await self._after_accept(case, uri, box, text, edit, result_doc)
        box.flush()
        self.client.close(uri)
        return out

    async def _after_accept(self, case: Case, uri: str, box: _Outbox, text: str, edit: Any,
                            result_doc: str) -> dict[str, Any]:
        """Take the edit as copilot-lsp does and ask again after its debounce."""
        start, end = offset_at(text, edit.range["start"]), offset_at(text, edit.range["end"])
        box.change(text, start, end, edit.text)
        box.flush()
        taken = time.monotonic()
        # the cursor goes to the old range's end, read as a position in the new text (clamped to it)
        cursor = positions.offset_at(result_doc, int(edit.range["end"]["line"]), int(edit.range["end"]["character"]))
        await self._sleep_until(taken + self.options.debounce_s)
        try:
            nxt, sent, answered = await self._ask(uri, box, result_doc, cursor)
        except (TimeoutError, ResponseError) as exc:
            return {"verdict": "none", "origin": None, "answer_ms": None, "error": str(exc)[:200]}
        origin = await self._origin()
        following = Case(case.repo, case.commit, case.path, case.language, case.old, case.places, case.k + 1)
        return {"verdict": judge(following, _applied(result_doc, nxt)), "origin": origin,
                "answer_ms": round((answered - sent) * 1000, 2)}


def _applied(text: str, edit: Any) -> str | None:
    if edit is None:
        return None
    try:
        start, end = offset_at(text, edit.range["start"]), offset_at(text, edit.range["end"])
    except (KeyError, TypeError, ValueError):
        return text + "\0"  # a range outside the document: shown, and wrong
    return text[:start] + edit.text + text[end:] if start <= end else text + "\0"


async def _play(groups: Sequence[Sequence[Case]], options: CaseOptions, seed: int,
                done: Callable[[CaseResult], None]) -> list[CaseResult]:
    runner = CaseRunner(options, random.Random(seed))
    out: list[CaseResult] = []
    await runner.start()
    try:
        for group in groups:
            for case in group:
                result = await runner.run(case)
                out.append(result)
                done(result)
    finally:
        await runner.stop()
    return out


def play(groups: Sequence[Sequence[Case]], options: CaseOptions) -> list[CaseResult]:
    """Every case played, the files shared out between options.servers servers; results in the order given."""
    total = sum(len(g) for g in groups)
    count = [0]

    def done(result: CaseResult) -> None:
        count[0] += 1
        if options.progress:
            print(f"\r  next-edit cases {count[0]}/{total}", end="" if count[0] < total else "\n", file=sys.stderr,
                  flush=True)

    servers = max(1, min(options.servers, len(groups)))
    shares = [[g for i, g in enumerate(groups) if i % servers == s] for s in range(servers)]

    async def main() -> list[list[CaseResult]]:
        return list(await asyncio.gather(*(_play(share, options, options.seed + s, done)
                                           for s, share in enumerate(shares))))

    results = asyncio.run(main()) if groups else []
    merged = [r for share in results for r in share]
    key = {(c.repo, c.commit, c.path, c.k): i for i, c in enumerate(c for g in groups for c in g)}
    return sorted(merged, key=lambda r: key.get((r.repo, r.commit, r.path, r.k), 0))
