"""The copy candidate verified by the model, and the per-token confidence marks (a mixin of LocalBackend).

LocalBackend (predictor/backends/local.py) owns the state these methods use: tokenizer,
runner, pool (the KV slots), encode, _allowed_first, last_tokens.
"""
from __future__ import annotations

from tabd.predictor.text import postprocess
from tabd.predictor.engine import generate
from tabd.predictor.text.lookup import copy_suggestion
from tabd.predictor.types import GenSettings


class CopyVerification:
    def _copy_candidate(self, prefix, text, confidence, logits, slot, prompt_len, layout, line, settings, context=(),
                        batch: bool = False) -> tuple[str, tuple, generate.Scored, str]:
        """(text, confidence, what scoring it took, the other candidate): the copy candidate where the model
        verifies it (the other: the model's own), else the model's own (the other: the copy, if there was one).

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
            return text, confidence, generate.Scored(), ""
        heal = layout.heal
        cand_ids = self.encode(heal + candidate)
        self.pool.cut(slot, prompt_len)
        # with lookup on, the copy is verified as drafts are: several tokens a pass, the same numbers
        scored = generate.score_tokens(self.runner, logits, slot.cache, cand_ids, t, self._allowed_first(heal),
                                       batch=batch)
        probs = scored.probs
        slot.ids.extend(cand_ids[: max(0, len(probs) - 1)])  # the tokens fed (the last scored one is not)
        marked = self._confidence(cand_ids, probs, heal, line, settings, len(candidate))
        verified, joint = 0, 1.0
        for end, p in marked:
            joint *= p
            if joint < t:
                break
            verified = end
        if not candidate[:verified].strip():
            return text, confidence, scored, candidate
        marks = tuple((end, p) for end, p in marked if end <= verified)
        if verified < len(candidate):
            marks += ((len(candidate), 0.0),)
        self.last_tokens = list(cand_ids)  # what this request "decoded", for serve-model's raw text
        return candidate, marks, scored, text

    def _confidence(self, tokens: list[int], probs: list[float], heal: str, line, settings: GenSettings,
                    limit: int) -> tuple[tuple[int, float], ...]:
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
