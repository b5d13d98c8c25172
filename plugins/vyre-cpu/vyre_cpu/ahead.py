"""A sequence's kernels compiled side by side before its first run. numba compiles under
one process-wide lock (two threads took 0.76-1.48x the time of compiling in turn), so
the kernels not yet compiled are shared out among forked children, this process
compiling the first share itself: each child fills the disk cache, where the worker
finds its kernels when their steps first run (milliseconds each). It pays only on
idle cores (a child loads the runtime's helpers again, and competes with whatever else
runs: BENCHMARKS.md, issue 39 item 4), so there is one child per core the load average
leaves idle, up to the worker's thread count (``threads.configured``), and none on a
busy machine. Nothing depends on a child: one that fails, crashes or hangs costs its
time, and a kernel it did not leave on disk is compiled in the worker as without it (a
hung one is stopped after ``WITHIN`` seconds)."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from collections.abc import Callable, Iterable
from typing import NoReturn

from vyre_core.ir import Program
from vyre_cpu import compiler

#: Seconds the children of one sequence may take together before the rest are stopped
WITHIN = 300.0

Launch = tuple[Program, tuple[int, int, int]]


def shares(launches: Iterable[Launch], on_hand: Callable[[Program], bool],
           thread_count: int) -> list[list[Launch]]:
    """The kernels to compile side by side (each program once, with the grid of its first
    launch; none ``on_hand`` says is compiled already), dealt in turn into at most
    ``thread_count`` shares; none where it would not pay: fewer than two kernels to
    compile, or one thread."""
    first: dict[str, Launch] = {}
    for program, grid in launches:
        first.setdefault(program.fingerprint(), (program, grid))
    todo = [launch for launch in first.values() if not on_hand(launch[0])]
    count = min(thread_count, len(todo))
    if count < 2:
        return []
    return [todo[n::count] for n in range(count)]


def side_by_side(thread_count: int, load: float) -> int:
    """How many processes may compile at once: this one, and one more per core idle by
    the one-minute ``load`` average (this process's own work counted in it), at most
    ``thread_count`` in all."""
    return min(thread_count, 1 + int(max(0.0, thread_count - load)))


def compile_ahead(launches: Iterable[Launch], thread_count: int,
                  load: float | None = None) -> int:
    """Compile the kernels of ``launches`` (each program with the grid it runs at)
    that this process has neither in memory nor in the disk cache, side by side in
    forked children where cores are idle (``load``: the one-minute load average; None:
    the machine's now); returns how many children ran."""
    groups = shares(launches, compiler.on_hand, side_by_side(
        thread_count, os.getloadavg()[0] if load is None else load))
    if not groups:
        return 0
    children = []
    for group in groups[1:]:
        pid = compiler.fork()
        if pid == 0:
            _child(group, thread_count)
        children.append(pid)
    for program, grid in groups[0]:
        with contextlib.suppress(Exception):  # (compiled again, and refused, at its step)
            compiler.compiled(program, grid, thread_count)
    _reap(children, time.monotonic() + WITHIN)
    return len(children)


def _child(group: list[Launch], thread_count: int) -> NoReturn:
    code = 1
    try:
        for program, grid in group:
            with contextlib.suppress(Exception):  # (the worker says why, at its step)
                compiler.compiled(program, grid, thread_count)
        code = 0
    finally:
        os._exit(code)  # (nothing of the worker's: no exit handlers, no sockets closed)


def _reap(children: list[int], deadline: float) -> None:
    """Wait for ``children`` until ``deadline``, then stop the rest."""
    for pid in children:
        with contextlib.suppress(ChildProcessError, ProcessLookupError):
            fd = os.pidfd_open(pid)
            try:
                if not select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
                    os.kill(pid, signal.SIGKILL)
            finally:
                os.close(fd)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
