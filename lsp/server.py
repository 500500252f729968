"""The LSP face of tabd: a thin file of pygls handlers that convert LSP types and delegate.

The logic lives in daemon/runtime/service.py (plain dataclasses in and out); this file
turns positions into document states and answers into LSP items.

build_server is over 50 lines because it is the list of handlers, each a few lines that convert and delegate.
"""
from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import time
from typing import Any, Callable

from lsprotocol import types
from pygls.capabilities import ServerCapabilitiesBuilder
from pygls.exceptions import FeatureNotificationError, JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer

from tabd.cache.state import DocState
from tabd.daemon.runtime.exclusion import Exclusion, compile_globs, git_ignores_later, git_work_tree
from tabd.daemon.runtime.answer import DISABLED, EXCLUDED, LOADING, refusal
from tabd.daemon.runtime.config import CLIENT_OPTIONS, Config, apply_client_options
from tabd.daemon.runtime.controls import Controls, read_switch
from tabd.daemon.runtime.events import EventLog, LogFile
from tabd.daemon.runtime.lifecycle import start_parent_watch
from tabd.daemon.runtime.service import Answer, CompletionService
from tabd.lsp.documents import Document, DocumentError, DocumentStore
from tabd.lsp import inline_edit, rawparams
from tabd.daemon.edits.edit_service import EditService
from tabd.lsp.protocol import NOT_PLAIN, TabdProtocol
from tabd.lsp.transport import serve_stdio, serve_tcp

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
MAX_ACCEPT_CHARS = 1 << 20  # tabd.accept's chars: more than any suggestion has
MAX_ID_CHARS = 256  # an item id tabd made is 12 characters
REQUEST_TIMEOUT_S = 30.0  # a loaded model that takes longer than this answers empty rather than never
LOAD_WAIT_S = 60.0  # a request waits this long for the model to load, then answers empty ("loading")


