"""The completion service in-process (daemon/runtime/service.py) over the shared FakeBackend: the order of its steps,
the verbs the LSP layer uses, and the shape of what other tools read (tabd/stats keys, log fields)."""
from __future__ import annotations

import asyncio

import pytest

from support.fakes import FakeBackend
from tabd.cache.state import DocState
from tabd.daemon.runtime.config import Config
from tabd.daemon.runtime.engine_load import PAUSE_S
from tabd.daemon.runtime.events import EventLog
from tabd.daemon.runtime.handover import HandOver
from tabd.daemon.runtime.loaded_model import Model
from tabd.daemon.runtime.answer import Answer
from tabd.daemon.runtime.scheduler import Scheduler
from tabd.daemon.runtime.request import Asked
from tabd.daemon.runtime.service import CompletionService, compose
from tabd.predictor.types import Prediction

TEXT = "x = 1\ny = "

# tabd/stats as it was before the service was composed of collaborators: editors, replay and dashboards read it
STATS_KEYS = {
    "": {"sources", "prefetch", "accepts_by", "speculation", "after_accept", "latency_ms", "last", "debounce",
         "model_calls", "requests_to_model", "accepts", "dismisses", "cache", "kv_bytes", "queue_depth",
         "held_back", "engine_priority", "engine_confidence", "worker_faults", "gc", "nice", "model", "engine", "engine_why", "torch_loaded", "served_by",
         "torch_free_answers", "hand_over", "weights", "rss_bytes", "error", "context", "prompt_reuse", "refusals"},
    "sources": {"cache", "typed", "inflight", "model", "none"},
    "prefetch": {"started", "finished", "cancelled", "preempted", "used", "wasted_per_accept"},
    "speculation": {"mode", "ceiling", "first", "first_all", "further", "user_rates", "user_depth", "outcomes", "branches"},
    "speculation.user_rates": {"all", "word", "line", "streak"},
    "after_accept": {"requests", "from_cache", "hit_rate", "p50_ms"},
    "latency_ms": {"p50"},
    "held_back": {"behind_requests", "engine_loaded", "partial_branch", "unlikely", "engine_load", "pause_ms"},
    "last": {"source", "latency_ms", "depth", "debounce_ms", "reason", "origin"},
    "debounce": {"base_ms", "rhythm_ms", "model_ms", "waited", "superseded", "p50_ms", "waiting"},
    "requests_to_model": {"started", "finished", "cancelled"},
    "cache": {"entries", "bytes", "bound_bytes"},
    "gc": {"enabled", "freezes"},
    "nice": {"lsp", "model"},
    "hand_over": {"state"},
    "context": {"enabled", "tokens_budget", "active", "documents", "skipped", "held", "picks", "changes", "warmups",
                "last_tokens"},
    "context.active": {"chunks", "tokens", "digest", "sources", "source_bytes"},
    "context.held": {"chunks", "bytes", "bound_chunks", "bound_bytes"},
    "context.warmups": {"started", "finished", "cancelled", "preempted"},
    "prompt_reuse": {"request", "prefetch", "warmup", "last"},
}
LOG_FIELDS = {
    "completion": {"after_accept", "cache_ms", "chars", "context_chunks", "context_tokens", "debounce_ms", "decode_ms",
                   "decode_tokens", "depth", "doc", "event", "id", "key", "latency_ms", "origin", "prefill_ms",
                   "prefill_tokens", "queue_depth", "queue_ms", "reuse", "reused_tokens", "source", "spec_depth",
                   "spec_rates", "spec_why", "ts", "v", "version"},
    "prefetch": {"branch", "chars", "context_tokens", "decode_ms", "decode_tokens", "depth", "doc", "event", "key",
                 "outcome", "prefill_ms", "prefill_tokens", "queue_depth", "reuse", "reused_tokens", "ts", "v"},
    "accept": {"chars", "doc", "event", "id", "kind", "known", "partial", "ts", "v", "via"},
    "dismiss": {"doc", "event", "id", "known", "ts", "v"},
}
# fields a completion line carries only when they say something
OPTIONAL = {"debounce_why", "hidden", "from_key", "error", "text", "engine", "torch_loaded", "reason"}


