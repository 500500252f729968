"""The log holds no source text: a real `tabd serve --log` typed at writes neither the code, nor the file's name, nor the
suggestions, unless --log-text asks for the suggestions.
"""
from __future__ import annotations

import json

import pytest

from support.rawserver import RawServer


IDENT = "qzx_hidden_ident_7781"


@pytest.mark.slow
@pytest.mark.parametrize("log_text", [False, True])
def test_the_log_holds_no_source_text_unless_asked(tmp_path, log_text):
    log = tmp_path / "tabd.jsonl"
    # --min-confidence 0: what is under test is the log, so every suggestion must be shown and logged
    args = ["--log", str(log), "--max-new-tokens", "6", "--min-confidence", "0"] + (["--log-text"] if log_text else [])
    s = RawServer(*args, stderr=tmp_path / "stderr.txt")
    try:
        s.initialize()
        uri = f"file:///w/{IDENT}.py"
        text = f"def {IDENT}(x):\n    return x\n\n"
        s.open(uri, text)
        line, col, version = 3, 0, 1
        typed = IDENT[:5]
        for ch in typed:  # type it, asking for a suggestion after each key
            version += 1
            s.change(uri, version, [{"range": {"start": {"line": line, "character": col}, "end": {"line": line, "character": col}}, "text": ch}])
            col += 1
            reply = s.inline(uri, line, col, timeout=120)
            assert "result" in reply
        assert s.shutdown_exit() == 0
    finally:
        s.close()
    content = log.read_text()
    events = [json.loads(x) for x in content.splitlines()]
    assert sum(e["event"] == "completion" for e in events) == len(typed)
    assert IDENT not in content and "file:///" not in content
    if log_text:
        assert any("text" in e for e in events if e["event"] == "completion")
    else:
        assert not any("text" in e for e in events)
