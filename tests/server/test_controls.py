"""Switches, reasons and exclusion through a real `tabd serve` with the fixture model (it writes ` total()`).

The server runs with --min-confidence 1: an automatic request's suggestion is gated away (the fixture model is
sure of ` total()`, but not certain), so its empty answer says `unsure`; an invoked request shows the best guess
anyway, so it shows whether suggestions are on. Answers are read as the JSON on the wire (tabd.lsp.client), where
the `tabd.reason` of an empty answer is.
"""
from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

import pytest
import pytest_asyncio

from support.fixture_model import MODEL_DIR, SUGGESTION
from tabd.lsp.client import Client

pytestmark = pytest.mark.asyncio(loop_scope="module")
BODY = "def count(items):\n    n = 0\n    for item in items:\n        n += 1\n    return"
END = {"line": 4, "character": 10}  # after `return`


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(fixture_model, tmp_path_factory):
    record = tmp_path_factory.mktemp("controls") / "session.jsonl"
    client = Client("test-controls")
    await client.start([sys.executable, "-m", "tabd.daemon", "serve", "--model", str(MODEL_DIR), "--min-confidence",
                        "1", "--debounce-ms", "0", "--exclude", "*.local.py", "--exclude", "[oops", "--record",
                        str(record)], env=dict(os.environ))
    client.record_path = record  # type: ignore[attr-defined]
    await client.initialize()
    yield client
    await asyncio.wait_for(client.shutdown(), 30)
    await client.stop()


async def ask(client: Client, uri: str, invoked: bool = True, position: dict | None = None) -> dict:
    future = client.inline_completion(uri, position or END, invoked=invoked)
    return await asyncio.wait_for(asyncio.wrap_future(future), 60)


async def stats(client: Client) -> dict:
    return await asyncio.wait_for(client.call("tabd/stats", {}), 30)


def opened(client: Client, name: str, text: str = BODY) -> str:
    uri = f"file:///w/{name}"
    client.open(uri, "python", 1, text)
    return uri


async def settled(client: Client) -> dict:
    """The stats once no model job is queued or running (the prefetches after a suggestion are done)."""
    deadline = time.monotonic() + 60
    while True:
        s = await stats(client)
        runs = (s["prefetch"], s["context"]["warmups"])
        if s["queue_depth"] == 0 and all(r["started"] == r["finished"] + r["cancelled"] for r in runs):
            return s
        assert time.monotonic() < deadline, f"model jobs still running: {s}"
        await asyncio.sleep(0.05)


def warnings(client: Client) -> list[str]:
    return [m["params"]["message"] for m in client.notifications if m.get("method") == "window/showMessage"]


async def until_warning(client: Client, part: str) -> str:
    deadline = time.monotonic() + 30
    while not any(part in w for w in warnings(client)):
        assert time.monotonic() < deadline, f"no warning saying {part!r}: {warnings(client)}"
        await asyncio.sleep(0.02)
    return next(w for w in warnings(client) if part in w)


async def test_an_automatic_answer_gated_away_says_unsure_and_an_invoked_one_shows(server: Client):
    uri = opened(server, "unsure.py")
    auto = await ask(server, uri, invoked=False)
    assert auto == {"items": [], "tabd": {"reason": "unsure"}}
    assert (await stats(server))["last"]["reason"] == "unsure"
    shown = await ask(server, uri)
    assert [i["insertText"] for i in shown["items"]] == [SUGGESTION] and "tabd" not in shown
    assert (await stats(server))["last"]["reason"] == ""


async def test_a_document_switched_off_costs_no_model_call_and_comes_back(server: Client):
    uri = opened(server, "off.py")
    assert (await ask(server, uri))["items"]
    server.notify("tabd/setEnabled", {"enabled": False, "uri": uri})
    before = await settled(server)
    for n in range(5):  # typing on, asking as an editor does
        server.change(uri, 2 + n, {"start": END, "end": END}, "x")
        answer = await ask(server, uri, position={"line": 4, "character": 11 + n})
        assert answer == {"items": [], "tabd": {"reason": "disabled"}}
    await asyncio.sleep(0.3)  # a prefetch or warm-up would have been queued by now
    after = await stats(server)
    assert after["model_calls"] == before["model_calls"]
    assert after["context"]["warmups"]["started"] == before["context"]["warmups"]["started"]
    assert after["last"]["reason"] == "disabled" and after["refusals"]["disabled"] >= 5
    other = opened(server, "still-on.py")  # the switch was for one document
    assert (await ask(server, other))["items"]
    server.notify("tabd/setEnabled", {"enabled": True, "uri": uri})
    back = await ask(server, uri, position={"line": 4, "character": 16})
    assert [i["insertText"] for i in back["items"]] == [SUGGESTION]