def _state(text: str = TEXT) -> DocState:
    return DocState.from_text(text, len(text), 4800, 1200)


def _service(backend: FakeBackend, **config) -> tuple[CompletionService, list[dict]]:
    events = EventLog()
    logged: list[dict] = []
    events.add_sink(logged.append)
    return compose(Config(**{"debounce_ms": 0, **config}), lambda c: backend, events), logged


def _section(stats: dict, path: str) -> dict:
    for part in filter(None, path.split(".")):
        stats = stats[part]
    return stats


def _now(service: CompletionService, asked: Asked) -> Answer | None:
    """The answer from memory, given at once with no await; None where the service would await the model."""
    got = service.answer(asked)
    if isinstance(got, Answer):
        return got
    got.close()  # type: ignore[attr-defined]  # a coroutine: not run
    return None


async def _settle(service: CompletionService) -> None:
    while service.computations.prefetch_runs.finished + service.computations.prefetch_runs.cancelled < service.computations.prefetch_runs.started:
        await asyncio.sleep(0.01)
    service.run_after()


async def test_a_model_answer_then_the_same_state_from_memory_and_a_tab_into_a_prefetch():
    backend = FakeBackend(text="foo(bar, baz)")
    service, logged = _service(backend)
    try:
        first = await service.complete(Asked("d", 1, _state()))
        assert (first.text, first.source, first.depth) == ("foo(bar, baz)", "model", 0)
        service.run_after()
        again = _now(service, Asked("d", 1, _state()))  # no await: the LSP layer answers it on plain JSON
        assert (again.text, again.source) == ("foo(bar, baz)", "cache")
        await _settle(service)
        service.docs.edited("d", len(TEXT), 0, "foo(bar, baz)")  # the Tab, seen in the edit
        tab = _now(service, Asked("d", 2, _state(TEXT + "foo(bar, baz)")))
        assert tab is not None and (tab.source, tab.depth) == ("cache", 1)
        assert len(backend.calls) == 1 + service.computations.prefetch_runs.started  # no second call for a state it knew
        s = service.stats_dict()
        assert s["accepts_by"] == {"edit": 1} and s["after_accept"]["from_cache"] == 1
    finally:
        service.close()


async def test_a_tab_whose_prefetch_found_nothing_to_add_counts_as_answered_from_memory():
    backend = FakeBackend(text=lambda prefix, suffix: "" if prefix.endswith("foo(bar, baz)") else "foo(bar, baz)")
    service, _ = _service(backend)
    try:
        await service.complete(Asked("d", 1, _state()))
        service.run_after()
        await _settle(service)
        service.docs.edited("d", len(TEXT), 0, "foo(bar, baz)")  # the Tab
        calls = len(backend.calls)
        tab = _now(service, Asked("d", 2, _state(TEXT + "foo(bar, baz)")))
        assert tab is not None and tab.text == "" and len(backend.calls) == calls  # nothing to show, from memory
        s = service.stats_dict()
        assert (s["last"]["source"], s["last"]["origin"]) == ("none", "cache")
        assert s["after_accept"]["from_cache"] == 1 and s["after_accept"]["hit_rate"] == 1.0
    finally:
        service.close()


async def test_a_request_memory_cannot_answer_is_built_once_and_looks_in_memory_once():
    service, _ = _service(FakeBackend())
    try:
        assert await service.ready()
        recall, looks = service.memory.recall, []

        def counted(*args, **kwargs):
            looks.append(args[0])
            return recall(*args, **kwargs)

        service.memory.recall = counted  # type: ignore[method-assign]
        answer = await service.complete(Asked("d", 1, _state()))
        assert answer.id == "1" and answer.source == "model"  # one request
        assert looks == [answer.key]  # memory was looked in once on the way to the model
    finally:
        service.close()


