"""A small Qwen2-shaped model directory with random weights, built without the hub."""
from __future__ import annotations

import shutil

import torch

from tabd.predictor.loading import loader


def qwen2_dir(tmp_path, bias_seed: int = 1):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=8192, hidden_size=128, intermediate_size=200, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=1, max_position_embeddings=512,
                      tie_word_embeddings=False, rope_theta=50000.0)
    model = Qwen2ForCausalLM(cfg).eval()
    with torch.no_grad():
        gen = torch.Generator().manual_seed(bias_seed)
        for layer in model.model.layers:  # the init leaves biases at 0, which would not test them
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                proj.bias.copy_(torch.randn(proj.bias.shape, generator=gen) * 0.5)
    d = tmp_path / "qwen2"
    model.save_pretrained(d)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(loader.DEFAULT_MODEL_DIR / name, d / name)
    return d

