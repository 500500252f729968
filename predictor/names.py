"""Names the prompt and the workspace already spell: evidence that a word the model finishes is right.

A small model that finishes the word at the cursor into a name defined in
another open file is right about two times in three (measured on third-party
modules written with their imports open), yet unsure of it: the joint gate
hid most of those. When the finished word is a name the window or the
workspace holds, the joint probability of the name is raised to how often such names are
right (`postprocess.floor_at`): the name passes the gate, and what follows it
only where the model is sure of that too. A source's names are found once per text (the
context's texts are the same objects from request to request until the
context changes), so a request pays a dictionary look-up, not a scan of the
workspace. No torch here.
"""
from __future__ import annotations

import re
from collections import OrderedDict
from typing import Sequence

from tabd.predictor import postprocess
from tabd.predictor.types import ContextChunk

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MIN_NAME = 4  # shorter words are too easily right by chance to be evidence of anything
# how often such a finished name is right (cross-file writing sessions: 43 of 69 with context, 38 of 60 without),
# the joint probability it is given: what follows the name is shown only if the model is sure of it too
KNOWN_NAME_P = 0.6


class KnownNames:
    """Which names a set of texts spells, remembered per text for the last `keep` texts."""

    def __init__(self, keep: int = 64) -> None:
        self.keep = keep
        self._sets: OrderedDict[str, frozenset] = OrderedDict()

    def names_in(self, text: str) -> frozenset:
        found = self._sets.get(text)
        if found is None:
            found = frozenset(_NAME.findall(text))
            self._sets[text] = found
            while len(self._sets) > self.keep:
                self._sets.popitem(last=False)
        else:
            self._sets.move_to_end(text)
        return found

    def spelled(self, name: str, window: Sequence[str], context: Sequence[ContextChunk]) -> bool:
        """Whether `name` occurs as a whole word in the window's texts or in the context's."""
        pattern = re.compile(r"(?<![A-Za-z0-9_])" + re.escape(name) + r"(?![A-Za-z0-9_])")
        if any(pattern.search(t) for t in window):  # the window changes every keystroke: searched, not remembered
            return True
        return any(name in self.names_in(c.text) for c in context)

    def floor(self, prefix: str, suffix: str, text: str, confidence, context: Sequence[ContextChunk]):
        """`confidence`, made certain up to the end of the name `text` finishes, where that name is known."""
        if not confidence:
            return confidence
        done = postprocess.completed_name(prefix, text, suffix.split("\n", 1)[0])
        if done is None or len(done[0]) < MIN_NAME:
            return confidence
        name, end = done
        # the prefix ends in the unfinished word, not the name: searching it finds only earlier uses
        if not self.spelled(name, (prefix, suffix), context):
            return confidence
        return postprocess.floor_at(confidence, end, KNOWN_NAME_P)
