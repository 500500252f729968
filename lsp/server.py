"""The LSP face of tabd: one handler per method, each converting LSP messages and delegating.

The logic lives in daemon/runtime/ (plain dataclasses in and out); here positions become document states and
answers become LSP items. The hot messages (a keystroke's didChange, a Tab's tabd.accept, the inline completion after
it) are read from their plain JSON by one decoder (lsp/rawparams.py): structuring them through cattrs and pygls'
handler machinery cost more than an answer from memory (README, "Speculation that follows what you accept"). An
inline completion is one call into the service, answer(), which returns at once from memory or an awaitable; only
then does the message run as a task. Which documents the service may read is admission.py's; --record is
recording.py's.
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
from functools import partial
from typing import TYPE_CHECKING, Any, Awaitable, BinaryIO, Callable

from lsprotocol import types
from pygls.capabilities import ServerCapabilitiesBuilder
from pygls.exceptions import FeatureNotificationError, JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer

from tabd.cache.state import DocState
from tabd.daemon.edits.edit_service import EditService
from tabd.daemon.runtime.answer import DISABLED, EXCLUDED, LOADING, Answer
from tabd.daemon.runtime.config import CLIENT_OPTIONS, Config, apply_client_options
from tabd.daemon.runtime.events import EventLog, LogFile
from tabd.daemon.runtime.exclusion import compile_globs
from tabd.daemon.runtime.lifecycle import start_parent_watch
from tabd.daemon.runtime.request import Asked
from tabd.daemon.runtime.service import CompletionService, compose
from tabd.lsp import inline_edit, rawparams
from tabd.lsp.admission import Admission
from tabd.lsp.args import command_args, doc_id, fs_path, plain
from tabd.lsp.documents import Document, DocumentError, DocumentStore
from tabd.lsp.protocol import Frame, TabdProtocol
from tabd.lsp.recording import Recorder, Recording
from tabd.lsp.transport import serve_stdio, serve_tcp

if TYPE_CHECKING:  # for the annotations only (pygls defines ServerErrors for type checkers alone)
    from pygls.server import ServerErrors

    from tabd.predictor.types import Backend

__all__ = ["TabdServer", "build_server", "command_args", "doc_id", "inline_result"]

REFUSED = (EXCLUDED, DISABLED, LOADING)  # answers that say the document gets nothing now: no edit as ghost text either

logger = logging.getLogger(__name__)

VERSION = "0.1.0"
ACCEPT = "tabd.accept"
DISMISS = "tabd.dismiss"
STATS = "tabd/stats"
DOCUMENT = "tabd/document"  # the server's copy of a document, for clients and tests to check sync
CONTEXT = "tabd/context"  # the workspace context a document's prompts start with (debug; the log has counts only)
FOCUS = "tabd/focus"  # notification {uri, position}: the user moved there; warm the KV up before the first request
SET_ENABLED = "tabd/setEnabled"  # notification {enabled, uri?, minutes?}: suggestions on or off (runtime/controls.py)
MAX_POPUPS = 20  # window/showMessage a session shows; the rest go to the log
MAX_POPUP_CHARS = 500
INLINE_EXPECTS = "textDocument/inlineCompletion expects {textDocument: {uri}, position: {line, character}, context?}"


# method -> what runs it: a handler takes the server and the method's params (plain JSON, or pygls' structured ones)
Handler = Callable[["TabdServer", Any], Any]
Command = Callable[..., dict[str, bool]]  # workspace/executeCommand's: the command's arguments in, its result out
Heard = Callable[[], object]  # what a service hears of an edit (or an accept), to tell it now or later


class TabdServer(LanguageServer):
    protocol: TabdProtocol  # protocol_cls below

    def __init__(self, config: Config, backend_factory: Callable[[Config], Backend], events: EventLog) -> None:
        super().__init__("tabd", VERSION, protocol_cls=TabdProtocol, text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.config = config
        self.backend_factory = backend_factory
        self.events = events
        self.documents = DocumentStore()
        self.encoding = "utf-16"  # the position encoding negotiated in initialize
        self.service: CompletionService | None = None
        self.edits: EditService | None = None  # next-edit suggestions (lsp/inline_edit.py), made at initialize
        self.pending_messages: list[str] = []
        self.closers: list[Callable[[], None]] = []  # files opened because of initializationOptions
        self.parent_watch: asyncio.Task[None] | None = None
        # workspace/executeCommand's
        self.commands: dict[str, Command] = {ACCEPT: self.accept_command, DISMISS: self.dismiss_command}
        self.recording = Recording(time.monotonic(), lambda message: self.show(types.MessageType.Error, message))
        self.admission = Admission(config, self.documents, self.recording,
                                   lambda message: self.show(types.MessageType.Warning, message), self.serving_changed)
        self.popups = 0  # window/showMessage sent (show)
        self.notification_error_shown = False
        self.restart_said = False  # didChangeConfiguration's "at the next start", said once
        self.streams: set[tuple[int, int]] = set()  # (device, inode) of the LSP input and output: never a log
        # while a Tab's read answers its inline completion first (tab_read): what its edits tell the next-edit side
        # and the completion service, each in order, to run once that answer is out
        self.deferred: tuple[list[Heard], list[Heard]] | None = None
        self.later: StateAt | None = None  # in a Tab's read, its last edit's state, made once the service hears it

    @property
    def recorder(self) -> Recorder | None:
        return self.recording.recorder

    @recorder.setter
    def recorder(self, recorder: Recorder | None) -> None:  # `tabd serve --record`'s session file
        self.recording.recorder = recorder

    def start_io(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> int:
        """Serve on stdio with our transport (see lsp/transport.py); the process exit code."""
        return serve_stdio(self, None if stdin is None else stdin.fileno(), stdout)

    def start_tcp(self, host: str, port: int) -> int:  # type: ignore[override]  # pygls': None; ours: the exit code
        return serve_tcp(self, host, port)

    def show(self, kind: types.MessageType, message: str) -> None:
        """A pop-up in the editor, bounded: a message may quote what the client sent, and a client that sends bad
        values in a loop must not bury the user in pop-ups (past MAX_POPUPS they go to the log only)."""
        message = message if len(message) <= MAX_POPUP_CHARS else message[:MAX_POPUP_CHARS] + "..."
        self.popups += 1
        if self.popups > MAX_POPUPS:
            logger.warning("not shown (%d pop-ups already): %s", MAX_POPUPS, message)
            return
        if self.popups == MAX_POPUPS:
            message += " (further messages go to the log only)"
        self.window_show_message(types.ShowMessageParams(type=kind, message=f"tabd: {message}"))

    def report_server_error(self, error: Exception, source: ServerErrors) -> None:
        """pygls' report of an exception in a handler: a request's error is its answer; a notification's (the
        client's malformed params, mostly) is logged, and shown once, not once per message."""
        text = f"{type(error).__name__}: {error}"[:MAX_POPUP_CHARS]
        logger.error("error in a handler: %s", text)
        if source is FeatureNotificationError and not self.notification_error_shown:
            self.notification_error_shown = True
            self.show(types.MessageType.Error, f"error in server: {text}")

    async def report_model(self) -> None:
        """Tell the user once when the model cannot load: completions stay empty, and this says why."""
        try:
            ok = await self.service.ready() if self.service is not None else True
        except Exception as exc:  # stopped before it loaded
            logger.info("model load not finished: %s", exc)
            return
        if not ok and self.service is not None:
            self.show(types.MessageType.Error, "the model could not be loaded, so there will be no suggestions: "
                      f"{self.service.model.error}")

    def open_client_log(self, path: str) -> bool:
        """initializationOptions.log: a log file asked for by the editor, opened now so a bad path is reported now.
        The LSP stream itself (/proc/self/fd/N, /dev/stdout) is refused: log lines there are bytes outside any frame."""
        try:
            if _file_id(path) in self.streams:
                raise OSError(f"{path} is the LSP connection itself")
            log_file = LogFile(path)
        except (OSError, ValueError) as exc:  # ValueError: a NUL or a lone surrogate in the path
            why = getattr(exc, "strerror", None) or str(exc)
            self.pending_messages.append(f"option 'log': {why[:MAX_POPUP_CHARS]}; not logging to it")
            return False
        self.events.add_sink(log_file.write)
        self.closers.append(log_file.close)
        return True

    def accept_command(self, *args: Any) -> dict[str, bool]:
        answer_id, options = command_args(args, ACCEPT)
        chars = options.get("chars")
        count = chars if isinstance(chars, int) else None
        whole = not options.get("partial", False)
        alternative = options.get("alternative")
        alternative = alternative if isinstance(alternative, str) else None
        service = self.service
        if service is None:
            known = False
        elif self.deferred is not None:  # a Tab's read (tab_read): its answer now, counted once its edit is heard
            known = service.docs.known(answer_id)
            self.deferred[1].append(partial(service.docs.accept, answer_id, count, not whole, alternative))
        else:
            known = service.docs.accept(answer_id, count, not whole, alternative)
        self.recording.record("accept", id=answer_id, chars=chars, partial=not whole)
        return {"accepted": known}

    def dismiss_command(self, *args: Any) -> dict[str, bool]:
        answer_id, _ = command_args(args, DISMISS)
        known = self.service.docs.dismiss(answer_id) if self.service else False
        self.recording.record("dismiss", id=answer_id)
        return {"dismissed": known}

    def close(self) -> None:
        self.events.release()  # lines still held for the loop's next turn go to the log files before they close
        if self.parent_watch is not None:
            self.parent_watch.cancel()
        self.admission.controls.close()
        if self.service is not None:
            self.service.close()
        for close in self.closers:
            try:
                close()
            except OSError:
                pass
        self.closers.clear()

    def serving_changed(self, uri: str, allowed: bool) -> bool:
        """Give the service a document now allowed, or take it away (admission.py); whether there is a service."""
        if self.service is None:
            return False
        doc = doc_id(uri)
        if allowed:
            document = self.documents.get(uri)
            self.service.docs.opened(doc, context_path(uri, self.admission.roots), document.text, document.language)
            return True
        self.service.docs.closed(doc)
        if self.edits is not None:
            self.edits.closed(doc)
        return True

    def state_of(self, doc: Document, offset: int) -> DocState:
        """The state the service sees: a bounded window of text either side of the offset."""
        before, after = doc.around(offset, self.config.prefix_chars * 2, self.config.suffix_chars * 2)
        return DocState(offset, before, after)

    def state_from(self, text: str, offset: int) -> DocState:
        """The state the service sees at an offset of a text (a document as an accept would leave it)."""
        return DocState.from_text(text, offset, self.config.prefix_chars * 2, self.config.suffix_chars * 2)

    def apply_changes(self, uri: str, version: int, changes: list[rawparams.Change]) -> None:
        """A didChange's edits, in order: the document, the recording, then what the services hear of them (the
        next-edit history, accepts seen in the edit, the service), now or, in a Tab's read, once its inline completion
        is answered (tab_read: `deferred`)."""
        try:
            doc = self.documents.get(uri)
        except DocumentError as exc:
            logger.warning("%s", exc)
            return
        if self.later is not None and self.later.doc is doc:  # a Tab's read edits again: the last edit's state first
            made(self, self.later)
        cursor = None
        secret = uri in self.admission.excluded  # its changes are never recorded (unless git is still being asked)
        service = self.service if uri in self.admission.serving else None
        edited: list[Heard] = []  # the next-edit side's, then the service's
        heard: list[Heard] = []
        for span, text in changes:
            if span is None:
                cursor = doc.apply(None, None, text, self.encoding)
                self.recording.changed(uri, secret, text=text)
                continue
            start, end = span
            try:
                a, b = doc.offset_at(*start, self.encoding), doc.offset_at(*end, self.encoding)
                if self.edits is not None and service is not None and b >= a:  # an excluded or switched-off document's edits teach nothing
                    edited.append(partial(self.edits.edited, doc.id, a, doc.content.slice(a, b) if b > a else "", text))
                cursor = doc.replace(a, b, text, span)  # the offsets just read, not read again
            except DocumentError as exc:
                logger.warning("change to %s skipped: %s", doc_id(uri), exc)
                continue
            self.recording.changed(uri, secret, range=_range_dict(start, end), text=text)
            if service is not None:  # an accept by a client that never runs tabd.accept? elsewhere?
                heard.append(partial(service.docs.edited, doc.id, a, b - a, text))
        doc.version = version
        if cursor is not None:
            self.recording.cursors[uri] = cursor
        if service is not None and self.deferred is not None and cursor is not None:  # a Tab's: its state once heard
            at = self.later = StateAt(doc, cursor)
            heard.append(lambda: service.docs.changed(doc.id, made(self, at), lambda: doc.text, cursor))
        elif service is not None:
            state = self.state_of(doc, cursor) if cursor is not None else None
            heard.append(partial(service.docs.changed, doc.id, state, lambda: doc.text, cursor))  # joined only when a pick reads it
        if self.deferred is not None:
            self.deferred[0].extend(edited)
            self.deferred[1].extend(heard)
            return
        for hear in edited + heard:  # two services that know nothing of each other: each hears the edits in order
            hear()

    def ask(self, uri: str, line: int, character: int,
            invoked: bool) -> tuple[Answer | Awaitable[Answer], Document, int]:
        """The service's answer at a position (at once, or to await), and the document and cursor offset it is for."""
        try:
            doc = self.documents.get(uri)
            offset = doc.offset_at(line, character, self.encoding)
        except DocumentError as exc:
            raise JsonRpcInvalidParams(str(exc)) from None
        if self.service is None:
            raise JsonRpcInvalidParams("the server is not initialized")
        if uri in self.admission.serving and self.recording.recorder is None:  # served, nothing to record: straight on
            asked = _asked(self, doc, offset, invoked)
            if self.deferred is not None:  # a Tab's read, its edits not heard yet (tab_read): memory's ready answer
                later = self.later
                if later is not None and later.doc is doc and later.cursor == offset and later.state is None:
                    later.state = asked.state  # the edit's state is this one: read once
                got = self.service.answer_ready(asked)
                if got is not None:  # an empty one may show a next edit remembered here, which the next-edit side
                    if not got.text and self.edits is not None and self.edits.remembers(doc.id, offset):
                        hear(self, edits_only=True)  # finds once it has heard the edits; the rest hear them after
                    return got, doc, offset
                hear(self)
            return self.service.answer(asked), doc, offset
        hear(self)
        check = self.admission.pending(uri)  # a served document has none: its git check ended before it was served
        if check is not None:  # whether git ignores the document: known in a few ms (bounded by its timeout)
            return self._asked_after(check, uri, doc, offset, line, character, invoked), doc, offset
        return self._asked(uri, doc, offset, line, character, invoked), doc, offset

    async def _asked_after(self, check: asyncio.Task[None], uri: str, doc: Document, offset: int, line: int,
                           character: int, invoked: bool) -> Answer:
        await asyncio.wait({check})
        got = self._asked(uri, doc, offset, line, character, invoked)
        return got if isinstance(got, Answer) else await got

    def _asked(self, uri: str, doc: Document, offset: int, line: int, character: int,
               invoked: bool) -> Answer | Awaitable[Answer]:
        assert self.service is not None
        why = "" if uri in self.admission.serving else self.admission.blocked(uri)  # served: blocked by nothing
        # a recording keeps nothing of an excluded document but its open; with none, nothing on the request's path
        if why != EXCLUDED and self.recording.recorder is not None:
            self.recording.moved_to(uri, offset, {"line": line, "character": character})
        if why:
            return self.service.refused(why)
        return self.service.answer(_asked(self, doc, offset, invoked))

    def inline_items(self, uri: str, doc: Document, offset: int, at: tuple[int, int],
                     answer: Answer) -> dict[str, Any]:
        """An inline completion's result for an answer at `offset`: its item (through the closers it writes itself),
        or, empty, a next edit that only rewrites the rest of the line, as ghost text; or why there is none."""
        if not answer.text and answer.reason not in REFUSED:
            ghost = inline_edit.ghost_item(self, uri, at)
            if ghost is not None:
                return {"items": [ghost]}
        start = _position(doc.position_at(offset, self.encoding))
        end = _position(doc.position_at(offset + answer.replaces, self.encoding)) if answer.replaces else start
        result = inline_result(answer, start, end)
        if answer.reason == EXCLUDED:  # which rule, in words, so the client can say it and how to change it
            result["tabd"]["rule"] = self.admission.excluded.get(uri, "")
        return result


