"""`tabd dashboard`: the JSON figures, bad input, bounded memory, and the HTML in real Chromium.

The synthetic logs below exist only for these tests (the product never
invents data). Browser tests drive Debian's /usr/bin/chromium over the
DevTools protocol on a pipe (--remote-debugging-pipe: fds 3 and 4, NUL-separated
JSON), so they need no websocket client and no extra dependency.

`python tests/server/test_dashboard.py --screenshot docs/report.png [LOG.jsonl...]`
renders a report (a synthetic log when none is given) and saves Chromium's
full-page screenshot.

Over 500 lines: one feature's tests, from a synthetic log through the HTML to a real browser.
"""
from __future__ import annotations

import base64
import fcntl
import json
import math
import os
import random
import re
import resource
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tabd.daemon.telemetry import dashboard, logread
from tabd.daemon.cli import main as tabd_main

CHROMIUM = "/usr/bin/chromium"
T0 = 1764547200.0  # 2025-12-01 00:00 UTC


# -- synthetic logs ------------------------------------------------------

def ev(kind: str, ts: float, **fields) -> dict:
    return {"ts": ts, "event": kind, "v": 1, **fields}


def completion(ts: float, source: str, latency_ms: float, **fields) -> dict:
    base = dict(
        id=f"c{int(ts * 1000)}", doc="a1b2c3", version=1, source=source,
        depth=1 if source in ("cache", "typed", "inflight") else 0,
        latency_ms=latency_ms, queue_ms=0.0, cache_ms=0.01, prefill_ms=0.0, decode_ms=0.0,
        prefill_tokens=0, reused_tokens=0, decode_tokens=0, chars=10, key="000000000000",
        after_accept=False, queue_depth=0,
    )
    base.update(fields)
    return ev("completion", ts, **base)


def write_jsonl(path: Path, events, extra_lines: list[str] = ()) -> Path:
    with open(path, "w", encoding="utf-8") as f:
        for e in events:
            f.write(json.dumps(e) + "\n")
        for line in extra_lines:
            f.write(line)
    return path


def realistic_events(n_keystrokes: int, seed: int = 7, t0: float = T0, depth: int = 2):
    """A person typing with tab: each suggestion is prefetched `depth` deep; hits follow accepts."""
    rng = random.Random(seed)
    ts = t0
    cid = 0
    pending: list[tuple[str, int]] = []  # prefetched keys the next request may hit
    for _ in range(n_keystrokes):
        ts += rng.expovariate(4.0)
        cid += 1
        after_accept = bool(pending) and rng.random() < 0.55
        if after_accept and rng.random() < 0.8:
            key, d = pending.pop(0)
            source = rng.choices(["cache", "typed", "inflight"], [6, 2, 1])[0]
            lat = {"cache": rng.lognormvariate(-1.6, 0.4), "typed": rng.lognormvariate(-1.0, 0.4),
                   "inflight": rng.lognormvariate(3.0, 0.5)}[source]
            yield completion(ts, source, lat, id=f"c{cid}", key=key, depth=d, after_accept=True,
                             queue_depth=rng.randint(0, 2))
        else:
            pending.clear()
            source = "none" if rng.random() < 0.1 else "model"
            prefill = rng.randint(8, 120)
            reused = rng.randint(200, 1500)
            lat = rng.lognormvariate(4.3, 0.45) if source == "model" else rng.lognormvariate(-2.0, 0.3)
            yield completion(
                ts, source, lat, id=f"c{cid}", key=f"{rng.getrandbits(48):012x}", after_accept=after_accept,
                queue_ms=rng.random(), prefill_ms=lat * 0.3, decode_ms=lat * 0.6,
                prefill_tokens=prefill if source == "model" else 0,
                reused_tokens=reused if source == "model" else 0,
                decode_tokens=24 if source == "model" else 0,
                chars=rng.randint(0, 40) if source == "model" else 0,
                queue_depth=rng.randint(0, 3),
            )
            for d in range(1, depth + 1):
                key = f"{rng.getrandbits(48):012x}"
                yield ev("prefetch", ts + 0.001 * d, outcome="started", depth=d, key=key, doc="a1b2c3")
                fate = rng.random()
                if fate < 0.75:
                    yield ev("prefetch", ts + 0.06 * d, outcome="finished", depth=d, key=key, doc="a1b2c3",
                             prefill_tokens=rng.randint(4, 40), reused_tokens=rng.randint(300, 1500),
                             decode_tokens=24, prefill_ms=4.0, decode_ms=50.0, chars=18,
                             queue_depth=rng.randint(0, 2))
                    pending.append((key, d))
                else:
                    yield ev("prefetch", ts + 0.02, outcome="cancelled" if fate < 0.9 else "preempted",
                             depth=d, key=key, doc="a1b2c3")
        fate = rng.random()
        if fate < 0.35:
            yield ev("accept", ts + 0.3, id=f"c{cid}", doc="a1b2c3", chars=rng.randint(3, 30),
                     partial=rng.random() < 0.2)
        elif fate < 0.45:
            yield ev("dismiss", ts + 0.3, id=f"c{cid}", doc="a1b2c3")
        elif fate < 0.47:
            yield ev("cancel", ts + 0.01, id=f"c{cid}", doc="a1b2c3", reason="stale_version")
    yield ev("error", ts + 1, where="predictor", message="CUDA out of memory")


