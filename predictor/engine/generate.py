"""Generation as a few small functions over an explicit KV cache (the gpt-fast shape).

`prefill` runs the prompt tokens the cache does not hold yet; `decode_one_token`
runs one token; `decode_n_tokens` loops, asking the caller after every token
whether to go on, and returns what it decoded (Decoded); `score_tokens` gives
the model's probabilities of given tokens (Scored). Greedy only: the same state
always gives the same answer, which is what lets the daemon cache answers by state.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

from tabd.predictor.engine.chunking import CHUNK_WORK, PREFILL_CHUNK, chunk_for  # noqa: F401 (re-exported)
from tabd.predictor.engine.layout import PASS_TOKENS
from tabd.predictor.engine.runner import Runner, greedy_p, inference, token_p
from tabd.predictor.types import Interrupted

if TYPE_CHECKING:  # logits are torch tensors, or numpy arrays from the torch-free runner (boot.py)
    import torch

__all__ = ["Decoded", "Rule", "Runner", "Scored", "chunk_for", "decode_n_tokens", "decode_one_token", "forward_last",
           "greedy", "greedy_p", "prefill", "score_tokens"]


@dataclass(frozen=True)
class Rule:
    """What decode_n_tokens decodes: at most n tokens, while go_on(tokens so far) says so; the first token among
    `first_allowed` (token healing: an index of the runner's logits' kind) and never one of `first_banned`."""

    n: int
    go_on: Callable[[list[int]], bool] = lambda tokens: True
    first_allowed: Any = None
    first_banned: Sequence[int] = ()


@dataclass
class Decoded:
    """The greedy tokens, the model's probability of each (what confidence gating cuts by), and how many came as
    prompt-lookup drafts the model agreed with: those rode along in another token's pass, so the tokens took
    len(tokens) - accepted_drafts model passes, the prompt's counted."""

    tokens: list[int] = field(default_factory=list)
    probs: list[float] = field(default_factory=list)
    accepted_drafts: int = 0


@dataclass
class Scored:
    """The model's probability of each token scored, and the model passes that took, the prompt's counted (as
    Decoded's are)."""

    probs: list[float] = field(default_factory=list)
    passes: int = 0


def _ignore(token: int) -> None:
    pass


@inference
def forward_last(model: Runner, ids: list[int], cache) -> torch.Tensor:
    """Logits at the last position after running `ids` on top of `cache`."""
    return model.forward_last(ids, cache)


def prefill(
    model,
    ids: list[int],
    cache,
    chunk: int = PREFILL_CHUNK,
    should_stop: Callable[[], bool] | None = None,
    on_chunk: Callable[[list[int]], None] | None = None,
) -> torch.Tensor:
    """Run the uncached prompt tokens in chunks; logits after the last.

    Before each chunk, should_stop() may say stop (Interrupted): the chunks
    already run stay in the cache, and on_chunk(ids) was told of each, so the
    caller's token list matches the cache and the next request sharing the
    prefix starts from there. Chunks also keep a long prompt's attention bounded.
    """
    logits = None
    for i in range(0, len(ids), max(1, chunk)):
        if should_stop is not None and should_stop():
            raise Interrupted()
        piece = ids[i : i + chunk]
        logits = forward_last(model, piece, cache)
        if on_chunk is not None:
            on_chunk(piece)
    assert logits is not None, "prefill needs at least one token"
    return logits


def decode_one_token(model, token: int, cache) -> torch.Tensor:
    return forward_last(model, [token], cache)


def greedy(logits: torch.Tensor, allowed: torch.Tensor | None = None) -> int:
    return greedy_p(logits, allowed)[0]