# -- the handlers: one per method -------------------------------------------------------------------------------

def inline_completion(ls: TabdServer, params: object) -> dict[str, Any] | Awaitable[dict[str, Any]]:
    """textDocument/inlineCompletion, on plain JSON: answered at once from memory (no task, no loop turn), or a task
    that awaits the one model run."""
    asked = rawparams.inline_completion(params)
    if asked is None:
        raise JsonRpcInvalidParams(INLINE_EXPECTS)
    uri, at, invoked = asked
    got, doc, offset = ls.ask(uri, *at, invoked)
    if isinstance(got, Answer):
        return ls.inline_items(uri, doc, offset, at, got)
    return _inline_later(ls, uri, doc, offset, at, got)


async def _inline_later(ls: TabdServer, uri: str, doc: Document, offset: int, at: tuple[int, int],
                        got: Awaitable[Answer]) -> dict[str, Any]:
    return ls.inline_items(uri, doc, offset, at, await got)


def tab_read(ls: TabdServer, frames: list[Frame]) -> list[Frame]:
    """A read of several messages (lsp/transport.py) that is a Tab's: its edits (didChange), maybe tabd.accept, then
    the next inline completion, which the client sends together. Each is handled by its handler, in order, but what
    the services hear of the edits and the accepts waits (TabdServer.deferred) until the completion is answered when
    memory holds its answer ready for the document after the edits (TabdServer.ask): that answer is written first,
    after the accepts' answers (an accept's answer says whether its id was shown, which the edits do not change), then
    the services hear the edits and the accepts, in their order, before the answer's own bookkeeping (which follows
    its write). The answer is the one they would have found: the ready index is kept by the document's context
    snapshot, the model and the cache entry, none of which what they hear changes. An empty answer may show a next
    edit instead (inline_edit.ghost_item), which the next-edit side finds once it has heard the edits: it hears them
    first then; with no answer ready, everything is heard before the request goes on. Returns the frames still to
    handle: none of a Tab's read, all of any other."""
    values: list[Any] = [f.value if f.kind == "message" and not f.note else None for f in frames]
    if not _request(values[-1], types.TEXT_DOCUMENT_INLINE_COMPLETION) or not ls.protocol.initialized or \
            ls.protocol._shutdown:
        return frames
    edits = next((n for n, v in enumerate(values) if not _notification(v, types.TEXT_DOCUMENT_DID_CHANGE)), 0)
    if not edits or not all(_accept(v) for v in values[edits:-1]):
        return frames
    ls.deferred = ([], [])
    try:
        for frame in frames:
            ls.protocol.handle_frame(frame)
    finally:
        hear(ls)
        ls.deferred = ls.later = None
    return []


