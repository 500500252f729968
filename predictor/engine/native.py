"""The native decode step (native/decode.c): built once per machine with the system C compiler, loaded with ctypes.

The shared library is cached under ~/.cache/tabd/native (or $TABD_CACHE/native),
named by a hash of the source, the compiler flags and the CPU, so an edit or a
new machine rebuilds it; building takes about a second. Where no C compiler
is found, `load()` returns None with the reason, and the engine decodes in torch.
No torch at import: the torch-free runner (boot.py) binds the same library to numpy buffers.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

SOURCE = Path(__file__).resolve().parent / "native" / "decode.c"
# TABD_NATIVE_MARCH: the instruction set the library is built for (default this CPU's; `haswell` builds the AVX2
# kernels alone, to time what a machine without AVX-512 runs: docs/engines.md)
MARCH = os.environ.get("TABD_NATIVE_MARCH", "native")
FLAGS = ["-O3", f"-march={MARCH}", "-fopenmp", "-ffp-contract=off", "-fno-math-errno", "-shared", "-fPIC", "-std=c11"]

_lock = threading.Lock()
_loaded: dict[str, object] = {}


def cache_dir() -> Path:
    root = os.environ.get("TABD_CACHE") or os.path.join(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "tabd")
    return Path(root) / "native"


def _cpu_id() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features", "model name")):
                return line
    except OSError:
        pass
    return platform.processor()


def library_path(compiler: str) -> Path:
    h = hashlib.blake2b(digest_size=8)
    for part in (SOURCE.read_bytes(), *(h.read_bytes() for h in sorted(SOURCE.parent.glob("*.h"))), " ".join(FLAGS).encode(), compiler.encode(), platform.machine().encode(), _cpu_id().encode()):
        h.update(part)
    return cache_dir() / f"tabd-decode-{h.hexdigest()}.so"


def build() -> Path:
    """Compile decode.c if this machine has no up-to-date build; RuntimeError with the compiler's words if it fails."""
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not compiler:
        raise RuntimeError("no C compiler (cc, gcc or clang) on PATH")
    target = library_path(compiler)
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".so.tmp")
    os.close(fd)
    try:
        r = subprocess.run([compiler, *FLAGS, "-o", tmp, str(SOURCE), "-lm"], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            chosen = f" for TABD_NATIVE_MARCH={MARCH}" if MARCH != "native" else ""
            raise RuntimeError(f"{compiler} failed{chosen}: {(r.stderr or r.stdout).strip()[-400:]}")
        os.replace(tmp, target)  # atomic: a concurrent build or reader sees a whole library or none
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


class _Model(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int32) for name in
                ("layers", "hidden", "heads", "kv_heads", "head_dim", "inter", "vocab", "capacity", "max_pos")] + [
        ("eps", ctypes.c_float), ("scale", ctypes.c_float), ("wtype", ctypes.c_int32),
        ("embed", ctypes.c_void_p), ("embed_scale", ctypes.c_void_p), ("final_norm", ctypes.c_void_p),
        ("lm_head", ctypes.c_void_p), ("lm_head_scale", ctypes.c_void_p), ("lm_panels", ctypes.c_void_p),
        ("cos", ctypes.c_void_p), ("sin", ctypes.c_void_p),
    ] + [(name, ctypes.POINTER(ctypes.c_void_p)) for name in
         ("attn_norm", "qkv", "qkv_scale", "qkv_bias", "o", "o_scale", "mlp_norm", "gate_up", "gate_up_scale",
          "down", "down_scale")]


WTYPES = {"fp32": 0, "bf16": 1, "int8": 2}


