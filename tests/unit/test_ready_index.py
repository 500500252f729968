"""Memory's ready index (daemon/runtime/memory.py, service.ready_answer): the request after a Tab finds the prefetch's
answer by the state's identity, without building its key, and never an answer the key its request builds would not
give: another cursor, other text, another context, an invoked request, another model, an evicted entry, a document
opened again. Each case checks that the answer's key is the key built for its state, the long way (what a wrong
index entry breaks), and whether the index was the way (so the first case proves the fast way is taken)."""
from __future__ import annotations

import asyncio
from dataclasses import replace

from support.fakes import FakeBackend
from tabd.cache.state import DocState
from tabd.daemon.runtime.answer import Answer
from tabd.daemon.runtime.config import Config
from tabd.daemon.runtime.events import EventLog
from tabd.daemon.runtime.request import Asked
from tabd.daemon.runtime.service import CompletionService, compose

TEXT = "def area(r):\n    return "
TAB = "3.14 * r * r"


def _service(backend: FakeBackend) -> tuple[CompletionService, list[dict]]:
    events = EventLog()
    logged: list[dict] = []
    events.add_sink(logged.append)
    return compose(Config(debounce_ms=0), lambda c: backend, events), logged


def _asked(service: CompletionService, text: str, offset: int | None = None, invoked: bool = False,
           doc: str = "d") -> Asked:
    """What the LSP layer asks at an offset of a text: the parts it reads (2x the windows around the cursor)."""
    offset = len(text) if offset is None else offset
    config = service.config
    state = DocState.from_text(text, offset, config.prefix_chars * 2, config.suffix_chars * 2)
    return Asked(doc, 1, None, invoked, at=(state.offset, state.before, state.after))


def _ready(service: CompletionService, asked: Asked) -> bool:
    """Whether the index has an answer for it (the way answer() looks)."""
    model_id = service.model.backend.model_id if service.model.backend is not None else ""
    return service.memory.ready(asked.doc, asked.offset, asked.before, asked.after, asked.invoked, model_id) is not None


async def _answer(service: CompletionService, asked: Asked) -> Answer:
    got = service.answer(asked)
    answer = got if isinstance(got, Answer) else await got
    service.run_after()
    return answer


def _key_of(service: CompletionService, asked: Asked) -> str:
    """The key the request at this state builds, the long way."""
    return service.requests.build(Asked(asked.doc, asked.version, asked.state, asked.invoked)).key


async def _after_a_shown_suggestion(backend: FakeBackend) -> tuple[CompletionService, list[dict]]:
    """A suggestion shown at the end of TEXT (from the model), and its after-Tab prefetch finished."""
    service, logged = _service(backend)
    assert await service.ready()
    first = await _answer(service, _asked(service, TEXT))
    assert first.text == TAB and first.source == "model"
    runs = service.computations.prefetch_runs
    for _ in range(500):
        if runs.started and runs.finished + runs.cancelled >= runs.started:
            break
        await asyncio.sleep(0.01)
    service.run_after()
    assert runs.finished >= 1
    return service, logged


def _backend() -> FakeBackend:
    # a different answer for every prompt: an answer given for another state shows as a wrong text, too
    return FakeBackend(text=lambda prefix, suffix: TAB if prefix.endswith("return ") else f"  # {len(prefix)}")


async def test_the_state_after_a_tab_is_answered_from_the_ready_index_as_its_key_would_answer_it():
    service, logged = await _after_a_shown_suggestion(_backend())
    try:
        tab = _asked(service, TEXT + TAB)
        assert _ready(service, tab)
        got = service.answer(tab)
        assert isinstance(got, Answer)  # at once, no await
        assert got.source == "cache" and got.key == _key_of(service, tab)
        assert got.text == f"  # {len(TEXT + TAB)}"  # the prefetch's own answer for this very prompt
        service.run_after()
        line = [e for e in logged if e["event"] == "completion"][-1]
        assert line["source"] == "cache" and line["after_accept"] and line["id"] == got.id  # the log line as ever
    finally:
        service.close()


async def test_same_text_another_cursor_and_other_text_at_the_same_cursor_are_not_ready():
    service, _ = await _after_a_shown_suggestion(_backend())
    try:
        for asked in (_asked(service, TEXT + TAB, len(TEXT + TAB) - 1),  # same text, cursor one to the left
                      _asked(service, TEXT.replace("area", "aria") + TAB),  # same cursor, other text before it
                      _asked(service, TEXT + TAB + "\n"),  # text after the cursor
                      _asked(service, TEXT + TAB + "\n    pass\n", len(TEXT + TAB)),  # same place, other text after
                      _asked(service, TEXT + TAB, doc="e")):  # another document
            assert not _ready(service, asked)
            answer = await _answer(service, asked)
            assert answer.key == _key_of(service, asked)
    finally:
        service.close()


