"""matmul: ``C = A @ B`` over f32, tiled through workgroup memory.

A 16x16 workgroup computes one 16x16 tile of C. For each ``KTILE``-wide slice of the
inner dimension it copies a 16 x ``KTILE`` tile of A and a ``KTILE`` x 16 tile of B into
workgroup memory (each invocation at most one element of each), waits at a ``barrier``,
accumulates its ``KTILE`` products from the shared tiles, and waits again before the next
slice overwrites them. Every global element is loaded once per workgroup instead of 16
times. ``KTILE`` is a specialization constant (1 to 16, default 16): each value is its
own pipeline, and ``vyre tune matmul`` (or ``Driver.tune``) measures which is fastest on
a backend. Every value adds each element's products in the same order, so every value
gives the same bytes: the tuner's byte check accepts them all. Shapes need not be
multiples of the tile: loads outside A or B are replaced by 0 and stores outside C are
skipped. C is declared with its shape ``(m, n)``, so the grid is inferred 2-D: one
16x16 workgroup per tile of C, ``global_id(0)`` its column and ``global_id(1)`` its row.

The inputs are small integers, so every product and partial sum is an integer below 2**24
and exactly representable in f32: the result is exact in any summation order (fused or
not), and numpy checks it bit for bit (``ulp=0``).

Written with the builder (docs/ir.md), not as a ``@vyre.kernel``: a kernel's
``vyre.Constant`` has no range yet, and ``KTILE``'s ``low=1, high=16`` is what the tuner
sweeps.

Run it: ``python examples/matmul.py`` or ``vyre run matmul``.
"""

from __future__ import annotations

import sys

import numpy as np

from vyre_core import Example, ir

TILE = 16  # the workgroup's edge, and the most KTILE may be


def program(m: int, k_dim: int, n: int) -> ir.Program:
    k = ir.Kernel(workgroup=(TILE, TILE))
    depth = k.constant("KTILE", ir.u32, TILE, low=1, high=TILE)
    a = k.read("a", ir.f32, count=m * k_dim)
    b = k.read("b", ir.f32, count=k_dim * n)
    c = k.output("c", ir.f32, shape=(m, n))
    a_tile = k.workgroup_buffer("a_tile", ir.f32, count=TILE * TILE)
    b_tile = k.workgroup_buffer("b_tile", ir.f32, count=TILE * TILE)
    col = k.let("col", ir.global_id(0))
    row = k.let("row", ir.global_id(1))
    lx = k.let("lx", ir.local_id(0))
    ly = k.let("ly", ir.local_id(1))
    acc = k.let("acc", ir.f32(0.0))
    with k.loop("t", 0, (ir.u32(k_dim) + depth - 1) / depth) as t:
        a_col = k.let("a_col", t * depth + lx)
        b_row = k.let("b_row", t * depth + ly)
        a_tile[ly * TILE + lx] = ir.select((row < m) & (a_col < k_dim) & (lx < depth),
                                           a[row * k_dim + a_col], ir.f32(0.0))
        b_tile[ly * TILE + lx] = ir.select((b_row < k_dim) & (col < n) & (ly < depth),
                                           b[b_row * n + col], ir.f32(0.0))
        k.barrier()
        with k.loop("j", 0, depth) as j:
            k.assign(acc, acc + a_tile[ly * TILE + j] * b_tile[j * TILE + lx])
        k.barrier()                      # the next slice overwrites the tiles
    with k.if_((row < m) & (col < n)):
        c[row * n + col] = acc
    return k.build()


def build(m: int = 100, k_dim: int = 72, n: int = 90, seed: int = 0) -> Example:
    rng = np.random.default_rng(seed)
    a = rng.integers(-8, 9, (m, k_dim)).astype(np.float32)
    b = rng.integers(-8, 9, (k_dim, n)).astype(np.float32)
    # |sums| <= 64 * k_dim < 2**24: exact in f32 whatever the order
    expected = (a.astype(np.int64) @ b.astype(np.int64)).astype(np.float32)
    return Example(program(m, k_dim, n), [a, b], expected=[expected])


if __name__ == "__main__":
    from vyre_core.cli import main

    sys.exit(main(["run", __file__, *sys.argv[1:]]))