class StateAt:
    """The state after a Tab's edit (TabdServer.state_of at its cursor), made when the service hears the edit, after
    the answer's write: the completion's own reading where it asks at that cursor, else read then, or before another
    edit in the read changes the document."""

    __slots__ = ("doc", "cursor", "state")

    def __init__(self, doc: Document, cursor: int) -> None:
        self.doc, self.cursor = doc, cursor
        self.state: DocState | None = None


def made(ls: TabdServer, at: StateAt) -> DocState:
    if at.state is None:
        at.state = ls.state_of(at.doc, at.cursor)
    return at.state


def hear(ls: TabdServer, edits_only: bool = False) -> None:
    """Tell the services what they have not heard yet of a Tab's read (TabdServer.deferred): the next-edit side its
    edits, then (unless `edits_only`) the completion service its edits and accepts, in order."""
    if ls.deferred is None:
        return
    edited, heard = ls.deferred
    told = edited[:] if edits_only else edited + heard
    edited.clear()
    if not edits_only:
        heard.clear()
    for tell in told:
        try:
            tell()
        except Exception:  # one failed step must not drop the others
            logger.exception("after a Tab's edit")


def _accept(value: Any) -> bool:
    """Whether a message is a tabd.accept request whose arguments read."""
    request = rawparams.command(value["params"]) if _request(value, types.WORKSPACE_EXECUTE_COMMAND) else None
    if request is None or request[0] != ACCEPT:
        return False
    try:
        command_args(tuple(request[1]), ACCEPT)
    except JsonRpcInvalidParams:
        return False
    return True


