"""Streaming reader and bounded-memory summary of tabd daemon logs (JSONL).

`read_events(paths)` yields valid events one at a time and counts the lines it
skips; `LogSummary` folds events into fixed-size structures so that a log of
any length is summarised in bounded memory:

- Latency percentiles come from a log-bucketed sketch (relative error below
  0.5 %; a sparse map with at most 231 buckets per decade of latency, the
  DDSketch idea). While a series has at most `EXACT_CAP` values the raw
  values are also kept, so percentiles of ordinary logs are exact (nearest
  rank: the smallest value with at least q * n values at or below it). Past
  the cap the raw values are dropped and the sketch answers;
  `percentile_method` in the summary says which.
- Time series use bins (60 s to start with); when there would be more than
  `MAX_BINS` bins the width doubles and neighbours merge.
- Wasted prefetches: finished-prefetch keys wait in an insertion-ordered dict
  until a completion served from them (source cache/typed/inflight, with the
  same "key", or the same "from_key" for a typed-through hit, whose request
  state differs from the prefetched one) appears later in the stream. At most
  `PENDING_CAP` keys wait; the oldest then counts as wasted, since no
  completion cache holds that many entries.
"""
from __future__ import annotations

import json
import json.scanner
import math
from array import array
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Iterable, Iterator

LOG_VERSION = 1
EVENTS = ("completion", "prefetch", "accept", "dismiss", "cancel", "error", "warmup")
SOURCES = ("cache", "typed", "inflight", "model", "none")
HIT_SOURCES = ("cache", "typed", "inflight")
OUTCOMES = ("started", "finished", "cancelled", "preempted", "held")  # held: never started (engine_load.why_held)
PHASES = ("queue_ms", "cache_ms", "prefill_ms", "decode_ms")

EXACT_CAP = 250_000  # raw float64 values kept per latency series (2 MB each)
MAX_BINS = 1440  # time bins before they are merged pairwise
PENDING_CAP = 200_000  # finished prefetch keys awaiting a hit (~50 MB at most)
RECENT_IDS = 8192  # completion ids remembered to attribute accepts to a source
MAX_LABELS = 50  # distinct cancel reasons / error places tracked; the rest are "other"

MAX_TS = 253402300799  # 9999-12-31: later (or NaN, or negative) is not a real timestamp

SKIP_REASONS = ("not_json", "not_object", "future_version", "unknown_event", "bad_fields")


class LogFileError(Exception):
    """A log file that cannot be opened at all."""


class Sketch:
    """Log-bucketed histogram of positive values with bounded relative error."""

    ALPHA = 0.005
    GAMMA = (1 + ALPHA) / (1 - ALPHA)
    LOG_GAMMA = math.log(GAMMA)
    MIN = 1e-4  # values at or below share bucket 0 (0.1 microsecond when in ms)
    OFFSET = -math.floor(math.log(MIN) / LOG_GAMMA)

    __slots__ = ("counts", "n", "total", "max")

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.n = 0
        self.total = 0.0
        self.max = 0.0

    @classmethod
    def index(cls, x: float) -> int:
        return math.ceil(math.log(x) / cls.LOG_GAMMA) + cls.OFFSET if x > cls.MIN else 0

    def add(self, x: float, i: int | None = None) -> None:
        """Count x; pass `i = Sketch.index(x)` when adding one value to several sketches."""
        self.n += 1
        self.total += x
        if x > self.max:
            self.max = x
        if i is None:
            i = self.index(x)
        counts = self.counts
        counts[i] = counts.get(i, 0) + 1

    def merge(self, other: "Sketch") -> None:
        self.n += other.n
        self.total += other.total
        self.max = max(self.max, other.max)
        for i, c in other.counts.items():
            self.counts[i] = self.counts.get(i, 0) + c

    def value(self, i: int) -> float:
        if i <= 0:
            return 0.0
        g = self.GAMMA ** (i - self.OFFSET)
        return 2 * g / (self.GAMMA + 1)

    def quantile(self, q: float) -> float | None:
        if not self.n:
            return None
        rank = max(1, math.ceil(q * self.n))
        seen = 0
        for i in sorted(self.counts):
            seen += self.counts[i]
            if seen >= rank:
                return min(self.value(i), self.max)
        return self.max

    def cdf(self) -> tuple[list[float], list[float]]:
        xs, ys, seen = [], [], 0
        for i in sorted(self.counts):
            seen += self.counts[i]
            xs.append(max(min(self.value(i), self.max), self.MIN))
            ys.append(seen / self.n)
        return xs, ys


