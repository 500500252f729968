"""What a backend is built from: typed settings, filled in by whoever starts it (the daemon maps its Config).

The predictor knows no command line: these name settings, and the errors it raises name the setting, never a
flag. No torch here.
"""
from __future__ import annotations

from dataclasses import dataclass

from tabd.predictor.loading.engine_names import TORCH_NATIVE


@dataclass(frozen=True)
class LocalSettings:
    """A model in this process (LocalBackend)."""

    model_dir: str | None = None  # a Hugging Face model directory; None: the embedded model
    device: str = "auto"  # auto, cpu or cuda
    fim: str | None = None  # "family[:layout]"; None: the template the tokenizer's special tokens say
    engine: str = TORCH_NATIVE  # a name predictor/loading/engine_names.py accepts (an alias too)
    weights: str = "auto"  # how the engine holds the weights: auto, fp32, bf16 or int8
    threads: int | None = None  # model threads; None: adapted to the machine's load (predictor/loading/threads.py)
    trust_remote_code: bool = False  # let a model directory run its own Python code
    kv_reuse: bool = True  # keep each document's KV cache and run only what changed
    max_slots: int = 8  # documents (and speculation branches) whose KV caches are kept
    max_kv_bytes: int = 256 << 20  # bytes those caches may hold together
    prefill_chunk: int | None = None  # tokens per prefill chunk; None: by the model's size (engine/chunking.py)
    lookup: bool | None = None  # verify prompt-lookup drafts several a pass: None per request, True/False always/never
    # a request the user waits for (priority 0): the longest its prefill and its decode may take, in ms (0: no bound);
    # a cold prompt that would not fit is run on the lines nearest the cursor, the decode stops with what it has
    max_prompt_ms: float = 0.0
    max_predict_ms: float = 0.0


@dataclass(frozen=True)
class RemoteSettings:
    """An OpenAI-compatible server (RemoteBackend)."""

    url: str
    model: str | None = None  # the model name sent; None: the first the server lists
    fim: str | None = None  # "family[:layout]", "server" (its own template), or None: guessed from the model name
    api_key: str | None = None  # the key itself, sent as a bearer token
    connect_timeout: float = 2.0
    read_timeout: float = 10.0
    total_timeout: float = 20.0  # seconds one request may take, first byte to last
    retries: int = 2
    backoff: float = 0.05
    discover: bool = True  # look at the server once at start (models, template, route)
    priority: str = "auto"  # send each request's priority (vLLM's field): auto (engines known to order by it), on, off
    # a request the user waits for: llama-server is sent llama.vim's t_max_prompt_ms / t_max_predict_ms; any engine's
    # stream is cut max_predict_ms after its first token, and asked for no more tokens than fit in it (0: no bound)
    max_prompt_ms: float = 0.0
    max_predict_ms: float = 0.0