def _request(value: Any, method: str) -> bool:
    return type(value) is dict and value.get("jsonrpc") == "2.0" and value.get("method") == method and \
        type(value.get("id")) in (int, str) and type(value.get("params")) is dict


def _notification(value: Any, method: str) -> bool:
    return type(value) is dict and value.get("jsonrpc") == "2.0" and value.get("method") == method and \
        "id" not in value and type(value.get("params")) is dict


async def completion(ls: TabdServer, params: types.CompletionParams) -> types.CompletionList:
    """textDocument/completion: the same answer as one completion item (for clients without inline completion)."""
    position = params.position
    got, doc, offset = ls.ask(params.text_document.uri, position.line, position.character, False)
    answer = got if isinstance(got, Answer) else await got
    if not answer.text:
        return types.CompletionList(is_incomplete=True, items=[])
    start, end = doc.position_at(offset, ls.encoding), doc.position_at(offset + answer.replaces, ls.encoding)
    label = answer.text.strip().split("\n", 1)[0][:80] or answer.text
    item = types.CompletionItem(
        label=label,
        kind=types.CompletionItemKind.Text,
        detail="tabd",
        sort_text="0",
        filter_text=label,
        text_edit=types.TextEdit(range=types.Range(start=types.Position(line=start[0], character=start[1]),
                                                   end=types.Position(line=end[0], character=end[1])),
                                 new_text=answer.text),
        command=types.Command(title="Accept tabd suggestion", command=ACCEPT, arguments=[answer.id]),
    )
    return types.CompletionList(is_incomplete=True, items=[item])


