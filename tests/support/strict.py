"""A `tabd serve` child whose output is read strictly: every byte must belong to a Content-Length frame.

RawServer's reader skips lines it does not know while looking for a header; this one keeps them, in `stray`, so a
test can say no byte came outside a frame (a log line written into the LSP stream would be one).
"""
from __future__ import annotations

import json
import os
import re

from support.rawserver import RawServer

HEADER = re.compile(rb"(Content-Length: (\d+)|Content-Type: [^\r\n]*)\r\n")


class StrictServer(RawServer):
    stray: bytes = b""

    def _read(self) -> None:
        out = self.proc.stdout
        buf = b""
        stray = bytearray()
        while True:
            length = None
            while True:  # one header block
                end = buf.find(b"\r\n")
                if end < 0:
                    chunk = out.read1(1 << 16) if hasattr(out, "read1") else os.read(out.fileno(), 1 << 16)
                    if not chunk:
                        with self.cond:
                            self.stray = bytes(stray + buf)
                            self.eof = True
                            self.cond.notify_all()
                        return
                    buf += chunk
                    continue
                line, buf = buf[: end + 2], buf[end + 2:]
                if line == b"\r\n" and length is not None:
                    break
                match = HEADER.fullmatch(line)
                if match is None:
                    stray += line
                    with self.cond:
                        self.stray = bytes(stray)
                    continue
                if match.group(2) is not None:
                    length = int(match.group(2))
            while len(buf) < length:
                chunk = out.read1(1 << 16) if hasattr(out, "read1") else os.read(out.fileno(), 1 << 16)
                if not chunk:
                    with self.cond:
                        self.stray = bytes(stray + buf)
                        self.eof = True
                        self.cond.notify_all()
                    return
                buf += chunk
            body, buf = buf[:length], buf[length:]
            with self.cond:
                try:
                    self.messages.append(json.loads(body))
                except ValueError:
                    stray += body
                    self.stray = bytes(stray)
                self.cond.notify_all()

    def rss_kb(self) -> int:
        """The server's resident memory now (VmRSS)."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    def own_fd_of(self, stream) -> int:
        """The file descriptor by which the server holds the other end of one of our pipes (not 0, 1 or 2)."""
        inode = os.fstat(stream.fileno()).st_ino
        for name in os.listdir(f"/proc/{self.proc.pid}/fd"):
            try:
                target = os.readlink(f"/proc/{self.proc.pid}/fd/{name}")
            except OSError:
                continue
            if target == f"pipe:[{inode}]" and int(name) > 2:
                return int(name)
        raise LookupError("the server holds no such pipe")
