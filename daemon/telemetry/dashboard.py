"""`tabd dashboard`: one self-contained HTML latency report (or JSON) from daemon logs, and/or a fleet run's plot.

The logs are streamed once through `logread.LogSummary` (bounded memory; see
that module for how percentiles, time bins and wasted prefetches are kept).
The HTML inlines plotly.js, so the report opens offline from a file. `--fleet FLEET.json` (what
`tabd bench fleet --json` prints) adds the fleet view, drawn as inline SVG by `fleet_view`; alone, it is the page.

to_json and figures are over 50 lines because each is one flat list (report fields, charts) read top to bottom.
"""
from __future__ import annotations

import argparse
import datetime as dt
import html
import json
import os
import sys
import time

from tabd.daemon.telemetry import fleet_view
from tabd.daemon.telemetry.logread import (
    HIT_SOURCES,
    OUTCOMES,
    SKIP_REASONS,
    SOURCES,
    LogFileError,
    LogSummary,
    ReadStats,
    read_events,
)

DEFAULT_TITLE = "tabd latency report"
SOURCE_COLORS = {
    "cache": "#2ca02c",
    "typed": "#17becf",
    "inflight": "#9467bd",
    "model": "#d62728",
    "none": "#7f7f7f",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("logs", nargs="*", metavar="LOG.jsonl", help="daemon logs (tabd serve --log)")
    parser.add_argument("--fleet", metavar="FLEET.json",
                        help="plot per-user latency against N from `tabd bench fleet --json` output (with or without logs)")
    parser.add_argument("-o", "--output", metavar="report.html", help="write the HTML report here")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object on stdout")
    parser.add_argument("--title", default=DEFAULT_TITLE, help="report title")


def run(args: argparse.Namespace) -> int:
    if not args.output and not args.json:
        print("tabd dashboard: give -o report.html, --json, or both", file=sys.stderr)
        return 2
    if not args.logs and not args.fleet:
        print("tabd dashboard: give daemon logs (LOG.jsonl...), --fleet FLEET.json, or both", file=sys.stderr)
        return 2
    started = time.perf_counter()
    fleet, fleet_error = read_fleet(args.fleet)
    if not args.logs:
        return write_fleet_only(args, fleet, fleet_error)
    try:
        summary, stats = summarise(args.logs)
    except LogFileError as exc:
        print(f"tabd dashboard: {exc}", file=sys.stderr)
        return 2
    report = to_json(summary, stats)
    if args.fleet:
        report["fleet"] = fleet_view.to_json(fleet) if fleet else None
        report["fleet_error"] = fleet_error
    report["elapsed_s"] = round(time.perf_counter() - started, 3)
    if stats.skipped_lines:
        print(
            f"tabd dashboard: skipped {stats.skipped_lines} of {stats.lines} lines "
            f"({_skipped_text(stats)})",
            file=sys.stderr,
        )
    extra = fleet_view.section(fleet, fleet_error, args.fleet) if args.fleet else ""
    if args.output:
        if not _write(args.output, to_html(summary, stats, report, title=args.title, extra=extra)):
            return 2
        if not args.json:
            print(f"wrote {args.output} ({report['events']} events)", file=sys.stderr)
    if args.json:
        _print_json(report)
    return 2 if fleet_error else 0


def read_fleet(path: str | None) -> tuple[list[fleet_view.FleetPoint] | None, str | None]:
    """(points, None), or (None, why not) said on stderr too: a bad fleet file is reported, the page still written."""
    if path is None:
        return None, None
    try:
        return fleet_view.read_fleet(path), None
    except fleet_view.FleetFileError as exc:
        print(f"tabd dashboard: {exc}", file=sys.stderr)
        return None, str(exc)


def write_fleet_only(args: argparse.Namespace, fleet: list | None, error: str | None) -> int:
    if args.output:
        title = args.title if args.title != DEFAULT_TITLE else "tabd fleet report"
        page = "\n".join(_head(title) + ["</head><body>", f"<h1>{html.escape(title)}</h1>",
                                           fleet_view.section(fleet, error, args.fleet), "</body></html>"])
        if not _write(args.output, page):
            return 2
        if not args.json:
            print(f"wrote {args.output} ({'why the fleet file is not plotted' if error else 'fleet view'})", file=sys.stderr)
    if args.json:
        _print_json({"tabd_dashboard": 1, "fleet": fleet_view.to_json(fleet) if fleet else None, "fleet_error": error})
    return 2 if error else 0


def _write(path: str, text: str) -> bool:
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        print(f"tabd dashboard: cannot write {path}: {exc.strerror or exc}", file=sys.stderr)
        return False
    return True


def _print_json(report: dict) -> None:
    try:
        json.dump(report, sys.stdout)
        sys.stdout.write("\n")
        sys.stdout.flush()
    except BrokenPipeError:  # `tabd dashboard --json | head`: the reader left, not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def summarise(paths: list[str]) -> tuple[LogSummary, ReadStats]:
    summary, stats = LogSummary(), ReadStats()
    add = summary.add
    for ev in read_events(paths, stats):
        add(ev)
    return summary, stats


def _ratio(a: int, b: int) -> float | None:
    return round(a / b, 4) if b else None


def _skipped_text(stats: ReadStats) -> str:
    return ", ".join(f"{n} {reason.replace('_', ' ')}" for reason, n in stats.skipped.items() if n)


def to_json(s: LogSummary, stats: ReadStats) -> dict:
    completions = s.events["completion"]
    hits = sum(s.sources[k] for k in HIT_SOURCES)
    wasted_by_depth = s.wasted_by_depth()
    depths = sorted(set(s.prefetch_by_depth) | set(s.hits_by_depth))
    prefetch_by_depth = {}
    for d in depths:
        c = s.prefetch_by_depth.get(d, {})
        row = {k: c.get(k, 0) for k in OUTCOMES}
        row["used"] = c.get("used", 0)
        row["wasted"] = wasted_by_depth.get(d, 0)
        row["hits"] = s.hits_by_depth.get(d, 0)
        row["use_rate"] = _ratio(row["used"], row["finished"])
        prefetch_by_depth[str(d)] = row
    tokens = {}
    for kind, t in s.tokens.items():
        seen = t["prefill"] + t["reused"]
        tokens[kind] = {
            "calls": t["calls"],
            "prefill": t["prefill"],
            "reused": t["reused"],
            "decode": t["decode"],
            "reuse_ratio": _ratio(t["reused"], seen),
            "mean_prefill": _ratio(t["prefill"], t["calls"]),
            "mean_reused": _ratio(t["reused"], t["calls"]),
        }
    accepts = s.accepts["full"] + s.accepts["partial"]
    return {
        "tabd_dashboard": 1,
        "files": stats.files,
        "lines": stats.lines,
        "events": sum(s.events.values()),
        "skipped_lines": stats.skipped_lines,
        "skipped": {r: stats.skipped.get(r, 0) for r in SKIP_REASONS},
        "event_counts": {k: s.events.get(k, 0) for k in ("completion", "prefetch", "accept", "dismiss", "cancel", "error")},
        "time": {
            "first_ts": s.first_ts,
            "last_ts": s.last_ts,
            "duration_s": round(s.last_ts - s.first_ts, 3) if s.first_ts is not None else None,
            "bin_s": s.bin_s,
        },
        "completions": completions,
        "sources": {k: s.sources.get(k, 0) for k in SOURCES},
        "percentile_method": s.percentile_method(),
        "latency_ms": {name: series.stats() for name, series in s.latency.items()},
        "model_phases_ms": {
            p.removesuffix("_ms"): {
                "count": sk.n,
                "p50": _round(sk.quantile(0.5)),
                "p95": _round(sk.quantile(0.95)),
                "mean": _round(sk.total / sk.n) if sk.n else None,
            }
            for p, sk in s.phases.items()
        },
        "hit_rate": {
            "all": _ratio(hits, completions),
            "hits": hits,
            "by_type": {k: _ratio(s.sources[k], completions) for k in HIT_SOURCES},
            "by_depth": {str(d): _ratio(n, completions) for d, n in sorted(s.hits_by_depth.items())},
            "after_accept": {
                "requests": s.after_accept["requests"],
                "hits": s.after_accept["hits"],
                "hit_rate": _ratio(s.after_accept["hits"], s.after_accept["requests"]),
            },
        },
        "prefetch": {
            **{k: s.prefetch.get(k, 0) for k in OUTCOMES},
            "used": s.prefetch.get("used", 0),
            "wasted": sum(wasted_by_depth.values()),
            "use_rate": _ratio(s.prefetch.get("used", 0), s.prefetch.get("finished", 0)),
            "by_depth": prefetch_by_depth,
        },
        "tokens": tokens,
        "queue_depth": {
            "max": s.queue_depth_max if s.queue_depth_n else None,
            "mean": _ratio(s.queue_depth_sum, s.queue_depth_n),
        },
        "accept": {
            "accepts": accepts,
            "full": s.accepts["full"],
            "partial": s.accepts["partial"],
            "chars": s.accepts["chars"],
            "dismisses": s.events.get("dismiss", 0),
            "shown": s.shown,
            "accept_rate": _ratio(accepts, s.shown),
            "by_source": dict(s.accepted_by_source),
        },
        "cancel": {"total": s.events.get("cancel", 0), "by_reason": dict(s.cancel_reasons)},
        "errors": {"total": s.events.get("error", 0), "by_where": dict(s.error_places)},
    }


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


# -- HTML -------------------------------------------------------------------

def _times(s: LogSummary) -> tuple[list[int], list[str]]:
    keys = sorted(s.bins)
    labels = [
        dt.datetime.fromtimestamp(k * s.bin_s, tz=dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        for k in keys
    ]
    return keys, labels


def _layout(title: str, **kw) -> dict:
    layout = dict(
        title=dict(text=title),
        template="plotly_white",
        height=380,
        margin=dict(l=60, r=20, t=50, b=50),
        legend=dict(orientation="h", y=-0.2),
    )
    layout.update(kw)
    return layout


def figures(s: LogSummary, report: dict) -> list[tuple[str, dict]]:
    """(id, figure dict) for each chart; plain dicts keep plotly's validators off the hot path."""
    figs: list[tuple[str, dict]] = []
    keys, x = _times(s)
    bin_label = f"{s.bin_s // 60} min" if s.bin_s % 60 == 0 else f"{s.bin_s} s"

    # 1. latency percentiles per bin
    traces = []
    for q, name, dash in ((0.5, "p50", "solid"), (0.95, "p95", "dash"), (0.99, "p99", "dot")):
        ys = [s.bins[k].latency.quantile(q) for k in keys]
        traces.append(dict(type="scatter", mode="lines+markers", x=x, y=ys, name=name, line=dict(dash=dash)))
    figs.append(("latency-time", dict(
        data=traces,
        layout=_layout(f"Completion latency per {bin_label} (ms, log scale)",
                       yaxis=dict(type="log", title="ms"), xaxis=dict(title="time (UTC)")),
    )))

    # 2. latency CDF by source
    traces = []
    for src in ("cache", "typed", "inflight", "model"):
        sk = s.latency[src].sketch
        if not sk.n:
            continue
        xs, ys = sk.cdf()
        traces.append(dict(type="scatter", mode="lines", x=xs, y=ys, name=f"{src} (n={sk.n})",
                           line=dict(shape="hv", color=SOURCE_COLORS[src])))
    figs.append(("latency-cdf", dict(
        data=traces,
        layout=_layout("Latency CDF by source", xaxis=dict(type="log", title="latency (ms)"),
                       yaxis=dict(title="fraction of requests", range=[0, 1.02])),
    )))

    # 3. hit rate by type over time, and by depth
    traces = []
    totals = [sum(s.bins[k].sources.values()) for k in keys]
    for src in SOURCES:
        ys = [(s.bins[k].sources[src] / t if t else None) for k, t in zip(keys, totals)]
        traces.append(dict(type="bar", x=x, y=ys, name=src, marker=dict(color=SOURCE_COLORS[src])))
    figs.append(("sources-time", dict(
        data=traces,
        layout=_layout(f"Where answers came from, per {bin_label}", barmode="stack",
                       yaxis=dict(title="share of completions", range=[0, 1]), xaxis=dict(title="time (UTC)")),
    )))
    by_depth = report["prefetch"]["by_depth"]
    depth_keys = [d for d in by_depth if d != "0" or by_depth[d]["hits"]] or list(by_depth)
    depth_names = [f"depth {d}" if d != "0" else "depth 0 (from a foreground answer)" for d in depth_keys]
    figs.append(("hits-depth", dict(
        data=[
            dict(type="bar", x=depth_names, y=[by_depth[d]["hits"] for d in depth_keys],
                 name="completions served (hits)", marker=dict(color="#2ca02c")),
            dict(type="bar", x=depth_names, y=[by_depth[d]["finished"] for d in depth_keys],
                 name="prefetches finished", marker=dict(color="#1f77b4")),
            dict(type="bar", x=depth_names, y=[by_depth[d]["wasted"] for d in depth_keys],
                 name="prefetches wasted", marker=dict(color="#7f7f7f")),
        ],
        layout=_layout("Speculation depth: hits vs prefetches", barmode="group", yaxis=dict(title="count")),
    )))

    # 4. tokens per model call
    calls = [s.bins[k].model_calls for k in keys]
    figs.append(("tokens", dict(
        data=[
            dict(type="bar", x=x, y=[(s.bins[k].prefill_tokens / c if c else None) for k, c in zip(keys, calls)],
                 name="prefilled (computed)", marker=dict(color="#d62728")),
            dict(type="bar", x=x, y=[(s.bins[k].reused_tokens / c if c else None) for k, c in zip(keys, calls)],
                 name="reused (KV prefix)", marker=dict(color="#2ca02c")),
        ],
        layout=_layout(f"Prompt tokens per model call (foreground + prefetch), mean per {bin_label}",
                       barmode="stack", yaxis=dict(title="tokens"), xaxis=dict(title="time (UTC)")),
    )))

    # 5. prefetch outcomes
    p = report["prefetch"]
    figs.append(("prefetch", dict(
        data=[
            dict(type="bar", x=["started", "finished", "cancelled", "preempted", "used", "wasted"],
                 y=[p["started"], p["finished"], p["cancelled"], p["preempted"], p["used"], p["wasted"]],
                 marker=dict(color=["#1f77b4", "#2ca02c", "#ff7f0e", "#bcbd22", "#17becf", "#7f7f7f"]),
                 name="prefetches"),
        ],
        layout=_layout("Prefetches", yaxis=dict(title="count"), showlegend=False),
    )))
    traces = [
        dict(type="scatter", mode="lines", x=x, y=[s.bins[k].prefetch[o] for k in keys], name=o, stackgroup=None)
        for o in OUTCOMES
    ]
    figs.append(("prefetch-time", dict(
        data=traces,
        layout=_layout(f"Prefetch outcomes per {bin_label}", yaxis=dict(title="count"), xaxis=dict(title="time (UTC)")),
    )))

    # 6. acceptance
    a = report["accept"]
    if a["accepts"] or a["dismisses"]:
        figs.append(("accept", dict(
            data=[dict(type="bar", x=["accepted (full)", "accepted (partial)", "dismissed", "shown, no action"],
                       y=[a["full"], a["partial"], a["dismisses"], max(0, a["shown"] - a["accepts"] - a["dismisses"])],
                       marker=dict(color=["#2ca02c", "#98df8a", "#ff7f0e", "#c7c7c7"]))],
            layout=_layout("Suggestions: accepted vs dismissed", yaxis=dict(title="count"), showlegend=False),
        )))
    return figs


def _table(rows: list[tuple[str, object]]) -> str:
    out = ["<table class='summary'>"]
    for k, v in rows:
        out.append(f"<tr><th>{html.escape(k)}</th><td>{html.escape(_fmt(v))}</td></tr>")
    out.append("</table>")
    return "\n".join(out)


def _fmt(v) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.3f}".rstrip("0").rstrip(".") if abs(v) < 1e6 else f"{v:.3g}"
    return str(v)


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.1%}"


