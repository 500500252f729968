"""The speculation planner: which states to compute before the user gets there."""
from __future__ import annotations

import re
from dataclasses import dataclass

from tabd.cache.state import DocState

FIRST_WORD = re.compile(r"\s*(?:\w+|[^\w\s]+)")


@dataclass(frozen=True)
class Plan:
    state: DocState  # the state after the accept
    depth: int  # how many accepts ahead of the user
    inserted: str  # what the accept inserts
    partial: bool  # a first-word accept


def first_word(text: str) -> str:
    """What a word-accept inserts: leading space and one word (or one run of punctuation)."""
    m = FIRST_WORD.match(text)
    return m.group(0) if m else text


def plan_after(state: DocState, suggestion: str, depth: int, max_depth: int, partial_accepts: bool = True) -> list[Plan]:
    """States to prefetch once `suggestion` is shown at `state` (which is `depth` accepts ahead)."""
    if not suggestion or depth >= max_depth:
        return []
    plans = [Plan(state.insert(suggestion), depth + 1, suggestion, False)]
    word = first_word(suggestion)
    if partial_accepts and depth == 0 and word and word != suggestion:
        plans.append(Plan(state.insert(word), depth + 1, word, True))
    return plans
