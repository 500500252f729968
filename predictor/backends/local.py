"""The local backend: a causal LM in this process, with KV prefix reuse.

Built from LocalSettings; which engine runs the model, and why, is engine_choice.py's choice. It keeps the token ids and KV cache of its last few sequences ("slots", one per
document: engine/slots.py). A request tokenizes its prompt, finds the longest common token prefix
with a kept sequence, cuts the cache back to it and runs the model only over
the tokens after it. With the suffix-first FIM layout, the state after
accepting a suggestion is the sequence the decoder just produced, so its
prefetch starts decoding almost at once.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence, cast

from tabd.predictor.backends.backend_settings import LocalSettings
from tabd.predictor.types import (Backend, ContextChunk, GenSettings, Interrupted, ModelLoadError, Prediction, Query, never,
                                  prompt_chunks)
from tabd.predictor.engine import chunking, generate
from tabd.predictor.engine.runner import Runner
from tabd.predictor.engine.slots import Slot, SlotPool
from tabd.predictor.loading import loader
from tabd.predictor.loading.engine_choice import EngineChoice, after_hand_over, choose
from tabd.predictor.loading.threads import AdaptiveThreads
from tabd.predictor.prompt import prompt_ids
from tabd.predictor.prompt.fim import PAD
from tabd.predictor.prompt.templates import FimTemplate, detect_family, template_for
from tabd.predictor.text import postprocess
from tabd.predictor.text.names import KnownNames
from tabd.predictor.text.verify import CopyVerifier, ScoreTokens

if TYPE_CHECKING:
    from tabd.predictor.engine.kvcache import NumpyKV


@dataclass(frozen=True)
class PromptLayout:
    ids: list[int]
    heal: str  # text of the prefix's last token, backed off so the model can re-choose it
    context_tokens: int = 0  # ids[:context_tokens] are the workspace context
    before_cursor: list[int] = field(default_factory=list)  # the context's and the prefix's ids, in the document's order


# special tokens that end a document in the tokenizers models ship with (GPT-2's and SmolLM2's, Llama 3's, SentencePiece's,
# ChatML's, Gemma's): where the tokenizer has one as an added token, the suggestion ends there
END_OF_TEXT = ("<|endoftext|>", "<|end_of_text|>", "</s>", "<|im_end|>", "<|eot_id|>", "<eos>")
MAX_PAUSED = 8  # pre-empted requests whose window is remembered for their resumption
SHORT_MIN_TOKENS = 32  # the shortest window a cold request runs on, whatever the budget: a line or two of code
PRIOR_FLOPS = 30e9  # what the prefill speed is guessed from before any prefill ran: 2 x parameters a token at this rate


class PrefillSpeed:
    """How long a prefill takes here, per token: guessed from the model's size until measured, then a moving average
    of the chunks run (their time includes the attention over what the cache held, as a real prompt's does)."""

    WEIGHT = 0.3  # of the newest measurement

    def __init__(self, parameters: int) -> None:
        self.ms_per_token = 2 * max(1, parameters) / PRIOR_FLOPS * 1000
        self.measured = 0

    def ran(self, tokens: int, seconds: float) -> None:
        if tokens < 8:  # a keystroke's few tokens say more about overheads than about the prefill's rate
            return
        self.measured += 1
        if self.measured == 1:  # a model's first pass pays for paging its weights in (0.5B here: 123 ms a token
            return              # against 20-35 after), and the budget sized every window by it for a while
        ms = seconds * 1000 / tokens
        self.ms_per_token = ms if self.measured == 2 else (1 - self.WEIGHT) * self.ms_per_token + self.WEIGHT * ms

    def ms(self, tokens: int) -> float:
        return max(0, tokens) * self.ms_per_token

    def tokens_in(self, ms: float) -> int:
        return int(ms / max(1e-9, self.ms_per_token))


def within(budget_s: float, spent_s: float, steps: int, longest_s: float = 0.0) -> bool:
    """Whether one more decode step fits in the budget, at the mean time of the steps so far (the first token comes
    with the prefill) or the longest pass seen, whichever is more: the answer comes within the budget, not a step after
    it (a 0.5B step is 40-120 ms here). The longest pass counts because the tokens a verify pass accepted as drafts come
    together: per token they took a fraction of the pass that follows them."""
    step = spent_s / steps if steps > 0 else 0.0
    return spent_s + max(step, longest_s) <= budget_s


def cut_to_lines(text: str, chars: int, from_end: bool) -> str:
    """At most about `chars` characters of `text` in whole lines: the last lines (from_end) or the first ones.
    The line at the cursor is kept whole even where it alone is longer (the cut would fall inside what the user
    is typing)."""
    if len(text) <= chars:
        return text
    if from_end:
        start = len(text) - max(0, chars)
        at = text.find("\n", start)
        if at < 0 or at + 1 >= len(text):  # no line break after the cut: the cursor's line from its start
            return text[text.rfind("\n", 0, len(text)) + 1 :] if "\n" in text else text
        return text[at + 1 :]
    at = text.rfind("\n", 0, max(0, chars))
    return text[: at + 1] if at >= 0 else text.split("\n", 1)[0]


class LocalBackend(Backend):
    """Greedy FIM completion with a kept KV cache per document."""

    def __init__(self, settings: LocalSettings = LocalSettings(), verifier: CopyVerifier | None = None) -> None:
        """verifier: judges the copy candidate against the model's text (default: one over this model's tokenizer)."""
        self.settings = settings
        self.model_dir = str(settings.model_dir or loader.DEFAULT_MODEL_DIR)
        self.threads = AdaptiveThreads(settings.threads)
        self.choice: EngineChoice = choose(settings, self.threads)
        self._serve(self.choice)
        self.model, self.tokenizer, self.placement = self.choice.model, self.choice.tokenizer, self.choice.placement
        self.parameters = self.model.parameters
        self.template = self._choose_template(settings.fim)
        # prompt-lookup drafts and the copy candidate verified several tokens a native pass (same tokens, fewer
        # passes). None: per request (_lookup_now); True/False: always/never
        self.lookup = settings.lookup
        from tabd.predictor.engine.layout import AUTO_FP32_BYTES

        self.memory_bound = 4 * self.parameters > AUTO_FP32_BYTES  # decode streams more than it computes
        self.prefill_chunk = max(1, settings.prefill_chunk or generate.chunk_for(self.parameters))
        self.prefill_speed = PrefillSpeed(self.parameters)  # what the prefill budget is judged by
        self._per_pass: tuple[object, bool] = (None, False)  # (runner, whether its prefill passes convert weights)
        # requests pre-empted mid-prefill, by slot: (prefix, suffix) asked, and the short window they ran on (or None)
        self._paused: dict[str, tuple[str, str, tuple[str, str, PromptLayout] | None]] = {}
        self.context = int(getattr(self.model.config, "max_position_embeddings", 2048) or 2048)
        # the runner's allocator looked up at each call: a hand-over swaps the runner
        self.pool = SlotPool(lambda capacity: self.runner.new_cache(capacity), self.context, settings.kv_reuse,
                             settings.max_slots, settings.max_kv_bytes)
        self.marker_ids = self._marker_ids()
        self.stop_ids = self._stop_ids()
        self._vocab_text: list[str] | None = None
        self.known = KnownNames()
        self.verifier = verifier or CopyVerifier(self.tokenizer)
        self._first_tokens: prompt_ids.FirstTokens | None = None
        self.last_tokens: list[int] = []
        self._context_ids: tuple[tuple[ContextChunk, ...], list[int]] = ((), [])  # the last context's ids: it changes rarely
        self.model_id = f"{self.model_dir}|{self.template.name}"  # the engine is not part of it: all give the same tokens

    # -- the engine serving (engine_choice.py) -------------------------------------------------

    @property
    def runner(self) -> Runner:
        return self.choice.runner

    def _serve(self, choice: EngineChoice) -> None:
        """Serve from `choice`'s engine: what tabd/stats reports follows it (engine_name, engine_why, weights_why)."""
        self.choice = choice
        self.engine_name, self.engine_why, self.weights_why = choice.name, choice.why, choice.weights_why

    # -- set-up ---------------------------------------------------------------

    def _special_tokens(self) -> set[str]:
        tok = self.tokenizer
        return set(tok.all_special_tokens) | set(tok.get_added_vocab())

    def _choose_template(self, fim: str | None) -> FimTemplate:
        if fim:
            family, _, layout = fim.partition(":")
            try:
                return template_for(family, layout or None)
            except ValueError as exc:
                raise ModelLoadError(str(exc), "fim") from None
        return template_for(detect_family(self._special_tokens()))

    # -- the hand-over after a torch-free start --------------------------------------

    def can_hand_over(self) -> bool:
        """Whether torch+native should take over from the torch-free runner (engine auto, served torch-free)."""
        return self.choice.hands_over

    def prepare_hand_over(self) -> Runner:
        """torch+native over the torch-free runner's weights, sharing them (imports torch: off the model thread)."""
        from tabd.predictor.engine import swap
        from tabd.predictor.engine.boot import TorchFreeRunner

        runner = self.runner
        assert isinstance(runner, TorchFreeRunner), "a hand-over starts from the torch-free runner"
        return swap.fast_from_torch_free(runner)

    def hand_over(self, fast: Runner) -> None:
        """Serve from `fast` from now on; call it between requests, on the model thread. The slots' KV caches
        carry over as views of the same buffers, so no prompt runs again; the torch-free runner is let go."""
        from tabd.predictor.engine import swap

        # all, or none on error; a torch-free runner's slots hold NumpyKV caches
        caches = {key: swap.torch_cache(cast("NumpyKV", slot.cache)) for key, slot in self.pool.slots.items()}
        for key, cache in caches.items():
            self.pool.slots[key].cache = cache
        self._serve(after_hand_over(self.choice, fast))
        self.threads.use_torch()

    def _stop_ids(self) -> set[int]:
        """The template's stop tokens, EOS and the tokenizer's own end-of-text specials, and its FIM markers (past the
        first token a marker is the model starting another document: it ends the suggestion, never shows as text).

        A token is looked up among the tokenizer's added tokens first: SmolLM2's `<|endoftext|>` (its end of a
        document, in the plain layout the only end it writes besides EOS) is also its unknown token, and looked up
        by name and then dropped as "unknown" it was never a stop: its text was shown."""
        ids = set(self.marker_ids)
        added = self.tokenizer.get_added_vocab()
        for t in (*self.template.stop_toks, *END_OF_TEXT):
            tid = added.get(t)
            if tid is None and t in self.template.stop_toks:
                tid = self.tokenizer.convert_tokens_to_ids(t)
                tid = None if tid == self.tokenizer.unk_token_id else tid
            if isinstance(tid, int):
                ids.add(tid)
        if self.tokenizer.eos_token_id is not None:
            ids.add(self.tokenizer.eos_token_id)
        return ids

    def _marker_ids(self) -> list[int]:
        """The ids of the template's prefix, suffix and middle markers (and tabd's pad): never a first token.

        Banned rather than stopped at, so a request there still gets the model's best text, at the probability
        the model gave it (models that learnt to predict markers start some middles with one; stopping left
        those answers empty)."""
        t = self.template
        toks = (t.prefix_tok, t.suffix_tok, t.middle_tok) + ((PAD,) if t.family == "tabd" else ())
        ids = {self.tokenizer.convert_tokens_to_ids(tok) for tok in toks if tok}
        return sorted(i for i in ids if isinstance(i, int) and i != self.tokenizer.unk_token_id)

    def vocab_text(self) -> list[str]:
        if self._vocab_text is None:
            self._vocab_text = [self.tokenizer.decode([i]) for i in range(len(self.tokenizer))]
        return self._vocab_text

    # -- prompt ---------------------------------------------------------------

    def encode(self, text: str) -> list[int]:
        """Token ids of `text` as the prompt lays it out (no special tokens added)."""
        return prompt_ids.encode(self.tokenizer, text)

    def context_ids(self, chunks: Sequence[ContextChunk]) -> list[int]:
        """Token ids of the template's context block for `chunks` (each piece tokenized on its own, as in training)."""
        key = tuple(chunks)
        if self._context_ids[0] != key:
            self._context_ids = (key, prompt_ids.lay_out(self.tokenizer, self.template.context_pieces(key)))
        return self._context_ids[1]

    def layout(self, prefix: str, suffix: str, max_new_tokens: int, context: Sequence[ContextChunk] = ()) -> PromptLayout:
        """Prompt token ids for (prefix, suffix) after the context, trimmed to the model's context, last prefix token backed off.

        The workspace context goes first, so typing and accepting at the cursor only ever append to the
        sequence. When the whole does not fit, the context is dropped before the prefix is cut.
        """
        head = self.context_ids(context) if context else []
        budget = self.context - max_new_tokens - 8
        prefix_ids = self.encode(prefix)
        suffix_ids = self.encode(suffix)
        heal = ""
        if prefix_ids:
            last = self.tokenizer.decode(prefix_ids[-1:])
            if last.strip() and last[-1:].isalnum() and len(last) <= 12 and prefix.endswith(last):
                prefix_ids, heal = prefix_ids[:-1], last
        suffix_budget = budget // 4
        if len(suffix_ids) > suffix_budget and len(prefix_ids) + len(suffix_ids) > budget:
            suffix_ids = suffix_ids[:suffix_budget]
        if len(prefix_ids) + len(suffix_ids) > budget:
            prefix_ids = prefix_ids[len(prefix_ids) + len(suffix_ids) - budget :]
        if len(head) + len(prefix_ids) + len(suffix_ids) > budget:
            head = []
        slots = {prompt_ids.PREFIX_SLOT: prefix_ids, prompt_ids.SUFFIX_SLOT: suffix_ids}
        pieces = self.template.pieces(prompt_ids.PREFIX_SLOT, prompt_ids.SUFFIX_SLOT)
        return PromptLayout(head + prompt_ids.lay_out(self.tokenizer, pieces, slots), heal, len(head), head + prefix_ids)

    def _allowed_first(self, heal: str) -> Any:
        """The ids of the tokens that start with `heal` (prompt_ids.FirstTokens), as the runner's logits index."""
        if not heal:
            return None
        if self._first_tokens is None:
            self._first_tokens = prompt_ids.FirstTokens(self.vocab_text(), self.stop_ids)
        ok = self._first_tokens.starting_with(heal)
        if not ok:
            return None
        if self.choice.numpy_logits:
            import numpy as np

            return np.array(ok, dtype=np.int64)
        import torch

        return torch.tensor(ok, dtype=torch.long, device=self.model.device)

    def kv_bytes(self) -> int:
        """Bytes the slots' caches hold (allocated, not just used): what max_kv_bytes bounds."""
        return self.pool.kv_bytes()

    # -- the request ------------------------------------------------------------

    def predict(self, query: Query, should_stop: Callable[[], bool] = never) -> Prediction:
        prefix, suffix, settings, slot_id, context = (query.prefix, query.suffix, query.settings, query.slot_id,
                                                      query.context)
        priority = query.priority  # one engine, one user: the daemon's scheduler already ran the urgent first
        lookup = self._lookup_now(self.threads.adjust())
        if settings.raw:
            return self._predict_raw(prefix, suffix, settings, should_stop, slot_id, lookup)
        foreground = priority <= 0  # the budget is for a request the user waits for, not for background work
        layout = self.layout(prefix, suffix, settings.max_new_tokens, prompt_chunks(context))
        asked, paused = slot_id, (prefix, suffix)
        waited_ms = query.waited_ms if foreground else 0.0  # already spent of the budgets, before this run
        short = self._short_window(slot_id, prefix, suffix, layout, settings, waited_ms) if foreground else None
        if short is not None:  # a cold prompt over the budget: the lines nearest the cursor, in a slot of their own
            prefix, suffix, layout = short
            slot_id, context = f"{slot_id}#short", ()
        line = postprocess.CursorLine.of(prefix, suffix)
        ids = layout.ids
        t0 = time.perf_counter()
        try:
            slot, reused, logits = self._prefill(slot_id, ids, should_stop, foreground)
        except Interrupted:
            self._pause(foreground, asked, slot_id, (*paused, short))
            raise
        self.pool.unpin(slot_id)
        t1 = time.perf_counter()

        heal = layout.heal
        tokenizer = self.tokenizer
        decode_budget = self._decode_budget(waited_ms / 1000 + t1 - t0) if foreground else 0.0
        asked_at, longest = [t1], [0.0]  # when go_on was last asked, and the longest time between two asks (a pass)

        def go_on(tokens: list[int]) -> bool:
            if tokens[-1] in self.stop_ids:
                return False
            if should_stop():
                raise Interrupted()
            if decode_budget:
                now = time.perf_counter()
                longest[0], asked_at[0] = max(longest[0], now - asked_at[0]), now
                if not within(decode_budget, now - t1, len(tokens) - 1, longest[0]):
                    return False  # the budget is spent: the answer is what it has (llama.vim's t_max_predict_ms)
            text = tokenizer.decode(tokens)[len(heal) :]
            if postprocess.repeats(text):
                return False
            return not postprocess.whole(text, line, settings.multiline, settings.max_lines)

        look = generate.Lookup(ids, doc=layout.before_cursor) if lookup and self.choice.native_passes else None
        rule = generate.Rule(settings.max_new_tokens, go_on, self._allowed_first(heal), self.marker_ids)
        try:
            decoded = generate.decode_n_tokens(self.runner, logits, slot.cache, rule, slot.ids.append, look)
        except Interrupted:
            self._pause(foreground, asked, slot_id, (*paused, short))
            raise
        t2 = time.perf_counter()
        tokens = decoded.tokens
        self.last_tokens = list(tokens)
        if tokens and tokens[-1] in self.stop_ids:
            tokens = tokens[:-1]
        raw = tokenizer.decode(tokens)
        raw = raw[len(heal) :] if raw.startswith(heal) else ""
        text = postprocess.finish(raw, line, settings.multiline, settings.max_lines)
        confidence = self.verifier.confidence(tokens, decoded.probs, heal, line, settings, len(text))
        choice = self.verifier.choose(prefix, text, confidence, heal, line, settings, context,
                                      self._scorer(slot, len(ids), logits, heal, lookup))
        text, confidence, scored, other = choice.text, choice.confidence, choice.scored, choice.other
        if choice.tokens is not None:
            self.last_tokens = choice.tokens  # what this request "decoded", for serve-model's raw text
        if settings.known_names:
            text, confidence = self.known.judge(prefix, suffix, text, confidence, context)
        return Prediction(
            text=text,
            prefill_tokens=len(ids) - reused,
            reused_tokens=reused,
            decode_tokens=len(tokens) + len(scored.probs),
            prefill_ms=(t1 - t0) * 1000,
            decode_ms=(t2 - t1) * 1000,
            confidence=confidence,
            context_tokens=layout.context_tokens,
            decode_passes=len(tokens) - decoded.accepted_drafts + scored.passes,
            accepted_drafts=decoded.accepted_drafts,
            engine=self.engine_name,
            torch_loaded="torch" in sys.modules,
            alternatives=(other,) if other.strip() and other != text else (),
            window_chars=len(prefix) + len(suffix),
            wait_ms=waited_ms,
        )

    def _decode_budget(self, spent_s: float) -> float:
        """Seconds a request the user waits for may decode: max_predict_ms, less what its wait and its prefill
        (`spent_s`, the two) took over max_prompt_ms (a wait behind other work, a window sized by a speed measured
        before the machine got busier), so that the two budgets bound the request from its asking; at least a token's
        worth (a first token is always shown)."""
        budget = self.settings.max_predict_ms / 1000
        if not budget:
            return 0.0
        over = max(0.0, spent_s - self.settings.max_prompt_ms / 1000) if self.settings.max_prompt_ms else 0.0
        return max(1e-3, budget - over)

    def _predict_raw(self, prefix: str, suffix: str, settings: GenSettings, should_stop: Callable[[], bool],
                     slot_id: str, lookup: bool) -> Prediction:
        """The model's text as written, to its stop token or the budget (GenSettings.raw: a next-edit answer). The
        prompt's own text drafts the decode (an updated window is mostly the window copied), so it costs a few
        passes; the text is the same without them."""
        layout = self.layout(prefix, suffix, settings.max_new_tokens)
        ids = layout.ids + self.encode(layout.heal)  # nothing backed off: the answer starts a line of its own
        t0 = time.perf_counter()
        slot, reused, logits = self._prefill(slot_id, ids, should_stop)
        t1 = time.perf_counter()

        def go_on(tokens: list[int]) -> bool:
            if tokens[-1] in self.stop_ids:
                return False
            if should_stop():
                raise Interrupted()
            return True

        look = generate.Lookup(ids, doc=ids) if lookup and self.choice.native_passes else None
        rule = generate.Rule(settings.max_new_tokens, go_on, None, self.marker_ids)
        decoded = generate.decode_n_tokens(self.runner, logits, slot.cache, rule, slot.ids.append, look)
        t2 = time.perf_counter()
        tokens = list(decoded.tokens)
        self.last_tokens = list(tokens)
        stopped = bool(tokens) and tokens[-1] in self.stop_ids
        if stopped:
            tokens = tokens[:-1]
        text = self.tokenizer.decode(tokens)
        confidence = tuple((len(self.tokenizer.decode(tokens[:i + 1])), round(p, 4))
                           for i, p in enumerate(decoded.probs[:len(tokens)]))
        return Prediction(text=text, prefill_tokens=len(ids) - reused, reused_tokens=reused,
                          decode_tokens=len(decoded.tokens), prefill_ms=(t1 - t0) * 1000, decode_ms=(t2 - t1) * 1000,
                          confidence=confidence, decode_passes=len(decoded.tokens) - decoded.accepted_drafts,
                          accepted_drafts=decoded.accepted_drafts, engine=self.engine_name,
                          torch_loaded="torch" in sys.modules)

    def _scorer(self, slot: Slot, prompt_len: int, logits: Any, heal: str, batch: bool) -> ScoreTokens:
        """Scoring tokens after the prompt in this request's slot (the copy candidate's): the slot is cut back to the
        prompt, and keeps the tokens whose successor was scored; several a pass where `batch` (lookup on)."""
        def score(ids: list[int], min_joint: float) -> generate.Scored:
            self.pool.cut(slot, prompt_len)
            scored: generate.Scored = generate.score_tokens(self.runner, logits, slot.cache, ids, min_joint, self._allowed_first(heal),
                                           batch=batch)
            slot.ids.extend(ids[: max(0, len(scored.probs) - 1)])  # the tokens fed (the last scored one is not)
            return scored

        return score

    def _lookup_now(self, threads: int) -> bool:
        """Whether this request verifies drafts and the copy several tokens a pass (the output is the same).
        Unless set: where decode is bound by memory (a pass of 8 costs about one of 1), and on one thread. At
        2 threads with another job on the cores a small model's pass waits at its barriers (0.27-1.72x)."""
        return self.lookup if self.lookup is not None else (self.memory_bound or threads == 1)

    def _prefill(self, slot_id: str, ids: list[int], should_stop: Callable[[], bool],
                 foreground: bool = False) -> tuple[Slot, int, Any]:
        """(slot, tokens reused, logits at the end) after running the part of `ids` the slot's cache lacks."""
        slot, reused = self.pool.slot_for(slot_id, ids)
        reused = min(reused, len(ids) - 1)  # the model must run at least one token to give logits
        self.pool.cut(slot, reused)
        last = time.perf_counter()

        def ran(piece: list[int]) -> None:
            nonlocal last
            slot.ids.extend(piece)
            now = time.perf_counter()
            self.prefill_speed.ran(len(piece), now - last)
            last = now

        # chunk by chunk, each kept as it is run: a pre-empted or cancelled prefill leaves its work for the next
        # request sharing the prefix (typically the same document one keystroke on, or the same request resumed)
        logits = generate.prefill(self.runner, ids[reused:], slot.cache, self._chunk(foreground), should_stop, ran)
        return slot, reused, logits

    def _pause(self, foreground: bool, asked: str, slot_id: str,
               window: tuple[str, str, tuple[str, str, PromptLayout] | None]) -> None:
        """A request stopped for another (pre-empted) before it answered: its slot is kept from eviction while it
        waits, and it resumes on the window it started, whatever the speed measured meanwhile says (its KV is for it)."""
        if not foreground:
            return
        self.pool.pin(slot_id)
        self._paused[asked] = window
        while len(self._paused) > MAX_PAUSED:
            del self._paused[next(iter(self._paused))]

    def _chunk(self, foreground: bool = False) -> int:
        """Tokens per prefill chunk now: the size's (or the setting's), shortened to what this machine runs in
        chunking.CHUNK_MS at the speed measured, so that a request coming during a prefill waits that long at most.
        A request the user waits for is itself the one to finish: its chunks may take up to chunking.FOREGROUND_MS (what
        another document's request then waits at most), as longer native passes run a token faster (at 0.5B here, CPU time a
        token: 14.7 ms in passes of 8, 12.0-12.9 in passes of 32)."""
        if self.settings.prefill_chunk or self._converts_per_pass():
            return self.prefill_chunk  # set, or an engine whose every pass has a fixed cost: shorter costs more
        most = chunking.FOREGROUND_MS if foreground else chunking.CHUNK_MS
        return chunking.chunk_within(self.prefill_chunk, self.prefill_speed.ms_per_token, most)

    def _converts_per_pass(self) -> bool:
        runner = self.runner
        if self._per_pass[0] is not runner:  # asked once per runner (a hand-over swaps it)
            ask = getattr(runner, "converts_per_pass", None)
            self._per_pass = (runner, bool(ask()) if callable(ask) else False)
        return self._per_pass[1]

    def _short_window(self, slot_id: str, prefix: str, suffix: str, layout: PromptLayout,
                      settings: GenSettings, waited_ms: float = 0.0) -> tuple[str, str, PromptLayout] | None:
        """(prefix, suffix, layout) of the lines nearest the cursor where the prompt's uncomputed part would take
        longer to prefill than what is left of max_prompt_ms after the request's wait (a cold document, or one asked
        behind other work), sized to fit it; None where the whole fits. A wait past the budget leaves the shortest
        window (SHORT_MIN_TOKENS): the user has waited the prefill's time already."""
        if not self.settings.max_prompt_ms or not self.settings.kv_reuse:
            return None
        budget = max(0.0, self.settings.max_prompt_ms - waited_ms)
        paused = self._paused.pop(slot_id, None)
        if paused is not None and paused[:2] == (prefix, suffix):
            return paused[2]  # a request pre-empted mid-prefill goes on with the window it started (its KV is for it)
        speed = self.prefill_speed
        if speed.ms(len(layout.ids)) <= budget:
            return None  # even the whole prompt fits: no need to look at what the slots hold
        todo = len(layout.ids) - self.pool.held(layout.ids)
        if speed.ms(todo) <= budget:
            return None
        text_tokens = max(1, len(layout.ids) - layout.context_tokens)
        per_token = (len(prefix) + len(suffix)) / text_tokens  # characters a token, in this prompt
        # the largest window whose uncomputed part fits what the wait left, else the one that costs least (where a
        # request before ran on one, its keys and values are kept: a keystroke after a short answer that waited behind
        # the background work goes on there, rather than on fewer lines it would have to compute)
        cheapest: tuple[float, tuple[str, str, PromptLayout]] | None = None
        for fits in self._window_sizes():
            head = cut_to_lines(prefix, int(fits * 0.75 * per_token), from_end=True)
            tail = cut_to_lines(suffix, int(fits * 0.25 * per_token), from_end=False)
            short = self.layout(head, tail, settings.max_new_tokens)
            if len(short.ids) >= todo:
                return None  # the whole window costs no more
            cost = speed.ms(len(short.ids) - self.pool.held(short.ids))
            if speed.ms(fits) - (speed.ms(len(short.ids)) - cost) <= budget:  # its nominal size, less what is kept
                cheapest = (cost, (head, tail, short))
                break
            if cheapest is None or cost < cheapest[0]:
                cheapest = (cost, (head, tail, short))
        if cheapest is not None and (cheapest[0] <= speed.ms(1) or cheapest[0] < speed.ms(todo)):
            return cheapest[1]
        return None

    def _window_sizes(self) -> list[int]:
        """The short window's sizes in tokens, largest first: powers of two from what the whole prefill budget fits at
        the speed measured down to SHORT_MIN_TOKENS. Powers of two: the next keystroke picks the same lines though the
        speed measured moves a little, and finds their keys and values kept."""
        fits = SHORT_MIN_TOKENS
        while fits * 2 <= self.prefill_speed.tokens_in(self.settings.max_prompt_ms):
            fits *= 2
        sizes = []
        while fits >= SHORT_MIN_TOKENS:
            sizes.append(fits)
            fits //= 2
        return sizes

    def warm(self, query: Query, should_stop: Callable[[], bool] = never) -> Prediction:
        """Prefill the prompt predict() would run, decode nothing (llama.vim's n_predict 0): its next call is a KV hit."""
        self.threads.adjust()
        layout = self.layout(query.prefix, query.suffix, query.settings.max_new_tokens, prompt_chunks(query.context))
        t0 = time.perf_counter()
        _, reused, _ = self._prefill(query.slot_id, layout.ids, should_stop)
        return Prediction("", prefill_tokens=len(layout.ids) - reused, reused_tokens=reused,
                          prefill_ms=(time.perf_counter() - t0) * 1000, context_tokens=layout.context_tokens)
