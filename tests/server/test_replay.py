"""Replay: the simulated user's choices (pure), replay through an oracle LSP server, and through `tabd serve`."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tabd.daemon.sessions.driver import ReplayOptions
from tabd.daemon.sessions.replayer import acceptable, run_replay, typed_ahead
from tabd.daemon.sessions.format import read_session, write_session
from tabd.daemon.sessions.typist import TypingStyle, typed_session
from tabd.daemon.sessions.measure import Measurements, format_table
from tabd.daemon.telemetry.host import CpuTicks, host_summary, parse_cpu_line, read_ticks

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "predictor" / "samples" / "inventory.py"
HAS_SERVER = importlib.util.find_spec("tabd.daemon.commands.serve") is not None

# An LSP server that knows the file being typed: it suggests the rest of the target's line,
# "prefetches" the suggestion after it, and answers tabd/stats like tabd serve does.
FAKE_SERVER = '''
import asyncio, os
from lsprotocol import types
from pygls.lsp.server import LanguageServer

TARGET = open(os.environ["FAKE_TARGET"], encoding="utf-8").read()
DIE_AFTER = int(os.environ.get("FAKE_DIE_AFTER", "0"))
DELAY = float(os.environ.get("FAKE_DELAY", "0.01"))
NOTHING_AFTER_TAB = os.environ.get("FAKE_NOTHING_AFTER_TAB") == "1"  # the state a Tab reaches: known, nothing to add
server = LanguageServer("fake-tabd", "0", text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
state = {"n": 0, "last": None, "cache": {}, "accepts": [], "dismissed": 0, "cancelled": 0, "closed": {},
         "sources": {k: 0 for k in ("cache", "typed", "inflight", "model", "none")}}


def suggest(prefix):
    if not TARGET.startswith(prefix):
        return ""
    rest = TARGET[len(prefix):]
    end = rest.find("\\n", 1)
    return rest if end < 0 else rest[:end]


@server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
async def inline(ls, params):
    state["n"] += 1
    if DIE_AFTER and state["n"] >= DIE_AFTER:
        os._exit(7)
    doc = ls.workspace.get_text_document(params.text_document.uri)
    prefix = doc.source[:doc.offset_at_position(params.position)]
    if prefix in state["cache"]:
        source, text = "cache", state["cache"][prefix]
    else:
        try:
            await asyncio.sleep(DELAY)
        except asyncio.CancelledError:
            state["cancelled"] += 1
            raise
        source, text = "model", suggest(prefix)
    origin = source
    if text:
        state["cache"][prefix + text] = "" if NOTHING_AFTER_TAB else suggest(prefix + text)
    else:
        source = "none"
    state["sources"][source] += 1
    state["last"] = {"source": source, "origin": origin, "latency_ms": 0.0}
    if not text:
        return types.InlineCompletionList(items=[])
    return types.InlineCompletionList(items=[types.InlineCompletionItem(
        insert_text=text, range=types.Range(start=params.position, end=params.position),
        command=types.Command(title="accept", command="tabd.accept", arguments=[f"i{state['n']}"]))])


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def closed(ls, params):
    state["closed"][params.text_document.uri] = ls.workspace.get_text_document(params.text_document.uri).source


@server.command("tabd.accept")
def accept(ls, *args):
    state["accepts"].append(list(args))


@server.command("tabd.dismiss")
def dismiss(ls, *args):
    state["dismissed"] += 1


@server.feature("tabd/stats")
def stats(ls, params):
    return {"sources": state["sources"], "last": state["last"], "model": "fake", "accepts": state["accepts"],
            "dismissed": state["dismissed"], "cancelled": state["cancelled"], "closed": list(state["closed"].items())}


server.start_io()
'''


def check_counts(summary: dict) -> None:
    assert summary["accepted"] <= summary["shown"] <= summary["requests"]
    assert summary["after_accept"]["from_cache"] <= summary["after_accept"]["requests"] <= summary["requests"]
    assert 0.0 <= summary["after_accept"]["hit_rate"] <= 1.0
    assert 0.0 <= summary.get("saved_share", 0.0) <= 1.0
    assert sum(summary["sources"].values()) <= summary["requests"]
    for group in summary["latency_ms"].values():
        assert 0 <= group["p50"] <= group["p95"] <= group["p99"]
    for key in ("sessions", "requests", "shown", "accepted", "typed_chars", "accepted_chars"):
        assert isinstance(summary[key], int) and summary[key] >= 0


@pytest.fixture()
def fake_server(tmp_path):
    path = tmp_path / "fake_server.py"
    path.write_text(FAKE_SERVER)
    return [sys.executable, str(path)]


def make_session(tmp_path: Path, source: Path = SAMPLE, seed: int = 3, spans: int = 2, cps: float = 8.0,
                 max_chars: int = 400) -> Path:
    language, events = typed_session([str(source)], seed=seed, spans=spans, max_chars=max_chars,
                                     style=TypingStyle(cps=cps))
    out = tmp_path / f"session-{seed}.jsonl"
    write_session(out, events, language)
    return out


# ---------------------------------------------------------------- the user's choices


def _insert(t, line, ch, text):
    pos = {"line": line, "character": ch}
    return {"t": t, "op": "change", "uri": "u", "range": {"start": pos, "end": dict(pos)}, "text": text}


def test_typed_ahead_follows_insertions_at_the_cursor():
    events = [_insert(0, 0, 0, "a"), _insert(1, 0, 1, "b"), {"t": 1.5, "op": "accept", "uri": "u", "id": "x"},
              _insert(2, 0, 2, "\n    "), _insert(3, 1, 4, "r"), _insert(4, 0, 0, "jump")]
    text, boundaries = typed_ahead(events, 0, "u", {"line": 0, "character": 0})
    assert text == "ab\n    r"
    assert boundaries == {1: 1, 2: 2, 7: 4, 8: 5}


def test_acceptable_full_partial_and_boundaries():
    ahead = "return total + tax\n"
    b = {i: i for i in range(1, len(ahead) + 1)}
    assert acceptable("return total", ahead, b) == (12, False)
    assert acceptable("return total * 2", ahead, b) == (12, True)      # the first words match
    assert acceptable("x", ahead, b) == (0, False)
    assert acceptable("r", ahead, b) == (0, False)                      # too short to bother
    # newline+indent arrives as one keystroke: a suggestion ending inside it is cut to a word
    ahead2 = "x = 1\n    y"
    b2 = {1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 10: 6, 11: 7}
    assert acceptable("x = 1\n  ", ahead2, b2) == (5, True)
    assert acceptable("x = 1\n    y", ahead2, b2) == (11, False)


# ---------------------------------------------------------------- through an oracle server


def test_replay_accepts_and_serves_after_accept_from_cache(tmp_path, fake_server, monkeypatch):
    monkeypatch.setenv("FAKE_TARGET", str(SAMPLE))
    session = read_session(make_session(tmp_path))
    m = run_replay([session], ReplayOptions(speed=0, think_ms=0, progress=False, server_command=fake_server,
                                            request_timeout=30, startup_timeout=60))
    summary = m.summary()
    assert m.error is None, m.error
    check_counts(summary)
    assert summary["accepted"] > 0 and summary["accepted_chars"] > 0
    assert summary["after_accept"]["requests"] == summary["accepted"]
    assert summary["after_accept"]["from_cache"] > 0
    assert summary["sources"]["cache"] >= summary["after_accept"]["from_cache"]
    # latency_ms.after_accept_from_memory: the after-accept requests answered from memory, and only those
    assert len(m.after_accept_memory_ms) == summary["after_accept"]["from_cache"]
    assert 0 < summary["latency_ms"]["after_accept_from_memory"]["p50"] <= summary["latency_ms"]["after_accept"]["p99"]
    server = summary["server"]
    assert len(server["accepts"]) == summary["accepted"]
    for item_id, info in server["accepts"]:
        assert item_id.startswith("i") and info["chars"] > 0 and isinstance(info["partial"], bool)
    # accepting only exactly what the person typed keeps the document equal to the recording
    assert dict(server["closed"])[SAMPLE.resolve().as_uri()] == SAMPLE.read_text()
    assert summary["typed_chars"] + summary["accepted_chars"] >= session.changes() // 2
    if read_ticks() is not None:  # Linux: the host's CPU over the run, to tell its stalls from the daemon's
        host = summary["host"]
        assert 0 < host["busy_share"] <= 1 and 0 <= host["steal_share"] <= 1, host


def test_a_tab_answered_from_memory_with_nothing_to_add_counts_as_memory(tmp_path, fake_server, monkeypatch):
    # the daemon says "none" for an empty answer and where it came from in last.origin: a prefetch that found nothing
    # to add after the Tab answered it from memory, as in a fleet on llama-cpp-python (17 of 84 Tabs)
    monkeypatch.setenv("FAKE_TARGET", str(SAMPLE))
    monkeypatch.setenv("FAKE_NOTHING_AFTER_TAB", "1")
    session = read_session(make_session(tmp_path))
    m = run_replay([session], ReplayOptions(speed=0, think_ms=0, progress=False, server_command=fake_server,
                                            request_timeout=30, startup_timeout=60))
    aa = m.summary()["after_accept"]
    assert m.error is None, m.error
    assert aa["empty"] > 0 and "none" not in aa["sources"]  # (a Tab the fake has no state for is a model answer)
    assert aa["sources"]["cache"] == aa["from_cache"] == aa["empty"]


def test_host_cpu_shares_read_from_proc_stat():
    # user nice system idle iowait irq softirq steal guest guest_nice
    before = parse_cpu_line("cpu  1000 100 200 5000 50 0 50 100 30 0")
    after = parse_cpu_line("cpu  1300 100 260 5500 50 0 70 120 40 0")
    assert before == CpuTicks(total=6500, busy=1450, steal=100)  # guest is inside user: not counted twice
    run = after - before
    assert run == CpuTicks(total=900, busy=400, steal=20)
    assert host_summary(run)["busy_share"] == round(400 / 900, 4)
    assert host_summary(run)["steal_share"] == round(20 / 900, 4)
    assert parse_cpu_line("cpu0 1 2 3 4 5") is None and parse_cpu_line("cpu  a b c d e") is None
    assert parse_cpu_line("cpu  10 0 10 80") is None  # too few columns to tell idle from iowait
    assert parse_cpu_line("cpu  10 0 10 70 10") == CpuTicks(total=100, busy=20, steal=0)  # no steal column: none
    assert host_summary(CpuTicks()) is None
    # two replays' hosts add up, and the table says how much the hypervisor took
    parts = [Measurements(), Measurements()]
    parts[0].host = CpuTicks(1000, 100, 10)
    parts[1].host = CpuTicks(3000, 500, 30)
    summary = Measurements.merged(parts).summary()
    assert summary["host"]["busy_share"] == 0.15 and summary["host"]["steal_share"] == 0.01
    assert "host CPU busy / stolen" in format_table(summary) and "1.00%" in format_table(summary)
    assert "host" not in Measurements().summary()


def test_replay_cancels_requests_the_user_typed_past(tmp_path, fake_server, monkeypatch):
    monkeypatch.setenv("FAKE_TARGET", str(SAMPLE))
    monkeypatch.setenv("FAKE_DELAY", "0.4")
    session = read_session(make_session(tmp_path, spans=1, cps=20, max_chars=80))
    m = run_replay([session], ReplayOptions(speed=4, progress=False, server_command=fake_server, startup_timeout=60))
    summary = m.summary()
    assert m.error is None, m.error
    check_counts(summary)
    assert summary["cancelled"] > 0
    assert summary["server"]["cancelled"] > 0  # $/cancelRequest reached the server's handler


def test_replay_cli_reports_a_dying_daemon(tmp_path, fake_server):
    session = make_session(tmp_path)
    env = dict(__import__("os").environ, FAKE_TARGET=str(SAMPLE), FAKE_DIE_AFTER="10")
    proc = subprocess.run([sys.executable, "-m", "tabd.daemon", "replay", str(session), "--json", "--speed", "inf",
                           "--server-cmd", " ".join(fake_server)], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 3, proc.stderr
    summary = json.loads(proc.stdout)
    assert "exited with code 7" in summary["error"] and "exited with code 7" in proc.stderr
    assert summary["requests"] >= 9
    check_counts(summary)
    assert "Traceback" not in proc.stderr


def test_replay_cli_rejects_bad_sessions_without_traceback(tmp_path):
    bad = tmp_path / "future.jsonl"
    bad.write_text('{"tabd_session": 9}\n')
    proc = subprocess.run([sys.executable, "-m", "tabd.daemon", "replay", str(bad), "--json"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "version 9 is newer" in proc.stderr and "Traceback" not in proc.stderr


def test_replay_table_output(tmp_path, fake_server):
    session = make_session(tmp_path, spans=1)
    env = dict(__import__("os").environ, FAKE_TARGET=str(SAMPLE))
    proc = subprocess.run([sys.executable, "-m", "tabd.daemon", "replay", str(session), "--speed", "0",
                           "--think-ms", "0", "--server-cmd", " ".join(fake_server)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "after-accept requests" in proc.stdout and "p50" in proc.stdout


@pytest.mark.slow
def test_bench_replay_section_shape(tmp_path, fake_server):
    env = dict(__import__("os").environ, FAKE_TARGET=str(SAMPLE))
    proc = subprocess.run([sys.executable, "-m", "tabd.daemon", "bench", "replay", "--json", "--replay-think-ms", "0",
                           "--replay-server-cmd", " ".join(fake_server)],
                          capture_output=True, text=True, timeout=180, env=env)
    assert proc.returncode == 0, proc.stderr
    section = json.loads(proc.stdout)["replay"]
    for name in ("naive", "full"):
        check_counts(section[name])
        assert section[name]["sessions"] == 1
    assert section["naive"]["requests"] == section["full"]["requests"]  # the oracle is deterministic
    assert section["after_accept_p50_ratio"] is None or section["after_accept_p50_ratio"] > 0
    assert section["all_p50_ratio"] > 0
    accepting = section["accepting"]  # the session that types what the model suggests
    for name in ("naive", "full"):
        check_counts(accepting[name])
        assert accepting[name]["accepted"] > 0
        assert accepting[name]["after_accept"]["requests"] == accepting[name]["accepted"]


# ---------------------------------------------------------------- through tabd serve (the real server)

needs_server = pytest.mark.skipif(not HAS_SERVER, reason="tabd serve is not in this build yet")


def repeating_file(tmp_path: Path) -> Path:
    block = textwrap.dedent('''\
        def handler_{n}(request):
            value = request.get("value", 0)
            return {{"status": "ok", "value": value + 1}}


        ''')
    path = tmp_path / "repeat.py"
    path.write_text("".join(block.format(n=n) for n in range(12)))
    return path


SERVE_FLAGS = ["--max-new-tokens", "8"]  # short answers keep the model's share of these tests small


def serve_options(**kw) -> ReplayOptions:
    base = dict(speed=0, think_ms=0, progress=False, server_args=list(SERVE_FLAGS), request_timeout=120,
                startup_timeout=180, check_sync=True)
    base.update(kw)
    return ReplayOptions(**base)


@pytest.mark.slow
@needs_server
def test_record_then_replay_round_trip(tmp_path):
    typed = read_session(make_session(tmp_path, seed=1, spans=1, max_chars=50))
    recorded_path = tmp_path / "recorded.jsonl"
    m1 = run_replay([typed], serve_options(server_args=SERVE_FLAGS + ["--record", str(recorded_path)]))
    assert m1.error is None, m1.error
    s1 = m1.summary()
    check_counts(s1)
    assert s1["sync"] == {"checked": 1, "mismatches": 0}
    assert s1["requests"] > 0 and s1["requests"] == s1["answered"]
    assert sum(s1["sources"].values()) == s1["answered"], m1.warnings

    recorded = read_session(recorded_path)  # what `tabd serve --record` wrote is a valid session
    assert not recorded.warnings
    ops = [e["op"] for e in recorded.events]
    assert ops[0] == "open" and ops[-1] == "close"
    assert ops.count("change") == s1["keystrokes"] + s1["accepted"]  # each Tab is one change
    assert ops.count("accept") == s1["accepted"]
    final = {}
    from tabd.daemon.sessions.format import apply_change
    for e in recorded.events:
        if e["op"] == "open":
            final[e["uri"]] = e["text"]
        elif e["op"] == "change":
            final[e["uri"]] = apply_change(final[e["uri"]], e["range"], e["text"])
    assert final[SAMPLE.resolve().as_uri()] == SAMPLE.read_text()

    m2 = run_replay([recorded], serve_options())
    assert m2.error is None, m2.error
    s2 = m2.summary()
    check_counts(s2)
    assert s2["sync"] == {"checked": 1, "mismatches": 0}
    assert s2["typed_chars"] + s2["accepted_chars"] == s1["typed_chars"] + s1["accepted_chars"]


@pytest.mark.slow
@needs_server
def test_replay_accepts_matching_suggestions_and_serves_after_accept_from_cache(tmp_path, fixture_model):
    # The person types exactly what the fixture model suggests (` total()` after "def", then
    # `\n total()` after each accept), so every suggestion matches and is accepted.
    source = repeating_file(tmp_path)
    text = source.read_text()
    continuations = [" total()", "\n total()", "\n total()"]
    typed = "def" + "".join(continuations[:3])
    uri = source.resolve().as_uri()
    lines = text.split("\n")
    events = [{"t": 0.0, "op": "open", "uri": uri, "language": "python", "text": text}]
    pos = {"line": len(lines) - 1, "character": len(lines[-1])}
    from tabd.daemon.sessions.format import advance
    for k, ch in enumerate(typed):
        events.append({"t": round(0.1 * (k + 1), 3), "op": "change", "uri": uri,
                       "range": {"start": dict(pos), "end": dict(pos)}, "text": ch})
        pos = advance(pos, ch)
    events.append({"t": round(0.1 * (len(typed) + 2), 3), "op": "close", "uri": uri})
    path = tmp_path / "matching.jsonl"
    write_session(path, events)
    # the replay's accept and after-accept path on the model's own, known suggestions: no copy candidates and no
    # gating (the fixture model is unsure which word a typed "d" begins, so gating rightly hides its first guesses)
    flags = SERVE_FLAGS + ["--model", fixture_model, "--lookup-min-p", "0", "--min-confidence", "0"]
    m = run_replay([read_session(path)], serve_options(think_ms=3000, server_args=flags))
    assert m.error is None, m.error
    s = m.summary()
    print(json.dumps({k: v for k, v in s.items() if k != "server"}), continuations)
    check_counts(s)
    assert s["sync"] == {"checked": 1, "mismatches": 0}
    assert s["full_accepts"] >= 3, s  # each of the three continuations, whole
    assert s["accepted_chars"] >= sum(map(len, continuations)) and s["typed_chars"] <= len("def")
    assert s["typed_chars"] + s["accepted_chars"] == len(typed)
    assert s["after_accept"]["requests"] == s["accepted"]
    assert s["after_accept"]["from_cache"] >= 1, s
    assert s["sources"]["cache"] >= 1
    aa, model = s["latency_ms"]["after_accept"]["p50"], s["latency_ms"]["model"]["p50"]
    assert model == 0 or aa < model


@pytest.mark.slow
@needs_server
def test_replay_reports_a_model_that_does_not_load(tmp_path):
    bad = tmp_path / "model"
    bad.mkdir()
    (bad / "config.json").write_text("{}")
    session = make_session(tmp_path, spans=1, max_chars=50)
    proc = subprocess.run([sys.executable, "-m", "tabd.daemon", "replay", str(session), "--json", "--no-progress",
                           "--model", str(bad)], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 3
    assert "could not load its model" in json.loads(proc.stdout)["error"]
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
@needs_server
def test_typed_repeating_file_gets_accepts_served_from_memory(tmp_path):
    # The person retypes the last of twelve identical handlers: even the tiny embedded model
    # continues the pattern, so some suggestions are what they type next (whole or first words).
    from tabd.daemon.sessions.typist import Span, file_events

    import random

    source = repeating_file(tmp_path)
    text = source.read_text()
    lines = text.split("\n")
    start = max(i for i, line in enumerate(lines) if line.startswith("def handler_"))
    events, _ = file_events(text, source.resolve().as_uri(), "python", [Span(start, start + 2, "body")],
                            random.Random(0), TypingStyle(typo_rate=0.0))
    path = tmp_path / "repeat.jsonl"
    write_session(path, events)
    m = run_replay([read_session(path)], serve_options(think_ms=1500, server_args=[]))
    assert m.error is None, m.error
    s = m.summary()
    print(json.dumps({k: v for k, v in s.items() if k != "server"}))
    check_counts(s)
    assert s["sync"] == {"checked": 1, "mismatches": 0}
    assert s["accepted"] >= 1, s
    assert s["after_accept"]["requests"] == s["accepted"]
    assert s["after_accept"]["from_cache"] >= 1, s


@pytest.mark.slow
@needs_server
def test_typing_through_a_suggestion_counts_it_once_among_distinct_suggestions(tmp_path, fixture_model):
    # The fixture model suggests ` total()` after "def"; the person types ` totally`, so each of ` tota`
    # keeps the suggestion showing (type-through), and the Tab user never takes it.
    source = repeating_file(tmp_path)
    text = source.read_text()
    uri = source.resolve().as_uri()
    lines = text.split("\n")
    from tabd.daemon.sessions.format import advance
    events = [{"t": 0.0, "op": "open", "uri": uri, "language": "python", "text": text}]
    pos = {"line": len(lines) - 1, "character": len(lines[-1])}
    for k, ch in enumerate("def totally"):
        events.append({"t": round(0.1 * (k + 1), 3), "op": "change", "uri": uri,
                       "range": {"start": dict(pos), "end": dict(pos)}, "text": ch})
        pos = advance(pos, ch)
    path = tmp_path / "through.jsonl"
    write_session(path, events)
    m = run_replay([read_session(path)], serve_options(accept="tab", server_args=SERVE_FLAGS + [
        "--model", fixture_model, "--min-confidence", "0"]))
    assert m.error is None, m.error
    s = m.summary()
    assert s["accepted"] == 0 and s["sources"]["typed"] >= 4, s  # " ", "t", "o", "t", "a" typed into it
    assert s["distinct_shown"] == s["shown"] - s["sources"]["typed"] and s["distinct_shown"] >= 1
    assert s["acceptance_rate_distinct"] == 0.0


# ---------------------------------------------------------------- sessions typed as VS Code types


def _vscode_session(tmp_path: Path, source: Path, seed: int = 1, spans: int = 2, max_chars: int = 120) -> Path:
    language, events = typed_session([str(source)], seed=seed, spans=spans, max_chars=max_chars, editor="vscode")
    out = tmp_path / f"{source.stem}-vscode.jsonl"
    write_session(out, events, language)
    return out


@pytest.mark.slow
@needs_server
def test_vscode_sessions_stay_in_sync_with_the_server_and_report_prompt_reuse(tmp_path):
    body = ('def greet(name):\n    msg = "see (it) \'here\'"\n    return (msg, {"🎉": [name, f"{name!r}"]})\n\n\n'
            'def other():\n    return greet("x")\n')
    crlf, mixed, eof = tmp_path / "crlf.py", tmp_path / "mixed.py", tmp_path / "eof.py"
    crlf.write_bytes(body.replace("\n", "\r\n").encode())
    mixed.write_bytes(body.replace("\n", "\r\n", 3).encode())
    eof.write_bytes(b'x = 1\nprint(x, "end")')  # the pair closes at the very end of the file
    sessions = [_vscode_session(tmp_path, p, spans=s) for p, s in ((crlf, 2), (mixed, 2), (eof, 1))]
    uri = "file:///w/hand.py"  # by hand: moves where no closer is, and one past the line's end (skipped)
    hand = [{"t": 0.0, "op": "open", "uri": uri, "language": "python", "text": "x = \n"},
            {"t": 0.1, "op": "change", "uri": uri, "range": {"start": {"line": 0, "character": 4},
                                                             "end": {"line": 0, "character": 4}},
             "text": "()", "cursor": {"line": 0, "character": 5}},
            {"t": 0.2, "op": "move", "uri": uri, "position": {"line": 1, "character": 0}},
            {"t": 0.3, "op": "move", "uri": uri, "position": {"line": 0, "character": 40}},
            {"t": 0.4, "op": "move", "uri": uri, "position": {"line": 0, "character": 6}},
            {"t": 0.5, "op": "close", "uri": uri}]
    write_session(tmp_path / "hand.jsonl", hand)
    sessions.append(tmp_path / "hand.jsonl")
    proc = subprocess.run([sys.executable, "-m", "tabd.daemon", "replay", *map(str, sessions), "--json", "--speed", "0",
                           "--check-sync", "--no-progress", *SERVE_FLAGS], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    s = json.loads(proc.stdout.strip().splitlines()[-1])
    check_counts(s)
    assert s["sync"] == {"checked": 4, "mismatches": 0}, s.get("sync")
    assert s["moves"] >= 3  # the hand-written two and the typists' overtypes
    assert "move event skipped: position outside the document" in proc.stderr
    reuse = s["prompt_reuse"]["keystroke"]
    assert reuse["requests"] > 0 and 0 <= reuse["p10"] <= reuse["p50"] <= 1
    assert reuse["requests"] <= s["sources"]["model"] + s["sources"]["none"]  # a model run may end with nothing shown


@pytest.mark.slow
@needs_server
def test_the_tab_user_accepts_a_suggestion_across_a_pair_the_editor_closed(tmp_path, fixture_model):
    # The fixture model suggests ` total()` after "def"; the person types `def total()` in VS Code, where `(`
    # inserts `()` and `)` overtypes it: the suggestion is what they type next, accepted whole, and the
    # document stays the recorded one.
    from tabd.daemon.sessions.editor import Buffer

    source = repeating_file(tmp_path)
    text = source.read_text()
    uri = source.resolve().as_uri()
    b = Buffer(text, cursor=len(text))
    events = [{"t": 0.0, "op": "open", "uri": uri, "language": "python", "text": text}]
    for k, ch in enumerate("def total()"):
        events.append(b.type(ch).event(round(0.1 * (k + 1), 3), uri))
    events.append({"t": 2.0, "op": "close", "uri": uri})
    assert [e["op"] for e in events].count("move") == 1
    path = tmp_path / "pair.jsonl"
    write_session(path, events)
    flags = SERVE_FLAGS + ["--model", fixture_model, "--lookup-min-p", "0", "--min-confidence", "0"]
    m = run_replay([read_session(path)], serve_options(think_ms=3000, accept="tab", server_args=flags))
    assert m.error is None, m.error
    s = m.summary()
    assert s["sync"] == {"checked": 1, "mismatches": 0}
    assert s["full_accepts"] >= 1 and s["accepted_chars"] == len(" total()"), s
    assert s["typed_chars"] == len("def")
    assert s["keystrokes_saved"] == len(" total()") - 1  # 8 keys (the overtyping `)` among them) for one Tab


def test_replay_asks_from_where_the_editor_leaves_the_cursor(tmp_path, fake_server, monkeypatch):
    # The oracle suggests only where the text before the cursor is the file's: between `(` and the `)` VS Code
    # inserted, not after the `)`. With accepts out of reach, every keystroke (overtypes too) gets its answer shown.
    monkeypatch.setenv("FAKE_TARGET", str(SAMPLE))
    language, events = typed_session([str(SAMPLE)], seed=3, spans=3, style=TypingStyle(typo_rate=0.0), editor="vscode")
    path = tmp_path / "vscode.jsonl"
    write_session(path, events, language)
    session = read_session(path)
    assert any("cursor" in e for e in session.events)
    m = run_replay([session], ReplayOptions(speed=0, think_ms=0, progress=False, server_command=fake_server,
                                            min_accept_chars=10**6, startup_timeout=60))
    assert m.error is None, m.error
    s = m.summary()
    assert s["moves"] == sum(e["op"] == "move" for e in session.events) > 0
    assert s["keystrokes"] == session.keystrokes() == s["requests"]
    assert s["shown"] == s["answered"] == s["requests"]
    assert s["prompt_reuse"]["keystroke"]["requests"] == 0  # the oracle keeps no log: nothing to read, and no error