async def test_an_edit_that_moves_the_state_cancels_the_request_for_the_old_one():
    backend = FakeBackend(delay=5.0)
    service, logged = _service(backend)
    try:
        pending = asyncio.ensure_future(service.complete(Asked("d", 1, _state())))
        await asyncio.to_thread(backend.started.wait, 5)
        service.docs.changed("d", _state(TEXT + "z"), TEXT + "z", len(TEXT) + 1)
        answer = await asyncio.wait_for(pending, 5)
        assert (answer.text, answer.source) == ("", "none")
        assert [e["reason"] for e in logged if e["event"] == "cancel"] == ["stale"]
        assert service.stats_dict()["requests_to_model"] == {"started": 1, "finished": 0, "cancelled": 1}
    finally:
        service.close()


async def test_the_lsp_layer_s_workspace_verbs_reach_the_context():
    service, _ = _service(FakeBackend())
    try:
        service.docs.opened("other", "lib/helpers.py", "def compute_total(items):\n    return sum(items)\n")
        service.docs.opened("d", "main.py", TEXT)
        snap = service.docs.focus("d", _state())
        assert "lib/helpers.py" in [path for path, _ in snap.sources]  # the other open file, to copy from
        assert service.docs.context_of("d") == snap
        service.docs.closed("d")
        assert service.docs.context_of("d").digest == ""
    finally:
        service.close()


async def test_a_model_that_cannot_load_answers_empty_with_why():
    def broken(config):
        raise RuntimeError("no weights here")
    service = compose(Config(), broken)
    try:
        assert await service.ready() is False
        answer = await service.complete(Asked("d", 1, _state()))
        assert (answer.text, answer.source, answer.reason) == ("", "none", "error")
        assert service.model.error == "no weights here" and service.stats_dict()["error"] == "no weights here"
    finally:
        service.close()


async def test_an_empty_answer_says_why():
    from tabd.daemon.runtime.answer import Outcome

    cases = {"": FakeBackend(text=""), "x": FakeBackend(text="x"), "fail": FakeBackend(fail=True),
             "gated": FakeBackend(text=lambda p, s: Prediction("return total", confidence=[(6, 0.2), (12, 0.2)]))}
    reasons = {}
    for name, backend in cases.items():
        service, _ = _service(backend, speculation=False)
        try:
            answer = await service.complete(Asked("d", 1, _state()))
            reasons[name] = (answer.text, answer.reason, service.stats_dict()["last"]["reason"])
        finally:
            service.close()
    assert reasons == {"": ("", "nothing", "nothing"), "x": ("", "unsure", "unsure"), "fail": ("", "error", "error"),
                       "gated": ("", "unsure", "unsure")}
    assert Outcome("", "none", error="cannot reach http://127.0.0.1:9 (connection refused)").reason == "unreachable"
    assert Outcome("", "none", error="http://127.0.0.1:9/v1/completions: no complete answer within 1 s (timeout)").reason == "slow"
    assert Outcome("", "none", cut="debounced").reason == "debounced" and Outcome("ok", "model").reason == ""


async def test_stats_keys_and_log_fields_are_the_ones_other_tools_read():
    service, logged = _service(FakeBackend(text="foo(bar, baz)"))
    try:
        first = await service.complete(Asked("d", 1, _state()))
        await _settle(service)
        service.docs.edited("d", len(TEXT), 0, "foo")
        second = _now(service, Asked("d", 2, _state(TEXT + "foo"))) or await service.complete(Asked("d", 2, _state(TEXT + "foo")))
        service.run_after()
        service.docs.dismiss(second.id)
        await asyncio.sleep(0.05)
        service.run_after()
        stats = service.stats_dict()
        assert first.text
    finally:
        service.close()
    for path, keys in STATS_KEYS.items():
        assert set(_section(stats, path)) == keys, path
    for event, fields in LOG_FIELDS.items():
        seen = set().union(*(e.keys() for e in logged if e["event"] == event))
        assert fields <= seen <= fields | OPTIONAL, event


async def test_the_composed_scheduler_holds_prefetches_back_only_behind_an_engine_without_priorities():
    for orders_by_priority in (False, True):
        backend = FakeBackend(text="x")
        backend.orders_by_priority = orders_by_priority
        service, _ = _service(backend)
        try:
            assert await service.model.ready()
            assert service.scheduler.holds_background() is not orders_by_priority
        finally:
            service.close()


