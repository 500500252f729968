"""How often the user takes what is shown, per document and across documents; the speculation depth it buys.

Every suggestion shown at a user's request ends one way: accepted whole, its
next word or line accepted, or passed over (dismissed, typed over, or replaced
by another suggestion). Each document keeps exponentially weighted rates of
those, and so does the user across documents; a document with few outcomes of
its own leans on the user's. Two rates decide the depth:
- p(kind): how often any shown suggestion is taken that way. The first step of
  a chain (depth 1) by a whole accept, the state a Tab reaches, is computed when
  p(all) is at least `first_all` (0.01): a user who takes one suggestion in
  fifty still gets the next one from memory (a keystroke pre-empts the prefetch,
  so a wasted one costs little; the Tab user of a fleet run took 2 to 10 in a
  hundred, and at a bar of 0.03 four of their seven Tabs in a minute missed),
  one who never accepts gets no prefetch at all. A next-word or next-line branch
  needs its own rate to be at least `first` (0.03).
- p(streak): how often a suggestion shown right after an accept is taken whole.
  Each further step needs p(streak)^(steps beyond the first) >= `further`
  (0.5): accept streaks run the chain to the ceiling (--depth), a user who
  stops after one accept gets depth 1.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

KINDS = ("all", "word", "line")
# before any outcome: a whole accept half the time (today's fixed depth 2), partial accepts rarer
# the streak prior sits just under `further`: depth 2 and more wait for a streak the user actually shows
PRIOR = {"all": 0.5, "word": 0.15, "line": 0.08, "streak": 0.45}


@dataclass
class Rates:
    """Exponentially weighted share of shown suggestions accepted each way."""

    p: dict[str, float] = field(default_factory=lambda: dict(PRIOR))
    n: float = 0.0  # weight of evidence so far (capped by the decay)

    def update(self, outcome: str, alpha: float, after_accept: bool, streak_alpha: float) -> None:
        for kind in KINDS:
            self.p[kind] += alpha * ((1.0 if kind == outcome else 0.0) - self.p[kind])
        if after_accept:  # fewer and more telling: a faster rate
            self.p["streak"] += streak_alpha * ((1.0 if outcome == "all" else 0.0) - self.p["streak"])
        self.n = min(self.n + 1, 1 / alpha)


class AcceptanceModel:
    def __init__(self, ceiling: int, first: float = 0.03, further: float = 0.5, alpha: float = 0.08,
                 first_all: float = 0.01, streak_alpha: float = 0.2, lean: float = 4.0, max_docs: int = 256) -> None:
        self.ceiling = ceiling
        self.first, self.further, self.first_all = first, further, first_all
        # a suggestion is shown per keystroke and most are typed over: a slow rate (about the last 20 shown)
        self.alpha, self.streak_alpha = alpha, streak_alpha
        self.lean = lean  # outcomes a document needs before its own rates count as much as the user's
        self.user = Rates()
        self.docs: OrderedDict[str, Rates] = OrderedDict()
        self.max_docs = max_docs
        self.outcomes = dict.fromkeys((*KINDS, "none"), 0)

    def record(self, doc: str, outcome: str, after_accept: bool = False) -> None:
        """One shown suggestion's end: "all", "word", "line" or "none"; `after_accept`: shown right after an accept."""
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        self.user.update(outcome, self.alpha, after_accept, self.streak_alpha)
        rates = self.docs.pop(doc, None) or Rates()
        rates.update(outcome, self.alpha, after_accept, self.streak_alpha)
        self.docs[doc] = rates
        while len(self.docs) > self.max_docs:
            self.docs.popitem(last=False)

    def rate(self, doc: str, kind: str) -> float:
        kind = _as_accept(kind)
        rates = self.docs.get(doc)
        if rates is None:
            return self.user.p[kind]
        w = rates.n / (rates.n + self.lean)
        return w * rates.p[kind] + (1 - w) * self.user.p[kind]

    def wants(self, doc: str, kinds: tuple[str, ...], depth: int) -> bool:
        """Whether the state after the accepts `kinds`, one after another, is worth computing now."""
        if depth > self.ceiling or not kinds or self.rate(doc, kinds[0]) < self.bar(kinds[0]):
            return False
        further = 1.0
        for kind in kinds[1:]:  # after an accept: a whole one by the streak rate, a partial one by its own
            further *= self.rate(doc, "streak" if _as_accept(kind) == "all" else kind)
        return further >= self.further

    def bar(self, kind: str) -> float:
        """The rate a first step taken by `kind` needs: lower for the Tab's own (a whole accept)."""
        return self.first_all if _as_accept(kind) == "all" else self.first

    def depth(self, doc: str) -> int:
        """How deep the chain of whole accepts runs for this document now."""
        d = 0
        while d < self.ceiling and self.wants(doc, ("all",) * (d + 1), d + 1):
            d += 1
        return d

    def explain(self, doc: str) -> dict[str, Any]:
        """The depth chosen and why, for the log and tabd/stats."""
        rates = {k: round(self.rate(doc, k), 3) for k in (*KINDS, "streak")}
        d = self.depth(doc)
        partial = [k for k in ("word", "line") if rates[k] >= self.bar(k)]
        bar = self.bar("all")
        why = (f"p(all)={rates['all']:.2f} {'>=' if rates['all'] >= bar else '<'} {bar}"
               + (f", p(streak)={rates['streak']:.2f}: depth {d} (p(streak)^{max(d - 1, 0)} >= {self.further}, "
                  f"ceiling {self.ceiling})" if d else ": no prefetch")
               + f"; partial branches: {', '.join(partial) or 'none'}")
        own = self.docs.get(doc)
        return {"depth": d, "ceiling": self.ceiling, "rates": rates, "outcomes_doc": round(own.n, 1) if own else 0,
                "why": why}

    def summary(self) -> dict[str, Any]:
        return {"mode": "adaptive", "ceiling": self.ceiling, "first": self.first, "first_all": self.first_all,
                "further": self.further,
                "user_rates": {k: round(v, 3) for k, v in self.user.p.items()}, "user_depth": self.depth(""),
                "outcomes": dict(self.outcomes)}


def _as_accept(kind: str) -> str:
    """A step the model has no rate of its own for counts as a whole accept: "edit", a next edit taken (its
    completion is prefetched where the edit leaves the cursor; a KeyError here once broke the chain of Tabs)."""
    return kind if kind in KINDS or kind == "streak" else "all"