def did_change(ls: TabdServer, params: object) -> None:
    """didChange on plain JSON (a keystroke, and the edit a Tab makes); one that does not read changes nothing."""
    change = rawparams.did_change(params)
    if change is None:
        what = "a content change's text is not a string" if not rawparams.texts_are_strings(params) else \
            "textDocument needs a string uri and an integer version, contentChanges valid ranges and string texts"
        logger.warning("didChange dropped: %s", what)
        return
    ls.apply_changes(*change)


def did_open(ls: TabdServer, params: object) -> None:
    """didOpen on plain JSON; one that does not read (a text that is not a string) is dropped with a log line."""
    opened = rawparams.did_open(params)
    if opened is None:
        logger.warning("didOpen dropped: textDocument needs a string uri, languageId and text and an integer version")
        return
    uri, version, language, text = opened
    ls.documents.open(uri, text, version, language)
    ls.admission.opened(uri, text, language)


def did_close(ls: TabdServer, params: object) -> None:
    uri = rawparams.document_uri(params)
    if uri is None:
        logger.warning("didClose dropped: textDocument needs a string uri")
        return
    ls.documents.close(uri)
    ls.recording.closed(uri)
    if ls.edits is not None:
        ls.edits.closed(doc_id(uri))
    ls.admission.closed(uri)


