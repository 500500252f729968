"""The torch-free runner: a Llama-shaped model served by the native step alone, over numpy buffers.

`import torch` costs 2-3 s here, more than everything else on the way to an
editor's first suggestion; the native step (native/decode.c) already runs the
whole forward pass from weight panels and only needs pointers. So this module
reads config.json and the safetensors with numpy (fastload.read_tensors), packs the weights into
weights.py's store (the one every engine holds: panels, bf16 or int8),
computes the rotary tables as transformers does in fp32, and runs prefill as
pieces of up to max_prefill tokens (`tabd_prefill_n`: the lm_head only for the
last) and decoding one token a step. It implements the Runner protocol
(runner.py); its logits are numpy arrays.
"""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from tabd.predictor.engine import native
from tabd.predictor.engine.kvcache import NumpyKV
from tabd.predictor.engine.layout import SMALL_BYTES, choose_format
from tabd.predictor.engine.layout import PASS_TOKENS as NATIVE_STEPS  # verify() passes, as FastLlama's
from tabd.predictor.engine.weights import Matrix, Rows, pack_panels


def rotary(theta: float, dim: int, positions: int) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin [positions, dim], computed as transformers' default RoPE computes them in fp32."""
    inv_freq = (np.float32(1.0) / (np.float32(theta) ** (np.arange(0, dim, 2, dtype=np.float32) / np.float32(dim))))
    freqs = np.arange(positions, dtype=np.float32)[:, None] * inv_freq.astype(np.float32)[None, :]
    emb = np.concatenate([freqs, freqs], axis=-1)
    return np.ascontiguousarray(np.cos(emb), dtype=np.float32), np.ascontiguousarray(np.sin(emb), dtype=np.float32)


class TorchFreeRunner:
    """The Runner protocol over the native step, with weights and caches in numpy: no torch anywhere."""

    array_kind = "numpy"  # logits are numpy arrays (generate.py and local.py take either)

    def __init__(self, config: SimpleNamespace, tensors: dict[str, np.ndarray], lib, weights: str = "auto",
                 threads=None) -> None:
        self.config = cfg = config
        self.n_heads = cfg.num_attention_heads
        self.n_kv = cfg.num_key_value_heads or self.n_heads
        self.head_dim = cfg.head_dim
        self.eps = cfg.rms_norm_eps
        self.scale = self.head_dim**-0.5
        self.parameters = _parameter_count(tensors, cfg)
        self.weights, self.weights_why = choose_format(weights, 4 * self.parameters)
        self.small = 4 * self.parameters <= SMALL_BYTES
        self.cos, self.sin = rotary(cfg.rope_theta, self.head_dim, int(cfg.max_position_embeddings))
        self._take_weights(tensors)
        self.native = native.NativeDecoder(lib, self, threads)
        self.max_batch = self.native.max_batch

    def _take_weights(self, w: dict[str, np.ndarray]) -> None:
        """The weights in weights.py's store; each loaded tensor is dropped from `w` once copied (held once)."""
        fmt, cfg = self.weights, self.config

        def take(name: str) -> np.ndarray:
            return w.pop(name)

        embed = w["model.embed_tokens.weight"]
        self.embed_rows = Rows(embed, fmt)
        head = w.pop("lm_head.weight", None)
        self.lm_rows = self.embed_rows if head is None else Rows(head, fmt)  # a head in the file is used, as fastload does
        self.lm_panels = pack_panels(self.lm_rows.data.T) if self.small and fmt == "fp32" else None
        del w["model.embed_tokens.weight"]
        self.norm = np.array(take("model.norm.weight"), dtype=np.float32)  # copies: not views of the file
        self.layers = []
        for i in range(cfg.num_hidden_layers):
            p = f"model.layers.{i}."
            q, k, v = (take(p + f"self_attn.{n}_proj.weight") for n in "qkv")
            bias = None
            if p + "self_attn.q_proj.bias" in w:
                bias = np.concatenate([take(p + f"self_attn.{n}_proj.bias") for n in "qkv"]).astype(np.float32)
            qkv = Matrix(np.concatenate([q, k, v]).T, fmt)
            gate_up = Matrix(np.concatenate([take(p + "mlp.gate_proj.weight"), take(p + "mlp.up_proj.weight")]).T, fmt)
            o = Matrix(take(p + "self_attn.o_proj.weight").T, fmt)
            down = Matrix(take(p + "mlp.down_proj.weight").T, fmt)
            self.layers.append((np.array(take(p + "input_layernorm.weight"), dtype=np.float32), qkv, bias, o,
                                np.array(take(p + "post_attention_layernorm.weight"), dtype=np.float32), gate_up, down))

    def weight_bytes(self) -> int:
        parts = [m for layer in self.layers for m in (layer[1], layer[3], layer[5], layer[6])]
        total = sum(p.nbytes() for p in parts) + self.embed_rows.nbytes()
        return total + (0 if self.lm_rows is self.embed_rows else self.lm_rows.nbytes())

    def new_cache(self, capacity: int) -> NumpyKV:
        return NumpyKV(len(self.layers), self.n_kv, self.head_dim, capacity)

    def forward_last(self, ids: list[int], cache: NumpyKV) -> np.ndarray:
        """Logits after `ids` (continuing the cache's positions), fed in pieces of up to max_prefill tokens."""
        if not ids:
            raise ValueError("forward_last needs at least one token")
        step = self.native.max_prefill
        for i in range(0, len(ids), step):
            logits = self.native.prefill(ids[i : i + step], cache)
        return logits.copy()

    def decode_greedy(self, token: int, cache: NumpyKV) -> tuple[int, float]:
        best, _ = self.native.step(token, cache)
        return best, self.native.probs[0]

    def verify_logits(self, ids: list[int], cache: NumpyKV) -> np.ndarray | None:
        """Up to NATIVE_STEPS tokens in one pass; the logits after each (a reused buffer), as FastLlama's."""
        if len(ids) > NATIVE_STEPS:
            return None
        return self.native.steps(ids, cache)

    def verify(self, ids: list[int], cache: NumpyKV) -> list[tuple[int, float]] | None:
        if len(ids) > NATIVE_STEPS:
            return None
        self.native.steps(ids, cache)
        return [(self.native.best[i], self.native.probs[i]) for i in range(len(ids))]


