"""The protocol's error codes from a real `tabd serve` over stdio: the in-process cases (tests/unit/test_error_codes.py)
end to end, through the real transport, and the server still serves and exits cleanly after them.
"""
from __future__ import annotations

import pytest

from support.inprocess import INLINE, inline_params
from support.rawserver import RawServer


@pytest.mark.slow
def test_real_server_answers_every_failure_path(tmp_path):
    s = RawServer("--max-new-tokens", "4", stderr=tmp_path / "stderr.txt")
    try:
        assert s.call("tabd/stats", {})["error"]["code"] == -32002
        s.initialize({"depth": "deep", "maxNewTokens": 4})
        shown = s.wait_for(lambda m: m.get("method") == "window/showMessage")["params"]
        assert shown["type"] == 2 and "'depth' must be int" in shown["message"]
        cases = [
            ({"jsonrpc": "2.0", "id": 1, "method": INLINE, "params": {"textDocument": {}}}, -32602),
            ({"jsonrpc": "2.0", "id": 2, "method": INLINE, "params": inline_params("file:///never.py")}, -32602),
            ({"jsonrpc": "2.0", "id": 3, "method": "no/such"}, -32601),
            ({"jsonrpc": "2.0", "id": 4, "method": 3}, -32600),
            ({"id": 5, "method": "tabd/stats"}, -32600),
        ]
        for message, code in cases:
            s.send(message)
            assert s.response(message["id"])["error"]["code"] == code, message
        s.notify("$/cancelRequest", {"id": 424242})
        s.alive()
        assert s.shutdown_exit() == 0
    finally:
        s.close()
