"""The remote backend: suggestions from an OpenAI-compatible server (llama.cpp, vLLM, Ollama, `tabd serve-model`).

The same FIM templates and the same clean-up as the local backend: the prompt
is the template laid out as text (special tokens written as text, which these
servers tokenize as specials), and the streamed raw text goes through
postprocess.finish as local.py does. Routes, chosen once per server:
- "prompt": POST /v1/completions with the FIM prompt string (llama.cpp, vLLM, serve-model);
- "infill": POST /infill with input_prefix/input_suffix (llama.cpp's llama-server; its own FIM tokens);
- "suffix": POST /v1/completions with prompt=prefix and suffix=suffix (Ollama).

predict() runs on the daemon's model worker. The HTTP request runs on a helper
thread (wire.py) and streams (SSE); the worker waits on its chunks and polls
should_stop(), so a stop returns at once: the socket is shut down, which ends
the server's request too. Failures are RemoteError: one line naming the URL.

Faults an engine shows (README, "Faults"): a refused connection marks the engine
down for DOWN_S (every request in it answers at once), then the next request
tries once, so tabd reconnects by itself; a connection dropped before or during
an answer (a restart) is retried; a 200 that is not an event stream is read as
the JSON body it is (an error, or a whole completion); a model name the engine
no longer serves is looked up again when tabd chose it. The API key is never
in a message: the engine's own words are scrubbed of it.

Confidence: each request asks for the chosen tokens' probabilities (OpenAI
`logprobs: 0`; serve-model sends its own in the answer's `tabd` field), so
--min-confidence shows only the part of a remote suggestion the model is sure of,
as it does locally. An engine that refuses the field is asked again without it,
and is not asked for it again (its suggestions are then shown whole).

Priorities: each request carries the daemon's priority for it (0 a request the
user waits for, a prefetch its depth, a warm-up 1), sent as vLLM's `priority`
field (lower sooner) where the engine orders by it (orders_by_priority).

The budget of a request the user waits for (--max-prompt-ms, --max-predict-ms),
as llama.vim sends it: llama-server (/infill, and its /v1/completions) gets
`t_max_prompt_ms` and `t_max_predict_ms` in the body (it stops predicting once
the time is up and a line is done); every engine's stream is cut max_predict_ms
after its first token, the answer being what came (the connection closed stops
the engine's decode); and engines without such fields are asked for no more
`max_tokens` than their measured decode rate fits in the budget. The budgets
count from the request's asking, as the local backend's do: what it waited
before this call (Query.waited_ms: the daemon's queue, paused behind a newer
request of another document) is taken from max_prompt_ms first, and the decode
gets what is left of the two together (_budgets); the answer's wait_ms says so.
"""
from __future__ import annotations

import json
import math
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import httpx

from tabd.predictor.text import postprocess
from tabd.predictor.prompt.prompt_text import fim_prompt, guess_template
from tabd.predictor.prompt.templates import FimTemplate, template_for
from tabd.predictor.prompt.fim import FAMILIES, PAD, chunk_text
from tabd.predictor.backends.backend_settings import RemoteSettings
from tabd.predictor.types import Backend, GenSettings, Interrupted, Prediction, Query, never, prompt_chunks
from tabd.predictor.backends.urls import shown_url
from tabd.predictor.backends.wire import Call, RemoteError, Retry, error_message, one_line

SERVER_FIM = "server"  # the FIM template setting that lets the server apply the model's own
PRIORITY_MODES = ("auto", "on", "off")
VLLM_PARALLEL = 4  # requests in flight to a vLLM server when --parallel is left at 1 (the daemon's scheduler follows it)
PRIORITY_ENGINES = ("tabd", "vllm")  # owned_by of engines that order requests by `priority` (vLLM: when started so)
# A refused engine is not asked again for this long (each request in it answers at once); then one request tries
# once, with no retries, so an engine that is back is noticed within this time and one that is not costs nothing.
DOWN_S = 0.25
# What a budget that the request's wait used up is sent as, in ms: never 0 or less, which llama-server reads as no
# limit. 1 is what llama.vim itself sends for its background requests: llama-server stops at the first line's end,
# and the stream is cut after the first token that comes (the engine answers with what it has, a first token always).
BUDGET_FLOOR_MS = 1

Json = dict[str, Any]


