"""reduction: a tree sum in workgroup memory, one partial sum per workgroup.

Each invocation loads one element into the workgroup's shared buffer; then, for
``log2(workgroup)`` steps, the lower half adds the upper half into itself, with a
``barrier`` after every step so no invocation reads a slot before it is written. The
barriers sit in workgroup-uniform control flow (a loop with literal bounds), as the
validator demands (V016). Invocation 0 writes its workgroup's sum; adding the partial sums
is left to the caller (or to a second dispatch). Elements past the end of the input read 0.

The data is u32 and u32 addition wraps, so every summation order gives the same bits:
the result is exact on every backend and numpy checks it exactly.

Run it: ``python examples/reduction.py`` or ``vyre run reduction``.
"""

from __future__ import annotations

import sys

import numpy as np

import vyre_core as vyre
from vyre_core import Example, u32

WORKGROUP = 256  # a power of two: the tree halves it log2(WORKGROUP) times
STEPS = WORKGROUP.bit_length()


@vyre.kernel(workgroup=(WORKGROUP,))
def reduction(x: vyre.Array[u32], sums: vyre.Array[u32]):
    shared = vyre.shared(u32, WORKGROUP)
    lid = vyre.local_id(0)
    shared[lid] = x[vyre.global_id(0)]          # past the input: reads 0
    vyre.barrier()
    for step in range(1, STEPS):
        stride = WORKGROUP >> step
        if lid < stride:
            shared[lid] += shared[lid + stride]
        vyre.barrier()
    if lid == 0:
        sums[vyre.workgroup_id(0)] = shared[0]


def build(n: int = 100_000, seed: int = 0) -> Example:
    groups = -(-n // WORKGROUP)
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 2**32, n, dtype=np.uint32)   # sums wrap: still exact
    padded = np.zeros(groups * WORKGROUP, dtype=np.uint32)
    padded[:n] = x
    expected = padded.reshape(groups, WORKGROUP).sum(axis=1, dtype=np.uint32)
    return Example.of_kernel(reduction, groups * WORKGROUP,
                             (x, np.zeros(groups, np.uint32)), expected=[expected])


if __name__ == "__main__":
    from vyre_core.cli import main

    sys.exit(main(["run", __file__, *sys.argv[1:]]))
