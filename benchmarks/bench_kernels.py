"""Kernel figures: launching a compiled ``@vyre.kernel`` against dispatching the same
program with the same inputs, prepared once (the target is at most 1.2x: the frontend's
per-launch work is the signature lookup, binding the scalars and filling in place)."""

from __future__ import annotations

import numpy as np

from vyre_benchmarks.harness import Result, compare
from vyre_core import Array, f32, global_id, kernel
from vyre_core.driver import Driver

REQUIRES = ("reference",)
BACKEND = "reference"  # named, so a GPU on the machine never changes what is measured
N = 1024


@kernel
def saxpy(a: f32, x: Array[f32], y: Array[f32], out: Array[f32]):
    i = global_id(0)
    if i < len(x):
        out[i] = a * x[i] + y[i]


def cached_launch() -> Result:
    x = np.arange(N, dtype=np.float32)
    y = np.ones(N, np.float32)
    out = np.zeros(N, np.float32)
    args = (2.0, x, y, out)
    plan = saxpy.plan(N, args)
    program, inputs = plan.program, list(plan.inputs)
    with Driver() as drv:
        drv.launch(saxpy, dim=N, args=args, backend=BACKEND)   # compiled, worker started
        assert out.tobytes() == (np.float32(2.0) * x + y).tobytes()
        return compare(f"launch of a cached kernel (saxpy, {N} f32)",
                       lambda: drv.launch(saxpy, dim=N, args=args, backend=BACKEND),
                       "dispatch of the same program and inputs",
                       lambda: drv.dispatch(program, inputs, backend=BACKEND, dim=N),
                       repeat=7, number=200, unit="us")


BENCHMARKS = [cached_launch]