async def test_a_service_composed_over_a_model_loaded_elsewhere_answers_with_it():
    config, events, scheduler = Config(debounce_ms=0), EventLog(), Scheduler()
    backend = FakeBackend(text="composed()")
    model = Model(config, lambda c: backend, scheduler, events)
    assert await model.ready()
    service = compose(config, events=events, scheduler=scheduler, model=model, handover=HandOver(scheduler, events))
    try:
        answer = await service.complete(Asked("d", 1, _state()))
        assert (answer.text, answer.source) == ("composed()", "model") and len(backend.calls) == 1
        assert service.stats_dict()["hand_over"] == {"state": "off"}
    finally:
        service.close()


async def test_an_invoked_request_offers_the_run_s_other_candidates_and_an_automatic_one_does_not():

    backend = FakeBackend(text=lambda prefix, suffix: Prediction("compute(a)", alternatives=("compute(b)", "compute(a)", " ")))
    service, _ = _service(backend, speculation=False)
    try:
        auto = await service.complete(Asked("d", 1, _state()))
        assert (auto.text, auto.alternatives) == ("compute(a)", ())
        service.run_after()
        invoked = _now(service, Asked("d", 1, _state(), invoked=True))  # the same state, from memory: the others kept
        assert invoked is not None and invoked.source == "cache"
        assert invoked.alternatives == (("compute(b)", 0),)  # distinct, not blank, not the shown text
    finally:
        service.close()


async def test_an_alternative_taken_is_the_accept_and_the_request_after_it_an_after_accept_one():

    backend = FakeBackend(text=lambda prefix, suffix: Prediction("compute(a)", alternatives=("compute(b)",)))
    service, _ = _service(backend, speculation=False)
    try:
        await service.complete(Asked("d", 1, _state()))
        service.run_after()
        invoked = _now(service, Asked("d", 1, _state(), invoked=True))
        assert invoked is not None and invoked.alternatives == (("compute(b)", 0),)
        service.run_after()  # shown
        assert service.docs.accept(invoked.id, alternative="compute(b)")
        service.docs.accept(invoked.id, alternative="compute(b)")  # a client that sends it twice: one accept
        assert service.speculator.stats.accepts == 1
        taken = _state().insert("compute(b)")
        assert service.speculator.requests.prompt("d", taken, service.speculator.context_of("d")).key in service.speculator.planned
    finally:
        service.close()


async def test_a_loaded_shared_engine_holds_prefetches_back_and_says_so():
    """Ten times slower than unloaded: the Tab's own prefetch still starts (held, the Tab would be a model request on
    the same engine, later), the next-word branch and the step after the Tab's do not, and each is said why."""
    fake = FakeBackend(text="foo(bar, baz)")
    config = Config(debounce_ms=0, backend="openai", url="http://127.0.0.1:9", adaptive_depth=False, depth=2)
    events, logged = EventLog(), []
    events.add_sink(logged.append)
    service = compose(config, lambda c: fake, events)
    try:
        for ms in [40.0] * 20 + [400.0] * 8:  # the engine answers ten times slower than it did unloaded
            service.speculator.engine.observe(ms)
        first = await service.complete(Asked("d", 1, _state()))
        service.run_after()
        await asyncio.sleep(PAUSE_S + 0.05)  # the suggestion stays on screen: the Tab's prefetch goes
        service.run_after()
        s = service.stats_dict()
        assert first.text == "foo(bar, baz)"
        started = [e for e in logged if e["event"] == "prefetch" and e["outcome"] == "started"]
        assert [(e["depth"], e["branch"]) for e in started] == [(1, "all")], started
        held = sorted((e["depth"], e["branch"], e["reason"]) for e in logged
                      if e["event"] == "prefetch" and e["outcome"] == "held")
        assert (1, "word", "partial_branch") in held and (2, "all.all", "engine_loaded") in held, held
        assert s["held_back"]["partial_branch"] >= 1 and s["held_back"]["engine_loaded"] >= 1, s["held_back"]
        # the Tab is answered from memory
        tab = _now(service, Asked("d", 2, _state(TEXT + "foo(bar, baz)")))
        assert tab is not None and tab.source == "cache"
    finally:
        service.close()


