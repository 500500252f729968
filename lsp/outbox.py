"""What the server writes to its client, in order, with as few writes as the answers allow.

Every write to the client's pipe or socket wakes the client, and on a loaded
machine a wake-up is where a process can lose its core for a whole time slice:
in replay's after-accept round trip on 2 busy cores, a write that woke the
client for tabd.accept's answer held the server off its core for 2.8 ms before
the inline completion after it could be answered (README, "Speculation that
follows what you accept"). A Tab sends three messages in a row (the edit,
tabd.accept, the next inline completion), so:

- while one read's messages are handled (hold/release), what they answer is
  queued and written in one write at the end;
- an answer nobody waits on (tabd.accept's, tabd.dismiss's) waits up to
  LAZY_S for the next write and goes out with it, or alone after that;
- an inline completion answered from memory goes out at once (now()),
  with whatever is queued before it.
"""
from __future__ import annotations

import asyncio
from typing import Callable

LAZY_S = 0.005  # a Tab's next request follows its tabd.accept within a fraction of this; a lone accept waits this long


class Outbox:
    def __init__(self, write: Callable[[bytes], None]) -> None:
        self._write = write
        self._queue: list[bytes] = []
        self._urgent = False  # the queue holds a frame that must not wait for LAZY_S
        self._holding = False
        self._timer: asyncio.TimerHandle | None = None

    def put(self, frame: bytes, lazy: bool = False) -> None:
        """Queue a frame; written at once unless a read is being handled (hold) or it is `lazy`."""
        self._queue.append(frame)
        if not lazy:
            self._urgent = True
            if not self._holding:
                self.flush()
        elif not self._holding:  # held: the read's end decides (a Tab's accept goes with its completion's answer)
            self._wait_lazy()

    def hold(self) -> None:
        self._holding = True

    def release(self) -> None:
        """The read is handled: write what must go now (and whatever waits before it), or let what nobody waits on
        wait LAZY_S for the next write."""
        self._holding = False
        if self._urgent:
            self.flush()
        elif self._queue:
            self._wait_lazy()

    def _wait_lazy(self) -> None:
        if self._timer is not None or self._urgent:
            return
        try:
            self._timer = asyncio.get_running_loop().call_later(LAZY_S, self.flush)
        except RuntimeError:  # no loop (a plain call): no waiting
            self.flush()

    def flush(self) -> None:
        """Write everything queued, in order, in one write."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        frames, self._queue, self._urgent = self._queue, [], False
        if frames:
            self._write(frames[0] if len(frames) == 1 else b"".join(frames))
