"""Which open documents the completion service may read: neither excluded (the user's globs, secrets, what git
ignores) nor switched off (tabd/setEnabled), and since when.

An excluded document's text never reaches the service, the log or --record. Where git must be asked, the document
counts as excluded until it answers, and the loop serves other requests meanwhile; a request for the document itself
waits for the answer (pending). `tell(uri, allowed)` gives a document to the service or takes it away.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable

from tabd.daemon.runtime.answer import DISABLED, EXCLUDED
from tabd.daemon.runtime.config import Config
from tabd.daemon.runtime.controls import Controls, read_switch
from tabd.daemon.runtime.exclusion import Exclusion, git_ignores_later, git_work_tree
from tabd.lsp.args import doc_id, fs_path, plain
from tabd.lsp.documents import DocumentStore
from tabd.lsp.recording import Recording

logger = logging.getLogger(__name__)

WAITING = "waiting for git check-ignore"


class Admission:
    def __init__(self, config: Config, documents: DocumentStore, recording: Recording, said: Callable[[str], None],
                 tell: Callable[[str, bool], bool]) -> None:
        self.exclusion = Exclusion(config.exclude, include=config.include)
        self.documents = documents
        self.recording = recording
        self.said = said  # a warning for the user
        self.tell = tell  # gives the service a document (True) or takes it away; whether there was a service to tell
        self.roots: list[str] = []  # workspace folder paths
        self.excluded: dict[str, str] = {}  # uri -> why: open documents kept from the service, the log and --record
        self.checking: dict[str, asyncio.Task[None]] = {}  # uri -> its git check-ignore still running
        self.controls = Controls(self.switched)
        self.serving: set[str] = set()  # open documents the service knows: neither excluded nor switched off

    def configure(self, config: Config, roots: list[str]) -> list[str]:
        """The rules as initialize settled them; the problems with the client's globs, in words."""
        self.exclusion = Exclusion(config.exclude, include=config.include)
        self.roots = roots
        return list(self.exclusion.problems)

    def opened(self, uri: str, text: str, language: str) -> None:
        """didOpen (the document is in the store): excluded or not, asked once per open."""
        if uri in self.serving and self.tell(uri, False):  # opened again: the service takes the new text
            self.serving.discard(uri)
        self.forget(uri)
        path = fs_path(uri) or uri
        rule = self.exclusion.rule(path, self.roots, git=False)
        top = git_work_tree(path) if rule is None and self.exclusion.use_git and path.startswith("/") and \
            not self.exclusion.included(path, self.roots) else None
        if top is not None:
            try:
                self.checking[uri] = asyncio.get_running_loop().create_task(self._git_check(uri, path, top, language))
                self.excluded[uri] = WAITING
                self.recording.held[uri] = (time.monotonic(), text, [])
                return
            except RuntimeError:  # no loop (a plain call): ask git here
                rule = self.exclusion.rule(path, self.roots)
        self._decided(uri, str(rule) if rule is not None else "", language)

    def pending(self, uri: str) -> asyncio.Task[None] | None:
        """The git check a request for `uri` must wait for (a few ms, bounded by its timeout), if any."""
        return self.checking.get(uri)

    async def _git_check(self, uri: str, path: str, top: str, language: str) -> None:
        ignored = await git_ignores_later(path, top)
        if self.checking.get(uri) is asyncio.current_task():
            del self.checking[uri]
            self._decided(uri, "git ignores it" if ignored else "", language)

    def forget(self, uri: str) -> None:
        """A git check no longer wanted (the document was closed or opened again)."""
        task = self.checking.pop(uri, None)
        self.recording.held.pop(uri, None)
        if task is not None:
            task.cancel()

    def _decided(self, uri: str, why: str, language: str) -> None:
        """An open document's exclusion is known: record it, and serve it or keep it away from the service."""
        doc = self.documents.docs.get(uri)
        if doc is None:
            return
        held = self.recording.held.pop(uri, None)
        if why:
            self.excluded[uri] = why
            logger.info("%s excluded: %s", doc_id(uri), why)
        else:
            self.excluded.pop(uri, None)
        self.recording.opened(uri, language, doc.text, bool(why), held)
        self.serve(uri)

    def serve(self, uri: str) -> None:
        """Give the service a document now allowed (its text becomes context), or take it away (its context,
        prefetches and waits go): after an open, a close or a switch."""
        allowed = uri in self.documents.docs and not self.blocked(uri)
        if allowed != (uri in self.serving) and self.tell(uri, allowed):
            (self.serving.add if allowed else self.serving.discard)(uri)

    def switched(self) -> None:
        """A switch moved (tabd/setEnabled, or a snooze's end): every open document follows it."""
        for uri in list(self.documents.docs):
            self.serve(uri)

    def set_enabled(self, params: Any) -> None:
        switch = read_switch(plain(params))
        if isinstance(switch, str):
            self.said(switch)
            return
        self.controls.set(switch)

    def blocked(self, uri: str) -> str:
        """Why an open document gets no suggestions whatever the model says (a reason code), or ""."""
        if uri in self.excluded:
            return EXCLUDED
        return "" if self.controls.enabled(uri) else DISABLED

    def closed(self, uri: str) -> None:
        """didClose (the document is out of the store)."""
        self.serve(uri)
        self.excluded.pop(uri, None)
        self.controls.forget(uri)  # its own switch goes with it (the clients send it again at the next open)
        self.forget(uri)
