"""Plain dataclasses that cross the predictor's boundary (no torch in them)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol, Sequence


@dataclass(frozen=True)
class GenSettings:
    max_new_tokens: int = 48
    multiline: bool = False  # a block body rather than the rest of one line
    max_lines: int = 8
    # copy candidates: what followed the last occurrence of the text before the cursor is shown instead of the
    # model's own guess, as far as the model's joint probability of the copied text stays at least this (0: off)
    lookup_min_p: float = 0.001
    # a suggestion that finishes the word at the cursor into a name the prompt or the workspace already spells is
    # shown at least to the end of that name, however unsure the model is of it
    known_names: bool = True
    # the model's text as written, to its stop token or the budget: no line rules, copy candidate, names or token
    # healing (a next-edit prompt's answer is a whole window: predictor/prompt/edit_prompt.py)
    raw: bool = False
    # a remote engine stops decoding once the suggestion's joint probability is under this: no more of it would be
    # shown (the --min-confidence of an automatic request; 0: to the end); Backend.stops_below says who honours it
    stop_below: float = 0.0
    # a next-edit prompt in another model's format (predictor/prompt/nes_formats.py): sent as it is, a plain completion with
    # no FIM template around it, and ended at these strings (Backend.plain_prompts says who can)
    plain: bool = False
    stop: tuple[str, ...] = ()

    def tag(self) -> str:
        """The part of the cache key that generation settings decide."""
        return (f"greedy;n={self.max_new_tokens};ml={int(self.multiline)};l={self.max_lines};lk={self.lookup_min_p}"
                f";nm={int(self.known_names)}" + (";raw" if self.raw else "")
                + (f";sb={self.stop_below:g}" if self.stop_below else "") + (";plain" if self.plain else "")
                + (f";stop={self.stop!r}" if self.stop else ""))


@dataclass(frozen=True)
class Prediction:
    text: str
    prefill_tokens: int = 0  # prompt tokens run through the model for this request
    reused_tokens: int = 0  # prompt tokens whose keys and values were kept from before
    decode_tokens: int = 0
    prefill_ms: float = 0.0
    decode_ms: float = 0.0
    # (end of the suggestion's text after this token, the model's probability of the token), in decode order;
    # empty where the engine gives no probabilities (then nothing is gated)
    confidence: tuple[tuple[int, float], ...] = ()
    context_tokens: int = 0  # prompt tokens of workspace context at the head of the prompt
    decode_passes: int = 0  # model passes the decode took (prompt-lookup drafts verified together save some)
    accepted_drafts: int = 0  # decode tokens that came as prompt-lookup drafts the model agreed with
    engine: str = ""  # the engine that computed it, by its one name (a local backend's: "torch-free", "torch+native", ...)
    torch_loaded: bool | None = None  # whether torch was imported (or being imported) in this process then
    # other candidates the run had, best first: the model's own guess where a copy won, the copy where the model's
    # own guess won (an invoked request offers them to cycle through; automatic ones show `text` alone)
    alternatives: tuple[str, ...] = ()
    # a remote engine: from sending the request to its first streamed token, at the client (the engine's queue, the
    # prefill of what it had not cached, the network); 0 where not measured (a local engine has no queue of others)
    first_token_ms: float = 0.0
    # characters of the prompt window (prefix and suffix) the answer was computed on: fewer than the request's window
    # where a cold prompt would not fit the prefill budget and the lines nearest the cursor were used (0: not told)
    window_chars: int = 0
    preemptions: int = 0  # times a newer request (of another document) stopped this run before it answered
    paused_ms: float = 0.0  # ...and how long it waited behind them, put back in the queue
    # a request the user waits for: how long it had waited when its run began (Query.waited_ms), taken from its budgets
    wait_ms: float = 0.0


@dataclass(frozen=True)
class ContextChunk:
    """A piece of the workspace put before the prompt: where it comes from, and its text."""

    path: str
    text: str
    # searched for copy candidates only, never put in the prompt: whole open files, which cost no tokens
    lookup_only: bool = False
    comment: str = "#"  # the line comment of the chunk's language: `# path`, `// path` or `-- path` heads it
    # the file being completed: its path alone (its extension names the language) where the FIM family heads the
    # current file with one (Qwen2.5-Coder's and StarCoder2's `<file_sep>path`); no text, and no place elsewhere
    current: bool = False


def prompt_chunks(context: Sequence["ContextChunk"]) -> list["ContextChunk"]:
    """The chunks that go in the prompt (not the lookup-only ones), the current file's header last."""
    return [c for c in context if not c.lookup_only and not c.current] + [c for c in context if c.current][:1]


