"""The machine's CPU time as Linux counts it (/proc/stat): how busy a run's host was, and how much of it a hypervisor took.

A replay's slowest after-accept answers on a virtual machine are often the
host's, not the daemon's: "steal" is time a virtual CPU was ready to run and
the hypervisor ran something else. Reading it around a run tells the two apart.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

STAT = "/proc/stat"


@dataclass(frozen=True)
class CpuTicks:
    """Clock ticks summed over all CPUs: everything, not idle, and stolen."""
    total: int = 0
    busy: int = 0
    steal: int = 0

    def __sub__(self, earlier: "CpuTicks") -> "CpuTicks":
        return CpuTicks(self.total - earlier.total, self.busy - earlier.busy, self.steal - earlier.steal)

    def __add__(self, other: "CpuTicks") -> "CpuTicks":
        return CpuTicks(self.total + other.total, self.busy + other.busy, self.steal + other.steal)


def parse_cpu_line(line: str) -> CpuTicks | None:
    """The aggregate `cpu` line of /proc/stat; None for any other line or one that does not read."""
    parts = line.split()
    if len(parts) < 6 or parts[0] != "cpu":  # idle and iowait at least
        return None
    try:
        values = [int(v) for v in parts[1:9]]
    except ValueError:
        return None
    values += [0] * (8 - len(values))  # kernels before 2.6.11 have no steal column
    user, nice, system, idle, iowait, irq, softirq, steal = values
    total = user + nice + system + idle + iowait + irq + softirq + steal  # guest time is inside user already
    return CpuTicks(total, total - idle - iowait, steal)


def read_ticks(path: str = STAT) -> CpuTicks | None:
    """Now's ticks, or None where there is no /proc/stat (not Linux) or it cannot be read."""
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return parse_cpu_line(f.readline())
    except OSError:
        return None


def tick_seconds() -> float:
    try:
        return 1.0 / os.sysconf("SC_CLK_TCK")
    except (ValueError, OSError, AttributeError):
        return 0.01


def host_summary(ticks: CpuTicks) -> dict[str, float] | None:
    """Shares of all CPUs' time over a run: busy (anything but idle) and stolen; None when nothing was counted."""
    if ticks.total <= 0:
        return None
    return {
        "busy_share": round(ticks.busy / ticks.total, 4),
        "steal_share": round(ticks.steal / ticks.total, 4),
        "steal_s": round(ticks.steal * tick_seconds(), 2),
    }
