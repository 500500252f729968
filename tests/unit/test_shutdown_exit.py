"""shutdown and exit as LSP says, in process: requests after shutdown are refused, no model worker is left behind,
and exit's code says whether shutdown came first. (A real process's exit: tests/server/test_lifecycle.py.)
"""
from __future__ import annotations

import threading

from support.inprocess import InProcess, code_of


async def test_requests_after_shutdown_are_refused_and_exit_says_how(srv: InProcess):
    await srv.initialize()
    srv.request(100, "shutdown")
    assert (await srv.reply(100))["result"] is None
    assert not [t for t in threading.enumerate() if t.name.startswith("tabd-model")]  # no worker left behind
    srv.request(101, "tabd/stats", {})
    assert code_of(await srv.reply(101)) == -32600
    srv.request(102, "shutdown")
    assert code_of(await srv.reply(102)) == -32600
    srv.notify("exit")
    assert srv.exit_codes == [0]


async def test_exit_without_shutdown_is_code_1(srv: InProcess):
    await srv.initialize()
    srv.notify("exit")
    assert srv.exit_codes == [1]
