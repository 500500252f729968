"""Content exclusion end to end: a `.env` open beside a Python file, `tabd serve --backend openai` against a real HTTP
server on 127.0.0.1 (tests/support/stub_model.py, which keeps every request's bytes), with --log and --record.

Not one byte of the secret may reach a request body, the Python file's context, the log or the recording. The
other open file's marker must reach the remote server (as context), so the test shows that context does flow there
and would carry the secret if the `.env` were not excluded.
"""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest

from support.stub_model import stub_model
from tabd.lsp.client import Client

SECRET = "hunter2-S3CR3T-e91f4c7a"
MARKER = "visible-CANARY-5b2d"
ENV = f"DATABASE_PASSWORD={SECRET}\nDATABASE_HOST=db.internal\n"
NOTES = f'DATABASE_HOST = "db.internal"\nDATABASE_PASSWORD = "{MARKER}"\n\n\ndef connect_database(host, password):\n    pass\n'
APP = "import os\n\n\ndef database_settings():\n    host = DATABASE_HOST\n    password = DATABASE_PASSWORD\n    "


async def ask(client: Client, uri: str, line: int, character: int) -> dict:
    future = client.inline_completion(uri, {"line": line, "character": character}, invoked=True)
    return await asyncio.wait_for(asyncio.wrap_future(future), 60)


def at(line: int, character: int) -> dict:
    return {"start": {"line": line, "character": character}, "end": {"line": line, "character": character}}


@pytest.mark.asyncio
async def test_a_dot_env_never_reaches_the_remote_engine_the_context_the_log_or_the_recording(tmp_path):
    log, record = tmp_path / "serve.jsonl", tmp_path / "session.jsonl"
    with stub_model("answer") as (handler, url):
        handler.answer = "return host, password"
        client = Client("test-exclusion")
        await client.start([sys.executable, "-m", "tabd.daemon", "serve", "--backend", "openai", "--url", url,
                            "--fim", "tabd", "--debounce-ms", "0", "--context-idle-ms", "50", "--log", str(log),
                            "--record", str(record)], env=dict(os.environ))
        try:
            await client.initialize()
            env, notes, app = "file:///w/.env", "file:///w/notes.py", "file:///w/app.py"
            client.open(env, "dotenv", 1, ENV)
            client.open(notes, "python", 1, NOTES)
            client.open(app, "python", 1, APP)
            client.change(env, 2, at(2, 0), f"API_KEY={SECRET[::-1]}\n")  # typed in the .env too
            assert await ask(client, env, 2, 0) == {"items": [], "tabd": {"reason": "excluded",
                                                                          "rule": ".env* (the default deny list)"}}
            client.change(app, 2, at(6, 4), "r")
            first = await ask(client, app, 6, 5)
            client.change(app, 3, at(6, 5), "eturn ")
            await asyncio.sleep(0.2)  # past the context's idle pause: it is picked again with everything open
            second = await ask(client, app, 6, 11)
            assert first["items"] or second["items"], (first, second)
            context = await client.call("tabd/context", {"uri": app})
            await asyncio.wait_for(client.shutdown(), 30)
        finally:
            await client.stop()
        sent = b"\n".join(handler.raw)
    assert handler.bodies, "the remote engine was never asked"
    assert MARKER.encode() in sent, "the other open file never reached the remote engine: the test shows nothing"
    chunks = "".join(c["text"] for c in context["chunks"])
    assert MARKER in chunks and all(s["path"] != ".env" for s in context["sources"])
    for where, data in (("request bodies", sent), ("context", repr(context).encode()), ("log", log.read_bytes()),
                        ("recording", record.read_bytes())):
        for secret in (SECRET, SECRET[::-1], "hunter2"):
            assert secret.encode() not in data, f"{secret} in the {where}"
    assert b'"excluded":true' in record.read_bytes().replace(b" ", b"")
    # the recording replays: the excluded document is left out with a note, the rest is typed as recorded
    replay = subprocess.run([sys.executable, "-m", "tabd.daemon", "replay", str(record), "--backend", "copy", "--json",
                             "--speed", "inf"], capture_output=True, text=True, timeout=300)
    assert replay.returncode == 0, replay.stderr
    assert "was excluded when recorded" in replay.stderr and "Traceback" not in replay.stderr
    summary = json.loads(replay.stdout)
    assert summary["sessions"] == 1 and summary["typed_chars"] + summary["accepted_chars"] == len("return ")
