"""`tabd serve --metrics`: /metrics scraped over real HTTP while a real server answers requests."""
from __future__ import annotations

import asyncio
import re
import sys
import urllib.request

import pytest
import pytest_lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from support.fixture_model import MODEL_DIR, SUGGESTION
from support.lspclient import change, init_params, inline, open_doc, stats
from support.ports import free_port

pytestmark = pytest.mark.slow


PORT = free_port()


@pytest_lsp.fixture(
    scope="module",
    config=ClientServerConfig(server_command=[sys.executable, "-m", "tabd.daemon", "serve", "--metrics", f"127.0.0.1:{PORT}",
                                              "--model", str(MODEL_DIR)]),
)
async def client(lsp_client: LanguageClient, fixture_model):
    await lsp_client.initialize_session(init_params())
    yield
    await lsp_client.shutdown_session()


def scrape() -> dict[str, float]:
    body = urllib.request.urlopen(f"http://127.0.0.1:{PORT}/metrics", timeout=10).read().decode()
    values: dict[str, float] = {}
    for line in body.splitlines():
        m = re.match(r"^(tabd_[a-z_]+(?:\{[^}]*\})?) ([0-9.e+-]+)$", line)
        if m:
            values[m.group(1)] = float(m.group(2))
    return values


def total(values: dict[str, float], prefix: str) -> float:
    return sum(v for k, v in values.items() if k.startswith(prefix))


@pytest.mark.asyncio(loop_scope="module")
async def test_counters_move_while_the_server_answers(client: LanguageClient):
    before = await asyncio.to_thread(scrape)
    uri = "file:///w/metrics.py"
    text = "import os\n\n\ndef main():\n    path = os.path."
    open_doc(client, uri, text)
    first = await inline(client, uri, 4, len("    path = os.path."))
    second = await inline(client, uri, 4, len("    path = os.path."))  # the same state again: a cache hit
    assert [i.insert_text for i in first.items] == [i.insert_text for i in second.items] == [SUGGESTION]
    change(client, uri, 2, 0, 0, "# edited\n")
    s = await stats(client)
    after = await asyncio.to_thread(scrape)

    def moved(series: str) -> float:
        return after.get(series, 0.0) - before.get(series, 0.0)

    assert moved('tabd_completions_total{source="model"}') == 1
    assert moved('tabd_completions_total{source="cache"}') == 1
    assert s["sources"]["model"] == 1 and s["sources"]["cache"] == 1 and s["sources"]["none"] == 0


def test_metrics_refuse_a_non_loopback_address():
    import subprocess

    proc = subprocess.run(
        [sys.executable, "-m", "tabd.daemon", "serve", "--metrics", "0.0.0.0:9464"], capture_output=True, text=True, timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2
    assert "loopback" in proc.stderr and "--allow-remote" in proc.stderr
