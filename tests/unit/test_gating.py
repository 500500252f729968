"""Confidence gating in the completion service: show the part the model is sure of.

The backend is the shared fake scripted with Predictions of chosen per-token
probabilities (tests/support/fakes.py), because what is under test is what the service does with
probabilities, whatever a real model would give; the decode side that
produces them is tested in test_predictor.py against the real model.
"""
from __future__ import annotations

import asyncio

from tabd.cache.state import DocState
from tabd.daemon.runtime.config import Config, apply_client_options
from tabd.daemon.runtime.request import Asked
from tabd.daemon.runtime.service import CompletionService, compose
from tabd.predictor.types import Prediction

from support.fakes import FakeBackend

TEXT = "return self.value + 1"
CONFIDENCE = ((6, 0.95), (11, 0.9), (17, 0.8), (19, 0.3), (21, 0.9))  # sure up to ".value", unsure of " +"


def scripted(prefix: str, suffix: str) -> Prediction:
    if prefix.endswith("unsure: "):
        return Prediction(text="maybe_this()", confidence=((5, 0.1), (12, 0.99)))
    if prefix.endswith("call("):
        return Prediction(text=")", confidence=((1, 0.99),))
    if prefix.endswith("self.value"):
        return Prediction(text=" * 2", confidence=((2, 0.9), (4, 0.9)))
    if prefix.endswith("    "):
        return Prediction(text=TEXT, confidence=CONFIDENCE)
    return Prediction(text="")


def _run(coro):
    return asyncio.run(coro)


async def _complete(service, text, invoked=False):
    return await service.complete(Asked("doc", 1, DocState.from_text(text, len(text), 4800, 1200), invoked))


def _service(min_confidence: float, speculation: bool = False) -> tuple[CompletionService, FakeBackend]:
    backend = FakeBackend(text=scripted)
    config = Config(min_confidence=min_confidence, speculation=speculation).validate()
    return compose(config, lambda c: backend, None), backend


def test_a_suggestion_is_cut_where_confidence_drops():
    async def go():
        service, _ = _service(0.5)
        try:
            return (await _complete(service, "def f(self):\n    ")).text
        finally:
            service.close()
    assert _run(go()) == "return self.value"


def _automatic_then_invoked(text: str):
    """The answers to an automatic request at the end of `text`, then to an invoked one there."""
    async def go():
        service, _ = _service(0.5)
        try:
            return await _complete(service, text), await _complete(service, text, invoked=True)
        finally:
            service.close()
    return _run(go())


def test_nothing_is_shown_when_the_first_piece_is_unsure_but_an_invoked_request_gets_the_best_guess():
    auto, invoked = _automatic_then_invoked("x = 1\nunsure: ")
    assert auto.text == "" and auto.source == "model"  # the model answered; gating hid all of it
    assert invoked.text == "maybe_this()" and invoked.source == "cache"  # the cache kept the full text


def test_the_cache_serves_a_less_strict_request_the_full_text_without_a_model_call():
    async def go():
        service, backend = _service(0.5)
        try:
            strict = await _complete(service, "def f(self):\n    ")
            service.config.min_confidence = 0.0
            loose = await _complete(service, "def f(self):\n    ")
            return strict, loose, len(backend.calls)
        finally:
            service.close()
    strict, loose, calls = _run(go())
    assert strict.text == "return self.value" and loose.text == TEXT
    assert loose.source == "cache" and calls == 1


def test_speculation_plans_from_the_text_that_was_shown():
    async def go():
        service, backend = _service(0.5, speculation=True)
        try:
            await _complete(service, "def f(self):\n    ")
            await asyncio.sleep(0.5)  # the prefetch after "return self.value" runs on the model thread
            after_shown = await _complete(service, "def f(self):\n    return self.value")
            return after_shown
        finally:
            service.close()
    answer = _run(go())
    # the state after a Tab of the *shown* part was prefetched (a plan from the full text would have
    # prefetched the state after "return self.value + 1" instead)
    assert (answer.text, answer.source, answer.depth) == (" * 2", "cache", 1)


def test_min_confidence_is_validated_as_an_initialization_option():
    config, problems = apply_client_options(Config(), {"minConfidence": 1.5})
    assert config.min_confidence == Config().min_confidence and "minConfidence" in problems[0]
    config, problems = apply_client_options(Config(), {"minConfidence": 0.25})
    assert config.min_confidence == 0.25 and not problems
    config, problems = apply_client_options(Config(), {"minConfidence": "high"})
    assert problems and config.min_confidence == Config().min_confidence


def test_a_one_character_suggestion_is_not_shown_but_an_invoked_request_gets_it():
    auto, invoked = _automatic_then_invoked("x = call(")
    assert auto.text == "" and auto.source == "model"  # sure of it, but Tab would save no keystroke
    assert invoked.text == ")"
    config, problems = apply_client_options(Config(), {"minChars": 0})
    assert config.min_chars == Config().min_chars and "minChars" in problems[0]
    config, problems = apply_client_options(Config(), {"minChars": 1})
    assert config.min_chars == 1 and not problems
