"""What a replay measured: the counters, client-side latency percentiles, the JSON summary and the text table."""
from __future__ import annotations

import collections
import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Sequence

from tabd.daemon.sessions.serverlog import ModelRun
from tabd.daemon.telemetry.host import CpuTicks, host_summary

SOURCES = ("cache", "typed", "inflight", "model", "none")
# answers looked up in memory: the cache proper, or type-through of a shown suggestion
# (what the remainder of a partial accept is served by)
MEMORY_SOURCES = ("cache", "typed")
# a next edit answered from memory (tabd/stats edits.last.origin "cache"): speculated when the edit before it was shown
EDIT_MEMORY_SOURCES = MEMORY_SOURCES


def rank(ordered: Sequence[float], q: float) -> float:
    """The nearest-rank q-quantile of sorted values."""
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def percentiles(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {"p50": 0, "p95": 0, "p99": 0}
    ordered = sorted(values)
    return {"p50": round(rank(ordered, 0.50), 3), "p95": round(rank(ordered, 0.95), 3), "p99": round(rank(ordered, 0.99), 3)}


def reuse_figures(runs: Sequence[ModelRun]) -> dict[str, Any]:
    """The share of the prompt kept from before over keystroke model runs: median, the low tail (p10), tokens run."""
    if not runs:
        return {"p50": 0.0, "p10": 0.0, "requests": 0, "prefill_tokens": 0, "prefill_tokens_p50": 0}
    shares = sorted(r.reuse for r in runs)
    prefill = sorted(r.prefill_tokens for r in runs)
    return {"p50": round(rank(shares, 0.5), 4), "p10": round(rank(shares, 0.1), 4), "requests": len(runs),
            "prefill_tokens": sum(prefill), "prefill_tokens_p50": rank(prefill, 0.5)}


@dataclass
class Measurements:
    sessions: int = 0
    keystrokes: int = 0
    moves: int = 0  # of those, cursor moves with no change (an editor's overtype)
    requests: int = 0
    answered: int = 0
    shown: int = 0  # answers with a suggestion
    distinct_shown: int = 0  # ...not counting type-through (the rest of a suggestion already shown, as editors do)
    accepted: int = 0
    partial_accepts: int = 0
    dismissed: int = 0
    cancelled: int = 0
    errors: int = 0
    command_errors: int = 0
    typed_chars: int = 0
    accepted_chars: int = 0
    accepted_chars_full: int = 0       # of those, by whole-suggestion accepts
    keystrokes_skipped: int = 0        # recorded keystrokes an accept made unnecessary
    keystrokes_saved: int = 0          # the same, less one key per accept (the Tab itself)
    after_accept_requests: int = 0
    after_accept_from_cache: int = 0
    after_accept_speculated: int = 0   # cache or inflight: the prefetch had it
    after_accept_empty: int = 0        # of the after-accept answers, those with nothing to show (any source)
    unattributed: int = 0
    sync_checked: int = 0
    sync_mismatches: int = 0
    interrupted: bool = False
    truncated: bool = False
    all_ms: list[float] = field(default_factory=list)
    after_accept_ms: list[float] = field(default_factory=list)
    after_accept_memory_ms: list[float] = field(default_factory=list)  # those answered from memory (cache, typed)
    model_ms: list[float] = field(default_factory=list)
    # model runs right after a typed `(`/`[`/`{` (VS Code's `()`), whether or not they had something to show
    model_after_opener_ms: list[float] = field(default_factory=list)
    keystroke_runs: list[ModelRun] = field(default_factory=list)  # from the server's log (serverlog.py)
    sources: collections.Counter = field(default_factory=collections.Counter)
    after_accept_sources: collections.Counter = field(default_factory=collections.Counter)
    # answers from memory by the speculation depth that computed them (0: the user's own request, typed into)
    hits_by_depth: collections.Counter = field(default_factory=collections.Counter)
    after_accept_hits_by_depth: collections.Counter = field(default_factory=collections.Counter)
    # next-edit suggestions (textDocument/copilotInlineEdit), asked when the server offers them (edit_user.py)
    edits_offered: int = 0             # servers that advertised copilotInlineEdit and were asked
    edit_requests: int = 0
    edits_answered: int = 0
    edits_cancelled: int = 0           # asked while the person typed on: cancelled at the next key, as a client does
    edits_shown: int = 0               # answers with an edit
    edits_accepted: int = 0            # ...that were exactly the person's next edit, taken with Tab
    edit_jumps: int = 0                # of those, a jump first (the edit more than a line from the cursor): one key more
    edit_keys_needed: int = 0          # the recorded keys of the edits taken (what the person pressed for them)
    edit_keys_spent: int = 0           # the keys the user spent on them instead (jump + accept)
    edit_chars: int = 0                # characters the accepted edits wrote
    edit_errors: int = 0
    after_edit_requests: int = 0       # edit requests right after an accepted edit, at the cursor it left
    after_edit_from_memory: int = 0
    edit_ms: list[float] = field(default_factory=list)
    after_edit_ms: list[float] = field(default_factory=list)
    edit_sources: collections.Counter = field(default_factory=collections.Counter)
    after_edit_sources: collections.Counter = field(default_factory=collections.Counter)
    edit_ids_shown: set = field(default_factory=set)
    wall_s: float = 0.0
    host: CpuTicks = CpuTicks()  # the host's CPU ticks over the run, all CPUs (daemon/telemetry/host.py)
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
    server_stats: dict[str, Any] | None = None

    @classmethod
    def merged(cls, parts: Sequence["Measurements"]) -> "Measurements":
        """One set of figures from several replays (counts add up, latency samples pool)."""
        out = cls()
        for part in parts:
            for f in dataclasses.fields(cls):
                mine, theirs = getattr(out, f.name), getattr(part, f.name)
                if isinstance(theirs, (int, float, CpuTicks)) and not isinstance(theirs, bool):
                    setattr(out, f.name, mine + theirs)
                elif isinstance(theirs, collections.Counter):
                    mine.update(theirs)
                elif isinstance(theirs, list):
                    mine.extend(theirs)
                elif isinstance(theirs, set):
                    mine.update(theirs)
            out.error = out.error or part.error
            out.server_stats = part.server_stats
        return out

    def summary(self) -> dict[str, Any]:
        aa = self.after_accept_requests
        total_chars = self.accepted_chars + self.typed_chars
        recorded = self.keystrokes + self.keystrokes_skipped  # what the person typed without tabd
        out: dict[str, Any] = {
            "sessions": self.sessions,
            "requests": self.requests,
            "shown": self.shown,
            "accepted": self.accepted,
            "typed_chars": self.typed_chars,
            "accepted_chars": self.accepted_chars,
            "after_accept": {
                "requests": aa,
                "from_cache": self.after_accept_from_cache,
                "hit_rate": round(self.after_accept_from_cache / aa, 4) if aa else 0.0,
                "from_speculation": self.after_accept_speculated,
                "empty": self.after_accept_empty,
                "sources": dict(self.after_accept_sources),
                "hits_by_depth": {str(k): v for k, v in sorted(self.after_accept_hits_by_depth.items())},
            },
            "hits_by_depth": {str(k): v for k, v in sorted(self.hits_by_depth.items())},
            "latency_ms": {
                "all": percentiles(self.all_ms),
                "after_accept": percentiles(self.after_accept_ms),
                # the same requests answered from memory: the hot path alone, without the prefetches that were late
                "after_accept_from_memory": percentiles(self.after_accept_memory_ms),
                "model": percentiles(self.model_ms),
                "model_after_opener": percentiles(self.model_after_opener_ms),
            },
            # keystroke requests that ran the model: how much of each prompt's KV was kept (the server's log)
            "prompt_reuse": {"keystroke": reuse_figures(self.keystroke_runs)},
            "sources": {name: self.sources.get(name, 0) for name in SOURCES},
            "saved_share": round(self.accepted_chars / total_chars, 4) if total_chars else 0.0,
            "full_accepts": self.accepted - self.partial_accepts,
            "partial_accepts": self.partial_accepts,
            "accepted_chars_full": self.accepted_chars_full,
            "keystrokes_saved": self.keystrokes_saved,
            "keystrokes_saved_share": round(self.keystrokes_saved / recorded, 4) if recorded else 0.0,
            "acceptance_rate": round(self.accepted / self.shown, 4) if self.shown else 0.0,
            "distinct_shown": self.distinct_shown,
            "acceptance_rate_distinct": round(self.accepted / self.distinct_shown, 4) if self.distinct_shown else 0.0,
            "chars_per_accept": round(self.accepted_chars / self.accepted, 2) if self.accepted else 0.0,
            "shown_per_100_keystrokes": round(100 * self.shown / recorded, 2) if recorded else 0.0,
            "answered": self.answered,
            "cancelled": self.cancelled,
            "dismissed": self.dismissed,
            "errors": self.errors,
            "keystrokes": self.keystrokes,
            "wall_s": round(self.wall_s, 2),
        }
        out["edits"] = self.edit_summary()
        host = host_summary(self.host)
        if host is not None:
            out["host"] = host
        if self.moves:
            out["moves"] = self.moves
        if self.truncated:
            out["truncated"] = True
        if self.sync_checked:
            out["sync"] = {"checked": self.sync_checked, "mismatches": self.sync_mismatches}
        if self.command_errors:
            out["command_errors"] = self.command_errors
        if self.unattributed:
            out["unattributed"] = self.unattributed
        if self.server_stats is not None:
            out["server"] = self.server_stats
        if self.error:
            out["error"] = self.error
        return out

    def edit_summary(self) -> dict[str, Any]:
        """The next-edit figures: what was shown and taken, the keys saved, and the request right after a taken edit."""
        recorded = self.keystrokes + self.keystrokes_skipped + self.edit_keys_needed  # the person's keys, all of them
        edit_saved = self.edit_keys_needed - self.edit_keys_spent
        shown, aa = self.edits_shown, self.after_edit_requests
        return {
            "offered": self.edits_offered > 0,
            "requests": self.edit_requests,
            "answered": self.edits_answered,
            "cancelled": self.edits_cancelled,
            "shown": shown,
            "distinct_shown": len(self.edit_ids_shown),
            "accepted": self.edits_accepted,
            "acceptance_rate": round(self.edits_accepted / shown, 4) if shown else 0.0,
            "shown_not_next": shown - self.edits_accepted,
            "jumps": self.edit_jumps,
            "chars": self.edit_chars,
            "keys_needed": self.edit_keys_needed,
            "keys_spent": self.edit_keys_spent,
            "keys_saved": edit_saved,
            # of all the keys the person pressed: saved by taking edits, and by edits and completions together
            "edit_keystrokes_saved_share": round(edit_saved / recorded, 4) if recorded else 0.0,
            "keystrokes_saved_share": round((edit_saved + self.keystrokes_saved) / recorded, 4) if recorded else 0.0,
            "keystrokes_recorded": recorded,
            "after_accept": {
                "requests": aa,
                "from_memory": self.after_edit_from_memory,
                "hit_rate": round(self.after_edit_from_memory / aa, 4) if aa else 0.0,
                "sources": dict(self.after_edit_sources),
            },
            "latency_ms": {"all": percentiles(self.edit_ms), "after_accept": percentiles(self.after_edit_ms)},
            "sources": dict(self.edit_sources),
            "errors": self.edit_errors,
        }


def format_table(summary: dict[str, Any]) -> str:
    lat = summary["latency_ms"]
    aa = summary["after_accept"]
    rows = [
        ("sessions", summary["sessions"]),
        ("keystrokes typed", summary.get("keystrokes", "")),
        ("requests / answered / cancelled",
         f"{summary['requests']} / {summary.get('answered', '')} / {summary.get('cancelled', '')}"),
        ("shown / accepted (partial)", f"{summary['shown']} / {summary['accepted']} ({summary.get('partial_accepts', 0)})"),
        ("chars typed / accepted", f"{summary['typed_chars']} / {summary['accepted_chars']}"),
        ("typing saved (chars / keystrokes)",
         f"{100 * summary.get('saved_share', 0):.1f}% / {100 * summary.get('keystrokes_saved_share', 0):.1f}%"),
        ("accepted per shown", f"{100 * summary.get('acceptance_rate', 0):.1f}%"
                               f" ({summary.get('chars_per_accept', 0)} chars each)"),
        ("accepted per distinct suggestion", f"{100 * summary.get('acceptance_rate_distinct', 0):.1f}%"
                                             f" ({summary.get('distinct_shown', 0)} shown, type-through not counted)"),
        ("after-accept requests", aa["requests"]),
        ("  served from cache", f"{aa['from_cache']} ({100 * aa['hit_rate']:.0f}%)"),
        ("sources", "  ".join(f"{k}={v}" for k, v in summary["sources"].items())),
    ]
    reuse = summary.get("prompt_reuse", {}).get("keystroke")
    if reuse and reuse["requests"]:
        rows.append(("keystroke prompt reuse p50 / p10",
                     f"{100 * reuse['p50']:.1f}% / {100 * reuse['p10']:.1f}% ({reuse['requests']} model runs,"
                     f" {reuse['prefill_tokens_p50']} tokens run each)"))
    lines = [f"{name:34} {value}" for name, value in rows]
    lines.append(f"{'latency (ms)':34} {'p50':>9} {'p95':>9} {'p99':>9}")
    for name in ("all", "after_accept", "model"):
        q = lat[name]
        lines.append(f"{'  ' + name:34} {q['p50']:>9.1f} {q['p95']:>9.1f} {q['p99']:>9.1f}")
    edits = summary.get("edits")
    if edits and edits.get("requests"):
        lines.append(f"{'edits shown / accepted (jumps)':34} {edits['shown']} / {edits['accepted']} ({edits['jumps']})"
                     f", {edits['shown_not_next']} not the next edit")
        lines.append(f"{'keys saved by edits / with both':34} {100 * edits['edit_keystrokes_saved_share']:.1f}%"
                     f" / {100 * edits['keystrokes_saved_share']:.1f}%")
        ea, el = edits["after_accept"], edits["latency_ms"]["after_accept"]
        lines.append(f"{'after an accepted edit':34} {ea['from_memory']}/{ea['requests']} from memory"
                     f" ({100 * ea['hit_rate']:.0f}%), p50 {el['p50']:.1f} ms, p99 {el['p99']:.1f} ms")
    host = summary.get("host")
    if host:
        lines.append(f"{'host CPU busy / stolen':34} {100 * host['busy_share']:.1f}% / {100 * host['steal_share']:.2f}%"
                     f" ({host['steal_s']} s stolen by the hypervisor)")
    if summary.get("error"):
        lines.append(f"ERROR: {summary['error']}")
    return "\n".join(lines)
