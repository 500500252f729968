"""Which tabd modules a request passes through: a profiler on the calling thread (the event loop's, in the in-process
tests) that notes the module of every function called or resumed there, first call first.

Only `tabd.*` modules are kept (the tests' own code, pygls and the standard library are not the house), and only the
thread that starts the trace is watched: the model workers' threads are not, so a miss counts what the event loop
does for it, not the model's run. `sys.setprofile` sees coroutines resumed too (a resume is a call event), so a
request awaited across several turns of the loop is followed through each of them.
"""
from __future__ import annotations

import sys
from types import FrameType
from typing import Any


class ModuleTrace:
    """Start with start(), stop with stop() (either may run inside a traced call, e.g. in the writer that sends the
    reply); `modules` maps each tabd module seen to the first function of it that ran."""

    def __init__(self, prefix: str = "tabd.") -> None:
        self.prefix = prefix
        self.modules: dict[str, str] = {}
        self._previous: Any = None
        self.running = False

    def _profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            name = frame.f_globals.get("__name__", "")
            if name.startswith(self.prefix) and name not in self.modules:
                self.modules[name] = frame.f_code.co_name

    def start(self) -> "ModuleTrace":
        self._previous = sys.getprofile()
        self.running = True
        sys.setprofile(self._profile)
        return self

    def stop(self) -> "ModuleTrace":
        if self.running:
            sys.setprofile(self._previous)
            self.running = False
        return self

    def listing(self) -> str:
        """One module a line, with the first function of it that ran: for an assertion's message."""
        return "\n".join(f"  {name}  ({first})" for name, first in self.modules.items())
