"""What the user is doing, as the completion service sees it, told to whoever listens (the hand-over is one).

The service tells its listeners as each request ends (its answer written, or
the request cancelled: never on a request's way to its answer), with whether
its answer shows a suggestion, and at each model answer; a listener that has
nothing to do with one of them ignores it. New work that paces itself by the user (an
edit predictor, a warm-up policy) listens here instead of being called from
inside the service.
"""
from __future__ import annotations

from typing import Protocol


class Activity(Protocol):
    def requested(self) -> None:
        """A request ended (answered, from memory too, or cancelled): the user is at work."""

    def shown(self, showing: bool) -> None:
        """The latest answer shows a suggestion (True), or nothing, or it was dismissed (False)."""

    def answered(self) -> None:
        """The model computed an answer for a request."""

    def close(self) -> None:
        """The service stops."""


class Listeners:
    """Every listener, told in the order they were added; itself an Activity."""

    def __init__(self, *listeners: Activity) -> None:
        self._all: list[Activity] = list(listeners)

    def add(self, listener: Activity) -> None:
        self._all.append(listener)

    def requested(self) -> None:
        for listener in self._all:
            listener.requested()

    def shown(self, showing: bool) -> None:
        for listener in self._all:
            listener.shown(showing)

    def answered(self) -> None:
        for listener in self._all:
            listener.answered()

    def close(self) -> None:
        for listener in self._all:
            listener.close()