class Series:
    """Exact values while few, a sketch always."""

    __slots__ = ("sketch", "exact")

    def __init__(self) -> None:
        self.sketch = Sketch()
        self.exact: array | None = array("d")

    def add(self, x: float, i: int | None = None) -> None:
        self.sketch.add(x, i)
        exact = self.exact
        if exact is not None:
            if len(exact) < EXACT_CAP:
                exact.append(x)
            else:
                self.exact = None

    @property
    def n(self) -> int:
        return self.sketch.n

    def quantiles(self, qs: Iterable[float]) -> list[float | None]:
        if self.exact is not None:
            values = sorted(self.exact)
            n = len(values)
            return [values[max(1, math.ceil(q * n)) - 1] if n else None for q in qs]
        return [self.sketch.quantile(q) for q in qs]

    def stats(self) -> dict:
        p50, p95, p99 = self.quantiles((0.5, 0.95, 0.99))
        s = self.sketch
        return {
            "count": s.n,
            "p50": _r(p50),
            "p95": _r(p95),
            "p99": _r(p99),
            "mean": _r(s.total / s.n) if s.n else None,
            "max": _r(s.max) if s.n else None,
        }


def _r(x: float | None, digits: int = 4) -> float | None:
    return None if x is None else round(x, digits)


@dataclass
class Bin:
    latency: Sketch = field(default_factory=Sketch)
    sources: Counter = field(default_factory=Counter)
    prefetch: Counter = field(default_factory=Counter)
    model_calls: int = 0
    prefill_tokens: int = 0
    reused_tokens: int = 0

    def merge(self, other: "Bin") -> None:
        self.latency.merge(other.latency)
        self.sources.update(other.sources)
        self.prefetch.update(other.prefetch)
        self.model_calls += other.model_calls
        self.prefill_tokens += other.prefill_tokens
        self.reused_tokens += other.reused_tokens


@dataclass
class ReadStats:
    lines: int = 0
    skipped: Counter = field(default_factory=Counter)
    files: list[str] = field(default_factory=list)

    @property
    def skipped_lines(self) -> int:
        return sum(self.skipped.values())


def _number(x) -> bool:
    return (type(x) is float or type(x) is int) and math.isfinite(x)


_scanner = getattr(json.scanner, "c_make_scanner", None) or json.scanner.py_make_scanner
_scan_once = _scanner(json.JSONDecoder())


def _decode(raw: bytes):
    """The JSON value on one line, or raise ValueError.

    The C scanner called directly skips json.loads' Python layers (encoding
    detection, wrappers): about twice as fast on a million short lines.
    """
    s = raw.decode("utf-8")
    try:
        value, end = _scan_once(s, 0)
    except StopIteration:
        return json.loads(s)  # leading whitespace or not JSON: let loads decide
    if end != len(s) and s[end:].strip():
        raise ValueError("extra data after the JSON value")
    return value