def load() -> tuple[ctypes.CDLL | None, str]:
    """(library, "") once built and loaded, or (None, why not)."""
    with _lock:
        if "lib" not in _loaded:
            try:
                lib = ctypes.CDLL(str(build()))
                M = ctypes.POINTER(_Model)
                lib.tabd_decode.restype = ctypes.c_int32
                lib.tabd_decode.argtypes = [M, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32,
                                            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32]
                for name in ("tabd_decode_n", "tabd_prefill_n"):
                    fn = getattr(lib, name)
                    fn.restype = ctypes.c_int32
                    fn.argtypes = [M, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p, ctypes.c_int32,
                                   ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32]
                lib.tabd_lm_head.restype = None
                lib.tabd_lm_head.argtypes = [M, ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p, ctypes.c_int32]
                for name in ("tabd_matmul", "tabd_matmul_swiglu"):
                    fn = getattr(lib, name)
                    fn.restype = ctypes.c_int32
                    fn.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32,
                                   ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32]
                lib.tabd_gemm_isa.restype = ctypes.c_char_p
                lib.tabd_add_rmsnorm.restype = None
                lib.tabd_add_rmsnorm.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32,
                                                 ctypes.c_void_p, ctypes.c_float, ctypes.c_void_p, ctypes.c_int32]
                lib.tabd_qkv_rope.restype = ctypes.c_int32
                lib.tabd_qkv_rope.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p,
                                              ctypes.c_void_p, *[ctypes.c_int32] * 3, ctypes.c_void_p, ctypes.c_void_p,
                                              ctypes.c_void_p, *[ctypes.c_int32] * 3]
                lib.tabd_scratch_floats.restype = ctypes.c_int64
                lib.tabd_scratch_floats.argtypes = [M]
                lib.tabd_max_batch.restype = ctypes.c_int32
                lib.tabd_max_prefill.restype = ctypes.c_int32
                _loaded["lib"], _loaded["why"] = lib, ""
            except (RuntimeError, OSError, subprocess.TimeoutExpired, AttributeError) as exc:
                _loaded["lib"], _loaded["why"] = None, str(exc)
        return _loaded["lib"], _loaded["why"]  # type: ignore[return-value]


def _ptr(t) -> int | None:
    """The data address of a torch tensor or a numpy array (None for None)."""
    if t is None:
        return None
    return t.data_ptr() if hasattr(t, "data_ptr") else t.ctypes.data


def _contiguous_fp32(t) -> bool:
    if hasattr(t, "data_ptr"):
        return t.is_contiguous() and str(t.dtype) == "torch.float32"
    return bool(t.flags.c_contiguous) and t.dtype.name == "float32"


