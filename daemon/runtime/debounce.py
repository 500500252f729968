"""The server's debounce: how long a request that needs the model waits first, fitted to typing and to the model.

Only a request that memory cannot answer waits (cache, type-through and
in-flight answers go out at once, before any of this). The wait is

    0                                                          if model latency <= FAST_SHARE x typing rhythm
    clamp(base, MAX_MS, min(typing rhythm, model latency) x ramp)  otherwise

where ramp grows from 0 at FAST_SHARE x rhythm to 1 at FULL_SHARE x rhythm (and stays 1 above).

- typing rhythm: an EMA of the gaps between a document's edits (gaps over
  PAUSE_S are pauses, not rhythm; a document with too few gaps uses the
  user's EMA over all documents). Waiting longer than the usual gap mostly
  delays the answer at a pause: the keystrokes it would skip have come by then.
- model latency: an EMA of what a model call took: a request's answer after its
  wait, and a prefetch's call (the request it stands in for, after a Tab, is one
  of the fastest; without it, speculation left the estimate higher, and its
  user waited more, than with speculation off). Waiting
  longer than a model call costs the user more than the skipped call would
  have cost the machine; a slow model (a 0.5B one, hundreds of ms) waits
  longer, because a superseded call there holds the one worker for longer.
- no wait at all while the model answers within half the usual gap: a call the
  next keystroke supersedes has then cost the one worker little, and a wait
  loses the suggestions shown between keystrokes. The wait then grows with the
  model's share of the gap, not at once to all of it: a rule that jumped from 0
  to the whole gap at half of it turned a few percent more engine latency
  (others' prefetches, on a shared engine) into a 60 ms wait for a third more of
  a user's requests, while a model just over half the gap skips few calls by
  waiting. On the embedded model (about
  10 ms a request) the first replays at recorded speed with a plain 20-35 ms
  wait showed 34-82 suggestions against 106-109 without; the loaded machine's
  stalls move those figures too (README, "Debounce"), but the wait bought nothing.
- base (`--debounce-ms`, default 20): the floor when it waits, and the wait
  before anything is measured. 0 turns the debounce off.

No wait for an invoked request (the user asked) or one right after an accept
(a Tab is not typing: the next keystroke is not on its way).
Debounce is plain arithmetic; Waits holds the waiting requests' futures for the service
(daemon/runtime/service.py).
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from tabd.predictor.types import Prediction

MAX_MS = 1000.0  # Tabby's ceiling; far above what the embedded model needs
PAUSE_S = 1.0  # a gap longer than this ends a burst of typing
ALPHA = 0.25  # EMA weight of the newest sample: about the last 4-8 keystrokes
MIN_GAPS = 3  # gaps a document needs before its own rhythm is trusted
FAST_SHARE = 0.5  # a model answering within this share of the usual gap between keystrokes is not waited for
FULL_SHARE = 1.0  # ... and from this share on, the whole wait: in between it grows in proportion
DEFAULT_MS = 20  # see README "Debounce": below the embedded model's request latency, above key-repeat bursts


@dataclass(frozen=True)
class Wait:
    ms: float
    why: str


class _Ema:
    __slots__ = ("value", "count")

    def __init__(self) -> None:
        self.value = 0.0
        self.count = 0

    def add(self, sample: float) -> None:
        self.value = sample if self.count == 0 else ALPHA * sample + (1 - ALPHA) * self.value
        self.count += 1


class Debounce:
    """Per-document typing rhythm and the model's latency, and the wait they give a request."""

    def __init__(self, base_ms: float) -> None:
        self.base_ms = float(base_ms)
        self._last_edit: dict[str, float] = {}
        self._rhythm: dict[str, _Ema] = {}
        self._user = _Ema()  # rhythm across all documents
        self._model = _Ema()  # model answer latency after the wait, ms

    def edited(self, doc: str, now: float) -> None:
        """An edit of `doc` at monotonic time `now` (seconds)."""
        last = self._last_edit.get(doc)
        self._last_edit[doc] = now
        if last is None:
            return
        gap = now - last
        if 0 <= gap <= PAUSE_S:
            self._rhythm.setdefault(doc, _Ema()).add(gap * 1000)
            self._user.add(gap * 1000)

    def model_answered(self, ms: float) -> None:
        """A model answer took `ms` after its wait."""
        if ms >= 0:
            self._model.add(ms)

    def prefetched(self, comp: object, prediction: Prediction) -> None:
        """A prefetch finished: its call is one the request after a Tab it stands in for would have made."""
        self.model_answered(prediction.prefill_ms + prediction.decode_ms)

    def closed(self, doc: str) -> None:
        self._last_edit.pop(doc, None)
        self._rhythm.pop(doc, None)

    def rhythm_ms(self, doc: str) -> float | None:
        own = self._rhythm.get(doc)
        if own is not None and own.count >= MIN_GAPS:
            return own.value
        return self._user.value if self._user.count >= MIN_GAPS else None

    def wait_for(self, doc: str, invoked: bool = False, after_accept: bool = False) -> Wait:
        if self.base_ms <= 0:
            return Wait(0.0, "off (--debounce-ms 0)")
        if invoked:
            return Wait(0.0, "invoked")
        if after_accept:
            return Wait(0.0, "after an accept")
        rhythm = self.rhythm_ms(doc)
        model = self._model.value if self._model.count else None
        if rhythm is not None and model is not None and model <= FAST_SHARE * rhythm:
            # the model answers well inside the usual gap: a call the next keystroke supersedes has cost little,
            # and waiting would lose the suggestions shown between keystrokes (measured: README, "Debounce")
            return Wait(0.0, f"model {model:.0f} ms <= {FAST_SHARE:g} x rhythm {rhythm:.0f} ms: no wait")
        known = [v for v in (rhythm, model) if v is not None]
        if not known:
            return Wait(self.base_ms, "base (nothing measured yet)")
        target = min(known)
        ramp = 1.0
        if rhythm is not None and model is not None and rhythm > 0:
            ramp = min(1.0, (model / rhythm - FAST_SHARE) / (FULL_SHARE - FAST_SHARE))
        ms = min(MAX_MS, max(self.base_ms, target * ramp))
        parts = [f"rhythm {rhythm:.0f} ms" if rhythm is not None else "", f"model {model:.0f} ms" if model is not None else "",
                 f"x {ramp:.2f}" if ramp < 1 else ""]
        return Wait(round(ms, 3), f"{', '.join(p for p in parts if p)} -> {ms:.0f} ms (base {self.base_ms:.0f})")

    def summary(self) -> dict[str, Any]:
        return {
            "base_ms": self.base_ms,
            "rhythm_ms": round(self._user.value, 1) if self._user.count else None,
            "model_ms": round(self._model.value, 1) if self._model.count else None,
        }


