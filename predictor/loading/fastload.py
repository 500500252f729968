"""Loading a Llama-shaped model directory without transformers: config.json, tokenizer.json and safetensors.

transformers' AutoModel import and model construction cost seconds at start-up
(its modeling stack, then a randomly initialised module tree that the weights
overwrite). The torch+native and torch engines only read weight tensors, the rotary tables and a
few config numbers, so for the architectures it knows this module builds just
those: a tokenizer straight from the `tokenizers` package, the safetensors
tensors, and a small object with the attribute paths FastLlama reads
(`model.layers[i].self_attn.q_proj.weight`, ...). Anything it does not know
returns None, and the caller loads through transformers as before.
"""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

SUPPORTED = {"llama", "qwen2", "mistral"}  # the shapes FastLlama runs (predictor/engine/model.py)
# transformers 5 maps some model types to their own tokenizer class, which rebuilds the pre-tokenizer instead of
# reading tokenizer.json's (Qwen2 does): tokenizer.json alone is what transformers runs only for these
TOKENIZER_JSON_TYPES = {"llama"}
TOKENIZER_JSON_CLASSES = {None, "PreTrainedTokenizerFast", "TokenizersBackend"}
LAYER_KEYS = (
    "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight",
    "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
    "input_layernorm.weight", "post_attention_layernorm.weight",
)
OPTIONAL_KEYS = ("self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias")


def _token_text(value: Any) -> str | None:
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


class FastTokenizer:
    """The slice of PreTrainedTokenizerFast that the local backend uses, over `tokenizers.Tokenizer` itself."""

    def __init__(self, tokenizer, specials: dict[str, str | None], extra: list[str]) -> None:
        self._tok = tokenizer
        self._added = {t.content: i for i, t in tokenizer.get_added_tokens_decoder().items()}
        self.eos_token_id = self._id(specials.get("eos_token"))
        self.unk_token_id = self._id(specials.get("unk_token"))
        self.all_special_tokens = sorted({t for t in (*specials.values(), *extra) if t})

    @classmethod
    def from_dir(cls, d: Path, model_type: str = "llama") -> "FastTokenizer | None":
        """The tokenizer, or None where transformers would not run tokenizer.json as it is."""
        from tokenizers import Tokenizer

        config_path = d / "tokenizer_config.json"
        config = json.loads(config_path.read_text()) if config_path.is_file() else {}
        if model_type not in TOKENIZER_JSON_TYPES or config.get("tokenizer_class") not in TOKENIZER_JSON_CLASSES:
            return None
        if config.get("clean_up_tokenization_spaces"):
            return None  # transformers rewrites decoded text then: leave it to transformers
        specials = {k: _token_text(config.get(k)) for k in ("bos_token", "eos_token", "unk_token", "pad_token")}
        extra = config.get("extra_special_tokens") or config.get("additional_special_tokens") or []
        extra = [t for t in (_token_text(x) for x in (extra.values() if isinstance(extra, dict) else extra)) if t]
        return cls(Tokenizer.from_file(str(d / "tokenizer.json")), specials, extra)

    def _id(self, token: str | None) -> int | None:
        return None if token is None else self._tok.token_to_id(token)

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return self._tok.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, ids) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=False)

    def convert_tokens_to_ids(self, token: str) -> int | None:
        tid = self._tok.token_to_id(token)
        return self.unk_token_id if tid is None else tid

    def get_added_vocab(self) -> dict[str, int]:
        return dict(self._added)

    def __len__(self) -> int:
        return self._tok.get_vocab_size(with_added_tokens=True)


def llama_config(raw: dict) -> SimpleNamespace | None:
    """The config numbers FastLlama reads, or None for what it does not run."""
    if raw.get("model_type") not in SUPPORTED or raw.get("hidden_act", "silu") != "silu":
        return None
    if raw.get("use_sliding_window") or raw.get("mlp_bias"):
        return None
    rope = raw.get("rope_parameters") or raw.get("rope_scaling") or {}
    if rope.get("rope_type", rope.get("type", "default")) != "default":
        return None
    cfg = dict(raw)
    cfg["rope_theta"] = float(rope.get("rope_theta") or raw.get("rope_theta") or 10000.0)
    cfg["rope_scaling"] = None
    cfg.setdefault("num_key_value_heads", raw.get("num_attention_heads"))
    cfg.setdefault("rms_norm_eps", 1e-6)
    cfg.setdefault("max_position_embeddings", 2048)
    cfg.setdefault("tie_word_embeddings", False)
    try:
        cfg["head_dim"] = int(raw.get("head_dim") or raw["hidden_size"] // raw["num_attention_heads"])
        int(raw["num_hidden_layers"])
    except (KeyError, TypeError, ValueError):
        return None
    return SimpleNamespace(**cfg)


class Rotary:
    """Default RoPE tables computed as transformers' LlamaRotaryEmbedding computes them (float32, then cast)."""

    def __init__(self, theta: float, dim: int) -> None:
        import torch

        self.inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float) / dim))

    def __call__(self, x, positions):
        import torch

        freqs = positions[..., None].float() * self.inv_freq.to(device=x.device, dtype=torch.float)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype=x.dtype), emb.sin().to(dtype=x.dtype)


