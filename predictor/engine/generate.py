"""Generation as a few small functions over an explicit KV cache (the gpt-fast shape).

`prefill` runs the prompt tokens the cache does not hold yet; `decode_one_token`
runs one token; `decode_n_tokens` loops, asking the caller after every token
whether to go on. Greedy only: the same state always gives the same answer,
which is what lets the daemon cache answers by state.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from tabd.predictor.engine.chunking import CHUNK_WORK, PREFILL_CHUNK, chunk_for  # noqa: F401 (re-exported)
from tabd.predictor.engine.layout import PASS_TOKENS
from tabd.predictor.engine.runner import Runner, greedy_p, inference, token_p
from tabd.predictor.types import Interrupted

if TYPE_CHECKING:  # logits are torch tensors, or numpy arrays from the torch-free runner (boot.py)
    import torch

__all__ = ["Runner", "chunk_for", "decode_n_tokens", "decode_one_token", "forward_last", "greedy", "greedy_p", "prefill",
           "score_tokens"]


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
                 first_allowed: torch.Tensor | None = None, batch: bool = True,
                 passes: list[int] | None = None) -> list[float]:
    """The model's probability of each of `tokens` in turn (teacher-forced), feeding each into the cache.

    Stops once the joint probability of the tokens so far falls below min_joint:
    nothing after that point can be shown. The cache then holds the tokens whose
    successor was scored (one fewer than the probabilities). Where the runner has
    a multi-token pass (and `batch`), 2, then 4, then up to 8 tokens are fed per
    pass, the cache cut back after a stop: the same numbers (each row is the
    logits one step gives), a pass per 8 tokens of a long copy instead of one per
    token. `passes`, when given, is told the tokens of each model pass.
    """
    probs: list[float] = []
    p = token_p(logits, tokens[0], first_allowed) if tokens else None
    if p is None:
        return probs
    probs.append(p)
    joint = p
    fed = 0  # tokens fed so far: tokens[:fed]
    step = 2  # tokens per pass, doubled while the copy holds: a copy rejected early costs a short pass only
    verify_logits = getattr(model, "verify_logits", None) if batch else None
    while joint >= min_joint and len(probs) < len(tokens):
        k = min(step if verify_logits else 1, len(tokens) - 1 - fed)
        step = min(PASS_TOKENS, step * 2)
        rows = verify_logits(tokens[fed : fed + k], cache) if k > 1 else None
        if rows is None:  # one token a pass (transformers' caches too: they have no `length` to cut back to)
            k, rows = 1, [forward_last(model, [tokens[fed]], cache)]
        if passes is not None:
            passes.append(k)
        base = cache.length - k if k > 1 else 0
        for j in range(k):
            p = token_p(rows[j], tokens[fed + j + 1])
            probs.append(p)
            joint *= p
            if joint < min_joint or len(probs) == len(tokens):
                if k > 1:
                    cache.truncate(base + j + 1)  # as if fed one at a time up to here
                return probs
        fed += k
    return probs


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


def decode_n_tokens(
    model,
    logits: torch.Tensor,
    cache,
    n: int,
    go_on: Callable[[list[int]], bool],
    on_feed: Callable[[int], None],
    first_allowed: torch.Tensor | None = None,
    probs: list[float] | None = None,
    lookup: Lookup | None = None,
    first_banned: list[int] | None = None,
) -> list[int]:
    """Greedy tokens after `logits`, until n tokens or go_on(tokens) is False.

    The last token chosen is not fed back (nobody needs its successor);
    on_feed(token) is told of every token that is, so the caller can keep
    the cache's token list in step with the cache. When `probs` is given,
    the model's probability of each chosen token is appended to it (what
    confidence gating cuts suggestions by). With `lookup` (the prompt's
    tokens indexed), each step feeds the token and its prompt-lookup drafts
    in one pass and keeps the drafts the model would have chosen itself:
    the same tokens and probabilities as one token a step, fewer passes.
    `first_banned` are never the first token (greedy_p's `banned`).
    """
    tokens: list[int] = []
    token, p = greedy_p(logits, first_allowed, first_banned)
    while True:
        tokens.append(token)
        if probs is not None:
            probs.append(p)
        if len(tokens) >= n or not go_on(tokens):
            return tokens
        if lookup is not None:
            lookup.add(token)
            drafts = lookup.draft(n - len(tokens))
            if drafts:
                step = _lookup_step(model, token, drafts, cache, n, tokens, go_on, on_feed, probs, lookup)
                if step is None:
                    return tokens
                token, p = step
                continue
        next_token, p = model.decode_greedy(token, cache)  # the native step picks it without handing logits back
        on_feed(token)
        token = next_token


def _lookup_step(model, token, drafts, cache, n, tokens, go_on, on_feed, probs, lookup):
    """One verify pass: feeds token and drafts, keeps the agreed drafts (appended to tokens as plain
    decoding would, go_on asked after each), and cuts the cache back to what was kept. The next token
    and its probability, or None when go_on said stop at a draft."""
    base = cache.length
    choices = model.verify([token, *drafts], cache)
    if choices is None:  # no multi-token pass here: one token at a time
        lookup.max_draft = 0
        choices = [greedy_p(decode_one_token(model, token, cache))]
        drafts = []
    lookup.steps += 1
    lookup.drafted += len(drafts)
    on_feed(token)
    agreed = 0
    while agreed < len(drafts) and choices[agreed][0] == drafts[agreed]:
        agreed += 1
    lookup.feedback(len(drafts), agreed)
    kept = 1
    try:
        for i, d in enumerate(drafts[:agreed]):
            tokens.append(d)
            lookup.accepted += 1
            if probs is not None:
                probs.append(choices[i][1])
            if len(tokens) >= n or not go_on(tokens):
                return None
            lookup.add(d)
            on_feed(d)
            kept += 1
    finally:
        cache.truncate(base + kept)  # the drafts past the first disagreement (or the stop) are not the sequence
    return choices[kept - 1]
