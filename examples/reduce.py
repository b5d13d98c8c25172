"""reduce: the sum of 16M f32 as a tree of passes, one request.

Each pass is one kernel: invocation ``i`` of a pass that leaves ``m`` partial sums adds
``x[i], x[i + m], x[i + 2m], ...`` one after another, a fixed order that numpy repeats
exactly. Three passes (16M -> 65,536 -> 256 -> 1) run as one sequence: the partial sums
stay in the worker (on the device, for a GPU backend) and only the total comes back. The
order of every addition is defined by the program, so the result is the same bits on every
backend that keeps IEEE single precision.

Run it: ``python examples/reduce.py`` or ``vyre run reduce``.
"""

from __future__ import annotations

import sys

import numpy as np

from vyre_core import Example, SequenceBuilder, ir

WORKGROUP = 256


def partial_sums(m: int, chunks: int) -> ir.Program:
    """out[i] = x[i] + x[i + m] + ... + x[i + (chunks - 1) m], left to right."""
    k = ir.Kernel(workgroup=(min(m, WORKGROUP),))
    x = k.read("x", ir.f32)
    out = k.output("out", ir.f32, count=m)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < m):
        acc = k.let("acc", ir.f32(0.0))
        with k.loop("j", 0, chunks) as j:
            k.assign(acc, acc + x[i + j * m])
        out[i] = acc
    return k.build()


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
    for level, (m, chunks) in enumerate(passes(n)):
        target = b.transient(f"level{level}", ir.f32, m)
        b.step(partial_sums(m, chunks), {"x": source, "out": target})
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