def run_cli(*argv: str, capsys=None) -> tuple[int, str, str]:
    rc = tabd_main(["dashboard", *argv])
    out, err = capsys.readouterr() if capsys else ("", "")
    return rc, out, err


def dashboard_json(capsys, *logs: Path) -> dict:
    rc, out, err = run_cli(*map(str, logs), "--json", capsys=capsys)
    assert rc == 0, err
    return json.loads(out)


# -- figures -------------------------------------------------------------

def test_json_percentiles_are_exact_for_known_latencies(tmp_path, capsys):
    events = [completion(T0 + i, "model", float(i)) for i in range(1, 101)]  # 1..100 ms
    events += [completion(T0 + 200 + i, "cache", i / 100) for i in range(1, 201)]  # 0.01..2.00 ms
    random.Random(3).shuffle(events)  # order must not matter
    r = dashboard_json(capsys, write_jsonl(tmp_path / "a.jsonl", events))
    assert r["events"] == r["completions"] == 300
    assert r["skipped_lines"] == 0
    assert r["percentile_method"] == "exact"
    lat = r["latency_ms"]
    # nearest rank: the smallest value with at least q*n values at or below it
    assert (lat["model"]["p50"], lat["model"]["p95"], lat["model"]["p99"]) == (50.0, 95.0, 99.0)
    assert (lat["cache"]["p50"], lat["cache"]["p95"], lat["cache"]["p99"]) == (1.0, 1.9, 1.98)
    assert lat["model"]["count"] == 100 and lat["model"]["max"] == 100.0 and lat["model"]["mean"] == 50.5
    assert lat["all"]["count"] == 300
    assert lat["all"]["p50"] == 1.49  # rank 150: cache 0.01..1.49 (149 values) and model 1.0
    assert lat["all"]["p99"] == 97.0  # rank 297
    assert lat["typed"] == {"count": 0, "p50": None, "p95": None, "p99": None, "mean": None, "max": None}
    assert r["sources"] == {"cache": 200, "typed": 0, "inflight": 0, "model": 100, "none": 0}
    assert r["hit_rate"]["all"] == round(200 / 300, 4)


def test_json_hit_rates_prefetch_waste_tokens_and_accepts(tmp_path, capsys):
    t = T0
    events = [
        ev("prefetch", t, outcome="started", depth=1, key="aaaaaaaaaaaa"),
        ev("prefetch", t + 1, outcome="finished", depth=1, key="aaaaaaaaaaaa", prefill_tokens=10, reused_tokens=90, decode_tokens=5),
        ev("prefetch", t + 1, outcome="started", depth=2, key="bbbbbbbbbbbb"),
        # a hit on B before B finished does not make B useful
        completion(t + 2, "cache", 0.5, key="bbbbbbbbbbbb", depth=2),
        ev("prefetch", t + 3, outcome="finished", depth=2, key="bbbbbbbbbbbb", prefill_tokens=1, reused_tokens=9),
        ev("prefetch", t + 3, outcome="started", depth=1, key="cccccccccccc"),
        ev("prefetch", t + 4, outcome="finished", depth=1, key="cccccccccccc"),
        ev("prefetch", t + 4, outcome="started", depth=2, key="dddddddddddd"),
        ev("prefetch", t + 5, outcome="cancelled", depth=2, key="dddddddddddd"),
        ev("prefetch", t + 5, outcome="preempted", depth=1, key="eeeeeeeeeeee"),
        # A used by a later cache hit; C's key shows up only on a model answer: still wasted
        completion(t + 6, "cache", 0.3, key="aaaaaaaaaaaa", depth=1, after_accept=True, id="x1"),
        completion(t + 7, "model", 80.0, key="cccccccccccc", after_accept=True, prefill_tokens=30,
                   reused_tokens=70, decode_tokens=8, id="x2", chars=0),
        completion(t + 8, "typed", 0.4, key="ffffffffffff", depth=1, id="x3"),
        completion(t + 9, "inflight", 20.0, key="ffffffffffff", depth=2, id="x4", after_accept=True),
        completion(t + 10, "none", 0.1, chars=0, id="x5"),
        ev("accept", t + 11, id="x1", chars=10, partial=False),
        ev("accept", t + 12, id="x3", chars=4, partial=True),
        ev("dismiss", t + 13, id="x4"),
        ev("cancel", t + 14, id="x9", reason="stale_version"),
        ev("error", t + 15, where="predictor", message="boom"),
    ]
    r = dashboard_json(capsys, write_jsonl(tmp_path / "b.jsonl", events))
    assert r["completions"] == 6
    assert r["sources"] == {"cache": 2, "typed": 1, "inflight": 1, "model": 1, "none": 1}
    assert r["hit_rate"]["all"] == round(4 / 6, 4)
    assert r["hit_rate"]["by_type"] == {"cache": round(2 / 6, 4), "typed": round(1 / 6, 4), "inflight": round(1 / 6, 4)}
    assert r["hit_rate"]["by_depth"] == {"1": 0.3333, "2": 0.3333}
    assert r["hit_rate"]["after_accept"] == {"requests": 3, "hits": 2, "hit_rate": round(2 / 3, 4)}
    p = r["prefetch"]
    assert (p["started"], p["finished"], p["cancelled"], p["preempted"]) == (4, 3, 1, 1)
    assert (p["used"], p["wasted"]) == (1, 2)
    assert p["by_depth"]["1"]["used"] == 1 and p["by_depth"]["1"]["wasted"] == 1
    assert p["by_depth"]["2"]["wasted"] == 1 and p["by_depth"]["2"]["cancelled"] == 1
    assert r["tokens"]["foreground"] == {
        "calls": 1, "prefill": 30, "reused": 70, "decode": 8, "reuse_ratio": 0.7,
        "mean_prefill": 30.0, "mean_reused": 70.0,
    }
    assert r["tokens"]["prefetch"]["calls"] == 3 and r["tokens"]["prefetch"]["prefill"] == 11
    assert r["tokens"]["prefetch"]["reused"] == 99 and r["tokens"]["prefetch"]["decode"] == 5
    a = r["accept"]
    assert (a["accepts"], a["full"], a["partial"], a["chars"], a["dismisses"]) == (2, 1, 1, 14, 1)
    assert a["shown"] == 4 and a["accept_rate"] == 0.5
    assert a["by_source"] == {"cache": 1, "typed": 1}
    assert r["cancel"] == {"total": 1, "by_reason": {"stale_version": 1}}
    assert r["errors"] == {"total": 1, "by_where": {"predictor": 1}}
    assert r["event_counts"] == {"completion": 6, "prefetch": 9, "accept": 2, "dismiss": 1, "cancel": 1, "error": 1}
    assert r["time"]["duration_s"] == 15.0


