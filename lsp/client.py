"""An LSP client for the tools that drive `tabd serve` (replay, demo): plain dicts and dataclasses on the outside.

pygls' LanguageClient and lsprotocol's types stay in here, so LSP types stop at
lsp/ on the client side too. Positions and ranges are LSP-shaped dicts
({"line", "character"}, {"start", "end"}) in UTF-16 units; answers come back as
Suggestion objects and plain dicts (pygls hands custom results over as
namedtuples).
"""
from __future__ import annotations

import asyncio
import os
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient


@dataclass(frozen=True)
class Suggestion:
    """One inline completion item: its text, where it goes, and the id its accept command carries."""

    text: str
    range: dict[str, Any] | None  # {"start": pos, "end": pos}, or None when the item gave none
    item_id: Any = None  # the first argument of its command (tabd.accept's item id)


def plain(value: Any) -> Any:
    """A pygls result as plain dicts and lists."""
    if hasattr(value, "_asdict"):
        value = value._asdict()
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def _position(p: lsp.Position) -> dict[str, int]:
    return {"line": p.line, "character": p.character}


def suggestions(result: Any) -> list[Suggestion]:
    """The non-empty suggestions of an inlineCompletion result (a list, an InlineCompletionList or None)."""
    items = result.items if isinstance(result, lsp.InlineCompletionList) else result if isinstance(result, list) else []
    out = []
    for item in items:
        if not isinstance(item, lsp.InlineCompletionItem):
            continue
        text = item.insert_text if isinstance(item.insert_text, str) else getattr(item.insert_text, "value", "")
        if not text:
            continue
        rng = {"start": _position(item.range.start), "end": _position(item.range.end)} if item.range else None
        args = item.command.arguments if item.command and item.command.arguments else None
        out.append(Suggestion(text, rng, args[0] if args else None))
    return out


class Client:
    """A `tabd serve` (or any LSP server) child over stdio, spoken to in plain values."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._client = LanguageClient(name, "1")

    @property
    def process(self) -> asyncio.subprocess.Process | None:
        return self._client._server

    async def start(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        await self._client.start_io(argv[0], *argv[1:], env=env)

    async def initialize(self) -> bool:
        """initialize (UTF-16, inline completion, executeCommand); True when the server takes incremental changes."""
        caps = lsp.ClientCapabilities(
            text_document=lsp.TextDocumentClientCapabilities(
                synchronization=lsp.TextDocumentSyncClientCapabilities(dynamic_registration=False),
                inline_completion=lsp.InlineCompletionClientCapabilities(dynamic_registration=False),
            ),
            workspace=lsp.WorkspaceClientCapabilities(execute_command=lsp.ExecuteCommandClientCapabilities()),
            general=lsp.GeneralClientCapabilities(position_encodings=[lsp.PositionEncodingKind.Utf16]),
        )
        params = lsp.InitializeParams(capabilities=caps, process_id=os.getpid(), root_uri=None,
                                      client_info=lsp.ClientInfo(name=self.name, version="1"))
        result = await self._client.initialize_async(params)
        self._client.initialized(lsp.InitializedParams())
        sync = result.capabilities.text_document_sync
        kind = sync.change if isinstance(sync, lsp.TextDocumentSyncOptions) else sync
        return kind != lsp.TextDocumentSyncKind.Full

    # -- documents --------------------------------------------------------------

    def open(self, uri: str, language: str, version: int, text: str) -> None:
        self._client.text_document_did_open(lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(uri=uri, language_id=language, version=version, text=text)))

    def change(self, uri: str, version: int, rng: dict[str, Any] | None, text: str) -> None:
        """One content change: `text` replaces `rng`, or the whole document when rng is None."""
        if rng is not None:
            change: Any = lsp.TextDocumentContentChangePartial(
                range=lsp.Range(start=lsp.Position(**rng["start"]), end=lsp.Position(**rng["end"])), text=text)
        else:
            change = lsp.TextDocumentContentChangeWholeDocument(text=text)
        self._client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version), content_changes=[change]))

    def close(self, uri: str) -> None:
        self._client.text_document_did_close(lsp.DidCloseTextDocumentParams(text_document=lsp.TextDocumentIdentifier(uri=uri)))

    # -- requests ---------------------------------------------------------------

    def inline_completion(self, uri: str, position: dict[str, int], msg_id: int | None = None,
                          invoked: bool = False) -> Future:
        """Send textDocument/inlineCompletion; the future's result goes through suggestions()."""
        kind = lsp.InlineCompletionTriggerKind.Invoked if invoked else lsp.InlineCompletionTriggerKind.Automatic
        params = lsp.InlineCompletionParams(
            context=lsp.InlineCompletionContext(trigger_kind=kind),
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            position=lsp.Position(line=position["line"], character=position["character"]),
        )
        return self._client.protocol.send_request(lsp.TEXT_DOCUMENT_INLINE_COMPLETION, params, msg_id=msg_id)

    async def suggest(self, uri: str, position: dict[str, int]) -> list[Suggestion]:
        return suggestions(await asyncio.wrap_future(self.inline_completion(uri, position)))

    def cancel(self, msg_id: int) -> None:
        self._client.cancel_request(lsp.CancelParams(id=msg_id))

    def request(self, method: str, params: Any) -> Future:
        """A custom request (tabd/stats, tabd/document); its result goes through plain()."""
        return self._client.protocol.send_request(method, params)

    async def call(self, method: str, params: Any) -> Any:
        return plain(await asyncio.wrap_future(self.request(method, params)))

    def notify(self, method: str, params: Any) -> None:
        """A custom notification (tabd/focus)."""
        self._client.protocol.notify(method, params)

    def execute_command(self, command: str, arguments: list[Any]) -> Future:
        return self._client.protocol.send_request(lsp.WORKSPACE_EXECUTE_COMMAND,
                                                  lsp.ExecuteCommandParams(command=command, arguments=arguments))

    # -- the end ----------------------------------------------------------------

    async def shutdown(self) -> None:
        """shutdown, then exit: the polite end."""
        await self._client.shutdown_async(None)
        self._client.exit(None)

    async def stop(self) -> None:
        """Stop the client's reader (after the process is gone or told to exit)."""
        await self._client.stop()

    def abandon(self) -> None:
        """Stop the client's tasks without waiting (the process was killed)."""
        self._client._stop_event.set()
        for task in self._client._async_tasks:
            task.cancel()