def read_events(paths: Iterable[str], stats: ReadStats) -> Iterator[dict]:
    """Valid events from the logs in order; counts what it skips in `stats`."""
    skipped = stats.skipped
    events = EVENTS
    for path in paths:
        try:
            f = open(path, "rb")
        except OSError as exc:
            raise LogFileError(f"cannot read log {path}: {exc.strerror or exc}") from exc
        stats.files.append(str(path))
        with f:
            for raw in f:
                try:
                    ev = _decode(raw)
                except ValueError:  # also UnicodeDecodeError
                    if raw.strip():
                        skipped["not_json"] += 1
                        stats.lines += 1
                    continue  # blank lines are formatting, not data
                stats.lines += 1
                if type(ev) is not dict:
                    skipped["not_object"] += 1
                    continue
                v = ev.get("v", LOG_VERSION)
                if v != LOG_VERSION:
                    if type(v) is not int:
                        skipped["bad_fields"] += 1
                    elif v > LOG_VERSION:
                        skipped["future_version"] += 1
                        continue
                    else:
                        skipped["bad_fields"] += 1
                    continue
                kind = ev.get("event")
                if kind not in events:
                    skipped["unknown_event"] += 1
                    continue
                ts = ev.get("ts")
                if type(ts) is not float and type(ts) is not int or not 0 <= ts <= MAX_TS:
                    skipped["bad_fields"] += 1
                    continue
                if kind == "completion":
                    lat = ev.get("latency_ms")
                    if (
                        ev.get("source") not in SOURCES
                        or type(lat) is not float and type(lat) is not int
                        or not 0 <= lat < math.inf
                    ):
                        skipped["bad_fields"] += 1
                        continue
                elif kind == "prefetch" and ev.get("outcome") not in OUTCOMES:
                    skipped["bad_fields"] += 1
                    continue
                yield ev


def _int(x) -> int:
    """A count field as a non-negative int; anything else counts as 0."""
    if type(x) is int:
        return x if x > 0 else 0
    if type(x) is float and 0 < x < math.inf:
        return int(x)
    return 0


def _label(counter: Counter, value) -> None:
    label = str(value)[:80] if value is not None else "unknown"
    if label not in counter and len(counter) >= MAX_LABELS:
        label = "other"
    counter[label] += 1


