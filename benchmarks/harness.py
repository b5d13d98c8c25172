"""Timing and reporting shared by every benchmark: each figure is measured next to a
baseline in the same run, and reported as a ratio, because these machines are noisy.

``vyre bench --quick`` sets quick mode: every repeat count shrinks (``reps``), and so do
the largest inputs (``size``: the array suites checked 16 Mi elements against the
interpreted reference, minutes of it), so the whole set runs in a few minutes with rough
figures; each row's name says the size it ran."""

from __future__ import annotations

import contextlib
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import TypeVar

N = TypeVar("N", int, float)
_quick = False


def set_quick(quick: bool) -> None:
    """Switch quick mode on or off for the benchmarks run after this call."""
    global _quick
    _quick = quick


def quick() -> bool:
    """Whether quick mode is on."""
    return _quick


def reps(full: N, quick: N) -> N:
    """A repeat count (or a duration): ``full`` normally, ``quick`` in quick mode."""
    return quick if _quick else full


def size(full: int) -> int:
    """An input's element count: ``full`` normally, a sixteenth of it in quick mode."""
    return reps(full, max(1, full >> 4))


def elements(n: int) -> str:
    """``n`` elements as a row names them: 16 Mi, 1 Mi, 64 Ki, 1000."""
    for shift, unit in ((20, "Mi"), (10, "Ki")):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return str(n)


@dataclass(frozen=True)
class Result:
    name: str
    value: float
    unit: str
    baseline: str
    baseline_value: float

    @property
    def ratio(self) -> float:
        return self.value / self.baseline_value if self.baseline_value else float("inf")

    def to_dict(self) -> dict:
        return {**asdict(self), "ratio": self.ratio}


class Unavailable(Exception):
    """Raised by a benchmark that cannot run here, saying why (a local Ray cluster that did
    not start on a loaded machine): ``vyre bench`` shows it skipped, with the reason, and
    the run goes on; any other exception is a benchmark that failed."""


def threaded_rate(call: Callable[[], object], threads: int, seconds: float) -> float:
    """Calls per second of ``call`` made back to back from ``threads`` threads for about
    ``seconds``: the clock starts once every thread is ready, each makes at least one call,
    and the time runs until the last one finishes (threads that start late on a loaded
    machine cannot leave the count at zero). An exception in a thread is raised here."""
    count = [0] * threads
    errors: list[BaseException] = []
    ready = threading.Barrier(threads + 1)
    stop = 0.0

    def client(index: int) -> None:
        ready.wait()
        try:
            while True:
                call()
                count[index] += 1
                if time.perf_counter() >= stop or errors:
                    return
        except BaseException as exc:  # (handed to the caller below)
            errors.append(exc)

    clients = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(threads)]
    for t in clients:
        t.start()
    start = time.perf_counter()
    stop = start + seconds
    ready.wait()  # (stop is set before any thread passes the barrier)
    for t in clients:
        t.join()
    if errors:
        raise errors[0]
    return sum(count) / (time.perf_counter() - start)


def samples(fn: Callable[[], object], n: int, warmup: int) -> list[float]:
    """Wall time of each of ``n`` calls of ``fn`` (seconds), after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of ``values``, nearest rank."""
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered)) - 1))
    return ordered[rank]


def seconds_per_call(fn: Callable[[], object], repeat: int = 7, number: int = 1,
                     warmup: bool = True) -> float:
    """Median wall time of one call over ``repeat`` rounds of ``number`` calls, after a
    warm-up (``warmup`` false: the caller made one)."""
    if warmup:
        fn()
    rounds = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        rounds.append((time.perf_counter() - start) / number)
    return statistics.median(rounds)


def compare(name: str, fn: Callable[[], object], baseline: str,
            baseline_fn: Callable[[], object], repeat: int = 7, number: int = 1,
            unit: str = "ms", baseline_warm: bool = False) -> Result:
    """Time ``fn`` and ``baseline_fn`` one after the other in one run and report both
    (quick mode: 2 rounds of a 20th of the calls). ``baseline_warm``: the caller already
    called ``baseline_fn`` once (a slow interpreter: no second warm-up)."""
    repeat, number = reps(repeat, min(repeat, 2)), reps(number, max(1, number // 20))
    scale = {"ms": 1e3, "us": 1e6, "s": 1.0}[unit]
    value = seconds_per_call(fn, repeat, number) * scale
    base = seconds_per_call(baseline_fn, repeat, number, warmup=not baseline_warm) * scale
    return Result(name, value, unit, baseline, base)


_ECHO = """
import os, sys
fd = int(sys.argv[1])
while data := os.read(fd, 65536):
    os.write(fd, data)
"""


@contextlib.contextmanager
def echo_process() -> Iterator[socket.socket]:
    """Our end of a Unix socket pair whose other end a child process echoes, as a worker's
    lane is (the baseline of a worker round trip); the child leaves once our end closes."""
    mine, theirs = socket.socketpair()
    child = subprocess.Popen([sys.executable, "-c", _ECHO, str(theirs.fileno())],
                             pass_fds=(theirs.fileno(),))
    theirs.close()
    try:
        yield mine
    finally:
        mine.close()
        child.wait()
