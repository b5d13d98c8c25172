"""saxpy: ``out[i] = a * x[i] + y[i]`` over f32, the elementwise kernel of the README.

Run it: ``python examples/saxpy.py`` or ``vyre run saxpy`` (1,000,000 elements). The
kernel's program is routed to the best backend, runs in that backend's supervised worker
process, and every output is checked against the same expression written in numpy.

``program`` and ``inputs`` are the same saxpy at the IR level, built with the builder: a
fixed-size output (``count=n``, so the grid is inferred from it) and the inputs
``[x, y, a]``. They are the fixture the tests and benchmarks of dispatch, grids, pipeline
keys and wire forms use (``from vyre_examples.saxpy import program``), and the builder
twin the kernel is checked against, byte for byte (tests/test_builder_twins.py).
"""

from __future__ import annotations

import sys

import numpy as np

import vyre_core as vyre
from vyre_core import Example, f32, ir


@vyre.kernel(workgroup=(256,))
def saxpy(a: f32, x: vyre.Array[f32], y: vyre.Array[f32], out: vyre.Array[f32]):
    i = vyre.global_id(0)
    if i < len(x):
        out[i] = a * x[i] + y[i]


def program(n: int, workgroup: int = 256, *, bias: float | None = None) -> ir.Program:
    """``out[i] = a * x[i] + y[i]`` for ``n`` elements, ``workgroup`` invocations to a
    workgroup; ``bias``, an f32 literal added to every element, makes a program that no
    pipeline cache has seen (the compile benchmarks)."""
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


def inputs(n: int, seed: int = 0) -> list[np.ndarray]:
    """Random ``x`` and ``y`` of ``n`` f32 each, and ``a = 2.5``."""
    rng = np.random.default_rng(seed)
    return [rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32),
            np.array([2.5], dtype=np.float32)]


def build(n: int = 1_000_000, seed: int = 0) -> Example:
    x, y, a = inputs(n, seed)
    # numpy rounds a*x, then the sum: the same two f32 roundings as the kernel
    return Example.of_kernel(saxpy, n, (a[0], x, y, np.zeros_like(x)),
                             expected=[a[0] * x + y])


if __name__ == "__main__":
    from vyre_core.cli import main

    sys.exit(main(["run", __file__, *sys.argv[1:]]))
