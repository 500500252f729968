"""The remote backend against real servers on 127.0.0.1: `tabd serve-model`, tiny failing servers, llama.cpp.

The acceptance check: the same (prefix, suffix) through RemoteBackend -> tabd
serve-model gives the local backend's suggestion, character for character.
"""
from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from support.lspclient import change, init_params, inline, open_doc, stats
from tabd.predictor.prompt_text import fim_prompt, guess_template, parse_fim_prompt
from tabd.predictor.remote import RemoteBackend
from tabd.predictor.settings import RemoteSettings
from tabd.predictor.wire import RemoteError
from tabd.predictor.templates import FAMILIES, template_for
from tabd.predictor.types import ContextChunk, GenSettings, Interrupted

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_serve_model(port: int, *extra: str, timeout: float = 300.0) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tabd.daemon", "serve-model", "--port", str(port), *extra],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        m = re.search(r"listening on (http://\S+)", line)
        if m:
            threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep draining
            return proc, m.group(1)
    proc.kill()
    raise RuntimeError(f"tabd serve-model did not start: {proc.stderr.read() if proc.stderr else ''}")


SERVE_MODEL_PORT = free_port()


@pytest.fixture(scope="module")
def serve_model():
    proc, url = start_serve_model(SERVE_MODEL_PORT)
    yield url
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(scope="module")
def local():
    from tabd.predictor.local import LocalBackend

    return LocalBackend()


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


# -- against tabd serve-model ----------------------------------------------------------------------

STATES = [
    ("import os\nimport sys\n\n\ndef main(argv):\n    ", "\n"),
    ("def add(a, b):\n    return a", ""),
    ("class Point:\n    def __init__(self, x, y):\n        self.x = x\n        self.", "\n"),
    ("for i in range(", "):\n    pass\n"),
    ("result = {}\nwith open(path) as handle:\n    for line in handle:\n", "\n    return result\n"),
    ("", ""),
    ("x = ", "  # the answer\n"),
    ("def read(path):\n    \"\"\"Read a file.\"\"\"\n", ""),
]
SETTINGS = [GenSettings(24), GenSettings(24, multiline=True, max_lines=4), GenSettings(48)]


def test_serve_model_suggestions_equal_local(serve_model, local):
    remote = RemoteBackend(RemoteSettings(serve_model))
    assert remote.model_id == f"remote:{serve_model}:tabd|tabd-spm"
    assert remote.route == "prompt"
    seen = 0
    for prefix, suffix in STATES:
        for settings in SETTINGS:
            want = local.predict(prefix, suffix, settings).text
            got = remote.predict(prefix, suffix, settings, slot_id="equal")
            assert got.text == want, (prefix, suffix, settings)
            seen += bool(want)
    assert seen, "the model suggested nothing at all: the comparison says little"


def test_serve_model_reuses_its_kv_cache(serve_model):
    remote = RemoteBackend(RemoteSettings(serve_model))
    prefix = "import os\n\n\ndef main(argv):\n    config = read_config(argv[1])\n    "
    remote.predict(prefix, "", GenSettings(8), slot_id="kv")
    again = remote.predict(prefix + "x", "", GenSettings(8), slot_id="kv")
    assert again.reused_tokens > 0 and again.prefill_tokens < again.reused_tokens


def test_serve_model_http_contract(serve_model):
    with httpx.Client(timeout=120) as c:
        models = c.get(serve_model + "/v1/models").json()
        assert models["object"] == "list" and models["data"][0]["id"] == "tabd"
        r = c.post(serve_model + "/v1/completions", json={"model": "gpt-4", "prompt": "x"})
        assert r.status_code == 404
        assert r.json()["error"]["code"] == "model_not_found" and "gpt-4" in r.json()["error"]["message"]
        r = c.post(serve_model + "/v1/completions", json={"prompt": "x", "temperature": 0.7})
        assert r.status_code == 400 and "temperature" in r.json()["error"]["message"]
        r = c.post(serve_model + "/v1/completions", json={"model": "tabd", "prompt": "def f(", "max_tokens": 4, "stop": ["\n"]})
        assert r.status_code == 200
        body = r.json()
        assert body["object"] == "text_completion" and "\n" not in body["choices"][0]["text"]
        assert body["usage"]["completion_tokens"] <= 4


def test_serve_model_refuses_a_non_loopback_host():
    r = subprocess.run([sys.executable, "-m", "tabd.daemon", "serve-model", "--host", "0.0.0.0", "--port", "0"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--allow-remote" in r.stderr


def test_unknown_model_name_is_a_clear_error(serve_model):
    t0 = time.monotonic()
    with pytest.raises(RemoteError, match=r"model 'gpt-4' is not served there \(it serves: tabd\)") as err:
        RemoteBackend(RemoteSettings(serve_model, model="gpt-4"))
    assert serve_model in str(err.value) and time.monotonic() - t0 < 5


def test_cancel_mid_request_returns_promptly_and_server_stays_usable(serve_model, local):
    remote = RemoteBackend(RemoteSettings(serve_model))
    # A prompt of ~1,500 new tokens: its prefill alone keeps the request in flight well past predict's first
    # poll (10 ms), whatever the model then writes and however fast it decodes.
    head = "".join(f"def step_{i}(x):\n    return x * {i} + {i % 7}\n\n\n" for i in range(90))
    prefix = head + "def parse(line):\n    key, _, value = line.partition('=')\n    "
    calls, stopped_at = [], []

    def should_stop() -> bool:
        # False for predict's check before sending; True from the first check with the request in flight.
        calls.append(1)
        if len(calls) > 1:
            stopped_at.append(time.monotonic())
            return True
        return False

    with pytest.raises(Interrupted):
        remote.predict(prefix, "", GenSettings(200, multiline=True, max_lines=100), should_stop)
    assert time.monotonic() - stopped_at[0] < 0.1
    settings = GenSettings(16)
    assert remote.predict(prefix, "", settings).text == local.predict(prefix, "", settings).text


# -- failures: each a one-line RemoteError naming the URL, fast -----------------------------------------

def test_server_down_is_fast_and_clear():
    url = f"http://127.0.0.1:{free_port()}"
    remote = RemoteBackend(RemoteSettings(url, fim="tabd"))  # construction does not need the server up
    t0 = time.monotonic()
    with pytest.raises(RemoteError, match=r"cannot reach .*connection refused.*running\?") as err:
        remote.predict("x = ", "", GenSettings(8))
    assert url in str(err.value) and "\n" not in str(err.value)
    assert time.monotonic() - t0 < 2
    t0 = time.monotonic()
    with pytest.raises(RemoteError):
        remote.predict("x = ", "", GenSettings(8))  # within a second: no new connection attempts
    assert time.monotonic() - t0 < 0.2


async def test_server_down_gives_an_empty_suggestion_and_an_error_event():
    from tabd.cache.state import DocState
    from tabd.daemon.runtime.backends import make_backend
    from tabd.daemon.runtime.config import Config
    from tabd.daemon.runtime.events import EventLog
    from tabd.daemon.runtime.service import CompletionService

    config = Config(fim="tabd", backend="openai", url=f"http://127.0.0.1:{free_port()}")
    events = EventLog()
    seen: list[dict] = []
    events.add_sink(seen.append)
    service = CompletionService(config, make_backend, events)
    try:
        assert await service.ready()
        t0 = time.monotonic()
        answer = await service.complete("doc", 1, DocState.from_text("x = ", 4, 2000, 600))
        assert answer.text == "" and time.monotonic() - t0 < 2
        errors = [e for e in seen if e.get("event") == "error"]
        assert errors and "cannot reach" in errors[-1]["message"]
    finally:
        service.close()


class Scripted(BaseHTTPRequestHandler):
    """A tiny server whose POST behaviour the test sets: status codes, silence, slow streams."""

    protocol_version = "HTTP/1.1"
    mode = "500"
    hits: list[str] = []
    bodies: list[dict] = []
    closed = threading.Event()

    def log_message(self, *args) -> None:
        pass

    def _send(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send(404, {"error": "not here"})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        self.hits.append(self.path)
        self.bodies.append(body)
        mode = self.mode
        if mode == "500":
            self._send(500, {"error": {"message": "CUDA out of memory", "type": "server_error"}})
        elif mode == "404":
            self._send(404, {"detail": "Not Found"})
        elif mode == "sleep":
            time.sleep(5)
            self._send(200, {"choices": [{"text": "late"}]})
        elif mode == "stream":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            try:
                for i in range(100):
                    event = {"choices": [{"text": "a", "index": 0}]}
                    self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                    self.wfile.flush()
                    time.sleep(0.1)
            except OSError:
                type(self).closed.set()
            self.close_connection = True
        elif mode == "infill":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            ok = body.get("input_prefix") == "x = " and body.get("input_suffix") == "\n" and body.get("cache_prompt")
            for piece in (["4", "2", "\n", "y"] if ok else ["wrong"]):
                self.wfile.write(f"data: {json.dumps({'content': piece, 'stop': False})}\n\n".encode())
            self.wfile.write(f"data: {json.dumps({'content': '', 'stop': True, 'timings': {'prompt_n': 3, 'cache_n': 1, 'predicted_n': 4}})}\n\n".encode())
            self.close_connection = True


@pytest.fixture
def scripted():
    handler = type("H", (Scripted,), {"hits": [], "bodies": [], "closed": threading.Event()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield handler, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_http_500_is_retried_then_reported(scripted):
    handler, url = scripted
    handler.mode = "500"
    remote = RemoteBackend(RemoteSettings(url, fim="tabd", retries=2))
    with pytest.raises(RemoteError, match=r"/v1/completions: HTTP 500: CUDA out of memory") as err:
        remote.predict("x = ", "", GenSettings(8))
    assert url in str(err.value)
    assert len(handler.hits) == 3  # two retries with backoff


def test_http_404_route_is_not_retried(scripted):
    handler, url = scripted
    handler.mode = "404"
    remote = RemoteBackend(RemoteSettings(url, fim="tabd"))
    with pytest.raises(RemoteError, match=r"HTTP 404, no such route .*/v1/completions"):
        remote.predict("x = ", "", GenSettings(8))
    assert len(handler.hits) == 1


def test_a_silent_server_times_out_bounded(scripted):
    handler, url = scripted
    handler.mode = "sleep"
    remote = RemoteBackend(RemoteSettings(url, fim="tabd", total_timeout=0.8))
    t0 = time.monotonic()
    with pytest.raises(RemoteError, match=r"timeout"):
        remote.predict("x = ", "", GenSettings(8))
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
        make_backend(config).predict("x = ", "", GenSettings(8))
    assert config_from_args(parser.parse_args([])).timeout == 20.0
    for bad in ("0", "-1", "601", "nan"):
        with pytest.raises(ConfigError, match="timeout must be"):
            config_from_args(parser.parse_args(["--remote-timeout", bad]))


def test_no_template_known_says_what_to_pass(scripted):
    from tabd.daemon.runtime.backends import make_backend
    from tabd.daemon.runtime.config import Config

    _, url = scripted
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
        remote.predict("x = ", "", GenSettings(100, multiline=True, max_lines=1000), flag.is_set)
    returned = time.monotonic()
    assert handler.closed.wait(2), "the server kept streaming to a client that had gone"
    assert time.monotonic() - returned < 1


def test_stream_stops_by_the_local_rule(scripted):
    handler, url = scripted
    handler.mode = "infill"
    remote = RemoteBackend(RemoteSettings(url, fim="server"))
    assert remote.route == "suffix"  # no /props here: what an Ollama-style server gets
    remote.route, remote.info.infill = "infill", True  # as if /props had answered (llama-server)
    p = remote.predict("x = ", "\n", GenSettings(8))
    assert p.text == "42" and handler.hits == ["/infill"]
    assert p.decode_tokens == 3  # "4", "2", "\n": the stream was closed there, as local stops there


def test_context_goes_to_llama_server_as_input_extra(scripted):
    handler, url = scripted
    handler.mode = "infill"
    remote = RemoteBackend(RemoteSettings(url, fim="server"))
    remote.route, remote.info.infill = "infill", True
    chunks = [ContextChunk("pkg/answer.py", "ANSWER = 42\n")]
    assert remote.predict("x = ", "\n", GenSettings(8), context=chunks).text == "42"
    assert handler.bodies[-1]["input_extra"] == [{"filename": "pkg/answer.py", "text": "ANSWER = 42\n"}]
    remote.predict("x = ", "\n", GenSettings(8))
    assert "input_extra" not in handler.bodies[-1]
    handler.mode = "stream"  # a warm-up asks llama-server for no tokens, with the same prompt and cache_prompt
    remote.warm("x = ", "\n", GenSettings(8), context=chunks)
    assert handler.bodies[-1]["n_predict"] == 0 and handler.bodies[-1]["input_extra"] and handler.bodies[-1]["cache_prompt"]


def test_serve_model_runs_the_local_backends_context_tokens(serve_model, local):
    remote = RemoteBackend(RemoteSettings(serve_model))
    chunks = [ContextChunk("pkg/shapes.py", "class Point:\n    def norm(self):\n        return 0\n")]
    prefix, suffix = "from pkg.shapes import Point\n\np = Point()\np.", "\n"
    got = remote.predict(prefix, suffix, GenSettings(8), slot_id="ctx", context=chunks)
    want = local.layout(prefix, suffix, 8, chunks)
    assert got.context_tokens == want.context_tokens > 10
    assert got.prefill_tokens + got.reused_tokens == len(want.ids)  # the prompt parsed back to the same tokens


# -- the daemon through the remote engine, over LSP -------------------------------------------------------

@pytest_lsp.fixture(
    scope="module",
    config=ClientServerConfig(server_command=[
        sys.executable, "-m", "tabd.daemon", "serve", "--backend", "openai", "--url", f"http://127.0.0.1:{SERVE_MODEL_PORT}",
    ]),
)
async def lsp(lsp_client: LanguageClient):
    await lsp_client.initialize_session(init_params({"depth": 2}))
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio(loop_scope="module")
async def test_lsp_suggestion_then_tab_from_cache_through_remote(serve_model, lsp: LanguageClient):
    """serve_model comes first: the LSP server's backend looks at the engine when it loads."""
    uri = "file:///w/remote.py"
    text = "import os\nimport sys\n\n\ndef main(argv):\n    config = read_config(argv[1])\n    for key in sorted(config):\n        "
    open_doc(lsp, uri, text)
    lines = text.split("\n")
    line, char = len(lines) - 1, len(lines[-1])
    first = await inline(lsp, uri, line, char, timeout=120)
    assert first.items and first.items[0].insert_text.strip()
    s = await stats(lsp)
    assert s["model"].startswith(f"remote:http://127.0.0.1:{SERVE_MODEL_PORT}:tabd|tabd-spm")
    item = first.items[0]
    before = await stats(lsp)
    change(lsp, uri, 2, line, char, item.insert_text)
    await asyncio.wait_for(lsp.workspace_execute_command_async(
        types.ExecuteCommandParams(command="tabd.accept", arguments=[item.command.arguments[0]])), 30)
    deadline = time.monotonic() + 120
    while (await stats(lsp))["prefetch"]["finished"] <= before["prefetch"]["finished"] and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    after_text = text + item.insert_text
    lines = after_text.split("\n")
    await inline(lsp, uri, len(lines) - 1, len(lines[-1]))
    after = await stats(lsp)
    assert after["last"]["source"] == "cache"
    assert after["after_accept"]["from_cache"] == before["after_accept"]["from_cache"] + 1


# -- llama.cpp (built from source; see the README's Remote engines section) --------------------------------

GGUF = ROOT / ".cache" / "tabd-f32.gguf"


@pytest.mark.llamacpp
@pytest.mark.slow
def test_llama_cpp_server_gives_a_suggestion(tmp_path):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'llama-cpp-python[server]')")
    pytest.importorskip("llama_cpp.server", reason="llama-cpp-python was installed without its [server] extra")
    if not GGUF.exists():
        from tabd.predictor.bench.gguf import convert

        try:
            convert(ROOT / "predictor" / "model", GGUF)
        except Exception as exc:  # the converter ships in the sdist only
            pytest.skip(f"cannot make {GGUF}: {exc}")
    port = free_port()
    log = tmp_path / "llama.log"
    proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(GGUF), "--host", "127.0.0.1",
                             "--port", str(port), "--n_ctx", "2048", "--n_threads", "1"],
                            stdout=log.open("w"), stderr=subprocess.STDOUT)  # uvicorn's access log names the route
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(url + "/v1/models", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.3)
        else:
            pytest.fail(f"llama_cpp.server did not start: {log.read_text()[-2000:]}")
        remote = RemoteBackend(RemoteSettings(url))
        assert remote.template is not None and remote.template.name == "tabd-spm"  # from the GGUF's file name
        assert remote.route in ("prompt", "infill")
        texts = [remote.predict(p, s, GenSettings(24)).text for p, s in STATES[:4]]
        assert any(t.strip() for t in texts), texts
        served = re.findall(r'"POST (/v1/completions|/infill) HTTP', log.read_text())
        assert len(served) >= 4 and set(served) == {"/infill" if remote.route == "infill" else "/v1/completions"}
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