def test_typed_hit_credits_the_prefetch_named_in_from_key(tmp_path, capsys):
    events = [
        ev("prefetch", T0, outcome="started", depth=1, key="aaaaaaaaaaaa"),
        ev("prefetch", T0 + 1, outcome="finished", depth=1, key="aaaaaaaaaaaa"),
        ev("prefetch", T0 + 1, outcome="started", depth=1, key="bbbbbbbbbbbb"),
        ev("prefetch", T0 + 2, outcome="finished", depth=1, key="bbbbbbbbbbbb"),
        # the user typed into suggestion A: the request's own key differs from A's
        completion(T0 + 3, "typed", 0.4, key="cccccccccccc", from_key="aaaaaaaaaaaa"),
        completion(T0 + 4, "typed", 0.4, key="dddddddddddd"),  # no from_key: credits nothing
    ]
    r = dashboard_json(capsys, write_jsonl(tmp_path / "t.jsonl", events))
    assert (r["prefetch"]["used"], r["prefetch"]["wasted"]) == (1, 1)


# Lines as `tabd serve --log` wrote them (a replay on this project's model), extra fields and all.
CORE_LINES = r'''
{"ts":1796094564.894438,"event":"prefetch","v":1,"outcome":"started","depth":1,"key":"2fd6b062706f","doc":"9ba173b298ba"}
{"ts":1796094564.89477,"event":"completion","v":1,"id":"1","doc":"9ba173b298ba","version":1,"source":"model","origin":"model","depth":0,"latency_ms":2017.96,"queue_ms":4.772,"prefill_ms":1006.606,"decode_ms":992.842,"prefill_tokens":997,"reused_tokens":0,"decode_tokens":48,"chars":144,"key":"f2fade77cfd6","after_accept":false,"queue_depth":2}
{"ts":1796094565.149408,"event":"dismiss","v":1,"id":"1","doc":"9ba173b298ba","known":true}
{"ts":1796094565.237246,"event":"prefetch","v":1,"outcome":"cancelled","depth":1,"key":"f9b3c50df1c0","doc":"9ba173b298ba"}
{"ts":1796094566.778048,"event":"prefetch","v":1,"outcome":"finished","depth":1,"key":"2fd6b062706f","doc":"9ba173b298ba","prefill_tokens":708,"reused_tokens":162,"decode_tokens":48,"prefill_ms":836.219,"decode_ms":1096.539,"chars":282,"queue_depth":0}
{"ts":1796094590.267894,"event":"completion","v":1,"id":"12","doc":"9ba173b298ba","version":12,"source":"typed","origin":"typed","depth":0,"latency_ms":0.186,"queue_ms":0.0,"prefill_ms":0.0,"decode_ms":0.0,"prefill_tokens":0,"reused_tokens":0,"decode_tokens":0,"chars":237,"key":"fc913d6239f2","after_accept":false,"queue_depth":0}
{"ts":1796094605.391547,"event":"accept","v":1,"id":"12","doc":"9ba173b298ba","chars":3,"partial":true,"known":true}
'''


def test_lines_the_core_writes_are_understood(tmp_path, capsys):
    log = tmp_path / "core.jsonl"
    log.write_text(CORE_LINES.lstrip(), encoding="utf-8")
    r = dashboard_json(capsys, log)
    assert r["events"] == 7 and r["skipped_lines"] == 0
    assert r["sources"] == {"cache": 0, "typed": 1, "inflight": 0, "model": 1, "none": 0}
    assert r["latency_ms"]["model"]["p50"] == 2017.96 and r["latency_ms"]["typed"]["p50"] == 0.186
    assert r["hit_rate"]["by_depth"] == {"0": 0.5}
    assert (r["prefetch"]["started"], r["prefetch"]["finished"], r["prefetch"]["cancelled"]) == (1, 1, 1)
    assert r["prefetch"]["wasted"] == 1
    assert r["tokens"]["foreground"]["prefill"] == 997 and r["tokens"]["prefetch"]["reused"] == 162
    assert r["accept"] == {"accepts": 1, "full": 0, "partial": 1, "chars": 3, "dismisses": 1, "shown": 2,
                           "accept_rate": 0.5, "by_source": {"typed": 1}}
    assert r["model_phases_ms"]["prefill"]["p50"] == pytest.approx(1006.606, rel=0.005)


