"""A hand-written forward pass for Llama-shaped models over a preallocated KV cache.

transformers' forward is general; on a small model at one token per step its
Python overhead (module hooks, mask building, cache bookkeeping) costs more
than the arithmetic. This is the same computation written the way gpt-fast
writes it, reading the weights of the loaded transformers model (no copies
except the fused q/k/v and gate/up matrices): RMSNorm, rotary embeddings,
grouped-query attention without repeating K/V (`enable_gqa`), SwiGLU.
It is checked token for token against transformers' own forward in the tests.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from tabd.predictor.engine.kvcache import TorchKV
from tabd.predictor.engine.layout import PASS_TOKENS as NATIVE_STEPS  # up to this many new tokens: native passes
from tabd.predictor.engine.layout import SMALL_BYTES  # fp32 weights up to this: prefill also keeps plain matrices

SUPPORTED = {"llama", "qwen2", "mistral"}


def supported(cfg) -> bool:
    """A Llama-shaped model with plain rotary embeddings: what FastLlama runs."""
    if getattr(cfg, "model_type", "") not in SUPPORTED:
        return False
    return not (getattr(cfg, "rope_scaling", None) and (cfg.rope_scaling or {}).get("rope_type", "default") != "default")


def _release(t: torch.Tensor | None) -> None:
    """Empty a loaded tensor in place (every holder of it sees an empty one), so its memory goes now."""
    if t is not None:
        t.data = torch.empty(0, dtype=t.dtype)


class Dense:
    """x @ W for an [in, out] matrix kept as a plain tensor (off the CPU, where the native step is not)."""

    def __init__(self, w: torch.Tensor) -> None:
        self.w = w.contiguous()
        self.fmt = "fp32" if w.dtype == torch.float32 else str(w.dtype).removeprefix("torch.")

    def matmul(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.w

    def nbytes(self) -> int:
        return self.w.element_size() * self.w.nelement()


class FastLlama:
    def __init__(self, model, native: bool = True, weights: str = "fp32", release: bool = False) -> None:
        """weights: fp32, bf16 or int8 (the CPU store; see weights.py). release: empty the transformers
        model's tensors as they are copied, so the weights are held once."""
        cfg = model.config
        if not supported(cfg):
            raise ValueError(f"no fast path for model_type {cfg.model_type!r} or its rotary scaling")
        self.config = cfg
        self.device = model.device
        self.dtype = model.dtype
        self.n_heads = cfg.num_attention_heads
        self.n_kv = getattr(cfg, "num_key_value_heads", None) or self.n_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // self.n_heads
        self.eps = cfg.rms_norm_eps
        inner = model.model
        self.q_size = self.n_heads * self.head_dim
        self.kv_size = self.n_kv * self.head_dim
        self.scale = self.head_dim**-0.5
        self.decode_bmm = True  # set False to decode with sdpa, as transformers does
        self.cos, self.sin = self._rope(inner, cfg)
        on_cpu = self.device.type == "cpu" and self.dtype == torch.float32
        self.weights = weights if on_cpu else "fp32" if self.dtype == torch.float32 else str(self.dtype).removeprefix("torch.")
        self._take_weights(model, release, on_cpu)
        self.native, self.native_why = None, "off"
        if native:
            self.bind_native()

    def _take_weights(self, model, release: bool, on_cpu: bool) -> None:
        from tabd.predictor.engine.weights import Matrix, Rows

        small_model = self.small = sum(t.numel() for t in model.parameters()) * 4 <= SMALL_BYTES

        def matrix(w_out_in: torch.Tensor):  # stored [in, out]: x @ W is 20-30% faster than linear(x, W) for one row
            if not on_cpu:
                return Dense(w_out_in.t())
            return Matrix(w_out_in.detach().t().numpy(), self.weights).on_torch(dense=small_model)

        def small(t: torch.Tensor) -> torch.Tensor:
            return t.detach().clone()

        inner = model.model
        tied = model.lm_head.weight.data_ptr() == inner.embed_tokens.weight.data_ptr()
        fmt = self.weights if on_cpu else "fp32"
        self.embed_rows = Rows(inner.embed_tokens.weight.detach().numpy(), fmt).on_torch() if on_cpu else None
        self.embed = inner.embed_tokens.weight.detach() if not on_cpu else None
        self.lm_rows = self.embed_rows if (tied and on_cpu) else (
            Rows(model.lm_head.weight.detach().numpy(), fmt).on_torch() if on_cpu else None)
        self.lm_head = None if on_cpu else model.lm_head.weight.detach()
        self.norm = small(inner.norm.weight)
        self.layers = []
        for layer in inner.layers:
            a, m = layer.self_attn, layer.mlp
            bias = None
            if a.q_proj.bias is not None:
                bias = torch.cat([a.q_proj.bias, a.k_proj.bias, a.v_proj.bias]).detach().contiguous()
            qkv = matrix(torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]).detach())
            gate_up = matrix(torch.cat([m.gate_proj.weight, m.up_proj.weight]).detach())
            self.layers.append((small(layer.input_layernorm.weight), qkv, bias, matrix(a.o_proj.weight.detach()),
                                small(layer.post_attention_layernorm.weight), gate_up, matrix(m.down_proj.weight.detach())))
            if release and on_cpu:  # this layer's loaded tensors are copied: let them go now, not at the end
                for mod in (a.q_proj, a.k_proj, a.v_proj, a.o_proj, m.gate_proj, m.up_proj, m.down_proj):
                    _release(mod.weight)
        if release and on_cpu:  # the rest too (norms were cloned): a loader may hold all tensors as views of one buffer
            _release(inner.embed_tokens.weight)
            _release(model.lm_head.weight)
            for t in list(model.parameters()):
                _release(t)

    def converts_per_pass(self) -> bool:
        """Whether each prefill pass converts weights to fp32 (bf16 or int8 on the CPU, no fp32 copy kept): a fixed
        cost per pass, so short prefill chunks multiply it. Measured at Qwen2.5-Coder-0.5B's shape, bf16, 2 threads
        on a loaded machine: 40 ms a token in chunks of 256, 172 in chunks of 32 (aten::copy_ 24% and 45% of it)."""
        from tabd.predictor.engine.weights import Matrix

        return any(isinstance(m, Matrix) and m.fmt != "fp32" and m.prefill_copy is None
                   for layer in self.layers for m in (layer[1], layer[3], layer[5], layer[6]))

    def weight_bytes(self) -> int:
        """Bytes of the weights as this engine holds them."""
        parts = [m for layer in self.layers for m in (layer[1], layer[3], layer[5], layer[6])]
        total = sum(p.nbytes() for p in parts)
        if self.embed_rows is not None:
            total += self.embed_rows.nbytes() + (0 if self.lm_rows is self.embed_rows else self.lm_rows.nbytes())
        else:
            total += self.embed.element_size() * self.embed.nelement()
            if self.lm_head.data_ptr() != self.embed.data_ptr():
                total += self.lm_head.element_size() * self.lm_head.nelement()
        return total

    def bind_native(self) -> None:
        """Steps of up to a few tokens in native/decode.c when it builds here and the model is fp32 on the CPU."""
        from tabd.predictor.engine import native

        if self.embed_rows is None:
            self.native_why = "the native step runs on the CPU, from fp32, bf16 or int8 weights"
            return
        lib, why = native.load()
        if lib is None:
            self.native_why = why
            return
        self.native, self.native_why = native.NativeDecoder(lib, self), ""

    def _rope(self, inner, cfg):
        max_pos = int(getattr(cfg, "max_position_embeddings", 2048) or 2048)
        rotary = inner.rotary_emb
        positions = torch.arange(max_pos, device=self.device)[None, :]
        dummy = torch.zeros(1, dtype=self.dtype, device=self.device)
        with torch.inference_mode():
            cos, sin = rotary(dummy, positions)  # transformers' own rotary tables, so the numbers match
        return cos[0].contiguous(), sin[0].contiguous()

    def new_cache(self, capacity: int) -> TorchKV:
        return TorchKV(len(self.layers), self.n_kv, self.head_dim, capacity, self.dtype, self.device)

    def _rmsnorm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float32:  # one fused op; the same numbers as transformers' RMSNorm in fp32
            return F.rms_norm(x, weight.shape, weight, self.eps)
        x32 = x.to(torch.float32)
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return weight * x32.to(x.dtype)

    @staticmethod
    def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * cos + rotated * sin

    def _attend_one(self, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """One query position: each KV head serves its group of query heads, with no repeated K/V."""
        group = self.n_heads // self.n_kv
        qg = q.reshape(self.n_kv, group, self.head_dim)  # [kv, group, hd]
        scores = torch.bmm(qg * self.scale, keys.transpose(1, 2))  # [kv, group, S]
        out = torch.bmm(torch.softmax(scores, dim=-1), values)  # [kv, group, hd]
        return out.reshape(self.n_heads, 1, self.head_dim)

    def decode_greedy(self, token: int, cache: TorchKV) -> tuple[int, float]:
        """Feed one token; the greedy next token and the model's probability of it."""
        if self.native is not None:
            best, _ = self.native.step(token, cache)
            return best, self.native.probs[0]  # computed beside the argmax in C: no torch op per token
        logits = self.forward_last([token], cache)
        best = int(torch.argmax(logits))
        return best, float(torch.exp(logits[best] - torch.logsumexp(logits, 0)))

    def verify_logits(self, ids: list[int], cache: TorchKV) -> torch.Tensor | None:
        """Feed up to NATIVE_STEPS tokens in one native pass; the logits after each ([n, vocab], a reused
        buffer: read before the next pass), bit for bit one step's. None where there is no native step."""
        if self.native is None or len(ids) > NATIVE_STEPS:
            return None
        return self.native.steps(ids, cache)

    def verify(self, ids: list[int], cache: TorchKV) -> list[tuple[int, float]] | None:
        """Feed up to NATIVE_STEPS tokens in one native pass; the greedy choice and its probability after
        each, the numbers one step at a time gives. None where there is no native step."""
        if self.native is None or len(ids) > NATIVE_STEPS:
            return None
        self.native.steps(ids, cache)
        return [(self.native.best[i], self.native.probs[i]) for i in range(len(ids))]

    def _native_prefill(self, cache: TorchKV):
        """The native library for a torch pass's matrix products, SwiGLU and rotary (gemm.h), or None: its GEMM reads
        the weight panels in their own format in place, where torch converts each bf16 or int8 matrix to fp32 every
        pass and multiplies panel by panel (at Qwen2.5-Coder-0.5B's shape, 1008 tokens, 2 threads: products 4.8 s,
        conversions and copies 0.5 s, SwiGLU and rotary 0.4 s of a 6.4 s prefill). A small fp32 model's plain matrices
        (prefill_copy: one MKL GEMM) and a width its kernels do not take stay with torch."""
        from tabd.predictor.engine.weights import Matrix

        if self.native is None or cache.k.dtype != torch.float32 or not cache.k.is_contiguous() or self.head_dim > 512:
            return None  # (rotary's buffer in C holds a head of up to 512)
        for layer in self.layers:
            mats = (layer[1], layer[3], layer[5], layer[6])
            if not all(isinstance(m, Matrix) and m.prefill_copy is None for m in mats) or layer[5].cols % 128:
                return None
        return self.native

    def prefill_kernels(self) -> str:
        """What runs a long prefill pass (more than a few tokens) here, in words (the bench reports it)."""
        cache = self.new_cache(1)
        if self._native_prefill(cache) is not None:
            isa = self.native.lib.tabd_gemm_isa().decode()
            return (f"native gemm.h, {self.weights} panels read in place, {isa}; SwiGLU, rotary, norms native; "
                    f"attention torch SDPA")
        how = "plain fp32 matrices (MKL)" if self.small and self.weights == "fp32" else f"{self.weights} panels as fp32"
        return f"torch: {how}, attention SDPA"

    def _attend(self, q: torch.Tensor, cache: TorchKV, i: int, end: int, mask: torch.Tensor | None) -> torch.Tensor:
        """Layer i's attention output ([n, heads * hd]) for queries q ([heads, n, hd]) over the cache's first `end`
        positions (the new ones written)."""
        n = q.shape[1]
        keys, values = cache.k[i, :, :end], cache.v[i, :, :end]
        if n == 1 and self.decode_bmm:
            attn = self._attend_one(q, keys, values)
        else:
            attn = F.scaled_dot_product_attention(
                q[None], keys[None], values[None], attn_mask=mask, is_causal=n > 1 and mask is None,
                scale=self.scale, enable_gqa=self.n_kv != self.n_heads,
            )[0]
        return attn.transpose(0, 1).reshape(n, self.q_size)

    def _layers_torch(self, x: torch.Tensor, cache: TorchKV, start: int, mask) -> torch.Tensor:
        """The layers of a torch pass in torch ops; x [n, hidden] in, the last layer's output out."""
        n = x.shape[0]
        end = start + n
        cos = self.cos[start:end][None]  # [1, n, hd]
        sin = self.sin[start:end][None]
        for i, (w_in, qkv_w, qkv_b, o_w, w_post, gate_up, down) in enumerate(self.layers):
            h = self._rmsnorm(x, w_in)
            qkv = qkv_w.matmul(h) if qkv_b is None else qkv_w.matmul(h) + qkv_b
            heads = qkv.view(n, -1, self.head_dim).transpose(0, 1)  # [q+k+v heads, n, hd]
            qk = self._rotate(heads[: self.n_heads + self.n_kv], cos, sin)  # q and k rotated in one go
            q = qk[: self.n_heads]
            cache.k[i, :, start:end] = qk[self.n_heads :]
            cache.v[i, :, start:end] = heads[self.n_heads + self.n_kv :]
            x = x + o_w.matmul(self._attend(q, cache, i, end, mask))
            h = self._rmsnorm(x, w_post)
            g, u = gate_up.matmul(h).chunk(2, dim=-1)
            x = x + down.matmul(F.silu(g) * u)
        return x

    def _layers_native(self, native, x: torch.Tensor, cache: TorchKV, start: int, mask) -> torch.Tensor:
        """The layers of a torch pass with the native kernels (see _native_prefill); x [n, hidden] (changed in
        place) in, the last layer's output out. Each residual add is done by the norm that follows it."""
        end, mlp = start + x.shape[0], None
        for i, (w_in, qkv_w, qkv_b, o_w, w_post, gate_up, down) in enumerate(self.layers):
            h = native.add_rmsnorm(x, mlp, w_in)
            q = native.qkv_rope(native.matmul(h, qkv_w), qkv_b, i, cache, start)
            h = native.add_rmsnorm(x, native.matmul(self._attend(q, cache, i, end, mask), o_w), w_post)
            mlp = native.matmul(native.swiglu(h, gate_up), down)
        return x.add_(mlp)

    def _embed(self, ids: list[int]) -> torch.Tensor:
        index = torch.tensor(ids, device=self.device)
        return self.embed[index] if self.embed_rows is None else self.embed_rows.take(index)

    def _logits(self, last: torch.Tensor) -> torch.Tensor:
        if self.native is not None and not self.small:
            return self.native.lm_head(last)  # the table in its own format, read in place
        if self.lm_rows is not None:
            return self.lm_rows.linear(last)[0]
        return F.linear(last, self.lm_head)[0]

    @torch.inference_mode()
    def forward_last(self, ids: list[int], cache: TorchKV) -> torch.Tensor:
        """Logits after `ids`, which continue the cache's `length` positions."""
        if self.native is not None and len(ids) == 1:
            return self.native.step(ids[0], cache)[1].clone()
        if self.native is not None and len(ids) <= NATIVE_STEPS:
            # a keystroke's few tokens: one native pass (each weight read once for all) beats a torch pass's fixed cost
            return self.native.steps(ids, cache)[-1].clone()
        start, n = cache.length, len(ids)
        end = start + n
        cache.ensure(end)
        x = self._embed(ids)  # [n, hidden]
        mask = None
        if n > 1 and start > 0:  # from position 0 the attention is plain causal: flash attention skips the masked half
            mask = torch.arange(end, device=self.device)[None, :] <= torch.arange(start, end, device=self.device)[:, None]
        native = self._native_prefill(cache)
        if native is not None:
            x = self._layers_native(native, x, cache, start, mask)
        else:
            x = self._layers_torch(x, cache, start, mask)
        cache.length = end
        return self._logits(self._rmsnorm(x[-1:], self.norm))
