"""A sequence's kernels compiled side by side before its first run. numba compiles under
one process-wide lock (two threads took 0.76-1.48x the time of compiling in turn), so
the kernels not yet compiled are shared out among forked children, this process
compiling the first share itself: each child fills the disk cache, where the worker
finds its kernels when their steps first run (milliseconds each). It pays only on
idle cores (a child loads the runtime's helpers again, and competes with whatever else
runs: BENCHMARKS.md, issue 39 item 4), so there is one child per core the load average
leaves idle, up to the worker's thread count (``threads.configured``), and none on a
busy machine. Nothing depends on a child: one that fails, crashes or hangs costs its
time, and a kernel it did not leave on disk is compiled in the worker as without it. The
worker waits for the children no longer than twice what its own share took (at least
``WAIT_FLOOR`` seconds): a child still at work then (a hung one, or one starved by a busy
machine) is stopped, and the worker, which would have compiled those kernels in that time
itself, compiles them at their steps."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import time
from collections.abc import Callable, Iterable
from typing import NoReturn

from vyre_core.ir import Program
from vyre_core.sequence import Sequence
from vyre_cpu import compiler

#: The least time (seconds) the worker waits for its children, however quick its own share
WAIT_FLOOR = 5.0
#: Sequences looked at (by fingerprint): their later runs find their kernels in memory,
#: or compile one evicted since at its step. At most ``SEEN``, then forgotten at once.
_seen: set[str] = set()
SEEN = 256

Launch = tuple[Program, tuple[int, int, int]]


def for_sequence(sequence: Sequence, thread_count: int) -> int:
    """``compile_ahead`` for ``sequence``'s steps, at its first run in this process only
    (a long sequence's later runs pay nothing for it)."""
    key = sequence.fingerprint()
    if key in _seen:
        return 0
    if len(_seen) >= SEEN:
        _seen.clear()
    _seen.add(key)
    return compile_ahead(((step.program, step.grid) for _, step in sequence.steps()),
                         thread_count)


def pending(launches: Iterable[Launch], on_hand: Callable[[Program], bool]) -> list[Launch]:
    """Each program of ``launches`` once, with the grid of its first launch, but those
    ``on_hand`` says are compiled already."""
    first: dict[str, Launch] = {}
    for program, grid in launches:
        first.setdefault(program.fingerprint(), (program, grid))
    return [launch for launch in first.values() if not on_hand(launch[0])]


def shares(todo: list[Launch], processes: int) -> list[list[Launch]]:
    """``todo`` dealt in turn into at most ``processes`` shares; none where compiling
    side by side would not pay: fewer than two kernels, or one process."""
    count = min(processes, len(todo))
    return [todo[n::count] for n in range(count)] if count > 1 else []


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
    the machine's now); returns how many children ran. Not in a Ray actor, whose
    process has threads (gRPC's) that do not survive a fork."""
    todo = pending(launches, compiler.on_hand)
    if len(todo) < 2 or "ray" in sys.modules:
        return 0
    groups = shares(todo, side_by_side(thread_count,
                                       os.getloadavg()[0] if load is None else load))
    if not groups:
        return 0
    children = []
    for group in groups[1:]:
        try:
            pid = compiler.fork()
        except OSError:  # (no process to be had: those kernels compile at their steps)
            break
        if pid == 0:
            _child(group, thread_count)
        children.append(pid)
    began = time.monotonic()
    for program, grid in groups[0]:
        with contextlib.suppress(Exception):  # (compiled again, and refused, at its step)
            compiler.compiled(program, grid, thread_count)
    now = time.monotonic()
    _reap(children, now + patience(now - began))
    return len(children)


def patience(own: float) -> float:
    """How long (seconds) the worker waits for its children once its own share, which took
    ``own`` seconds, is compiled: about what it would take to compile theirs itself."""
    return max(WAIT_FLOOR, 2 * own)


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
        try:
            fd = os.pidfd_open(pid)
        except OSError:  # (a kernel without pidfds: waited for without a deadline)
            fd = None
        if fd is not None:
            try:
                if not select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
            finally:
                os.close(fd)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