@inference
def score_tokens(model, logits: torch.Tensor, cache, tokens: list[int], min_joint: float,
                 first_allowed: torch.Tensor | None = None, batch: bool = True) -> Scored:
    """The model's probability of each of `tokens` in turn (teacher-forced), feeding each into the cache.

    Stops once the joint probability of the tokens so far falls below min_joint:
    nothing after that point can be shown. The cache then holds the tokens whose
    successor was scored (one fewer than the probabilities). Where the runner has
    a multi-token pass (and `batch`), 2, then 4, then up to 8 tokens are fed per
    pass, the cache cut back after a stop: the same numbers (each row is the
    logits one step gives), a pass per 8 tokens of a long copy instead of one per
    token.
    """
    out = Scored()
    p = token_p(logits, tokens[0], first_allowed) if tokens else None
    if p is None:
        return out
    probs = out.probs
    probs.append(p)
    out.passes = 1  # the prompt's, as decoding counts its first token
    joint = p
    fed = 0  # tokens fed so far: tokens[:fed]
    step = 2  # tokens per pass, doubled while the copy holds: a copy rejected early costs a short pass only
    verify_logits = getattr(model, "verify_logits", None) if batch else None
    while joint >= min_joint and len(probs) < len(tokens):
        k = min(step if verify_logits else 1, len(tokens) - 1 - fed)
        step = min(PASS_TOKENS, step * 2)
        rows = verify_logits(tokens[fed : fed + k], cache) if k > 1 else None
        if rows is None:  # one token a pass (where the runner has no multi-token pass)
            k, rows = 1, [forward_last(model, [tokens[fed]], cache)]
        base = cache.length - k if k > 1 else 0
        for j in range(k):
            p = token_p(rows[j], tokens[fed + j + 1])
            probs.append(p)
            joint *= p
            out.passes += j == 0  # the pass's other tokens ride along
            if joint < min_joint or len(probs) == len(tokens):
                if k > 1:
                    cache.truncate(base + j + 1)  # as if fed one at a time up to here
                return out
        fed += k
    return out


class Lookup:
    """Prompt-lookup drafts: the tokens that followed the latest earlier occurrence of the last few tokens.

    Code repeats itself (identifiers, the lines around an edit, a pattern typed again), so the text
    after the last 3-gram (or else 2-gram) seen before is a good guess at what comes next. The tokens
    are kept as a string of code points, one per token, so finding the latest occurrence is one
    str.rfind in C: indexing a 2k-token prompt n-gram by n-gram in Python cost ~5 ms per request,
    more than the 16 tokens the drafts were to save on the embedded model.

    How far to draft: where the n-gram occurred twice before, the two continuations are compared.
    As far as they agree the text is the pattern's own ("(self):\n        return self.data.get('"),
    and all of that is drafted at once; where they differ at once (the name each copy of the pattern
    varies) one token is drafted, a pass that costs little more than a step. With one earlier
    occurrence there is no such evidence, and the draft length `k` doubles while the model agrees and
    falls back when it does not. After two passes in a row with nothing accepted, a few plain steps.

    `doc` is the text before the cursor in the document's order (the prompt without the suffix and
    the infilling markers) and is searched first: in the prompt itself the decoded tokens follow the
    suffix and a marker, so for the first tokens of a suggestion the last n-gram is a marker and
    the cursor's own line has no match there. The whole prompt (the suffix too) comes second."""

    NGRAMS = (3, 2)
    COOL_AFTER, COOL_STEPS = 2, 4  # passes with nothing accepted in a row, then plain steps before drafting again

    def __init__(self, context: list[int], max_draft: int = 7, doc: list[int] | None = None) -> None:
        doc = list(doc or ())
        fits = all(0 <= t < 0x110000 for t in context) and all(0 <= t < 0x110000 for t in doc)
        self.text = "".join(map(chr, context)) if fits else ""
        self.doc = "".join(map(chr, doc)) if fits else ""
        self.max_draft = max_draft if fits else 0  # a token id past Unicode's range: no drafts (never seen)
        self.k = 2  # drafts per pass after a lone occurrence: doubled while the model agrees, cut back when not
        self.cool = 0  # plain steps to take before drafting again, after passes the model rejected outright
        self.failed = 0  # passes in a row with no draft accepted
        self.steps = self.drafted = self.accepted = 0  # verify passes, tokens drafted, drafts the model agreed with

    def add(self, token: int) -> None:
        if self.max_draft and 0 <= token < 0x110000:
            self.text += chr(token)
            if self.doc:
                self.doc += chr(token)

    def draft(self, limit: int) -> list[int]:
        if self.cool > 0:
            self.cool -= 1
            return []
        limit = min(limit, self.max_draft)
        if limit <= 0:
            return []
        for text in (self.doc, self.text):
            for n in self.NGRAMS:
                if len(text) <= n:
                    continue
                tail = text[-n:]
                at = text.rfind(tail, 0, len(text) - 1)  # the latest occurrence with a token after it
                if at >= 0:
                    return [ord(c) for c in self._span(text, tail, at, limit)]
        return []

    def _span(self, text: str, tail: str, at: int, limit: int) -> str:
        """What to draft after the occurrence of `tail` at `at`: as far as it and the one before agree
        (at least a token), or `k` tokens where it is the only one."""
        after = text[at + len(tail) : at + len(tail) + limit]
        before = text.rfind(tail, 0, at + len(tail) - 1)
        if before < 0:
            return after[: self.k]
        other = text[before + len(tail) : before + len(tail) + len(after)]
        same = 0
        while same < len(after) and same < len(other) and after[same] == other[same]:
            same += 1
        return after[: max(1, same)]

    def feedback(self, drafted: int, accepted: int) -> None:
        """Adapt to how well the drafts go: a verify pass costs more per draft on a small model than a big one."""
        if accepted == drafted:
            self.k = min(self.max_draft, self.k * 2)
        else:
            self.k = max(1, accepted + 1)
        self.failed = self.failed + 1 if accepted == 0 else 0
        if self.failed >= self.COOL_AFTER:
            self.cool, self.failed = self.COOL_STEPS, 0

    def report(self) -> dict:
        return {"lookup_steps": self.steps, "drafted": self.drafted, "accepted_drafts": self.accepted}


