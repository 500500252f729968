"""The user's switches: suggestions on or off, everywhere or per document, and a snooze that ends by itself.

`tabd/setEnabled {enabled, uri?, minutes?}` sets them (README, "Switching suggestions off"). A document is on when
suggestions are on everywhere and it is not switched off itself; a snooze is a switch-off whose timer switches it
back on. Which documents are open, and what turning one off stops, is the LSP layer's: `on_change` tells it a
switch moved (a snooze's end included). Plain values, no LSP.
"""
from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from typing import Any, Callable

EVERYWHERE = ""  # the scope of a switch without a uri


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
        return f"tabd/setEnabled: enabled must be true or false, got {enabled!r}; ignored"
    if uri is not None and (not isinstance(uri, str) or not uri):
        return f"tabd/setEnabled: uri must be a document URI, got {uri!r}; ignored"
    if minutes is not None:
        number = isinstance(minutes, (int, float)) and not isinstance(minutes, bool)
        if not number or not math.isfinite(minutes) or minutes <= 0:
            return f"tabd/setEnabled: minutes must be a number above 0, got {minutes!r}; ignored"
    return Switch(enabled, uri or EVERYWHERE, float(minutes) if minutes is not None and not enabled else 0.0)


class Controls:
    def __init__(self, on_change: Callable[[], None] = lambda: None) -> None:
        self.on_change = on_change
        self.off: set[str] = set()  # scopes switched off: EVERYWHERE and uris
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
            self.off.discard(switch.uri)
        else:
            self.off.add(switch.uri)
            if switch.minutes > 0:
                self._snooze(switch.uri, switch.minutes)
        self.on_change()

    def _snooze(self, scope: str, minutes: float) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a plain function test): the switch stays off
            return
        self.snoozes[scope] = loop.call_later(minutes * 60, self._wake, scope)

    def _wake(self, scope: str) -> None:
        self.snoozes.pop(scope, None)
        self.off.discard(scope)
        self.on_change()

    def summary(self) -> dict[str, Any]:
        """For tabd/stats: on everywhere or not, and how many documents are switched off or snoozed."""
        return {"enabled": EVERYWHERE not in self.off, "off": len(self.off - {EVERYWHERE}),
                "snoozed": len(self.snoozes)}

    def close(self) -> None:
        for timer in self.snoozes.values():
            timer.cancel()
        self.snoozes.clear()
