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

import vyre_core as vyre
from vyre_core import Example, SequenceBuilder, f32, ir

A = 2.5
F32 = vyre.Array[f32]


@vyre.kernel(workgroup=(256,))
def scaled_sum(a: F32, b: F32, out: F32):
    i = vyre.global_id(0)
    if i < len(out):
        out[i] = a[i] * A + b[i]


@vyre.kernel(workgroup=(256,))
def square(a: F32, out: F32):
    i = vyre.global_id(0)
    if i < len(out):
        out[i] = a[i] * a[i]


@vyre.kernel(workgroup=(256,))
def difference(a: F32, b: F32, out: F32):
    i = vyre.global_id(0)
    if i < len(out):
        out[i] = a[i] - b[i]


def sequence(n: int):
    s = SequenceBuilder()
    s.resident("x", ir.f32, n)
    s.resident("y", ir.f32, n)
    s.transient("t", ir.f32, n)
    s.transient("z", ir.f32, n)
    s.step(scaled_sum, {"a": "x", "b": "y", "out": "t"}, dim=n)
    s.step(square, {"a": "t", "out": "y"}, dim=n)
    s.step(difference, {"a": "y", "b": "x", "out": "z"}, dim=n)
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
