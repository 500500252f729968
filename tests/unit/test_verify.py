"""The copy verifier (predictor/text/verify.py) as a plain collaborator: a tokenizer, and the model's scores passed in."""
from __future__ import annotations

from tabd.predictor.engine.generate import Scored
from tabd.predictor.text.postprocess import CursorLine
from tabd.predictor.text.verify import CopyVerifier
from tabd.predictor.types import GenSettings

PREFIX = "total = price * count\nx = 1\ntotal = pri"
COPY = "ce * count"  # what followed "total = pri" the first time


class Chars:
    """A tokenizer with one token a character."""

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, ids: list[int]) -> str:
        return "".join(chr(i) for i in ids)


def choose(probs: list[float], text: str = "ce"):
    asked: list[list[int]] = []

    def score(ids: list[int], min_joint: float) -> Scored:
        asked.append(ids)
        return Scored(probs[: len(ids)], passes=1)

    line = CursorLine.of(PREFIX, "")
    verifier = CopyVerifier(Chars())
    settings = GenSettings(lookup_min_p=0.5)
    own = verifier.confidence(Chars().encode(text), [0.9] * len(text), "", line, settings, len(text))
    return verifier.choose(PREFIX, text, own, "", line, settings, (), score), asked


def test_a_copy_the_model_finds_likely_is_shown_with_the_model_s_own_text_as_the_other():
    choice, asked = choose([0.99] * len(COPY))
    assert asked == [Chars().encode(COPY)]  # the copy's ids, scored once
    assert (choice.text, choice.other, choice.tokens) == (COPY, "ce", Chars().encode(COPY))
    assert choice.confidence[-1] == (len(COPY), 0.99)


def test_a_copy_the_model_doubts_from_its_start_leaves_the_model_s_own_text():
    choice, _ = choose([0.3] + [0.99] * (len(COPY) - 1))
    assert (choice.text, choice.other, choice.tokens) == ("ce", COPY, None)
    assert choice.confidence == ((1, 0.9), (2, 0.9))


def test_a_copy_is_kept_as_far_as_it_is_verified_and_marked_unsure_after():
    choice, _ = choose([0.99, 0.99, 0.99, 0.99, 0.1] + [0.99] * (len(COPY) - 5))
    assert choice.text == COPY and choice.confidence[-1] == (len(COPY), 0.0)
    assert max(end for end, _ in choice.confidence[:-1]) == len("ce *")  # verified as far as the 4th token