def summary_rows(r: dict) -> list[tuple[str, object]]:
    lat = r["latency_ms"]
    rows: list[tuple[str, object]] = [
        ("log files", ", ".join(r["files"])),
        ("events", r["events"]),
        ("skipped lines", r["skipped_lines"]),
        ("time span (s)", r["time"]["duration_s"]),
        ("completions", r["completions"]),
        ("hit rate (cache + typed + inflight)", _pct(r["hit_rate"]["all"])),
        ("hit rate right after accept", _pct(r["hit_rate"]["after_accept"]["hit_rate"])),
    ]
    for name in ("all", "after_accept", "cache", "typed", "inflight", "model", "none"):
        st = lat[name]
        if st["count"]:
            rows.append((f"latency {name} p50 / p95 / p99 (ms), n={st['count']}",
                         f"{_fmt(st['p50'])} / {_fmt(st['p95'])} / {_fmt(st['p99'])}"))
    rows.append(("percentiles", r["percentile_method"]))
    p = r["prefetch"]
    rows.append(("prefetches started / finished / cancelled / preempted",
                 f"{p['started']} / {p['finished']} / {p['cancelled']} / {p['preempted']}"))
    rows.append(("prefetches used / wasted (use rate)", f"{p['used']} / {p['wasted']} ({_pct(p['use_rate'])})"))
    for kind, t in r["tokens"].items():
        if t["calls"]:
            rows.append((f"{kind} model calls: prefill / reused / decode tokens (reuse)",
                         f"{t['calls']}: {t['prefill']} / {t['reused']} / {t['decode']} ({_pct(t['reuse_ratio'])})"))
    a = r["accept"]
    rows.append(("suggestions shown / accepted (full, partial) / dismissed",
                 f"{a['shown']} / {a['accepts']} ({a['full']}, {a['partial']}) / {a['dismisses']}"))
    rows.append(("accept rate", _pct(a["accept_rate"])))
    rows.append(("cancels", r["cancel"]["total"]))
    rows.append(("errors", r["errors"]["total"]))
    rows.append(("queue depth max / mean", f"{_fmt(r['queue_depth']['max'])} / {_fmt(r['queue_depth']['mean'])}"))
    return rows