STORED = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16}  # safetensors dtypes read here (to fp32)


def read_tensors(d: Path) -> dict[str, np.ndarray]:
    """Every tensor of the directory's safetensors files as fp32 numpy arrays."""
    tensors: dict[str, np.ndarray] = {}
    for path in sorted(d.glob("*.safetensors")):
        tensors.update(read_safetensors(path))
    return tensors


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """A safetensors file (8-byte little-endian header length, a JSON header, raw little-endian bytes), mapped:
    fp32 tensors are views of the mapping (the store copies what it keeps), fp16 and bf16 are widened to fp32
    exactly (a bf16 is an fp32's top 16 bits). ValueError for anything else, or a file that is not one."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        if not 2 <= n <= size - 8:
            raise ValueError(f"{path.name} is not a safetensors file")
        header = json.loads(f.read(n))
    raw = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n) if size > 8 + n else np.empty(0, np.uint8)
    out = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        dtype = STORED.get(spec.get("dtype"))
        start, end = spec["data_offsets"]
        if dtype is None:
            raise ValueError(f"{path.name}: {name} is {spec.get('dtype')}, not F32, F16 or BF16")
        a = raw[start:end].view(dtype).reshape(spec["shape"])
        if dtype is np.uint16:
            a = (a.astype(np.uint32) << np.uint32(16)).view(np.float32)
        out[name] = a if dtype is np.float32 else a.astype(np.float32)
    return out


def _weights(d: Path, device: str, dtype) -> dict | None:
    """The tensors as torch's, from the one safetensors reader: fp32, copied out of the file's mapping (as
    safetensors' load_file copies), then placed (bf16 on a GPU)."""
    import torch

    return {k: torch.from_numpy(a if a.flags.writeable else a.copy()).to(device=device, dtype=dtype)
            for k, a in read_tensors(d).items()}


def _module(weight=None, bias=None) -> SimpleNamespace:
    return SimpleNamespace(weight=weight, bias=bias)


def _layer(w: dict, i: int) -> SimpleNamespace | None:
    p = f"model.layers.{i}."
    if any(p + k not in w for k in LAYER_KEYS):
        return None
    known = {p + k for k in LAYER_KEYS + OPTIONAL_KEYS}
    if any(k.startswith(p) and k not in known for k in w):
        return None  # a bias or a norm FastLlama does not apply (o_proj bias, q/k norms, ...)
    get = lambda k: w.get(p + k)  # noqa: E731
    attn = SimpleNamespace(**{n: _module(get(f"self_attn.{n}.weight"), get(f"self_attn.{n}.bias"))
                              for n in ("q_proj", "k_proj", "v_proj", "o_proj")})
    mlp = SimpleNamespace(**{n: _module(get(f"mlp.{n}.weight")) for n in ("gate_proj", "up_proj", "down_proj")})
    return SimpleNamespace(self_attn=attn, mlp=mlp, input_layernorm=_module(get("input_layernorm.weight")),
                           post_attention_layernorm=_module(get("post_attention_layernorm.weight")))


class FastModel:
    """What FastLlama and the local backend read from a transformers model, built from the tensors alone."""

    def __init__(self, config: SimpleNamespace, weights: dict, device: str, dtype) -> None:
        import torch

        self.config = config
        self.device = torch.device(device)
        self.dtype = dtype
        layers = [_layer(weights, i) for i in range(config.num_hidden_layers)]
        embed = weights.get("model.embed_tokens.weight")
        head = weights.get("lm_head.weight", embed if config.tie_word_embeddings else None)
        if embed is None or head is None or any(layer is None for layer in layers) or "model.norm.weight" not in weights:
            raise ValueError("the safetensors do not hold the tensors of a Llama-shaped model")
        self.model = SimpleNamespace(embed_tokens=_module(embed), norm=_module(weights["model.norm.weight"]), layers=layers,
                                     rotary_emb=Rotary(config.rope_theta, config.head_dim))
        self.lm_head = _module(head)
        self._tensors = list({id(t): t for t in (*weights.values(), head)}.values())

    def parameters(self):
        """Each weight tensor once (a tied head is the embedding), as nn.Module.parameters() counts them."""
        return iter(self._tensors)


def tokenizer_for(d: Path, model_type: str):
    """tokenizer.json through `tokenizers` where that is what transformers runs; else transformers' AutoTokenizer
    (its tokenization modules only, not the modeling stack)."""
    fast = FastTokenizer.from_dir(d, model_type) if (d / "tokenizer.json").is_file() else None
    if fast is not None:
        return fast
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(d, local_files_only=True)


def load(d: Path, device: str, dtype_name: str) -> tuple[FastModel, Any] | None:
    """(model, tokenizer) for a directory FastLlama can run without transformers' models; None when it cannot."""
    import torch

    config = llama_config(json.loads((d / "config.json").read_text()))
    if config is None:
        return None
    tokenizer = tokenizer_for(d, config.model_type)
    dtype = getattr(torch, dtype_name)
    try:  # a dtype the reader does not widen, or tensors that are not a Llama's: transformers loads it
        model = FastModel(config, _weights(d, device, dtype), device, dtype)
    except ValueError:
        return None
    return model, tokenizer
