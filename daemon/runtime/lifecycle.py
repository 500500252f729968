"""How the daemon ends: when its editor dies, and with nothing left running.

LSP's initialize carries the editor's processId; "if the parent process is not
alive then the server should exit". A killed editor does not always close our
stdin (a wrapper or a grandchild may hold the pipe), so the pid is polled.
"""
from __future__ import annotations

import asyncio
import logging
import os
from typing import Callable

logger = logging.getLogger(__name__)

PARENT_POLL_S = 1.0


def process_alive(pid: int) -> bool:
    """Whether pid names a live process (a zombie, dead but not yet reaped, counts as dead)."""
    if pid <= 0:
        return True  # no usable pid: nothing to watch
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    except OSError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
        return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] not in (b"Z", b"X")
    except OSError:
        return True  # no /proc: trust kill()


async def watch_parent(pid: int, on_dead: Callable[[], None], interval: float = PARENT_POLL_S) -> None:
    """Call on_dead once pid is gone; poll every `interval` seconds."""
    while process_alive(pid):
        await asyncio.sleep(interval)
    logger.warning("the editor (pid %d) is gone; exiting", pid)
    on_dead()


def start_parent_watch(pid: int | None, on_dead: Callable[[], None], interval: float = PARENT_POLL_S) -> asyncio.Task[None] | None:
    """A task on the running loop that watches the editor's pid; None when there is no pid to watch."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0 or pid == os.getpid():
        return None
    return asyncio.get_running_loop().create_task(watch_parent(pid, on_dead, interval))