def execute_command(ls: TabdServer, params: object) -> dict[str, bool]:
    """workspace/executeCommand on plain JSON: tabd.accept and tabd.dismiss (a Tab's: nobody waits on the answer),
    the next-edit commands; anything else is the client's mistake, answered InvalidParams."""
    request = rawparams.command(params)
    if request is None:
        raise JsonRpcInvalidParams("workspace/executeCommand expects {command, arguments?}")
    name, arguments = request
    run = ls.commands.get(name)
    if run is None:
        raise JsonRpcInvalidParams(f"unknown command {name[:200]!r}")
    return run(*arguments)


def initialize(ls: TabdServer, params: types.InitializeParams) -> None:
    before = ls.config
    ls.streams = _stream_ids(ls.protocol)
    ls.config, problems = apply_client_options(ls.config, params.initialization_options)
    ls.pending_messages.extend(problems)
    if ls.config.log and ls.config.log != before.log and not ls.open_client_log(ls.config.log):
        ls.config.log = before.log
    encoding = ServerCapabilitiesBuilder.choose_position_encoding(params.capabilities)
    ls.encoding = str(getattr(encoding, "value", encoding))
    ls.pending_messages.extend(ls.admission.configure(ls.config, workspace_roots(params)))
    ls.service = compose(ls.config, ls.backend_factory, ls.events)
    ls.edits = EditService(ls.service.edits.score, ls.config.edit_min_confidence,
                           writer=ls.service.edits.writer() if ls.config.edit_sources != "propagation" else None,
                           model_min_confidence=ls.config.edit_model_min_confidence,
                           propagate=ls.config.edit_sources != "model",
                           lag=inline_edit.client_lag(params.client_info)) if ls.config.inline_edits else None
    ls.parent_watch = start_parent_watch(params.process_id, lambda: ls.protocol.request_exit(1))


def initialized(ls: TabdServer, params: types.InitializedParams) -> None:
    for message in ls.pending_messages:
        ls.show(types.MessageType.Warning, message)
    ls.pending_messages.clear()
    asyncio.ensure_future(ls.report_model())


def did_change_configuration(ls: TabdServer, params: types.DidChangeConfigurationParams) -> None:
    """Settings sent after initialize (VS Code sends its sections on every change): tabd's section checked
    through the settings table as initializationOptions are, each bad value reported and ignored. The model,
    caches and workers were built from the settings at initialize, so good values take effect at the next
    start, which is said once."""
    settings = plain(params.settings)
    if not isinstance(settings, dict):
        return
    section = settings.get("tabd") if "tabd" in settings else settings if set(settings) & set(CLIENT_OPTIONS) \
        else None
    if section is None:
        return  # other extensions' settings: nothing of tabd's
    updated, problems = apply_client_options(ls.config, section)
    for name in ("exclude", "include"):  # globs are checked where they compile: keep the ones that do
        added = getattr(updated, name)[len(getattr(ls.config, name)):]
        good, bad = compile_globs(added, name)
        problems += bad
        setattr(updated, name, getattr(ls.config, name) + tuple(g.text for g in good))
    for problem in problems:
        ls.show(types.MessageType.Warning, problem)
    changed = sorted(key for key, row in CLIENT_OPTIONS.items()
                     if getattr(updated, row.name) != getattr(ls.config, row.name))
    if changed and not ls.restart_said:
        ls.restart_said = True
        ls.show(types.MessageType.Info, f"changed settings take effect when the server restarts: {', '.join(changed[:10])}")


