"""A `tabd bench engines` worker that dies says how: the signal, what it means and the fix (a llama.cpp built for
another CPU dies of SIGILL; the bench once said only "the llamacpp worker did not start"). Real child processes,
killed by real signals, through the bench's own start and ask functions."""
from __future__ import annotations

import sys

import pytest

from tabd.predictor.bench.engines import _ask, _start

NO_CORE = "import os, resource, signal, sys; resource.setrlimit(resource.RLIMIT_CORE, (0, 0)); "


def worker(body: str) -> list[str]:
    return [sys.executable, "-c", NO_CORE + body]


def test_a_llamacpp_worker_killed_by_an_illegal_instruction_says_so_and_how_to_rebuild():
    with pytest.raises(RuntimeError) as err:
        _start("llamacpp", worker("os.kill(os.getpid(), signal.SIGILL)"), threads=1)
    message = str(err.value)
    assert "did not start" not in message
    assert "the llamacpp worker died of SIGILL: illegal instruction" in message
    assert "llama.cpp was built for a CPU with instructions this one lacks (e.g. AVX-512)" in message
    assert "make bench-deps" in message


def test_a_worker_that_dies_during_a_round_says_how():
    cmd = worker("print('ready llama.cpp', flush=True); sys.stdin.readline(); os.kill(os.getpid(), signal.SIGILL)")
    proc, label = _start("llamacpp-fa:q8_0", cmd, threads=1)
    assert label == "llama.cpp"
    with pytest.raises(RuntimeError, match=r"the llamacpp-fa:q8_0 worker died of SIGILL: illegal instruction.*"
                                           r"make bench-deps"):
        _ask("llamacpp-fa:q8_0", proc, "round")


def test_a_worker_killed_outright_points_at_memory():
    with pytest.raises(RuntimeError, match=r"the tabd worker died of SIGKILL: killed \(SIGKILL\), most often by the "
                                           r"kernel's out-of-memory killer"):
        _start("tabd", worker("os.kill(os.getpid(), signal.SIGKILL)"), threads=1)


def test_a_worker_that_exits_with_an_error_gives_its_status():
    with pytest.raises(RuntimeError, match=r"the tabd worker exited with status 3 before answering"):
        _start("tabd", worker("sys.exit(3)"), threads=1)
