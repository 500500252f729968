"""The weight store's layout and format choice, without torch: what weights.py (torch) and boot.py (numpy) both follow."""
from __future__ import annotations

FORMATS = ("fp32", "bf16", "int8")
PANEL = 64  # columns per block in decode.c's mv_panel
AUTO_FP32_BYTES = 512 << 20  # fp32 weights up to this size stay fp32 under --weights auto
PASS_TOKENS = 8  # tokens one native pass takes at most (decode.c's MAXB): a keystroke's few, a token and its drafts
SMALL_BYTES = 64 << 20  # fp32 weights up to this: a "small" model (plain prefill matrices, the lm_head in panels)


def choose_format(asked: str, fp32_bytes: int) -> tuple[str, str]:
    """(format, why) for --weights asked; auto goes by the model's fp32 size."""
    if asked not in (*FORMATS, "auto"):
        raise ValueError(f"unknown weight format {asked!r}: use fp32, bf16, int8 or auto")
    if asked != "auto":
        return asked, f"{asked} (asked for)"
    mb = fp32_bytes / (1 << 20)
    if fp32_bytes <= AUTO_FP32_BYTES:
        return "fp32", f"fp32 (auto: {mb:.0f} MB of fp32 weights; small enough that decode is not bound by memory)"
    return "bf16", f"bf16 (auto: {mb:.0f} MB of fp32 weights; decode streams them per token, bf16 halves that)"
