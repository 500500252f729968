"""A small model the tests build, whose suggestions are known: it writes ` total()` wherever it is asked.

A Llama with the project's tokenizer whose attention and MLP outputs are zero,
so each position's logits depend on its own token alone: a bigram table set by
hand. After any token but the chain's it writes ` total`, after ` total` it
writes `()`, after `()` a newline, after a newline ` total` again. So at the end
of a line the suggestion is ` total()`; accepted, the next one is `\\n total()`.
It is saved with save_pretrained beside the tokenizer's files and loaded by the
daemon through its real loading path (`tabd serve --model DIR`), so the tests
that use it assert exact text, whatever the shipped model is trained to write.
Its layers still compute (zeros cost what weights cost), so a long prompt takes
a while to prefill without KV reuse: what the in-flight test needs.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

SHIPPED = Path(__file__).resolve().parents[2] / "predictor" / "model"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
CHAIN = (4274, 306, 203)  # " total", "()", "\n" in the project's tokenizer (checked in build)
SUGGESTION = " total()"
# with pairs=True it also writes `x)` after an open `(`: a suggestion that closes the bracket the cursor is in
PAIRS = (12, 92, 13)  # "(", "x", ")"
PAIR_SUGGESTION = "x)"
# Where the session's fixture builds it: known at import, so a pytest-lsp server command can name it.
MODEL_DIR = Path(tempfile.gettempdir()) / f"tabd-fixture-model-{os.getpid()}"


def build(out: Path, layers: int = 4, hidden: int = 256, pairs: bool = False) -> Path:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_file=str(SHIPPED / "tokenizer.json"))
    assert [tok.decode([i]) for i in CHAIN] == [" total", "()", "\n"], "the tokenizer changed: pick the chain again"
    assert [tok.decode([i]) for i in PAIRS] == ["(", "x", ")"], "the tokenizer changed: pick the pairs again"
    config = LlamaConfig(vocab_size=len(tok), hidden_size=hidden, intermediate_size=4 * hidden, num_hidden_layers=layers,
                         num_attention_heads=hidden // 32, num_key_value_heads=2, head_dim=32,
                         max_position_embeddings=2048, tie_word_embeddings=False, bos_token_id=0, eos_token_id=0,
                         pad_token_id=4)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()  # attention adds nothing to the residual stream
            layer.mlp.down_proj.weight.zero_()  # nor does the MLP
        embed = model.model.embed_tokens.weight
        embed.zero_()
        embed[:, 0] = 1.0  # every token but the chain's: direction 0
        for n, token in enumerate(CHAIN, 1):
            embed[token] = 0.0
            embed[token, n] = 1.0  # chain token n: direction n
        head = model.lm_head.weight
        head.zero_()
        head[CHAIN[0], 0] = 1.0  # after any other token: " total"
        head[CHAIN[1], 1] = 1.0  # after " total": "()"
        head[CHAIN[2], 2] = 1.0  # after "()": a newline
        head[CHAIN[0], 3] = 1.0  # after a newline: " total"
        if pairs:  # after "(": "x", after "x": ")", after ")": a newline
            for n, token in enumerate(PAIRS, 4):
                embed[token] = 0.0
                embed[token, n] = 1.0
            head[PAIRS[1], 4] = 1.0
            head[PAIRS[2], 5] = 1.0
            head[CHAIN[2], 6] = 1.0
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    for name in TOKENIZER_FILES:
        shutil.copy(SHIPPED / name, out / name)
    return out
