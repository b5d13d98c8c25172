"""The kernel suite's Taichi ports (``benchmarks/suite/taichi_kernels.py``: ``@ti.kernel``
loops over ``ti.ndrange``, on Taichi's CPU backend) against the same problem in numpy, at
PolyBench's MEDIUM size: the Taichi column beside ``suite.<name>_medium`` and
``suite_numba.<name>`` in the same run. Each result is checked against numpy's first
(which also compiles the port, or loads it from Taichi's cache). ``tiny_launch``: a
compiled vyre pipeline's one-invocation launch on cpu against a Taichi kernel's doing the
same work. Skipped, saying so, where taichi is not installed. (No ``from __future__ import
annotations``: Taichi reads a kernel's annotations as objects.)"""

import importlib.util
import statistics

import numpy as np

from vyre_benchmarks.bench_cpu_launch import TINY_INPUT, TURNS, _p50, tiny_program
from vyre_benchmarks.bench_suite import port_against_numpy
from vyre_benchmarks.harness import Result, reps
from vyre_benchmarks.suite.problems import PROBLEMS, run_taichi
from vyre_core.driver import Driver

REQUIRES = ("cpu",)


def unavailable() -> str | None:
    """Why this suite cannot run here (None: it can)."""
    if importlib.util.find_spec("taichi") is None:
        return "taichi is not installed (pip install 'vyre[suite]')"
    return None


def tiny_launch() -> Result:
    """A compiled pipeline's one-invocation launch on cpu (``out[0] = x[0] + 1``), p50,
    against a Taichi kernel's doing the same on numpy arrays, p50, in alternating turns."""
    from vyre_benchmarks.suite.taichi_kernels import ti  # (initialised there)

    @ti.kernel
    def plus_one(x: ti.types.ndarray(dtype=ti.u32, ndim=1),
                 out: ti.types.ndarray(dtype=ti.u32, ndim=1)):
        out[0] = x[0] + ti.u32(1)

    x, out = TINY_INPUT, np.zeros(1, np.uint32)
    plus_one(x, out)
    if out.tolist() != [1]:
        raise AssertionError(f"the Taichi kernel gave {out}")
    with Driver() as drv:
        pipeline = drv.compile(tiny_program(), backend="cpu")
        if pipeline.dispatch([x])[0].tolist() != [1]:
            raise AssertionError("the pipeline's launch on cpu gave a wrong result")
        launches, taichi = [], []
        for _ in range(reps(TURNS, 1)):
            launches.append(_p50(lambda: pipeline.dispatch([x])))
            taichi.append(_p50(lambda: plus_one(x, out)))
    return Result("cpu: compiled pipeline launch (1 invocation) p50",
                  statistics.median(launches) * 1e6, "us",
                  "a Taichi kernel's launch (1 invocation, numpy arrays) p50",
                  statistics.median(taichi) * 1e6)


BENCHMARKS = [port_against_numpy(p, run_taichi, "Taichi", "Taichi port on its CPU backend")
              for p in PROBLEMS.values()] + [tiny_launch]
