"""How many threads a cpu worker computes with, and on which of numba's threading layers.

The count: ``PoolOptions(threads=N)`` (handed to the worker as ``VYRE_WORKER_THREADS``),
else ``VYRE_CPU_THREADS``, else the cores this process may run on
(``os.sched_getaffinity``: a container's or ``taskset``'s share, not the machine's);
at most numba's pool (``NUMBA_NUM_THREADS``, by default every core of the machine).

The layer: TBB where numba can load it, else numba's ``workqueue``; never OpenMP
unless ``NUMBA_THREADING_LAYER`` (or ``NUMBA_THREADING_LAYER_PRIORITY``) says so. Idle
threads of both sleep; OpenMP's (numba's choice after TBB by default, where ``libgomp``
is installed) spin between launches, against the worker's own thread and every other
process: on a busy machine a large launch took 20-46 ms on it against about 1 ms on
either of these (BENCHMARKS.md, issue 39). TBB was the steadiest; ``workqueue`` is the
one numba always has. A launch too small to gain from threads never enters any
(``parallel_worth``)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from vyre_core.contract.types import MAX_THREADS
from vyre_core.contract.types import THREADS_ENV as POOL_ENV
from vyre_core.errors import InvalidConfigError

ENV = "VYRE_CPU_THREADS"
#: numba's threading layers in the order this backend tries them
LAYERS = ("tbb", "workqueue", "omp")
#: A launch runs on threads only when its work is at least this many invocations (one
#: with a loop counts each invocation ``LOOP_WEIGHT`` times): below, one thread finishes
#: before the others would have woken (about 40 us each on a quiet machine, a scheduler
#: tick on a busy one). Measured in BENCHMARKS.md (issue 39).
PARALLEL_WORK = 1 << 20
LOOP_WEIGHT = 16
#: A launch with a loop that the count above keeps on one thread, but that one thread
#: took at least this much CPU time to run at this size, runs on threads from then on:
#: the count cannot see a loop's trip count (a sort's walks of 4096 elements an
#: invocation counted as 16). CPU time, so a run descheduled on a busy machine does not
#: look long; and 50 times a quiet parallel region's wake-up, so the gain is sure.
PARALLEL_SECONDS = 2e-3


def available_cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0))


def configured(environ: Mapping[str, str] = os.environ) -> int:
    """The thread count ``environ`` asks for (the pool's option first), else the cores
    this process may use. InvalidConfigError names a value that is not a whole number
    from 1 to ``MAX_THREADS``."""
    for name, fix in ((POOL_ENV, "PoolOptions(threads=N) for the cpu backend"),
                      (ENV, f"{ENV}=N")):
        raw = environ.get(name)
        if raw is None or raw == "":
            continue
        value = raw.strip()
        if not value.isdigit() or not 1 <= int(value) <= MAX_THREADS:
            raise InvalidConfigError(
                f"{name}={raw!r} is not a thread count for the cpu backend",
                f"Set {fix} with N a whole number from 1 to {MAX_THREADS} (the cores it "
                f"may use here: {available_cores()}), or unset it for that default.",
                variable=name, value=raw)
        return int(value)
    return available_cores()


def parallel_worth(workgroups: int, lanes: int, loops: bool, threads: int,
                   seconds_each: float = 0.0) -> bool:
    """Whether a launch of ``workgroups`` x ``lanes`` invocations (``loops``: its program
    has a loop; ``seconds_each``: the CPU time an invocation of it took on one thread,
    where measured) is worth the parallel region: more than one thread to run it on, more
    than one workgroup to share out, and enough work, counted or measured."""
    invocations = workgroups * lanes
    work = invocations * (LOOP_WEIGHT if loops else 1)
    return threads > 1 and workgroups > 1 and (
        work >= PARALLEL_WORK or invocations * seconds_each >= PARALLEL_SECONDS)


def worth_measuring(workgroups: int, loops: bool, threads: int) -> bool:
    """Whether a launch that runs on one thread is timed for ``parallel_worth``: only one
    of a program with a loop that could have shared out (reading a thread's CPU time is
    a system call, which the other launches do not pay)."""
    return loops and threads > 1 and workgroups > 1
