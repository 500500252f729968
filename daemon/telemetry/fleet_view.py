"""The fleet view of `tabd dashboard --fleet FLEET.json`: per-user latency against the number of users on one engine.

Reads what `tabd bench fleet --json` prints (`{"fleet": {...}}`, or the fleet object itself): a sweep's `sweep` list,
one entry per N, or a single-N run, which draws one point per series. Each N gives, speculation on and off: the
median user's model-path p50 and p99, the slowest user's p50, and the lowest user's after-accept hit rate. The charts
are inline SVG written here (no script, no network), each point a <circle> whose data-series, data-users and
data-value attributes carry what it shows, so a test or a reader of the HTML gets the figures back exactly.
"""
from __future__ import annotations

import html
import json
import math
import statistics
from dataclasses import dataclass
from typing import Any

MODES = {"speculation": "on", "no_speculation": "off"}
COLORS = {"on": "#2ca02c", "off": "#d62728"}


class FleetFileError(Exception):
    """The fleet file cannot be read or is not what `tabd bench fleet --json` writes; the message says which."""


@dataclass(frozen=True)
class FleetPoint:
    """One N, one mode (speculation on or off): the fleet's figures that the charts draw."""
    users: int
    mode: str  # "on" | "off"
    median_p50_ms: float | None
    slowest_p50_ms: float | None
    median_p99_ms: float | None
    lowest_hit_rate: float | None
    prefetch_per_keystroke: float | None


@dataclass(frozen=True)
class Series:
    id: str
    label: str
    mode: str
    field: str
    dashed: bool = False


CHARTS: list[tuple[str, str, str, list[Series]]] = [
    ("fleet-p50", "Model-path latency p50 per user against N (ms)", "ms", [
        Series("on-p50", "speculation on: median user's p50", "on", "median_p50_ms"),
        Series("off-p50", "speculation off: median user's p50", "off", "median_p50_ms"),
        Series("on-slowest-p50", "speculation on: slowest user's p50", "on", "slowest_p50_ms", dashed=True),
        Series("off-slowest-p50", "speculation off: slowest user's p50", "off", "slowest_p50_ms", dashed=True),
    ]),
    ("fleet-p99", "Model-path latency p99 per user against N (ms)", "ms", [
        Series("on-p99", "speculation on: median user's p99", "on", "median_p99_ms"),
        Series("off-p99", "speculation off: median user's p99", "off", "median_p99_ms"),
    ]),
    ("fleet-hits", "After-accept answers from memory, lowest user, against N", "share", [
        Series("on-hit", "speculation on", "on", "lowest_hit_rate"),
        Series("off-hit", "speculation off", "off", "lowest_hit_rate"),
    ]),
]