@dataclass
class Streamed:
    """What one streamed answer brought: the raw text, when its first text came, how many chunks, the server's own
    counts, and the model's probability of each token as (end of the raw text after it, p) where the engine sent
    them (OpenAI `logprobs`; serve-model's own `tabd.confidence` is already in the finished text's terms)."""

    text: str = ""
    first_at: float | None = None
    chunks: int = 0
    stats: dict[str, Any] = field(default_factory=dict)
    marks: list[tuple[int, float]] = field(default_factory=list)
    _base: int | None = None  # the first token's text_offset (llama-cpp-python's count the prompt too)
    _end: int = 0  # where the last token marked ends
    _start: int = 0  # ... and starts

    def mark(self, probs: list[tuple[int | None, str, float]]) -> None:
        """Each token's end in the raw text, from its own text and offset: an engine's text can lag its tokens
        (vLLM holds back what could start a stop string, and sends the tokens' logprobs meanwhile)."""
        for offset, token, p in probs:
            if offset is not None:
                self._base = offset if self._base is None else self._base
                start = offset - self._base
                if self.marks and start >= self._start:  # where this one starts is where the one before ended
                    self.marks[-1] = (start, self.marks[-1][1])  # (a token spelled otherwise than its text: `<0x20>`)
                self._end = start
            self._start = self._end
            self._end += len(token)
            self.marks.append((self._end, p))

    def unsure_from(self, floor: float) -> int | None:
        """The end of the token that took the joint probability of the text under `floor`, once the text has come
        that far (vLLM's text can lag its tokens): nothing after it would be shown, and with it the answer says
        the model was unsure (gating hides it) rather than that it had nothing to say. None before that."""
        joint = 1.0
        for at, p in self.marks:
            joint *= p
            if joint < floor:
                return at if len(self.text) >= at else None
        return None


@dataclass
class ServerInfo:
    """What one look at the server told us."""

    models: list[str] = field(default_factory=list)
    owned_by: str = ""
    fim: str | None = None  # a template the server advertises (tabd serve-model does)
    infill: bool = False  # llama-server's /infill is there
    slots: int = 1  # requests the server decodes at once (llama-server's total_slots)


class DecodeRate:
    """The engine's decode time per streamed chunk (about a token), a moving average over answers the user waited for:
    what max_tokens is sized by where the engine takes no time limit of its own."""

    WEIGHT = 0.3
    MIN_CHUNKS = 4  # fewer say more about the stream's start than about the decode's rate

    def __init__(self) -> None:
        self.ms_per_token: float | None = None

    def ran(self, chunks: int, seconds: float) -> None:
        if chunks < self.MIN_CHUNKS or seconds <= 0:
            return
        ms = seconds * 1000 / (chunks - 1)  # the first chunk's time is the prefill's
        self.ms_per_token = ms if self.ms_per_token is None else (1 - self.WEIGHT) * self.ms_per_token + self.WEIGHT * ms

    def tokens_in(self, ms: float, most: int) -> int:
        """How many tokens fit in ms (at least 1, at most `most`); `most` until a rate is measured."""
        if self.ms_per_token is None or ms <= 0:
            return most
        return max(1, min(most, int(ms / max(1e-6, self.ms_per_token)) + 1))