def _parameter_count(tensors: dict[str, np.ndarray], cfg) -> int:
    """As nn.Module.parameters() counts them: a tied head is the embedding."""
    return sum(t.size for k, t in tensors.items() if not (k == "lm_head.weight" and cfg.tie_word_embeddings))


def why_not(d: Path, device: str) -> str:
    """'' when the torch-free runner can serve this directory on this device, else why not (no torch needed)."""
    from tabd.predictor.loading import fastload

    if device not in ("auto", "cpu"):
        return f"device {device}: the native step runs on the CPU"
    if device == "auto" and gpu_present():
        return "a GPU may be present (auto device): torch decides"
    try:
        raw = json.loads((d / "config.json").read_text())
    except (OSError, ValueError) as exc:
        return f"config.json: {exc}"
    if fastload.llama_config(raw) is None:
        return f"model_type {raw.get('model_type')!r} or its settings are not the Llama shape the native step runs"
    lib, why = native.load()
    return "" if lib is not None else f"no native build: {why}"


def gpu_present() -> bool:
    """Whether a CUDA (or ROCm) device node exists: without one, torch's "auto" would choose the CPU."""
    return any(Path(p).exists() for p in ("/dev/nvidia0", "/dev/nvidiactl", "/dev/kfd", "/dev/dxg"))


def load(d: Path, weights: str = "auto", threads=None) -> TorchFreeRunner:
    """The runner for a directory why_not() accepted; ValueError where its tensors are not a Llama's."""
    from tabd.predictor.loading import fastload

    config = fastload.llama_config(json.loads((d / "config.json").read_text()))
    lib, why = native.load()
    if config is None or lib is None:
        raise ValueError(why or "not a Llama-shaped model")
    tensors = fastload.read_tensors(d)
    _check_tensors(tensors, config)
    return TorchFreeRunner(config, tensors, lib, weights, threads)


def _check_tensors(w: dict, cfg) -> None:
    """ValueError unless the tensors are exactly those the native step applies (as fastload checks them)."""
    from tabd.predictor.loading.fastload import LAYER_KEYS, OPTIONAL_KEYS

    needed = {"model.embed_tokens.weight", "model.norm.weight"}
    known = needed | {"lm_head.weight"}
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        needed |= {p + k for k in LAYER_KEYS}
        known |= {p + k for k in LAYER_KEYS + OPTIONAL_KEYS}
    if not cfg.tie_word_embeddings:
        needed.add("lm_head.weight")
    missing, unknown = needed - w.keys(), w.keys() - known
    if missing or unknown:
        raise ValueError(f"the safetensors are not a Llama-shaped model's: missing {sorted(missing)[:3]}, "
                         f"not applied {sorted(unknown)[:3]}")
