"""Helpers for driving a real tabd server with pytest-lsp."""
from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any

import attrs

from lsprotocol import types

CAPS = types.ClientCapabilities(
    text_document=types.TextDocumentClientCapabilities(
        inline_completion=types.InlineCompletionClientCapabilities(),
        synchronization=types.TextDocumentSyncClientCapabilities(),
    ),
)


def init_params(options: dict | None = None, encodings: list[str] | None = None) -> types.InitializeParams:
    caps = CAPS
    if encodings:
        caps = types.ClientCapabilities(
            text_document=CAPS.text_document,
            general=types.GeneralClientCapabilities(position_encodings=encodings),
        )
    return types.InitializeParams(capabilities=caps, initialization_options=options)


def open_doc(client, uri: str, text: str, version: int = 1) -> None:
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=version, text=text)
        )
    )


def change(client, uri: str, version: int, line: int, char: int, text: str, end: tuple[int, int] | None = None) -> None:
    end_line, end_char = end or (line, char)
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(
                        start=types.Position(line=line, character=char),
                        end=types.Position(line=end_line, character=end_char),
                    ),
                    text=text,
                )
            ],
        )
    )


async def inline(client, uri: str, line: int, char: int, timeout: float = 60.0) -> types.InlineCompletionList:
    params = types.InlineCompletionParams(
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic),
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=types.Position(line=line, character=char),
    )
    return await asyncio.wait_for(client.text_document_inline_completion_async(params), timeout)


def end_of(text: str) -> tuple[int, int]:
    """The (line, character) at the end of text: where a test's cursor is after typing it."""
    lines = text.split("\n")
    return len(lines) - 1, len(lines[-1])


@attrs.define
class _PlainResult:
    """A response whose result stays the JSON it was: pygls makes a custom method's result namedtuples, which rename
    keys that are not identifiers (tabd/stats' `served_by` is keyed by engine names such as "torch-free")."""

    id: int | str
    jsonrpc: str
    result: Any = None


async def stats(client, timeout: float = 30.0) -> dict:
    msg_id = f"stats-{uuid.uuid4()}"
    future = client.protocol.send_request("tabd/stats", {}, msg_id=msg_id)
    client.protocol._result_types[msg_id] = _PlainResult  # set before the loop can read the response
    return await asyncio.wait_for(asyncio.wrap_future(future), timeout)


async def until_stats(client, check, what: str = "", timeout: float = 60.0, every: float = 0.05) -> dict:
    """The server's stats once check(stats) holds; an AssertionError naming `what` when it does not within timeout."""
    deadline = time.monotonic() + timeout
    while True:
        s = await stats(client)
        if check(s):
            return s
        if time.monotonic() > deadline:
            raise AssertionError(f"{what or 'stats'} not reached within {timeout:g} s: {s}")
        await asyncio.sleep(every)


async def document_text(client, uri: str) -> str:
    """The server's copy of a document (tabd/document), to check that edits synced."""
    result = await asyncio.wait_for(client.protocol.send_request_async("tabd/document", {"uri": uri}), 30)
    return to_dict(result)["text"]


async def context_of(client, uri: str) -> dict:
    """The workspace context a document's prompts start with (tabd/context)."""
    return to_dict(await asyncio.wait_for(client.protocol.send_request_async("tabd/context", {"uri": uri}), 30))


def to_dict(value):
    if hasattr(value, "_asdict"):
        return {k: to_dict(v) for k, v in value._asdict().items()}
    if isinstance(value, (list, tuple)):
        return [to_dict(v) for v in value]
    return value


def read_log(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
