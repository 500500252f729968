"""The torch engine's prefill through the native kernels (native/gemm.h) against the same prefill in torch alone:
the logits a prompt leaves, the KV cache it writes, and the greedy tokens after it, in every weight format."""
from __future__ import annotations

import pytest
import torch

from tabd.predictor.engine import generate, native
from tabd.predictor.engine.weights import Matrix

LIB, WHY = native.load()
pytestmark = pytest.mark.skipif(LIB is None, reason=f"no native build here: {WHY}")


def _model(hidden: int, inter: int, heads: int, kv: int, head_dim: int, vocab: int = 300):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=vocab, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=2,
                      num_attention_heads=heads, num_key_value_heads=kv, head_dim=head_dim,
                      max_position_embeddings=512)
    model = Qwen2ForCausalLM(cfg).eval()
    with torch.no_grad():
        for layer in model.model.layers:  # the init leaves biases at 0, which would not test them
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                proj.bias.normal_(0, 0.5)
    return model


def _fast(model, weights: str):
    from tabd.predictor.engine.model import FastLlama

    fast = FastLlama(model, weights=weights)
    assert fast.native is not None, fast.native_why
    for layer in fast.layers:  # a small fp32 model keeps plain matrices for torch: take the panels, as a large one does
        for m in (layer[1], layer[3], layer[5], layer[6]):
            m.prefill_copy = None
    return fast


def _torch_alone(fast):
    """The same engine with its prefill in torch ops only (the native step kept for single tokens)."""
    fast._native_prefill = lambda cache: None
    return fast


@pytest.mark.parametrize("weights", ["fp32", "bf16", "int8"])
@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("hidden, inter, heads, kv, head_dim", [
    (160, 128, 5, 1, 32),   # hidden and the q/k/v width leave partial 64-column panels; 5 query heads on 1 KV head
    (128, 256, 4, 2, 64),   # whole panels; two KV heads
])
def test_a_native_prefill_gives_torchs_logits_cache_and_greedy_text(weights, threads, hidden, inter, heads, kv,
                                                                   head_dim):
    model = _model(hidden, inter, heads, kv, head_dim)
    fast, plain = _fast(model, weights), _torch_alone(_fast(model, weights))
    ids = torch.randint(0, 300, (230,), generator=torch.Generator().manual_seed(1)).tolist()
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        a, b = fast.new_cache(512), plain.new_cache(512)
        assert fast._native_prefill(a) is fast.native  # this shape does run the native kernels
        for lo, hi in ((0, 97), (97, 200), (200, 230)):  # from position 0 (causal), then on top of a cache (masked)
            got = generate.prefill(fast, ids[lo:hi], a, chunk=hi - lo)
            want = generate.prefill(plain, ids[lo:hi], b, chunk=hi - lo)
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
            assert int(torch.argmax(got)) == int(torch.argmax(want))
        torch.testing.assert_close(a.k[:, :, :230], b.k[:, :, :230], rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(a.v[:, :, :230], b.v[:, :, :230], rtol=1e-4, atol=1e-5)
        rule = generate.Rule(12)
        assert generate.decode_n_tokens(fast, got, a, rule).tokens == generate.decode_n_tokens(plain, want, b, rule).tokens
    finally:
        torch.set_num_threads(old)


@pytest.mark.parametrize("fmt", ["fp32", "bf16", "int8"])
@pytest.mark.parametrize("n", [1, 5, 6, 7, 97, 200])
@pytest.mark.parametrize("rows, cols", [(96, 64), (70, 200), (300, 128)])
def test_the_native_matmul_is_x_at_w_for_any_count_of_tokens_and_width(fmt, n, rows, cols):
    torch.manual_seed(n)
    m = Matrix(torch.randn(rows, cols).numpy(), fmt).on_torch()
    x = torch.randn(n, rows)
    decoder = native.NativeDecoder.__new__(native.NativeDecoder)
    decoder.lib, decoder.threads = LIB, lambda: 2
    torch.testing.assert_close(decoder.matmul(x, m), x @ m.dense(), rtol=1e-4, atol=1e-4)
    if cols % 128 == 0:
        g, u = decoder.matmul(x, m).chunk(2, dim=-1)  # the same sums: only silu's arithmetic may differ
        torch.testing.assert_close(decoder.swiglu(x, m), torch.nn.functional.silu(g) * u, rtol=1e-5, atol=1e-6)


def test_input_the_kernels_do_not_take_is_an_error_not_a_crash():
    m = Matrix(torch.randn(64, 200).numpy(), "bf16").on_torch()  # 2 x 100 columns: not whole panels
    decoder = native.NativeDecoder.__new__(native.NativeDecoder)
    decoder.lib, decoder.threads = LIB, lambda: 2
    with pytest.raises(ValueError, match="swiglu"):
        decoder.swiglu(torch.randn(3, 64), m)
    fast = _fast(_model(128, 256, 4, 2, 64), "bf16")
    cache = fast.new_cache(16)
    with pytest.raises(ValueError, match="qkv_rope refused 20 tokens at 0"):  # past the cache's capacity
        fast.native.qkv_rope(torch.zeros(20, (4 + 2 * 2) * 64), None, 0, cache, 0)


def test_swiglu_holds_at_gate_values_far_out_either_way():
    """silu at gates from -200 to 200 (exp(-g) past fp32's range on one side, 0 on the other) is torch's."""
    gate = torch.linspace(-200, 200, 64 * 3)
    w = torch.zeros(2, 2 * len(gate))
    w[0, : len(gate)] = gate  # token 0 reads the gates as they are,
    w[0, len(gate) :] = 1.0   # times an up of 1
    w[1, : len(gate)] = 1e-3 * gate
    w[1, len(gate) :] = 2.0
    m = Matrix(w.numpy(), "fp32").on_torch()
    decoder = native.NativeDecoder.__new__(native.NativeDecoder)
    decoder.lib, decoder.threads = LIB, lambda: 2
    x = torch.eye(2).repeat(7, 1)  # 14 tokens: more than one tile
    g, u = (x @ w).chunk(2, dim=-1)
    got = decoder.swiglu(x, m)
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, torch.nn.functional.silu(g) * u, rtol=1e-6, atol=1e-6)


