"""reduce: the sum of 16M f32 as a tree of passes, one request.

Each pass is one kernel: invocation ``i`` of a pass that leaves ``m`` partial sums adds
``x[i], x[i + m], x[i + 2m], ...`` one after another, a fixed order that numpy repeats
exactly. Three passes (16M -> 65,536 -> 256 -> 1) run as one sequence: the partial sums
stay in the worker (on the device, for a GPU backend) and only the total comes back. The
order of every addition is defined by the program, so the result is the same bits on every
backend that keeps IEEE single precision.

To sum an array, call ``lib.sum(drv, x)`` (``from vyre_core import lib``, docs/lib.md):
the same kind of tree, for any length, axis and dtype, with its order written down. This
example keeps the long way because it teaches the tree: a kernel per pass, the passes as
one sequence, the same additions repeated in numpy.

Run it: ``python examples/reduce.py`` or ``vyre run reduce``.
"""

from __future__ import annotations

import sys

import numpy as np

import vyre_core as vyre
from vyre_core import Example, SequenceBuilder, f32, ir

WORKGROUP = 256


@vyre.kernel(workgroup=(WORKGROUP,))
def partial_sums(x: vyre.Array[f32], out: vyre.Array[f32]):
    """out[i] = x[i] + x[i + m] + ... + x[i + (chunks - 1) m], left to right, where m is
    len(out) and chunks len(x) // m."""
    i = vyre.global_id(0)
    m = len(out)
    if i < m:
        acc = f32(0)
        for j in range(len(x) // m):
            acc += x[i + j * m]
        out[i] = acc


def passes(n: int) -> list[tuple[int, int]]:
    """(partial sums left, elements each adds) per pass: at most 256 per invocation."""
    shape = []
    while n > 1:
        chunks = min(256, n)
        shape.append((n // chunks, chunks))
        n //= chunks
    return shape


def sequence(n: int):
    b = SequenceBuilder()
    b.input("x", ir.f32, n)
    source = "x"
    for level, (m, _) in enumerate(passes(n)):
        target = b.transient(f"level{level}", ir.f32, m)
        b.step(partial_sums, {"x": source, "out": target}, dim=m)
        source = target
    return b.build(returns=[source])


def in_numpy(x: np.ndarray) -> np.ndarray:
    """The same additions in the same order."""
    for m, chunks in passes(len(x)):
        rows = x.reshape(chunks, m)
        acc = np.zeros(m, np.float32)
        for row in rows:
            acc = acc + row
        x = acc
    return x


def build(n: int = 1 << 24, seed: int = 0) -> Example:
    if n & (n - 1):
        raise ValueError("n must be a power of two")
    x = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
    return Example(sequence(n), [x], expected=[in_numpy(x)])


if __name__ == "__main__":
    from vyre_core.cli import main

    sys.exit(main(["run", __file__, *sys.argv[1:]]))