def read_fleet(path: str) -> list[FleetPoint]:
    """The points of a fleet file, by N then mode; FleetFileError for a file that is missing or of another shape."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as exc:
        raise FleetFileError(f"cannot read fleet file {path}: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise FleetFileError(f"fleet file {path} is not JSON ({exc}); write it with tabd bench fleet --json") from None
    return fleet_points(data, path)


def fleet_points(data: Any, name: str = "fleet file") -> list[FleetPoint]:
    if isinstance(data, dict) and isinstance(data.get("fleet"), dict):
        data = data["fleet"]
    if not isinstance(data, dict):
        raise FleetFileError(f"{name} is not a tabd bench fleet report (no object with a 'fleet' key)")
    runs = data.get("sweep", [data])
    if not isinstance(runs, list) or not runs:
        raise FleetFileError(f"{name}: 'sweep' is not a non-empty list of runs")
    points: list[FleetPoint] = []
    seen: set[int] = set()
    for i, run in enumerate(runs):
        where = f"{name}: run {i + 1}" if "sweep" in data else name
        users = run.get("users") if isinstance(run, dict) else None
        if not isinstance(users, int) or isinstance(users, bool) or users < 1:
            raise FleetFileError(f"{where} has no whole number of users ('users')")
        if users in seen:
            raise FleetFileError(f"{where}: {users} users appear twice")
        seen.add(users)
        for key, mode in MODES.items():
            fleet = run.get(key)
            if not isinstance(fleet, dict) or not isinstance(fleet.get("users"), list):
                raise FleetFileError(f"{where} ({users} users) has no '{key}' figures with a 'users' list")
            points.append(point(users, mode, [u for u in fleet["users"] if isinstance(u, dict)]))
    return sorted(points, key=lambda p: (p.users, p.mode))


def point(users: int, mode: str, per_user: list[dict[str, Any]]) -> FleetPoint:
    def values(field: str, users: list[dict[str, Any]]) -> list[float]:
        return [float(u[field]) for u in users if _number(u.get(field))]

    # a user none of whose requests went to the engine reports a model p50 of 0: no figure, not a fast one
    on_engine = [u for u in per_user if u.get("model_requests", 1) != 0]
    p50, p99 = values("model_p50_ms", on_engine), values("model_p99_ms", on_engine)
    hits = [float(u["after_accept_hit_rate"]) for u in per_user
            if _number(u.get("after_accept_hit_rate")) and u.get("after_accept_requests")]
    prefetch = values("prefetch_per_keystroke", per_user)
    return FleetPoint(
        users=users, mode=mode,
        median_p50_ms=statistics.median(p50) if p50 else None,
        slowest_p50_ms=max(p50) if p50 else None,
        median_p99_ms=statistics.median(p99) if p99 else None,
        lowest_hit_rate=min(hits) if hits else None,
        prefetch_per_keystroke=statistics.mean(prefetch) if prefetch else None,
    )


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def to_json(points: list[FleetPoint]) -> dict[str, Any]:
    def rounded(v: Any) -> Any:
        return round(v, 3) if isinstance(v, float) else v

    return {"users": sorted({p.users for p in points}),
            "points": [{k: rounded(v) for k, v in p.__dict__.items()} for p in points]}


# -- SVG ----------------------------------------------------------------------

W, H = 620, 340
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 40, 96  # the legend sits under the x axis


def chart_svg(chart_id: str, title: str, unit: str, series: list[Series], points: list[FleetPoint]) -> str:
    counts = sorted({p.users for p in points})
    by_key = {(p.users, p.mode): p for p in points}
    lines = {s.id: [(n, getattr(by_key[(n, s.mode)], s.field)) for n in counts if (n, s.mode) in by_key] for s in series}
    values = [v for pts in lines.values() for _, v in pts if v is not None]
    top = 1.0 if unit == "share" else _nice_top(max(values, default=0.0))
    x = _x_scale(counts)

    def y(v: float) -> float:
        return TOP + (H - TOP - BOTTOM) * (1 - v / top)

    out = [f"<svg class='fleet-chart' id='{chart_id}' xmlns='http://www.w3.org/2000/svg' viewBox='0 0 {W} {H}' "
           f"width='{W}' height='{H}' role='img' aria-label='{html.escape(title)}'>",
           f"<text x='{W / 2}' y='22' text-anchor='middle' class='title'>{html.escape(title)}</text>"]
    for i in range(5):  # y grid and labels
        v = top * i / 4
        label = f"{v:.0%}" if unit == "share" else _fmt_ms(v)
        out.append(f"<line class='grid' x1='{LEFT}' x2='{W - RIGHT}' y1='{y(v):.1f}' y2='{y(v):.1f}'/>"
                   f"<text x='{LEFT - 6}' y='{y(v) + 4:.1f}' text-anchor='end'>{label}</text>")
    for n in counts:
        out.append(f"<text x='{x(n):.1f}' y='{H - BOTTOM + 18}' text-anchor='middle'>{n}</text>")
    out.append(f"<text x='{(LEFT + W - RIGHT) / 2}' y='{H - BOTTOM + 36}' text-anchor='middle'>users sharing the engine (N)</text>")
    for s in series:
        color, dash = COLORS[s.mode], " stroke-dasharray='6 4'" if s.dashed else ""
        pts = [(n, v) for n, v in lines[s.id] if v is not None]
        if len(pts) > 1:
            path = " ".join(f"{x(n):.1f},{y(v):.1f}" for n, v in pts)
            out.append(f"<polyline class='series' data-series='{s.id}' points='{path}' fill='none' "
                       f"stroke='{color}' stroke-width='2'{dash}/>")
        for n, v in pts:
            shown = f"{v:.1%}" if unit == "share" else f"{_fmt_ms(v)} ms"
            fill = "#fff" if s.dashed else color
            out.append(f"<circle class='point' data-series='{s.id}' data-users='{n}' data-value='{v!r}' "
                       f"cx='{x(n):.1f}' cy='{y(v):.1f}' r='4' fill='{fill}' stroke='{color}' stroke-width='2'>"
                       f"<title>{html.escape(s.label)}, N={n}: {shown}</title></circle>")
    for i, s in enumerate(series):  # legend, two columns
        lx, ly = LEFT + (i % 2) * 270, H - BOTTOM + 56 + (i // 2) * 18
        dash = " stroke-dasharray='6 4'" if s.dashed else ""
        out.append(f"<line x1='{lx}' x2='{lx + 24}' y1='{ly - 4}' y2='{ly - 4}' stroke='{COLORS[s.mode]}' "
                   f"stroke-width='2'{dash}/><text x='{lx + 30}' y='{ly}'>{html.escape(s.label)}</text>")
    out.append("</svg>")
    return "".join(out)


def _x_scale(counts: list[int]):
    """N on a log scale (1, 2, 4, 8 evenly apart); a single N in the middle."""
    lo, hi = math.log(min(counts)), math.log(max(counts))
    span = W - LEFT - RIGHT - 40

    def x(n: int) -> float:
        return LEFT + 20 + (span / 2 if hi == lo else span * (math.log(n) - lo) / (hi - lo))
    return x


def _nice_top(v: float) -> float:
    """The y axis top: 1, 2, 2.5 or 5 times a power of ten, at or above v (and above 0)."""
    if v <= 0:
        return 1.0
    want = v * 1.05  # a point at the top still shows whole
    base = 10 ** math.floor(math.log10(want))
    return min(m * base for m in (1, 2, 2.5, 5, 10) if m * base >= want)


def _fmt_ms(v: float) -> str:
    if v == 0 or v >= 100:
        return f"{v:.0f}"
    return f"{v:.1f}".rstrip("0").rstrip(".") if v >= 1 else f"{v:.2f}"


def table(points: list[FleetPoint]) -> str:
    def cell(v: float | None, share: bool = False) -> str:
        return "–" if v is None else (f"{v:.1%}" if share else _fmt_ms(v))

    rows = ["<table class='fleet'><tr><th>N</th><th>speculation</th><th>median user p50 (ms)</th>"
            "<th>slowest user p50 (ms)</th><th>median user p99 (ms)</th><th>after-accept from memory, lowest user</th>"
            "<th>prefetches per keystroke, mean</th></tr>"]
    for p in points:
        rows.append(f"<tr data-users='{p.users}' data-mode='{p.mode}'><td>{p.users}</td><td>{p.mode}</td>"
                    f"<td>{cell(p.median_p50_ms)}</td><td>{cell(p.slowest_p50_ms)}</td><td>{cell(p.median_p99_ms)}</td>"
                    f"<td>{cell(p.lowest_hit_rate, True)}</td>"
                    f"<td>{'–' if p.prefetch_per_keystroke is None else f'{p.prefetch_per_keystroke:.2f}'}</td></tr>")
    rows.append("</table>")
    return "".join(rows)


CSS = """
.fleet-chart { border: 1px solid #e5e5e5; background: #fff; font: 12px system-ui, sans-serif; }
.fleet-chart .title { font-size: 14px; font-weight: 600; }
.fleet-chart .grid { stroke: #eee; }
table.fleet { border-collapse: collapse; margin: 12px 0 24px; }
table.fleet th, table.fleet td { padding: 3px 12px 3px 0; text-align: left; font-variant-numeric: tabular-nums; }
"""


def section(points: list[FleetPoint] | None, error: str | None, source: str) -> str:
    """The fleet block of the page: its charts and table, or the reason there are none."""
    out = ["<section id='fleet'><h2>Fleet: users sharing one engine</h2>"]
    if error is not None or not points:
        out.append(f"<p class='warn' id='fleet-error'>{html.escape(error or 'no fleet runs in the file')}</p></section>")
        return "".join(out)
    counts = sorted({p.users for p in points})
    note = ("one run (a single N): each series is one point; `tabd bench fleet --users 1,2,4,8` sweeps N"
            if len(counts) == 1 else f"a sweep over N = {', '.join(map(str, counts))}")
    out.append(f"<p class='note'>{html.escape(source)}: {html.escape(note)}. Model-path latency is each user's "
               "requests that went to the engine, measured at the editor; the median and slowest are over users.</p>")
    out.append("<div class='fleet-grid'>")
    out.extend(chart_svg(cid, title, unit, series, points) for cid, title, unit, series in CHARTS)
    out.append("</div>")
    out.append(table(points))
    out.append("</section>")
    return "".join(out)