def decode_n_tokens(model, logits: torch.Tensor, cache, rule: Rule, on_feed: Callable[[int], None] = _ignore,
                    lookup: Lookup | None = None) -> Decoded:
    """Greedy tokens after `logits`, as `rule` says, with their probabilities and the passes they took.

    The last token chosen is not fed back (nobody needs its successor);
    on_feed(token) is told of every token that is, as it is, so the caller can
    keep the cache's token list in step with the cache (also when go_on raises).
    With `lookup` (the prompt's tokens indexed), each step feeds the token and
    its prompt-lookup drafts in one pass and keeps the drafts the model would
    have chosen itself: the same tokens and probabilities as one token a step,
    fewer passes.
    """
    out = Decoded()
    tokens, probs, n, go_on = out.tokens, out.probs, rule.n, rule.go_on
    token, p = greedy_p(logits, rule.first_allowed, list(rule.first_banned) or None)
    while True:
        tokens.append(token)
        probs.append(p)
        if len(tokens) >= n or not go_on(tokens):
            return out
        drafts = _drafts(lookup, token, n - len(tokens)) if lookup is not None else None
        if not drafts:
            next_token, p = model.decode_greedy(token, cache)  # the native step picks it without handing logits back
            on_feed(token)
            token = next_token
            continue
        base = cache.length
        choices, agreed = _verify(model, token, drafts, cache, lookup)
        on_feed(token)
        kept = 1  # the token, then each agreed draft as decoding would have taken it, go_on asked after each
        try:
            for d, (_, p) in zip(drafts[:agreed], choices):
                tokens.append(d)
                probs.append(p)
                out.accepted_drafts += 1
                lookup.accepted += 1
                if len(tokens) >= n or not go_on(tokens):
                    return out
                lookup.add(d)
                on_feed(d)
                kept += 1
        finally:
            cache.truncate(base + kept)  # the drafts past the first disagreement (or the stop) are not the sequence
        token, p = choices[kept - 1]


def _drafts(lookup: Lookup, token: int, limit: int) -> list[int]:
    lookup.add(token)
    return lookup.draft(limit)


def _verify(model, token: int, drafts: list[int], cache, lookup: Lookup) -> tuple[list[tuple[int, float]], int]:
    """One verify pass feeding token and drafts: the greedy choice and its probability after each, and how many
    drafts the model agreed with (the Lookup told, to adapt)."""
    choices = model.verify([token, *drafts], cache)
    if choices is None:  # no multi-token pass here: one token at a time from now on
        lookup.max_draft = 0
        choices = [greedy_p(decode_one_token(model, token, cache))]
        drafts = []
    lookup.steps += 1
    lookup.drafted += len(drafts)
    agreed = 0
    while agreed < len(drafts) and choices[agreed][0] == drafts[agreed]:
        agreed += 1
    lookup.feedback(len(drafts), agreed)
    return choices, agreed
