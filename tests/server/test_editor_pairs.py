"""An editor's own closers, through a real `tabd serve`: VS Code's auto-closed `(`, the `)` it steps over and Enter
between brackets cost the tokens they touch (the embedded model's kept KV), and a suggestion that writes the closer
itself replaces the editor's (the copy backend: deterministic text)."""
from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from support.lspclient import change, init_params, inline, open_doc, read_log, stats, until_stats

pytestmark = pytest.mark.asyncio(loop_scope="function")
ROOT = Path(__file__).resolve().parents[2]
LOG = Path(tempfile.gettempdir()) / f"tabd-pairs-{os.getpid()}.jsonl"
SERVE = [sys.executable, "-m", "tabd.daemon", "serve"]
# the most prompt tokens a keystroke may prefill: the typed characters' tokens and the one token healing backs off
HANDFUL = 4


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[*SERVE, "--log", str(LOG)]))
async def model_client(lsp_client: LanguageClient):
    LOG.unlink(missing_ok=True)
    # each request runs the model at once and alone: no debounce, no prefetch, no warm-up to share the KV with
    await lsp_client.initialize_session(init_params({"debounceMs": 0, "speculation": False, "warmup": False}))
    yield
    await lsp_client.shutdown_session()
    LOG.unlink(missing_ok=True)


async def model_run_after(client, uri: str, line: int, char: int) -> dict:
    """The log's completion event for a request at (line, char) once it is answered."""
    before = len([e for e in read_log(LOG) if e.get("event") == "completion"])
    await inline(client, uri, line, char)
    for _ in range(200):
        events = [e for e in read_log(LOG) if e.get("event") == "completion"]
        if len(events) > before:
            return events[-1]
        await asyncio.sleep(0.05)
    raise AssertionError("the request's completion event never reached the log")


@pytest.mark.slow
async def test_auto_closed_overtyped_and_enter_between_brackets_prefill_a_handful(model_client: LanguageClient):
    code = (ROOT / "predictor" / "samples" / "inventory.py").read_text()
    lines = code.split("\n")
    at = next(i for i, text in enumerate(lines) if text.startswith("    def ") and i > 20) + 1
    head = "\n".join(lines[:at]) + "\n        count = len"
    uri = "file:///w/inventory.py"
    open_doc(model_client, uri, head + "\n" + "\n".join(lines[at:]))
    line, char = at, len("        count = len")
    first = await model_run_after(model_client, uri, line, char)
    assert first["prefill_tokens"] > 100, "the first request prefills the window (what a lost prefix costs)"

    change(model_client, uri, 2, line, char, "()")  # `(` as VS Code types it: the pair, the cursor between
    opened = await model_run_after(model_client, uri, line, char + 1)
    change(model_client, uri, 3, line, char + 1, "x")  # typing inside the pair
    inside = await model_run_after(model_client, uri, line, char + 2)
    stepped = await model_run_after(model_client, uri, line, char + 3)  # `)` typed over the editor's: no change
    change(model_client, uri, 4, line, char + 3, " + f()")  # another pair, then Enter between its brackets
    change(model_client, uri, 5, line, char + 8, "\n            \n        ")
    entered = await model_run_after(model_client, uri, line + 1, 12)
    costs = {name: (e["prefill_tokens"], e["reused_tokens"], e["origin"]) for name, e in
             (("auto-closed (", opened), ("typed inside", inside), ("stepped over )", stepped),
              ("Enter between brackets", entered))}
    assert any(origin == "model" for _, _, origin in costs.values()), costs
    for name, (prefilled, reused, origin) in costs.items():
        # answered from memory (the suggestion typed into) costs nothing; a model run reuses the window's KV
        assert prefilled <= HANDFUL + (4 if name == "Enter between brackets" else 0), (name, costs)
        assert reused > 100 or origin != "model", (name, costs)


COPY = [*SERVE, "--backend", "copy"]
LINE = "total = compute_total(items, tax)\n"


@pytest_lsp.fixture(config=ClientServerConfig(server_command=COPY))
async def copy_client(lsp_client: LanguageClient):
    await lsp_client.initialize_session(init_params({"debounceMs": 0}))
    yield
    await lsp_client.shutdown_session()


