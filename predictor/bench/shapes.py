"""Model shapes for `tabd bench engines --shape`: random weights at real configurations, built without the hub.

Speed depends on a model's shape (hidden size, layers, heads, KV heads,
intermediate size, vocabulary, tied embeddings), not on its weight values, so
a directory with random weights at Qwen2.5-Coder's configuration is an honest
speed test of that model here. A shape is built once (transformers'
Qwen2Config + Qwen2ForCausalLM(config) + save_pretrained, the embedded
model's tokenizer copied beside it) and cached under ~/.cache/tabd/shapes
(or $TABD_CACHE/shapes). `python -m tabd.predictor.bench.shapes NAME` builds one.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

# the published configurations of Qwen2.5-Coder 0.5B and 1.5B (config.json on the model cards)
QWEN = dict(model_type="qwen2", vocab_size=151936, max_position_embeddings=32768, rope_theta=1000000.0,
            rms_norm_eps=1e-6, tie_word_embeddings=True, hidden_act="silu")
SHAPES: dict[str, dict] = {
    "qwen2.5-coder-0.5b": dict(QWEN, hidden_size=896, num_hidden_layers=24, num_attention_heads=14,
                               num_key_value_heads=2, intermediate_size=4864),
    "qwen2.5-coder-1.5b": dict(QWEN, hidden_size=1536, num_hidden_layers=28, num_attention_heads=12,
                               num_key_value_heads=2, intermediate_size=8960),
}
NAMES = ("embedded", *SHAPES)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def cache_root() -> Path:
    root = os.environ.get("TABD_CACHE") or os.path.join(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "tabd")
    return Path(root) / "shapes"


def weight_bytes(model_dir: Path) -> int:
    return sum(p.stat().st_size for p in Path(model_dir).glob("*.safetensors"))


def model_dir(name: str) -> Path:
    """The directory for a shape, built on first use (about 30 s and 2 GB for 0.5B; 6 GB for 1.5B)."""
    from tabd.predictor.loading.loader import DEFAULT_MODEL_DIR

    if name == "embedded":
        return DEFAULT_MODEL_DIR
    if name not in SHAPES:
        raise ValueError(f"unknown shape {name!r}: use {', '.join(NAMES)}")
    target = cache_root() / name
    if (target / "config.json").is_file() and any(target.glob("*.safetensors")):
        return target
    return build(name, target)


def build(name: str, target: Path) -> Path:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from tabd.predictor.loading.loader import DEFAULT_MODEL_DIR

    spec = dict(SHAPES[name])
    spec.pop("model_type")
    tmp = target.with_name(target.name + ".building")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    torch.manual_seed(0)
    with torch.no_grad():
        model = Qwen2ForCausalLM(Qwen2Config(**spec, dtype="float32")).eval()
        model.save_pretrained(tmp, safe_serialization=True)
    del model
    for f in TOKENIZER_FILES:  # the embedded tokenizer: its ids are valid in any vocabulary this large
        if (DEFAULT_MODEL_DIR / f).is_file():
            shutil.copy(DEFAULT_MODEL_DIR / f, tmp / f)
    (tmp / "tabd_shape.json").write_text(json.dumps({"shape": name, "random_weights": True}))
    shutil.rmtree(target, ignore_errors=True)
    os.replace(tmp, target)  # a half-built directory is never taken for a shape
    return target


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(model_dir(arg))
