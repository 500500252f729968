"""Next-edit suggestions over LSP, in GitHub Copilot's language-server shape, so unmodified NES clients use tabd.

  textDocument/copilotInlineEdit  {textDocument: {uri, version}, position, context?}
      -> {edits: [{text, range, textDocument: {uri, version}, command: {title, command, arguments: [id]}}]}
         0 or 1 edit (clients disagree on what several mean); `text`, not `newText`; the range is against exactly
         the version named (0 or missing: the server's current one; an older one gets no edit)
  workspace/executeCommand tabd.acceptInlineEdit [id]   the client applied the edit (request or notification)
  workspace/executeCommand tabd.rejectInlineEdit [id]   the user dismissed it (editing elsewhere rejects it too)
  textDocument/didShowInlineEdit  {item: {command}}     the client rendered it
  textDocument/didFocus           {textDocument: {uri}}  a document gained focus

Positions in copilotInlineEdit (the request's and the edit's range) are UTF-16 code units whatever encoding the
client negotiated: Copilot's NES clients (copilot-lsp, sidekick.nvim, copilot.el) assume UTF-16 for them, and
Neovim offers UTF-8 first, so a negotiated range would be applied in the wrong unit on a line with non-ASCII text.
tabd's own clients read them as UTF-16 too; the ghost-text item (ghost_item) is an inline completion and keeps the
negotiated encoding.

A request that comes while the user may still be typing at the end of their change is held until their pause
(edit_service.py), then answered; if they edit on meanwhile it is answered empty (an error would be shown to the user
by copilot-lsp), and `$/cancelRequest` cancels it.

Params are read leniently (unknown fields ignored); malformed ones get InvalidParams, never a crash. The logic is
daemon/edits/edit_service.py; this file converts positions and shapes.
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Awaitable, TypeGuard
from urllib.parse import unquote

from pygls.exceptions import JsonRpcInvalidParams

from tabd.daemon.edits.ledger import EditSuggestion, applied
from tabd.lsp.args import command_args, doc_id
from tabd.lsp.documents import Document, DocumentError

if TYPE_CHECKING:  # never run: the server imports this module, not the other way round
    from tabd.lsp.server import TabdServer

logger = logging.getLogger(__name__)

INLINE_EDIT = "textDocument/copilotInlineEdit"
DID_SHOW = "textDocument/didShowInlineEdit"
DID_FOCUS = "textDocument/didFocus"
ACCEPT_EDIT = "tabd.acceptInlineEdit"
REJECT_EDIT = "tabd.rejectInlineEdit"
NES_ENCODING = "utf-16"  # what Copilot's clients assume for copilotInlineEdit, whatever was negotiated


# clients that hold didChange back to batch keystrokes, by clientInfo.name: how long (Neovim's debounce_text_changes)
BATCHING_CLIENTS = {"Neovim": 0.15}


def client_lag(client_info: object) -> float:
    """Seconds between a keystroke and its didChange for this client (0 for those that send at once)."""
    name = field(client_info, "name") if client_info is not None else None
    return BATCHING_CLIENTS.get(name, 0.0) if isinstance(name, str) else 0.0


def field(obj: object, name: str) -> object:
    """A field of params as pygls hands them over (attribute objects) or as plain JSON (dicts)."""
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def _int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def edit_request(params: object) -> tuple[str, int | None, int, int]:
    """(uri, version or None, line, character) of a copilotInlineEdit request; InvalidParams when malformed."""
    document, position = field(params, "textDocument"), field(params, "position")
    uri = field(document, "uri") if document is not None else None
    line, character = (field(position, "line"), field(position, "character")) if position is not None else (None, None)
    if not isinstance(uri, str) or not _int(line) or not _int(character) or line < 0 or character < 0:
        raise JsonRpcInvalidParams(f"{INLINE_EDIT} expects {{textDocument: {{uri, version}}, position: {{line, character}}}}")
    version = field(document, "version")
    return uri, (version if _int(version) and version != 0 else None), line, character


def _asked(ls: "TabdServer", params: object) -> tuple[str, Document, int] | dict[str, Any]:
    """(uri, document, cursor offset) of a request to answer, or the answer itself when there is no edit to look
    for (switched off, excluded, stale); InvalidParams when malformed or the document is unknown."""
    uri, version, line, character = edit_request(params)
    try:
        doc = ls.documents.get(uri)
    except DocumentError as exc:
        raise JsonRpcInvalidParams(str(exc)) from None
    if ls.service is None:
        raise JsonRpcInvalidParams("the server is not initialized")
    if ls.edits is None or uri not in ls.admission.serving:  # --no-inline-edits; an excluded or switched-off document
        return {"edits": []}
    if version is not None and version != doc.version:
        ls.edits.stale()  # the range would be against a text the client no longer has
        return {"edits": []}
    return uri, doc, doc.offset_at(line, character, NES_ENCODING)


def copilot_inline_edit(ls: "TabdServer", params: object) -> dict[str, Any] | Awaitable[dict[str, Any]]:
    """textDocument/copilotInlineEdit, its one handler, on plain JSON: the next edit of a chain after a Tab from memory,
    with no task and no loop turn; else the awaitable of the edit service's answer (held until the pause)."""
    asked = _asked(ls, params)
    if isinstance(asked, dict):
        return asked
    uri, doc, offset = asked
    assert ls.edits is not None
    text = doc.text
    recalled = ls.edits.recall(doc_id(uri), doc.version, text, offset)
    if recalled is None:
        return inline_edit(ls, uri, doc, offset)
    edit = recalled[0]
    return {"edits": []} if edit is None else _answered(ls, uri, doc, text, offset, edit, NES_ENCODING)


