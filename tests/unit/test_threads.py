"""The model's thread count follows what other processes leave of the cores (predictor/loading/threads.py): on a
2-core machine two threads beside a busy process were 10-15x slower than one under torch."""
from __future__ import annotations

from tabd.predictor.loading.threads import AdaptiveThreads


class Machine:
    """A clock and /proc/stat's busy seconds: others and we use CPU at the rates set."""

    def __init__(self) -> None:
        self.now, self.busy, self.own = 100.0, 5000.0, 10.0
        self.others_rate, self.own_rate = 0.0, 0.0

    def run(self, seconds: float) -> None:
        self.now += seconds
        self.busy += (self.others_rate + self.own_rate) * seconds
        self.own += self.own_rate * seconds

    def reading(self) -> tuple[float, float]:
        return self.busy, self.own


def threads_on(machine: Machine, cores: int = 2) -> AdaptiveThreads:
    t = AdaptiveThreads(reading=machine.reading, clock=lambda: machine.now)
    t.cores = t.count = cores
    return t


def test_others_busy_on_both_cores_leave_the_model_one_thread_even_while_it_sits_idle():
    machine = Machine()
    threads = threads_on(machine)
    machine.others_rate = 1.9  # a test suite and a bench: about two cores' worth; the daemon idle (load 2.6 said 2)
    machine.run(2.5)
    assert threads.adjust() == 1


def test_the_models_own_threads_are_not_counted_as_others():
    machine = Machine()
    threads = threads_on(machine)
    machine.own_rate, machine.others_rate = 1.9, 0.1  # our own prefill on both cores, the machine otherwise quiet
    machine.run(2.5)
    assert threads.adjust() == 2


def test_the_count_comes_back_when_the_others_stop_and_a_bigger_machine_gives_what_is_left():
    machine = Machine()
    threads = threads_on(machine, cores=8)
    machine.others_rate = 3.0
    machine.run(2.5)
    assert threads.adjust() == 5
    machine.others_rate = 0.2
    machine.run(2.5)
    assert threads.adjust() == 8


def test_a_fixed_count_is_kept_whatever_the_load():
    machine = Machine()
    threads = AdaptiveThreads(fixed=2, reading=machine.reading, clock=lambda: machine.now)
    machine.others_rate = 2.0
    machine.run(2.5)
    assert threads.adjust() == 2


def test_this_machines_reading_is_the_machines_and_this_processes_cpu_time():
    from tabd.predictor.loading.threads import cpu_seconds

    first = cpu_seconds()
    if first is None:  # /proc/stat lists other CPUs than ours (a container shown the host's): the load average then
        import os

        with open("/proc/stat") as f:
            listed = sum(1 for line in f if line.startswith("cpu") and line[3:4].isdigit())
        assert listed != len(os.sched_getaffinity(0))
        return
    sum(i * i for i in range(2_000_000))  # some CPU of our own
    second = cpu_seconds()
    assert second is not None and second[1] > first[1] and second[0] >= first[0]