def test_the_engine_says_which_kernels_run_its_prefill():
    model = _model(128, 256, 4, 2, 64)
    fast = _fast(model, "bf16")
    assert fast.prefill_kernels().startswith("native gemm.h, bf16 panels read in place")
    from tabd.predictor.engine.model import FastLlama

    small = FastLlama(model, weights="fp32")  # a small fp32 model keeps plain matrices: one MKL GEMM each
    assert small.prefill_kernels() == "torch: plain fp32 matrices (MKL), attention SDPA"
    assert FastLlama(model, native=False, weights="bf16").prefill_kernels() == "torch: bf16 panels as fp32, attention SDPA"


def test_tabd_native_march_builds_the_library_for_that_instruction_set(tmp_path):
    # TABD_NATIVE_MARCH=haswell builds the AVX2 kernels alone (how a machine without AVX-512 is timed here): the
    # library says so, and a bad value is the compiler's error, not a library built for this CPU
    import os
    import subprocess
    import sys

    probe = ("from tabd.predictor.engine import native; lib, why = native.load(); "
             "print(lib.tabd_gemm_isa().decode() if lib else 'ERROR ' + why)")

    def isa(march: str) -> str:
        env = {**os.environ, "TABD_NATIVE_MARCH": march, "TABD_CACHE": str(tmp_path)}
        return subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True,
                              timeout=300).stdout.strip()

    assert isa("haswell").startswith("avx2+fma")
    assert isa("x86-64").startswith("generic vectors")
    bad = isa("no-such-cpu")
    assert bad.startswith("ERROR") and "no-such-cpu" in bad
