"""torch's shared libraries loaded ahead of `import torch`, without holding the GIL, and the import held against exit.

`import torch` loads libtorch_cpu (hundreds of MB, its static initialisers
register every operator) while holding the GIL: measured here, one stretch of
about 370 ms in which no other thread of the process ran Python, so a cache hit
on the LSP thread during the hand-over's import waited that long. Loaded first
through libc's dlopen called by ctypes, which releases the GIL around foreign
calls, the same work runs while the other threads go on; `import torch` then
finds the library loaded (the dynamic linker loads a library once) and its
longest stretch is about 60 ms (README, issue 15's figures).

That load runs libtorch_cpu's static initialisers (they parse every operator's schema) on the hand-over's thread
while the process goes on, so the process must not exit meanwhile: exit() runs the C++ destructors of the statics
already built, under the initialisers still running, and the process aborted (`terminate called after throwing
an instance of 'torch::jit::ErrorReport' ... expected a valid token but found '.' here: multinomial.out`, or a
double free or a segfault): the first `tabd complete` on a loaded machine exited just as its hand-over began.
load_torch() holds a lock while it loads, and an exit hook waits for it and closes the way to later loads.
"""
from __future__ import annotations

import atexit
import ctypes
import importlib.util
import os
import sys
import threading

_loading = threading.Lock()
_exiting = False

# in dependency order; libtorch_python is not among them: its initialisers are the Python binding's own
LIBRARIES = ("libc10.so", "libtorch_cpu.so", "libtorch_cuda.so", "libtorch.so")


def library_dir() -> str | None:
    """torch/lib of the installed torch, found without importing it."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    return os.path.join(os.path.dirname(spec.origin), "lib")


def preload() -> list[str]:
    """Load torch's libraries that are there (Linux), GIL released; the names loaded. Does nothing once torch is
    imported, or where a library does not load: `import torch` then loads it itself, as before."""
    if "torch" in sys.modules or not sys.platform.startswith("linux"):
        return []
    where = library_dir()
    if where is None:
        return []
    try:
        dlopen = ctypes.CDLL(None).dlopen
    except (OSError, AttributeError):
        return []
    dlopen.restype, dlopen.argtypes = ctypes.c_void_p, [ctypes.c_char_p, ctypes.c_int]
    loaded = []
    for name in LIBRARIES:
        path = os.path.join(where, name)
        if os.path.exists(path) and dlopen(path.encode(), os.RTLD_NOW | os.RTLD_LOCAL):
            loaded.append(name)  # the handle is never closed: torch uses the library for the process's life
    return loaded


def load_torch() -> None:
    """preload(), then `import torch`, with the process's exit waiting until both are done; RuntimeError once the
    process is exiting (its statics are being destroyed: nothing may load into it then)."""
    with _loading:
        if _exiting:
            raise RuntimeError("the process is exiting: torch is not loaded now")
        preload()
        import torch  # noqa: F401  (the import is the work held)


@atexit.register
def _wait_for_loading() -> None:
    global _exiting
    with _loading:  # a load in progress finishes first (the wait releases the GIL the loading thread needs)
        _exiting = True

