"""torch+native built over the torch-free runner's weights, in place: the hand-over after a torch-free start.

The torch-free runner (boot.py) answers first; its prompts run as native pieces
of 8 tokens, several times slower than torch's GEMM prefill on a long prompt
(a 1k-token cold prompt of the embedded model: 291 vs 56 ms, README). So once
the daemon has answered, it imports torch off the model thread and builds a
FastLlama whose tensors are views of the same numpy panels (torch.from_numpy:
no copy, one store), then swaps runners between two jobs; the documents' KV
caches carry over as views too, so no prompt is run again.

torch's own libraries are loaded first without the GIL (torchlibs.py): their
load is the longest stretch of the import that holds it (about 370 ms here).
"""
from __future__ import annotations

from tabd.predictor.engine import torchlibs

torchlibs.load_torch()  # libraries first, then `import torch`, with process exit held until both are done

import numpy as np  # noqa: E402
import torch  # noqa: E402

from tabd.predictor.engine.boot import TorchFreeRunner
from tabd.predictor.engine.kvcache import NumpyKV, TorchKV
from tabd.predictor.engine.model import FastLlama


def tensor(a: np.ndarray | None) -> torch.Tensor | None:
    """The same memory as a torch tensor."""
    return None if a is None else torch.from_numpy(a)


def fast_from_torch_free(runner: TorchFreeRunner) -> FastLlama:
    """A FastLlama (native steps bound, torch prefill) over `runner`'s weight store, sharing its memory."""
    fast = FastLlama.__new__(FastLlama)  # not from a transformers-shaped model: every attribute set here
    cfg = runner.config
    fast.config, fast.device, fast.dtype = cfg, torch.device("cpu"), torch.float32
    fast.n_heads, fast.n_kv, fast.head_dim, fast.eps = runner.n_heads, runner.n_kv, runner.head_dim, runner.eps
    fast.q_size, fast.kv_size = fast.n_heads * fast.head_dim, fast.n_kv * fast.head_dim
    fast.scale, fast.decode_bmm, fast.weights, fast.small = runner.scale, True, runner.weights, runner.small
    from tabd.predictor.loading.fastload import Rotary

    positions = torch.arange(runner.cos.shape[0])[None, :]
    cos, sin = Rotary(cfg.rope_theta, fast.head_dim)(torch.zeros(1), positions)  # FastLlama's own tables
    fast.cos, fast.sin = cos[0].contiguous(), sin[0].contiguous()
    fast.embed_rows = runner.embed_rows.on_torch()
    fast.lm_rows = fast.embed_rows if runner.lm_rows is runner.embed_rows else runner.lm_rows.on_torch()
    fast.embed = fast.lm_head = None
    fast.lm_panels = tensor(runner.lm_panels)
    fast.norm = tensor(runner.norm)
    fast.layers = [(tensor(w_in), qkv.on_torch(fast.small), tensor(bias), o.on_torch(fast.small), tensor(w_post),
                    gate_up.on_torch(fast.small), down.on_torch(fast.small))
                   for w_in, qkv, bias, o, w_post, gate_up, down in runner.layers]
    fast.native, fast.native_why = None, "off"
    fast.bind_native()
    return fast


def torch_cache(cache: NumpyKV) -> TorchKV:
    """A numpy KV cache as a TorchKV over the same buffers (what FastLlama reads and writes)."""
    return TorchKV.over(torch.from_numpy(cache.k), torch.from_numpy(cache.v), cache.length)
