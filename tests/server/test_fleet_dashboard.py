"""`tabd dashboard --fleet FLEET.json`: the fleet plot (per-user latency against N, speculation on and off) as inline
SVG, read back from the page served over HTTP on 127.0.0.1, in real Chromium too; bad fleet files say why.

The fleet files here are written in the shape `tabd bench fleet --json` prints (tests/server/test_fleet.py feeds a real
sweep's output through the same checks); their figures are made up for these tests, chosen so the expected points are
known by hand.
"""
from __future__ import annotations

import functools
import http.server
import json
import re
import threading
import time
import urllib.request
from contextlib import contextmanager
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tabd.daemon.cli import main as tabd_main
from test_dashboard import Chromium, needs_chromium, realistic_events, write_jsonl  # noqa: E402

SERIES = ("on-p50", "off-p50", "on-slowest-p50", "off-slowest-p50", "on-p99", "off-p99", "on-hit", "off-hit")


def user(p50: float, p99: float, hit: float, requests: int = 10) -> dict:
    return {"after_accept_hit_rate": hit, "after_accept_requests": requests, "latency_p50_ms": 1.0,
            "latency_p99_ms": 5.0, "model_p50_ms": p50, "model_p99_ms": p99, "keystrokes": 100,
            "foreground_per_keystroke": 0.4, "prefetch_per_keystroke": 1.2 if hit else 0.0, "saved_share": 0.3}


def run_of(users_on: list[dict], users_off: list[dict]) -> dict:
    def fleet(users: list[dict]) -> dict:
        return {"users": users, "slowest_model_p50_ms": max(u["model_p50_ms"] for u in users),
                "min_after_accept_hit_rate": min(u["after_accept_hit_rate"] for u in users), "engine": {}}
    on, off = fleet(users_on), fleet(users_off)
    return {"users": len(users_on), "engine_url": "serve-model", "speculation": on, "no_speculation": off,
            "slowest_model_p50_ratio": round(on["slowest_model_p50_ms"] / off["slowest_model_p50_ms"], 3)}


# N=1, 2, 4; on: p50s 10 | 10, 30 | 10, 20, 30, 80; off: twice those. p99 = 3 x p50. Hit rates on 1.0 | 0.9, 1.0 | ...
SWEEP = [
    run_of([user(10, 30, 1.0)], [user(20, 60, 0.0)]),
    run_of([user(10, 30, 0.9), user(30, 90, 1.0)], [user(20, 60, 0.0), user(60, 180, 0.0)]),
    run_of([user(10, 30, 1.0), user(20, 60, 0.95), user(30, 90, 1.0), user(80, 240, 1.0)],
           [user(20, 60, 0.0), user(40, 120, 0.0), user(60, 180, 0.0), user(160, 480, 0.0)]),
]
EXPECTED = {  # series -> {N: value}
    "on-p50": {1: 10, 2: 20, 4: 25}, "off-p50": {1: 20, 2: 40, 4: 50},
    "on-slowest-p50": {1: 10, 2: 30, 4: 80}, "off-slowest-p50": {1: 20, 2: 60, 4: 160},
    "on-p99": {1: 30, 2: 60, 4: 75}, "off-p99": {1: 60, 2: 120, 4: 150},
    "on-hit": {1: 1.0, 2: 0.9, 4: 0.95}, "off-hit": {1: 0.0, 2: 0.0, 4: 0.0},
}


def fleet_file(tmp_path: Path, sweep: list[dict] = SWEEP, name: str = "fleet.json") -> Path:
    report = dict(sweep[-1])
    if len(sweep) > 1:
        report["sweep"] = sweep
    path = tmp_path / name
    path.write_text(json.dumps({"fleet": report}))  # what `tabd bench fleet --json` prints on its last line
    return path


class Points(HTMLParser):
    """The plot's <circle class='point'> data attributes, the charts' ids, and the fleet error if any."""

    def __init__(self) -> None:
        super().__init__()
        self.points: dict[str, dict[int, float]] = {}
        self.charts: list[str] = []
        self.error = ""
        self._in_error = False
        self.scripts = 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        if tag == "circle" and a.get("class") == "point":
            per_n = self.points.setdefault(a["data-series"], {})
            n = int(a["data-users"])
            assert n not in per_n, f"two points for {a['data-series']} at N={n}"
            per_n[n] = float(a["data-value"])
        elif tag == "svg" and a.get("class") == "fleet-chart":
            self.charts.append(a["id"])
        elif a.get("id") == "fleet-error":
            self._in_error = True
        elif tag == "script":
            self.scripts += 1

    def handle_data(self, data: str) -> None:
        if self._in_error:
            self.error += data

    def handle_endtag(self, tag: str) -> None:
        self._in_error = False


