"""The daemon's configuration: one dataclass, defaults that work, and validation that explains itself."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message says which and why."""


@dataclass
class Config:
    model: str | None = None  # model directory; None = the embedded default model
    device: str = "auto"
    fim: str | None = None  # "family[:layout]" to override the template chosen from the tokenizer
    depth: int = 4  # the deepest speculation runs (accepts ahead); how deep it goes is measured acceptance's call
    adaptive_depth: bool = True  # False: every chain runs exactly `depth` deep (benchmarks, --fixed-depth)
    speculation: bool = True
    partial_accept_prefetch: bool = True
    cache: bool = True
    kv_reuse: bool = True
    prefix_chars: int = 2400
    suffix_chars: int = 600
    max_new_tokens: int = 48
    lookup_min_p: float = 0.001  # copy candidates shown as far as the model's joint probability of them stays >= this (0: off)
    # confidence gating: a suggestion is cut where the model's probability of all of it so far drops below this;
    # 0.4 maximised the Tab user's saved keystrokes on the held-out stdlib split (README, "Suggestion quality")
    min_confidence: float = 0.4
    # a suggestion that finishes the word at the cursor into a name the window or the workspace spells is shown at
    # least to the end of the name (predictor/names.py)
    known_names: bool = True
    min_chars: int = 2  # a shown suggestion has at least this many characters (an invoked request shows any)
    cache_entries: int = 2048
    cache_bytes: int = 8 << 20
    threads: int | None = None
    log: str | None = None
    log_text: bool = False
    record: str | None = None
    trust_remote_code: bool = False
    backend: str = "local"  # local, openai (a remote OpenAI-compatible server) or copy (the no-model baseline)
    engine: str = "auto"  # the local forward: auto, native, fast, torch, hf or plain (see predictor/local.py)
    weights: str = "auto"  # how the fast engine holds the weights: auto, fp32, bf16 or int8 (predictor/engine/weights.py)
    url: str | None = None  # --backend openai: the server
    api_key_env: str | None = None  # --backend openai: the environment variable holding its API key
    remote_model: str | None = None  # --backend openai: the model name sent to it
    parallel: int = 1  # model requests at once (a remote engine may batch them)
    timeout: float = 20.0  # seconds a remote request may take, first byte to last
    # workspace context before the prompt (daemon/context/store.py): budget, bounds, and the pause after which it may change
    context_tokens: int = 320
    context_chunks: int = 64
    context_bytes: int = 512 << 10
    context_lines: int = 32
    context_idle_ms: int = 1000
    warmup: bool = True  # prefill the prompt at the cursor on open, focus and context change
    # a request that needs the model first waits this long at least (adaptive above it, daemon/runtime/debounce.py); 0: off
    debounce_ms: int = 20

    def validate(self) -> "Config":
        checks = [
            ("depth", 0, 8),
            ("prefix_chars", 16, 200_000),
            ("suffix_chars", 0, 100_000),
            ("max_new_tokens", 1, 512),
            ("cache_entries", 1, 1_000_000),
            ("cache_bytes", 1024, 1 << 34),
            ("parallel", 1, 32),
            ("context_tokens", 0, 8192),
            ("context_chunks", 1, 4096),
            ("context_bytes", 1024, 64 << 20),
            ("context_lines", 4, 256),
            ("context_idle_ms", 50, 60_000),
            ("debounce_ms", 0, 1000),
            ("min_chars", 1, 1000),
        ]
        for name, lo, hi in checks:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
            if not lo <= value <= hi:
                raise ConfigError(f"{name} must be between {lo} and {hi}, got {value}")
        for name in ("min_confidence", "lookup_min_p"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
                raise ConfigError(f"{name} must be a number between 0 and 1, got {value!r}")
        if isinstance(self.timeout, bool) or not isinstance(self.timeout, (int, float)) or not 0 < self.timeout <= 600:
            raise ConfigError(f"timeout must be a number of seconds above 0 and at most 600, got {self.timeout!r}")
        choices = {"backend": ("local", "openai", "copy"), "engine": ("auto", "native", "fast", "torch", "hf", "plain"),
                   "weights": ("auto", "fp32", "bf16", "int8")}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ConfigError(f"{name} must be one of {', '.join(allowed)}, got {getattr(self, name)!r}")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ConfigError(f"device must be auto, cpu or cuda, got {self.device!r}")
        if self.threads is not None and (not isinstance(self.threads, int) or not 1 <= self.threads <= 256):
            raise ConfigError(f"threads must be an integer between 1 and 256, got {self.threads!r}")
        return self


# initializationOptions key -> (Config field, accepted types)
CLIENT_OPTIONS: dict[str, tuple[str, tuple[type, ...]]] = {
    "model": ("model", (str,)),
    "device": ("device", (str,)),
    "fim": ("fim", (str,)),
    "depth": ("depth", (int,)),
    "speculation": ("speculation", (bool,)),
    "log": ("log", (str,)),
    "prefixChars": ("prefix_chars", (int,)),
    "suffixChars": ("suffix_chars", (int,)),
    "maxNewTokens": ("max_new_tokens", (int,)),
    "minConfidence": ("min_confidence", (float, int)),
    "minChars": ("min_chars", (int,)),
    "lookupMinP": ("lookup_min_p", (float, int)),
    "knownNames": ("known_names", (bool,)),
    "threads": ("threads", (int,)),
    "contextTokens": ("context_tokens", (int,)),
    "contextChunks": ("context_chunks", (int,)),
    "contextBytes": ("context_bytes", (int,)),
    "contextLines": ("context_lines", (int,)),
    "contextIdleMs": ("context_idle_ms", (int,)),
    "warmup": ("warmup", (bool,)),
    "debounceMs": ("debounce_ms", (int,)),
}


def apply_client_options(config: Config, options: Any) -> tuple[Config, list[str]]:
    """A copy of config with the client's initializationOptions applied, and one message per rejected value."""
    if options is None or options == []:  # Lua's empty table arrives as [] (Neovim sends {} that way)
        return config, []
    if not isinstance(options, dict):
        return config, [f"initializationOptions must be an object, got {type(options).__name__}; using defaults"]
    problems: list[str] = []
    updated = dataclasses.replace(config)
    for key, value in options.items():
        spec = CLIENT_OPTIONS.get(key)
        if spec is None:
            problems.append(f"unknown option {key!r} ignored (known: {', '.join(sorted(CLIENT_OPTIONS))})")
            continue
        name, types = spec
        if value is None:
            continue
        if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
            problems.append(f"option {key!r} must be {'/'.join(t.__name__ for t in types)}, got {value!r}; ignored")
            continue
        trial = dataclasses.replace(updated, **{name: value})
        try:
            trial.validate()
        except ConfigError as exc:
            problems.append(f"option {key!r}: {exc}; ignored")
            continue
        updated = trial
    return updated, problems
