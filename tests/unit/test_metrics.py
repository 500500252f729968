"""tabd.daemon.telemetry.metrics: counters from log events, /metrics over real HTTP, the Grafana board."""
from __future__ import annotations

import json
import re
import socket
import threading
import time
import urllib.request
from importlib import resources

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tabd.daemon.telemetry.metrics import LATENCY_BUCKETS, Metrics
from tabd.daemon.runtime.options import is_loopback, parse_host_port

T0 = 1764547200.0


def completion(source: str, latency_ms: float, **fields) -> dict:
    return {"ts": T0, "event": "completion", "v": 1, "id": "c1", "doc": "d", "version": 1, "source": source,
            "depth": 1 if source in ("cache", "typed", "inflight") else 0, "latency_ms": latency_ms,
            "queue_ms": 0.0, "prefill_tokens": 0, "reused_tokens": 0, "decode_tokens": 0, "chars": 5,
            "key": "0" * 12, "after_accept": False, "queue_depth": 0, **fields}


def prefetch(outcome: str, **fields) -> dict:
    return {"ts": T0, "event": "prefetch", "v": 1, "outcome": outcome, "depth": 1, "key": "1" * 12, "doc": "d", **fields}


def samples(text: str) -> dict[tuple, float]:
    """{(sample name, sorted labels): value} from an exposition-format page."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(m: Metrics, name: str, **labels) -> float:
    v = m.registry.get_sample_value(name, labels)
    return 0.0 if v is None else v


def scrape(port: int, host: str = "127.0.0.1") -> str:
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as r:
        assert r.status == 200
        return r.read().decode()


def test_completion_latency_histogram_by_source():
    m = Metrics()
    m.on_event(completion("cache", 0.3))
    m.on_event(completion("model", 120.0, prefill_tokens=40, reused_tokens=600, decode_tokens=16))
    m.on_event(completion("model", 1500.0))
    assert value(m, "tabd_completion_latency_seconds_count", source="cache") == 1
    assert value(m, "tabd_completion_latency_seconds_bucket", source="cache", le="0.00025") == 0
    assert value(m, "tabd_completion_latency_seconds_bucket", source="cache", le="0.0005") == 1
    assert value(m, "tabd_completion_latency_seconds_bucket", source="model", le="0.1") == 0
    assert value(m, "tabd_completion_latency_seconds_bucket", source="model", le="0.25") == 1
    assert value(m, "tabd_completion_latency_seconds_bucket", source="model", le="2.0") == 2
    assert value(m, "tabd_completion_latency_seconds_sum", source="model") == pytest.approx(1.62)
    assert value(m, "tabd_completions_total", source="model") == 2
    assert LATENCY_BUCKETS[0] == 0.0001 and 2.0 in LATENCY_BUCKETS


def test_hits_by_type_and_depth_prefetch_outcomes_tokens_queue():
    m = Metrics()
    m.on_event(completion("cache", 0.2, depth=1, queue_depth=3))
    m.on_event(completion("cache", 0.2, depth=2))
    m.on_event(completion("typed", 0.4, depth=1))
    m.on_event(completion("inflight", 30.0, depth=40))
    m.on_event(completion("none", 0.1, queue_depth=2))
    for outcome in ("started", "started", "finished", "cancelled", "preempted"):
        m.on_event(prefetch(outcome, prefill_tokens=7, reused_tokens=500, decode_tokens=24, queue_depth=1))
    m.on_event(completion("model", 90.0, prefill_tokens=40, reused_tokens=600, decode_tokens=16, queue_depth=0))
    assert value(m, "tabd_cache_hits_total", type="cache", depth="1") == 1
    assert value(m, "tabd_cache_hits_total", type="cache", depth="2") == 1
    assert value(m, "tabd_cache_hits_total", type="typed", depth="1") == 1
    assert value(m, "tabd_cache_hits_total", type="inflight", depth="16+") == 1
    assert value(m, "tabd_prefetches_total", outcome="started") == 2
    for outcome in ("finished", "cancelled", "preempted"):
        assert value(m, "tabd_prefetches_total", outcome=outcome) == 1
    # tokens only from model work: the finished prefetch and the model completion
    assert value(m, "tabd_model_tokens_total", phase="prefill", request="prefetch") == 7
    assert value(m, "tabd_model_tokens_total", phase="reused", request="prefetch") == 500
    assert value(m, "tabd_model_tokens_total", phase="decode", request="prefetch") == 24
    assert value(m, "tabd_model_tokens_total", phase="prefill", request="foreground") == 40
    assert value(m, "tabd_model_tokens_total", phase="reused", request="foreground") == 600
    assert value(m, "tabd_queue_depth") == 0
    assert sum(value(m, "tabd_completions_total", source=s) for s in ("cache", "typed", "inflight", "model", "none")) == 6


def test_accept_dismiss_cancel_error_and_label_bounds():
    m = Metrics()
    m.on_event({"ts": T0, "event": "accept", "v": 1, "id": "c", "doc": "d", "chars": 12, "partial": False})
    m.on_event({"ts": T0, "event": "accept", "v": 1, "id": "c", "doc": "d", "chars": 3, "partial": True})
    m.on_event({"ts": T0, "event": "dismiss", "v": 1, "id": "c", "doc": "d"})
    for i in range(50):
        m.on_event({"ts": T0, "event": "cancel", "v": 1, "id": "c", "doc": "d", "reason": f"r{i}"})
    m.on_event({"ts": T0, "event": "error", "v": 1, "where": "predictor", "message": "x"})
    assert value(m, "tabd_accepts_total", partial="false") == 1
    assert value(m, "tabd_accepts_total", partial="true") == 1
    assert value(m, "tabd_accepted_chars_total") == 15
    assert value(m, "tabd_dismisses_total") == 1
    assert value(m, "tabd_errors_total", where="predictor") == 1
    reasons = {lbl["reason"] for (name, lbls), _ in samples(_text(m)).items() if name == "tabd_cancels_total"
               for lbl in [dict(lbls)]}
    assert len(reasons) == 21 and "other" in reasons  # bounded label set
    assert value(m, "tabd_cancels_total", reason="other") == 30


def _text(m: Metrics) -> str:
    from prometheus_client import generate_latest
    return generate_latest(m.registry).decode()


def test_bad_events_never_raise_and_future_versions_are_skipped():
    m = Metrics()
    for bad in (None, [], "x", {}, {"event": "completion"}, {"event": "completion", "source": "cache", "latency_ms": "1"},
                {"event": "completion", "source": "warp", "latency_ms": 1}, {"event": "prefetch", "outcome": "boom"},
                {"event": "completion", "source": "cache", "latency_ms": float("nan")}, {"event": "teleport"},
                {"event": "accept", "chars": "many"}):
        m.on_event(bad)
    m.on_event(completion("cache", 0.3) | {"v": 2})
    assert value(m, "tabd_metrics_skipped_events_total", reason="future_version") == 1
    assert value(m, "tabd_metrics_skipped_events_total", reason="unknown_event") >= 2
    assert value(m, "tabd_completions_total", source="cache") == 0


def test_registries_are_independent():
    a, b = Metrics(), Metrics()
    a.on_event(completion("cache", 0.3))
    assert value(a, "tabd_completions_total", source="cache") == 1
    assert value(b, "tabd_completions_total", source="cache") == 0


def test_metrics_scraped_over_http_while_events_flow():
    m = Metrics()
    port = m.start_http("127.0.0.1", 0)
    assert port > 0
    stop = threading.Event()
    fed = {"n": 0}

    def feed():
        while not stop.is_set() and fed["n"] < 20000:
            m.on_event(completion("cache" if fed["n"] % 3 else "model", 0.4 if fed["n"] % 3 else 95.0, queue_depth=fed["n"] % 4))
            m.on_event(prefetch("finished", prefill_tokens=5, reused_tokens=100, decode_tokens=8))
            fed["n"] += 1

    feeder = threading.Thread(target=feed)
    feeder.start()
    try:
        seen = []
        deadline = time.monotonic() + 20
        while len(seen) < 5 and time.monotonic() < deadline:
            s = samples(scrape(port))
            seen.append(sum(v for (name, _), v in s.items() if name == "tabd_completions_total"))
            time.sleep(0.05)
        assert seen == sorted(seen), "counters went backwards between scrapes"
        assert len(seen) == 5
    finally:
        stop.set()
        feeder.join()
    try:
        s = samples(scrape(port))
        n = fed["n"]
        model = len(range(0, n, 3))
        assert s[("tabd_completions_total", (("source", "model"),))] == model
        assert s[("tabd_completions_total", (("source", "cache"),))] == n - model
        assert s[("tabd_completion_latency_seconds_count", (("source", "cache"),))] == n - model
        assert s[("tabd_prefetches_total", (("outcome", "finished"),))] == n
        assert s[("tabd_model_tokens_total", (("phase", "reused"), ("request", "prefetch")))] == 100 * n
        assert ("tabd_queue_depth", ()) in s
        assert ("tabd_cache_hits_total", (("depth", "1"), ("type", "cache"))) in s
    finally:
        m.stop_http()
    with pytest.raises(OSError):
        scrape(port)


def test_start_http_on_a_given_port_and_twice_is_an_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    m = Metrics()
    try:
        assert m.start_http("localhost", free) == free
        assert "tabd_completions_total" in scrape(free)
        with pytest.raises(RuntimeError):
            m.start_http("127.0.0.1", 0)
    finally:
        m.stop_http()


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "::", "example.com", ""])
def test_non_loopback_hosts_are_refused(host):
    m = Metrics()
    with pytest.raises(ValueError, match="non-loopback"):
        m.start_http(host, 0)


def test_remote_allowed_when_asked():
    m = Metrics()
    port = m.start_http("0.0.0.0", 0, allow_remote=True)
    try:
        assert "tabd_completions_total" in scrape(port)
    finally:
        m.stop_http()


def test_ipv6_loopback():
    if not socket.has_ipv6:
        pytest.skip("no IPv6")
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
    except OSError:
        pytest.skip("::1 not available here")
    m = Metrics()
    port = m.start_http("::1", 0)
    try:
        assert "tabd_completions_total" in scrape(port, "[::1]")
    finally:
        m.stop_http()


def test_hostport_parsing():
    assert parse_host_port("127.0.0.1:9464", False, "--metrics") == ("127.0.0.1", 9464)
    assert parse_host_port("[::1]:0", False, "--metrics") == ("::1", 0)
    assert parse_host_port(":9464", False, "--metrics") == ("127.0.0.1", 9464)
    assert parse_host_port("localhost:1", False, "--metrics") == ("localhost", 1)
    assert parse_host_port("0.0.0.0:9464", True, "--metrics") == ("0.0.0.0", 9464)
    for bad in ("9464", "host:", "host:port", "h:70000", "0.0.0.0:9464"):
        with pytest.raises(ValueError, match="--metrics"):
            parse_host_port(bad, False, "--metrics")
    assert is_loopback("127.0.0.5") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("10.0.0.1") and not is_loopback("0.0.0.0")


# -- Grafana board -------------------------------------------------------

def grafana_board() -> dict:
    return json.loads(resources.files("tabd.daemon.telemetry").joinpath("assets/grafana-tabd.json").read_text())


def test_grafana_board_is_importable_and_uses_our_metrics():
    board = grafana_board()
    assert board["uid"] and board["title"] and board["schemaVersion"] >= 36
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    m = Metrics()
    m.on_event(completion("cache", 0.3))
    exported = {name for name, _ in samples(_text(m))}
    exported |= {"tabd_queue_depth", "tabd_accepts_total", "tabd_dismisses_total", "tabd_cancels_total", "tabd_errors_total"}
    ids, titles, exprs = set(), [], []
    for p in board["panels"]:
        assert p["id"] not in ids
        ids.add(p["id"])
        titles.append(p["title"])
        assert p["datasource"]["uid"] == "${datasource}"
        for t in p["targets"]:
            assert t["datasource"]["uid"] == "${datasource}"
            expr = t["expr"]
            exprs.append(expr)
            assert expr.count("(") == expr.count(")") and expr.count("{") == expr.count("}")
            for metric in re.findall(r"\btabd_[a-z_]+", expr):
                assert metric in exported, f"{p['title']}: {metric} is not exported"
    joined = "\n".join(exprs)
    for quantile in ("0.5", "0.95", "0.99"):
        assert f"histogram_quantile({quantile}, sum by (le, source) (rate(tabd_completion_latency_seconds_bucket" in joined
    assert "tabd_cache_hits_total" in joined and "tabd_prefetches_total" in joined
    assert "sum by (phase) (rate(tabd_model_tokens_total" in joined and "tabd_queue_depth" in joined


def test_events_as_the_core_emits_them():
    lines = [
        '{"ts":1796094564.894438,"event":"prefetch","v":1,"outcome":"started","depth":1,"key":"2fd6b062706f","doc":"9ba173b298ba"}',
        '{"ts":1796094564.89477,"event":"completion","v":1,"id":"1","doc":"9ba173b298ba","version":1,"source":"model",'
        '"origin":"model","depth":0,"latency_ms":2017.96,"queue_ms":4.772,"prefill_ms":1006.606,"decode_ms":992.842,'
        '"prefill_tokens":997,"reused_tokens":0,"decode_tokens":48,"chars":144,"key":"f2fade77cfd6","after_accept":false,"queue_depth":2}',
        '{"ts":1796094590.267894,"event":"completion","v":1,"id":"12","doc":"9ba173b298ba","version":12,"source":"typed",'
        '"origin":"typed","depth":0,"latency_ms":0.186,"queue_ms":0.0,"prefill_ms":0.0,"decode_ms":0.0,"prefill_tokens":0,'
        '"reused_tokens":0,"decode_tokens":0,"chars":237,"key":"fc913d6239f2","after_accept":false,"queue_depth":0}',
        '{"ts":1796094605.391547,"event":"accept","v":1,"id":"21","doc":"9ba173b298ba","chars":3,"partial":true,"known":true}',
    ]
    m = Metrics()
    for line in lines:
        m.on_event(json.loads(line))
    assert value(m, "tabd_completions_total", source="model") == 1
    assert value(m, "tabd_completion_latency_seconds_bucket", source="model", le="2.0") == 0  # 2.018 s
    assert value(m, "tabd_completion_latency_seconds_bucket", source="model", le="5.0") == 1
    assert value(m, "tabd_completion_latency_seconds_count", source="model") == 1
    assert value(m, "tabd_cache_hits_total", type="typed", depth="0") == 1
    assert value(m, "tabd_model_tokens_total", phase="prefill", request="foreground") == 997
    assert value(m, "tabd_prefetches_total", outcome="started") == 1
    assert value(m, "tabd_accepts_total", partial="true") == 1
    assert value(m, "tabd_metrics_skipped_events_total", reason="malformed") == 0
