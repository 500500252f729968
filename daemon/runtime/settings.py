"""The settings table: every daemon setting declared once, as a field of Config.

A field's line is its row: the name, the type (the annotation), the default, and
in `setting(...)` the help, the bounds or choices, the CLI flag and the
initialization option. What reads the table: Config.validate here, the command
line (runtime/options.py), the initialization options (runtime/config.py) and the
README's tables (runtime/readme_tables.py). No torch here: `tabd --help` reads it.
"""
from __future__ import annotations

import dataclasses
import reprlib
import typing
from dataclasses import dataclass
from typing import Any, TypeVar

from tabd.predictor.loading import engine_names as engines
from tabd.predictor.loading.engine_names import CHOICES as ENGINES
from tabd.daemon.runtime.url_rule import in_clear_text, shown_url

# the engines' one-line meanings are declared with their names (predictor/loading/engine_names.py)
ENGINE_HELP = ("; ".join(f"{name}: {engines.HELP[name]}" for name in engines.ENGINES) + "; the earlier names stay "
               "accepted: " + ", ".join(f"{old} = {new}" for old, new in engines.ALIASES.items()))

T = TypeVar("T")

MODEL = "model and backend"  # argparse group titles: flags shared by serve, complete, replay, bench, serve-model
CONTEXT = "workspace context"
SERVE = "serve"  # the files `tabd serve` writes: its own flags, not passed on by replay or bench

