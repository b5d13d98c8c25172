"""The kernel suite's numba ports (``benchmarks/suite/numba_kernels.py``: each kernel an
``@njit(parallel=True)`` loop, as a numba user writes it) against the same problem in
numpy, at PolyBench's MEDIUM size: the numba column beside ``suite.<name>_medium`` (the
vyre port against numpy at the same size, in the same run). Each result is checked
against numpy's first (which also compiles the port, or loads it from numba's cache)."""

from __future__ import annotations

from collections.abc import Callable

from vyre_benchmarks.bench_suite import check
from vyre_benchmarks.harness import Result, compare
from vyre_benchmarks.suite.problems import MEDIUM, PROBLEMS, Problem, run_numba

REQUIRES = ("cpu",)  # (numba comes with the cpu backend)


def _bench(problem: Problem) -> Callable[[], Result]:
    def bench() -> Result:
        size = MEDIUM[problem.name]
        data = problem.make(size)
        check(problem, run_numba(problem, data), problem.reference(data), "numba")
        return compare(f"{problem.name} (n={size}), numba port (parallel=True)",
                       lambda: run_numba(problem, data), "the same problem in numpy",
                       lambda: problem.reference(data), repeat=5, number=3)
    bench.__name__ = problem.name
    return bench


BENCHMARKS = [_bench(p) for p in PROBLEMS.values()]
