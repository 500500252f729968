"""What to compute before the user gets there, and what the user's accepts teach about how far ahead to go.

After a suggestion is shown, the states its accepts reach (whole, next word,
next line: daemon/speculation/planner.py) are prefetched in the background, as
deep as measured acceptance says (daemon/speculation/acceptance.py) unless
--fixed-depth; a finished prefetch plans the step after it. Accepts come from
`tabd.accept` and from the edits themselves (accepts.py), each counted once.
"""
from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from typing import Any, Callable

from tabd.cache.state import DocState, Window, short_key
from tabd.daemon.context.chunk_store import EMPTY, Snapshot
from tabd.daemon.runtime.accepts import Accept, AcceptTracker
from tabd.daemon.runtime.computations import Computations
from tabd.daemon.runtime.jobs import Computation
from tabd.daemon.runtime.config import Config
from tabd.daemon.runtime.engine_load import EngineLoad
from tabd.daemon.runtime.events import EventLog
from tabd.daemon.runtime.memory import Memory
from tabd.daemon.runtime.request import Request, RequestBuilder
from tabd.daemon.runtime.stats import Speculation
from tabd.daemon.speculation.acceptance import AcceptanceModel
from tabd.daemon.speculation.planner import DepthPolicy, FixedDepth, plan_after
from tabd.predictor.types import Prediction


