"""chain: three elementwise kernels over resident buffers, as one request.

``x`` and ``y`` are resident: uploaded once into the worker (on the device, for a GPU
backend), where they stay between runs. One sequence runs ``t = 2.5 x + y``, then
``y = t * t`` (writing the resident ``y`` in place), then ``z = y - x``; only ``y`` and
``z`` come back. Each kernel rounds once per operation, as numpy does, so the bytes match
exactly.

Run it: ``python examples/chain.py`` or ``vyre run chain``.
"""

from __future__ import annotations

import sys

import numpy as np

from vyre_core import Example, SequenceBuilder, ir

A = 2.5


def elementwise(expr, *, out_access: str = "output", n: int) -> ir.Program:
    """``out[i] = expr(a[i], b[i])`` over f32 for i < n."""
    k = ir.Kernel(workgroup=(256,))
    a = k.read("a", ir.f32, n)
    b = k.read("b", ir.f32, n)
    out = k.output("out", ir.f32, count=n) if out_access == "output" else \
        k.read_write("out", ir.f32, n)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < n):
        out[i] = expr(a[i], b[i])
    return k.build()


def sequence(n: int):
    s = SequenceBuilder()
    s.resident("x", ir.f32, n)
    s.resident("y", ir.f32, n)
    s.transient("t", ir.f32, n)
    s.transient("z", ir.f32, n)
    s.step(elementwise(lambda x, y: x * A + y, n=n), {"a": "x", "b": "y", "out": "t"})
    s.step(elementwise(lambda t, _: t * t, n=n), {"a": "t", "b": "t", "out": "y"})
    s.step(elementwise(lambda y, x: y - x, n=n), {"a": "y", "b": "x", "out": "z"})
    return s.build(returns=["y", "z"])


def build(n: int = 1_000_000, seed: int = 0) -> Example:
    rng = np.random.default_rng(seed)
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    t = x * np.float32(A) + y
    y2 = t * t
    return Example(sequence(n), [], expected=[y2, y2 - x], resident={"x": x, "y": y})


if __name__ == "__main__":
    from vyre_core.cli import main

    sys.exit(main(["run", __file__, *sys.argv[1:]]))
