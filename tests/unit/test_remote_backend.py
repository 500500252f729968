"""The remote backend (predictor/backends/remote.py) in process: its FIM prompt strings, and its failures against stub
servers on 127.0.0.1 (tests/support/stub_model.py), each a one-line RemoteError naming the URL, fast. Against a
real `tabd serve-model` and llama.cpp: tests/server/test_remote.py.
"""
from __future__ import annotations

import threading
import time

import pytest

from tabd.predictor.prompt.prompt_text import fim_prompt, guess_template, parse_fim_prompt
from tabd.predictor.backends.backend_settings import RemoteSettings
from tabd.predictor.backends.remote import RemoteBackend
from tabd.predictor.prompt.templates import FAMILIES, template_for
from tabd.predictor.types import ContextChunk, GenSettings, Interrupted, Prediction, Query
from tabd.predictor.backends.wire import RemoteError

from support.ports import free_port
from support.stub_model import stub_model


# -- prompt strings ------------------------------------------------------------------------------

@pytest.mark.parametrize("family", [*FAMILIES, "plain"])
def test_fim_prompt_parses_back(family):
    layouts = FAMILIES[family][4] if family in FAMILIES else ("plain",)
    for layout in layouts:
        t = template_for(family, None if family == "plain" else layout)
        prefix, suffix = "def f(x):\n    return <x", "\n\nprint(f(1))\n"
        prompt = fim_prompt(t, prefix, suffix)
        if t.layout == "plain":
            assert parse_fim_prompt(t, prompt) == (prefix, "")
        else:
            assert parse_fim_prompt(t, prompt) == (prefix, suffix)
            assert parse_fim_prompt(t, "no markers here") is None


def test_the_tabd_prompt_is_suffix_first():
    assert fim_prompt(template_for("tabd"), "P", "S") == "<tabd_suf>S<tabd_pre>P"


def test_templates_guessed_from_model_names():
    assert guess_template("Qwen/Qwen2.5-Coder-1.5B").family == "qwen2.5-coder"
    assert guess_template("qwen2.5-coder:1.5b-base").family == "qwen2.5-coder"
    assert guess_template("bigcode/starcoder2-3b").family == "starcoder2"
    assert guess_template("/models/tabd-f32.gguf").name == "tabd-spm"
    assert guess_template("llama3") is None


# -- failures: each a one-line RemoteError naming the URL, fast -----------------------------------------

def test_server_down_is_fast_and_clear():
    url = f"http://127.0.0.1:{free_port()}"
    remote = RemoteBackend(RemoteSettings(url, fim="tabd"))  # construction does not need the server up
    t0 = time.monotonic()
    with pytest.raises(RemoteError, match=r"cannot reach .*connection refused.*running\?") as err:
        remote.predict(Query("x = ", "", GenSettings(8)))
    assert url in str(err.value) and "\n" not in str(err.value)
    assert time.monotonic() - t0 < 2
    t0 = time.monotonic()
    with pytest.raises(RemoteError):
        remote.predict(Query("x = ", "", GenSettings(8)))  # within a second: no new connection attempts
    assert time.monotonic() - t0 < 0.2


async def test_server_down_gives_an_empty_suggestion_and_an_error_event():
    from tabd.cache.state import DocState
    from tabd.daemon.runtime.backends import make_backend
    from tabd.daemon.runtime.config import Config
    from tabd.daemon.runtime.events import EventLog
    from tabd.daemon.runtime.request import Asked
    from tabd.daemon.runtime.service import compose

    config = Config(fim="tabd", backend="openai", url=f"http://127.0.0.1:{free_port()}")
    events = EventLog()
    seen: list[dict] = []
    events.add_sink(seen.append)
    service = compose(config, make_backend, events)
    try:
        assert await service.ready()
        t0 = time.monotonic()
        answer = await service.complete(Asked("doc", 1, DocState.from_text("x = ", 4, 2000, 600)))
        assert answer.text == "" and time.monotonic() - t0 < 2
        errors = [e for e in seen if e.get("event") == "error"]
        assert errors and "cannot reach" in errors[-1]["message"]
    finally:
        service.close()


@pytest.fixture
def scripted():
    with stub_model() as served:
        yield served