class RecentKeys:
    """The latest keys added, at most `limit` of them, oldest dropped first."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._keys: OrderedDict[str, None] = OrderedDict()
        self.has = self._keys.__contains__  # `in`, asked on every request's path: no Python frame of its own

    def add(self, key: str) -> None:
        self._keys[key] = None
        self._keys.move_to_end(key)
        while len(self._keys) > self.limit:
            self._keys.popitem(last=False)

    def pop(self, key: str) -> bool:
        """Whether it was there (it is not any more)."""
        return self._keys.pop(key, 0) is None

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def __len__(self) -> int:
        return len(self._keys)


class Speculator:
    def __init__(self, config: Config, requests: RequestBuilder, memory: Memory, computations: Computations,
                 events: EventLog, context_of: Callable[[str], Snapshot], planned: RecentKeys) -> None:
        self.config = config
        self.requests = requests
        self.memory = memory
        self.computations = computations
        computations.prefetched.subscribe(self.prefetched_answer)
        self.stats = Speculation()
        self.events = events
        self.context_of = context_of  # a document's kept context (an accept at the cursor keeps it)
        self.acceptance = AcceptanceModel(config.depth)
        self.policy: DepthPolicy = (self.acceptance if config.adaptive_depth
                                    else FixedDepth(config.depth, config.partial_accept_prefetch))
        self.accepts = AcceptTracker(self.acceptance.record)
        self.planned = planned  # keys of states reached by accepting (a request there is an after-accept one)
        self.prefetched = RecentKeys(4096)  # prefetched keys not yet served to the user
        self.on_screen: dict[str, tuple[Window, str, bool]] = {}  # doc -> (window, text, invoked) of its latest suggestion
        self.engine = EngineLoad(config.backend == "openai")  # a shared engine's load: how far ahead to go
        self._paused: dict[str, asyncio.TimerHandle] = {}  # doc -> a shared engine's Tab prefetch, waiting for a pause
        self._shown_at: dict[str, float] = {}  # doc -> when its latest suggestion showed (monotonic seconds)

    @property
    def on(self) -> bool:
        return self.config.speculation and self.config.depth > 0

    # -- after an answer ---------------------------------------------------------------

    def shown(self, req: Request, text: str, typed: bool) -> None:
        """A suggestion is on screen (`typed`: the rest of one typed into): track its accept, plan its states."""
        self.on_screen[req.doc] = (req.window, text, req.invoked)
        self._shown_at[req.doc] = time.monotonic()  # a Tab's time from here fits the shared engine's pause
        self.accepts.shown(req.id, req.doc, req.state, text, typed)
        self._remember(req.doc, req.state.insert(text), req.context, req.invoked)  # so a Tab is recognised
        if not self.on:
            return

        def go() -> None:
            self.prefetch_after(req.doc, req.state, text, 0, req.window, "", req.context, invoked=req.invoked)

        pause = self.engine.pause_s() if self.engine.shared else 0.0
        if pause > 0:
            self._after_pause(req.doc, go, pause)  # engine_load.py: a suggestion typed over costs the others nothing
        else:
            go()

    def _after_pause(self, doc: str, go: Callable[[], None], pause: float) -> None:
        """Run `go` once the document has gone `pause` seconds without an edit (edited() drops it); now with no event
        loop."""
        self._cancel_pause(doc)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            go()
            return

        def fire() -> None:
            self._paused.pop(doc, None)
            go()

        self._paused[doc] = loop.call_later(pause, fire)

    def _cancel_pause(self, doc: str) -> None:
        handle = self._paused.pop(doc, None)
        if handle is not None:
            handle.cancel()

    def prefetched_answer(self, comp: Computation, prediction: Prediction) -> None:
        """A prefetch finished: its call says how early a shared engine's Tab prefetch must start
        (engine_load.pause_s); what it would show is typed-through material, and the next step's plan."""
        self.engine.prefetched((prediction.prefill_ms + prediction.decode_ms) / 1000)
        # speculation plans from what is shown
        shown = self.requests.shown(prediction.text, prediction.confidence, comp.state.after, comp.invoked)
        if shown and self.memory.enabled:
            self.memory.shown(comp.window, shown, comp.key, comp.depth)
            self.prefetch_after(comp.doc, comp.state, shown, comp.depth, comp.root, comp.chain, comp.context,
                                comp.kinds, comp.invoked)

    def context_changed(self, doc: str, window: Window, state: DocState, context: Snapshot) -> bool:
        """A new context for `doc`: when its suggestion is on screen at this window, prefetch its after-accept states
        under the new context (a Tab after the pause is still answered from memory); whether it did."""
        shown = self.on_screen.get(doc)
        if shown is None or shown[0] != window or not self.on:
            return False
        self.prefetch_after(doc, state, shown[1], 0, window, "", context, invoked=shown[2])
        return True

    def prefetch_after(self, doc: str, state: DocState, text: str, depth: int, root: Window | None, chain: str,
                       context: Snapshot = EMPTY, kinds: tuple[str, ...] = (), invoked: bool = False) -> None:
        """Prefetch the states the accepts of `text` at `state` reach, each under the key the next request there asks
        (`invoked`: the kind of request that showed it, which the user's next one is)."""
        p_all = self.acceptance.rate(doc, "all")
        for plan in plan_after(state, text, depth, self.policy, self.config.partial_accept_prefetch, doc, kinds):
            why = self.engine.why_held(plan.depth, plan.kinds, p_all)  # a shared engine: others' keystrokes first
            if why is not None:
                self.engine.hold(why)
                self.events.emit("prefetch", outcome="held", depth=plan.depth, branch=plan.branch, doc=doc,
                                 reason=why)
                continue
            prompt = self.requests.prompt(doc, plan.state, context, invoked)
            if not plan.partial:
                self.planned.add(prompt.key)
            key = prompt.key
            if self.memory.has(key):
                continue
            self.prefetched.add(key)
            self.stats.prefetch_started(plan.branch)
            self.events.emit("prefetch", outcome="started", depth=plan.depth, branch=plan.branch, key=short_key(key),
                             doc=doc)
            self.computations.prefetch(Computation(key, doc, plan.state, prompt.window, prompt.settings, plan.depth, root,
                                                   chain + plan.inserted, context, plan.kinds, invoked=invoked))

    def prefetch_state(self, doc: str, state: DocState, root: Window) -> None:
        """The completion at a state another kind of accept reaches (a next-edit suggestion applied, the cursor
        after it), computed ahead like a Tab's; `root`: the user's state now."""
        if not self.on:
            return
        context = self.context_of(doc)
        prompt = self.requests.prompt(doc, state, context)
        self.planned.add(prompt.key)
        key = prompt.key
        if self.memory.has(key):
            return
        self.prefetched.add(key)
        self.stats.prefetch_started("edit")
        self.events.emit("prefetch", outcome="started", depth=1, branch="edit", key=short_key(key), doc=doc)
        self.computations.prefetch(Computation(key, doc, state, prompt.window, prompt.settings, 1, root, "", context,
                                               ("edit",)))

    def _remember(self, doc: str, state: DocState, context: Snapshot, invoked: bool) -> None:
        """A state an accept reaches: a request there is an after-accept one."""
        self.planned.add(self.requests.prompt(doc, state, context, invoked).key)

    def used(self, key: str) -> None:
        """A prefetch's answer reached the user: not wasted."""
        if self.prefetched.pop(key):
            self.stats.prefetch_used += 1

    # -- accepts ------------------------------------------------------------------------

    def edited(self, doc: str, offset: int, removed: int, inserted: str) -> None:
        """One didChange edit (offset in the text before it): an accept when it inserts the suggestion shown there."""
        self._cancel_pause(doc)  # typed on (or Tab pressed): the next answer plans again
        accepted = self.accepts.edit(doc, offset, removed, inserted)
        if accepted is not None:
            self._accepted(accepted)

    def accept(self, answer_id: str, chars: int | None = None, partial: bool = False,
               alternative: str | None = None) -> bool:
        """`tabd.accept`: counted unless the edit that inserted it was (edited), never twice; whether it was shown.
        `alternative`: the text of another of the answer's items, taken instead of the first."""
        shown, accepted = self.accepts.command(answer_id, chars, partial, alternative)
        if accepted is not None:
            self._accepted(accepted)
        elif shown is None:  # an id we never showed (or forgot): still the user's accept, for the counts
            self.stats.accepted()
            self.events.emit("accept", id=answer_id, doc="", chars=chars if isinstance(chars, int) else 0,
                             partial=bool(partial), known=False)
        return shown is not None

    def _accepted(self, a: Accept) -> None:
        self.stats.accepted(a.via)
        shown_at = self._shown_at.pop(a.doc, None)
        if shown_at is not None and not a.partial and not a.alternative:  # a Tab: how long this user reads first
            self.engine.tabbed(time.monotonic() - shown_at)
        if a.partial or a.alternative:  # the next request there is an after-accept one (a whole accept reaches what shown() remembered)
            # under the document's kept context: accepting at the cursor keeps it, and the next request is keyed so
            screen = self.on_screen.get(a.doc)
            self._remember(a.doc, a.reached, self.context_of(a.doc), screen is not None and screen[2])
        # its line waits for the loop's next turn: a Tab's edit comes with the next inline completion in one read
        self.events.emit_soon("accept", id=a.answer_id, doc=a.doc, chars=a.chars, partial=a.partial, kind=a.kind,
                              via=a.via, known=True, **({"alternative": True} if a.alternative else {}))

    def dismiss(self, answer_id: str) -> bool:
        shown = self.accepts.dismiss(answer_id)
        self.stats.dismisses += 1
        self.events.emit("dismiss", id=answer_id, doc=shown.doc if shown else "", known=shown is not None)
        return shown is not None

    def closed(self, doc: str) -> None:
        self.accepts.closed(doc)
        self.on_screen.pop(doc, None)
        self._shown_at.pop(doc, None)
        self._cancel_pause(doc)

    # -- what it reports ------------------------------------------------------------------

    def depth_fields(self, doc: str) -> dict[str, Any]:
        """The speculation depth chosen for what this answer sets going, and why (log fields)."""
        if not (self.config.speculation and self.config.cache):
            return {}
        if not self.config.adaptive_depth:
            return {"spec_depth": self.config.depth, "spec_why": "fixed (--fixed-depth)"}
        why = self.acceptance.explain(doc)
        return {"spec_depth": why["depth"], "spec_rates": why["rates"], "spec_why": why["why"]}

    def policy_summary(self) -> dict[str, Any]:
        return self.acceptance.summary() if self.config.adaptive_depth else {"mode": "fixed", "depth": self.config.depth}