class RemoteBackend(Backend):
    """Greedy FIM completion from a server speaking the OpenAI completions API."""

    engine_name = "remote"
    stops_below = True
    plain_prompts = True

    def __init__(self, settings: RemoteSettings) -> None:
        url = settings.url
        self._secret = settings.api_key or ""
        if not url or not url.startswith(("http://", "https://")):
            raise RemoteError(f"the server URL must be an http:// or https:// URL, got {shown_url(url or '')!r}", "url")
        self.endpoint = url.rstrip("/")  # where requests go (a password in it is sent, never shown)
        if self.endpoint.endswith("/v1"):  # people paste the OpenAI base URL; routes are added here
            self.endpoint = self.endpoint[:-3]
        self.url = shown_url(self.endpoint)  # what messages, tabd/stats and the log say
        self.chosen_model = settings.model is not None  # the user's name: never swapped for another
        self.model = settings.model
        self.fim = settings.fim
        self.total_timeout = settings.total_timeout
        self.retries = settings.retries
        self.backoff = settings.backoff
        headers = {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
        read = settings.read_timeout
        self.connect_timeout, self.read_timeout = settings.connect_timeout, read
        self.client = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(connect=settings.connect_timeout, read=read, write=read, pool=read),
            limits=httpx.Limits(max_connections=8, max_keepalive_connections=4),
        )
        if settings.priority not in PRIORITY_MODES:
            raise RemoteError(f"priority must be one of {', '.join(PRIORITY_MODES)}, got {settings.priority!r}",
                              "priority")
        self.priority_mode = settings.priority
        self.max_prompt_ms, self.max_predict_ms = settings.max_prompt_ms, settings.max_predict_ms
        self.decode_rate = DecodeRate()
        self.orders_by_priority = settings.priority == "on"  # auto: decided when the engine says what it is
        self.priority_refused = ""  # the engine's words when it refused the field (auto then stops sending it)
        # each token's probability (OpenAI `logprobs`), so confidence gating (--min-confidence) shows only what the
        # model is sure of, as it does locally; an engine that refuses the field is not asked again
        self.asks_logprobs = True
        self.logprobs_refused = ""
        self.gives_confidence = None
        self.template: FimTemplate | None = self._explicit_template(self.fim)
        self.info: ServerInfo | None = None
        self.route: str | None = None
        self._down_until = 0.0
        self._down_reason = ""
        self.logit_bias: dict[str, int] = {}  # token id -> bias, sent with each request (vLLM: the FIM markers)
        self._resolving = threading.Lock()  # predict() is safe to call from several threads; discovery runs once
        # How many requests the server runs at once; the daemon's single model worker uses one. See README.
        self.parallel = 1
        if settings.discover:
            try:
                self._resolve()
            except RemoteError as exc:
                if "cannot reach" not in str(exc):
                    raise  # unknown model, no template: no request will work, say so at load
        self.model_id = self._model_id()

    def _model_id(self) -> str:
        return f"remote:{self.url}:{self.model or '?'}|{self._template_name()}"

    # -- what the server is ------------------------------------------------------

    def _explicit_template(self, fim: str | None) -> FimTemplate | None:
        if not fim or fim == SERVER_FIM:
            return None
        family, _, layout = fim.partition(":")
        try:
            return template_for(family, layout or None)
        except ValueError as exc:
            raise RemoteError(f"FIM template {fim!r}: {exc}", "fim") from None

    def _template_name(self) -> str:
        if self.template is not None:
            return self.template.name
        return self.route if self.route in ("infill", "suffix") else (self.fim or "?")

    def _get(self, path: str) -> httpx.Response | None:
        """GET a discovery path; None when the server has no such route."""
        try:
            response = self.client.get(self.endpoint + path)
        except httpx.TransportError as exc:
            raise self._transport_error(path, exc) from None
        return response if response.status_code < 400 else None

    def _discover(self) -> ServerInfo:
        info = ServerInfo()
        response = self._get("/v1/models")
        if response is not None:
            try:
                data = response.json().get("data") or []
            except (ValueError, AttributeError):
                data = []
            for entry in data:
                if isinstance(entry, dict) and entry.get("id"):
                    info.models.append(str(entry["id"]))
                    info.owned_by = info.owned_by or str(entry.get("owned_by") or "")
                    fim = (entry.get("tabd") or {}).get("fim") if isinstance(entry.get("tabd"), dict) else None
                    info.fim = info.fim or fim
        props = self._get("/props") if info.owned_by not in ("tabd", "vllm", "library") else None
        if props is not None:
            try:
                data = props.json()
            except ValueError:
                data = None
            if isinstance(data, dict) and "default_generation_settings" in data:
                info.infill = True
                info.slots = int(data.get("total_slots") or 1)
        return info

    def _resolve(self) -> None:
        """Look at the server once: the model name to send, the template, the route."""
        if self.route is not None:
            return
        with self._resolving:
            if self.route is None:
                self._resolve_now()

    def _resolve_now(self) -> None:
        info = self._discover()
        if self.model and info.models and self.model not in info.models:
            raise RemoteError(f"{self.url}: model {self.model!r} is not served there (it serves: {', '.join(info.models)})",
                              "model")
        self.model = self.model or (info.models[0] if info.models else None)
        ollama = info.owned_by == "library"  # it wraps text prompts in the chat template; `suffix` gets the FIM one
        if self.template is None and self.fim != SERVER_FIM and not ollama:
            if info.fim:
                family, _, layout = info.fim.rpartition("-")
                self.template = self._explicit_template(f"{family}:{layout}")
            else:
                self.template = guess_template(self.model or "")
        if self.template is not None:
            route = "prompt"
        elif info.infill:
            route = "infill"
        elif self.fim == SERVER_FIM or ollama:
            route = "suffix"
        else:
            raise RemoteError(
                f"{self.url}: cannot tell which FIM template model {self.model!r} uses; set the FIM template: "
                f"FAMILY[:LAYOUT] ({', '.join(FAMILIES)}), or {SERVER_FIM} for the server's own", "fim")
        # requests the engine runs side by side: llama-server's slots; vLLM batches continuously, and a few in flight
        # let one document's keystroke run beside another's prefill and the prefetches (its priorities order them)
        self.info, self.route, self.parallel = info, route, VLLM_PARALLEL if info.owned_by == "vllm" else info.slots
        self.logit_bias = self._marker_bias() if info.owned_by == "vllm" and route == "prompt" else {}
        if self.priority_mode == "auto":
            self.orders_by_priority = info.owned_by in PRIORITY_ENGINES and not self.priority_refused
        self.model_id = self._model_id()

    def _marker_bias(self) -> dict[str, int]:
        """{token id: -100} for the template's FIM markers, from vLLM's /tokenize; {} where it cannot say.

        The local engine never starts a suggestion with a marker (local.py, _marker_ids). vLLM would, and drop its
        text (skip_special_tokens), so the suggestion became what the model writes after it (`import sys` where
        the local one opens a docstring). Banned for the whole answer: an OpenAI request has no first-token-only ban.
        """
        t = self.template
        assert t is not None
        toks = [tok for tok in (t.prefix_tok, t.suffix_tok, t.middle_tok, PAD if t.family == "tabd" else "") if tok]
        bias: dict[str, int] = {}
        for tok in toks:
            try:
                response = self.client.post(self.url + "/tokenize",
                                            json={"model": self.model, "prompt": tok, "add_special_tokens": False})
                ids = response.json().get("tokens") if response.status_code == 200 else None
            except (httpx.HTTPError, ValueError, AttributeError):
                return {}
            if isinstance(ids, list) and len(ids) == 1 and isinstance(ids[0], int):
                bias[str(ids[0])] = -100
        return bias

    def _forget_model(self) -> bool:
        """The engine no longer serves the model tabd chose: look again at the next request. False when the name is
        the user's (--remote-model), which tabd never swaps: the error says so and each request answers empty."""
        if self.chosen_model:
            return False
        with self._resolving:
            self.model, self.route, self.info, self.logit_bias = None, None, None, {}
            self.template = self._explicit_template(self.fim)
        return True

    # -- the request -------------------------------------------------------------

    def _body(self, query: Query) -> tuple[str, Json]:
        """The route and JSON body; workspace context where the server takes it (input_extra), else as prompt text."""
        info = self.info or ServerInfo()
        prefix, suffix, settings = query.prefix, query.suffix, query.settings
        context = prompt_chunks(query.context)  # the lookup-only files are the local backend's to copy from
        if settings.plain:
            return "/v1/completions", self._plain_body(prefix, settings, query.priority)
        if self.route == "infill":
            infill: Json = {"input_prefix": prefix, "input_suffix": suffix, "prompt": "",
                            "n_predict": settings.max_new_tokens, "temperature": 0, "top_k": 1, "stream": True,
                            "cache_prompt": True}
            if context:  # llama-server lays these out with the model's own repository tokens, before the FIM prefix
                infill["input_extra"] = [{"filename": c.path, "text": c.text} for c in context if not c.current]
            infill.update(self._time_limits(query))
            return "/infill", infill
        body: Json = {"max_tokens": settings.max_new_tokens, "temperature": 0, "stream": True}
        if self.model:
            body["model"] = self.model
        if self.route == "suffix":
            head = "".join(chunk_text(c) for c in context if not c.current)
            body.update(prompt=head + prefix, suffix=suffix or "\n")  # Ollama takes an empty suffix for "no FIM"
        else:
            assert self.template is not None
            body["prompt"] = fim_prompt(self.template, prefix, suffix, context)
        if info.owned_by == "tabd":
            # serve-model stops by the local rule and answers the raw text, so clean-up here matches local exactly
            body["tabd"] = {"multiline": settings.multiline, "max_lines": settings.max_lines, "raw": settings.raw}
            body["user"] = query.slot_id
        elif self.template is not None and self.template.stop_toks:
            body["stop"] = list(self.template.stop_toks[:4])
        if info.infill or info.owned_by == "llamacpp":
            body["cache_prompt"] = True
            body.update(self._time_limits(query))
        elif self._foreground(query) and self.max_predict_ms:
            body["max_tokens"] = self.decode_rate.tokens_in(self._budgets(query)[1], settings.max_new_tokens)
        if self.asks_logprobs and info.owned_by != "tabd":  # serve-model sends its confidence in its `tabd` field
            body["logprobs"] = 0  # the chosen token's only
        if self.logit_bias:
            body["logit_bias"] = dict(self.logit_bias)
        if self.orders_by_priority:
            body["priority"] = query.priority
        return "/v1/completions", body

    @staticmethod
    def _foreground(query: Query) -> bool:
        return query.priority <= 0 and not query.settings.raw and not query.settings.plain

    def _time_limits(self, query: Query) -> Json:
        """llama.vim's fields for llama-server, on a request the user waits for (a prefetch has no one waiting): what
        its wait left of the budgets (_budgets)."""
        return {k: v for k, v in zip(("t_max_prompt_ms", "t_max_predict_ms"), self._budgets(query)) if v > 0}

    def _budgets(self, query: Query) -> tuple[int, int]:
        """(prefill ms, decode ms) left to a request the user waits for, counted from its asking as the local backend
        counts them (local.py, _decode_budget): its wait before this call (Query.waited_ms) is taken from
        max_prompt_ms first, and max_predict_ms loses only what the wait took past that, so the two bound the
        request together; a budget used up is BUDGET_FLOOR_MS, never 0. In whole ms, the wait's fraction of one not
        taken (the hand-over to a free worker alone is a fraction of a ms). 0 where a budget is off; (0, 0) for a
        prefetch. Without max_prompt_ms the wait is not taken from the decode, as locally."""
        if not self._foreground(query):
            return 0, 0
        prompt, predict = self.max_prompt_ms, self.max_predict_ms
        waited = max(0.0, query.waited_ms) if prompt > 0 else 0.0
        over = max(0.0, waited - prompt)
        return (max(BUDGET_FLOOR_MS, math.ceil(prompt - waited)) if prompt > 0 else 0,
                max(BUDGET_FLOOR_MS, math.ceil(predict - over)) if predict > 0 else 0)

    def _plain_body(self, prompt: str, settings: GenSettings, priority: int) -> Json:
        """A next-edit prompt in its model's own format (GenSettings.plain): the text as it is, whatever the route
        and FIM template, ended at the format's stop strings."""
        info = self.info or ServerInfo()
        body: dict[str, Any] = {"prompt": prompt, "max_tokens": settings.max_new_tokens, "temperature": 0,
                                "stream": True}
        if self.model:
            body["model"] = self.model
        if settings.stop:
            body["stop"] = list(settings.stop)
        if info.infill or info.owned_by == "llamacpp":
            body["cache_prompt"] = True  # llama-server keeps the prompt's keys: a chain's prompts share their head
        if self.asks_logprobs and info.owned_by != "tabd":
            body["logprobs"] = 0
        if self.orders_by_priority:
            body["priority"] = priority
        return body

    def predict(self, query: Query, should_stop: Callable[[], bool] = never) -> Prediction:
        prefix, suffix, settings = query.prefix, query.suffix, query.settings
        line = postprocess.CursorLine.of(prefix, suffix)

        budget = self._budgets(query)[1] / 1000  # what the wait before this call left of the decode's (0: none)

        def done(got: Streamed) -> bool:  # the local backend's stop rule, applied to the streamed text
            if settings.stop_below > 0 and got.unsure_from(settings.stop_below) is not None:
                return True  # the rest would not be shown: the engine's decode is someone else's time
            if budget and got.first_at is not None and time.perf_counter() - got.first_at > budget:
                return True  # the budget is spent: the answer is what came (llama.vim's t_max_predict_ms)
            return not settings.raw and postprocess.whole(got.text, line, settings.multiline, settings.max_lines)

        if should_stop():
            raise Interrupted()
        t0 = time.perf_counter()
        got = self._stream(
            lambda: self._body(query), should_stop, done)
        raw, first_at, chunks, stats = got.text, got.first_at, got.chunks, got.stats
        t2 = time.perf_counter()
        if budget and first_at is not None:
            self.decode_rate.ran(chunks, t2 - first_at)
        text = raw if settings.raw else postprocess.finish(raw, line, settings.multiline, settings.max_lines)
        t1 = first_at or t2
        confidence = confidence_of(got, text, line, settings)
        if text:
            self.gives_confidence = bool(confidence)
        return Prediction(
            text=text,
            confidence=confidence,
            prefill_tokens=int(stats.get("prefill_tokens", 0)),
            reused_tokens=int(stats.get("reused_tokens", 0)),
            decode_tokens=int(stats.get("decode_tokens", chunks)),
            prefill_ms=float(stats.get("prefill_ms", (t1 - t0) * 1000)),
            decode_ms=float(stats.get("decode_ms", (t2 - t1) * 1000)),
            context_tokens=int(stats.get("context_tokens", 0)),
            first_token_ms=(first_at - t0) * 1000 if first_at else 0.0,
            wait_ms=query.waited_ms if self._foreground(query) else 0.0,  # taken from its budgets (the log's wait_ms)
        )

    def warm(self, query: Query, should_stop: Callable[[], bool] = never) -> Prediction:
        """Have the server prefill the prompt so the next request reuses it; a no-op where a server cannot.

        llama-server takes n_predict 0 (llama.vim's warm-up); `tabd serve-model` decodes one token;
        other servers cache prefixes by themselves or not at all, so nothing is sent.
        """
        self._check_up()
        self._resolve_or_raise()
        info = self.info or ServerInfo()
        if self.route != "infill" and info.owned_by not in ("tabd", "llamacpp"):
            return Prediction("")

        def body() -> tuple[str, Json]:
            path, fields = self._body(query)
            key = "n_predict" if self.route == "infill" else "max_tokens"
            fields[key] = 1 if (self.info or ServerInfo()).owned_by == "tabd" else 0
            return path, fields

        t0 = time.perf_counter()
        stats = self._stream(body, should_stop, lambda got: True).stats
        return Prediction("", prefill_tokens=int(stats.get("prefill_tokens", 0)),
                          reused_tokens=int(stats.get("reused_tokens", 0)),
                          prefill_ms=float(stats.get("prefill_ms", (time.perf_counter() - t0) * 1000)),
                          context_tokens=int(stats.get("context_tokens", 0)))

    def _check_up(self) -> None:
        if time.monotonic() < self._down_until:
            raise RemoteError(self._down_reason)

    def _resolve_or_raise(self) -> None:
        try:
            self._resolve()
        except RemoteError as exc:
            if "cannot reach" in str(exc):
                self._mark_down(str(exc))
            raise

    def _mark_down(self, reason: str) -> None:
        # A server that is down answers each keystroke at once for DOWN_S, instead of retrying every time.
        self._down_until, self._down_reason = time.monotonic() + DOWN_S, reason

    def _stream(self, make_body: Callable[[], tuple[str, Json]], should_stop: Callable[[], bool],
                done: Callable[[Streamed], bool]) -> Streamed:
        """Raw text, when the first text came, how many chunks, the server's own counts and the tokens'
        probabilities if it sent them.

        The body is made again for each attempt: a retry after the engine refused the priority field, or after the
        model name was looked up again, sends what tabd knows now."""
        deadline = time.monotonic() + self.total_timeout
        attempt, looked_again = 0, False
        retries = 0 if self._down_reason else self.retries  # the engine was down: one try tells whether it is back
        while True:
            self._check_up()
            self._resolve_or_raise()
            path, body = make_body()
            left = max(0.05, deadline - time.monotonic())  # a helper thread never outlives the request's deadline
            timeout = httpx.Timeout(connect=min(self.connect_timeout, left), read=min(self.read_timeout, left),
                                    write=min(self.read_timeout, left), pool=left)
            call = Call(self.client, self.endpoint + path, body, timeout)
            try:
                answer = self._read(call, path, should_stop, done, deadline)
                self._down_reason = ""
                return answer
            except Retry as retry:
                call.cancel()
                attempt += 1
                if attempt > retries:
                    if retry.down:
                        self._mark_down(str(retry.error))
                    raise retry.error from None
                self._sleep(self.backoff * 3 ** (attempt - 1), should_stop, deadline)
            except RemoteError as exc:
                call.cancel()
                if exc.setting == "priority" and self.priority_mode == "auto" and self.orders_by_priority:
                    self.orders_by_priority, self.priority_refused = False, str(exc)
                    continue  # the same request again, without the field (vLLM without --scheduling-policy priority)
                if exc.setting == "logprobs" and self.asks_logprobs:
                    self.asks_logprobs, self.logprobs_refused = False, str(exc)
                    continue  # the same request again without it: no confidence gating on this engine
                if exc.setting == "model" and not looked_again and self._forget_model():
                    looked_again = True  # the engine restarted with another model: take its name, once per request
                    continue
                raise
            except BaseException:
                call.cancel()
                raise

    def _sleep(self, seconds: float, should_stop: Callable[[], bool], deadline: float) -> None:
        end = min(time.monotonic() + seconds, deadline)
        while time.monotonic() < end:
            if should_stop():
                raise Interrupted()
            time.sleep(0.01)

    def _read(self, call: Call, path: str, should_stop: Callable[[], bool], done: Callable[[Streamed], bool],
              deadline: float) -> Streamed:
        got, complete = Streamed(), False
        finished = False  # an event said the answer is complete (finish_reason, llama-server's stop)
        other: list[str] = []  # lines that are not events: a body that is not a stream (an error, a whole answer)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RemoteError(f"{self.url}{path}: no complete answer within {self.total_timeout:g} s (timeout)")
            try:
                kind, value = call.events.get(timeout=min(0.01, remaining))
            except queue.Empty:
                if should_stop():
                    raise Interrupted()
                continue
            if should_stop():
                raise Interrupted()
            if kind == "error":
                error = self._transport_error(path, value)
                if isinstance(value, (httpx.ConnectError, httpx.ConnectTimeout)):
                    raise Retry(error, down=True)
                if isinstance(value, httpx.TransportError) and not isinstance(value, httpx.TimeoutException):
                    raise Retry(error)  # dropped mid-request (a restart, a stale pooled connection): ask again
                raise error
            if kind == "status":
                code, payload = value
                error = self._status_error(path, code, payload)
                if code >= 500 and code != 501:
                    raise Retry(error)
                raise error
            if kind == "end":
                if not got.chunks and not got.stats and other:
                    return self._whole_body(path, "\n".join(other))
                if not (finished or complete):  # no [DONE], no finish_reason: the engine hung up mid-answer
                    raise Retry(RemoteError(f"{self.url}{path}: the stream ended "
                                            f"{'mid-answer' if got.chunks else 'before any answer'} (no [DONE], no "
                                            "finish_reason); the engine may have restarted"))
                return got
            if kind == "line" and not value.startswith("data:") and not got.chunks and sum(map(len, other)) < 1 << 16:
                other.append(value)
            if kind != "line" or not value.startswith("data:"):
                continue
            data = value[5:].strip()
            if data == "[DONE]":
                call.aborted.set()  # the helper drains the last bytes and the connection goes back to the pool
                return got
            piece, got.stats, last, probs = self._parse_event(path, data, got.stats)
            finished = finished or last
            if (piece or probs) and not complete:
                got.first_at = got.first_at or time.perf_counter()  # a token, even one whose text is held back
                got.mark(probs)
                if piece:
                    got.chunks += 1
                    got.text += piece
                if done(got):
                    if not self._ends_by_itself():
                        call.cancel()  # the rest is not needed: stop the server's decode too
                        return got
                    complete = True  # serve-model stopped by the same rule: read on to [DONE], keep the connection

    def _whole_body(self, path: str, body: str) -> Streamed:
        """A 200 that is not an event stream: an error body said as the error it is, or a whole completion (a
        server that ignores `stream`); anything else is reported, not taken for an empty suggestion."""
        try:
            data = json.loads(body)
        except ValueError:
            data = None
        if isinstance(data, dict) and data.get("error"):
            raise self._classify(path, 200, error_message(body))
        if isinstance(data, dict):
            text, stats, _, probs = self._parse_event(path, body, {})
            if text or isinstance(data.get("choices"), list) or "content" in data:
                got = Streamed(text, time.perf_counter(), 1, stats)
                got.mark(probs)
                return got
        raise RemoteError(f"{self.url}{path}: HTTP 200 but not an answer (no event stream, no completion): "
                          f"{self._scrub(one_line(body, 80))}")

    def _ends_by_itself(self) -> bool:
        return self.info is not None and self.info.owned_by == "tabd"

    def _parse_event(self, path: str, data: str,
                     stats: Json) -> tuple[str, Json, bool, list[tuple[int | None, str, float]]]:
        """The event's text, the server's counts so far, whether the event says the answer is complete, and its
        tokens with their probabilities where the engine sent them (OpenAI `logprobs`)."""
        try:
            event = json.loads(data)
        except ValueError:
            raise RemoteError(f"{self.url}{path}: the stream sent something that is not JSON: "
                              f"{self._scrub(one_line(data, 80))}") from None
        if not isinstance(event, dict):
            return "", stats, False, []
        if event.get("error"):
            raise self._classify(path, 500, error_message(data))
        if isinstance(event.get("tabd"), dict):
            stats = event["tabd"]
        elif isinstance(event.get("timings"), dict):  # llama-server
            t = event["timings"]
            stats = {"prefill_tokens": t.get("prompt_n", 0), "reused_tokens": t.get("cache_n", 0),
                     "decode_tokens": t.get("predicted_n", 0), "prefill_ms": t.get("prompt_ms", 0.0),
                     "decode_ms": t.get("predicted_ms", 0.0)}
        choices = event.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            choice = choices[0]
            return (str(choice.get("text") or ""), stats, choice.get("finish_reason") is not None,
                    token_probs(choice.get("logprobs")))
        return str(event.get("content") or ""), stats, event.get("stop") is True, []  # llama-server's last event

    # -- errors a user can act on --------------------------------------------------------

    def _transport_error(self, path: str, exc: BaseException) -> RemoteError:
        if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout)):
            reason = "connection refused" if "refused" in str(exc).lower() else one_line(exc, 120) or type(exc).__name__
            return RemoteError(f"cannot reach {self.url} ({self._scrub(reason)}); is the server running?")
        if isinstance(exc, httpx.TimeoutException):
            return RemoteError(f"{self.url}{path}: the server went silent (timeout: {type(exc).__name__})")
        if isinstance(exc, RemoteError):
            return exc
        return RemoteError(f"{self.url}{path}: {type(exc).__name__}: {self._scrub(one_line(exc, 160))}")

    def _status_error(self, path: str, code: int, body: str) -> RemoteError:
        return self._classify(path, code, error_message(body))

    def _scrub(self, text: str) -> str:
        """The engine's words without the API key (some echo it back: 'Incorrect API key provided: sk-...')."""
        if self._secret and len(self._secret) >= 4:
            text = text.replace(self._secret, "***")
        return text

    def _classify(self, path: str, code: int, message: str) -> RemoteError:
        message = self._scrub(message)
        low = message.lower()
        if code == 400 and "priority" in low:
            return RemoteError(f"{self.url}{path}: the engine refused the priority field (HTTP 400: {message}); "
                               "start vLLM with --scheduling-policy priority, or set the remote priority off", "priority")
        if code == 400 and "logprobs" in low:
            return RemoteError(f"{self.url}{path}: the engine refused the logprobs field (HTTP 400: {message}); "
                               "suggestions from it are not gated by confidence", "logprobs")
        if code == 401 or code == 403:
            return RemoteError(f"{self.url}{path}: HTTP {code}, not authorised ({message}); check the API key", "api_key")
        if "model" in low and ("not found" in low or "does not exist" in low or "not_found" in low):
            return RemoteError(f"{self.url}: model {self.model!r} is not served there (HTTP {code}: {message})", "model")
        if self.route == "suffix" and ("suffix" in low or "insert" in low):
            return RemoteError(f"{self.url}: the server does not fill in the middle with `suffix` ({message}); "
                               "set the FIM template (FAMILY[:LAYOUT]) to send the FIM prompt as text", "fim")
        if self.route == "infill" and ("infill" in low or code == 501):
            return RemoteError(f"{self.url}/infill: the model has no FIM tokens ({message}); set the FIM template "
                               "(FAMILY[:LAYOUT])", "fim")
        if code == 404:
            return RemoteError(f"{self.url}{path}: HTTP 404, no such route ({message}); tabd needs a server with "
                               "/v1/completions (chat-only APIs cannot fill in the middle)")
        return RemoteError(f"{self.url}{path}: HTTP {code}: {message}")

    def kv_bytes(self) -> int:
        return 0  # the server keeps its own cache

    def close(self) -> None:
        self.client.close()


