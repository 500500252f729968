"""One model run for one state key, shared by every request that wants that key (the in-flight table's handle)."""
from __future__ import annotations

from dataclasses import dataclass

from tabd.cache.state import DocState, Window
from tabd.daemon.context.chunk_store import EMPTY, Snapshot
from tabd.daemon.runtime.scheduler import Job
from tabd.predictor.types import GenSettings


@dataclass
class Computation:
    key: str
    doc: str
    state: DocState
    window: Window
    settings: GenSettings
    depth: int  # 0 for a request, n for a prefetch n accepts ahead
    root: Window | None = None  # for a prefetch: the user's state it was planned from
    chain: str = ""  # ...and the text the accepts would insert from there
    context: Snapshot = EMPTY  # the workspace context before the prompt
    kinds: tuple[str, ...] = ()  # for a prefetch: the accepts from the user's state ("all", "word", "line")
    job: Job | None = None  # set when it starts
    waiters: int = 0
    cancel_reason: str = ""  # why it was cancelled, for the waiters' cancel events
    invoked: bool = False  # for a prefetch: planned from an invoked request's answer, for the invoked one after it

    @property
    def prefetch(self) -> bool:
        return self.depth > 0

    @property
    def slot(self) -> str:
        """The backend's KV slot: each speculation branch keeps its own."""
        return f"{self.doc}#{'.'.join(self.kinds)}" if self.kinds else self.doc

    @property
    def branch(self) -> str:
        return ".".join(self.kinds)
