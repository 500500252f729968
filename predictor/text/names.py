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

import bisect
import re
from collections import Counter, OrderedDict
from typing import Sequence

from tabd.predictor.text import postprocess
from tabd.predictor.text.postprocess import Marks
from tabd.predictor.types import ContextChunk

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MIN_NAME = 4  # shorter words are too easily right by chance to be evidence of anything
# how often such a finished name is right (cross-file writing sessions: 43 of 69 with context, 38 of 60 without),
# the joint probability it is given: what follows the name is shown only if the model is sure of it too
KNOWN_NAME_P = 0.6
# the only name the workspace has that starts with the word typed so far (3 characters or more) was the word
# being typed 4 times in 5 (200 of 251 places, the same sessions): shown when the model's own word is unknown
ONLY_NAME_P = 0.8
ONLY_NAME_AFTER = 3
# where several names start so, the one the window (thrice) and the open files spell most often was the word
# 85 times in 144 (every word of cross-file `new` sessions, 3 characters typed): shown at that rate
LIKELIEST_NAME_P = 0.59
WINDOW_WEIGHT = 3  # a use in the window counts as three in the open files: the file being written is its own best guide


class KnownNames:
    """Which names a set of texts spells, remembered per text for the last `keep` texts."""

    def __init__(self, keep: int = 64) -> None:
        self.keep = keep
        self._sets: OrderedDict[str, tuple[tuple[str, ...], dict[str, int]]] = OrderedDict()

    def names_in(self, text: str) -> tuple[str, ...]:
        """The names `text` spells, sorted (a set's membership by bisection, a prefix's names by a range)."""
        return self._counted(text)[0]

    def _counted(self, text: str) -> tuple[tuple[str, ...], dict[str, int]]:
        """(sorted names, how often each occurs) of `text`, remembered."""
        found = self._sets.get(text)
        if found is None:
            counts = Counter(_NAME.findall(text))
            found = (tuple(sorted(counts)), dict(counts))
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
        return any(_has(self.names_in(c.text), name) for c in context)

    def likeliest_completion(self, prefix: str, suffix: str, context: Sequence[ContextChunk]) -> tuple[str, float] | None:
        """(the rest of the name, how often that guess is right) for the word at the cursor: the one name the
        window and the workspace spell that starts with it (ONLY_NAME_P), or else the one they spell most often
        (LIKELIEST_NAME_P, a window use counting WINDOW_WEIGHT); ONLY_NAME_AFTER characters typed or more, names
        MIN_NAME or longer. None when no name starts so."""
        n = postprocess.word_start(prefix)
        word = prefix[n:]
        if len(word) < ONLY_NAME_AFTER or word[0].isdigit() or (suffix[:1] and suffix[0] in postprocess.WORD_CHARS):
            return None
        score: Counter[str] = Counter()
        window = Counter(_NAME.findall(prefix[:n] + "\n" + suffix))  # not the word itself: it is unfinished
        sources = [(tuple(sorted(window)), window, WINDOW_WEIGHT)] + [(*self._counted(c.text), 1) for c in context]
        for names, counts, weight in sources:
            i = bisect.bisect_right(names, word)  # names longer than the word that start with it
            while i < len(names) and names[i].startswith(word):
                if len(names[i]) >= MIN_NAME:
                    score[names[i]] += weight * counts[names[i]]
                i += 1
        if not score:
            return None
        best = min(score, key=lambda name: (-score[name], name))  # ties: the first in sorted order, stable
        return best[len(word):], ONLY_NAME_P if len(score) == 1 else LIKELIEST_NAME_P

    def judge(self, prefix: str, suffix: str, text: str, confidence: Marks,
              context: Sequence[ContextChunk]) -> tuple[str, Marks]:
        """(text, confidence) after the two rules: a known name the model finishes gets the floor; a word the model
        finishes into a name nobody spells becomes the likeliest known name that starts like it, if there is one."""
        floored = self.floor(prefix, suffix, text, confidence, context)
        if floored is not None:
            return text, floored
        if not confidence or not text[:1] or text[0] not in postprocess.WORD_CHARS:
            return text, confidence
        guess = self.likeliest_completion(prefix, suffix, context)
        if guess and not text.startswith(guess[0]):
            return guess[0], ((len(guess[0]), guess[1]),)
        return text, confidence

    def floor(self, prefix: str, suffix: str, text: str, confidence: Marks,
              context: Sequence[ContextChunk]) -> Marks | None:
        """`confidence` with the name `text` finishes lifted to KNOWN_NAME_P, where that name is known; else None."""
        if not confidence:
            return None
        done = postprocess.completed_name(prefix, text, suffix.split("\n", 1)[0])
        if done is None or len(done[0]) < MIN_NAME:
            return None
        name, end = done
        # the prefix ends in the unfinished word, not the name: searching it finds only earlier uses
        if not self.spelled(name, (prefix, suffix), context):
            return None
        return postprocess.floor_at(confidence, end, KNOWN_NAME_P)

def _has(names: tuple[str, ...], name: str) -> bool:
    i = bisect.bisect_left(names, name)
    return i < len(names) and names[i] == name
