"""Copying from the prompt: the suggestion any model must beat, and draft candidates for the model.

`copy_suggestion` finds the longest earlier occurrence (8-48 characters) of
the text just before the cursor and suggests what followed it, up to the end
of that line. Code repeats itself, so this alone saves a Tab user real typing;
`tabd serve --backend copy` serves it, so `tabd bench quality` measures it
through the same server and the same simulated users as the model.
No torch here.
"""
from __future__ import annotations

from typing import Callable, Sequence

from tabd.predictor.types import ContextChunk, GenSettings, Prediction

MIN_MATCH, MAX_MATCH = 8, 48


def copy_suggestion(prefix: str, min_match: int = MIN_MATCH, max_match: int = MAX_MATCH) -> str:
    """What followed the longest (most recent) earlier occurrence of the prefix's tail, to the end of its line."""
    for n in range(min(max_match, len(prefix) - 1), min_match - 1, -1):
        tail = prefix[-n:]
        at = prefix.rfind(tail, 0, len(prefix) - 1)  # an occurrence that ends before the cursor
        while at >= 0:
            follow = prefix[at + n:]
            line = follow.split("\n", 1)[0] if not follow.startswith("\n") else ""
            if line.strip():
                return line.rstrip()
            at = prefix.rfind(tail, 0, at + n - 1)
    return ""


class CopyBackend:
    """A backend with no model: the copy heuristic above, answered at once."""

    model_id = "copy-baseline"
    engine_name = "copy"

    def predict(self, prefix: str, suffix: str, settings: GenSettings,
                should_stop: Callable[[], bool] = lambda: False, slot_id: str = "default",
                context: Sequence[ContextChunk] = ()) -> Prediction:
        # the baseline copies from the window only; workspace context is the model's to use
        text = copy_suggestion(prefix)
        after = suffix.split("\n", 1)[0].strip()
        if after and text.endswith(after):  # the line's rest already follows the cursor
            text = text[: len(text) - len(after)].rstrip()
        return Prediction(text=text)

    def kv_bytes(self) -> int:
        return 0
