"""The kernel suite's vyre ports on the cpu backend against its Warp ports on Warp's CPU
device, the same launches of the same problem (``benchmarks/suite/problems.py``), each
checked against numpy first. Skipped, saying so, where warp-lang is not installed."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable

from vyre_benchmarks.bench_suite import BACKEND, SIZE, check
from vyre_benchmarks.harness import Result, compare
from vyre_benchmarks.suite.problems import PROBLEMS, Problem, run_vyre, run_warp
from vyre_core.driver import Driver

REQUIRES = ("cpu",)


def unavailable() -> str | None:
    """Why this suite cannot run here (None: it can)."""
    if importlib.util.find_spec("warp") is None:
        return "warp-lang is not installed (pip install 'vyre[suite]')"
    return None


def _bench(problem: Problem) -> Callable[[], Result]:
    def bench() -> Result:
        data = problem.make(SIZE)
        want = problem.reference(data)
        check(problem, run_warp(problem, data), want, "Warp")   # compiled here, once
        with Driver() as drv:
            check(problem, run_vyre(problem, data, drv, BACKEND), want, "vyre")
            return compare(f"{problem.name} (n={SIZE}), vyre kernels on cpu",
                           lambda: run_vyre(problem, data, drv, BACKEND),
                           "the Warp port on Warp's CPU device",
                           lambda: run_warp(problem, data), repeat=5, number=3)
    bench.__name__ = problem.name
    return bench


BENCHMARKS = [_bench(p) for p in PROBLEMS.values()]