def test_several_logs_are_merged(tmp_path, capsys):
    a = write_jsonl(tmp_path / "a.jsonl", [completion(T0 + i, "cache", 1.0) for i in range(10)])
    b = write_jsonl(tmp_path / "b.jsonl", [completion(T0 + 3600 + i, "model", 100.0) for i in range(10)])
    r = dashboard_json(capsys, a, b)
    assert r["files"] == [str(a), str(b)]
    assert r["sources"]["cache"] == r["sources"]["model"] == 10
    assert r["latency_ms"]["all"]["p50"] == 1.0 and r["latency_ms"]["all"]["p95"] == 100.0


def test_realistic_log_report_is_consistent(tmp_path, capsys):
    log = write_jsonl(tmp_path / "real.jsonl", realistic_events(3000))
    out = tmp_path / "report.html"
    rc, stdout, err = run_cli(str(log), "-o", str(out), "--json", capsys=capsys)
    assert rc == 0, err
    r = json.loads(stdout)
    assert r["events"] == r["lines"] and r["skipped_lines"] == 0
    assert sum(r["sources"].values()) == r["completions"]
    p = r["prefetch"]
    assert p["used"] + p["wasted"] == p["finished"]
    assert p["started"] == p["finished"] + p["cancelled"] + p["preempted"]
    lat = r["latency_ms"]
    assert lat["cache"]["p99"] < lat["model"]["p50"]
    for name in ("all", "cache", "typed", "inflight", "model"):
        assert lat[name]["p50"] <= lat[name]["p95"] <= lat[name]["p99"] <= lat[name]["max"]
    text = out.read_text(encoding="utf-8")
    assert text.count("<div class='chart'") == 8
    assert not re.search(r"<(script|link)[^>]+(src|href)=['\"](?!data:)", text)  # plotly inlined (a data: favicon): opens offline
    assert "Plotly.newPlot" in text


# -- bad input -----------------------------------------------------------

def test_bad_lines_are_counted_not_fatal(tmp_path, capsys):
    good = [completion(T0 + i, "cache", 0.5) for i in range(5)]
    log = write_jsonl(tmp_path / "bad.jsonl", good, extra_lines=[
        "\n",  # blank: formatting, not counted
        "not json at all\n",
        "\xff\xfe binary\n",
        "[1, 2, 3]\n",
        "\"a string\"\n",
        json.dumps(ev("completion", T0, source="cache", latency_ms=1.0) | {"v": 2}) + "\n",
        json.dumps(ev("teleport", T0)) + "\n",
        json.dumps(ev("completion", T0, source="warp", latency_ms=1.0)) + "\n",
        json.dumps(ev("completion", T0, source="cache", latency_ms="fast")) + "\n",
        json.dumps(ev("completion", T0, source="cache", latency_ms=-1)) + "\n",
        json.dumps({"event": "completion", "source": "cache", "latency_ms": 1.0}) + "\n",  # no ts
        json.dumps(ev("completion", 1e300, source="cache", latency_ms=1.0)) + "\n",
        '{"ts": NaN, "event": "dismiss", "v": 1}\n',
        json.dumps(ev("prefetch", T0, outcome="exploded")) + "\n",
        '{"ts": 1, "event": "completion", "v": 1} trailing\n',
        '{"ts": 1764547200.5, "event": "comple',  # torn last line, no newline
    ])
    with open(log, "ab") as f:
        f.write(b"\n\x00\x01\x02\x9c garbage bytes\n")
    rc, out, err = run_cli(str(log), "--json", "-o", str(tmp_path / "r.html"), capsys=capsys)
    assert rc == 0
    assert "Traceback" not in err
    r = json.loads(out)
    assert r["events"] == 5
    assert r["skipped"] == {"not_json": 5, "not_object": 2, "future_version": 1, "unknown_event": 1, "bad_fields": 7}
    assert r["skipped_lines"] == 16
    assert r["lines"] == 21
    assert "skipped 16 of 21 lines" in err and "1 future version" in err
    html_text = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "Skipped 16 of 21 lines" in html_text


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=8,
)
field_values = {
    "ts": st.one_of(st.floats(), st.integers(), st.just(T0), st.text(max_size=3)),
    "event": st.sampled_from([*logread.EVENTS, "other", ""]),
    "v": st.one_of(st.just(1), st.integers(-2, 3), st.text(max_size=2)),
    "source": st.sampled_from([*logread.SOURCES, "x"]),
    "outcome": st.sampled_from([*logread.OUTCOMES, "x"]),
    "latency_ms": st.one_of(st.floats(), st.integers()),
    "depth": json_values, "key": json_values, "from_key": json_values, "id": json_values,
    "chars": json_values, "partial": json_values, "queue_depth": json_values,
    "prefill_tokens": json_values, "reused_tokens": json_values, "reason": json_values, "where": json_values,
}
event_like = st.fixed_dictionaries({}, optional=field_values)
lines = st.one_of(
    event_like.map(lambda d: json.dumps(d)),
    json_values.map(json.dumps),
    st.binary(max_size=40).map(lambda b: b.decode("latin-1")),
).filter(lambda line: "\n" not in line and "\r" not in line)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(lines, max_size=30))
def test_any_input_is_summarised_without_a_traceback(tmp_path, logs):
    log = tmp_path / "fuzz.jsonl"
    log.write_text("".join(line + "\n" for line in logs), encoding="utf-8", errors="surrogateescape")
    summary, stats = dashboard.summarise([str(log)])
    report = dashboard.to_json(summary, stats)
    assert report["events"] + report["skipped_lines"] == report["lines"]
    json.dumps(report, allow_nan=False)
    page = dashboard.to_html(summary, stats, report)
    assert page.startswith("<!DOCTYPE html>")