def token_probs(logprobs: Any) -> list[tuple[int | None, str, float]]:
    """(text offset or None, token text, probability) from an OpenAI completions `logprobs` object; [] for anything
    else."""
    if not isinstance(logprobs, dict):
        return []
    tokens, values, offsets = logprobs.get("tokens"), logprobs.get("token_logprobs"), logprobs.get("text_offset")
    if not isinstance(tokens, list) or not isinstance(values, list) or len(tokens) != len(values):
        return []
    if not (isinstance(offsets, list) and len(offsets) == len(tokens)
            and all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)):
        offsets = [None] * len(tokens)
    out = []
    for offset, token, value in zip(offsets, tokens, values):
        if not isinstance(token, str) or isinstance(value, bool) or not isinstance(value, (int, float)):
            return []  # one unreadable token: the chunk's probabilities say nothing
        out.append((offset, token, math.exp(min(0.0, float(value)))))
    return out

def confidence_of(got: Streamed, text: str, line: postprocess.CursorLine,
                  settings: GenSettings) -> tuple[tuple[int, float], ...]:
    """Each token's (end of the finished suggestion after it, probability), as the local backend gives them, so
    --min-confidence gates a remote suggestion the same way; () where the engine sent no probabilities."""
    given = got.stats.get("confidence")  # serve-model: its local backend's own, already in the finished text's terms
    if isinstance(given, list):
        return tuple((min(x[0], len(text)), float(x[1])) for x in given
                     if isinstance(x, list) and len(x) == 2 and isinstance(x[0], int) and isinstance(x[1], (int, float)))
    out: list[tuple[int, float]] = []
    for end, p in got.marks:
        raw = got.text[:end]
        kept = len(raw) if settings.raw else len(postprocess.finish(raw, line, settings.multiline, settings.max_lines))
        out.append((min(len(text), kept), round(p, 4)))
        if out[-1][0] >= len(text):
            break
    return tuple(out)