class LogSummary:
    """Everything the dashboard shows, folded in one pass over the events."""

    def __init__(self) -> None:
        self.events = Counter({k: 0 for k in EVENTS})
        self._first = math.inf
        self._last = -math.inf
        self.bin_s = 60
        self.bins: dict[int, Bin] = {}
        # completions
        self.latency = {name: Series() for name in ("all", *SOURCES, "after_accept")}
        self.phases = {p: Sketch() for p in PHASES}
        self.sources = Counter()
        self.hits_by_depth = Counter()
        self.after_accept = Counter()  # requests, hits
        self.queue_depth_max = 0
        self.queue_depth_sum = 0
        self.queue_depth_n = 0
        self.shown = 0
        self.tokens = {k: Counter() for k in ("foreground", "prefetch")}
        # prefetch
        self.prefetch = Counter()
        self.prefetch_by_depth: dict[int, Counter] = {}
        self.pending: OrderedDict[str, tuple[int, int]] = OrderedDict()  # key -> (count, depth)
        self.pending_evicted = 0
        # accept / dismiss / cancel / error
        self.accepts = Counter()
        self.accepted_by_source = Counter()
        self.recent_ids: OrderedDict[str, str] = OrderedDict()
        self.cancel_reasons = Counter()
        self.error_places = Counter()

    @property
    def first_ts(self) -> float | None:
        return self._first if self._first != math.inf else None

    @property
    def last_ts(self) -> float | None:
        return self._last if self._last != -math.inf else None

    # -- folding ---------------------------------------------------------
    def add(self, ev: dict) -> None:
        kind = ev["event"]
        ts = ev["ts"]
        self.events[kind] += 1
        if ts < self._first:
            self._first = ts
        if ts > self._last:
            self._last = ts
        b = self.bins.get(int(ts // self.bin_s)) or self._bin(ts)
        if kind == "completion":
            self._completion(ev, b)
        elif kind == "prefetch":
            self._prefetch(ev, b)
        elif kind == "accept":
            self.accepts["partial" if ev.get("partial") else "full"] += 1
            self.accepts["chars"] += _int(ev.get("chars"))
            src = self.recent_ids.get(str(ev.get("id")))
            self.accepted_by_source[src or "unknown"] += 1
        elif kind == "cancel":
            _label(self.cancel_reasons, ev.get("reason"))
        elif kind == "error":
            _label(self.error_places, ev.get("where"))

    def _bin(self, ts: float) -> Bin:
        i = int(ts // self.bin_s)
        b = self.bins.get(i)
        if b is None:
            if len(self.bins) >= MAX_BINS:
                self._coarsen()
                return self._bin(ts)
            b = self.bins[i] = Bin()
        return b

    def _coarsen(self) -> None:
        merged: dict[int, Bin] = {}
        for i, b in self.bins.items():
            j = i // 2
            if j in merged:
                merged[j].merge(b)
            else:
                merged[j] = b
        self.bins = merged
        self.bin_s *= 2

    def _completion(self, ev: dict, b: Bin) -> None:
        src = ev["source"]
        lat = ev["latency_ms"]
        i = Sketch.index(lat)
        self.sources[src] += 1
        b.sources[src] += 1
        b.latency.add(lat, i)
        latency = self.latency
        latency["all"].add(lat, i)
        latency[src].add(lat, i)
        hit = src in HIT_SOURCES
        if hit:
            self.hits_by_depth[_int(ev.get("depth"))] += 1
            # "key" is the request's state; a typed-through hit also names the
            # prefetched state it came from in "from_key" (when the core logs it).
            for key in (ev.get("key"), ev.get("from_key")):
                if key and type(key) is str:
                    used = self.pending.pop(key, None)
                    if used is not None:
                        count, depth = used
                        self.prefetch["used"] += count
                        self._depth(depth)["used"] += count
        if ev.get("after_accept"):
            latency["after_accept"].add(lat, i)
            self.after_accept["requests"] += 1
            if hit:
                self.after_accept["hits"] += 1
        q = ev.get("queue_depth")
        if q is not None:
            self._queue_depth(_int(q))
        if _int(ev.get("chars")):
            self.shown += 1
        if src == "model":
            self._tokens("foreground", ev, b)
            for p in PHASES:
                x = ev.get(p)
                if _number(x) and x >= 0:
                    self.phases[p].add(x)
        cid = ev.get("id")
        if cid is not None:
            ids = self.recent_ids
            ids[str(cid)] = src
            if len(ids) > RECENT_IDS:
                ids.popitem(last=False)

    def _queue_depth(self, q: int) -> None:
        self.queue_depth_sum += q
        self.queue_depth_n += 1
        if q > self.queue_depth_max:
            self.queue_depth_max = q

    def _tokens(self, kind: str, ev: dict, b: Bin) -> None:
        t = self.tokens[kind]
        prefill, reused = _int(ev.get("prefill_tokens")), _int(ev.get("reused_tokens"))
        t["calls"] += 1
        t["prefill"] += prefill
        t["reused"] += reused
        t["decode"] += _int(ev.get("decode_tokens"))
        b.model_calls += 1
        b.prefill_tokens += prefill
        b.reused_tokens += reused

    def _depth(self, depth: int) -> Counter:
        c = self.prefetch_by_depth.get(depth)
        if c is None:
            c = self.prefetch_by_depth[depth] = Counter()
        return c

    def _prefetch(self, ev: dict, b: Bin) -> None:
        outcome = ev["outcome"]
        depth = _int(ev.get("depth"))
        self.prefetch[outcome] += 1
        b.prefetch[outcome] += 1
        (self.prefetch_by_depth.get(depth) or self._depth(depth))[outcome] += 1
        if outcome != "finished":
            return
        self._tokens("prefetch", ev, b)
        q = ev.get("queue_depth")
        if q is not None:
            self._queue_depth(_int(q))
        key = ev.get("key")
        if not key or type(key) is not str:
            return
        count, _ = self.pending.pop(key, (0, depth))
        self.pending[key] = (count + 1, depth)  # most recent last
        if len(self.pending) > PENDING_CAP:
            _, (count, old_depth) = self.pending.popitem(last=False)
            self.pending_evicted += count
            self._depth(old_depth)["evicted"] += count

    # -- results ---------------------------------------------------------
    def wasted_by_depth(self) -> dict[int, int]:
        wasted = Counter()
        for count, depth in self.pending.values():
            wasted[depth] += count
        for depth, c in self.prefetch_by_depth.items():
            wasted[depth] += c["evicted"]
        return wasted

    def percentile_method(self) -> str:
        if all(s.exact is not None for s in self.latency.values()):
            return "exact"
        return f"sketch (relative error < {Sketch.ALPHA:.1%})"