def test_empty_log_gives_a_report_that_says_so(tmp_path, capsys):
    log = tmp_path / "empty.jsonl"
    log.write_text("")
    out = tmp_path / "r.html"
    rc, stdout, err = run_cli(str(log), "-o", str(out), "--json", capsys=capsys)
    assert rc == 0, err
    r = json.loads(stdout)
    assert r["events"] == 0 and r["completions"] == 0 and r["skipped_lines"] == 0
    assert r["latency_ms"]["all"]["p50"] is None and r["hit_rate"]["all"] is None
    text = out.read_text(encoding="utf-8")
    assert "No events found" in text


def test_log_of_only_future_versions(tmp_path, capsys):
    log = write_jsonl(tmp_path / "future.jsonl", [completion(T0, "cache", 1.0) | {"v": 9}] * 3)
    out = tmp_path / "r.html"
    rc, stdout, err = run_cli(str(log), "-o", str(out), "--json", capsys=capsys)
    assert rc == 0
    r = json.loads(stdout)
    assert r["events"] == 0 and r["skipped"]["future_version"] == 3
    assert "3 future version" in err
    assert "No events found" in out.read_text(encoding="utf-8")


def test_missing_file_is_a_clear_error(tmp_path, capsys):
    good = write_jsonl(tmp_path / "ok.jsonl", [completion(T0, "cache", 1.0)])
    rc, out, err = run_cli(str(good), str(tmp_path / "nope.jsonl"), "--json", capsys=capsys)
    assert rc == 2
    assert out == ""
    assert "nope.jsonl" in err and "No such file" in err and "Traceback" not in err


def test_directory_and_unwritable_output_are_clear_errors(tmp_path, capsys):
    rc, _, err = run_cli(str(tmp_path), "--json", capsys=capsys)
    assert rc == 2 and "cannot read log" in err
    good = write_jsonl(tmp_path / "ok.jsonl", [completion(T0, "cache", 1.0)])
    rc, _, err = run_cli(str(good), "-o", str(tmp_path / "no" / "such" / "dir.html"), capsys=capsys)
    assert rc == 2 and "cannot write" in err


def test_needs_an_output(tmp_path, capsys):
    good = write_jsonl(tmp_path / "ok.jsonl", [completion(T0, "cache", 1.0)])
    rc, _, err = run_cli(str(good), capsys=capsys)
    assert rc == 2 and "-o" in err


def test_html_escapes_what_it_reads(tmp_path, capsys):
    events = [completion(T0, "cache", 1.0), ev("cancel", T0 + 1, reason="</script><script>alert(1)</script>")]
    log = write_jsonl(tmp_path / "x<b>.jsonl", events)
    out = tmp_path / "r.html"
    rc, _, _ = run_cli(str(log), "-o", str(out), capsys=capsys)
    assert rc == 0
    text = out.read_text(encoding="utf-8")
    assert "<script>alert(1)" not in text and "x<b>.jsonl" not in text and "x&lt;b&gt;.jsonl" in text


# -- bounded memory ------------------------------------------------------

def test_sketch_relative_error_is_bounded():
    rng = random.Random(5)
    values = [rng.lognormvariate(1, 2) for _ in range(20000)]
    sk = logread.Sketch()
    for v in values:
        sk.add(v)
    values.sort()
    for q in (0.01, 0.5, 0.9, 0.95, 0.99, 0.999):
        exact = values[math.ceil(q * len(values)) - 1]
        assert abs(sk.quantile(q) - exact) / exact <= logread.Sketch.ALPHA + 1e-9
    assert sk.quantile(1.0) == max(values)
    assert len(sk.counts) < 5000


