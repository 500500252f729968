"""The native prefill pass (decode.c's tabd_prefill_n): up to 64 prompt tokens a call, each weight panel blocked as a
GEMM (converted to fp32 once per block of rows and swept by every group of tokens), against passes of 8 tokens,
which stream each panel per pass: the same bits, logits and KV, in every weight format."""
from __future__ import annotations

import pytest
import torch

from tabd.predictor.engine import native

LIB, WHY = native.load()
pytestmark = pytest.mark.skipif(LIB is None, reason=f"no native build here: {WHY}")


@pytest.mark.parametrize("threads, weights", [(1, "fp32"), (2, "bf16"), (1, "int8"), (3, "fp32")])
def test_a_prefill_pass_of_up_to_64_tokens_gives_the_bits_of_passes_of_8(threads, weights):
    """A partial column panel (intermediate 200), a q/k/v bias, more rows than a block of the GEMM (hidden 320 >
    256), and pass lengths that leave groups of every size."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from tabd.predictor.engine.model import FastLlama

    torch.manual_seed(3)
    cfg = Qwen2Config(vocab_size=300, hidden_size=320, intermediate_size=200, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=80, max_position_embeddings=512)
    fast = FastLlama(Qwen2ForCausalLM(cfg).eval(), weights=weights)
    assert fast.native is not None, fast.native_why
    dec = fast.native
    assert dec.max_prefill == 64 and dec.max_batch == 8
    ids = torch.randint(0, 300, (400,)).tolist()
    old_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for start, n in [(0, 64), (64, 9), (73, 37), (110, 64), (174, 13), (187, 1), (188, 50)]:
            a, b = fast.new_cache(512), fast.new_cache(512)
            for i in range(0, start, 64):  # the same prompt before, as each side would have run it
                dec.prefill(ids[i:min(start, i + 64)], a)
            for i in range(0, start, 8):
                dec.prefill(ids[i:min(start, i + 8)], b)
            whole = dec.prefill(ids[start:start + n], a).clone()
            for i in range(start, start + n, 8):
                eights = dec.prefill(ids[i:min(start + n, i + 8)], b)
            assert torch.equal(whole, eights), (start, n, weights)
            assert a.length == b.length == start + n
            assert torch.equal(a.k[:, :, :a.length], b.k[:, :, :b.length])
            assert torch.equal(a.v[:, :, :a.length], b.v[:, :, :b.length])
    finally:
        torch.set_num_threads(old_threads)


def test_a_prefill_pass_over_64_tokens_is_refused_not_overrun():
    from transformers import LlamaConfig, LlamaForCausalLM

    from tabd.predictor.engine.model import FastLlama

    cfg = LlamaConfig(vocab_size=100, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=256)
    fast = FastLlama(LlamaForCausalLM(cfg).eval(), weights="fp32")
    cache = fast.new_cache(256)
    with pytest.raises(ValueError):
        fast.native.prefill(list(range(65)), cache)
    with pytest.raises(ValueError):
        fast.native.steps(list(range(9)), cache)  # a verify pass stays at 8
    assert cache.length == 0
