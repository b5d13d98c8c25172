"""The kernel suite (benchmarks/suite: ten PolyBench/SHOC kernels written as
``@vyre.kernel``): each port on the cpu backend, launched through a Driver as a user
launches it, against the same problem in numpy (vectorised, as a numpy user writes it),
at n=64 and at PolyBench's MEDIUM size (``<name>_medium``). Each result is checked against
numpy's before it is timed."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from vyre_benchmarks.harness import Result, compare
from vyre_benchmarks.suite.problems import MEDIUM, PROBLEMS, Problem, run_vyre
from vyre_core.driver import Driver

REQUIRES = ("cpu",)
BACKEND = "cpu"
SIZE = 64


def check(problem: Problem, got: dict[str, Any], want: dict[str, np.ndarray], who: str) -> None:
    """Raise unless ``got`` is numpy's result: exactly, or within 1e-3 of its largest
    magnitude for a float reduction (tests/test_suite_ports.py holds the exact budget)."""
    for out in problem.outputs:
        off = np.abs(got[out].astype(np.float64) - want[out]).max()
        if off > (0 if problem.exact else 1e-3 * np.abs(want[out]).max()):
            raise AssertionError(f"{problem.name}: the {who} port's {out} is not numpy's")


def port_against_numpy(problem: Problem, run: Callable[[Problem, dict[str, Any]], Any],
                       who: str, port: str) -> Callable[[], Result]:
    """The benchmark of another framework's ``port`` of ``problem`` (``run`` runs it)
    against the same problem in numpy at MEDIUM size, its result checked first (which
    also compiles it, or loads it from that framework's cache)."""
    def bench() -> Result:
        size = MEDIUM[problem.name]
        data = problem.make(size)
        check(problem, run(problem, data), problem.reference(data), who)
        return compare(f"{problem.name} (n={size}), {port}", lambda: run(problem, data),
                       "the same problem in numpy", lambda: problem.reference(data),
                       repeat=5, number=3)
    bench.__name__ = problem.name
    return bench


@functools.cache
def _driver() -> Driver:
    return Driver()  # one for every row (closed at exit by the driver's own atexit hook)


def _bench(problem: Problem, size: int, suffix: str = "") -> Callable[[], Result]:
    def bench() -> Result:
        data, drv = problem.make(size), _driver()
        check(problem, run_vyre(problem, data, drv, BACKEND), problem.reference(data), "vyre")
        return compare(f"{problem.name} (n={size}), vyre kernels on cpu",
                       lambda: run_vyre(problem, data, drv, BACKEND),
                       "the same problem in numpy", lambda: problem.reference(data),
                       repeat=5, number=3)
    bench.__name__ = problem.name + suffix
    return bench


BENCHMARKS = [_bench(p, SIZE) for p in PROBLEMS.values()] + \
    [_bench(p, MEDIUM[p.name], "_medium") for p in PROBLEMS.values()]