def test_past_the_exact_cap_percentiles_come_from_the_sketch(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(logread, "EXACT_CAP", 50)
    events = [completion(T0 + i, "model", float(i)) for i in range(1, 1001)]
    r = dashboard_json(capsys, write_jsonl(tmp_path / "a.jsonl", events))
    assert r["percentile_method"].startswith("sketch")
    for q, exact in (("p50", 500), ("p95", 950), ("p99", 990)):
        assert abs(r["latency_ms"]["model"][q] - exact) / exact <= 0.005


def test_time_bins_merge_when_there_are_too_many(monkeypatch):
    monkeypatch.setattr(logread, "MAX_BINS", 16)
    s = logread.LogSummary()
    for minute in range(200):
        s.add(completion(T0 + 60 * minute, "cache", 1.0))
    assert len(s.bins) <= 16
    assert s.bin_s in (60 * 16, 60 * 32)
    assert sum(b.latency.n for b in s.bins.values()) == 200


def test_pending_prefetch_keys_are_capped(monkeypatch):
    monkeypatch.setattr(logread, "PENDING_CAP", 10)
    s = logread.LogSummary()
    for i in range(25):
        s.add(ev("prefetch", T0 + i, outcome="finished", depth=1, key=f"{i:012x}"))
    s.add(completion(T0 + 30, "cache", 0.2, key=f"{24:012x}"))
    assert len(s.pending) <= 10
    report = dashboard.to_json(s, logread.ReadStats())
    assert report["prefetch"]["used"] == 1 and report["prefetch"]["wasted"] == 24


def fast_log(path: Path, n_events: int, seed: int = 1) -> None:
    """A million-line realistic log quickly: templates instead of json.dumps per event."""
    rng = random.Random(seed)
    comp = ('{{"ts": {ts:.6f}, "event": "completion", "v": 1, "id": "c{i}", "doc": "a1b2c3", "version": {i}, '
            '"source": "{src}", "depth": {depth}, "latency_ms": {lat:.4f}, "queue_ms": 0.02, "cache_ms": 0.01, '
            '"prefill_ms": {pf:.3f}, "decode_ms": {dc:.3f}, "prefill_tokens": {pt}, "reused_tokens": {rt}, '
            '"decode_tokens": {dt}, "chars": 17, "key": "{key}", "after_accept": {aa}, "queue_depth": {q}}}\n')
    pre = ('{{"ts": {ts:.6f}, "event": "prefetch", "v": 1, "outcome": "{out}", "depth": {depth}, "key": "{key}", '
           '"doc": "a1b2c3", "prefill_tokens": 12, "reused_tokens": 900, "decode_tokens": 24, "prefill_ms": 4.1, '
           '"decode_ms": 51.0, "chars": 18, "queue_depth": {q}}}\n')
    acc = '{{"ts": {ts:.6f}, "event": "accept", "v": 1, "id": "c{i}", "doc": "a1b2c3", "chars": 12, "partial": false}}\n'
    lats = {"cache": (-1.6, 0.4), "typed": (-1.0, 0.4), "inflight": (3.0, 0.5), "model": (4.3, 0.45), "none": (-2.0, 0.3)}
    sources = ["cache", "cache", "cache", "typed", "inflight", "model", "model", "none"]
    written, i, ts, last_key = 0, 0, T0, "0" * 12
    with open(path, "w", encoding="utf-8") as f:
        while written < n_events:
            i += 1
            ts += rng.expovariate(10)
            src = rng.choice(sources)
            mu, sigma = lats[src]
            model = src == "model"
            hit = src in ("cache", "typed", "inflight")
            key = last_key if hit else f"{rng.getrandbits(48):012x}"
            f.write(comp.format(ts=ts, i=i, src=src, depth=1 if hit else 0, lat=rng.lognormvariate(mu, sigma),
                                pf=30.0 if model else 0.0, dc=60.0 if model else 0.0, pt=90 if model else 0,
                                rt=700 if model else 0, dt=24 if model else 0, key=key,
                                aa="true" if hit else "false", q=i % 3))
            last_key = f"{rng.getrandbits(48):012x}"
            f.write(pre.format(ts=ts + 0.001, out="started", depth=1, key=last_key, q=1))
            f.write(pre.format(ts=ts + 0.05, out="finished", depth=1, key=last_key, q=0))
            f.write(acc.format(ts=ts + 0.2, i=i))
            written += 4


@pytest.mark.slow
def test_a_million_events_in_bounded_time_and_memory(tmp_path):
    log = tmp_path / "million.jsonl"
    fast_log(log, 1_000_000)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(
        # the child reports its own peak RSS as VmHWM, which belongs to its own address space: ru_maxrss
        # (RUSAGE_SELF as much as RUSAGE_CHILDREN) carries across exec the size of the forking pytest
        # process, which has torch loaded once an earlier test imported it
        [sys.executable, "-c", "import sys\nfrom tabd.daemon.cli import main\nrc = main(sys.argv[1:])\n"
         "hwm = open('/proc/self/status').read().split('VmHWM:')[1].split()[0]\n"
         "sys.stderr.write('MAXRSS %s\\n' % hwm)\nsys.exit(rc)",
         "dashboard", str(log), "--json", "-o", str(tmp_path / "r.html")],
        capture_output=True, text=True, timeout=300,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    maxrss_kib = int(proc.stderr.rsplit("MAXRSS ", 1)[1].split()[0])
    print(f"1M events: wall {wall:.1f} s, cpu {cpu:.1f} s, max rss {maxrss_kib / 1024:.0f} MiB")
    assert r["events"] == 1_000_000 and r["skipped_lines"] == 0
    assert cpu < 30, f"{cpu:.1f} s of CPU for 1M events"
    # Peak RSS of the dashboard process: interpreter + plotly + bounded state.
    assert maxrss_kib < 400 * 1024


# -- Chromium --------------------------------------------------------------

class Chromium:
    """Headless Chromium over the DevTools protocol on a pipe (--remote-debugging-pipe)."""

    def __init__(self, exe: str = CHROMIUM, width: int = 1280, height: int = 900) -> None:
        self.profile = tempfile.TemporaryDirectory(prefix="tabd-chromium-")
        to_r, self.w = os.pipe()  # we write commands; chromium reads fd 3
        self.r, from_w = os.pipe()  # chromium writes fd 4; we read
        # Lift the child's ends above 10 so the dup2 onto 3 and 4 cannot clobber them.
        c_in = fcntl.fcntl(to_r, fcntl.F_DUPFD, 10)
        c_out = fcntl.fcntl(from_w, fcntl.F_DUPFD, 10)
        os.close(to_r)
        os.close(from_w)

        def onto_3_and_4() -> None:
            os.dup2(c_in, 3)
            os.dup2(c_out, 4)

        args = [
            exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--disable-background-networking", "--no-first-run", "--no-default-browser-check",
            "--disable-extensions", "--hide-scrollbars", "--mute-audio", "--force-device-scale-factor=1",
            f"--user-data-dir={self.profile.name}", f"--window-size={width},{height}",
            "--remote-debugging-pipe", "about:blank",
        ]
        self.stderr = tempfile.TemporaryFile()
        # close_fds=False: subprocess would otherwise close 3 and 4 after preexec_fn ran;
        # Python's own descriptors are non-inheritable (PEP 446), so nothing else leaks.
        self.proc = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.stderr,
            close_fds=False, preexec_fn=onto_3_and_4,
        )
        os.close(c_in)
        os.close(c_out)
        self.buf = b""
        self.next_id = 0
        self.events: list[dict] = []
        self.session: str | None = None

    def __enter__(self) -> "Chromium":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def send(self, method: str, params: dict | None = None, *, browser: bool = False, timeout: float = 60) -> dict:
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if self.session and not browser:
            msg["sessionId"] = self.session
        os.write(self.w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            for m in self._read(deadline):
                if m.get("id") == self.next_id:
                    if "error" in m:
                        raise RuntimeError(f"{method}: {m['error']}")
                    return m.get("result", {})
                self.events.append(m)

    def _read(self, deadline: float) -> list[dict]:
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("chromium did not answer in time:\n" + self.log())
            ready, _, _ = select.select([self.r], [], [], left)
            if ready:
                chunk = os.read(self.r, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed the DevTools pipe:\n" + self.log())
                self.buf += chunk
        *msgs, self.buf = self.buf.split(b"\0")
        return [json.loads(m) for m in msgs]

    def wait_event(self, method: str, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            for i, m in enumerate(self.events):
                if m.get("method") == method:
                    return self.events.pop(i)
            self.events.extend(self._read(deadline))

    def log(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")[-4000:]

    def open(self, url: str) -> None:
        target = self.send("Target.createTarget", {"url": "about:blank"}, browser=True)["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True}, browser=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable")
        self.send("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired")

    def evaluate(self, expression: str):
        r = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 60):
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value or time.monotonic() > deadline:
                return value
            time.sleep(0.1)

    def js_errors(self) -> list[str]:
        """Uncaught exceptions, console.error/assert calls and error-level log entries so far."""
        self.send("Runtime.evaluate", {"expression": "1"})  # drain what is queued
        out = []
        for m in self.events:
            method, p = m.get("method"), m.get("params", {})
            if method == "Runtime.exceptionThrown":
                d = p["exceptionDetails"]
                out.append(d.get("exception", {}).get("description") or d.get("text", "exception"))
            elif method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(" ".join(str(a.get("value", a.get("description"))) for a in p.get("args", [])))
            elif method == "Log.entryAdded" and p["entry"].get("level") == "error":
                out.append(f"{p['entry'].get('source')}: {p['entry'].get('text')} {p['entry'].get('url', '')}")
        return out

    def screenshot(self, clip: dict | None = None, full_page: bool = False) -> bytes:
        params: dict = {"format": "png"}
        if full_page:
            w, h = self.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
            clip = {"x": 0, "y": 0, "width": w, "height": h}
        if clip:
            params.update(captureBeyondViewport=True, clip={**clip, "scale": 1})
        return base64.b64decode(self.send("Page.captureScreenshot", params)["data"])

    def close(self) -> None:
        try:
            self.send("Browser.close", browser=True, timeout=5)
        except Exception:  # noqa: BLE001 - it may already be gone
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.w)
        os.close(self.r)
        self.stderr.close()
        self.profile.cleanup()


def decode_png(data: bytes) -> tuple[int, int, int, list[bytes]]:
    """(width, height, channels, rows) of an 8-bit PNG: enough to tell a blank page from a chart."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, []
    width = height = channels = 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and interlace == 0, (depth, interlace)
            channels = {0: 1, 2: 3, 4: 2, 6: 4}[color]
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    raw = zlib.decompress(b"".join(idat))
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if f == 1:
            for x in range(channels, stride):
                line[x] = (line[x] + line[x - channels]) & 0xFF
        elif f == 2:
            line = bytearray((a + b) & 0xFF for a, b in zip(line, prev))
        elif f == 3:
            for x in range(stride):
                left = line[x - channels] if x >= channels else 0
                line[x] = (line[x] + ((left + prev[x]) >> 1)) & 0xFF
        elif f == 4:
            for x in range(stride):
                a = line[x - channels] if x >= channels else 0
                b = prev[x]
                c = prev[x - channels] if x >= channels else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[x] = (line[x] + pred) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, channels, rows


def pixel_stats(png: bytes) -> tuple[float, int]:
    """(variance of grey levels, number of distinct colours) over the image."""
    width, height, channels, rows = decode_png(png)
    greys, colours = [], set()
    for row in rows:
        for x in range(0, width * channels, channels):
            px = row[x:x + min(channels, 3)]
            colours.add(px)
            greys.append(sum(px) / len(px))
    mean = sum(greys) / len(greys)
    return sum((g - mean) ** 2 for g in greys) / len(greys), len(colours)


def render_report(tmp_path: Path, events) -> Path:
    log = write_jsonl(tmp_path / "log.jsonl", events)
    out = tmp_path / "report.html"
    assert tabd_main(["dashboard", str(log), "-o", str(out)]) == 0
    return out


needs_chromium = pytest.mark.skipif(
    not (shutil.which("chromium") or os.path.exists(CHROMIUM)),
    reason="needs /usr/bin/chromium (.ci/setup.d/20-chromium.sh installs it)",
)


def test_png_decoder_on_a_known_image():
    def png(width, height, rows, filt):
        raw = b"".join(bytes([filt]) + r for r in rows)
        def chunk(kind, body):
            return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    flat = png(2, 2, [b"\xff" * 6, b"\x00" * 6], 0)  # filter 2 (up) below re-adds the row above
    w, h, c, rows = decode_png(flat)
    assert (w, h, c) == (2, 2, 3) and rows == [b"\xff" * 6, b"\x00" * 6]
    var, colours = pixel_stats(png(2, 2, [b"\x10" * 6, b"\x00" * 6], 2))
    assert colours == 1 and var == 0.0  # both rows decode to grey 0x10


@pytest.mark.browser
@pytest.mark.slow
@needs_chromium
def test_report_renders_in_chromium_without_errors(tmp_path):
    report = render_report(tmp_path, realistic_events(1500))
    with Chromium() as browser:
        browser.open(report.as_uri())
        charts = browser.evaluate("document.querySelectorAll('div.chart').length")
        assert charts == 8
        rendered = browser.wait_for(
            f"document.querySelectorAll('div.chart .main-svg').length >= {charts} && "
            f"document.querySelectorAll('div.chart.js-plotly-plot').length === {charts}"
        )
        assert rendered, browser.evaluate("document.body.innerText.slice(0, 2000)")
        assert browser.js_errors() == []
        # every chart drew data: traces, not just axes
        drawn = browser.evaluate(
            "[...document.querySelectorAll('div.chart')].map(d => d.querySelectorAll('.trace, .point, path.js-line').length)"
        )
        assert all(n > 0 for n in drawn), drawn
        assert "hit rate" in browser.evaluate("document.querySelector('table.summary').innerText")
        # the first chart, clipped: decoding a whole page in pure Python takes too long
        box = browser.evaluate(
            "(() => { const r = document.getElementById('latency-cdf').getBoundingClientRect();"
            " return {x: r.x + window.scrollX, y: r.y + window.scrollY, width: r.width, height: r.height}; })()"
        )
        png = browser.screenshot(clip=box)
    variance, colours = pixel_stats(png)
    assert colours > 20 and variance > 100, (variance, colours)


@pytest.mark.browser
@pytest.mark.slow
@needs_chromium
def test_empty_and_damaged_reports_render_without_errors(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    report = render_report(empty, [])
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    log = write_jsonl(damaged / "log.jsonl", [completion(T0, "model", 80.0)], extra_lines=['{"torn": \n', "\xff\n"])
    damaged_report = damaged / "report.html"
    assert tabd_main(["dashboard", str(log), "-o", str(damaged_report)]) == 0
    with Chromium() as browser:
        browser.open(report.as_uri())
        assert "No events found" in browser.evaluate("document.body.innerText")
        png = browser.screenshot()
        browser.open(damaged_report.as_uri())
        assert browser.wait_for("document.querySelectorAll('div.chart .main-svg').length > 0")
        assert "Skipped 2 of 3 lines" in browser.evaluate("document.getElementById('skipped').innerText")
        assert browser.js_errors() == []
    variance, _ = pixel_stats(png)
    assert variance > 0  # the page shows its message, not nothing


def save_screenshot(out: Path, logs: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        title = ["--title", "tabd latency report"]
        if not logs:
            logs = [str(write_jsonl(tmp / "synthetic.jsonl", realistic_events(6000)))]
            title = ["--title", "tabd latency report (synthetic log from tests/server/test_dashboard.py)"]
        report = tmp / "report.html"
        assert tabd_main(["dashboard", *logs, "-o", str(report), *title]) == 0
        with Chromium(width=1280, height=900) as browser:
            browser.open(report.as_uri())
            browser.wait_for("document.querySelectorAll('div.chart .main-svg').length >= "
                             "document.querySelectorAll('div.chart').length")
            time.sleep(0.5)
            errors = browser.js_errors()
            assert not errors, errors
            out.write_bytes(browser.screenshot(full_page=True))
    print(f"wrote {out}")


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--screenshot":
        save_screenshot(Path(sys.argv[2]), sys.argv[3:])
    else:
        print(__doc__)