DEVICES = ("auto", "cpu", "cuda")
BACKENDS = ("local", "openai", "copy")
WEIGHTS = ("auto", "fp32", "bf16", "int8")


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message says which and why."""


@dataclass(frozen=True)
class Spec:
    """What a row says besides its name, type and default (kept in the Config field's metadata)."""

    help: str
    flag: str | None = None  # None: not on the command line
    metavar: str | None = None
    init: str | None = None  # the initializationOptions key (camelCase); None: the client may not set it
    bounds: tuple[float, float] | None = None  # inclusive, unless above_low
    above_low: bool = False  # the value must be above the lower bound, not equal to it (a timeout above 0)
    unit: str = ""  # what a number counts, where the name does not say
    choices: tuple[str, ...] | None = None
    group: str = MODEL
    shown: str | None = None  # how the default reads where the value says little (--model's None: "the embedded model")
    off_flag: str | None = None  # a second flag that sets the setting to its lower bound (--no-context)
    off_help: str = ""
    see: str = ""  # the README section that says more (its heading)


def setting(default: T, help: str, *, flag: str | None = None, metavar: str | None = None, init: str | None = None,
            bounds: tuple[float, float] | None = None, above_low: bool = False, unit: str = "",
            choices: tuple[str, ...] | None = None, group: str = MODEL, shown: str | None = None,
            off_flag: str | None = None, off_help: str = "", see: str = "") -> T:
    """A Config field's default, with the rest of its row in the field's metadata."""
    spec = Spec(help, flag, metavar, init, bounds, above_low, unit, choices, group, shown, off_flag, off_help, see)
    return dataclasses.field(default=default, metadata={"setting": spec})


@dataclass
class Config:
    """The daemon's configuration; the order of the fields is the order of the flags in --help."""

    model: str | None = setting(
        None, "a local Hugging Face causal-LM directory (safetensors only)",
        flag="--model", metavar="DIR", init="model", shown="the embedded model")
    device: str = setting(
        "auto", "where the model runs; auto: CUDA when torch sees a GPU (bf16 there), else the CPU (fp32)",
        flag="--device", init="device", choices=DEVICES)
    backend: str = setting(
        "local", "local: the engine in this process; openai: an OpenAI-compatible server (--url); copy: no model at "
                 "all, the copy-from-the-file heuristic alone (the baseline bench quality compares against)",
        flag="--backend", choices=BACKENDS, see="Remote engines")
    url: str | None = setting(
        None, "server URL for --backend openai, e.g. http://127.0.0.1:8080; https unless it is loopback (see "
              "--allow-insecure-url)", flag="--url", metavar="URL", see="Remote engines")
    allow_insecure_url: bool = setting(
        False, "let --url be plain http to a host that is not loopback (prompts are source code: they cross the "
               "network readable by anyone on the path)", flag="--allow-insecure-url", see="Remote engines")
    api_key_env: str | None = setting(
        None, "environment variable holding the API key for --backend openai", flag="--api-key-env", metavar="VAR")
    remote_model: str | None = setting(
        None, "model name to send to the remote server", flag="--remote-model", metavar="NAME",
        shown="the first the server lists")
    remote_priority: str = setting(
        "auto", "send each request's priority to the engine (vLLM's priority field, lower sooner: your keystroke 0, "
                "a prefetch its depth), so a keystroke runs before prefetches and warm-ups, yours and others'; auto: "
                "to tabd serve-model and vLLM, dropped at vLLM's first refusal (started without --scheduling-policy "
                "priority)",
        flag="--remote-priority", choices=("auto", "on", "off"), see="Remote engines")
    parallel: int = setting(
        1, "model requests at once (for a remote engine that batches)", flag="--parallel", metavar="N", bounds=(1, 32))
    timeout: float = setting(
        20.0, "--backend openai: how long one request may take, first byte to last, before it answers empty",
        flag="--remote-timeout", metavar="SECONDS", bounds=(0, 600), above_low=True, unit="seconds")
    fim: str | None = setting(
        None, "override the FIM template: tabd, qwen2.5-coder, starcoder2, deepseek-coder, codellama or plain, "
              "layout spm or psm (--backend openai: also server)",
        flag="--fim", metavar="FAMILY[:LAYOUT]", init="fim", shown="from the tokenizer")
    depth: int = setting(
        4, "the deepest speculation goes, in accepts ahead; how deep it goes follows how often you accept "
           "(see --fixed-depth)",
        flag="--depth", metavar="K", init="depth", bounds=(0, 8), see="Speculation that follows what you accept")
    adaptive_depth: bool = setting(
        True, "prefetch exactly --depth accepts ahead whatever you accept (for benchmarks)", flag="--fixed-depth")
    threads: int | None = setting(
        None, "model threads (torch's and the native step's); by default 1 when other processes keep the cores "
              "busy, else torch's choice",
        flag="--threads", metavar="N", init="threads", bounds=(1, 256), shown="adaptive")
    engine: str = setting(
        "auto", ENGINE_HELP,
        flag="--engine", choices=ENGINES, see="The engine")
    weights: str = setting(
        "auto", "how the fast engine holds the weights on the CPU: fp32, bf16 (fp32 sums), int8 (a scale per "
                "output column); auto: fp32 up to 512 MB of fp32 weights, else bf16 (tabd/stats says which)",
        flag="--weights", choices=WEIGHTS, see="The engine")
    max_new_tokens: int = setting(
        48, "longest suggestion, in tokens", flag="--max-new-tokens", metavar="N", init="maxNewTokens", bounds=(1, 512))
    lookup_min_p: float = setting(
        0.001, "copy candidates (what followed the last occurrence of the text before the cursor) replace the "
               "model's guess as far as the model's joint probability of the copied text stays >= P (0: off)",
        flag="--lookup-min-p", metavar="P", init="lookupMinP", bounds=(0, 1), see="Suggestion quality")
    # 0.4 maximised the Tab user's saved keystrokes on the held-out stdlib split (README, "Suggestion quality")
    min_confidence: float = setting(
        0.4, "confidence gating: show the longest part of a suggestion the model gives a probability of at least P "
             "as a whole (the product of its tokens'; 0 shows everything); an invoked request (Alt+\\ in VS Code) "
             "shows the best guess anyway",
        flag="--min-confidence", metavar="P", init="minConfidence", bounds=(0, 1), see="Suggestion quality")
    inline_edits: bool = setting(
        True, "next-edit suggestions (textDocument/copilotInlineEdit: the same rename at the next place, and the one "
              "after it computed ahead); off answers every such request with no edit",
        flag="--no-inline-edits", init="inlineEdits", see="Next-edit suggestions")
    edit_min_confidence: float = setting(
        0.0, "an edit is shown only if the model, asked at that place, writes its new text with a probability of at "
             "least P (0: no model run; the propagation rules alone decide)",
        flag="--edit-min-confidence", metavar="P", init="editMinConfidence", bounds=(0, 1), shown="0",
        see="Next-edit suggestions")
    # propagation: the embedded model's edits were not yet worth showing (README, "Next-edit suggestions": bench edits)
    edit_sources: str = setting(
        "propagation", "where next-edit suggestions come from: propagation (the same change at the next place it "
                       "applies), model (once you pause, the model reads your recent edits and the lines around the "
                       "cursor and writes them as they should be), or both (propagation first)",
        flag="--edit-sources", init="editSources", choices=("both", "propagation", "model"), see="Next-edit suggestions")
    edit_model_min_confidence: float = setting(
        0.5, "an edit the model writes is shown only if the mean probability of the tokens that write it is at least P",
        flag="--edit-model-min-confidence", metavar="P", init="editModelMinConfidence", bounds=(0, 1),
        see="Next-edit suggestions")
    edit_format: str = setting(
        "tabd", "the prompt format of the model that writes next edits: tabd (the embedded model's own), sweep (Sweep's "
                "next-edit models, sweepai/sweep-next-edit-1.5B or -0.5B) or zeta (Zed's Zeta); sweep and zeta need "
                "--backend openai in front of an engine serving that model, and make --edit-sources both unless it "
                "says model", flag="--edit-format", init="editFormat", choices=("tabd", "sweep", "zeta"),
        see="Next-edit suggestions")
    known_names: bool = setting(
        True, "gate a suggestion that finishes the word at the cursor into a name the window or the open files "
              "already spell like any other (by default it is shown at least to the end of the name)",
        flag="--no-known-names", init="knownNames", see="Suggestion quality")
    min_chars: int = setting(
        2, "show a suggestion only if it has at least N characters (a one-character suggestion saves no keystroke, "
           "Tab is one too); an invoked request shows any",
        flag="--min-chars", metavar="N", init="minChars", bounds=(1, 1000))
    max_prompt_ms: int = setting(
        500, "a request you wait for may prefill for about MS (llama.vim's t_max_prompt_ms), counted from when it was "
             "asked, so its wait behind other work is taken from it first: a cold prompt that would take longer is run on the lines nearest the cursor, and the whole window is prefilled in the background "
             "for the next keystroke (0: no bound; a remote llama-server is sent it as t_max_prompt_ms)",
        flag="--max-prompt-ms", metavar="MS", init="maxPromptMs", bounds=(0, 600_000))
    max_predict_ms: int = setting(
        1000, "a request you wait for may decode for at most MS (and what its wait and prefill left of MS plus "
              "--max-prompt-ms), then answers with what it has (llama.vim's "
              "t_max_predict_ms, sent so to a remote llama-server; another engine's stream is cut there and asked for "
              "no more tokens than fit; 0: no bound)",
        flag="--max-predict-ms", metavar="MS", init="maxPredictMs", bounds=(0, 600_000))
    debounce_ms: int = setting(
        20, "a request the cache cannot answer waits at least MS before the model runs, longer when you type "
            "steadily or the model is slow; a newer keystroke cancels it (0: off)",
        flag="--debounce-ms", metavar="MS", init="debounceMs", bounds=(0, 1000),
        see="Speculation that follows what you accept")
    speculation: bool = setting(
        True, "do not prefetch the state after accept", flag="--no-speculation", init="speculation")
    cache: bool = setting(True, "no completion cache, type-through or in-flight reuse", flag="--no-cache")
    kv_reuse: bool = setting(True, "recompute the whole prompt on every request", flag="--no-kv-reuse")
    trust_remote_code: bool = setting(
        False, "allow a model directory's own Python code", flag="--trust-remote-code")
    context_tokens: int = setting(
        320, "tokens of context from other open files, recent edits, imports and enclosing headers put before the "
             "prompt (0: none)",
        flag="--context-tokens", metavar="N", init="contextTokens", bounds=(0, 8192), group=CONTEXT,
        off_flag="--no-context", off_help="no workspace context (same as --context-tokens 0)")
    context_chunks: int = setting(
        64, "chunks the context store holds, all files together", flag="--context-chunks", metavar="N",
        init="contextChunks", bounds=(1, 4096), group=CONTEXT)
    context_bytes: int = setting(
        512 << 10, "bytes of chunk text the store holds", flag="--context-bytes", metavar="N", init="contextBytes",
        bounds=(1024, 64 << 20), unit="bytes", group=CONTEXT)
    context_lines: int = setting(
        32, "lines per chunk of an open file", flag="--context-lines", metavar="N", init="contextLines",
        bounds=(4, 256), group=CONTEXT)
    context_idle_ms: int = setting(
        1000, "pause (no edit, no request) after which the context may change", flag="--context-idle-ms",
        metavar="MS", init="contextIdleMs", bounds=(50, 60_000), group=CONTEXT)
    warmup: bool = setting(
        True, "no background prefill on open, focus or context change", flag="--no-warmup", init="warmup",
        group=CONTEXT)
    exclude: tuple[str, ...] = setting(
        (), "more files to keep away from the model, beside the default deny list and what git ignores: a glob on "
            "the path within the workspace (no / in it: any part of the path); repeat the flag for more (the "
            "client's list adds to it)",
        flag="--exclude", metavar="GLOB", init="exclude", group=CONTEXT, shown="none", see="Content exclusion")
    include: tuple[str, ...] = setting(
        (), "files to give back to the model that an exclude glob or git keeps out (a library file under a "
            "git-ignored virtualenv, a scratch file in an ignored folder): a glob as for --exclude; never a file the "
            "default deny list keeps out; repeat the flag for more (the client's list adds to it)",
        flag="--include", metavar="GLOB", init="include", group=CONTEXT, shown="none", see="Content exclusion")
    log: str | None = setting(
        None, "append JSONL events (no source text) to FILE", flag="--log", metavar="FILE", init="log", group=SERVE)
    log_text: bool = setting(
        False, "also log suggestion text (off by default: privacy)", flag="--log-text", group=SERVE)
    record: str | None = setting(
        None, "record the edit session to FILE (JSONL, mode 0600)", flag="--record", metavar="FILE", group=SERVE)
    # the rest: initialization options, or internal bounds no one has needed to change
    prefix_chars: int = setting(
        2400, "characters before the cursor the prompt may hold", init="prefixChars", bounds=(16, 200_000))
    suffix_chars: int = setting(
        600, "characters after the cursor the prompt may hold", init="suffixChars", bounds=(0, 100_000))
    partial_accept_prefetch: bool = setting(True, "prefetch the state after a partial accept too")
    cache_entries: int = setting(2048, "completion cache entries", bounds=(1, 1_000_000))
    cache_bytes: int = setting(8 << 20, "completion cache size", bounds=(1024, 1 << 34), unit="bytes")

    def validate(self) -> Config:
        """self, when every value is within its row's type, bounds and choices; else ConfigError saying which."""
        for row in SETTINGS:
            problem = row.problem(getattr(self, row.name))
            if problem:
                raise ConfigError(problem)
        if self.url and not self.allow_insecure_url and in_clear_text(self.url):
            raise ConfigError(f"--url {shown_url(self.url)}: prompts are source code, and this URL sends them in clear "
                              "text to a host that is not loopback; use https://, a loopback address (127.0.0.1, ::1, "
                              "localhost), or pass --allow-insecure-url if the network is yours")
        return self


@dataclass(frozen=True)
class Setting:
    """One row of the table: a Config field and what its metadata says about it."""

    name: str
    type: type  # int, float, str, bool (None aside), or tuple: a list of strings (a repeatable flag)
    optional: bool  # None is a value (it means: decide at run time)
    default: Any
    spec: Spec

    @property
    def flag(self) -> str:
        return self.spec.flag or ""

    @property
    def dest(self) -> str:
        """The argparse attribute its flag sets (argparse's own rule: --no-cache -> no_cache)."""
        return flag_dest(self.flag)

    @property
    def off_dest(self) -> str:
        return flag_dest(self.spec.off_flag or "")

    @property
    def off_value(self) -> Any:
        """What the off flag sets: the lower bound (--no-context: 0 tokens)."""
        return self.spec.bounds[0] if self.spec.bounds else None

    @property
    def shown_default(self) -> str:
        """The default as --help and the README say it ("none" for a value that is not set)."""
        if self.spec.shown is not None:
            return self.spec.shown
        if self.default is None:
            return "none"
        if self.type is bool:
            return "on" if self.default else "off"
        return f"{self.default:g}" if isinstance(self.default, float) else str(self.default)

    def span(self, dash: str = "-") -> str:
        """The bounds in words ("" without bounds): 0-8, above 0, at most 600, 1 KiB-64 MiB."""
        if self.spec.bounds is None:
            return ""
        lo, hi = (amount(v, self.spec.unit) for v in self.spec.bounds)
        return f"above {lo}, at most {hi}" if self.spec.above_low else f"{lo}{dash}{hi}"

    def problem(self, value: Any) -> str | None:
        """Why value cannot be this setting's, in words; None when it can."""
        spec, name = self.spec, self.name
        if value is None and self.optional:
            return None
        if self.type is tuple:
            if not isinstance(value, tuple) or not all(isinstance(v, str) for v in value):
                return f"{name} must be a list of strings, got {shown(value)}"
            return None
        if spec.choices is not None and value not in spec.choices:
            return f"{name} must be {either(spec.choices)}, got {shown(value)}"
        if spec.bounds is None:
            return None
        lo, hi = spec.bounds
        if self.type is int:
            if isinstance(value, bool) or not isinstance(value, int):
                return f"{name} must be an integer, got {type(value).__name__} {shown(value)}"
            if not lo <= value <= hi:
                kind = "an integer " if self.optional else ""  # None is valid too: say what else is
                return f"{name} must be {kind}between {lo:g} and {hi:g}, got {shown(value)}"
            return None
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not number or not (lo < value if spec.above_low else lo <= value) or not value <= hi:
            what = f"a number of {spec.unit}" if spec.unit else "a number"
            span = f"above {lo:g} and at most {hi:g}" if spec.above_low else f"between {lo:g} and {hi:g}"
            return f"{name} must be {what} {span}, got {shown(value)}"
        return None


_repr = reprlib.Repr()
_repr.maxstring = _repr.maxother = _repr.maxlong = 60
_repr.maxlist = _repr.maxtuple = _repr.maxdict = 4
_repr.maxlevel = 2


def shown(value: Any) -> str:
    """A value as a message quotes it: bounded however big or deep it is (a client may send 10 MB, or 10^400)."""
    try:
        return _repr.repr(value)
    except Exception:  # a value whose repr fails: its type says enough
        return f"<{type(value).__name__}>"


def flag_dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def amount(value: float, unit: str) -> str:
    """A bound as people read it: bytes in KiB or MiB where they divide evenly."""
    if unit == "bytes":
        for size, name in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
            if value >= size and value % size == 0:
                return f"{value // size:g} {name}"
    return f"{value:g}"


def either(choices: tuple[str, ...]) -> str:
    """'a, b or c'."""
    return choices[0] if len(choices) == 1 else f"{', '.join(choices[:-1])} or {choices[-1]}"


def rows() -> tuple[Setting, ...]:
    hints = typing.get_type_hints(Config)
    out = []
    for f in dataclasses.fields(Config):
        args = typing.get_args(hints[f.name]) or (hints[f.name],)
        base = tuple if typing.get_origin(hints[f.name]) is tuple else next(a for a in args if a is not type(None))
        out.append(Setting(f.name, base, type(None) in args, f.default, f.metadata["setting"]))
    return tuple(out)


SETTINGS: tuple[Setting, ...] = rows()
BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