def shutdown(ls: TabdServer, params: object) -> None:
    if ls.service is not None:
        ls.service.close()  # joins the model worker: nothing runs on after shutdown


def stats(ls: TabdServer, params: object) -> dict[str, Any]:
    if ls.service is None:
        raise JsonRpcInvalidParams("the server is not initialized")
    out = ls.service.stats_dict()
    if ls.edits is not None:
        out["edits"] = {**ls.edits.stats.as_dict(), "last": ls.edits.last}
    return out


def focus(ls: TabdServer, params: object) -> None:
    uri, position = getattr(params, "uri", None), getattr(params, "position", None)
    line, character = getattr(position, "line", None), getattr(position, "character", None)
    if ls.service is None or not isinstance(uri, str) or not isinstance(line, int) or not isinstance(character, int):
        logger.warning("tabd/focus expects {uri, position: {line, character}}")
        return
    if uri not in ls.admission.serving:
        return  # excluded or switched off: nothing to warm up
    try:
        doc = ls.documents.get(uri)
        state = ls.state_of(doc, doc.offset_at(max(0, line), max(0, character), ls.encoding))
    except DocumentError as exc:
        logger.warning("tabd/focus: %s", exc)
        return
    ls.service.docs.focus(doc_id(uri), state)


def set_enabled(ls: TabdServer, params: Any) -> None:
    ls.admission.set_enabled(params)


def context(ls: TabdServer, params: object) -> dict[str, Any]:
    uri = getattr(params, "uri", None) if params is not None else None
    if ls.service is None or not isinstance(uri, str):
        raise JsonRpcInvalidParams("tabd/context expects {uri} after initialize")
    snap = ls.service.docs.context_of(doc_id(uri))
    return {"uri": uri, "digest": snap.digest, "tokens": snap.tokens,
            "chunks": [{"path": c.path, "kind": c.kind, "line": c.line, "text": c.text} for c in snap.chunks],
            "sources": [{"path": path, "chars": len(text)} for path, text in snap.sources]}


def document(ls: TabdServer, params: object) -> dict[str, Any]:
    uri = getattr(params, "uri", None) if params is not None else None
    if not isinstance(uri, str):
        raise JsonRpcInvalidParams("tabd/document expects {uri}")
    try:
        doc = ls.documents.get(uri)
    except DocumentError as exc:
        raise JsonRpcInvalidParams(str(exc)) from None
    return {"uri": uri, "version": doc.version, "text": doc.text, "lines": doc.line_count}


# method -> (its handler, the options it is advertised with). The plain ones read the message's JSON (the protocol
# calls them before pygls structures anything); pygls also has them registered, for the capabilities it advertises.
PLAIN: dict[str, tuple[Handler, Any]] = {
    types.TEXT_DOCUMENT_INLINE_COMPLETION: (inline_completion, types.InlineCompletionOptions()),
    types.TEXT_DOCUMENT_DID_CHANGE: (did_change, None),
    types.TEXT_DOCUMENT_DID_OPEN: (did_open, None),
    types.TEXT_DOCUMENT_DID_CLOSE: (did_close, None),
    types.WORKSPACE_EXECUTE_COMMAND: (execute_command, None),
}
STRUCTURED: dict[str, tuple[Handler, Any]] = {
    types.INITIALIZE: (initialize, None),
    types.INITIALIZED: (initialized, None),
    types.WORKSPACE_DID_CHANGE_CONFIGURATION: (did_change_configuration, None),
    types.SHUTDOWN: (shutdown, None),
    types.TEXT_DOCUMENT_COMPLETION: (completion, types.CompletionOptions(trigger_characters=[".", "(", " "])),
    STATS: (stats, None),
    FOCUS: (focus, None),
    SET_ENABLED: (set_enabled, None),
    CONTEXT: (context, None),
    DOCUMENT: (document, None),
}


