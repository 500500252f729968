"""A thread count for the model that adapts to load (torch's, and the native step's).

Two threads on a 2-core machine that is busy with something else spin and
wait on each other; one thread was faster there (13.6 vs 22.8 ms per decode
step, and a 59-token prefill 0.22-0.35 s against 2.1-3.5 s under torch).
So when other processes keep the cores busy, use fewer threads.
What the others use is read from /proc/stat (the machine's busy time) less
this process's own CPU time, over the last few seconds. The load average it
replaced counted our own threads as busy even while they sat idle, and it lags
a process that has just started: at a load of 2.6 made by others it kept two
threads. Where /proc/stat is not this machine's CPUs (another OS, a container
that shows the host's), the load average less our own count remains the guess.
No torch import here: the torch-free runner reads `count`; torch, once an engine
that runs it is built (`use_torch`), is kept at the same number.
"""
from __future__ import annotations

import os
import time
from typing import Callable

# (the machine's busy CPU seconds, this process's CPU seconds), or None where that cannot be read
Reading = Callable[[], "tuple[float, float] | None"]


def cpu_seconds() -> tuple[float, float] | None:
    """The busy CPU seconds of the whole machine (every core summed) and of this process, from /proc/stat and
    os.times(); None off Linux or where /proc/stat lists other CPUs than this process may run on."""
    try:
        with open("/proc/stat") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    if sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit()) != len(os.sched_getaffinity(0)):
        return None
    ticks = [int(x) for x in lines[0].split()[1:9]]  # user nice system idle iowait irq softirq steal
    busy = sum(ticks) - ticks[3] - ticks[4]
    own = os.times()
    return busy / os.sysconf("SC_CLK_TCK"), own.user + own.system


class AdaptiveThreads:
    def __init__(self, fixed: int | None = None, every_s: float = 2.0, reading: Reading = cpu_seconds,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.fixed = fixed
        self.cores = max(1, (os.sched_getaffinity(0) and len(os.sched_getaffinity(0))) or os.cpu_count() or 1)
        self.every_s = every_s
        self._reading, self._clock = reading, clock
        self._last: tuple[float, float, float] | None = None  # (when, machine busy s, own s) at the last check
        self._checked = 0.0
        self.count = fixed or self.cores  # torch's own default is one thread per core
        self._torch = None
        if not fixed:
            self.others()  # the first reading: what the others use is known from the first check on

    def use_torch(self) -> None:
        """An engine that runs torch ops is built: keep torch's thread count at ours from now on."""
        import torch

        self._torch = torch
        self._sync_torch()

    def _sync_torch(self) -> None:
        torch = self._torch
        if torch is not None and torch.get_num_threads() != self.count:
            torch.set_num_threads(self.count)

    def wanted(self, others: float) -> int:
        """Threads for the cores the other processes leave: `others` is how many cores' worth they kept busy."""
        return max(1, min(self.cores, self.cores - round(others)))

    def others(self) -> float | None:
        """The cores' worth other processes used since the last check (None at the first check, or unreadable)."""
        now, reading = self._clock(), self._reading()
        if reading is None:
            return None
        last, self._last = self._last, (now, *reading)
        if last is None or now <= last[0]:
            return None
        return max(0.0, (reading[0] - last[1]) - (reading[1] - last[2])) / (now - last[0])

    def adjust(self) -> int:
        if not self.fixed:
            now = self._clock()
            if now - self._checked >= self.every_s:
                self._checked = now
                others = self.others()
                if others is None and self._last is None:  # no /proc/stat: our own threads counted out of the load
                    others = max(0.0, os.getloadavg()[0] - self.count)
                if others is not None:
                    self.count = self.wanted(others)
        self._sync_torch()
        return self.count

    def __call__(self) -> int:
        """The count now (what a native call is given)."""
        return self.count