def doc_id(uri: str) -> str:
    """A short hash of the URI: what logs and slots use, so no path leaks into a log."""
    return hashlib.blake2b(uri.encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()


class TabdServer(LanguageServer):
    def __init__(self, config: Config, backend_factory: Callable[[Config], Any], events: EventLog) -> None:
        super().__init__("tabd", VERSION, protocol_cls=TabdProtocol, text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.config = config
        self.backend_factory = backend_factory
        self.events = events
        self.documents = DocumentStore()
        self.encoding = "utf-16"  # the position encoding negotiated in initialize
        self.service: CompletionService | None = None
        self.edits: EditService | None = None  # next-edit suggestions (lsp/inline_edit.py), made at initialize
        self.recorder: Any = None  # has .record(dict); set by `tabd serve --record`
        self.started = time.monotonic()
        self.pending_messages: list[str] = []
        self.closers: list[Callable[[], None]] = []  # files opened because of initializationOptions
        self.parent_watch: asyncio.Task | None = None
        self.roots: list[str] = []  # workspace folder paths, for the `# path` lines of context chunks
        self.commands = {ACCEPT: self.accept_command, DISMISS: self.dismiss_command}  # both paths run these
        self.cursors: dict[str, int] = {}  # uri -> where its last edit (or request) left the cursor, for --record
        self.exclusion = Exclusion(config.exclude, include=config.include)
        self.excluded: dict[str, str] = {}  # uri -> why: open documents kept from the service, the log and --record
        self.checking: dict[str, asyncio.Task] = {}  # uri -> its git check-ignore still running (opened)
        # uri -> when it was opened, its text then and the changes made while git was asked (each with its time):
        # recorded once git says it may be
        self.unrecorded: dict[str, tuple[float, str, list[dict]]] = {}
        self.controls = Controls(self.switched)
        self.serving: set[str] = set()  # open documents the service knows: neither excluded nor switched off
        self.popups = 0  # window/showMessage sent (show)
        self.notification_error_shown = False
        self.restart_said = False  # didChangeConfiguration's "at the next start", said once
        self.streams: set[tuple[int, int]] = set()  # (device, inode) of the LSP input and output: never a log

    def start_io(self, stdin=None, stdout=None) -> int:  # type: ignore[override]
        """Serve on stdio with our transport (see lsp/transport.py); the process exit code."""
        return serve_stdio(self, None if stdin is None else stdin.fileno(), stdout)

    def start_tcp(self, host: str, port: int) -> int:  # type: ignore[override]
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

    def report_server_error(self, error: Exception, source: Any) -> None:  # type: ignore[override]
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
            self.show(types.MessageType.Error, f"the model could not be loaded, so there will be no suggestions: {self.service.load_error}")

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

    def accept_command(self, *args: Any) -> dict:
        answer_id, options = command_args(args, ACCEPT)
        chars = options.get("chars")
        partial = bool(options.get("partial", False))
        alternative = options.get("alternative")
        alternative = alternative if isinstance(alternative, str) else None
        known = (self.service.accept(answer_id, chars if isinstance(chars, int) else None, partial, alternative)
                 if self.service else False)
        self.record("accept", id=answer_id, chars=chars, partial=partial)
        return {"accepted": known}

    def dismiss_command(self, *args: Any) -> dict:
        answer_id, _ = command_args(args, DISMISS)
        known = self.service.dismiss(answer_id) if self.service else False
        self.record("dismiss", id=answer_id)
        return {"dismissed": known}

    def close(self) -> None:
        if self.parent_watch is not None:
            self.parent_watch.cancel()
        self.controls.close()
        if self.service is not None:
            self.service.close()
        for close in self.closers:
            try:
                close()
            except OSError:
                pass
        self.closers.clear()

    def moved_to(self, uri: str, offset: int, position: dict[str, int]) -> None:
        """A request away from where the last edit left the cursor: the editor moved it without an edit (a closer
        stepped over, an arrow key), which a recorded session keeps as a `move` so replay asks where the user did."""
        if self.recorder is not None and self.cursors.get(uri, offset) != offset:
            self.record("move", uri=uri, position=position)
        self.cursors[uri] = offset

    def record(self, op: str, at: float | None = None, **fields) -> None:
        """One event into --record's session; `at`: when it happened (monotonic), if not now."""
        if self.recorder is None:
            return
        try:
            self.recorder.record({"t": round((time.monotonic() if at is None else at) - self.started, 4), "op": op,
                                  **fields})
        except (OSError, ValueError) as exc:  # a full disk must not stop edits from reaching the document
            self.recorder = None
            logger.error("recording stopped: %s", exc)
            self.show(types.MessageType.Error, f"recording stopped: {exc}")

    def state_at(self, uri: str, position: types.Position) -> tuple[str, int, DocState, int]:
        """(doc id, version, state, offset) for a request position; DocumentError if unknown."""
        doc = self.documents.get(uri)
        offset = doc.offset_at(position.line, position.character, self.encoding)
        return doc_id(uri), doc.version, self.state_of(doc, offset), offset

    def state_of(self, doc: Document, offset: int) -> DocState:
        """The state the service sees: a bounded window of text either side of the offset."""
        before, after = doc.around(offset, self.config.prefix_chars * 2, self.config.suffix_chars * 2)
        return DocState(offset, before, after)

    def state_from(self, text: str, offset: int) -> DocState:
        """The state the service sees at an offset of a text (a document as an accept would leave it)."""
        return DocState.from_text(text, offset, self.config.prefix_chars * 2, self.config.suffix_chars * 2)

    def position_of(self, uri: str, offset: int) -> types.Position:
        line, character = self.documents.get(uri).position_at(offset, self.encoding)
        return types.Position(line=line, character=character)

    def span_of(self, uri: str, offset: int, answer: Answer) -> tuple[types.Position, types.Position]:
        """The range an answer's item replaces: the cursor, through the closers after it that the suggestion writes
        itself (Answer.replaces)."""
        start = self.position_of(uri, offset)
        return start, self.position_of(uri, offset + answer.replaces) if answer.replaces else start

    def answer_now(self, params: Any) -> Any:
        """An inline completion's result from memory (cache, type-through), read from the request's plain JSON and
        written as plain JSON; NOT_PLAIN when the request needs more, or is malformed: the normal handler then answers
        or reports it. Measured, structuring the request, a task, a loop turn and unstructuring the result cost
        more than the cache hit itself (README, "Speculation that follows what you accept")."""
        request = rawparams.inline_completion(params)
        if request is None or self.service is None:
            return NOT_PLAIN
        uri, (line, character), invoked = request
        if uri not in self.serving:  # excluded, switched off or not open: the normal path answers why
            return NOT_PLAIN
        try:
            doc, version, state, offset = self.state_at(uri, types.Position(line=line, character=character))
        except DocumentError:
            return NOT_PLAIN
        self.moved_to(uri, offset, {"line": line, "character": character})
        answer = self.service.lookup(doc, version, state, invoked)
        if answer is None:
            return NOT_PLAIN
        start, end = self.span_of(uri, offset, answer)
        return inline_result(answer, _position_dict(start), _position_dict(end))

    def blocked(self, uri: str) -> str:
        """Why an open document gets no suggestions whatever the model says (a reason code), or ""."""
        if uri in self.excluded:
            return EXCLUDED
        return "" if self.controls.enabled(uri) else DISABLED

    def refused(self, why: str) -> Answer:
        if self.service is not None:
            self.service.refused(why)
        return refusal(why)

    def opened(self, uri: str, text: str, version: int, language: str) -> None:
        """didOpen: the document, excluded or not (asked once per open), and what the service and --record get.
        Where git must be asked, the document counts as excluded until it answers, and the loop serves other
        requests meanwhile (git_check); a request for the document itself waits for the answer."""
        if uri in self.serving and self.service is not None:  # opened again: the service takes the new text
            self.serving.discard(uri)
            self.service.document_closed(doc_id(uri))
        self.forget_check(uri)
        self.documents.open(uri, text, version, language)
        path = _fs_path(uri) or uri
        rule = self.exclusion.rule(path, self.roots, git=False)
        top = git_work_tree(path) if rule is None and self.exclusion.use_git and path.startswith("/") and \
            not self.exclusion.included(path, self.roots) else None
        if top is not None:
            try:
                self.checking[uri] = asyncio.get_running_loop().create_task(self.git_check(uri, path, top, language))
                self.excluded[uri] = "waiting for git check-ignore"
                self.unrecorded[uri] = (time.monotonic(), text, [])
                return
            except RuntimeError:  # no loop (a plain call): ask git here
                rule = self.exclusion.rule(path, self.roots)
        self.decided(uri, str(rule) if rule is not None else "", language)

    async def git_check(self, uri: str, path: str, top: str, language: str) -> None:
        ignored = await git_ignores_later(path, top)
        if self.checking.get(uri) is asyncio.current_task():
            del self.checking[uri]
            self.decided(uri, "git ignores it" if ignored else "", language)

    def forget_check(self, uri: str) -> None:
        """A git check no longer wanted (the document was closed or opened again)."""
        task = self.checking.pop(uri, None)
        self.unrecorded.pop(uri, None)
        if task is not None:
            task.cancel()

    def decided(self, uri: str, why: str, language: str) -> None:
        """An open document's exclusion is known: record it, and serve it or keep it away from the service."""
        doc = self.documents.docs.get(uri)
        if doc is None:
            return
        at, opened, changes = self.unrecorded.pop(uri, (None, doc.text, []))
        if why:
            self.excluded[uri] = why
            self.record("open", uri=uri, language=language, excluded=True)  # that it was there, never its text
            logger.info("%s excluded: %s", doc_id(uri), why)
        else:
            self.excluded.pop(uri, None)
            self.record("open", at, uri=uri, language=language, text=opened)
            for change in changes:  # those made while git was asked: a recording keeps every keystroke
                self.record("change", **change)
        self.serve(uri)

    def serve(self, uri: str) -> None:
        """Tell the service about a document now allowed (its text becomes context), or take it away from it (its
        context, prefetches and waits go): after an open, a close or a switch."""
        allowed = uri in self.documents.docs and not self.blocked(uri)
        if self.service is None or allowed == (uri in self.serving):
            return
        if allowed:
            self.serving.add(uri)
            document = self.documents.get(uri)
            self.service.document_opened(doc_id(uri), context_path(uri, self.roots), document.text, document.language)
        else:
            self.serving.discard(uri)
            self.service.document_closed(doc_id(uri))
            if self.edits is not None:
                self.edits.closed(doc_id(uri))

    def switched(self) -> None:
        """A switch moved (tabd/setEnabled, or a snooze's end): every open document follows it."""
        for uri in list(self.documents.docs):
            self.serve(uri)

    def set_enabled(self, params: Any) -> None:
        switch = read_switch(_plain(params))
        if isinstance(switch, str):
            self.show(types.MessageType.Warning, switch)
            return
        self.controls.set(switch)

    def change_now(self, params: Any) -> Any:
        """didChange on plain JSON (a keystroke, and the edit a Tab makes); NOT_PLAIN when it does not read."""
        change = rawparams.did_change(params)
        if change is None:
            if not rawparams.texts_are_strings(params):
                logger.warning("didChange dropped: a content change's text is not a string")
                return None
            return NOT_PLAIN
        self.apply_changes(*change)
        return None

    def open_now(self, params: Any) -> None:
        """didOpen on plain JSON; one that does not read (a text that is not a string) is dropped with a log line."""
        opened = rawparams.did_open(params)
        if opened is None:
            logger.warning("didOpen dropped: textDocument needs a string uri, languageId and text and an integer version")
            return None
        uri, version, language, text = opened
        self.opened(uri, text, version, language)
        return None

    def command_now(self, params: Any) -> Any:
        """tabd.accept / tabd.dismiss on plain JSON; NOT_PLAIN for other commands and arguments that do not read
        (the normal path then runs or reports them)."""
        request = rawparams.command(params)
        if request is None or request[0] not in self.commands:
            return NOT_PLAIN
        name, arguments = request
        try:
            command_args(tuple(arguments), name)
        except JsonRpcInvalidParams:
            return NOT_PLAIN
        return self.commands[name](*arguments)

    def apply_changes(self, uri: str, version: int, changes: list[rawparams.Change]) -> None:
        """A didChange's edits, in order: the document, the recording, accepts seen in the edit, the service."""
        try:
            doc = self.documents.get(uri)
        except DocumentError as exc:
            logger.warning("%s", exc)
            return
        cursor = None
        secret = uri in self.excluded  # its changes are never recorded
        held = self.unrecorded.get(uri)  # ... unless git is still being asked: kept until it answers
        serving = uri in self.serving and self.service is not None
        for span, text in changes:
            if span is None:
                cursor = doc.apply(None, None, text, self.encoding)
                if held is not None:
                    held[2].append({"at": time.monotonic(), "uri": uri, "text": text})
                elif not secret:
                    self.record("change", uri=uri, text=text)
                continue
            start, end = span
            try:
                a, b = doc.offset_at(*start, self.encoding), doc.offset_at(*end, self.encoding)
                if self.edits is not None and serving and b >= a:  # an excluded or switched-off document's edits teach nothing
                    self.edits.edited(doc_id(uri), a, doc.content.slice(a, b) if b > a else "", text)
                cursor = doc.apply(start, end, text, self.encoding)
            except DocumentError as exc:
                logger.warning("change to %s skipped: %s", doc_id(uri), exc)
                continue
            if held is not None:
                held[2].append({"at": time.monotonic(), "uri": uri, "range": _range_dict(start, end), "text": text})
            elif not secret:
                self.record("change", uri=uri, range=_range_dict(start, end), text=text)
            if serving and self.service is not None:  # an accept by a client that never runs tabd.accept? elsewhere?
                self.service.document_edited(doc_id(uri), a, b - a, text)
        doc.version = version
        if cursor is not None:
            self.cursors[uri] = cursor
        if serving and self.service is not None:
            state = self.state_of(doc, cursor) if cursor is not None else None
            self.service.document_changed(doc_id(uri), state, lambda: doc.text, cursor)  # joined only when a pick reads it

    async def answer_at(self, uri: str, position: types.Position,
                        invoked: bool = False) -> tuple[Answer, types.Position, types.Position]:
        """The answer at a position, and the range its item replaces (span_of)."""
        arrived = time.monotonic()
        try:
            doc, version, state, offset = self.state_at(uri, position)
        except DocumentError as exc:
            raise JsonRpcInvalidParams(str(exc)) from None
        if self.service is None:
            raise JsonRpcInvalidParams("the server is not initialized")
        check = self.checking.get(uri)
        if check is not None:  # whether git ignores the document: known in a few ms (bounded by its timeout)
            await asyncio.wait({check})
        why = self.blocked(uri)
        if why != EXCLUDED:  # a recording keeps nothing of an excluded document but its open
            self.moved_to(uri, offset, {"line": position.line, "character": position.character})
        if why:
            return self.refused(why), position, position
        answer = self.service.lookup(doc, version, state, invoked)  # from memory: answered with no await at all
        if answer is not None:
            return answer, *self.span_of(uri, offset, answer)
        try:  # the load goes on (shielded); this request stops waiting for it
            await asyncio.wait_for(self.service.ready(), LOAD_WAIT_S)
        except asyncio.TimeoutError:
            return self.refused(LOADING), position, position
        try:
            answer = await asyncio.wait_for(self.service.complete(doc, version, state, invoked, arrived), REQUEST_TIMEOUT_S)
        except asyncio.TimeoutError:
            logger.warning("no answer within %.0f s; answering empty", REQUEST_TIMEOUT_S)
            self.events.emit("error", where="timeout", doc=doc, message=f"no answer within {REQUEST_TIMEOUT_S:.0f} s")
            answer = Answer("", "", "none", reason="error")
        return answer, *self.span_of(uri, offset, answer)


def build_server(config: Config, backend_factory: Callable[[Config], Any], events: EventLog | None = None) -> TabdServer:
    server = TabdServer(config, backend_factory, events or EventLog())
    server.protocol.plain = {types.TEXT_DOCUMENT_INLINE_COMPLETION: server.answer_now,
                             types.TEXT_DOCUMENT_DID_CHANGE: server.change_now,
                             types.TEXT_DOCUMENT_DID_OPEN: server.open_now,
                             types.WORKSPACE_EXECUTE_COMMAND: server.command_now}
    server.protocol.lazy = frozenset({types.WORKSPACE_EXECUTE_COMMAND})  # tabd.accept / tabd.dismiss: nobody waits
    server.protocol.now = frozenset({types.TEXT_DOCUMENT_INLINE_COMPLETION})
    server.protocol.after_answer = lambda: server.service.run_after() if server.service is not None else None

    @server.feature(types.INITIALIZE)
    def initialize(ls: TabdServer, params: types.InitializeParams) -> None:
        before = ls.config
        ls.streams = _stream_ids(ls.protocol)
        ls.config, problems = apply_client_options(ls.config, params.initialization_options)
        ls.pending_messages.extend(problems)
        if ls.config.log and ls.config.log != before.log and not ls.open_client_log(ls.config.log):
            ls.config.log = before.log
        encoding = ServerCapabilitiesBuilder.choose_position_encoding(params.capabilities)
        ls.encoding = str(getattr(encoding, "value", encoding))
        ls.exclusion = Exclusion(ls.config.exclude, include=ls.config.include)
        ls.pending_messages.extend(ls.exclusion.problems)
        ls.service = CompletionService(ls.config, ls.backend_factory, ls.events)
        ls.edits = EditService(ls.service.score, ls.config.edit_min_confidence,
                               writer=ls.service.edit_writer() if ls.config.edit_sources != "propagation" else None,
                               model_min_confidence=ls.config.edit_model_min_confidence,
                               propagate=ls.config.edit_sources != "model",
                               lag=inline_edit.client_lag(params.client_info)) if ls.config.inline_edits else None
        ls.roots = workspace_roots(params)
        ls.parent_watch = start_parent_watch(params.process_id, lambda: ls.protocol.request_exit(1))

    @server.feature(types.INITIALIZED)
    def initialized(ls: TabdServer, params: types.InitializedParams) -> None:
        for message in ls.pending_messages:
            ls.show(types.MessageType.Warning, message)
        ls.pending_messages.clear()
        asyncio.ensure_future(ls.report_model())

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def did_change_configuration(ls: TabdServer, params: types.DidChangeConfigurationParams) -> None:
        """Settings sent after initialize (VS Code sends its sections on every change): tabd's section checked
        through the settings table as initializationOptions are, each bad value reported and ignored. The model,
        caches and workers were built from the settings at initialize, so good values take effect at the next
        start, which is said once."""
        settings = _plain(params.settings)
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

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: TabdServer, params: Any) -> None:
        if ls.service is not None:
            ls.service.close()  # joins the model worker: nothing runs on after shutdown

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: TabdServer, params: types.DidOpenTextDocumentParams) -> None:
        d = params.text_document  # TabdServer.open_now reads every didOpen after initialize; this is its fallback
        ls.opened(d.uri, d.text, d.version, d.language_id)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: TabdServer, params: types.DidChangeTextDocumentParams) -> None:
        """Where the plain path (TabdServer.change_now) did not read the params."""
        changes = [(((c.range.start.line, c.range.start.character), (c.range.end.line, c.range.end.character))
                     if isinstance(c, types.TextDocumentContentChangePartial) else None, c.text)
                   for c in params.content_changes]
        ls.apply_changes(params.text_document.uri, params.text_document.version, changes)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: TabdServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.documents.close(uri)
        ls.cursors.pop(uri, None)
        ls.record("close", uri=uri)
        if ls.edits is not None:
            ls.edits.closed(doc_id(uri))
        ls.serve(uri)
        ls.excluded.pop(uri, None)
        ls.controls.forget(uri)  # its own switch goes with it (the clients send it again at the next open)
        ls.forget_check(uri)

    @server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
    async def inline_completion(ls: TabdServer, params: types.InlineCompletionParams) -> dict:
        """What memory cannot answer (TabdServer.answer_now answered the rest before this handler)."""
        invoked = params.context is not None and params.context.trigger_kind == types.InlineCompletionTriggerKind.Invoked
        answer, start, end = await ls.answer_at(params.text_document.uri, params.position, invoked)
        if not answer.text and answer.reason not in REFUSED:
            ghost = inline_edit.ghost_item(ls, params.text_document.uri, params.position)
            if ghost is not None:  # a next edit that only rewrites the rest of this line: shown as ghost text too
                return {"items": [ghost]}
        result = inline_result(answer, _position_dict(start), _position_dict(end))
        if answer.reason == EXCLUDED:  # which rule, in words, so the client can say it and how to change it
            result["tabd"]["rule"] = ls.excluded.get(params.text_document.uri, "")
        return result

    @server.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=[".", "(", " "]))
    async def completion(ls: TabdServer, params: types.CompletionParams) -> types.CompletionList:
        answer, at, end = await ls.answer_at(params.text_document.uri, params.position)
        if not answer.text:
            return types.CompletionList(is_incomplete=True, items=[])
        label = answer.text.strip().split("\n", 1)[0][:80] or answer.text
        item = types.CompletionItem(
            label=label,
            kind=types.CompletionItemKind.Text,
            detail="tabd",
            sort_text="0",
            filter_text=label,
            text_edit=types.TextEdit(range=types.Range(start=at, end=end), new_text=answer.text),
            command=types.Command(title="Accept tabd suggestion", command=ACCEPT, arguments=[answer.id]),
        )
        return types.CompletionList(is_incomplete=True, items=[item])

    @server.command(ACCEPT)
    def accept(ls: TabdServer, *args: Any) -> dict:
        return ls.commands[ACCEPT](*args)

    @server.command(DISMISS)
    def dismiss(ls: TabdServer, *args: Any) -> dict:
        return ls.commands[DISMISS](*args)

    @server.feature(STATS)
    def stats(ls: TabdServer, params: Any) -> dict:
        if ls.service is None:
            raise JsonRpcInvalidParams("the server is not initialized")
        out = ls.service.stats_dict()
        if ls.edits is not None:
            out["edits"] = {**ls.edits.stats.as_dict(), "last": ls.edits.last}
        return out

    @server.feature(FOCUS)
    def focus(ls: TabdServer, params: Any) -> None:
        uri, position = getattr(params, "uri", None), getattr(params, "position", None)
        line, character = getattr(position, "line", None), getattr(position, "character", None)
        if ls.service is None or not isinstance(uri, str) or not isinstance(line, int) or not isinstance(character, int):
            logger.warning("tabd/focus expects {uri, position: {line, character}}")
            return
        if uri not in ls.serving:
            return  # excluded or switched off: nothing to warm up
        try:
            _, _, state, _ = ls.state_at(uri, types.Position(line=max(0, line), character=max(0, character)))
        except DocumentError as exc:
            logger.warning("tabd/focus: %s", exc)
            return
        ls.service.focus(doc_id(uri), state)

    @server.feature(SET_ENABLED)
    def set_enabled(ls: TabdServer, params: Any) -> None:
        ls.set_enabled(params)

    @server.feature(CONTEXT)
    def context(ls: TabdServer, params: Any) -> dict:
        uri = getattr(params, "uri", None) if params is not None else None
        if ls.service is None or not isinstance(uri, str):
            raise JsonRpcInvalidParams("tabd/context expects {uri} after initialize")
        snap = ls.service.context_of(doc_id(uri))
        return {"uri": uri, "digest": snap.digest, "tokens": snap.tokens,
                "chunks": [{"path": c.path, "kind": c.kind, "line": c.line, "text": c.text} for c in snap.chunks],
                "sources": [{"path": path, "chars": len(text)} for path, text in snap.sources]}

    @server.feature(DOCUMENT)
    def document(ls: TabdServer, params: Any) -> dict:
        uri = getattr(params, "uri", None) if params is not None else None
        if not isinstance(uri, str):
            raise JsonRpcInvalidParams("tabd/document expects {uri}")
        try:
            doc = ls.documents.get(uri)
        except DocumentError as exc:
            raise JsonRpcInvalidParams(str(exc)) from None
        return {"uri": uri, "version": doc.version, "text": doc.text, "lines": doc.line_count}

    inline_edit.register(server)
    return server


