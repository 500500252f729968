"""The service's speculation half: which states after an accept it computes, and what the user's accepts teach it.

A mixin of CompletionService (daemon/runtime/service.py), which owns the state
these methods use (config, cache, inflight, stats, events, _start). The depth
comes from measured acceptance (daemon/speculation/acceptance.py) unless --fixed-depth;
accepts come from `tabd.accept` and from the edits themselves
(daemon/runtime/accepts.py), each counted once.
"""
from __future__ import annotations

from collections import OrderedDict

from tabd.daemon.speculation.acceptance import AcceptanceModel
from tabd.daemon.context.store import EMPTY, Snapshot
from tabd.cache.key import short_key
from tabd.daemon.speculation.planner import FixedDepth, plan_after
from tabd.cache.state import DocState, Window
from tabd.daemon.runtime.accepts import Accept, AcceptTracker


class Speculation:
    def _init_speculation(self) -> None:
        config = self.config
        self.acceptance = AcceptanceModel(config.depth)
        self.policy = self.acceptance if config.adaptive_depth else FixedDepth(config.depth, config.partial_accept_prefetch)
        self.accepts = AcceptTracker(self.acceptance.record)
        self._planned: OrderedDict[str, None] = OrderedDict()  # keys of states reached by accepting
        self._prefetched: OrderedDict[str, None] = OrderedDict()  # prefetched keys not yet served to the user

    def _plan(self, doc: str, state: DocState, window: Window, text: str, context: Snapshot = EMPTY) -> None:
        self._remember_planned(state.insert(text), partial=False, context=context)  # so a Tab is recognised, speculation or not
        if self.config.speculation and self.config.depth > 0:
            self._prefetch_after(doc, state, text, 0, window, "", context)

    def _remember_planned(self, state: DocState, partial: bool, context: Snapshot = EMPTY) -> str:
        window = state.window(self.config.prefix_chars, self.config.suffix_chars)
        key = self.key_for(window, self.settings_for(state), context)
        if not partial:
            self._planned[key] = None
            self._planned.move_to_end(key)
            while len(self._planned) > 1024:
                self._planned.popitem(last=False)
        return key

    def _prefetch_after(self, doc, state, text, depth, root, chain, context: Snapshot = EMPTY, kinds=()) -> None:
        for plan in plan_after(state, text, depth, self.policy, self.config.partial_accept_prefetch, doc, kinds):
            key = self._remember_planned(plan.state, plan.partial, context)
            if key in self.cache or self.inflight.get(key) is not None:
                continue
            window = plan.state.window(self.config.prefix_chars, self.config.suffix_chars)
            self.stats.prefetch["started"] += 1
            self._prefetched[key] = None
            while len(self._prefetched) > 4096:
                self._prefetched.popitem(last=False)
            self.stats.branches[plan.branch] = self.stats.branches.get(plan.branch, 0) + 1
            self.events.emit("prefetch", outcome="started", depth=plan.depth, branch=plan.branch, key=short_key(key), doc=doc)
            self._start(key, doc, plan.state, window, self.settings_for(plan.state), plan.depth, root, chain + plan.inserted,
                        context, plan.kinds)

    def _used(self, key: str) -> None:
        """A prefetch's answer reached the user: not wasted."""
        if self._prefetched.pop(key, 0) is None:
            self.stats.prefetch["used"] = self.stats.prefetch.get("used", 0) + 1

    def _depth_fields(self, doc: str) -> dict:
        """The speculation depth chosen for what this answer sets going, and why (log fields)."""
        if not (self.config.speculation and self.config.cache):
            return {}
        if not self.config.adaptive_depth:
            return {"spec_depth": self.config.depth, "spec_why": "fixed (--fixed-depth)"}
        why = self.acceptance.explain(doc)
        return {"spec_depth": why["depth"], "spec_rates": why["rates"], "spec_why": why["why"]}

    # -- accepts ----------------------------------------------------------------------

    def document_edited(self, doc: str, offset: int, removed: int, inserted: str) -> None:
        """One didChange edit (offset in the text before it): an accept when it inserts the suggestion shown there."""
        accepted = self.accepts.edit(doc, offset, removed, inserted)
        if accepted is not None:
            self._accepted(accepted)

    def accept(self, answer_id: str, chars: int | None = None, partial: bool = False) -> bool:
        """`tabd.accept`: counted unless the edit that inserted it was (document_edited), never twice."""
        shown, accepted = self.accepts.command(answer_id, chars, partial)
        if accepted is not None:
            self._accepted(accepted)
        elif shown is None:  # an id we never showed (or forgot): still the user's accept, for the counts
            self.stats.accepts += 1
            self.events.emit("accept", id=answer_id, doc="", chars=chars if isinstance(chars, int) else 0,
                             partial=bool(partial), known=False)
        return shown is not None

    def _accepted(self, a: Accept) -> None:
        self.stats.accepts += 1
        self.stats.accepts_by[a.via] = self.stats.accepts_by.get(a.via, 0) + 1
        if a.partial:  # the next request there is an after-accept one (a whole accept reaches what _plan remembered)
            # under the document's kept context: accepting at the cursor keeps it, and the next request is keyed so
            self._remember_planned(a.reached, partial=False, context=self.workspace.current(a.doc))
        self.events.emit("accept", id=a.answer_id, doc=a.doc, chars=a.chars, partial=a.partial, kind=a.kind, via=a.via,
                         known=True)

    def dismiss(self, answer_id: str) -> bool:
        shown = self.accepts.dismiss(answer_id)
        if self.handover is not None:
            self.handover.shown(False)
        self.stats.dismisses += 1
        self.events.emit("dismiss", id=answer_id, doc=shown.doc if shown else "", known=shown is not None)
        return shown is not None

    def speculation_stats(self) -> dict:
        s = self.stats
        used = s.prefetch.get("used", 0)
        return {
            "prefetch": {**s.prefetch, "used": used,
                         # prefetches whose answer the user never saw, per suggestion accepted
                         "wasted_per_accept": round((s.prefetch["started"] - used) / s.accepts, 3) if s.accepts else None},
            "accepts_by": dict(s.accepts_by),
            "speculation": {**(self.acceptance.summary() if self.config.adaptive_depth else
                               {"mode": "fixed", "depth": self.config.depth}),
                            # "all_word": the accepts from the user's state, joined by _ (JSON keys clients can map)
                            "branches": {k.replace(".", "_"): v for k, v in s.branches.items()}},
        }
