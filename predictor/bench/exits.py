"""How a benchmark worker process ended, in words a user can act on: the signal that killed it and what that means
here, instead of "the worker did not start". An illegal instruction is the usual one: a llama.cpp built for another
CPU (the machines change CPU between sessions, and a build with AVX-512 forced on dies on a CPU without it)."""
from __future__ import annotations

import signal
import subprocess

REBUILD = "rebuild it for this CPU with `make bench-deps` (it builds with GGML_NATIVE=ON for the CPU at hand)"

# signal -> what it means for a worker, and the fix where there is one
MEANINGS = {
    signal.SIGILL: "illegal instruction: this {engine} was built for a CPU with instructions this one lacks "
                   "(e.g. AVX-512); {fix}",
    signal.SIGKILL: "killed (SIGKILL), most often by the kernel's out-of-memory killer: a smaller --shape or fewer "
                    "weight formats and GGUF types at once need less memory",
    signal.SIGSEGV: "segmentation fault in {engine}'s native code",
    signal.SIGBUS: "bus error in {engine}'s native code (a memory-mapped model file changed or shrank under it?)",
    signal.SIGABRT: "aborted: {engine} stopped itself (its message is above)",
}


def signal_name(returncode: int) -> str:
    """SIGILL for -4 (subprocess's code for a death by signal 4), or the number where the signal has no name."""
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def engine_of(worker: str) -> str:
    return "llama.cpp" if worker.startswith("llamacpp") else "tabd engine"


def how_it_ended(worker: str, returncode: int | None) -> str:
    """One line: how the worker named `worker` (tabd, llamacpp, llamacpp-fa:q8_0, ...) ended, with the fix."""
    if returncode is None:
        return f"the {worker} worker stopped answering (it is still running)"
    if returncode >= 0:
        return f"the {worker} worker exited with status {returncode} before answering (its message is above)"
    engine = engine_of(worker)
    fix = REBUILD if engine == "llama.cpp" else "its native kernels are compiled for the CPU they run on; remove " \
                                                 "~/.cache/tabd/native to compile them again here"
    try:
        meaning = MEANINGS[signal.Signals(-returncode)].format(engine=engine, fix=fix)
    except (ValueError, KeyError):
        meaning = "killed by a signal"
    return f"the {worker} worker died of {signal_name(returncode)}: {meaning}"


def ended(worker: str, proc: subprocess.Popen, wait_s: float = 10.0) -> str:
    """how_it_ended() for a worker whose output stopped: its exit status once it has gone (waiting up to wait_s)."""
    try:
        proc.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        pass
    return how_it_ended(worker, proc.returncode)