def build_server(config: Config, backend_factory: Callable[[Config], Backend],
                 events: EventLog | None = None) -> TabdServer:
    server = TabdServer(config, backend_factory, events or EventLog())
    for method, (handler, options) in {**PLAIN, **STRUCTURED}.items():
        if method != types.WORKSPACE_EXECUTE_COMMAND:  # pygls' own runs its registered commands (below)
            server.feature(method, options)(handler)
    server.protocol.plain = {method: _bound(handler, server) for method, (handler, _) in PLAIN.items()}
    server.protocol.lazy = frozenset({types.WORKSPACE_EXECUTE_COMMAND})  # tabd.accept / tabd.dismiss: nobody waits
    server.protocol.now = frozenset({types.TEXT_DOCUMENT_INLINE_COMPLETION})
    server.protocol.first = partial(tab_read, server)
    server.protocol.notifications = frozenset({types.TEXT_DOCUMENT_DID_CHANGE, types.TEXT_DOCUMENT_DID_OPEN,
                                               types.TEXT_DOCUMENT_DID_CLOSE})
    inline_edit.register(server)
    for name in server.commands:  # advertised as executeCommandProvider's commands; run by execute_command
        server.command(name)(_command(name))
    return server


def _bound(handler: Handler, server: TabdServer) -> Callable[[Any], Any]:
    return lambda params: handler(server, params)


def _command(name: str) -> Callable[..., dict[str, bool]]:
    def run(ls: TabdServer, *args: Any) -> dict[str, bool]:
        return ls.commands[name](*args)
    return run


def inline_result(answer: Answer, at: dict[str, int], end: dict[str, int] | None = None) -> dict[str, Any]:
    """An InlineCompletionList as plain JSON: the item of a suggestion at `at` (replacing through `end`: the
    editor's closers it writes itself), with tabd.accept, then an invoked request's alternatives; or none, with why."""
    if not answer.text:
        return {"items": [], "tabd": {"reason": answer.reason or "nothing"}}
    command = {"title": "Accept tabd suggestion", "command": ACCEPT, "arguments": [answer.id]}
    items = [{"insertText": answer.text, "range": {"start": at, "end": end or at}, "command": command}]
    for text, replaces in answer.alternatives:  # an invoked request's other candidates (the closers are on the line)
        items.append({"insertText": text, "range": {"start": at, "end": {**at, "character": at["character"] + replaces}},
                      "command": {**command, "arguments": [answer.id, {"alternative": text}]}})
    return {"items": items}


def workspace_roots(params: types.InitializeParams) -> list[str]:
    """Filesystem paths of the client's workspace folders (or its root), longest first."""
    uris = [f.uri for f in params.workspace_folders or []] or ([params.root_uri] if params.root_uri else [])
    roots = [path for path in (fs_path(u) for u in uris) if path]
    return sorted(roots, key=len, reverse=True)


def context_path(uri: str, roots: list[str]) -> str:
    """The path a context chunk names: relative to a workspace folder, or below site-packages, else the last three parts."""
    path = fs_path(uri) or uri
    for root in roots:
        if path.startswith(root.rstrip("/") + "/"):
            return path[len(root.rstrip("/")) + 1:]
    parts = path.strip("/").split("/")
    for marker in ("site-packages", "dist-packages"):
        if marker in parts[:-1]:
            return "/".join(parts[len(parts) - parts[::-1].index(marker):])
    return "/".join(parts[-3:])


def _file_id(path: str) -> tuple[int, int] | None:
    """(device, inode) of what a path names now, or None (it does not exist yet: a new file, no stream)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


def _stream_ids(protocol: object) -> set[tuple[int, int]]:
    """(device, inode) of the streams the LSP connection runs on: the pipe or file of stdin and of the output."""
    ids = set()
    for fd in (getattr(protocol, "input_fd", None), getattr(protocol, "output_fd", None)):
        if isinstance(fd, int):
            try:
                st = os.fstat(fd)
            except OSError:
                continue
            ids.add((st.st_dev, st.st_ino))
    return ids


def _asked(ls: TabdServer, doc: Document, offset: int, invoked: bool) -> Asked:
    """What the service is asked at an offset: the state's parts as state_of reads them (the service makes the
    DocState only where it needs one: an answer memory holds ready for these parts needs none)."""
    before, after = doc.around(offset, ls.config.prefix_chars * 2, ls.config.suffix_chars * 2)
    return Asked(doc.id, doc.version, None, invoked, at=(offset, before, after))


def _position(at: tuple[int, int]) -> dict[str, int]:
    return {"line": at[0], "character": at[1]}


def _range_dict(start: tuple[int, int], end: tuple[int, int]) -> dict[str, dict[str, int]]:
    return {"start": {"line": start[0], "character": start[1]}, "end": {"line": end[0], "character": end[1]}}
