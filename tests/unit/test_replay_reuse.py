"""Prompt reuse in replay's report: read from the server child's log (sessions/serverlog.py), summed up in measure.py."""
from __future__ import annotations

import json

from tabd.daemon.sessions.measure import Measurements, format_table
from tabd.daemon.sessions.serverlog import ModelRun, keystroke_runs, log_in


def _completion(origin="model", after_accept=False, reused=90, prefill=10, **kw):
    return {"ts": 1.0, "event": "completion", "origin": origin, "source": origin, "after_accept": after_accept,
            "reused_tokens": reused, "prefill_tokens": prefill, **kw}


def test_only_keystroke_requests_that_ran_the_model_count(tmp_path):
    log = tmp_path / "serve.jsonl"
    before = [_completion(reused=1, prefill=1)]  # an earlier run appended to the same log
    run = [_completion(reused=900, prefill=3), _completion(reused=40, prefill=860),
           _completion(after_accept=True),            # after a Tab: not a keystroke
           _completion(origin="cache", reused=0, prefill=0),
           _completion(origin="inflight"),
           _completion(reused=0, prefill=0),          # a model answer without a prompt (the copy engine)
           {"event": "prefetch", "outcome": "finished", "reused_tokens": 5, "prefill_tokens": 5}]
    log.write_text("".join(json.dumps(e) + "\n" for e in before))
    start = log.stat().st_size
    with open(log, "a") as fh:
        fh.write("".join(json.dumps(e) + "\n" for e in run) + '{"event": "compl')  # torn by a kill
    assert keystroke_runs(str(log), start) == [ModelRun(900, 3), ModelRun(40, 860)]
    assert keystroke_runs(str(tmp_path / "missing.jsonl")) == []


def test_the_log_flag_is_found_among_serve_flags():
    assert log_in(["--depth", "2", "--log", "a.jsonl"]) == "a.jsonl"
    assert log_in(["--log=b.jsonl", "--model", "m"]) == "b.jsonl"
    assert log_in(["--log", "a", "--log", "c"]) == "c"
    assert log_in(["--model", "m"]) is None


def test_median_and_low_tail_of_reuse_in_the_summary_and_table():
    m = Measurements(keystrokes=10)
    m.keystroke_runs = [ModelRun(99, 1)] * 8 + [ModelRun(10, 90), ModelRun(0, 100)]
    reuse = m.summary()["prompt_reuse"]["keystroke"]
    assert reuse["requests"] == 10 and reuse["p50"] == 0.99 and reuse["p10"] == 0.0
    assert reuse["prefill_tokens"] == 8 + 90 + 100 and reuse["prefill_tokens_p50"] == 1
    assert "keystroke prompt reuse p50 / p10" in format_table(m.summary())
    merged = Measurements.merged([m, m])
    assert merged.summary()["prompt_reuse"]["keystroke"]["requests"] == 20
    empty = Measurements().summary()
    assert empty["prompt_reuse"] == {"keystroke": {"p50": 0.0, "p10": 0.0, "requests": 0, "prefill_tokens": 0,
                                                   "prefill_tokens_p50": 0}}
    assert "prompt reuse" not in format_table(empty)