async def test_a_suggestion_that_writes_the_closer_replaces_the_editor_s(copy_client: LanguageClient):
    uri = "file:///w/a.py"
    open_doc(copy_client, uri, LINE + "total = compute_total()\n")  # `(` auto-closed, the cursor between
    result = await inline(copy_client, uri, 1, 22)
    item = result.items[0]
    assert item.insert_text == "items, tax)"
    assert (item.range.start.character, item.range.end.character) == (22, 23), "it replaces the editor's `)`"
    # Tab, as the editor applies the item: its range replaced by its text, the cursor after it
    change(copy_client, uri, 2, 1, 22, item.insert_text, end=(1, 23))
    await copy_client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="tabd.accept", arguments=item.command.arguments))
    text = await document_of(copy_client, uri)
    assert text.split("\n")[1] == "total = compute_total(items, tax)", "never `...tax))`"
    await inline(copy_client, uri, 1, 33)
    s = await until_stats(copy_client, lambda s: s["after_accept"]["requests"] == 1, "the request after Tab")
    # the copy baseline has nothing to show at the end of the line, but that empty answer came from the prefetch
    assert s["prefetch"]["used"] == 1 and s["sources"]["model"] == 1, "the state after Tab over the pair was prefetched"


async def test_the_editor_s_closer_keeps_the_cached_suggestion(copy_client: LanguageClient):
    uri = "file:///w/b.py"
    open_doc(copy_client, uri, LINE + "total = compute_total(")  # typed `(` without auto-closing
    plain = (await inline(copy_client, uri, 1, 22)).items[0]
    assert (plain.insert_text, plain.range.end.character) == ("items, tax)", 22)
    before = (await stats(copy_client))["sources"]
    change(copy_client, uri, 2, 1, 22, ")")  # the editor's closer appears after the cursor
    closed = (await inline(copy_client, uri, 1, 22)).items[0]
    after = (await stats(copy_client))["sources"]
    assert closed.insert_text == plain.insert_text and closed.range.end.character == 23
    assert after["cache"] == before["cache"] + 1 and after["model"] == before["model"], "same key: from memory"


async def test_typing_through_and_stepping_over_the_closer_stay_in_memory(copy_client: LanguageClient):
    uri = "file:///w/c.py"
    open_doc(copy_client, uri, LINE + "total = compute_total()\n")
    shown = (await inline(copy_client, uri, 1, 22)).items[0].insert_text
    version, col = 2, 22
    for ch in "items, tax":  # typed by hand inside the pair: each answered from what was shown
        change(copy_client, uri, version, 1, col, ch)
        version, col = version + 1, col + 1
        rest = (await inline(copy_client, uri, 1, col)).items
        assert rest and rest[0].insert_text == shown[col - 22:], (col, rest)
    await inline(copy_client, uri, 1, col + 1)  # `)` typed over the editor's: the cursor moves, nothing changes
    s = await until_stats(copy_client, lambda s: s["after_accept"]["requests"] >= 1, "the request after the `)`")
    # the first request ran the model; the ten keystrokes and the step over `)` were answered from memory
    assert s["requests_to_model"]["started"] == 1 and sum(s["sources"].values()) == 12, s
    assert s["after_accept"]["requests"] == 1 and s["prefetch"]["used"] >= 1, (s["after_accept"], s["prefetch"])


async def document_of(client, uri: str) -> str:
    from support.lspclient import document_text

    return await document_text(client, uri)


RECORD = Path(tempfile.gettempdir()) / f"tabd-pairs-record-{os.getpid()}.jsonl"


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[*COPY, "--record", str(RECORD)]))
async def recording_client(lsp_client: LanguageClient):
    RECORD.unlink(missing_ok=True)
    await lsp_client.initialize_session(init_params({"debounceMs": 0}))
    yield
    await lsp_client.shutdown_session()
    RECORD.unlink(missing_ok=True)


async def test_a_recorded_session_keeps_the_cursor_the_editor_moved_without_an_edit(recording_client: LanguageClient):
    uri = "file:///w/r.py"
    open_doc(recording_client, uri, LINE + "total = compute_total")
    change(recording_client, uri, 2, 1, 21, "()")  # the auto-closed pair: the edit ends after `)`, the cursor is inside
    await inline(recording_client, uri, 1, 22)
    change(recording_client, uri, 3, 1, 22, "x")
    await inline(recording_client, uri, 1, 23)  # where the edit left it: no move
    await inline(recording_client, uri, 1, 24)  # `)` stepped over: the editor sent no change
    await stats(recording_client)  # the notifications before it are handled
    events = [e for e in read_log(RECORD)[1:] if e.get("uri") == uri]
    assert [(e["op"], e.get("position")) for e in events if e["op"] in ("change", "move")] == [
        ("change", None), ("move", {"line": 1, "character": 22}), ("change", None),
        ("move", {"line": 1, "character": 24})]
