"""The speculation planner: which states to compute before the user gets there.

After a suggestion is shown, the user may take all of it (Tab), its next word
(Ctrl+Right) or its next line. The word and line rules are VS Code's
(InlineCompletionsModel.acceptNextWord / acceptNextLine, default word
definition), defined here once for the daemon and mirrored exactly by
editors/nvim/lua/tabd/init.lua (tests/server/test_accept_rule.py feeds the same
suggestions to both); VS Code runs its own.
How deep each branch goes is the depth policy's call (daemon/speculation/acceptance.py).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from tabd.cache.state import DocState

# JavaScript's \s, which VS Code's rules use (Python's \s differs outside ASCII)
_JS_SPACE = " \t\n\v\f\r\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_SEPARATORS = "`~!@#$%^&*()-=+[{]}\\|;:'\",.<>/?"
WORD = re.compile(r"(-?[0-9]*\.[0-9][A-Za-z0-9_]*)|([^" + re.escape(_SEPARATORS) + _JS_SPACE + "]+)")
SPACE = re.compile("[" + _JS_SPACE + "]+")
KINDS = ("all", "word", "line")


def next_word(text: str) -> str:
    """What a next-word accept inserts: the leftmost word if it starts the text, else what comes before it;
    never past the end of the first run of whitespace."""
    m = WORD.search(text)
    until = len(text) if m is None else (m.end() if m.start() == 0 else m.start())
    s = SPACE.search(text)
    if s is not None and s.end() < until:
        until = s.end()
    return text[:until]


def next_line(text: str) -> str:
    """What a next-line accept inserts: through the first line break, or all of it."""
    nl = text.find("\n")
    return text[: nl + 1] if nl >= 0 else text


first_word = next_word  # the name callers used before the rule was VS Code's


def accepted_part(kind: str, text: str) -> str:
    return text if kind == "all" else next_word(text) if kind == "word" else next_line(text)


class DepthPolicy(Protocol):
    def wants(self, doc: str, kinds: tuple[str, ...], depth: int) -> bool:
        """Whether the state reached from the user's by the accepts `kinds` (depth = len(kinds)) is worth computing."""


class FixedDepth:
    """Every branch to a fixed depth: the benchmark's and --fixed-depth's policy."""

    def __init__(self, depth: int, partial: bool = True) -> None:
        self.depth, self.partial = depth, partial

    def wants(self, doc: str, kinds: tuple[str, ...], depth: int) -> bool:
        if depth > self.depth:
            return False
        # a partial accept is the user's own step: plan partial branches from the user's state only
        return kinds[-1] == "all" or (self.partial and depth == 1)


@dataclass(frozen=True)
class Plan:
    state: DocState  # the state after the accept
    depth: int  # how many accepts ahead of the user
    inserted: str  # what the accept inserts
    partial: bool  # a word or line accept
    kinds: tuple[str, ...] = ()  # the accepts from the user's state, in order ("all", "word", "line")

    @property
    def branch(self) -> str:
        return ".".join(self.kinds)


def plan_after(state: DocState, suggestion: str, depth: int, policy: DepthPolicy | int, partial_accepts: bool = True,
               doc: str = "", kinds: tuple[str, ...] = ()) -> list[Plan]:
    """States to prefetch once `suggestion` is shown at `state` (reached from the user's by `kinds`, depth accepts)."""
    if isinstance(policy, int):
        policy = FixedDepth(policy, partial_accepts)
    if not suggestion:
        return []
    plans: list[Plan] = []
    seen = {suggestion}
    for kind in KINDS if partial_accepts else ("all",):
        part = accepted_part(kind, suggestion)
        if kind != "all" and (not part or part in seen):
            continue  # the suggestion has no more than that: the whole accept covers it
        seen.add(part)
        path = (*kinds, kind)
        if policy.wants(doc, path, depth + 1):
            plans.append(Plan(state.insert(part), depth + 1, part, kind != "all", path))
    return plans
