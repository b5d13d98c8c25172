"""sort: 1M u32 sorted ascending by a bitonic network, every pass in one request.

A bitonic sort of ``2**p`` keys is ``p (p + 1) / 2`` passes of compare-and-swap; pass
``(k, j)`` pairs key ``i`` with key ``i + j`` and puts the smaller first when bit ``k`` of
``i`` is clear, last when it is set. One kernel does every pass (each invocation owns one
pair, so no two touch the same key); the pass's ``(k, j)`` is a constant of the sequence.
210 passes over 1M keys run as one sequence: the keys stay in the worker (on the device,
for a GPU backend) until the sorted array comes back once. numpy's ``sort`` checks it
exactly.

Run it: ``python examples/sort.py`` or ``vyre run sort``.
"""

from __future__ import annotations

import sys

import numpy as np

from vyre_core import Example, SequenceBuilder, ir

WORKGROUP = 256


def compare_and_swap() -> ir.Program:
    """One bitonic pass over ``keys``: invocation t owns the pair (i, i + j)."""
    k = ir.Kernel(workgroup=(WORKGROUP,))
    keys = k.read_write("keys", ir.u32)
    stage = k.uniform("stage", ir.u32, 2)  # (k, j)
    t = k.let("t", ir.global_id(0))
    j = k.let("j", stage[1])
    i = k.let("i", (t / j) * (j * 2) + t % j)
    with k.if_(i + j < keys.len):
        a = k.let("a", keys[i])
        b = k.let("b", keys[i + j])
        ascending = k.let("ascending", (i & stage[0]) == 0)
        low = k.let("low", ir.min(a, b))
        high = k.let("high", ir.max(a, b))
        keys[i] = ir.select(ascending, low, high)
        keys[i + j] = ir.select(ascending, high, low)
    return k.build()


def stages(n: int) -> list[tuple[int, int]]:
    """(k, j) of every pass, in order."""
    found = []
    size = 2
    while size <= n:
        j = size // 2
        while j >= 1:
            found.append((size, j))
            j //= 2
        size *= 2
    return found


def sequence(n: int):
    b = SequenceBuilder()
    b.input("unsorted", ir.u32, n)
    b.transient("keys", ir.u32, n)
    b.step(copy(n), {"src": "unsorted", "dst": "keys"})
    program = compare_and_swap()
    grid = max(1, n // 2 // WORKGROUP)
    for size, j in stages(n):
        stage = b.constant(f"stage_{size}_{j}", ir.u32, [size, j])
        b.step(program, {"stage": stage}, grid=grid)
    return b.build(returns=["keys"])


def copy(n: int) -> ir.Program:
    k = ir.Kernel(workgroup=(WORKGROUP,))
    src = k.read("src", ir.u32, n)
    dst = k.output("dst", ir.u32, count=n)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < n):
        dst[i] = src[i]
    return k.build()


def build(n: int = 1 << 20, seed: int = 0) -> Example:
    if n & (n - 1) or n < 2:
        raise ValueError("n must be a power of two, at least 2")
    keys = np.random.default_rng(seed).integers(0, 2**32, n, dtype=np.uint32)
    return Example(sequence(n), [keys], expected=[np.sort(keys)])


if __name__ == "__main__":
    from vyre_core.cli import main

    sys.exit(main(["run", __file__, *sys.argv[1:]]))