def test_http_500_is_retried_then_reported(scripted):
    handler, url = scripted
    handler.mode = "500"
    remote = RemoteBackend(RemoteSettings(url, fim="tabd", retries=2))
    with pytest.raises(RemoteError, match=r"/v1/completions: HTTP 500: CUDA out of memory") as err:
        remote.predict(Query("x = ", "", GenSettings(8)))
    assert url in str(err.value)
    assert len(handler.hits) == 3  # two retries with backoff


def test_http_404_route_is_not_retried(scripted):
    handler, url = scripted
    handler.mode = "404"
    remote = RemoteBackend(RemoteSettings(url, fim="tabd"))
    with pytest.raises(RemoteError, match=r"HTTP 404, no such route .*/v1/completions"):
        remote.predict(Query("x = ", "", GenSettings(8)))
    assert len(handler.hits) == 1


def test_a_silent_server_times_out_bounded(scripted):
    handler, url = scripted
    handler.mode = "sleep"
    remote = RemoteBackend(RemoteSettings(url, fim="tabd", total_timeout=0.8))
    t0 = time.monotonic()
    with pytest.raises(RemoteError, match=r"timeout"):
        remote.predict(Query("x = ", "", GenSettings(8)))
    assert time.monotonic() - t0 < 2.5


def test_the_timeout_option_bounds_a_silent_server(scripted):
    import argparse

    from tabd.daemon.runtime.backends import make_backend
    from tabd.daemon.runtime.config import ConfigError
    from tabd.daemon.runtime.options import add_model_arguments, config_from_args

    handler, url = scripted
    handler.mode = "sleep"
    parser = argparse.ArgumentParser()
    add_model_arguments(parser)
    config = config_from_args(parser.parse_args(["--backend", "openai", "--url", url, "--fim", "tabd", "--remote-timeout", "0.7"]))
    with pytest.raises(RemoteError, match=r"no complete answer within 0.7 s \(timeout\)"):
        make_backend(config).predict(Query("x = ", "", GenSettings(8)))
    assert config_from_args(parser.parse_args([])).timeout == 20.0
    for bad in ("0", "-1", "601", "nan"):
        with pytest.raises(ConfigError, match="timeout must be"):
            config_from_args(parser.parse_args(["--remote-timeout", bad]))


def test_no_template_known_says_what_to_pass(scripted):
    _, url = scripted
    from tabd.daemon.runtime.backends import make_backend
    from tabd.daemon.runtime.config import Config

    with pytest.raises(RemoteError, match=r"set the FIM template: FAMILY\[:LAYOUT\] \(tabd, .*\), or server") as err:
        RemoteBackend(RemoteSettings(url, model="llama3"))
    assert err.value.setting == "fim"  # the predictor names the setting; the daemon, which parses flags, the flag
    with pytest.raises(RemoteError, match=r"or server for the server's own \(--fim\)$"):
        make_backend(Config(backend="openai", url=url, remote_model="llama3"))


def test_cancel_closes_the_server_side_stream(scripted):
    handler, url = scripted
    handler.mode = "stream"
    remote = RemoteBackend(RemoteSettings(url, fim="tabd"))
    flag = threading.Event()
    threading.Timer(0.35, flag.set).start()
    with pytest.raises(Interrupted):
        remote.predict(Query("x = ", "", GenSettings(100, multiline=True, max_lines=1000)), flag.is_set)
    returned = time.monotonic()
    assert handler.closed.wait(2), "the server kept streaming to a client that had gone"
    assert time.monotonic() - returned < 1


def test_stream_stops_by_the_local_rule(scripted):
    handler, url = scripted
    handler.mode = "infill"
    remote = RemoteBackend(RemoteSettings(url, fim="server"))
    assert remote.route == "suffix"  # no /props here: what an Ollama-style server gets
    remote.route, remote.info.infill = "infill", True  # as if /props had answered (llama-server)
    p = remote.predict(Query("x = ", "\n", GenSettings(8)))
    assert p.text == "42" and handler.hits == ["/infill"]
    assert p.decode_tokens == 3  # "4", "2", "\n": the stream was closed there, as local stops there


