"""The user's switches: suggestions on or off, everywhere or per document, and a snooze that ends by itself.

`tabd/setEnabled {enabled, uri?, minutes?}` sets them (README, "Switching suggestions off"). A document is on when
suggestions are on everywhere and it is not switched off itself; a snooze is a switch-off whose timer switches it
back on. Which documents are open, and what turning one off stops, is the LSP layer's: `on_change` tells it a
switch moved (a snooze's end included). Plain values, no LSP.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Callable

from tabd.daemon.runtime.config import shown

EVERYWHERE = ""  # the scope of a switch without a uri
MAX_MINUTES = 7 * 24 * 60  # a snooze longer than a week is a mistake (and 10^400 minutes overflowed the timer)
MAX_URI_CHARS = 8192  # a longer uri names no document an editor opens; it would only be kept
MAX_SWITCHED_DOCUMENTS = 1024  # per-document switches kept; the oldest goes first (a closed document's go at close)


@dataclass(frozen=True)
class Switch:
    """One tabd/setEnabled, checked."""

    enabled: bool
    uri: str = EVERYWHERE
    minutes: float = 0.0  # > 0: a snooze (with enabled false) of that long


def read_switch(params: Any) -> Switch | str:
    """The Switch a tabd/setEnabled's params say, or why they do not say one (in words, for a warning)."""
    if not isinstance(params, dict):
        return f"tabd/setEnabled expects {{enabled, uri?, minutes?}}, got {type(params).__name__}; ignored"
    enabled, uri, minutes = params.get("enabled"), params.get("uri"), params.get("minutes")
    if not isinstance(enabled, bool):
        return f"tabd/setEnabled: enabled must be true or false, got {shown(enabled)}; ignored"
    if uri is not None and (not isinstance(uri, str) or not uri or len(uri) > MAX_URI_CHARS):
        return f"tabd/setEnabled: uri must be a document URI, got {shown(uri)}; ignored"
    if minutes is not None:
        number = isinstance(minutes, (int, float)) and not isinstance(minutes, bool)
        if not number or not 0 < minutes <= MAX_MINUTES:  # compared as is: float() of 10**400 overflows
            return (f"tabd/setEnabled: minutes must be a number above 0 and at most {MAX_MINUTES} (a week), got "
                    f"{shown(minutes)}; ignored")
    return Switch(enabled, uri or EVERYWHERE, float(minutes) if minutes is not None and not enabled else 0.0)


class Controls:
    def __init__(self, on_change: Callable[[], None] = lambda: None) -> None:
        self.on_change = on_change
        self.off: dict[str, None] = {}  # scopes switched off (EVERYWHERE and uris), oldest first
        self.snoozes: dict[str, asyncio.TimerHandle] = {}  # scope -> the timer that switches it back on

    def enabled(self, uri: str) -> bool:
        """Whether a document gets suggestions now (two set lookups: the hot path asks)."""
        return not self.off or (EVERYWHERE not in self.off and uri not in self.off)

    def set(self, switch: Switch) -> None:
        """Apply a switch; a newer one for the same scope replaces a snooze still running there."""
        timer = self.snoozes.pop(switch.uri, None)
        if timer is not None:
            timer.cancel()
        if switch.enabled:
            self.off.pop(switch.uri, None)
        else:
            self.off.pop(switch.uri, None)  # re-added last: the oldest switch is the first to go
            self.off[switch.uri] = None
            while len(self.off) > MAX_SWITCHED_DOCUMENTS + 1:
                self.forget(next(scope for scope in self.off if scope != EVERYWHERE))
            if switch.minutes > 0:
                self._snooze(switch.uri, switch.minutes)
        self.on_change()

    def forget(self, uri: str) -> None:
        """Drop a document's own switch (its document closed): per-document state goes with the document."""
        if uri == EVERYWHERE:
            return
        timer = self.snoozes.pop(uri, None)
        if timer is not None:
            timer.cancel()
        self.off.pop(uri, None)

    def _snooze(self, scope: str, minutes: float) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a plain function test): the switch stays off
            return
        self.snoozes[scope] = loop.call_later(minutes * 60, self._wake, scope)

    def _wake(self, scope: str) -> None:
        self.snoozes.pop(scope, None)
        self.off.pop(scope, None)
        self.on_change()

    def summary(self) -> dict[str, Any]:
        """For tabd/stats: on everywhere or not, and how many documents are switched off or snoozed."""
        return {"enabled": EVERYWHERE not in self.off, "off": len(self.off) - (EVERYWHERE in self.off),
                "snoozed": len(self.snoozes)}

    def close(self) -> None:
        for timer in self.snoozes.values():
            timer.cancel()
        self.snoozes.clear()
