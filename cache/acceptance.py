"""How often the user takes what is shown, per document and across documents; the speculation depth it buys.

Every suggestion shown at a user's request ends one of four ways: accepted
whole, its next word or next line accepted, or passed over (dismissed, typed
over, or replaced by another suggestion). Each document keeps an exponentially
weighted rate of each kind, and so does the user across documents; a document
with few outcomes of its own leans on the user's rate. The planner asks
`wants(doc, kinds, depth)`: a state reached by the accepts `kinds` is computed
when the chance that the user gets there, the product of the rates along the
way, is at least `threshold`, and no deeper than the ceiling (--depth).
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

KINDS = ("all", "word", "line")
# before any outcome: a whole accept half the time (today's fixed depth 2), partial accepts rarer
PRIOR = {"all": 0.5, "word": 0.3, "line": 0.15}


@dataclass
class Rates:
    """Exponentially weighted share of shown suggestions accepted each way."""

    p: dict[str, float] = field(default_factory=lambda: dict(PRIOR))
    n: float = 0.0  # weight of evidence so far (capped by the decay)

    def update(self, outcome: str, alpha: float) -> None:
        for kind in KINDS:
            self.p[kind] += alpha * ((1.0 if kind == outcome else 0.0) - self.p[kind])
        self.n = min(self.n + 1, 1 / alpha)


class AcceptanceModel:
    def __init__(self, ceiling: int, threshold: float = 0.2, alpha: float = 0.15, lean: float = 4.0,
                 max_docs: int = 256) -> None:
        self.ceiling = ceiling
        self.threshold = threshold
        self.alpha = alpha
        self.lean = lean  # outcomes a document needs before its own rate counts as much as the user's
        self.user = Rates()
        self.docs: OrderedDict[str, Rates] = OrderedDict()
        self.max_docs = max_docs
        self.outcomes = dict.fromkeys((*KINDS, "none"), 0)

    def record(self, doc: str, outcome: str) -> None:
        """One shown suggestion's end: "all", "word", "line" or "none"."""
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        self.user.update(outcome, self.alpha)
        rates = self.docs.pop(doc, None) or Rates()
        rates.update(outcome, self.alpha)
        self.docs[doc] = rates
        while len(self.docs) > self.max_docs:
            self.docs.popitem(last=False)

    def rate(self, doc: str, kind: str) -> float:
        rates = self.docs.get(doc)
        if rates is None:
            return self.user.p[kind]
        w = rates.n / (rates.n + self.lean)
        return w * rates.p[kind] + (1 - w) * self.user.p[kind]

    def reach(self, doc: str, kinds: tuple[str, ...]) -> float:
        """The chance the user reaches the state after the accepts `kinds`, one after another."""
        chance = 1.0
        for kind in kinds:
            chance *= self.rate(doc, kind)
        return chance

    def wants(self, doc: str, kinds: tuple[str, ...], depth: int) -> bool:
        return depth <= self.ceiling and self.reach(doc, kinds) >= self.threshold

    def depth(self, doc: str) -> int:
        """How deep the chain of whole accepts runs for this document now."""
        d = 0
        while d < self.ceiling and self.wants(doc, ("all",) * (d + 1), d + 1):
            d += 1
        return d

    def explain(self, doc: str) -> dict:
        """The depth chosen and why, for the log and tabd/stats."""
        rates = {k: round(self.rate(doc, k), 3) for k in KINDS}
        own = self.docs.get(doc)
        return {
            "depth": self.depth(doc), "ceiling": self.ceiling, "threshold": self.threshold, "rates": rates,
            "outcomes_doc": round(own.n, 1) if own else 0,
            "why": f"p(all)={rates['all']:.2f}: depth {self.depth(doc)} is the deepest with p(all)^depth >= "
                   f"{self.threshold} (ceiling {self.ceiling}); word {'on' if rates['word'] >= self.threshold else 'off'}, "
                   f"line {'on' if rates['line'] >= self.threshold else 'off'}",
        }

    def summary(self) -> dict:
        rates = {k: round(v, 3) for k, v in self.user.p.items()}
        return {"mode": "adaptive", "ceiling": self.ceiling, "threshold": self.threshold, "user_rates": rates,
                "user_depth": self.depth(""), "outcomes": dict(self.outcomes)}
