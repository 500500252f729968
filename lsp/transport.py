"""The transports: one client connection over stdio or loopback TCP, bytes through our Framer to TabdProtocol.

Why our own (see lsp/protocol.py): pygls' reader only knows the exact header
line `Content-Length: N\\r\\n`. On stdio the loop reads stdin itself (a reader
thread where stdin cannot be polled) and pushes bytes straight into the framer; a pause in the input (STALL_S) makes the framer
try what it holds as a whole message. SIGTERM/SIGINT/SIGHUP stop the loop so
the caller can flush its files.
"""
from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
from typing import TYPE_CHECKING, Any, Awaitable, BinaryIO, Callable

from pygls.io_ import StdoutWriter

from tabd.lsp.protocol import STALL_S, Frame, Framer, TabdProtocol

if TYPE_CHECKING:  # never run: the server imports this module
    from tabd.lsp.server import TabdServer

logger = logging.getLogger(__name__)


class Connection:
    """One client connection: bytes in through a Framer, messages to the protocol, a stop with an exit code."""

    def __init__(self, protocol: TabdProtocol, stopped: asyncio.Future[int]) -> None:
        self.protocol = protocol
        self.framer = Framer()
        self.stopped = stopped  # its result is the exit code
        self._stall_timer: asyncio.TimerHandle | None = None

    def stop(self, code: int) -> None:
        if not self.stopped.done():
            self.stopped.set_result(code)

    def feed(self, data: bytes) -> None:
        self._handle_all(self.framer.feed(data))

    def stall(self) -> None:
        self._handle_all(self.framer.stalled())

    def _handle_all(self, frames: list[Frame]) -> None:
        """The messages of one read; what they answer is written together at the end (lsp/outbox.py)."""
        if len(frames) < 2:
            for frame in frames:
                self._handle(frame)
            return
        self.protocol.outbox.hold()
        try:
            first = self.protocol.first
            if first is not None and not self.stopped.done():
                try:
                    frames = first(frames)
                except (BrokenPipeError, ConnectionError):
                    self._gone()
                    return
                except Exception:  # in what it reads of the frames, before it handles one: they go as they came
                    logger.exception("error reading a read's frames")
            for frame in frames:
                self._handle(frame)
        finally:
            try:
                self.protocol.outbox.release()
            except (BrokenPipeError, ConnectionError):
                self._gone()

    def _gone(self) -> None:
        logger.warning("the client went away")
        self.stop(self.protocol.exit_code if self.protocol.exit_code is not None else (0 if self.protocol._shutdown else 1))

    def _handle(self, frame: Frame) -> None:
        if self.stopped.done():
            return
        try:
            self.protocol.handle_frame(frame)
        except (BrokenPipeError, ConnectionError):
            self._gone()

    async def pump(self, read: Callable[[], Awaitable[bytes]]) -> None:
        """Feed what `read()` returns (awaitable bytes; b'' at the end) until the end or a stop."""
        while not self.stopped.done():
            chunk_task = asyncio.ensure_future(read())
            waiting: set[asyncio.Future[Any]] = {chunk_task, self.stopped}  # bytes and the exit code
            while True:
                timeout = STALL_S if self.framer.pending() else None
                done, _ = await asyncio.wait(waiting, timeout=timeout,
                                             return_when=asyncio.FIRST_COMPLETED)
                if self.stopped in done:
                    chunk_task.cancel()
                    return
                if chunk_task in done:
                    break
                self.stall()
            chunk = chunk_task.result()
            if not chunk:
                self.stall()
                logger.info("the client closed the connection")
                self.stop(0 if self.protocol._shutdown else 1)
                return
            self.feed(chunk)

    def push(self, chunk: bytes) -> None:
        """Bytes from the stdin thread, run on the loop: fed at once, with no task or wait per chunk (a request
        answered from the cache then takes three loop turns, not eight); a partial frame left waiting is handled
        as stalled after STALL_S, b'' is the end, as in pump()."""
        if self.stopped.done():
            return
        if self._stall_timer is not None:
            self._stall_timer.cancel()
            self._stall_timer = None
        if not chunk:
            self.stall()
            logger.info("the client closed the connection")
            self.stop(0 if self.protocol._shutdown else 1)
            return
        self.feed(chunk)
        self._arm_stall()

    def _arm_stall(self) -> None:
        if self.framer.pending() and not self.stopped.done():
            self._stall_timer = asyncio.get_running_loop().call_later(STALL_S, self._stalled)

    def _stalled(self) -> None:
        self._stall_timer = None
        if not self.stopped.done():
            self.stall()
            self._arm_stall()