def _shared(backend: FakeBackend) -> CompletionService:
    """A service in front of a shared engine (--backend openai) that `backend` stands in for."""
    return compose(Config(debounce_ms=0, backend="openai", url="http://127.0.0.1:9"), lambda c: backend, EventLog())


async def test_a_shared_engine_answers_a_next_word_accept_from_memory_without_its_prefetch():
    """The next-word branch is not sent to a shared engine: the rest of the suggestion on screen answers it."""
    fake = FakeBackend(text="foo(bar, baz)")
    service = _shared(fake)
    try:
        await service.complete(Asked("d", 1, _state()))
        service.run_after()
        await asyncio.sleep(PAUSE_S + 0.05)  # the suggestion stays on screen: the Tab's prefetch goes
        assert service.stats_dict()["held_back"]["partial_branch"] == 1
        word = _now(service, Asked("d", 2, _state(TEXT + "foo")))  # Ctrl+Right takes "foo"
        assert word is not None and (word.source, word.text) == ("typed", "(bar, baz)")
    finally:
        service.close()


async def test_a_loaded_shared_engine_skips_the_prefetch_for_a_document_whose_suggestions_are_not_taken():
    fake = FakeBackend(text="foo(bar, baz)")
    service = _shared(fake)
    try:
        for _ in range(25):  # 25 suggestions passed over: p(all) 0.06, above the acceptance model's own bar (0.03)
            service.speculator.acceptance.record("d", "none")
        for ms in [40.0] * 20 + [200.0] * 8:  # the engine's first tokens come five times slower than unloaded
            service.speculator.engine.observe(ms)
        await service.complete(Asked("d", 1, _state()))
        service.run_after()
        await asyncio.sleep(PAUSE_S + 0.05)  # the suggestion stays on screen: the Tab's prefetch goes
        s = service.stats_dict()
        assert s["prefetch"]["started"] == 0 and s["held_back"]["unlikely"] == 1, s["held_back"]
    finally:
        service.close()


async def test_a_shared_engine_s_tab_prefetch_waits_until_the_user_pauses_and_an_edit_drops_it():
    """On a shared engine the Tab's prefetch starts once the suggestion has been on screen PAUSE_S with no edit: a
    keystroke before that (a user typing on) means it is never sent; a user who stops to read gets it."""
    fake = FakeBackend(text="foo(bar, baz)")
    service = _shared(fake)
    try:
        await service.complete(Asked("d", 1, _state()))
        service.run_after()
        await asyncio.sleep(PAUSE_S / 3)
        assert service.stats_dict()["prefetch"]["started"] == 0  # not yet: the user may be typing on
        service.docs.edited("d", len(TEXT), 0, "x")  # they were
        await asyncio.sleep(PAUSE_S + 0.05)
        assert service.stats_dict()["prefetch"]["started"] == 0
        await service.complete(Asked("d", 2, _state(TEXT + "x")))
        service.run_after()
        await asyncio.sleep(PAUSE_S + 0.05)  # this time they stop and read it
        assert service.stats_dict()["prefetch"]["started"] == 1
        tab = _now(service, Asked("d", 3, _state(TEXT + "x" + "foo(bar, baz)")))
        assert tab is not None and tab.source == "cache"
    finally:
        service.close()


async def _three_tabs(service: CompletionService, text: str) -> str:
    """Three suggestions of `text`, each read for PAUSE_S + 50 ms and taken with Tab; the text they leave."""
    cur = TEXT
    for version in range(1, 4):
        await service.complete(Asked("d", version, _state(cur)))
        service.run_after()
        await asyncio.sleep(PAUSE_S + 0.05)  # they read it, and press Tab
        service.docs.edited("d", len(cur), 0, text)
        cur += text
    return cur


