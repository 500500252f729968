"""A torch thread count that adapts to load.

Two threads on a 2-core machine that is busy with something else spin and
wait on each other; one thread was faster there (13.6 vs 22.8 ms per decode
step). So when the load average says the cores are taken, use one thread.
"""
from __future__ import annotations

import os
import time

import torch


class AdaptiveThreads:
    def __init__(self, fixed: int | None = None, every_s: float = 2.0) -> None:
        self.fixed = fixed
        self.cores = max(1, (os.sched_getaffinity(0) and len(os.sched_getaffinity(0))) or os.cpu_count() or 1)
        self.every_s = every_s
        self._checked = 0.0
        if fixed:
            torch.set_num_threads(fixed)

    def wanted(self, load: float) -> int:
        # our own threads are part of the load average: count them out
        others = max(0.0, load - torch.get_num_threads())
        return 1 if others >= self.cores - 0.5 else self.cores

    def adjust(self) -> int:
        if self.fixed:
            return self.fixed
        now = time.monotonic()
        if now - self._checked >= self.every_s:
            self._checked = now
            n = self.wanted(os.getloadavg()[0])
            if n != torch.get_num_threads():
                torch.set_num_threads(n)
        return torch.get_num_threads()
