"""The copy candidate verified by the model, and the per-token confidence marks: CopyVerifier, a collaborator of
LocalBackend (predictor/backends/local.py), which gives it its tokenizer and, per request, a way to score tokens."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from tabd.predictor.engine import generate
from tabd.predictor.prompt import prompt_ids
from tabd.predictor.text import postprocess
from tabd.predictor.text.lookup import copy_suggestion
from tabd.predictor.text.postprocess import Marks
from tabd.predictor.types import ContextChunk, GenSettings

# the model's probability of each of these token ids after the prompt, stopping where the joint one falls below the
# threshold (generate.score_tokens over the request's KV slot)
ScoreTokens = Callable[[list[int], float], generate.Scored]


@dataclass(frozen=True)
class Choice:
    """What a request shows: the text, its confidence marks, what scoring a copy took, and the other candidate."""

    text: str
    confidence: Marks
    scored: generate.Scored
    other: str
    tokens: list[int] | None = None  # the copy's ids where the copy is shown: what this request "decoded"


class CopyVerifier:
    """Whether a copy from the prompt beats the model's own text, judged by the model."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def choose(self, prefix: str, text: str, confidence: Marks, heal: str, line: postprocess.CursorLine,
               settings: GenSettings, context: Sequence[ContextChunk], score: ScoreTokens) -> Choice:
        """The copy candidate where the model verifies it (the other: the model's own), else the model's own (the
        other: the copy, if there was one).

        Code repeats itself, and a small model judges a copy better than it
        writes one: on held-out cuts, copies kept as far as the model's joint
        probability of them stays above lookup_min_p are right far more often
        than either the raw copy or the model's own guess. The candidate is
        scored teacher-forced from the prompt's logits (a decode step a token).
        Its confidence is the model's probability of each copied token up to
        where verification stops, and 0 after: confidence gating then judges a
        copy as it judges the model's own text (shown as far as the joint
        probability stays above --min-confidence), and an invoked request sees
        all of it. Trusting the verified part whole (its confidence set to 1)
        showed long copies the model found unlikely, which a Tab user rejects.
        """
        t = settings.lookup_min_p
        # the window first, then the workspace (the prompt's chunks, then whole open files): a name or a call
        # copied from another file
        candidate = copy_suggestion(prefix, sources=[c.text for c in context]) if t > 0 else ""
        if candidate:
            candidate = postprocess.finish(candidate, line, settings.multiline, settings.max_lines)
        if not candidate or candidate == text:
            return Choice(text, confidence, generate.Scored(), "")
        cand_ids = prompt_ids.encode(self.tokenizer, heal + candidate)
        scored = score(cand_ids, t)
        marked = self.confidence(cand_ids, scored.probs, heal, line, settings, len(candidate))
        verified, joint = 0, 1.0
        for end, p in marked:
            joint *= p
            if joint < t:
                break
            verified = end
        if not candidate[:verified].strip():
            return Choice(text, confidence, scored, candidate)
        marks = tuple((end, p) for end, p in marked if end <= verified)
        if verified < len(candidate):
            marks += ((len(candidate), 0.0),)
        return Choice(candidate, marks, scored, text, list(cand_ids))

    def confidence(self, tokens: list[int], probs: list[float], heal: str, line: postprocess.CursorLine,
                   settings: GenSettings, limit: int) -> Marks:
        """(length of the suggestion made of tokens[:i+1], p_i) for each token the suggestion keeps."""
        out = []
        for i, p in enumerate(probs[: len(tokens)]):
            raw = self.tokenizer.decode(tokens[: i + 1])
            raw = raw[len(heal):] if raw.startswith(heal) else ""
            end = min(limit, len(postprocess.finish(raw, line, settings.multiline, settings.max_lines)))
            out.append((end, round(p, 4)))
            if end >= limit:
                break
        return tuple(out)