async def test_a_new_context_for_the_document_leaves_nothing_ready_under_the_old_one():
    service, _ = await _after_a_shown_suggestion(_backend())
    try:
        tab = _asked(service, TEXT + TAB)
        assert _ready(service, tab)
        service.docs.focus("d", tab.state)  # the user moved here: the context is picked again (a new snapshot)
        assert not _ready(service, tab)
        answer = await _answer(service, tab)
        assert answer.key == _key_of(service, tab)
    finally:
        service.close()


async def test_an_invoked_request_is_not_served_what_an_automatic_one_would_show():
    service, _ = await _after_a_shown_suggestion(_backend())
    try:
        invoked = _asked(service, TEXT + TAB, invoked=True)
        assert _ready(service, _asked(service, TEXT + TAB)) and not _ready(service, invoked)
        answer = await _answer(service, invoked)
        assert answer.key == _key_of(service, invoked)
    finally:
        service.close()


async def test_another_model_an_evicted_entry_or_a_reopened_document_leave_nothing_ready():
    backend = _backend()
    service, _ = await _after_a_shown_suggestion(backend)
    try:
        tab = _asked(service, TEXT + TAB)
        backend.model_id = "fake-2"  # a remote engine now serving another model: every key changes
        assert not _ready(service, tab)
        backend.model_id = "fake"
        assert _ready(service, tab)
        service.memory.cache.clear()  # the entry is gone: so is its ready answer
        assert not _ready(service, tab)
    finally:
        service.close()
    service, _ = await _after_a_shown_suggestion(_backend())
    try:
        tab = _asked(service, TEXT + TAB)
        assert _ready(service, tab)
        service.docs.opened("d", "d.js", TEXT + TAB, "javascript")  # opened again: another language's settings
        assert not _ready(service, tab)
    finally:
        service.close()


async def test_an_evicted_key_takes_its_ready_answer_with_it():
    service, _ = await _after_a_shown_suggestion(_backend())
    try:
        tab = _asked(service, TEXT + TAB)
        assert _ready(service, tab)
        ready = service.memory.ready(tab.doc, tab.offset, tab.before, tab.after, False, "fake")
        assert ready is not None
        entry = service.memory.cache.get(ready.key)
        assert entry is not None
        for n in range(service.config.cache_entries + 1):  # the LRU lets the oldest keys go
            service.memory.cache.put(f"k{n}", entry)
        assert ready.key not in service.memory.cache
        assert not _ready(service, tab)
    finally:
        service.close()


async def test_the_request_made_from_the_ready_index_is_the_one_the_long_way_builds():
    """An answer from the index makes its Request from what the index held (no window, snapshot, prompt or key made
    again): the type-through, accept tracking, speculation and log line it sets going read the request the state's
    build gives, field for field, and the workspace's snapshot is the one the long way would keep."""
    service, _ = await _after_a_shown_suggestion(_backend())
    try:
        tab = _asked(service, TEXT + TAB)
        ready = service.memory.ready(tab.doc, tab.offset, tab.before, tab.after, False, "fake")
        assert ready is not None
        made = service.requests.from_ready(tab, ready, "7")
        snapshot = service.memory.contexts["d"]
        built = service.requests.build(Asked(tab.doc, tab.version, tab.state, tab.invoked, tab.arrived))
        assert made == replace(built, id="7")
        assert service.memory.contexts["d"] is snapshot  # the long way kept the snapshot the index holds it under
    finally:
        service.close()


async def test_the_state_after_a_tab_with_the_editor_s_closer_after_the_cursor_is_answered_from_the_ready_index():
    """The editor keeps a closer it auto-closed after the cursor (`(` typed earlier, its `)` still there after the
    Tab): the key does not read it (the window leaves closers out), so the ready answer is the key's, shown as this
    state shows it: what it replaces (the `)`) is counted for this state, as the long way counts it."""
    backend = FakeBackend(text=lambda prefix, suffix: TAB if prefix.endswith("return ") else " + 1)")
    service, _ = await _after_a_shown_suggestion(backend)
    try:
        held = _asked(service, TEXT + TAB)
        assert _ready(service, held) and service.answer(held).replaces == 0  # no closer after the cursor: none
        tab = _asked(service, TEXT + TAB + ")", len(TEXT + TAB))  # the same state with the editor's `)` after it
        assert _ready(service, tab)
        got = service.answer(tab)
        assert isinstance(got, Answer) and got.source == "cache" and got.key == _key_of(service, tab)
        assert (got.text, got.replaces) == (" + 1)", 1)  # its own `)` stands for the editor's: it replaces it
        service.run_after()
    finally:
        service.close()
    long_way = compose(Config(debounce_ms=0, speculation=False), lambda c: backend, EventLog())
    try:
        assert await long_way.ready()
        tab = _asked(long_way, TEXT + TAB + ")", len(TEXT + TAB))
        reference = await _answer(long_way, tab)
        assert (reference.text, reference.replaces, reference.key) == (got.text, got.replaces, got.key)
    finally:
        long_way.close()