CSS = """
body { font-family: system-ui, sans-serif; margin: 24px; color: #222; background: #fff; }
h1 { font-size: 22px; margin-bottom: 4px; }
.note { color: #555; margin: 4px 0 16px; }
.warn { background: #fff4e5; border: 1px solid #f0b36a; padding: 8px 12px; margin: 8px 0; }
.empty { background: #f3f3f3; border: 1px solid #ccc; padding: 16px; font-size: 18px; }
table.summary { border-collapse: collapse; margin: 12px 0 24px; }
table.summary th { text-align: left; font-weight: 500; padding: 3px 16px 3px 0; color: #444; }
table.summary td { font-variant-numeric: tabular-nums; padding: 3px 0; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(560px, 1fr)); gap: 16px; }
.chart { border: 1px solid #e5e5e5; min-height: 380px; }
.fleet-grid { display: flex; flex-wrap: wrap; gap: 16px; }
""" + fleet_view.CSS


def _head(title: str) -> list[str]:
    return [
        "<!DOCTYPE html>",
        "<html lang='en'><head><meta charset='utf-8'>",
        "<link rel='icon' href='data:,'>",  # served over HTTP, a browser would ask for /favicon.ico: no request at all
        f"<title>{html.escape(title)}</title>",
        f"<style>{CSS}</style>",
    ]


