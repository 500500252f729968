"""Real engine processes a test starts on 127.0.0.1: `tabd serve-model` (killed, stopped, restarted at will)."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time


class ServeModel:
    """A `tabd serve-model` child on a fixed port; `back_at` is when (monotonic) its last start began listening."""

    def __init__(self, port: int, *extra: str) -> None:
        self.port, self.extra = port, list(extra)
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen | None = None
        self.back_at = 0.0

    def start(self, *extra: str, timeout: float = 300.0) -> ServeModel:
        proc = subprocess.Popen([sys.executable, "-m", "tabd.daemon", "serve-model", "--port", str(self.port),
                                 *self.extra, *extra], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        deadline = time.monotonic() + timeout
        assert proc.stderr is not None
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            if re.search(r"listening on http://", line):
                self.back_at = time.monotonic()
                threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep draining
                self.proc = proc
                return self
        proc.kill()
        raise RuntimeError(f"tabd serve-model did not start: {proc.stderr.read()}")

    def kill(self) -> None:
        """SIGKILL: the engine dies mid-session, as a crashed or OOM-killed server does."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(30)
            self.proc = None

    def pause(self) -> None:
        """SIGSTOP: the engine takes connections (the kernel's backlog) and answers nothing, as an overloaded one."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGCONT)
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None
