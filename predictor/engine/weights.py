"""The engine's weights, held once: matrices in 64-column panels (the native step's layout, which torch's
prefill also reads in place) as fp32, bf16, or int8 with one scale per output column.

The native step streams every matrix once per token, so decode speed follows the bytes per weight;
prefill (torch GEMMs) reads the same panels, converted to fp32 one matrix at a time. Quantized once,
at load, in numpy: bf16 rounds to nearest even (as torch's .to(torch.bfloat16)); int8 scales each output column
by its largest magnitude / 127. One store for every engine: the torch-free runner (boot.py) holds it as numpy
arrays; the torch engines hold views of the same buffers as torch tensors (on_torch: no copy), which is also how
the hand-over shares the torch-free runner's weights (swap.py). torch is imported only by the methods that run it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tabd.predictor.engine.layout import AUTO_FP32_BYTES, FORMATS, PANEL, choose_format  # noqa: F401 (re-exported)

if TYPE_CHECKING:
    import torch


def pack_panels(w: Any) -> Any:
    """[rows, cols] -> the same numbers with each block of 64 columns stored as its own contiguous [rows, 64]
    (a torch tensor is packed through numpy and given back as one)."""
    if not isinstance(w, np.ndarray):
        return _torch(pack_panels(w.detach().cpu().numpy()))
    return np.concatenate([np.ascontiguousarray(w[:, lo : lo + PANEL]).reshape(-1) for lo in range(0, w.shape[1], PANEL)])


def _bf16(w: np.ndarray) -> np.ndarray:
    """fp32 -> bf16 bits (uint16), rounded to nearest even as torch's .to(torch.bfloat16) rounds."""
    u = np.ascontiguousarray(w, dtype=np.float32).view(np.uint32)
    return ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)


def _quantize(w: np.ndarray, fmt: str, dim: int) -> tuple[np.ndarray, np.ndarray | None]:
    """w in fmt, and for int8 the fp32 scale per slice along `dim` (the other dimension is reduced)."""
    w = np.asarray(w, dtype=np.float32)
    if fmt == "fp32":  # a copy: a loader's array may be a view that keeps the whole weights file mapped
        return np.array(w, dtype=np.float32, copy=True), None
    if fmt == "bf16":
        return _bf16(w), None
    scale = np.maximum(np.abs(w).max(axis=1 - dim) / np.float32(127.0), np.float32(1e-30)).astype(np.float32)
    shape = (-1, 1) if dim == 0 else (1, -1)
    return np.clip(np.round(w / scale.reshape(shape)), -127, 127).astype(np.int8), scale


def _torch(a: np.ndarray | None) -> Any:
    """The same memory as a torch tensor (bf16 bits, held as uint16 in numpy, as bfloat16)."""
    import torch

    if a is None:
        return None
    if a.dtype == np.uint16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def _nbytes(a: Any) -> int:
    return 0 if a is None else int(a.nbytes)


class Matrix:
    """x @ W for W [rows, cols] ([in, out]), stored packed in panels in one format: numpy arrays, or torch views
    of them (on_torch)."""

    def __init__(self, w: np.ndarray, fmt: str) -> None:
        self.rows, self.cols = w.shape
        self.fmt = fmt
        q, self.scale = _quantize(w, fmt, dim=1)
        self.data: Any = pack_panels(q)
        self.prefill_copy: Any = None

    def on_torch(self, dense: bool = False) -> Matrix:
        """This matrix over the same buffers as torch tensors (what the torch engines read). dense: also an
        [in, out] copy for torch's prefill, for a small fp32 model only, where one GEMM beats the panel bmm by
        ~20% and the copy costs a few MB."""
        m = Matrix.__new__(Matrix)
        m.rows, m.cols, m.fmt, m.data, m.scale, m.prefill_copy = self.rows, self.cols, self.fmt, _torch(self.data), \
            _torch(self.scale), None
        if dense and self.fmt == "fp32":
            m.prefill_copy = m.unpacked()
        return m

    def unpacked(self) -> torch.Tensor:
        """The stored numbers as a plain [rows, cols] tensor (the panels undone; no arithmetic)."""
        import torch

        full = self.cols // PANEL
        split = full * self.rows * PANEL
        main = self.data[:split].view(full, self.rows, PANEL).permute(1, 0, 2).reshape(self.rows, full * PANEL)
        return torch.cat([main, self.data[split:].view(self.rows, self.cols - full * PANEL)], dim=1).contiguous()

    def nbytes(self) -> int:
        return _nbytes(self.data) + _nbytes(self.scale) + _nbytes(self.prefill_copy)

    def matmul(self, x: torch.Tensor) -> torch.Tensor:
        import torch

        if self.prefill_copy is not None:
            return x @ self.prefill_copy
        n, full = x.shape[0], self.cols // PANEL
        data = self.data if self.fmt == "fp32" else self.data.to(torch.float32)  # one matrix converted at a time
        split = full * self.rows * PANEL
        out = torch.matmul(x, data[:split].view(full, self.rows, PANEL)).permute(1, 0, 2).reshape(n, full * PANEL)
        if split < data.numel():  # the partial last panel
            out = torch.cat([out, x @ data[split:].view(self.rows, self.cols - full * PANEL)], dim=1)
        return out if self.scale is None else out * self.scale

    def dense(self) -> torch.Tensor:
        """The [rows, cols] fp32 matrix (tests and agreement checks)."""
        import torch

        return self.matmul(torch.eye(self.rows))


class Rows:
    """A [rows, cols] table in torch's layout: the embedding, and the lm_head (the same table when tied); numpy
    arrays, or torch views of them (on_torch)."""

    def __init__(self, w: np.ndarray, fmt: str) -> None:
        self.fmt = fmt
        data, self.scale = _quantize(w, fmt, dim=0)
        self.data: Any = np.ascontiguousarray(data)

    def on_torch(self) -> Rows:
        """This table over the same buffers as torch tensors."""
        r = Rows.__new__(Rows)
        r.fmt, r.data, r.scale = self.fmt, _torch(self.data), _torch(self.scale)
        return r

    def nbytes(self) -> int:
        return _nbytes(self.data) + _nbytes(self.scale)

    def take(self, ids: torch.Tensor) -> torch.Tensor:
        import torch

        rows = self.data[ids].to(torch.float32)
        return rows if self.scale is None else rows * self.scale[ids, None]

    def linear(self, h: torch.Tensor) -> torch.Tensor:
        import torch

        out = h @ (self.data if self.fmt == "fp32" else self.data.to(torch.float32)).t()
        return out if self.scale is None else out * self.scale