class Waits:
    """The requests waiting out their debounce, one per document: a newer keystroke there ends the wait early."""

    def __init__(self) -> None:
        self._by_doc: dict[str, tuple[asyncio.Future[str], object]] = {}

    def __len__(self) -> int:
        return len(self._by_doc)

    async def wait(self, doc: str, window: object, seconds: float) -> str:
        """Wait `seconds`; "" when the wait ran out, else why it was cut ("superseded", "stale", "closed")."""
        self.end(doc, "superseded")  # one waiter per document: the older one's answer is of no use now
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[str] = loop.create_future()
        self._by_doc[doc] = (fut, window)
        timer = loop.call_later(seconds, _settle, fut, "")
        try:
            return await fut
        finally:  # also on the client's $/cancelRequest
            timer.cancel()
            if self._by_doc.get(doc, (None,))[0] is fut:
                del self._by_doc[doc]

    def closed(self, doc: str) -> None:
        self.end(doc, "closed")

    def end(self, doc: str, reason: str, unless_window: object = None) -> None:
        """Cut doc's wait short (it answers empty), unless it waits for `unless_window` (the edit did not move it)."""
        held = self._by_doc.get(doc)
        if held is None or (unless_window is not None and held[1] == unless_window):
            return
        del self._by_doc[doc]
        if not held[0].done():
            held[0].set_result(reason)


def _settle(fut: asyncio.Future[str], reason: str) -> None:
    if not fut.done():
        fut.set_result(reason)