def _stdin_reader(fd: int, loop: asyncio.AbstractEventLoop, push: Callable[[bytes], None]) -> None:
    """A daemon thread: blocking reads of stdin into the loop (a blocked read must never keep the process alive)."""
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except OSError:
            chunk = b""
        try:
            loop.call_soon_threadsafe(push, chunk)
        except RuntimeError:  # the loop is closed: we are exiting
            return
        if not chunk:
            return


def _read_on_loop(fd: int, loop: asyncio.AbstractEventLoop, push: Callable[[bytes], None]) -> bool:
    """Read stdin on the loop itself where it can be polled (a pipe, a terminal: what editors give us); False
    where it cannot (a regular file). Measured, this takes a thread wake-up, a GIL hand-over and the loop's
    self-pipe out of every message's path (the after-accept answer at the client, README "Speculation")."""

    def readable() -> None:
        try:
            chunk = os.read(fd, 1 << 16)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            loop.remove_reader(fd)
        push(chunk)

    try:
        loop.add_reader(fd, readable)
    except (OSError, ValueError, NotImplementedError):  # epoll refuses regular files (EPERM)
        return False
    return True


def install_stop_signals(loop: asyncio.AbstractEventLoop, stop: Callable[[int], None]) -> None:
    """SIGTERM, SIGINT and SIGHUP stop serving through the loop, so files close outside any lock."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        try:
            loop.add_signal_handler(sig, stop, 0 if sig == signal.SIGTERM else 128 + sig)
        except (NotImplementedError, RuntimeError, ValueError):
            pass


def serve_stdio(server: TabdServer, stdin_fd: int | None = None, stdout: BinaryIO | None = None,
                on_start: Callable[[Connection], None] | None = None) -> int:
    """Serve LSP on stdin/stdout until exit, EOF, a stop signal or a stop from `on_start`'s watchers; the exit code."""
    protocol: TabdProtocol = server.protocol
    if stdout is None:
        # LSP owns the real stdout; fd 1 becomes stderr so a stray print (a library's warning) cannot corrupt it
        stdout = os.fdopen(os.dup(1), "wb")
        os.dup2(2, 1)
    protocol.set_writer(StdoutWriter(stdout))
    fd = 0 if stdin_fd is None else stdin_fd
    protocol.input_fd, protocol.output_fd = fd, _fileno(stdout)  # a log must never be one of them (lsp/server.py)

    async def main() -> int:
        loop = asyncio.get_running_loop()
        conn = Connection(protocol, loop.create_future())
        protocol.on_exit = conn.stop
        install_stop_signals(loop, conn.stop)
        if on_start is not None:
            on_start(conn)
        if not conn.stopped.done() and not _read_on_loop(fd, loop, conn.push):
            threading.Thread(target=_stdin_reader, args=(fd, loop, conn.push), name="tabd-stdin", daemon=True).start()
        return await conn.stopped

    return asyncio.run(main())


def _fileno(stream: BinaryIO) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):
        return None


def serve_tcp(server: TabdServer, host: str, port: int, on_start: Callable[[Connection], None] | None = None) -> int:
    """Serve LSP to one TCP client on host:port; the exit code once it exits or disconnects."""
    protocol: TabdProtocol = server.protocol

    async def main() -> int:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[int] = loop.create_future()

        def finish(code: int) -> None:
            if not done.done():
                done.set_result(code)

        install_stop_signals(loop, finish)
        busy = False

        async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal busy
            if busy:  # one editor per daemon
                writer.close()
                return
            busy = True
            protocol.set_writer(writer)
            conn = Connection(protocol, loop.create_future())
            protocol.on_exit = conn.stop
            conn.stopped.add_done_callback(lambda f: finish(f.result()))
            if on_start is not None:
                on_start(conn)
            await conn.pump(lambda: reader.read(1 << 16))
            writer.close()

        listener = await asyncio.start_server(client, host, port)
        logger.info("serving on %s", ", ".join(str(s.getsockname()) for s in listener.sockets))
        async with listener:
            code = await done
        return code

    return asyncio.run(main())
