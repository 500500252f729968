"""The native decode step (native/decode.c): built once per machine with the system C compiler, loaded with ctypes.

The shared library is cached under ~/.cache/tabd/native (or $TABD_CACHE/native),
named by a hash of the source, the compiler flags and the CPU, so an edit or a
new machine rebuilds it; building takes about a second. Where no C compiler
is found, `load()` returns None with the reason, and the engine decodes in torch.
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

import torch

SOURCE = Path(__file__).resolve().parent / "native" / "decode.c"
FLAGS = ["-O3", "-march=native", "-fopenmp", "-ffp-contract=off", "-fno-math-errno", "-shared", "-fPIC", "-std=c11"]

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
            raise RuntimeError(f"{compiler} failed: {(r.stderr or r.stdout).strip()[-400:]}")
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
                lib.tabd_decode_n.restype = ctypes.c_int32
                lib.tabd_decode_n.argtypes = [M, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p,
                                              ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                              ctypes.c_void_p, ctypes.c_int32]
                lib.tabd_lm_head.restype = None
                lib.tabd_lm_head.argtypes = [M, ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p, ctypes.c_int32]
                lib.tabd_scratch_floats.restype = ctypes.c_int64
                lib.tabd_scratch_floats.argtypes = [M]
                lib.tabd_max_batch.restype = ctypes.c_int32
                _loaded["lib"], _loaded["why"] = lib, ""
            except (RuntimeError, OSError, subprocess.TimeoutExpired, AttributeError) as exc:
                _loaded["lib"], _loaded["why"] = None, str(exc)
        return _loaded["lib"], _loaded["why"]  # type: ignore[return-value]


def _ptr(t) -> int | None:
    return None if t is None else t.data_ptr()


class NativeDecoder:
    """Binds a FastLlama's CPU weight store (weights.py: panels in fp32, bf16 or int8) to the native step, in
    place: no copy. `step(token, cache)` returns (argmax, logits); `steps(ids, cache)` the logits after each.
    Both leave each row's argmax in `best` and its probability in `probs` (computed in C, beside the argmax)."""

    def __init__(self, lib: ctypes.CDLL, fast) -> None:
        if fast.embed_rows is None:
            raise ValueError("the native decode step runs on the CPU weight store")
        self.lib = lib
        self.fast = fast
        n = len(fast.layers)

        def ptrs(values) -> ctypes.Array:
            return (ctypes.c_void_p * n)(*values)

        w_in, qkv, bias, o, w_post, gate_up, down = zip(*fast.layers)
        for t in (fast.norm, fast.cos, fast.sin, *w_in, *w_post, *[b for b in bias if b is not None]):
            if not t.is_contiguous() or t.dtype != torch.float32:
                raise ValueError("the native decode step needs contiguous fp32 norms, biases and rotary tables")
        arrays = {
            "attn_norm": [t.data_ptr() for t in w_in], "mlp_norm": [t.data_ptr() for t in w_post],
            "qkv_bias": [_ptr(b) for b in bias],
        }
        for name, mats in (("qkv", qkv), ("o", o), ("gate_up", gate_up), ("down", down)):
            arrays[name] = [m.data.data_ptr() for m in mats]
            arrays[name + "_scale"] = [_ptr(m.scale) for m in mats]
        self._arrays = {k: ptrs(v) for k, v in arrays.items()}  # kept alive: the struct points into them
        cfg, emb, lm = fast.config, fast.embed_rows, fast.lm_rows
        # a small fp32 model's lm_head also as panels: at hidden 192 the panel loop beats eight-row dot products
        self.lm_panels = None
        if fast.small and fast.weights == "fp32":
            from tabd.predictor.engine.weights import pack_panels

            self.lm_panels = pack_panels(lm.data.t())
        self.model = _Model(
            layers=n, hidden=cfg.hidden_size, heads=fast.n_heads, kv_heads=fast.n_kv, head_dim=fast.head_dim,
            inter=down[0].rows, vocab=lm.data.shape[0], capacity=0, max_pos=fast.cos.shape[0],
            eps=fast.eps, scale=fast.scale, wtype=WTYPES[fast.weights],
            embed=emb.data.data_ptr(), embed_scale=_ptr(emb.scale), final_norm=fast.norm.data_ptr(),
            lm_head=lm.data.data_ptr(), lm_head_scale=_ptr(lm.scale), lm_panels=_ptr(self.lm_panels), cos=fast.cos.data_ptr(), sin=fast.sin.data_ptr(),
            **{name: ctypes.cast(arr, ctypes.POINTER(ctypes.c_void_p)) for name, arr in self._arrays.items()},
        )
        self.ref = ctypes.byref(self.model)
        self.max_batch = int(lib.tabd_max_batch())
        self.scratch = torch.empty(int(lib.tabd_scratch_floats(self.ref)), dtype=torch.float32)
        self.logits_buf = torch.empty(self.max_batch, self.model.vocab, dtype=torch.float32)
        self.logits = self.logits_buf[0]
        self.best = (ctypes.c_int32 * self.max_batch)()
        self.probs = (ctypes.c_float * self.max_batch)()
        self.ids = (ctypes.c_int32 * self.max_batch)()

    def steps(self, ids: list[int], cache) -> torch.Tensor:
        """Feed up to max_batch tokens after the cache's positions, each weight read once for all of them;
        the logits after each ([n, vocab], a view of a reused buffer)."""
        n, pos = len(ids), cache.length
        if not 1 <= n <= self.max_batch:
            raise ValueError(f"native decode takes 1 to {self.max_batch} tokens, not {n}")
        cache.ensure(pos + n)
        self.model.capacity = cache.capacity
        for i, t in enumerate(ids):
            self.ids[i] = t if 0 <= t < 2**31 else -1
        rc = self.lib.tabd_decode_n(self.ref, cache.k.data_ptr(), cache.v.data_ptr(), pos, self.ids, n,
                                    self.logits_buf.data_ptr(), self.best, self.probs, self.scratch.data_ptr(),
                                    torch.get_num_threads())
        if rc != 0:
            raise ValueError(f"native decode refused tokens {ids} at position {pos}")
        cache.length = pos + n
        return self.logits_buf[:n]

    def step(self, token: int, cache) -> tuple[int, torch.Tensor]:
        """Feed `token` after the cache's positions; the next token's greedy choice and the logits (reused buffer)."""
        pos = cache.length
        cache.ensure(pos + 1)
        self.model.capacity = cache.capacity
        best = self.lib.tabd_decode(self.ref, cache.k.data_ptr(), cache.v.data_ptr(), pos,
                                    token if 0 <= token < 2**31 else -1,
                                    self.logits.data_ptr(), self.probs, self.scratch.data_ptr(), torch.get_num_threads())
        if best < 0:
            raise ValueError(f"native decode refused token {token} at position {pos}")
        self.best[0] = best
        cache.length = pos + 1
        return best, self.logits

    def lm_head(self, h: torch.Tensor) -> torch.Tensor:
        """Logits of one final-normed row (torch prefill's last position), from the table in its own format."""
        h = h.reshape(-1).contiguous().to(torch.float32)
        out = torch.empty(self.model.vocab, dtype=torch.float32)
        self.lib.tabd_lm_head(self.ref, h.data_ptr(), 1, out.data_ptr(), torch.get_num_threads())
        return out
