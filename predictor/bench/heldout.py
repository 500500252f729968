"""Model-level figures for `tabd bench quality`: suggestions at held-out cuts, with and without gating.

Cuts come from the held-out stdlib split (never trained on): the cursor at a
line's indentation ("next line") and inside a line ("rest of line"). Each cut
gets one suggestion through the daemon's own predictor; gating is then
applied offline at each threshold, since a suggestion's per-token
probabilities decide it (precision: of the cuts where something is shown, how
often it is what comes next; coverage: how often something is shown).
"""
from __future__ import annotations

import argparse
from typing import Any, Sequence

from tabd.predictor.text import postprocess
from tabd.predictor.text.lookup import copy_suggestion
from tabd.predictor.training.data import Cut, edit_similarity, eval_cuts, stdlib_sources
from tabd.predictor.types import GenSettings, Prediction, Query

GATE_TABLE = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7)


def held_out_cuts(n: int, seed: int = 3) -> tuple[list[Cut], list[Cut]]:
    _, val = stdlib_sources()
    texts = [s.text for s in val]
    return eval_cuts(texts, n, seed, "line"), eval_cuts(texts, n, seed + 1, "mid")


def ungated(cuts: Sequence[Cut], texts: Sequence[str]) -> dict[str, float]:
    n = max(1, len(cuts))
    return {"exact": round(sum(t == c.expected for c, t in zip(cuts, texts)) / n, 4),
            "edit_similarity": round(sum(edit_similarity(t, c.expected) for c, t in zip(cuts, texts)) / n, 4)}


def gated(cuts: Sequence[Cut], preds: Sequence[Prediction], threshold: float) -> dict[str, float]:
    shown = right = exact = saved = 0
    for cut, pred in zip(cuts, preds):
        text = postprocess.gate(pred.text, pred.confidence, threshold)
        if not text:
            continue
        shown += 1
        if cut.expected.startswith(text):
            right += 1
            saved += len(text) - 1  # a Tab user takes it: its characters, less the Tab
            exact += text == cut.expected
    n = max(1, len(cuts))
    return {"min_confidence": threshold, "precision": round(right / shown, 4) if shown else 0.0,
            "coverage": round(shown / n, 4), "exact": round(exact / n, 4),
            "keys_saved_per_cut": round(saved / n, 3)}


def figures_backend(args: argparse.Namespace):
    """The engine the flags name, in this process: the local model, or the copy baseline."""
    kind = args.backend
    if kind == "copy":
        from tabd.predictor.text.lookup import CopyBackend

        return CopyBackend()
    if kind != "local":
        raise RuntimeError(f"model-level figures need --backend local or copy, not {kind} "
                           "(pass --quality-no-model-figures to measure a remote engine's users only)")
    from tabd.predictor.backends.local import LocalBackend
    from tabd.predictor.backends.backend_settings import LocalSettings

    return LocalBackend(LocalSettings(args.model, device=args.device, fim=args.fim, threads=args.threads,
                                      engine=batch_engine(args.engine)))


def batch_engine(asked: str | None) -> str:
    """The engine for a batch run: auto's torch-free start is for a daemon's first answer; a batch of long
    prompts runs faster on torch+native (the same tokens)."""
    from tabd.predictor.loading.engine_names import AUTO, TORCH_NATIVE

    return TORCH_NATIVE if asked in (None, "", AUTO) else asked


def model_figures(args: argparse.Namespace) -> dict[str, Any]:
    backend = figures_backend(args)
    settings = GenSettings(max_new_tokens=args.max_new_tokens, lookup_min_p=args.lookup_min_p)
    line_cuts, mid_cuts = held_out_cuts(args.quality_cuts)
    cuts = [*line_cuts, *mid_cuts]
    preds = [backend.predict(Query(c.prefix, c.suffix, settings, slot_id="quality")) for c in cuts]
    texts = [p.text for p in preds]
    copies = [copy_suggestion(c.prefix) for c in cuts]
    k = len(line_cuts)
    line, mid = ungated(line_cuts, texts[:k]), ungated(mid_cuts, texts[k:])
    return {
        "next_line_exact": line["exact"],
        "rest_of_line_exact": mid["exact"],
        "edit_similarity": round((line["edit_similarity"] + mid["edit_similarity"]) / 2, 4),
        "cuts": len(cuts),
        "gating": [gated(cuts, preds, t) for t in GATE_TABLE],
        "copy_baseline_cuts": {"next_line_exact": ungated(line_cuts, copies[:k])["exact"],
                               "rest_of_line_exact": ungated(mid_cuts, copies[k:])["exact"],
                               "gating": gated(cuts, [Prediction(text=t) for t in copies], 0.0)},
    }