async def inline_edit(ls: "TabdServer", uri: str, doc: Document, offset: int) -> dict[str, Any]:
    text, at_version = doc.text, doc.version
    assert ls.edits is not None
    edit = await ls.edits.suggest(doc_id(uri), at_version, text, offset, unquote(uri.rstrip("/").rsplit("/", 1)[-1]))
    if edit is None or doc.version != at_version:
        return {"edits": []}
    return _answered(ls, uri, doc, text, offset, edit, NES_ENCODING)


def ghost_item(ls: "TabdServer", uri: str, at: tuple[int, int]) -> dict[str, Any] | None:
    """An inline completion item for the next edit remembered at the cursor, where it only rewrites the rest of the
    cursor's line in a way VS Code draws as ghost text (EditService.as_ghost_text); None otherwise. Accepting it is
    accepting the edit (its command), so the chain after it is answered from memory as after a Tab on the edit."""
    if ls.edits is None or ls.service is None or uri not in ls.admission.serving:
        return None
    try:
        doc = ls.documents.get(uri)
        offset = doc.offset_at(at[0], at[1], ls.encoding)
    except DocumentError:
        return None
    if not ls.edits.remembers(doc.id, offset):  # nothing here: no copy of the document, no digest of it
        return None
    text = doc.text
    edit = ls.edits.as_ghost_text(doc_id(uri), doc.version, text, offset)
    if edit is None:
        return None
    answer = _answered(ls, uri, doc, text, offset, edit, ls.encoding)["edits"][0]
    return {"insertText": answer["text"], "range": answer["range"], "command": answer["command"]}


def _answered(ls: "TabdServer", uri: str, doc: Document, text: str, offset: int, edit: EditSuggestion,
              encoding: str) -> dict[str, Any]:
    """The result for an edit (its range in `encoding`), with what it sets going: the edit after it and the
    completion where it leaves the cursor, both computed ahead."""
    assert ls.edits is not None and ls.service is not None
    start, end = doc.position_at(edit.start, encoding), doc.position_at(edit.end, encoding)
    speculation = asyncio.ensure_future(ls.edits.speculate(edit, text))  # the next Tab's answer, computed ahead
    speculation.add_done_callback(_retrieve)
    after, cursor = applied(edit, text)  # and the completion where the cursor lands once it is applied
    ls.service.docs.prefetch_at(doc_id(uri), ls.state_from(after, cursor), ls.state_from(text, offset))
    return {"edits": [{
        "text": edit.text,
        "range": {"start": {"line": start[0], "character": start[1]}, "end": {"line": end[0], "character": end[1]}},
        "textDocument": {"uri": uri, "version": edit.version},
        "command": {"title": "Accept next edit (tabd)", "command": ACCEPT_EDIT, "arguments": [edit.id]},
    }]}


def _retrieve(task: "asyncio.Future[None]") -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.warning("edit speculation failed: %s", task.exception())


def shown_id(params: object) -> str | None:
    """The edit id in didShowInlineEdit's {item: {command: {arguments: [id]}}}."""
    command = field(field(params, "item"), "command") if field(params, "item") is not None else None
    arguments = field(command, "arguments") if command is not None else None
    if isinstance(arguments, (list, tuple)) and arguments and isinstance(arguments[0], (str, int)):
        return str(arguments[0])
    return None


def register(server: "TabdServer") -> None:
    """The handlers and commands of next-edit suggestions on `server`: one handler per method."""
    server.protocol.plain[INLINE_EDIT] = lambda params: copilot_inline_edit(server, params)
    server.protocol.now = server.protocol.now | {INLINE_EDIT}

    # the handlers' `ls` is typed Any: pygls resolves the annotations of what it registers, and this module does not
    # import TabdServer at run time (it is imported by it); "TabdServer" there made pygls answer malformed params
    # with "name 'TabdServer' is not defined"
    @server.feature(DID_SHOW)
    def did_show_inline_edit(ls: Any, params: object) -> None:
        edit_id = shown_id(params)
        if edit_id is None or ls.edits is None:
            logger.warning("%s expects {item: {command: {arguments: [id]}}}", DID_SHOW)
            return
        ls.edits.shown(edit_id)

    @server.feature(DID_FOCUS)
    def did_focus(ls: Any, params: object) -> None:
        """Copilot's clients say which document the user is in (BufEnter): a request of another document that a newer
        one pre-empted stops instead of resuming (the focus picks no context: that waits for the first request)."""
        document = field(params, "textDocument")
        uri = field(document, "uri") if document is not None else None
        if isinstance(uri, str) and ls.service is not None:
            ls.service.computations.elsewhere(doc_id(uri))

    def accept_edit(*args: Any) -> dict[str, bool]:
        edit_id, _ = command_args(args, ACCEPT_EDIT)
        return {"accepted": server.edits.accept(edit_id) if server.edits is not None else False}

    def reject_edit(*args: Any) -> dict[str, bool]:
        edit_id, _ = command_args(args, REJECT_EDIT)
        return {"rejected": server.edits.reject(edit_id) if server.edits is not None else False}

    server.commands[ACCEPT_EDIT] = accept_edit  # workspace/executeCommand runs them (server.py execute_command)
    server.commands[REJECT_EDIT] = reject_edit