@contextmanager
def served(folder: Path, requests: list[str] | None = None):
    """The folder over real HTTP on 127.0.0.1, as a team would share a report; yields the base URL. `requests`
    collects the paths asked for."""
    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, fmt: str, *args) -> None:
            pass

        def do_GET(self) -> None:
            if requests is not None:
                requests.append(self.path)
            super().do_GET()

    handler = functools.partial(Handler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def page_points(page: Path) -> Points:
    with served(page.parent) as base:
        with urllib.request.urlopen(f"{base}/{page.name}", timeout=30) as r:
            assert r.status == 200
            parsed = Points()
            parsed.feed(r.read().decode("utf-8"))
    return parsed


def expected_points(sweep: list[dict]) -> dict[str, dict[int, float]]:
    """The same figures as the dashboard's, from the fleet JSON by another route: sorted lists, by hand."""
    def median(xs: list[float]) -> float:
        xs = sorted(xs)
        mid = len(xs) // 2
        return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2

    out: dict[str, dict[int, float]] = {s: {} for s in SERIES}
    for run in sweep:
        n = run["users"]
        for key, mode in (("speculation", "on"), ("no_speculation", "off")):
            users = run[key]["users"]
            engine = [u for u in users if u.get("model_requests", 1) > 0]
            p50s = [u["model_p50_ms"] for u in engine if u["model_p50_ms"] is not None]
            p99s = [u["model_p99_ms"] for u in engine if u["model_p99_ms"] is not None]
            hits = [u["after_accept_hit_rate"] for u in users if u["after_accept_requests"]]
            if p50s:
                out[f"{mode}-p50"][n] = median(p50s)
                out[f"{mode}-slowest-p50"][n] = max(p50s)
            if p99s:
                out[f"{mode}-p99"][n] = median(p99s)
            if hits:
                out[f"{mode}-hit"][n] = min(hits)
    return {s: v for s, v in out.items() if v}


def test_expected_points_helper_agrees_with_the_hand_figures():
    assert expected_points(SWEEP) == EXPECTED


def test_a_sweep_draws_one_point_per_n_per_series(tmp_path, capsys):
    out = tmp_path / "fleet.html"
    assert tabd_main(["dashboard", "--fleet", str(fleet_file(tmp_path)), "-o", str(out)]) == 0
    page = page_points(out)
    assert page.charts == ["fleet-p50", "fleet-p99", "fleet-hits"]
    assert page.points == EXPECTED
    assert page.scripts == 0 and "http" not in out.read_text().replace("http://www.w3.org/2000/svg", "")  # no network
    assert page.error == ""


def test_a_single_run_draws_points_not_lines(tmp_path, capsys):
    out = tmp_path / "one.html"
    assert tabd_main(["dashboard", "--fleet", str(fleet_file(tmp_path, SWEEP[1:2])), "-o", str(out)]) == 0
    page = page_points(out)
    assert page.points == {s: {2: v[2]} for s, v in EXPECTED.items()}
    assert "<polyline" not in out.read_text()  # one N: nothing to join


def test_a_sweep_file_that_is_the_fleet_object_itself_is_read_too(tmp_path, capsys):
    path = tmp_path / "bare.json"
    path.write_text(json.dumps({**SWEEP[-1], "sweep": SWEEP}))
    out = tmp_path / "bare.html"
    assert tabd_main(["dashboard", "--fleet", str(path), "-o", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["fleet"]["users"] == [1, 2, 4]
    assert {(p["users"], p["mode"]): p["slowest_p50_ms"] for p in report["fleet"]["points"]}[(4, "on")] == 80
    assert page_points(out).points == EXPECTED


def test_missing_figures_leave_a_gap_not_a_crash(tmp_path, capsys):
    sweep = json.loads(json.dumps(SWEEP))
    for u in sweep[1]["speculation"]["users"]:
        u["model_p50_ms"] = None  # a figure the file does not have
    for u in sweep[2]["no_speculation"]["users"]:
        u.update(model_requests=0, model_p50_ms=0, model_p99_ms=0)  # no request of that run went to the engine
    out = tmp_path / "gap.html"
    assert tabd_main(["dashboard", "--fleet", str(fleet_file(tmp_path, sweep)), "-o", str(out)]) == 0
    points = page_points(out).points
    assert 2 not in points["on-p50"] and points["on-p50"] == {1: 10, 4: 25}
    assert 4 not in points["off-p50"] and 4 not in points["off-p99"] and points["off-hit"][4] == 0.0
    assert points == expected_points(sweep)


@pytest.mark.parametrize("content, says", [
    ("not json {", "is not JSON"),
    ("[1, 2]", "not a tabd bench fleet report"),
    (json.dumps({"fleet": {"users": 2}}), "no 'speculation' figures"),
    (json.dumps({"fleet": {"users": "two", "speculation": {}}}), "no whole number of users"),
    (json.dumps({"fleet": {"sweep": []}}), "not a non-empty list"),
    (json.dumps({"fleet": {"sweep": [SWEEP[0], SWEEP[0]]}}), "appear twice"),
    (b"\xff\xfe\x00garbage", "is not JSON"),
])
def test_a_malformed_fleet_file_is_said_in_the_page_and_on_stderr(tmp_path, capsys, content, says):
    path = tmp_path / "bad.json"
    (path.write_bytes if isinstance(content, bytes) else path.write_text)(content)
    out = tmp_path / "bad.html"
    assert tabd_main(["dashboard", "--fleet", str(path), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err
    page = page_points(out)
    assert says in page.error and page.points == {}


def test_a_missing_fleet_file_is_a_clear_error(tmp_path, capsys):
    out = tmp_path / "none.html"
    assert tabd_main(["dashboard", "--fleet", str(tmp_path / "absent.json"), "-o", str(out), "--json"]) == 2
    captured = capsys.readouterr()
    assert "cannot read fleet file" in captured.err
    assert json.loads(captured.out)["fleet_error"].startswith("cannot read fleet file")


def test_nothing_to_report_is_a_usage_error(tmp_path, capsys):
    assert tabd_main(["dashboard", "-o", str(tmp_path / "x.html")]) == 2
    assert "--fleet" in capsys.readouterr().err


def test_logs_and_a_fleet_file_make_one_report(tmp_path, capsys):
    log = write_jsonl(tmp_path / "log.jsonl", realistic_events(200))
    out = tmp_path / "both.html"
    assert tabd_main(["dashboard", str(log), "--fleet", str(fleet_file(tmp_path)), "-o", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["events"] > 0 and report["fleet"]["users"] == [1, 2, 4]
    text = out.read_text()
    assert "<div class='chart' id='latency-cdf'>" in text
    assert page_points(out).points == EXPECTED


@pytest.mark.browser
@pytest.mark.slow
@needs_chromium
def test_the_fleet_plot_renders_in_chromium_from_127_0_0_1(tmp_path, capsys):
    out = tmp_path / "fleet.html"
    assert tabd_main(["dashboard", "--fleet", str(fleet_file(tmp_path)), "-o", str(out)]) == 0
    requests: list[str] = []
    with served(tmp_path, requests) as base, Chromium() as browser:
        browser.open(f"{base}/fleet.html")
        time.sleep(1)  # what the page would fetch after its load (a favicon, a script) has had time to be asked for
        drawn = browser.evaluate(
            "[...document.querySelectorAll('svg.fleet-chart circle.point')].map(c => {"
            " const r = c.getBoundingClientRect(); return [c.dataset.series, +c.dataset.users, r.width > 0 && r.height > 0]; })"
        )
        assert browser.js_errors() == []
        # higher latency is higher on the page: the p50 of 4 users (80 ms, slowest) sits above 1 user's (10 ms)
        ys = browser.evaluate(
            "Object.fromEntries([...document.querySelectorAll(\"circle[data-series='on-slowest-p50']\")]"
            ".map(c => [c.dataset.users, c.getBoundingClientRect().y]))"
        )
    assert sorted((s, n) for s, n, _ in drawn) == sorted((s, n) for s, v in EXPECTED.items() for n in v)
    assert all(visible for _, _, visible in drawn)
    assert ys["4"] < ys["2"] < ys["1"]
    assert requests == ["/fleet.html"]  # the page and nothing else: no favicon, no script, no CDN


@pytest.mark.parametrize("top", [0.004, 0.99, 1.0, 9.6, 9.8, 10, 73.24, 95.3, 99.99, 1234.5, 1e6])
def test_the_latency_axis_holds_every_point(tmp_path, capsys, top):
    sweep = [run_of([user(top / 2, top, 1.0)], [user(top / 3, top, 0.0)])]
    out = tmp_path / "axis.html"
    assert tabd_main(["dashboard", "--fleet", str(fleet_file(tmp_path, sweep)), "-o", str(out)]) == 0
    text = out.read_text()
    assert page_points(out).points["on-p99"] == {1: top}
    ys = [float(y) for y in re.findall(r"<circle class='point'[^>]* cy='([0-9.]+)'", text)]
    assert ys and all(40 <= y <= 340 - 96 for y in ys), ys  # inside the plot area (TOP .. H - BOTTOM)


def test_logs_with_a_bad_fleet_file_still_report_the_logs(tmp_path, capsys):
    log = write_jsonl(tmp_path / "log.jsonl", realistic_events(200))
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    out = tmp_path / "both.html"
    assert tabd_main(["dashboard", str(log), "--fleet", str(bad), "-o", str(out), "--json"]) == 2
    report = json.loads(capsys.readouterr().out)
    assert report["events"] > 0 and report["fleet"] is None and "no whole number of users" in report["fleet_error"]
    page = page_points(out)
    assert "no whole number of users" in page.error and page.points == {}
    assert "<div class='chart' id='latency-cdf'>" in out.read_text()
