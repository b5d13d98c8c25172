"""The kernel suite's numba ports (``benchmarks/suite/numba_kernels.py``: each kernel an
``@njit(parallel=True)`` loop, as a numba user writes it) against the same problem in
numpy, at PolyBench's MEDIUM size: the numba column beside ``suite.<name>_medium`` (the
vyre port against numpy at the same size, in the same run). Each result is checked
against numpy's first (which also compiles the port, or loads it from numba's cache)."""

from __future__ import annotations

from vyre_benchmarks.bench_suite import port_against_numpy
from vyre_benchmarks.suite.problems import PROBLEMS, run_numba

REQUIRES = ("cpu",)  # (numba comes with the cpu backend)


BENCHMARKS = [port_against_numpy(p, run_numba, "numba", "numba port (parallel=True)")
              for p in PROBLEMS.values()]