async def test_switched_off_everywhere_then_a_snooze_that_ends_by_itself(server: Client):
    uri = opened(server, "snooze.py")
    server.notify("tabd/setEnabled", {"enabled": False})
    assert (await ask(server, uri))["tabd"]["reason"] == "disabled"
    server.notify("tabd/setEnabled", {"enabled": True})
    assert (await ask(server, uri))["items"]
    server.notify("tabd/setEnabled", {"enabled": False, "minutes": 0.02})  # 1.2 s
    assert (await ask(server, uri))["tabd"]["reason"] == "disabled"
    deadline = time.monotonic() + 60
    while not (await ask(server, uri))["items"]:
        assert time.monotonic() < deadline, "the snooze never ended"
        await asyncio.sleep(0.1)


@pytest.mark.parametrize("bad", [{"enabled": False, "minutes": 0}, {"enabled": False, "minutes": -1},
                                 {"enabled": False, "minutes": "5"}, {"enabled": "no"}, {"enabled": False, "uri": 3}])
async def test_bad_switches_are_reported_and_ignored(server: Client, bad):
    uri = opened(server, f"bad-{len(server.notifications)}.py")
    seen = len(warnings(server))
    server.notify("tabd/setEnabled", bad)
    deadline = time.monotonic() + 30
    while len(warnings(server)) == seen:
        assert time.monotonic() < deadline, "no warning"
        await asyncio.sleep(0.02)
    assert "tabd/setEnabled" in warnings(server)[-1] and "ignored" in warnings(server)[-1]
    assert (await ask(server, uri))["items"]  # still on


async def test_excluded_documents_answer_excluded_and_a_bad_glob_is_reported(server: Client):
    assert "[oops" in await until_warning(server, "exclude glob ignored")
    rules = {".env": ".env* (the default deny list)", "deploy/id_rsa": "id_rsa* (the default deny list)",
             "server.pem": "*.pem (the default deny list)", "my_secrets.py": "*secret* (the default deny list)",
             "aws-credentials.json": "*credentials* (the default deny list)", "db.local.py": "*.local.py (exclude)"}
    for name in rules:
        uri = opened(server, name)
        answer = await ask(server, uri)
        # the reason, and the rule that excludes the file in words (the clients show it)
        assert answer["items"] == [] and answer["tabd"]["reason"] == "excluded", name
        assert answer["tabd"]["rule"] == rules[name], name
    assert (await stats(server))["last"]["reason"] == "excluded"
    near = opened(server, "near.py")
    assert (await ask(server, near))["items"]
    context = await server.call("tabd/context", {"uri": near})
    assert context["sources"] and not any(s["path"].endswith((".env", "id_rsa", ".pem", "secrets.py"))
                                          for s in context["sources"])


async def test_the_server_says_it_takes_set_enabled():
    client = Client("test-capabilities")
    await client.start([sys.executable, "-m", "tabd.daemon", "serve", "--backend", "copy"], env=dict(os.environ))
    try:
        result = await asyncio.wait_for(client.call("initialize", {"processId": os.getpid(), "rootUri": None,
                                                                   "capabilities": {}}), 60)
        assert result["capabilities"]["experimental"]["tabd"]["setEnabled"] is True
    finally:
        await client.stop()


async def test_the_recording_keeps_an_excluded_document_without_its_text(server: Client):
    uri = opened(server, ".env.production", "TOKEN=zzz-recorded-never\n")
    server.change(uri, 2, {"start": {"line": 1, "character": 0}, "end": {"line": 1, "character": 0}}, "MORE=yyy-never")
    await ask(server, uri)
    path: Path = server.record_path  # type: ignore[attr-defined]
    deadline = time.monotonic() + 30
    while uri not in path.read_text():
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    text = path.read_text()
    assert "zzz-recorded-never" not in text and "yyy-never" not in text
    events = [json.loads(line) for line in text.splitlines()[1:]]
    assert [e for e in events if e.get("uri") == uri and e["op"] != "move"] == [
        {"t": e["t"], "op": "open", "uri": uri, "language": "python", "excluded": True}
        for e in events if e.get("uri") == uri and e["op"] == "open"]


async def test_an_engine_that_cannot_be_reached_says_unreachable():
    from support.ports import free_port

    client = Client("test-unreachable")
    await client.start([sys.executable, "-m", "tabd.daemon", "serve", "--backend", "openai", "--url",
                        f"http://127.0.0.1:{free_port()}", "--fim", "tabd", "--debounce-ms", "0"], env=dict(os.environ))
    try:
        await client.initialize()
        uri = opened(client, "far.py")
        assert await ask(client, uri) == {"items": [], "tabd": {"reason": "unreachable"}}
        assert (await stats(client))["last"]["reason"] == "unreachable"
    finally:
        await client.stop()
