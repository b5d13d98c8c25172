"""saxpy: ``out[i] = a * x[i] + y[i]`` over f32, the elementwise kernel of the README.

Run it: ``python examples/saxpy.py [N]`` or ``vyre run saxpy``. It builds the program,
routes it to the best backend, runs it in that backend's supervised worker process and
checks every output against the same expression written in numpy.
"""

from __future__ import annotations

import sys

import numpy as np

from vyre_core import Example, ir


def program(n: int) -> ir.Program:
    k = ir.Kernel(workgroup=(256,))
    x = k.read("x", ir.f32)
    y = k.read("y", ir.f32)
    a = k.uniform("a", ir.f32)
    out = k.output("out", ir.f32, count=n)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        out[i] = a[0] * x[i] + y[i]
    return k.build()


def build(n: int = 1_000_000, seed: int = 0) -> Example:
    rng = np.random.default_rng(seed)
    x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    a = np.array([2.5], dtype=np.float32)
    # numpy rounds a*x, then the sum: the same two f32 roundings as the kernel
    return Example(program(n), [x, y, a], expected=[a[0] * x + y])


if __name__ == "__main__":
    from vyre_core.cli import main

    sys.exit(main(["run", __file__, *sys.argv[1:]]))
