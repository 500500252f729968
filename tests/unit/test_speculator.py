"""The speculator (daemon/runtime/speculator.py): which states it computes after a suggestion is shown, and how it
counts what the user accepts."""
from __future__ import annotations

import asyncio

from support.fakes import FakeBackend
from tabd.cache.state import DocState
from tabd.daemon.context.chunk_store import Snapshot
from tabd.daemon.runtime.computations import Computations
from tabd.daemon.runtime.config import Config
from tabd.daemon.runtime.events import EventLog
from tabd.daemon.runtime.jobs import ModelJobs
from tabd.daemon.runtime.memory import Memory
from tabd.daemon.runtime.loaded_model import Model
from tabd.daemon.runtime.request import Asked, RequestBuilder
from tabd.daemon.runtime.scheduler import Scheduler
from tabd.daemon.runtime.speculator import RecentKeys, Speculator
from tabd.daemon.runtime.workspace import Workspace, context_options

TEXT = "total = compute(items)\ntotal = "


class Stack:
    """A speculator over a real memory and model runs, with a FakeBackend that answers `answer`."""

    def __init__(self, config: Config, answer: str = "compute(items)") -> None:
        self.backend = FakeBackend(text=answer)
        self.scheduler = Scheduler()
        self.events = EventLog()
        self.logged: list[dict] = []
        self.events.add_sink(self.logged.append)
        self.model = Model(config, lambda c: self.backend, self.scheduler, self.events)
        self.workspace = Workspace(context_options(config), config.prefix_chars, config.suffix_chars, lambda *a: None)
        planned = RecentKeys(64)
        self.requests = RequestBuilder(config, self.model, self.workspace, planned.__contains__)
        self.memory = Memory(config)
        self.computations = Computations(ModelJobs(self.scheduler, self.model), self.memory, self.events)
        self.speculator = Speculator(config, self.requests, self.memory, self.computations, self.events,
                                     self.workspace.current, planned)
        self.stats = self.speculator.stats
        self.runs = self.computations.prefetch_runs

    def prefetches(self, outcome: str) -> list[dict]:
        return [e for e in self.logged if e["event"] == "prefetch" and e["outcome"] == outcome]

    async def settled(self) -> None:
        while self.runs.finished + self.runs.cancelled < self.runs.started:
            await asyncio.sleep(0.01)


def _state(text: str = TEXT) -> DocState:
    return DocState.from_text(text, len(text), 4800, 1200)


async def test_a_shown_suggestion_prefetches_its_whole_and_partial_accepts_and_a_tab_there_is_after_accept():
    s = Stack(Config(depth=1, adaptive_depth=False))
    try:
        assert await s.model.ready()
        req = s.requests.build(Asked("d", 1, _state()))
        s.speculator.shown(req, "compute(items)", typed=False)
        await s.settled()
        assert sorted(e["branch"] for e in s.prefetches("finished")) == ["all", "word"]
        assert s.requests.build(Asked("d", 2, _state(TEXT + "compute(items)"))).after_accept
        assert s.memory.has(s.requests.prompt("", _state(TEXT + "compute")).key)  # the next word's state is computed
        assert s.stats.branches == {"all": 1, "word": 1}
    finally:
        s.scheduler.stop()


async def test_a_finished_prefetch_plans_the_step_after_it_up_to_the_depth():
    s = Stack(Config(depth=2, adaptive_depth=False, partial_accept_prefetch=False), answer="x")
    try:
        assert await s.model.ready()
        s.backend.text = lambda prefix, suffix: "ab" if prefix.endswith("= ") else "cd"
        req = s.requests.build(Asked("d", 1, _state()))
        s.speculator.shown(req, "ab", typed=False)
        await s.settled()
        assert [e["depth"] for e in s.prefetches("finished")] == [1, 2]
        assert s.memory.has(s.requests.prompt("", _state(TEXT + "abcd")).key)
    finally:
        s.scheduler.stop()


async def test_with_speculation_off_nothing_is_prefetched_but_a_tab_is_still_recognised():
    s = Stack(Config(speculation=False))
    try:
        assert await s.model.ready()
        req = s.requests.build(Asked("d", 1, _state()))
        s.speculator.shown(req, "compute(items)", typed=False)
        assert s.runs.started == 0
        assert s.requests.build(Asked("d", 2, _state(TEXT + "compute(items)"))).after_accept
    finally:
        s.scheduler.stop()


async def test_an_accept_seen_as_an_edit_and_as_a_command_counts_once_and_a_dismissal_counts():
    s = Stack(Config(speculation=False))
    try:
        assert await s.model.ready()
        req = s.requests.build(Asked("d", 1, _state()))
        s.speculator.shown(req, "compute(items)", typed=False)
        s.speculator.edited("d", len(TEXT), 0, "compute(items)")
        assert s.speculator.accept(req.id, len("compute(items)")) is True
        assert (s.stats.accepts, s.stats.accepts_by) == (1, {"edit": 1})
        assert s.speculator.accept("never-shown") is False and s.stats.accepts == 2
        assert s.speculator.dismiss(req.id) is True and s.stats.dismisses == 1
        kinds = [(e["event"], e.get("known")) for e in s.logged if e["event"] in ("accept", "dismiss")]
        assert kinds == [("accept", True), ("accept", False), ("dismiss", True)]
    finally:
        s.scheduler.stop()


async def test_a_prefetched_answer_is_used_once():
    s = Stack(Config(depth=1, adaptive_depth=False))
    try:
        assert await s.model.ready()
        req = s.requests.build(Asked("d", 1, _state()))
        s.speculator.shown(req, "compute(items)", typed=False)
        key = s.requests.prompt("", _state(TEXT + "compute(items)")).key
        s.speculator.used(key)
        s.speculator.used(key)
        assert s.stats.prefetch_used == 1
    finally:
        s.scheduler.stop()


async def test_a_context_change_under_a_suggestion_on_screen_prefetches_again_under_the_new_context():
    s = Stack(Config(depth=1, adaptive_depth=False, partial_accept_prefetch=False))
    try:
        assert await s.model.ready()
        req = s.requests.build(Asked("d", 1, _state()))
        s.speculator.shown(req, "compute(items)", typed=False)
        await s.settled()
        new = Snapshot(digest="new")
        assert s.speculator.context_changed("d", req.window, req.state, new)
        await s.settled()
        assert s.memory.has(s.requests.prompt("", _state(TEXT + "compute(items)"), new).key)
        assert not s.speculator.context_changed("d", s.requests.window_of(_state(TEXT + "x")), req.state, new)
        s.speculator.closed("d")
        assert not s.speculator.context_changed("d", req.window, req.state, new)  # nothing on screen any more
    finally:
        s.scheduler.stop()
