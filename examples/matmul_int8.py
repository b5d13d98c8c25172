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

The subgroup size is fixed when a kernel is decorated, so ``kernel(subgroup)`` makes
(once) the kernel for each size. Its builder twin is ``tests/builder_twins.py``'s
``matmul_int8_program``.

Run it: ``python examples/matmul_int8.py`` or ``vyre run matmul_int8``.
"""

from __future__ import annotations

import functools
import sys

import numpy as np

import vyre_core as vyre
from vyre_core import Example, i8, i32

SUBGROUP = 8
WORKGROUP = 64


@functools.cache
def kernel(subgroup: int = SUBGROUP) -> vyre.KernelFunction:
    """The kernel whose subgroups are ``subgroup`` invocations."""

    @vyre.kernel(workgroup=(WORKGROUP,), subgroup_size=subgroup)
    def matmul_int8(a: vyre.Array[i8, 2], b: vyre.Array[i8, 2], c: vyre.Array[i32, 2]):
        gid = vyre.global_id(0)
        m, k_dim, n = a.shape[0], a.shape[1], b.shape[1]
        cell = gid // subgroup               # the element of C this subgroup computes
        row, col = cell // n, cell % n
        acc = i32(0)
        for kk in range(gid % subgroup, k_dim, subgroup):    # (past C: loads read 0)
            acc += i32(a[row, kk]) * i32(b[kk, col])
        total = vyre.subgroup_add(acc)
        if vyre.subgroup_elect() and cell < m * n:
            c[row, col] = total

    return matmul_int8


def build(m: int = 96, k_dim: int = 200, n: int = 80, seed: int = 0,
          subgroup: int = SUBGROUP) -> Example:
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, (m, k_dim), dtype=np.int8)
    b = rng.integers(-128, 128, (k_dim, n), dtype=np.int8)
    expected = (a.astype(np.int32) @ b.astype(np.int32)).reshape(-1)
    groups = -(-m * n * subgroup // WORKGROUP)
    return Example.of_kernel(kernel(subgroup), groups * WORKGROUP,
                             (a, b, np.zeros((m, n), np.int32)), expected=[expected])


if __name__ == "__main__":
    from vyre_core.cli import main

    sys.exit(main(["run", __file__, *sys.argv[1:]]))