async def test_a_user_who_tabs_sooner_than_a_prefetch_takes_gets_the_tab_s_prefetch_at_once():
    """A user whose Tabs come 150 ms after the suggestion shows, on an engine whose prefetches take 400 ms: the fixed
    pause would have the Tab join a prefetch still running; their Tabs, timed, let the next prefetch start at once."""
    text = "foo(bar, baz)"
    fake = FakeBackend(text=lambda prefix, suffix: Prediction(text, prefill_ms=300.0, decode_ms=100.0))
    service = _shared(fake)
    try:
        cur = await _three_tabs(service, text)
        assert service.stats_dict()["held_back"]["pause_ms"] == 0.0
        service.docs.edited("d", len(cur), 0, "\n")  # a new line: a state no prefetch reached
        cur += "\n"
        started = service.stats_dict()["prefetch"]["started"]
        await service.complete(Asked("d", 4, _state(cur)))
        service.run_after()
        await asyncio.sleep(0.01)  # well before the fixed pause
        assert service.stats_dict()["prefetch"]["started"] > started  # the Tab's (and, done at once, the next one's)
    finally:
        service.close()


async def test_a_user_who_reads_longer_than_a_prefetch_takes_keeps_the_whole_pause():
    """The same Tabs on an engine whose prefetches take 10 ms: the pause stays whole (typing on costs no one)."""
    text = "foo(bar, baz)"
    fake = FakeBackend(text=lambda prefix, suffix: Prediction(text, prefill_ms=5.0, decode_ms=5.0))
    service = _shared(fake)
    try:
        await _three_tabs(service, text)
        assert service.stats_dict()["held_back"]["pause_ms"] == PAUSE_S * 1000
    finally:
        service.close()


async def test_a_local_engine_prefetches_every_branch_whatever_its_latency():
    fake = FakeBackend(text="foo(bar, baz)")
    service, logged = _service(fake)
    try:
        for ms in [40.0] * 20 + [400.0] * 8:
            service.speculator.engine.observe(ms)
        await service.complete(Asked("d", 1, _state()))
        service.run_after()
        await asyncio.sleep(0.05)
        held = [e for e in logged if e["event"] == "prefetch" and e["outcome"] == "held"]
        started = {e["branch"] for e in logged if e["event"] == "prefetch" and e["outcome"] == "started"}
        assert not held and {"all", "word"} <= started, (held, started)
    finally:
        service.close()


async def test_a_shared_engine_s_load_is_read_from_the_wait_for_its_first_token():
    """Answers that come whole in a few ms but whose first token waited 200 ms (an engine queue) read as a loaded
    engine: what its load is judged by is the first token, not the whole latency."""
    fake = FakeBackend(text=lambda prefix, suffix: Prediction("foo(bar)", first_token_ms=200.0))
    service = compose(Config(debounce_ms=0, backend="openai", url="http://127.0.0.1:9", speculation=False),
                      lambda c: fake, EventLog())
    try:
        for ms in [40.0] * 20:  # the engine unloaded
            service.speculator.engine.observe(ms)
        for i in range(8):
            await service.complete(Asked("d", i + 1, _state(TEXT + "a" * i)))
        assert service.speculator.engine.ratio() == 5.0 and service.speculator.engine.depth_cap() == 0
    finally:
        service.close()


async def test_a_prefetch_s_call_counts_in_the_debounce_s_model_latency():
    """The debounce waits by how long a model call takes: a prefetch is one. With speculation on, the request
    after a Tab (one of the fastest: its prompt extends the last one) is answered from memory, so the prefetch
    that stood in for it must tell the debounce what that request would have; without it the estimate stayed
    higher than with speculation off, and the user waited more."""
    backend = FakeBackend(text=lambda prefix, suffix: Prediction("foo(bar, baz)", prefill_ms=100.0, decode_ms=200.0))
    service, _ = _service(backend)
    try:
        await service.complete(Asked("d", 1, _state()))
        before = service.stats_dict()["debounce"]["model_ms"]  # the answer's own latency here, a few ms
        service.run_after()
        await _settle(service)
        assert service.computations.prefetch_runs.finished >= 1
        expected = before
        for _ in range(service.computations.prefetch_runs.finished):  # each prefetch's 300 ms call, into the EMA
            expected = 0.25 * 300.0 + 0.75 * expected
        assert service.stats_dict()["debounce"]["model_ms"] == pytest.approx(expected, abs=0.3)
    finally:
        service.close()
