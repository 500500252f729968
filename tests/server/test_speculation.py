"""Speculation that follows the user, through a real `tabd serve` (the copy backend: deterministic, no model):
accepts seen in didChange from a client that never runs tabd.accept, never counted twice, and a depth that follows
measured acceptance (deeper for accept streaks, none for a user who never accepts)."""
from __future__ import annotations

import asyncio
import sys

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from support.lspclient import change, init_params, inline, open_doc, stats, until_stats

pytestmark = pytest.mark.asyncio(loop_scope="function")
LINE = "total = compute_total(items, tax)\n"
SERVE = [sys.executable, "-m", "tabd.daemon", "serve", "--backend", "copy"]


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVE))
async def client(lsp_client: LanguageClient):
    await lsp_client.initialize_session(init_params())
    yield
    await lsp_client.shutdown_session()


async def shown_at(client, uri: str, line: int, char: int) -> types.InlineCompletionItem:
    result = await inline(client, uri, line, char)
    assert result.items, "the copy backend suggests what followed the last occurrence"
    return result.items[0]


async def test_an_accept_seen_only_in_didchange_counts_and_marks_the_next_request(client: LanguageClient):
    uri = "file:///w/a.py"
    open_doc(client, uri, LINE + "total = ")
    item = await shown_at(client, uri, 1, 8)
    assert item.insert_text == "compute_total(items, tax)"
    change(client, uri, 2, 1, 8, item.insert_text)  # Tab in an editor that never runs the item's command
    await shown_at_or_empty(client, uri, 1, 8 + len(item.insert_text))
    s = await until_stats(client, lambda s: s["accepts"] == 1, "one accept from the edit", timeout=10.0)
    assert s["accepts_by"] == {"edit": 1}
    assert s["after_accept"]["requests"] == 1  # the request after it is an after-accept one
    assert s["speculation"]["outcomes"]["all"] == 1


async def shown_at_or_empty(client, uri, line, char):
    return await inline(client, uri, line, char)


async def test_a_client_that_also_runs_tabd_accept_is_counted_once(client: LanguageClient):
    uri = "file:///w/b.py"
    open_doc(client, uri, LINE + "total = ")
    item = await shown_at(client, uri, 1, 8)
    change(client, uri, 2, 1, 8, item.insert_text)
    await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="tabd.accept", arguments=item.command.arguments))
    s = await until_stats(client, lambda s: s["accepts"] >= 1, "an accept", timeout=10.0)
    await asyncio.sleep(0.2)
    s = await stats(client)
    assert s["accepts"] == 1 and s["accepts_by"] == {"edit": 1}


async def test_a_partial_accept_is_seen_as_such_and_typing_is_not_an_accept(client: LanguageClient):
    uri = "file:///w/c.py"
    open_doc(client, uri, LINE + "total = ")
    item = await shown_at(client, uri, 1, 8)
    change(client, uri, 2, 1, 8, "c")  # one keystroke that types into the suggestion: typing, not an accept
    await inline(client, uri, 1, 9)
    change(client, uri, 3, 1, 9, "ompute_total(")  # the next part of it in one edit: a partial accept
    s = await until_stats(client, lambda s: s["accepts"] == 1, "one partial accept", timeout=10.0)
    assert s["speculation"]["outcomes"]["word"] == 1 and s["speculation"]["outcomes"]["all"] == 0


async def test_depth_follows_acceptance(client: LanguageClient):
    """A user who takes every suggestion gets deeper chains; one who never does, fewer prefetches, then none."""
    uri, version = "file:///w/d.py", 1
    open_doc(client, uri, "a = 10\nb = 20\nc = 30\n" * 4)  # two-character suggestions: one would not be shown
    for line in range(12, 20):  # an accept streak: each line's suggestion taken whole, then on to the next line
        version += 1
        change(client, uri, version, line, 0, "abc"[line % 3] + " = ")  # typed: the copy backend then has a line
        item = await shown_at(client, uri, line, 4)
        version += 1
        change(client, uri, version, line, 4, item.insert_text)
        version += 1
        change(client, uri, version, line, 4 + len(item.insert_text), "\n")
    s = await until_stats(client, lambda s: s["speculation"]["user_depth"] > 2, "deeper after a streak", timeout=10.0)
    assert s["speculation"]["outcomes"]["all"] == 8 and s["accepts_by"] == {"edit": 8}
    streak_depth = s["speculation"]["user_depth"]

    version += 1
    change(client, uri, version, 20, 0, "c = ")
    for i in range(60):  # then the user passes over every suggestion
        item = await shown_at(client, uri, 20, 4)
        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="tabd.dismiss", arguments=item.command.arguments))
    s = await stats(client)
    assert s["speculation"]["user_depth"] < streak_depth
    assert s["speculation"]["user_depth"] == 0, s["speculation"]


async def test_a_partial_accept_marks_the_next_request_with_other_files_open(client: LanguageClient):
    """The state a partial accept reaches is remembered under the document's workspace context, as the request
    there is keyed: with another file open (a context that is not empty) it is still an after-accept request."""
    open_doc(client, "file:///w/other.py", "def compute_total(items, tax):\n    return sum(items) * tax\n")
    uri = "file:///w/e.py"
    open_doc(client, uri, LINE + "total = ")
    item = await shown_at(client, uri, 1, 8)
    assert item.insert_text == "compute_total(items, tax)"
    change(client, uri, 2, 1, 8, "compute_total(")  # its first part in one edit: a partial accept
    await until_stats(client, lambda s: s["accepts"] == 1, "one partial accept", timeout=10.0)
    await inline(client, uri, 1, 8 + len("compute_total("))
    s = await stats(client)
    assert s["context"]["active"]["sources"] >= 1  # the other file is in the context
    assert s["after_accept"]["requests"] == 1