def text_chunks(context: Sequence["ContextChunk"]) -> list["ContextChunk"]:
    """The prompt's chunks that carry text (not the current file's header)."""
    return [c for c in context if not c.lookup_only and not c.current]


@dataclass(frozen=True)
class Query:
    """What a backend is asked, once: the suggestion at the cursor between prefix and suffix, generated as settings
    say, in KV slot slot_id (one per document, and per speculation branch), with the workspace context before them.
    priority: how soon an engine shared with others should run it (0: a request the user waits for; more: a prefetch
    or a warm-up); an engine in this process ignores it. waited_ms: how long a request the user waits for has waited
    since it was asked (the worker's queue, another job's chunk under way, pauses behind newer requests): an engine
    with budgets (--max-prompt-ms, --max-predict-ms) takes it from them, so the user waits the budget, not it plus that."""

    prefix: str
    suffix: str
    settings: GenSettings
    slot_id: str = "default"
    context: Sequence[ContextChunk] = ()
    priority: int = 0
    waited_ms: float = 0.0


def never() -> bool:
    """A should_stop that never stops the run."""
    return False


class Backend(Protocol):
    """What the daemon asks a model for: local (LocalBackend), remote (RemoteBackend) or the copy baseline.

    The optional capabilities are declared here with what a backend without them does; a backend subclasses this
    Protocol to inherit those defaults, so the daemon calls them directly and never probes with getattr.
    """

    model_id: str  # part of every cache key: a different model, a different key
    engine_name: str  # reported in tabd/stats
    engine_why: str | None = None  # why this engine was chosen (tabd/stats); None where there is no choice
    weights_why: str | None = None  # the format the weights are held in, and why (tabd/stats); None where not ours
    # the engine runs a request with a lower `priority` (predict's, warm's) sooner: a remote engine that orders by it
    orders_by_priority: bool = False
    writes_edits: bool = True  # a model that can answer a next-edit prompt (the copy baseline cannot)
    # its suggestions carry each token's probability, so --min-confidence gates them (a remote engine: whether its
    # latest answer did; None before one)
    gives_confidence: bool | None = True
    # it honours GenSettings.stop_below (a remote engine, whose decode is others' time too); an engine in this process
    # decodes on, and its full text answers a later invoked request from the cache
    stops_below: bool = False
    # it sends a GenSettings.plain prompt as it is, with its stop strings (a remote engine's /v1/completions); an
    # engine in this process lays every prompt out in its FIM template
    plain_prompts: bool = False

    def predict(self, query: Query, should_stop: Callable[[], bool] = never) -> Prediction:
        """The suggestion the query asks for; Interrupted when should_stop() says so."""
        ...

    def warm(self, query: Query, should_stop: Callable[[], bool] = never) -> Prediction | None:
        """Prefill the query's prompt without decoding, so the next predict() reuses it; None where the backend cannot
        (then the next request pays, as without a warm-up)."""
        return None

    def kv_bytes(self) -> int:
        """Bytes of keys and values kept for reuse (0 where the server keeps its own)."""
        return 0

    def can_hand_over(self) -> bool:
        """True after a torch-free start whose torch+native engine can take over (daemon/runtime/handover.py)."""
        return False


class Interrupted(Exception):
    """The caller's should_stop() said stop between two decode steps."""


class BackendError(Exception):
    """A backend that cannot be built or cannot answer. `setting` names the LocalSettings or RemoteSettings field
    to change, where one would fix it (whoever started the backend knows its flag)."""

    def __init__(self, message: str, setting: str | None = None) -> None:
        super().__init__(message)
        self.setting = setting


class ModelLoadError(BackendError):
    """A model directory that cannot be used; the message names the problem."""
