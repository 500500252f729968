"""Copying from the prompt: the suggestion any model must beat, and draft candidates for the model.

`copy_suggestion` finds the longest earlier occurrence (8-48 characters) of
the text just before the cursor and suggests what followed it, up to the end
of that line. Code repeats itself, so this alone saves a Tab user real typing;
`tabd serve --backend copy` serves it, so `tabd bench quality` measures it
through the same server and the same simulated users as the model. The
local backend's copy candidates (verified by the model) also search the
workspace context in the prompt; the baseline copies from the window only.
No torch here.
"""
from __future__ import annotations

from typing import Callable, Sequence

from tabd.predictor.types import Backend, Prediction, Query, never

MIN_MATCH, MAX_MATCH = 8, 48


def copy_suggestion(prefix: str, min_match: int = MIN_MATCH, max_match: int = MAX_MATCH,
                    sources: Sequence[str] = ()) -> str:
    """What followed the longest earlier occurrence of the prefix's tail, to the end of its line.

    The prefix itself is searched (its most recent occurrence that ends before
    the cursor), then each of `sources` (workspace text: other files, in the
    order given): the longest match wins, and at equal length the nearest text.
    """
    top = min(max_match, len(prefix) - 1)
    best, best_n = "", min_match - 1
    for text, before in ((prefix, len(prefix) - 1), *((s, len(s)) for s in sources)):
        n, found = _longest(prefix, text, before, best_n + 1, top)
        if n > best_n:
            best, best_n = found, n
            if n >= top:
                break
    return best


def _longest(prefix: str, text: str, before: int, low: int, high: int) -> tuple[int, str]:
    """(n, what follows) for the longest tail of `prefix`, of low..high characters, found in text[:before] with a line after it.

    An occurrence of a longer tail is one of every shorter tail, so the longest
    length that occurs at all is found by bisection: a few scans of `text`
    however long, where trying every length would take one scan each. When the
    occurrences of that length have nothing after them on their line, the next
    shorter length is tried.
    """
    if low < 1 or low > high or text.rfind(prefix[-low:], 0, before) < 0:
        return 0, ""
    lo, hi = low, high  # lo occurs; find the largest n in [lo, hi] that does
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if text.rfind(prefix[-mid:], 0, before) >= 0:
            lo = mid
        else:
            hi = mid - 1
    for n in range(lo, low - 1, -1):
        found = _follow(text, prefix[-n:], before)
        if found:
            return n, found
    return 0, ""


def _follow(text: str, tail: str, before: int) -> str:
    """The rest of the line after the last occurrence of `tail` ending before `before` with text after it."""
    at = text.rfind(tail, 0, before)
    while at >= 0:
        start = at + len(tail)
        end = text.find("\n", start)
        line = text[start:end if end >= 0 else len(text)]  # no copy of the rest of a long text
        if line.strip():
            return line.rstrip()
        at = text.rfind(tail, 0, at + len(tail) - 1)
    return ""


class CopyBackend(Backend):
    """A backend with no model: the copy heuristic above, answered at once."""

    model_id = "copy-baseline"
    engine_name = "copy"
    writes_edits = False  # no model: nothing to write an updated window with

    def predict(self, query: Query, should_stop: Callable[[], bool] = never) -> Prediction:
        # the baseline copies from the window only; workspace context is the model's to use
        text = copy_suggestion(query.prefix)
        after = query.suffix.split("\n", 1)[0].strip()
        if after and text.endswith(after):  # the line's rest already follows the cursor
            text = text[: len(text) - len(after)].rstrip()
        return Prediction(text=text)

    def kv_bytes(self) -> int:
        return 0
