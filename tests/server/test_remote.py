"""The remote backend against real servers on 127.0.0.1: `tabd serve-model`, and llama.cpp (stub servers: tests/unit/test_remote_backend.py).

The acceptance check: the same (prefix, suffix) through RemoteBackend -> tabd
serve-model gives the local backend's suggestion, character for character.
"""
from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from support.lspclient import change, init_params, inline, open_doc, stats
from support.ports import free_port
from tabd.predictor.backends.remote import RemoteBackend
from tabd.predictor.backends.backend_settings import RemoteSettings
from tabd.predictor.backends.wire import RemoteError
from tabd.predictor.types import ContextChunk, GenSettings, Interrupted, Query

ROOT = Path(__file__).resolve().parents[2]


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
    from tabd.predictor.backends.local import LocalBackend

    return LocalBackend()


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
            local_answer = local.predict(Query(prefix, suffix, settings))
            want = local_answer.text
            got = remote.predict(Query(prefix, suffix, settings, slot_id="equal"))
            assert got.text == want, (prefix, suffix, settings)
            # and the same probabilities, so --min-confidence shows the same part of it
            assert got.confidence == local_answer.confidence, (prefix, suffix, settings)
            seen += bool(want)
    assert seen, "the model suggested nothing at all: the comparison says little"


def test_serve_model_reuses_its_kv_cache(serve_model):
    remote = RemoteBackend(RemoteSettings(serve_model))
    prefix = "import os\n\n\ndef main(argv):\n    config = read_config(argv[1])\n    "
    remote.predict(Query(prefix, "", GenSettings(8), slot_id="kv"))
    again = remote.predict(Query(prefix + "x", "", GenSettings(8), slot_id="kv"))
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
        remote.predict(Query(prefix, "", GenSettings(200, multiline=True, max_lines=100)), should_stop)
    assert time.monotonic() - stopped_at[0] < 0.1
    settings = GenSettings(16)
    assert remote.predict(Query(prefix, "", settings)).text == local.predict(Query(prefix, "", settings)).text


def test_serve_model_runs_the_local_backends_context_tokens(serve_model, local):
    remote = RemoteBackend(RemoteSettings(serve_model))
    chunks = [ContextChunk("pkg/shapes.py", "class Point:\n    def norm(self):\n        return 0\n")]
    prefix, suffix = "from pkg.shapes import Point\n\np = Point()\np.", "\n"
    got = remote.predict(Query(prefix, suffix, GenSettings(8), slot_id="ctx", context=chunks))
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
    # gating off: this document's suggestion is under 0.4 as a whole, and the Tab after it is what is tested here
    await lsp_client.initialize_session(init_params({"depth": 2, "minConfidence": 0}))
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
    await asyncio.sleep(0.4)  # the user reads it before Tab: a shared engine's prefetch waits for that pause
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
        texts = [remote.predict(Query(p, s, GenSettings(24))).text for p, s in STATES[:4]]
        assert any(t.strip() for t in texts), texts
        served = re.findall(r'"POST (/v1/completions|/infill) HTTP', log.read_text())
        assert len(served) >= 4 and set(served) == {"/infill" if remote.route == "infill" else "/v1/completions"}
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
