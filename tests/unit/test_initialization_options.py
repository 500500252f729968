"""The client's initializationOptions: a bad value is shown to the user and its default kept; good ones apply quietly.
"""
from __future__ import annotations

import asyncio

import pytest

from support.inprocess import InProcess


@pytest.mark.parametrize("options,expected", [
    ({"depth": "deep"}, ["'depth' must be int"]),
    ({"depth": 99}, ["depth must be between 0 and 8"]),
    ({"maxNewTokens": 0, "prefixChars": True}, ["max_new_tokens must be between", "'prefixChars' must be int"]),
    ({"speculation": "yes"}, ["'speculation' must be bool"]),
    ({"device": "tpu"}, ["device must be auto, cpu or cuda"]),
    ({"threads": 1000}, ["threads must be an integer between 1 and 256"]),
    ({"noSuchOption": 1}, ["unknown option 'noSuchOption'"]),
    ([1, 2], ["initializationOptions must be an object"]),
    ({"log": "/nonexistent-dir/tabd.jsonl"}, ["/nonexistent-dir/tabd.jsonl"]),
])
async def test_bad_initialization_options_are_shown_and_defaults_kept(options, expected):
    srv = InProcess()
    try:
        await srv.initialize(options)
        await asyncio.sleep(0.05)
        shown = [m["params"]["message"] for m in srv.out.sent if m.get("method") == "window/showMessage"]
        for text in expected:
            assert any(text in s for s in shown), (text, shown)
        c = srv.server.config
        assert (c.depth, c.max_new_tokens, c.prefix_chars, c.speculation, c.device, c.threads, c.log) == (
            4, 48, 2400, True, "auto", None, None)  # the depth ceiling's default
    finally:
        srv.close()


async def test_good_initialization_options_apply_quietly(srv: InProcess, tmp_path):
    log = tmp_path / "client.jsonl"
    await srv.initialize({"depth": 1, "maxNewTokens": 8, "speculation": False, "log": str(log)})
    await asyncio.sleep(0.05)
    assert not [m for m in srv.out.sent if m.get("method") == "window/showMessage" and m["params"]["type"] != 1]
    assert (srv.server.config.depth, srv.server.config.max_new_tokens, srv.server.config.speculation) == (1, 8, False)
    assert log.exists() and (log.stat().st_mode & 0o777) == 0o600