def test_context_goes_to_llama_server_as_input_extra(scripted):
    handler, url = scripted
    handler.mode = "infill"
    remote = RemoteBackend(RemoteSettings(url, fim="server"))
    remote.route, remote.info.infill = "infill", True
    chunks = [ContextChunk("pkg/answer.py", "ANSWER = 42\n")]
    assert remote.predict(Query("x = ", "\n", GenSettings(8), context=chunks)).text == "42"
    assert handler.bodies[-1]["input_extra"] == [{"filename": "pkg/answer.py", "text": "ANSWER = 42\n"}]
    remote.predict(Query("x = ", "\n", GenSettings(8)))
    assert "input_extra" not in handler.bodies[-1]
    handler.mode = "stream"  # a warm-up asks llama-server for no tokens, with the same prompt and cache_prompt
    remote.warm(Query("x = ", "\n", GenSettings(8), context=chunks))
    assert handler.bodies[-1]["n_predict"] == 0 and handler.bodies[-1]["input_extra"] and handler.bodies[-1]["cache_prompt"]


def test_vllm_gets_the_fim_markers_banned(scripted):
    """vLLM would start a suggestion with a FIM marker and hide it from the text; the local engine never does."""
    handler, url = scripted
    handler.mode, handler.answer = "answer", "42"
    handler.models = [{"id": "tabd", "owned_by": "vllm"}]
    handler.vocab = {"<tabd_pre>": 1, "<tabd_suf>": 2, "<tabd_mid>": 3, "<tabd_pad>": 4}
    remote = RemoteBackend(RemoteSettings(url))
    assert remote.template is not None and remote.template.name == "tabd-spm"
    assert remote.predict(Query("x = ", "\n", GenSettings(8))).text == "42"
    assert handler.bodies[-1]["logit_bias"] == {"1": -100, "2": -100, "3": -100, "4": -100}


def test_a_vllm_without_tokenize_is_still_asked(scripted):
    handler, url = scripted
    handler.mode, handler.answer = "answer", "42"
    handler.models = [{"id": "tabd", "owned_by": "vllm"}]  # no vocab: /tokenize is a 404, as behind a proxy
    remote = RemoteBackend(RemoteSettings(url))
    assert remote.predict(Query("x = ", "\n", GenSettings(8))).text == "42"
    assert "logit_bias" not in handler.bodies[-1]


def test_the_wait_for_the_first_token_is_measured_at_the_client(scripted):
    """What a shared engine's load is read from (engine_load.py): the time from sending a request to its first
    streamed token, the engine's queue included; an engine that answers at once waits nearly nothing."""
    handler, url = scripted
    handler.mode = "answer"
    remote = RemoteBackend(RemoteSettings(url, fim="tabd"))
    quick = remote.predict(Query("x = ", "", GenSettings(8)))
    handler.mode = "hold"  # the engine sits on the request (a queue of others' work) and then answers
    threading.Timer(0.4, handler.release.set).start()
    queued = remote.predict(Query("x = ", "", GenSettings(8)))
    assert 0 < quick.first_token_ms < 300 and queued.text
    assert queued.first_token_ms >= 400 > quick.first_token_ms
    # the log line of a remote run carries it (dashboards read the engine's wait from it); a local run has none
    from tabd.daemon.runtime.fields import prediction_fields

    assert prediction_fields(queued)["first_token_ms"] == round(queued.first_token_ms, 3)
    assert "first_token_ms" not in prediction_fields(Prediction("x", decode_tokens=1))


def test_an_engines_token_probabilities_gate_its_suggestion_as_the_local_backends_do(scripted):
    """An engine that sends OpenAI `logprobs` gets its suggestion gated by --min-confidence: the part the model is sure
    of as a whole is shown, not the guess after it."""
    from tabd.predictor.text.postprocess import gate

    handler, url = scripted
    handler.mode = "tokens"
    handler.tokens = [("total", 0.95), (" =", 0.9), (" sum", 0.3), ("(items)", 0.9)]
    remote = RemoteBackend(RemoteSettings(url, fim="tabd"))
    got = remote.predict(Query("    ", "\n", GenSettings(16)))
    assert handler.bodies[-1]["logprobs"] == 0
    assert got.text == "total = sum(items)"
    assert got.confidence == ((5, 0.95), (7, 0.9), (11, 0.3), (18, 0.9))
    assert gate(got.text, got.confidence, 0.4) == "total ="
    assert remote.gives_confidence is True


def test_the_finished_suggestion_bounds_each_tokens_end(scripted):
    """The clean-up cuts a single-line suggestion at its line's end: probabilities after the cut say nothing."""
    handler, url = scripted
    handler.mode = "tokens"
    handler.tokens = [("x", 0.9), (" + 1", 0.8), ("\nprint", 0.5), ("(y)", 0.5)]
    got = RemoteBackend(RemoteSettings(url, fim="tabd")).predict(Query("y = ", "", GenSettings(16, multiline=False)))
    assert got.text == "x + 1"
    assert got.confidence == ((1, 0.9), (5, 0.8))  # the suggestion is whole after " + 1": nothing after counts


