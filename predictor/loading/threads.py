"""A thread count for the model that adapts to load (torch's, and the native step's).

Two threads on a 2-core machine that is busy with something else spin and
wait on each other; one thread was faster there (13.6 vs 22.8 ms per decode
step). So when the load average says the cores are taken, use one thread.
No torch import here: the torch-free runner reads `count`; torch, once an engine
that runs it is built (`use_torch`), is kept at the same number.
"""
from __future__ import annotations

import os
import time


class AdaptiveThreads:
    def __init__(self, fixed: int | None = None, every_s: float = 2.0) -> None:
        self.fixed = fixed
        self.cores = max(1, (os.sched_getaffinity(0) and len(os.sched_getaffinity(0))) or os.cpu_count() or 1)
        self.every_s = every_s
        self._checked = 0.0
        self.count = fixed or self.cores  # torch's own default is one thread per core
        self._torch = None

    def use_torch(self) -> None:
        """An engine that runs torch ops is built: keep torch's thread count at ours from now on."""
        import torch

        self._torch = torch
        self._sync_torch()

    def _sync_torch(self) -> None:
        torch = self._torch
        if torch is not None and torch.get_num_threads() != self.count:
            torch.set_num_threads(self.count)

    def wanted(self, load: float) -> int:
        # our own threads are part of the load average: count them out
        others = max(0.0, load - self.count)
        return 1 if others >= self.cores - 0.5 else self.cores

    def adjust(self) -> int:
        if not self.fixed:
            now = time.monotonic()
            if now - self._checked >= self.every_s:
                self._checked = now
                self.count = self.wanted(os.getloadavg()[0])
        self._sync_torch()
        return self.count

    def __call__(self) -> int:
        """The count now (what a native call is given)."""
        return self.count
