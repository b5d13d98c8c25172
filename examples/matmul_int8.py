"""matmul_int8: ``C = A @ B`` for i8 matrices, into i32, with subgroup reductions.

The quantized matrix product of inference: 8-bit operands, 32-bit sums. Each element of
C is one subgroup's work: lane ``l`` of a subgroup of ``SUBGROUP`` invocations adds the
products at ``k = l, l + SUBGROUP, l + 2 * SUBGROUP ...`` (a stride loop), a
``subgroup("add")`` sums the lanes' partial sums, and the subgroup's first lane stores
it. Integer sums are exact in any order (i32 wraps, and these cannot even reach it:
|sum| <= 128 * 128 * k), so every backend and every subgroup size give numpy's bytes:
this is where a reduction over the subgroup keeps vyre's same-bytes rule, which a float
sum's order would break (the f32 ``matmul`` example adds in one order instead).

The subgroup size is part of the program: routing sends it to a backend that forms
subgroups of that size (the reference and cpu emulate any; lavapipe forms 8; a device
that forms 32 wants ``build(subgroup=32)``). The grid is one workgroup per
``WORKGROUP / SUBGROUP`` elements of C.

Written with the builder (docs/ir.md), not as a ``@vyre.kernel``: the kernel frontend
does not lower subgroup operations yet.

Run it: ``python examples/matmul_int8.py`` or ``vyre run matmul_int8``.
"""

from __future__ import annotations

import sys

import numpy as np

from vyre_core import DispatchConfig, Example, ir

SUBGROUP = 8
WORKGROUP = 64


def program(m: int, k_dim: int, n: int, subgroup: int = SUBGROUP) -> ir.Program:
    k = ir.Kernel(workgroup=(WORKGROUP,), subgroup_size=subgroup)
    a = k.read("a", ir.i8, count=m * k_dim)
    b = k.read("b", ir.i8, count=k_dim * n)
    c = k.output("c", ir.i32, count=m * n)
    gid = k.let("gid", ir.global_id(0))
    cell = k.let("cell", gid / subgroup)       # the element of C this subgroup computes
    row = k.let("row", cell / n)
    col = k.let("col", cell % n)
    acc = k.let("acc", ir.i32(0))
    with k.loop("kk", gid % subgroup, k_dim, step=subgroup) as kk:  # (past C: loads read 0)
        k.assign(acc, acc + a[row * k_dim + kk].cast(ir.i32) * b[kk * n + col].cast(ir.i32))
    total = k.let("total", k.subgroup("add", acc))
    first = k.let("first", k.subgroup("elect"))
    with k.if_(first & (cell < m * n)):
        c[cell] = total
    return k.build()


def build(m: int = 96, k_dim: int = 200, n: int = 80, seed: int = 0,
          subgroup: int = SUBGROUP) -> Example:
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, (m, k_dim), dtype=np.int8)
    b = rng.integers(-128, 128, (k_dim, n), dtype=np.int8)
    expected = (a.astype(np.int32) @ b.astype(np.int32)).reshape(-1)
    groups = -(-m * n * subgroup // WORKGROUP)
    return Example(program(m, k_dim, n, subgroup), [a.reshape(-1), b.reshape(-1)],
                   expected=[expected], config=DispatchConfig(grid_override=(groups, 1, 1)))


if __name__ == "__main__":
    from vyre_core.cli import main

    sys.exit(main(["run", __file__, *sys.argv[1:]]))
