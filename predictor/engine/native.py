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
    for part in (SOURCE.read_bytes(), " ".join(FLAGS).encode(), compiler.encode(), platform.machine().encode(), _cpu_id().encode()):
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
        ("eps", ctypes.c_float), ("scale", ctypes.c_float),
        ("embed", ctypes.c_void_p), ("final_norm", ctypes.c_void_p), ("lm_head", ctypes.c_void_p),
        ("cos", ctypes.c_void_p), ("sin", ctypes.c_void_p),
    ] + [(name, ctypes.POINTER(ctypes.c_void_p)) for name in
         ("attn_norm", "qkv", "qkv_bias", "o", "mlp_norm", "gate_up", "down")]


PANEL = 64  # columns per block in decode.c's matvec_block


def pack_panels(w: torch.Tensor) -> torch.Tensor:
    """[rows, cols] -> the same numbers with each block of 64 columns stored as its own contiguous [rows, 64]."""
    return torch.cat([w[:, lo : lo + PANEL].contiguous().reshape(-1) for lo in range(0, w.shape[1], PANEL)])


def load() -> tuple[ctypes.CDLL | None, str]:
    """(library, "") once built and loaded, or (None, why not)."""
    with _lock:
        if "lib" not in _loaded:
            try:
                lib = ctypes.CDLL(str(build()))
                lib.tabd_decode.restype = ctypes.c_int32
                lib.tabd_decode.argtypes = [ctypes.POINTER(_Model), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32,
                                            ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32]
                lib.tabd_scratch_floats.restype = ctypes.c_int64
                lib.tabd_scratch_floats.argtypes = [ctypes.POINTER(_Model)]
                _loaded["lib"], _loaded["why"] = lib, ""
            except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
                _loaded["lib"], _loaded["why"] = None, str(exc)
        return _loaded["lib"], _loaded["why"]  # type: ignore[return-value]


class NativeDecoder:
    """Binds a FastLlama's fp32 CPU weights to the native step; `step(token, cache)` returns (argmax, logits)."""

    def __init__(self, lib: ctypes.CDLL, fast) -> None:
        if fast.dtype != torch.float32 or fast.device.type != "cpu":
            raise ValueError("the native decode step runs fp32 on the CPU")
        self.lib = lib
        self.fast = fast
        n = len(fast.layers)

        def ptrs(tensors) -> ctypes.Array:
            return (ctypes.c_void_p * n)(*[t.data_ptr() if t is not None else None for t in tensors])

        cols = list(zip(*fast.layers))  # w_in, qkv, bias, o, w_post, gate_up, down: one tuple per kind
        for t in (fast.embed, fast.norm, fast.lm_head, fast.cos, fast.sin, *[w for c in cols for w in c if w is not None]):
            if not t.is_contiguous() or t.dtype != torch.float32:
                raise ValueError("the native decode step needs contiguous fp32 weights")
        for kind in (1, 3, 5, 6):  # qkv, o, gate_up, down: the matrices, packed in column panels
            cols[kind] = tuple(pack_panels(w) for w in cols[kind])
        self.lm_head = pack_panels(fast.lm_head)
        self._tensors = cols  # kept alive: the struct points into them
        self._arrays = [ptrs(c) for c in cols]
        cfg = fast.config
        self.model = _Model(
            layers=n, hidden=cfg.hidden_size, heads=fast.n_heads, kv_heads=fast.n_kv, head_dim=fast.head_dim,
            inter=fast.layers[0][6].shape[0], vocab=fast.lm_head.shape[1], capacity=0, max_pos=fast.cos.shape[0],
            eps=fast.eps, scale=fast.scale, embed=fast.embed.data_ptr(), final_norm=fast.norm.data_ptr(),
            lm_head=self.lm_head.data_ptr(), cos=fast.cos.data_ptr(), sin=fast.sin.data_ptr(),
            **{name: ctypes.cast(arr, ctypes.POINTER(ctypes.c_void_p)) for name, arr in
               zip(("attn_norm", "qkv", "qkv_bias", "o", "mlp_norm", "gate_up", "down"), self._arrays)},
        )
        self.ref = ctypes.byref(self.model)
        self.scratch = torch.empty(int(lib.tabd_scratch_floats(self.ref)), dtype=torch.float32)
        self.logits = torch.empty(self.model.vocab, dtype=torch.float32)

    def step(self, token: int, cache) -> tuple[int, torch.Tensor]:
        """Feed `token` after the cache's positions; the next token's greedy choice and the logits (reused buffer)."""
        pos = cache.length
        cache.ensure(pos + 1)
        self.model.capacity = cache.capacity
        best = self.lib.tabd_decode(self.ref, cache.k.data_ptr(), cache.v.data_ptr(), pos, token,
                                    self.logits.data_ptr(), self.scratch.data_ptr(), torch.get_num_threads())
        if best < 0:
            raise ValueError(f"native decode refused token {token} at position {pos}")
        cache.length = pos + 1
        return best, self.logits
