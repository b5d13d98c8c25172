"""Helpers shared by the fault-injection tests: a saxpy program with distinct inputs per
seed (so a result delivered to the wrong caller is caught), a Driver with short fault
timings, and status polling."""

from __future__ import annotations

from typing import Any

import numpy as np

import vyre_core
from vyre_core import ir
from vyre_core.supervisor.options import PoolOptions
from vyre_core.testing import PATIENCE, Workers, wait_for  # noqa: F401 (the suite imports them from here)
from vyre_core.testing.pytest_plugin import TIGHT
from vyre_core.testing.tight import options_over
from vyre_examples.saxpy import program

N = 64
MAX_RESTARTS = TIGHT.restart.max_restarts


def saxpy(n: int = N, workgroup: int = 64) -> ir.Program:
    """``out[i] = a * x[i] + y[i]``: examples/saxpy.py's program, a workgroup of 64."""
    return program(n, workgroup)


PROGRAM = saxpy()


def inputs(seed: int, n: int = N) -> list[np.ndarray]:
    """Distinct inputs per seed, so a result delivered to the wrong caller is caught."""
    rng = np.random.default_rng(seed)
    return [rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32),
            np.array([1.5 + seed], dtype=np.float32)]


def expected(data: list[np.ndarray]) -> bytes:
    x, y, a = data
    return (a[0] * x + y).astype(np.float32).tobytes()


def assert_saxpy(outputs: Any, data: list[np.ndarray]) -> None:
    assert len(outputs) == 1
    assert outputs[0].tobytes() == expected(data)


def driver(*, backend_options: dict[str, PoolOptions] | None = None,
           **options: Any) -> vyre_core.Driver:
    """A Driver with the kit's tight fault timings (``vyre_driver``'s), ``options`` over them
    (``options_over``: ``driver(restart={"max_restarts": 1})`` keeps the kit's window)."""
    return vyre_core.Driver(options=options_over(TIGHT, **options),
                            backend_options=backend_options)


def pool_status(drv: vyre_core.Driver, backend: str = "faults") -> dict[str, Any]:
    return Workers(drv, backend).pool()


def worker(drv: vyre_core.Driver, index: int = 0, backend: str = "faults") -> dict[str, Any]:
    return Workers(drv, backend).row(index)


def wait_idle(drv: vyre_core.Driver, index: int = 0, backend: str = "faults",
              timeout: float = PATIENCE) -> dict[str, Any]:
    return Workers(drv, backend).wait_idle(index, timeout=timeout)


def wait_busy(drv: vyre_core.Driver, index: int = 0, backend: str = "faults") -> dict[str, Any]:
    """Worker ``index`` once its main thread holds a request (its progress page says so):
    killing it then cuts off a request that really runs, not one still on its way."""
    return Workers(drv, backend).wait_running(index)
