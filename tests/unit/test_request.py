"""The request builder (daemon/runtime/request.py): a Request built once per request, keyed by what decides the
model's output, gated by who asked."""
from __future__ import annotations

import asyncio

from support.fakes import FakeBackend
from tabd.cache.state import DocState
from tabd.daemon.runtime.config import Config
from tabd.daemon.runtime.events import EventLog
from tabd.daemon.runtime.loaded_model import Model
from tabd.daemon.runtime.request import Asked, RequestBuilder, shown_part
from tabd.daemon.runtime.scheduler import Scheduler
from tabd.daemon.runtime.workspace import Workspace, context_options

TEXT = "def total(items):\n    return "


def _state(text: str = TEXT) -> DocState:
    return DocState.from_text(text, len(text), 4800, 1200)


async def _builder(config: Config | None = None, planned: frozenset[str] = frozenset()):
    config = config or Config()
    scheduler = Scheduler()
    model = Model(config, lambda c: FakeBackend(), scheduler, EventLog())
    assert await model.ready()
    workspace = Workspace(context_options(config), config.prefix_chars, config.suffix_chars, lambda *a: None)
    return RequestBuilder(config, model, workspace, planned.__contains__), workspace, scheduler


async def test_a_request_is_built_once_with_one_context_pick_and_its_latency_counts_from_its_arrival():
    builder, workspace, scheduler = await _builder()
    try:
        asked = Asked("d", 1, _state())
        await asyncio.sleep(0.01)
        req = builder.build(asked)
        assert req.t0 == asked.arrived  # the wait before the build is the user's too
        assert workspace.stats.picks == 1
        again = builder.build(Asked("d", 1, _state()))
        assert again.id != req.id and again.key == req.key and workspace.stats.picks == 1  # the kept context
    finally:
        scheduler.stop()


async def test_a_prefetch_s_prompt_and_the_request_it_stands_in_for_have_one_key_for_either_trigger():
    builder, _, scheduler = await _builder()
    try:
        for text in ("def total(items):", "x = total("):
            for invoked in (False, True):
                req = builder.build(Asked("d", 1, _state(text), invoked))
                assert builder.prompt("d", _state(text), req.context, invoked).key == req.key, (text, invoked)
    finally:
        scheduler.stop()


async def test_the_key_follows_the_window_and_settings_and_a_planned_key_is_after_accept():
    builder, _, scheduler = await _builder()
    try:
        a = builder.build(Asked("d", 1, _state()))
        b = builder.build(Asked("d", 1, _state()))
        c = builder.build(Asked("d", 1, _state(TEXT + "x"), False))
        assert a.key == b.key != c.key and a.key == builder.prompt("", _state()).key
        assert not a.after_accept
        builder.after_accept = {a.key}.__contains__
        assert builder.build(Asked("d", 1, _state())).after_accept
        assert builder.build(Asked("d", 1, _state()), ready=False).key == ""  # no model: no key to look up
    finally:
        scheduler.stop()


async def test_an_invoked_request_shows_any_guess_and_an_automatic_one_only_what_the_model_is_sure_of():
    builder, _, scheduler = await _builder(Config(min_confidence=0.5, min_chars=2))
    try:
        auto = builder.build(Asked("d", 1, _state()))
        invoked = builder.build(Asked("d", 1, _state(), True))
        confidence = ((3, 0.9), (9, 0.2))
        assert auto.shown("abc + def", confidence) == "abc"
        assert invoked.shown("abc + def", confidence) == "abc + def"
        assert auto.shown(")", ((1, 0.99),)) == "" and invoked.shown(")", ((1, 0.99),)) == ")"
        assert builder.shown("abc + def", confidence) == "abc"  # what speculation plans from
    finally:
        scheduler.stop()


def test_shown_part_gates_then_drops_what_is_too_short():
    assert shown_part("ab", (), 0.9, 2) == "ab"  # no probabilities: nothing is gated
    assert shown_part("abc", ((1, 0.9), (3, 0.1)), 0.5, 2) == ""


async def test_an_invoked_request_where_a_block_starts_may_write_a_whole_block():
    builder, workspace, scheduler = await _builder()
    try:
        for text in ("def total(items):", "def total(items):\n    "):
            invoked = builder.build(Asked("d", 1, _state(text), True))
            auto = builder.build(Asked("d", 1, _state(text), False))
            assert invoked.settings.multiline and invoked.settings.max_lines == 16, text
            assert auto.settings.max_lines < 16 and invoked.key != auto.key  # its own answer, not the one-liner's
        mid = builder.build(Asked("d", 1, _state("x = total("), True))  # no block starts here: the usual settings
        assert not mid.settings.multiline
    finally:
        scheduler.stop()
