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
skipped. The launch is ``dim=(n, m)``: one 16x16 workgroup per tile of C, ``global_id(0)`` its
column and ``global_id(1)`` its row.

The inputs are small integers, so every product and partial sum is an integer below 2**24
and exactly representable in f32: the result is exact in any summation order (fused or
not), and numpy checks it bit for bit (``ulp=0``).

``KTILE: vyre.Constant[i32](low=1, high=TILE)`` is the range the tuner sweeps (its
powers of two). Its builder twin is ``tests/builder_twins.py``'s ``matmul_program``.

To multiply matrices, call ``lib.matmul(drv, a, b)`` (``from vyre_core import lib``,
docs/lib.md): this kernel for every dtype of vyre.lib, stacks and 1-D operands as
numpy.matmul takes them, its order of operations written down (from -0, so a result's
sign of zero is the one the order gives). This example keeps the kernel in view because
it teaches workgroup memory and barriers.

Run it: ``python examples/matmul.py`` or ``vyre run matmul``.
"""

from __future__ import annotations

import sys

import numpy as np

import vyre_core as vyre
from vyre_core import Example, f32, i32

TILE = 16  # the workgroup's edge, and the most KTILE may be


@vyre.kernel(workgroup=(TILE, TILE))
def matmul(a: vyre.Array[f32, 2], b: vyre.Array[f32, 2], c: vyre.Array[f32, 2], *,
           KTILE: vyre.Constant[i32](low=1, high=TILE) = TILE):
    a_tile = vyre.shared(f32, TILE * TILE)
    b_tile = vyre.shared(f32, TILE * TILE)
    col, row = vyre.global_id(0), vyre.global_id(1)
    lx, ly = vyre.local_id(0), vyre.local_id(1)
    m, k_dim, n = a.shape[0], a.shape[1], b.shape[1]
    acc = f32(0)
    for t in range((k_dim + KTILE - 1) // KTILE):
        a_col = t * KTILE + lx
        b_row = t * KTILE + ly
        a_tile[ly * TILE + lx] = a[row, a_col] if row < m and a_col < k_dim and lx < KTILE \
            else f32(0)
        b_tile[ly * TILE + lx] = b[b_row, col] if b_row < k_dim and col < n and ly < KTILE \
            else f32(0)
        vyre.barrier()
        for j in range(KTILE):
            acc += a_tile[ly * TILE + j] * b_tile[j * TILE + lx]
        vyre.barrier()                   # the next slice overwrites the tiles
    if row < m and col < n:
        c[row, col] = acc


def build(m: int = 100, k_dim: int = 72, n: int = 90, seed: int = 0) -> Example:
    rng = np.random.default_rng(seed)
    a = rng.integers(-8, 9, (m, k_dim)).astype(np.float32)
    b = rng.integers(-8, 9, (k_dim, n)).astype(np.float32)
    # |sums| <= 64 * k_dim < 2**24: exact in f32 whatever the order
    expected = (a.astype(np.int64) @ b.astype(np.int64)).astype(np.float32)
    return Example.of_kernel(matmul, (n, m), (a, b, np.zeros((m, n), np.float32)),
                             expected=[expected.reshape(-1)])


if __name__ == "__main__":
    from vyre_core.cli import main

    sys.exit(main(["run", __file__, *sys.argv[1:]]))
