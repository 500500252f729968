"""The engine's weights, held once: matrices in 64-column panels (the native step's layout, which torch's
prefill also reads in place) as fp32, bf16, or int8 with one scale per output column.

The native step streams every matrix once per token, so decode speed follows the bytes per weight;
prefill (torch GEMMs) reads the same panels, converted to fp32 one matrix at a time. Quantized once,
at load: bf16 rounds to nearest even; int8 scales each output column by its largest magnitude / 127.
"""
from __future__ import annotations

import torch

from tabd.predictor.engine.layout import AUTO_FP32_BYTES, FORMATS, PANEL, choose_format  # noqa: F401 (re-exported)

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "int8": torch.int8}


def pack_panels(w: torch.Tensor) -> torch.Tensor:
    """[rows, cols] -> the same numbers with each block of 64 columns stored as its own contiguous [rows, 64]."""
    return torch.cat([w[:, lo : lo + PANEL].contiguous().reshape(-1) for lo in range(0, w.shape[1], PANEL)])


def _quantize(w: torch.Tensor, fmt: str, dim: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """w in fmt, and for int8 the fp32 scale per slice along `dim` (the other dimension is reduced)."""
    if fmt == "fp32":  # a copy: a loader's tensor may be a view that keeps the whole weights file mapped
        return w.to(torch.float32, copy=True), None
    if fmt == "bf16":
        return w.to(torch.bfloat16), None
    scale = (w.abs().amax(dim=1 - dim) / 127.0).clamp_min(1e-30).to(torch.float32)
    shape = (-1, 1) if dim == 0 else (1, -1)
    return torch.round(w / scale.view(shape)).clamp_(-127, 127).to(torch.int8), scale


class Matrix:
    """x @ W for W [rows, cols] ([in, out]), stored packed in panels in one format."""

    def __init__(self, w: torch.Tensor, fmt: str, dense: bool = False) -> None:
        self.rows, self.cols = w.shape
        self.fmt = fmt
        q, self.scale = _quantize(w, fmt, dim=1)
        self.data = pack_panels(q)
        # dense: also an [in, out] copy for torch's prefill, for a small model only, where one GEMM beats
        # the panel bmm by ~20% and the copy costs a few MB
        self.prefill_copy = q.contiguous() if dense and fmt == "fp32" else None

    @classmethod
    def packed(cls, data: torch.Tensor, scale: torch.Tensor | None, rows: int, cols: int, fmt: str,
               dense: bool = False) -> "Matrix":
        """A Matrix over panels packed already (the torch-free runner's, shared in place: see swap.py)."""
        m = cls.__new__(cls)
        m.rows, m.cols, m.fmt, m.data, m.scale, m.prefill_copy = rows, cols, fmt, data, scale, None
        if dense and fmt == "fp32":
            m.prefill_copy = m.unpacked()
        return m

    def unpacked(self) -> torch.Tensor:
        """The stored numbers as a plain [rows, cols] tensor (the panels undone; no arithmetic)."""
        full = self.cols // PANEL
        split = full * self.rows * PANEL
        main = self.data[:split].view(full, self.rows, PANEL).permute(1, 0, 2).reshape(self.rows, full * PANEL)
        return torch.cat([main, self.data[split:].view(self.rows, self.cols - full * PANEL)], dim=1).contiguous()

    def nbytes(self) -> int:
        extra = 0 if self.prefill_copy is None else 4 * self.prefill_copy.nelement()
        return self.data.element_size() * self.data.nelement() + extra + (0 if self.scale is None else 4 * self.scale.nelement())

    def matmul(self, x: torch.Tensor) -> torch.Tensor:
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
        return self.matmul(torch.eye(self.rows))


class Rows:
    """A [rows, cols] table in torch's layout: the embedding, and the lm_head (the same table when tied)."""

    def __init__(self, w: torch.Tensor, fmt: str) -> None:
        self.fmt = fmt
        self.data, self.scale = _quantize(w.contiguous(), fmt, dim=0)
        self.data = self.data.contiguous()

    @classmethod
    def packed(cls, data: torch.Tensor, scale: torch.Tensor | None, fmt: str) -> "Rows":
        """Rows over a table in its format already (the torch-free runner's, shared in place)."""
        r = cls.__new__(cls)
        r.fmt, r.data, r.scale = fmt, data, scale
        return r

    def nbytes(self) -> int:
        return self.data.element_size() * self.data.nelement() + (0 if self.scale is None else 4 * self.scale.nelement())

    def take(self, ids: torch.Tensor) -> torch.Tensor:
        rows = self.data[ids].to(torch.float32)
        return rows if self.scale is None else rows * self.scale[ids, None]

    def linear(self, h: torch.Tensor) -> torch.Tensor:
        out = h @ (self.data if self.fmt == "fp32" else self.data.to(torch.float32)).t()
        return out if self.scale is None else out * self.scale