def test_an_engine_that_refuses_logprobs_is_asked_without_them_once(scripted):
    handler, url = scripted
    handler.mode, handler.refuse_logprobs = "tokens", True
    handler.tokens = [("total", 0.95), (" = 0", 0.2)]
    remote = RemoteBackend(RemoteSettings(url, fim="tabd"))
    first = remote.predict(Query("    ", "\n", GenSettings(16)))
    second = remote.predict(Query("    ", "\n", GenSettings(16)))
    assert first.text == second.text == "total = 0" and first.confidence == ()
    assert ["logprobs" in b for b in handler.bodies] == [True, False, False]  # refused once, then never asked
    assert remote.gives_confidence is False and "logprobs" in remote.logprobs_refused


@pytest.mark.parametrize("text_lag, prompt_offset", [(True, False), (False, True)])
def test_token_probabilities_are_placed_by_the_tokens_not_the_chunks(scripted, text_lag, prompt_offset):
    """vLLM sends a token's logprob at once but holds its text back while it could start a stop string, so a chunk's
    text is not its tokens' text; llama-cpp-python counts the prompt in its text offsets."""
    from tabd.predictor.text.postprocess import gate

    handler, url = scripted
    handler.mode, handler.text_lag, handler.prompt_offset = "tokens", text_lag, prompt_offset
    handler.tokens = [("total", 0.95), (" =", 0.9), (" sum", 0.3), ("(items)", 0.9)]
    got = RemoteBackend(RemoteSettings(url, fim="tabd")).predict(Query("    ", "\n", GenSettings(16)))
    assert got.text == "total = sum(items)"
    assert got.confidence == ((5, 0.95), (7, 0.9), (11, 0.3), (18, 0.9))
    assert gate(got.text, got.confidence, 0.4) == "total ="


def test_a_token_spelled_otherwise_than_its_text_is_placed_by_its_offset(scripted):
    """An engine can spell a token otherwise than the text it adds (a byte token, `<0x20>`): the next token's
    `text_offset` says where it really starts, so the ends after it stay right."""
    handler, url = scripted
    handler.mode = "tokens"
    handler.tokens = [("total", 0.95), (" =", 0.9, "<0x20>="), (" sum", 0.3)]
    got = RemoteBackend(RemoteSettings(url, fim="tabd")).predict(Query("    ", "\n", GenSettings(16)))
    assert got.text == "total = sum"
    assert got.confidence[0] == (5, 0.95) and got.confidence[2] == (11, 0.3)


def test_unreadable_probabilities_are_none():
    from tabd.predictor.backends.remote import token_probs

    assert token_probs({"tokens": ["a"], "token_logprobs": [None]}) == []  # unreadable: no probabilities at all
    assert token_probs(None) == [] and token_probs({"tokens": ["a", "b"], "token_logprobs": [0.0]}) == []
    assert token_probs({"tokens": ["a"], "token_logprobs": [0.0], "text_offset": "x"}) == [(None, "a", 1.0)]


@pytest.mark.parametrize("text_lag", [False, True])
def test_the_engine_stops_decoding_where_the_suggestion_stops_being_shown(scripted, text_lag):
    """An automatic request shows only what the model is sure of as a whole: on a shared engine the decode after that
    is someone else's time, so the stream is closed once a token takes the joint probability under the gate (after
    the text before it has come: vLLM's can lag its tokens)."""
    handler, url = scripted
    handler.mode, handler.text_lag, handler.token_gap = "tokens", text_lag, 0.2
    handler.tokens = [("total", 0.95), (" =", 0.9), (" sum", 0.3)] + [(" + 1", 0.9)] * 20
    remote = RemoteBackend(RemoteSettings(url, fim="tabd"))
    got = remote.predict(Query("    ", "\n", GenSettings(16, stop_below=0.4)))
    assert got.text.startswith("total =") and "+" not in got.text
    assert handler.closed.wait(5)  # the client hung up on the engine mid-answer
    handler.token_gap, handler.tokens = 0.0, handler.tokens[:5]
    whole = remote.predict(Query("    ", "\n", GenSettings(16)))  # an invoked request (no floor) reads it all
    assert whole.text == "total = sum + 1 + 1"