class NativeDecoder:
    """Binds a CPU weight store to the native step, in place: no copy. The store is a FastLlama's (weights.py:
    torch tensors) or the torch-free runner's (boot.py: numpy arrays, the same layout); the buffers and the
    logits handed back are of the same kind. `step(token, cache)` returns (argmax, logits); `steps(ids, cache)`
    the logits after each; `prefill(ids, cache)` the last one's. Each leaves each row's argmax in `best` and its
    probability in `probs` (computed in C, beside the argmax). `threads()` says how many threads a call uses."""

    def __init__(self, lib: ctypes.CDLL, fast, threads=None) -> None:
        if fast.embed_rows is None:
            raise ValueError("the native decode step runs on the CPU weight store")
        self.lib = lib
        self.fast = fast
        n = len(fast.layers)

        def ptrs(values) -> ctypes.Array:
            return (ctypes.c_void_p * n)(*values)

        w_in, qkv, bias, o, w_post, gate_up, down = zip(*fast.layers)
        for t in (fast.norm, fast.cos, fast.sin, *w_in, *w_post, *[b for b in bias if b is not None]):
            if not _contiguous_fp32(t):
                raise ValueError("the native decode step needs contiguous fp32 norms, biases and rotary tables")
        arrays = {
            "attn_norm": [_ptr(t) for t in w_in], "mlp_norm": [_ptr(t) for t in w_post],
            "qkv_bias": [_ptr(b) for b in bias],
        }
        for name, mats in (("qkv", qkv), ("o", o), ("gate_up", gate_up), ("down", down)):
            arrays[name] = [_ptr(m.data) for m in mats]
            arrays[name + "_scale"] = [_ptr(m.scale) for m in mats]
        self._arrays = {k: ptrs(v) for k, v in arrays.items()}  # kept alive: the struct points into them
        cfg, emb, lm = fast.config, fast.embed_rows, fast.lm_rows
        # a small fp32 model's lm_head also as panels: at hidden 192 the panel loop beats eight-row dot products
        self.lm_panels = getattr(fast, "lm_panels", None)
        if self.lm_panels is None and fast.small and fast.weights == "fp32":
            from tabd.predictor.engine.weights import pack_panels

            self.lm_panels = pack_panels(lm.data.t())
        self.model = _Model(
            layers=n, hidden=cfg.hidden_size, heads=fast.n_heads, kv_heads=fast.n_kv, head_dim=fast.head_dim,
            inter=down[0].rows, vocab=lm.data.shape[0], capacity=0, max_pos=fast.cos.shape[0],
            eps=fast.eps, scale=fast.scale, wtype=WTYPES[fast.weights],
            embed=_ptr(emb.data), embed_scale=_ptr(emb.scale), final_norm=_ptr(fast.norm),
            lm_head=_ptr(lm.data), lm_head_scale=_ptr(lm.scale), lm_panels=_ptr(self.lm_panels),
            cos=_ptr(fast.cos), sin=_ptr(fast.sin),
            **{name: ctypes.cast(arr, ctypes.POINTER(ctypes.c_void_p)) for name, arr in self._arrays.items()},
        )
        self.ref = ctypes.byref(self.model)
        self.max_batch = int(lib.tabd_max_batch())
        self.max_prefill = int(lib.tabd_max_prefill())  # prefill() takes this many tokens a call (the lm_head once)
        floats = int(lib.tabd_scratch_floats(self.ref))
        if hasattr(fast.norm, "data_ptr"):
            import torch

            self.threads = threads or torch.get_num_threads
            self.scratch = torch.empty(floats, dtype=torch.float32)
            self.logits_buf = torch.empty(self.max_batch, self.model.vocab, dtype=torch.float32)
        else:
            import numpy as np

            self.threads = threads or (lambda: 1)
            self.scratch = np.empty(floats, dtype=np.float32)
            self.logits_buf = np.empty((self.max_batch, self.model.vocab), dtype=np.float32)
        self.logits = self.logits_buf[0]
        self.best = (ctypes.c_int32 * self.max_batch)()
        self.probs = (ctypes.c_float * self.max_batch)()
        self.ids = (ctypes.c_int32 * self.max_prefill)()

    def _run(self, fn, ids: list[int], cache, most: int) -> None:
        n, pos = len(ids), cache.length
        if not 1 <= n <= most:
            raise ValueError(f"native decode takes 1 to {most} tokens, not {n}")
        cache.ensure(pos + n)
        self.model.capacity = cache.capacity
        for i, t in enumerate(ids):
            self.ids[i] = t if 0 <= t < 2**31 else -1
        rc = fn(self.ref, _ptr(cache.k), _ptr(cache.v), pos, self.ids, n, _ptr(self.logits_buf), self.best, self.probs,
                _ptr(self.scratch), self.threads())
        if rc != 0:
            raise ValueError(f"native decode refused tokens {ids} at position {pos}")
        cache.length = pos + n

    def steps(self, ids: list[int], cache):
        """Feed up to max_batch tokens after the cache's positions, each weight read once for all of them;
        the logits after each ([n, vocab], a view of a reused buffer)."""
        self._run(self.lib.tabd_decode_n, ids, cache, self.max_batch)
        return self.logits_buf[: len(ids)]

    def prefill(self, ids: list[int], cache):
        """As steps(), but up to max_prefill tokens, and the logits after the last token alone (a view of a reused
        buffer; its argmax in best[0]): a prompt's other positions need no lm_head."""
        self._run(self.lib.tabd_prefill_n, ids, cache, self.max_prefill)
        return self.logits

    def step(self, token: int, cache):
        """Feed `token` after the cache's positions; the next token's greedy choice and the logits (reused buffer)."""
        pos = cache.length
        cache.ensure(pos + 1)
        self.model.capacity = cache.capacity
        best = self.lib.tabd_decode(self.ref, _ptr(cache.k), _ptr(cache.v), pos, token if 0 <= token < 2**31 else -1,
                                    _ptr(self.logits), self.probs, _ptr(self.scratch), self.threads())
        if best < 0:
            raise ValueError(f"native decode refused token {token} at position {pos}")
        self.best[0] = best
        cache.length = pos + 1
        return best, self.logits

    def matmul(self, x, m):
        """x @ W for a long prefill chunk x ([n, in], fp32) and a weights.Matrix (torch views of its panels), the
        panels read in place in their format (gemm.h): no fp32 copy of the weights per pass."""
        import torch

        x = x.contiguous()
        out = torch.empty(x.shape[0], m.cols, dtype=torch.float32)
        rc = self.lib.tabd_matmul(x.data_ptr(), x.shape[0], m.data.data_ptr(), WTYPES[m.fmt], m.rows, m.cols,
                                  _ptr(m.scale), out.data_ptr(), self.threads())
        if rc != 0:
            raise ValueError(f"native matmul refused x {tuple(x.shape)} against [{m.rows}, {m.cols}] {m.fmt}")
        return out

    def swiglu(self, x, m):
        """silu(x @ gate) * (x @ up) for a gate_up weights.Matrix ([in, 2 inter], inter a multiple of 64), in one
        native pass: the [n, 2 inter] product is never written out."""
        import torch

        x = x.contiguous()
        out = torch.empty(x.shape[0], m.cols // 2, dtype=torch.float32)
        rc = self.lib.tabd_matmul_swiglu(x.data_ptr(), x.shape[0], m.data.data_ptr(), WTYPES[m.fmt], m.rows,
                                         m.cols // 2, _ptr(m.scale), out.data_ptr(), self.threads())
        if rc != 0:
            raise ValueError(f"native swiglu refused x {tuple(x.shape)} against [{m.rows}, {m.cols}] {m.fmt}")
        return out

    def add_rmsnorm(self, x, add, weight):
        """x += add (in place; add may be None), then the RMS norm of x's rows times weight: a torch prefill's
        residual and norm, x [n, hidden] contiguous fp32."""
        import torch

        n, hidden = x.shape
        if not x.is_contiguous() or (add is not None and (not add.is_contiguous() or add.shape != x.shape)):
            raise ValueError("add_rmsnorm needs contiguous rows of the same shape")
        out = torch.empty_like(x)
        self.lib.tabd_add_rmsnorm(x.data_ptr(), _ptr(add), n, hidden, weight.data_ptr(), self.fast.eps, out.data_ptr(),
                                  self.threads())
        return out

    def qkv_rope(self, qkv, bias, layer: int, cache, start: int):
        """The queries ([heads, n, head_dim]) of a torch prefill's qkv product ([n, q + 2 kv], contiguous fp32,
        changed in place): bias added, q and k rotated, k and v written into `layer` of the cache at `start`."""
        import torch

        fast, n = self.fast, qkv.shape[0]
        q = torch.empty(fast.n_heads, n, fast.head_dim, dtype=torch.float32)
        k, v = cache.k[layer], cache.v[layer]
        if not (qkv.is_contiguous() and k.is_contiguous() and v.is_contiguous() and k.dtype == torch.float32):
            raise ValueError("qkv_rope needs a contiguous fp32 qkv and cache")
        rc = self.lib.tabd_qkv_rope(qkv.data_ptr(), n, _ptr(bias), fast.cos.data_ptr(), fast.sin.data_ptr(),
                                    fast.n_heads, fast.n_kv, fast.head_dim, q.data_ptr(), k.data_ptr(), v.data_ptr(),
                                    cache.capacity, start, self.threads())
        if rc != 0:
            raise ValueError(f"native qkv_rope refused {n} tokens at {start} (head_dim {fast.head_dim}, capacity "
                             f"{cache.capacity})")
        return q

    def lm_head(self, h):
        """Logits of one final-normed row (torch prefill's last position), from the table in its own format."""
        import torch

        h = h.reshape(-1).contiguous().to(torch.float32)
        out = torch.empty(self.model.vocab, dtype=torch.float32)
        self.lib.tabd_lm_head(self.ref, h.data_ptr(), 1, out.data_ptr(), self.threads())
        return out