def inline_result(answer: Answer, at: dict, end: dict | None = None) -> dict:
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
    roots = [path for path in (_fs_path(u) for u in uris) if path]
    return sorted(roots, key=len, reverse=True)


def context_path(uri: str, roots: list[str]) -> str:
    """The path a context chunk names: relative to a workspace folder, or below site-packages, else the last three parts."""
    path = _fs_path(uri) or uri
    for root in roots:
        if path.startswith(root.rstrip("/") + "/"):
            return path[len(root.rstrip("/")) + 1:]
    parts = path.strip("/").split("/")
    for marker in ("site-packages", "dist-packages"):
        if marker in parts[:-1]:
            return "/".join(parts[len(parts) - parts[::-1].index(marker):])
    return "/".join(parts[-3:])


def _fs_path(uri: str) -> str:
    from urllib.parse import unquote, urlparse

    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else ""


def command_args(args: tuple, name: str) -> tuple[str, dict]:
    """(item id, options) from a command's arguments, however the client wrapped them."""
    if len(args) == 1 and isinstance(args[0], (list, tuple)) and not isinstance(args[0], str):
        args = tuple(args[0])
    if not args or not isinstance(args[0], (str, int)) or isinstance(args[0], bool):
        raise JsonRpcInvalidParams(f"{name} expects [itemId, {{chars, partial}}?]")
    options = args[1] if len(args) > 1 else {}
    if hasattr(options, "_asdict"):
        options = options._asdict()
    if not isinstance(options, dict):
        raise JsonRpcInvalidParams(f"{name}: second argument must be an object")
    chars = options.get("chars")
    if chars is not None and (not _int(chars) or not 0 <= chars <= MAX_ACCEPT_CHARS):
        raise JsonRpcInvalidParams(f"{name}: chars must be an integer from 0 to {MAX_ACCEPT_CHARS}")
    if isinstance(args[0], str) and len(args[0]) > MAX_ID_CHARS:
        raise JsonRpcInvalidParams(f"{name}: the item id is longer than {MAX_ID_CHARS} characters")
    return str(args[0]), options


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _file_id(path: str) -> tuple[int, int] | None:
    """(device, inode) of what a path names now, or None (it does not exist yet: a new file, no stream)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


def _stream_ids(protocol: Any) -> set[tuple[int, int]]:
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


def _plain(value: Any) -> Any:
    """A notification's params as plain dicts and lists (pygls gives an unknown method's params as namedtuples)."""
    if hasattr(value, "_asdict"):
        value = value._asdict()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _position_dict(p: types.Position) -> dict:
    return {"line": p.line, "character": p.character}


def _range_dict(start: tuple[int, int], end: tuple[int, int]) -> dict:
    return {"start": {"line": start[0], "character": start[1]}, "end": {"line": end[0], "character": end[1]}}
