"""The kernel most benchmarks time, built here so that the installed benchmarks depend on
nothing outside the package (not on the repository's examples folder)."""

from __future__ import annotations

import numpy as np

from vyre_core import ir


def saxpy(n: int, workgroup: int = 256, bias: float | None = None) -> ir.Program:
    """``out[i] = a * x[i] + y[i]`` over f32 (+ ``bias``, a literal, to make a program new
    to every pipeline cache)."""
    k = ir.Kernel(workgroup=(workgroup,))
    x = k.read("x", ir.f32)
    y = k.read("y", ir.f32)
    a = k.uniform("a", ir.f32)
    out = k.output("out", ir.f32, count=n)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        value = a[0] * x[i] + y[i]
        out[i] = value if bias is None else value + ir.lit(bias, ir.f32)
    return k.build()


def saxpy_inputs(n: int, seed: int = 0) -> list[np.ndarray]:
    """Random ``x`` and ``y`` of ``n`` f32 each, and ``a = 2.5``."""
    rng = np.random.default_rng(seed)
    return [rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32),
            np.array([2.5], dtype=np.float32)]
