"""OS priority and names for the daemon's background threads (the model worker, the hand-over), so the LSP thread wins a core.

On a machine whose cores are taken, a cache hit that the LSP thread answers in
0.3 ms can wait several milliseconds for a core that its own model thread (or
torch's import, during the hand-over) holds: in replays at recorded speed the
after-accept requests over 5 ms had the server's LSP thread runnable but off its
core (README, issue 15's figures). Linux keeps a nice value per thread, and the
threads a thread creates inherit it (torch's and OpenMP's workers, created on the
model thread), so the background threads lower their own priority when they
start; the kernel then lets the LSP thread, and the editor beside it, run first.
Lowering one's own priority needs no privilege. Elsewhere (no per-thread nice)
this does nothing.
"""
from __future__ import annotations

import ctypes
import os
import sys
import threading

BACKGROUND_NICE = 10  # how many nice steps below the thread that starts it (weight 1024 -> 110: about 9x less CPU share)
_PR_SET_NAME = 15


def run_in_background(name: str, steps: int = BACKGROUND_NICE) -> int | None:
    """Lower the calling thread's priority by `steps` nice levels and give it `name` where the OS shows one
    (top -H, ps -L, py-spy); its nice value now, or None where threads have no nice value of their own."""
    _name_thread(name)
    if not sys.platform.startswith("linux") or steps <= 0:
        return None
    tid = threading.get_native_id()
    try:
        now = os.getpriority(os.PRIO_PROCESS, tid)  # on Linux PRIO_PROCESS with a thread id is that thread alone
        os.setpriority(os.PRIO_PROCESS, tid, min(19, now + steps))
        return os.getpriority(os.PRIO_PROCESS, tid)
    except OSError:  # not allowed (a sandbox): the thread runs at the daemon's priority, as before
        return None


def nice_of_thread(tid: int) -> int | None:
    """A thread's nice value (Linux), or None."""
    try:
        return os.getpriority(os.PRIO_PROCESS, tid)
    except OSError:
        return None


def _name_thread(name: str) -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)
    except (OSError, AttributeError):
        pass