def to_html(s: LogSummary, stats: ReadStats, report: dict, title: str = DEFAULT_TITLE, extra: str = "") -> str:
    """The page; `extra` (the fleet view) goes under the summary table."""
    from plotly.offline import get_plotlyjs  # only the HTML needs plotly

    head = _head(title)
    body = [f"<h1>{html.escape(title)}</h1>"]
    span = ""
    if s.first_ts is not None:
        first = dt.datetime.fromtimestamp(s.first_ts, tz=dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        last = dt.datetime.fromtimestamp(s.last_ts, tz=dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        span = f" · {first} – {last} UTC"
    body.append(f"<p class='note'>{report['events']} events from {len(stats.files)} log file(s){span}</p>")
    if stats.skipped_lines:
        body.append(
            f"<p class='warn' id='skipped'>Skipped {stats.skipped_lines} of {stats.lines} lines: "
            f"{html.escape(_skipped_text(stats))}.</p>"
        )
    if not report["events"]:
        body.append("<p class='empty' id='empty'>No events found in the log: nothing to chart.</p>")
        body.append(_table(summary_rows(report)))
        body.append(extra)
        return "\n".join(head + ["</head><body>"] + body + ["</body></html>"])

    figs = figures(s, report)
    body.append(_table(summary_rows(report)))
    body.append(extra)
    body.append("<div class='grid'>")
    for fid, _ in figs:
        body.append(f"<div class='chart' id='{fid}'></div>")
    body.append("</div>")
    head.append(f"<script type='text/javascript'>{get_plotlyjs()}</script>")
    payload = json.dumps({fid: fig for fid, fig in figs}, allow_nan=False, default=str)
    body.append(
        "<script type='text/javascript'>\n"
        f"const FIGS = {_script_safe(payload)};\n"
        "for (const [id, fig] of Object.entries(FIGS)) {\n"
        "  Plotly.newPlot(id, fig.data, fig.layout, {responsive: true, displaylogo: false, displayModeBar: false});\n"
        "}\n"
        "</script>"
    )
    return "\n".join(head + ["</head><body>"] + body + ["</body></html>"])


def _script_safe(js: str) -> str:
    # JSON inside <script>: keep "</script>" and HTML comments from closing it early.
    return js.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
