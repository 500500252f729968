"""How loaded a shared engine is, as this daemon sees it: speculation backs off when other users keep it busy.

On a remote engine every prefetch competes with someone else's keystroke, and tabd's local pre-emption cannot
reach into the engine's queue. So the daemon watches how long its own requests wait for their first token (from
sending one to the first streamed token, at the client: the engine's queue, the batch it joins, the prefill of what
it had not cached; the whole latency where the engine does not stream): the lowest of the recent ones is what the
engine gives unloaded, the median of the last few what it gives now. The time to the first token, not to the whole answer: a long
suggestion takes longer on an idle engine too (one user on llama-cpp-python read as 3.2 times its floor by whole
latencies, and held the prefetches of Tabs that were then pressed). When now is twice the floor, prefetches
go only one accept ahead; at four times, none (depth_cap 0) until it eases, save the Tab's own (below). A local
engine is this daemon's alone: no cap.

Which prefetches a shared engine gets at all (why_held, issue 28; measured with `tabd bench fleet --users 8` on vLLM):
- no partial branches (next word, next line): a partial accept is answered from memory without them, by typing
  through the rest of the suggestion on screen; they were 55-61% of the prefetches a fleet of Tab users sent;
- the whole accept one ahead (the state a Tab reaches) is the prefetch a Tab is answered from; it is not held for
  load, because held it is a miss for sure: the user's next request goes to the same engine anyway, later, in the
  foreground. It is held only for a document whose suggestions are seldom taken whole (p(all) under LIKELY), and
  only while the engine is loaded (twice its floor): on an idle engine it costs no one anything (a keystroke
  closes its stream, which stops its decode), and a Tab user's p(all) sits near their accepts per suggestion
  shown, often under 0.1; a higher bar under load held suggestions that were then taken (p(all) is still 0.2-0.4
  a minute into a fleet user's session on vLLM), so the bar stays LIKELY;
- deeper ones are capped by load as above;
- and the Tab's prefetch waits until the suggestion has been on screen PAUSE_S with no edit to the document: a
  user typing at 8 keys a second replaces most suggestions sooner, and each of their prefetches took a place in
  the engine's batch before the next keystroke closed it, while a user reads a suggestion for longer than that
  before pressing Tab (the simulated one 250 ms; Copilot's users several hundred). An edit (the Tab's own
  included: its request computes that state itself) drops the wait. The wait is shortened to what leaves the
  prefetch time to finish before this user's Tab: the lower quartile of their times from a suggestion shown to
  its Tab, less the slowest of the latest prefetch times, down to none (`pause_s`; the upper quartile left a
  Tab 250 ms after the suggestion joining one prefetch in six still running on llama-cpp-python at 8 users). A fixed 100 ms after the
  suggestion showed, with prefetches of 150-170 ms on a loaded vLLM, left a Tab 250 ms later joining a prefetch
  still running (`inflight` in the log, not memory) for the users who missed most; a user who reads longer
  keeps the whole pause, and PAUSE_S holds until TABS_NEEDED Tabs and one prefetch are known.
"""
from __future__ import annotations

import statistics
from collections import deque

FLOOR_WINDOW = 64  # requests the unloaded figure is the lowest of
RECENT = 8  # requests the current figure is the median of
SLOWER = 2.0  # now / floor from which prefetches go one ahead only
MUCH_SLOWER = 4.0  # ... and from which none start
MIN_MS = 60.0  # below this the engine is fast whatever the ratio: an idle vLLM on 2 cores gives one user first
# tokens in 20 to 50 ms (median 35), twice its floor from the spread of prefill sizes alone
LIKELY = 0.1  # p(all) from which a shared engine gets the Tab's prefetch
PAUSE_S = 0.1  # how long a suggestion stays on screen, the document unedited, before a shared engine gets its prefetch
TIMES_KEPT = 16  # the latest shown-to-Tab and prefetch times the pause is fitted to
TABS_NEEDED = 3  # whole accepts timed before the pause is fitted to the user


class EngineLoad:
    def __init__(self, shared: bool) -> None:
        self.shared = shared
        self._seen: deque[float] = deque(maxlen=FLOOR_WINDOW)
        self.held: dict[str, int] = {}  # prefetches not started, by why
        self._tabs: deque[float] = deque(maxlen=TIMES_KEPT)  # seconds from a suggestion shown to its whole accept
        self._prefetches: deque[float] = deque(maxlen=TIMES_KEPT)  # seconds a finished prefetch took

    def tabbed(self, seconds: float) -> None:
        """A suggestion was taken whole `seconds` after it showed."""
        if seconds >= 0:
            self._tabs.append(seconds)

    def prefetched(self, seconds: float) -> None:
        """A prefetch took `seconds`, from its start to its answer."""
        if seconds >= 0:
            self._prefetches.append(seconds)

    def pause_s(self) -> float:
        """How long a suggestion stays on screen, unedited, before its Tab's prefetch starts: at most PAUSE_S, less
        when this user's Tabs come too soon after the suggestion for a prefetch started that late to be done."""
        if len(self._tabs) < TABS_NEEDED or not self._prefetches:
            return PAUSE_S
        room = _quartiles(self._tabs)[0] - max(self._prefetches)
        return max(0.0, min(PAUSE_S, room))

    def observe(self, model_ms: float) -> None:
        """A request's model-path latency (its debounce excluded)."""
        if model_ms > 0:
            self._seen.append(model_ms)

    def ratio(self) -> float:
        if len(self._seen) < RECENT:
            return 1.0
        floor = min(self._seen)
        now = statistics.median(list(self._seen)[-RECENT:])
        return now / floor if floor > 0 and now >= MIN_MS else 1.0

    def depth_cap(self) -> int | None:
        """The deepest prefetch to start now (0: none); None when there is no cap."""
        if not self.shared:
            return None
        r = self.ratio()
        return 0 if r >= MUCH_SLOWER else 1 if r >= SLOWER else None

    def why_held(self, depth: int, kinds: tuple[str, ...], p_all: float) -> str | None:
        """Why a prefetch `depth` accepts ahead, by the accepts `kinds`, is not to start now (None: start it);
        `p_all`: how often the document's suggestions are taken whole. Never held on a local engine."""
        if not self.shared:
            return None
        if kinds and kinds[-1] != "all":
            return "partial_branch"  # the rest of the suggestion on screen answers a partial accept
        cap = self.depth_cap()
        if depth <= 1:
            return "unlikely" if p_all < LIKELY and cap is not None else None
        return "engine_loaded" if cap is not None and depth > cap else None

    def hold(self, why: str) -> None:
        self.held[why] = self.held.get(why, 0) + 1


def _quartiles(values: deque[float]) -> list[float]:
    """The lower quartile, median and upper quartile of `values` (not empty), interpolated between ranks."""
    return statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else [values[0]] * 3
