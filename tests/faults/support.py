"""Helpers shared by the fault-injection tests: a saxpy program with distinct inputs per
seed (so a result delivered to the wrong caller is caught), a Driver with short fault
timings, and status polling."""

from __future__ import annotations

from typing import Any

import numpy as np
from waiting import wait_for

import vyre_core
from vyre_core import ir
from vyre_examples.saxpy import program

N = 64
MAX_RESTARTS = 3


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


def driver(**options: Any) -> vyre_core.Driver:
    fields = {"kill_grace": 0.5, "heartbeat_timeout": 5.0, "max_restarts": MAX_RESTARTS,
              "restart_window": 30.0}
    fields.update(options)
    return vyre_core.Driver(**fields)


def pool_status(drv: vyre_core.Driver, backend: str = "faults") -> dict[str, Any]:
    return drv.status()["pools"][backend]


def worker(drv: vyre_core.Driver, index: int = 0, backend: str = "faults") -> dict[str, Any]:
    return pool_status(drv, backend)["workers"][index]


def wait_idle(drv: vyre_core.Driver, index: int = 0, backend: str = "faults",
              timeout: float = 5.0) -> dict[str, Any]:
    return wait_for(lambda: (w := worker(drv, index, backend))["state"] == "idle" and w,
                    timeout, f"worker {index} of {backend!r} to be idle")


def wait_busy(drv: vyre_core.Driver, index: int = 0, backend: str = "faults") -> dict[str, Any]:
    """Worker ``index`` once its main thread holds a request (its progress page says so):
    killing it then cuts off a request that really runs, not one still on its way."""
    return wait_for(lambda: (w := worker(drv, index, backend))["running"] and w,
                    5.0, f"worker {index} of {backend!r} to be running a request")
