"""Held-out figures of a model: validation loss, and suggestions scored the way users meet them.

The suggestions come through the daemon's own predictor (prompt layout, token
healing, stop rules), never through a separate greedy loop, so what is
measured here is what `tabd serve` would show.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

from tabd.predictor.training.data import Cut, edit_similarity, eval_cuts

Suggest = Callable[[str, str], str]  # (prefix, suffix) -> the suggestion shown


def suggestion_figures(suggest: Suggest, line_cuts: Sequence[Cut], mid_cuts: Sequence[Cut]) -> dict:
    """Exact match of the next line and of a line's rest from a mid-line cut, and edit similarity."""
    def score(cuts: Sequence[Cut]) -> tuple[float, float]:
        exact, sim = 0, 0.0
        for cut in cuts:
            guess = suggest(cut.prefix, cut.suffix)
            exact += guess == cut.expected
            sim += edit_similarity(guess, cut.expected)
        n = max(1, len(cuts))
        return exact / n, sim / n

    line_exact, line_sim = score(line_cuts)
    mid_exact, mid_sim = score(mid_cuts)
    return {"next_line_exact": round(line_exact, 4), "rest_of_line_exact": round(mid_exact, 4),
            "edit_similarity": round((line_sim + mid_sim) / 2, 4), "cuts": len(line_cuts) + len(mid_cuts)}


def loss_of(model, x, y, bf16: bool = False):
    """The mean cross-entropy of the model's next-token guesses on a batch (training's loss, and validation's)."""
    import torch
    import torch.nn.functional as F

    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        logits = model(input_ids=x, use_cache=False).logits
    return F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), y.reshape(-1))


def validation_loss(model, tok, texts: list[str], cfg) -> float:
    import torch

    from tabd.predictor.training.data import Source
    from tabd.predictor.training.rows import Rows

    rows = Rows([Source("val", str(i), t, False) for i, t in enumerate(texts)], tok, cfg, cfg.seed + 1)
    losses = []
    model.eval()
    with torch.no_grad():
        for i in range(0, cfg.val_rows, cfg.batch):
            x, y = rows.batch(min(cfg.batch, cfg.val_rows - i))
            losses.append(loss_of(model, x, y).item())
    model.train()
    return sum(losses) / max(1, len(losses))


def evaluate(model, tok, model_dir, val_texts: list[str], cfg) -> dict:
    """Validation loss on held-out rows, then suggestion figures from the saved model in model_dir."""
    from tabd.predictor.backends.local import LocalBackend
    from tabd.predictor.backends.backend_settings import LocalSettings
    from tabd.predictor.types import GenSettings, Query

    out = {"val_loss": round(validation_loss(model, tok, val_texts, dataclasses.replace(cfg, p_context=0.0)), 4),
           "val_rows": cfg.val_rows}
    backend = LocalBackend(LocalSettings(str(model_dir), device="cpu", threads=cfg.threads))
    settings = GenSettings()

    def suggest(prefix: str, suffix: str) -> str:
        return backend.predict(Query(prefix, suffix, settings)).text

    n = cfg.eval_lines
    out.update(suggestion_figures(suggest, eval_cuts(val_texts, n, cfg.seed + 2, "line"),
                                  eval_cuts(val_texts, n, cfg.seed + 3, "mid")))
    return out
