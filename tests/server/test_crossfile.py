"""Cross-file sessions: files opened and never typed in reach the server through `tabd replay`, and its context."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tabd.daemon.bench.crossfile import cross_file_cases, cross_file_session, reuse_figures
from tabd.daemon.sessions.format import read_session, write_session

HELPERS = '''"""Helpers."""


class TokenBucket:
    def __init__(self, capacity):
        self.capacity = capacity
        self.tokens = capacity

    def take_tokens(self, count):
        if count > self.tokens:
            return False
        self.tokens -= count
        return True
'''

USER = '''"""Uses the helpers."""
from .helpers import TokenBucket


def make_bucket(size):
    bucket = TokenBucket(size)
    bucket.take_tokens(1)
    return bucket


def drain(bucket):
    while bucket.take_tokens(1):
        pass
    return bucket.tokens
'''


def make_package(root: Path) -> Path:
    pkg = root / "pkg"
    pkg.mkdir()
    (pkg / "helpers.py").write_text(HELPERS)
    (pkg / "user.py").write_text(USER)
    return pkg


def test_cases_pair_a_module_with_the_siblings_it_imports(tmp_path: Path):
    make_package(tmp_path)
    assert cross_file_cases(4, 1, root=tmp_path, min_chars=100) == []  # pkg is not one of the listed distributions
    import tabd.daemon.bench.crossfile as cf

    saved = cf.PACKAGES
    cf.PACKAGES = ("pkg",)
    try:
        cases = cross_file_cases(4, 1, root=tmp_path, min_chars=100)
    finally:
        cf.PACKAGES = saved
    assert [(t.name, [o.name for o in others]) for t, others in cases] == [("user.py", ["helpers.py"])]


def test_replay_opens_files_never_typed_in_and_their_chunks_reach_the_prompt(tmp_path: Path):
    pkg = make_package(tmp_path)
    language, events = cross_file_session(pkg / "user.py", [pkg / "helpers.py"], seed=3, spans=1)
    helpers_uri = (pkg / "helpers.py").resolve().as_uri()
    assert [e["op"] for e in events if e.get("uri") == helpers_uri] == ["open", "close"]  # never typed in
    session = tmp_path / "cross.jsonl"
    write_session(session, events, language)
    assert not read_session(str(session)).warnings
    log = tmp_path / "serve.jsonl"
    out = subprocess.run([sys.executable, "-m", "tabd.daemon", "replay", str(session), "--speed", "0", "--json",
                          "--no-progress", "--log", str(log)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout)["requests"] > 0
    requests = [json.loads(line) for line in log.read_text().splitlines()]
    requests = [e for e in requests if e.get("event") == "completion" and e.get("origin") == "model"]
    assert requests and all(e["context_chunks"] >= 1 and e["context_tokens"] > 0 for e in requests)
    assert "TokenBucket" not in log.read_text()
    figures = reuse_figures(log)
    assert figures["keystroke"]["runs"] == len([e for e in requests if not e["after_accept"]])


def test_warmup_figures_run_through_a_real_server(tmp_path: Path):
    import asyncio

    from tabd.daemon.bench.crossfile import warmup_figures

    pkg = make_package(tmp_path)
    got = asyncio.run(warmup_figures([(pkg / "user.py", [pkg / "helpers.py"])], [], places=2))
    assert got["places"] == 2 and got["keystroke_ms_p50"] > 0 and got["after_warmup_ms_p50"] > 0


def test_new_code_mode_writes_the_code_after_the_imports_with_nothing_after_the_cursor(tmp_path: Path):
    from tabd.daemon.sessions.format import apply_change

    pkg = make_package(tmp_path)
    user_uri = (pkg / "user.py").resolve().as_uri()
    _, events = cross_file_session(pkg / "user.py", [pkg / "helpers.py"], seed=3, spans=1, max_chars=60, mode="new")
    mine = [e for e in events if e.get("uri") == user_uri]
    assert mine[0]["op"] == "open" and mine[0]["text"] == '"""Uses the helpers."""\nfrom .helpers import TokenBucket'
    text = mine[0]["text"]
    for e in mine:
        if e["op"] == "change":
            lines = text.split("\n")  # every keystroke (and typo fix) ends at the end of the text: nothing after it
            assert e["range"]["end"] == {"line": len(lines) - 1, "character": len(lines[-1])}
            text = apply_change(text, e["range"], e["text"])
    written = USER[len(mine[0]["text"]):]
    assert text == mine[0]["text"] + written[: len(text) - len(mine[0]["text"])]  # the file's own next lines
    assert 40 <= len(text) - len(mine[0]["text"]) <= 60 and "def make_bucket(size):" in text
    import pytest

    with pytest.raises(ValueError, match="edit or new"):
        cross_file_session(pkg / "user.py", [pkg / "helpers.py"], mode="rewrite")


def test_name_figures_count_first_uses_of_names_only_the_open_files_spell():
    from tabd.daemon.bench.crossfile import name_figures

    at = {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}
    events = [{"op": "open", "uri": "file:///h.py", "text": HELPERS},
              {"op": "open", "uri": "file:///u.py", "text": "total = 1\n"}]
    for ch in "b = TokenBucket(3)\nb.take_tokq":  # a typo at the end, taken back
        events.append({"op": "change", "uri": "file:///u.py", "range": at, "text": ch})
    events.append({"op": "change", "uri": "file:///u.py", "range": at, "text": ""})
    for ch in "ens(1)\ntotal = TokenBucket(2)\nbucket_size = 4":
        events.append({"op": "change", "uri": "file:///u.py", "range": at, "text": ch})
    # typed: TokenBucket, take_tokens, total, TokenBucket, bucket_size; first uses the helpers spell: the first two
    # (`total` is in the file already, the second TokenBucket is no first use, bucket_size is nobody's)
    typed = "b = TokenBucket(3)\nb.take_tokens(1)\ntotal = TokenBucket(2)\nbucket_size = 4"
    assert name_figures(events, "file:///u.py") == {"names_typed": 5, "first_use_of_an_open_file_s_name": 2,
                                                    "typed_chars": len(typed), "first_use_rest_chars": 9 + 9,
                                                    "open_line_rest_chars": 0, "context_rest_chars": 9 + 9}


def test_lines_an_open_file_holds_verbatim_count_toward_what_context_could_give():
    from tabd.daemon.bench.crossfile import name_figures, names_ceiling_ratio

    at = {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}
    events = [{"op": "open", "uri": "file:///h.py", "text": HELPERS},
              {"op": "open", "uri": "file:///u.py", "text": "def f(self):\n    return True\n"}]
    for ch in "\n    self.tokens -= count\n    return True\n    self.capacity = capacity":
        events.append({"op": "change", "uri": "file:///u.py", "range": at, "text": ch})
    figures = name_figures(events, "file:///u.py")
    # the helpers hold `self.tokens -= count` and `self.capacity = capacity` (at another indentation): their rest
    # after one typed character, one Tab (18 + 22); `return True` the file already has. The first uses of tokens,
    # count and capacity lie inside those lines, so together they add nothing to the lines.
    assert figures["open_line_rest_chars"] == 18 + 22
    assert figures["first_use_rest_chars"] == 4 + 3 + 6
    assert figures["context_rest_chars"] == 18 + 22
    share = figures["context_rest_chars"] / figures["typed_chars"]
    assert names_ceiling_ratio(figures, 0.5, "context_rest_chars") == round((0.5 + share) / 0.5, 3)
    assert names_ceiling_ratio(figures, 0.5) < names_ceiling_ratio(figures, 0.5, "context_rest_chars")


def test_the_names_ceiling_adds_every_first_use_s_rest_to_what_the_run_without_context_saved():
    from tabd.daemon.bench.crossfile import names_ceiling_ratio

    names = {"typed_chars": 1000, "first_use_rest_chars": 100}
    assert names_ceiling_ratio(names, 0.25) == 1.4  # (0.25 + 0.10) / 0.25
    assert names_ceiling_ratio({"typed_chars": 0}, 0.25) is None and names_ceiling_ratio(names, 0.0) is None
