"""Each vyre port of the kernel suite (benchmarks/suite) gives numpy's result on the
reference, cpu and wgpu backends, and the three give the same bytes.

Stencils and the k-loop (integers) do numpy's operations in numpy's order: exact. A float
reduction sums in another order than numpy's (BLAS, pairwise sums), so it is held to a
budget: within ``ULPS`` units in the last place of the output's largest magnitude."""

from __future__ import annotations

import numpy as np
import pytest

import vyre_core as vyre
from vyre_benchmarks.suite.problems import PROBLEMS, run_vyre

pytestmark = [pytest.mark.processes]
SIZE = 16
ULPS = 8
BACKENDS = ("reference", "cpu", "wgpu")


@pytest.fixture(scope="module")
def drv():
    with vyre.Driver() as driver:
        yield driver


def ulps_off(got: np.ndarray, want: np.ndarray) -> float:
    """The largest difference, in units in the last place of ``want``'s largest magnitude."""
    unit = np.spacing(np.abs(want).max().astype(np.float32))
    return float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max() / unit)


@pytest.mark.parametrize("name", PROBLEMS)
def test_a_vyre_port_gives_numpys_result_on_every_backend(drv, name):
    problem = PROBLEMS[name]
    data = problem.make(SIZE)
    want = problem.reference(data)
    got = {b: run_vyre(problem, data, drv, b) for b in BACKENDS}
    for out in problem.outputs:
        first = got["reference"][out]
        for backend in BACKENDS[1:]:
            assert got[backend][out].tobytes() == first.tobytes(), (backend, out)
        if problem.exact:
            assert first.tobytes() == want[out].tobytes(), out
        else:
            assert ulps_off(first, want[out]) <= ULPS, out
