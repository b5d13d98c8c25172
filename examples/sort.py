"""sort: 1M u32 sorted ascending by a bitonic network, every pass in one request.

A bitonic sort of ``2**p`` keys is ``p (p + 1) / 2`` passes of compare-and-swap; pass
``(k, j)`` pairs key ``i`` with key ``i + j`` and puts the smaller first when bit ``k`` of
``i`` is clear, last when it is set. One kernel does every pass (each invocation owns one
pair, so no two touch the same key); the pass's ``(k, j)`` is a constant of the sequence.
210 passes over 1M keys run as one sequence: the keys stay in the worker (on the device,
for a GPU backend) until the sorted array comes back once. numpy's ``sort`` checks it
exactly.

To sort an array, call ``lib.sort(drv, x)`` or ``lib.argsort`` (``from vyre_core import
lib``, docs/lib.md): numpy's stable order for any length, axis and f32/f16/i32/u32 dtype,
by a radix sort of a few passes, far fewer than a network's. This example keeps the long
way because it teaches a sort as a sequence of many passes with per-pass constants; the
network needs a power of two and sorts only unsigned keys.

Run it: ``python examples/sort.py`` or ``vyre run sort``.
"""

from __future__ import annotations

import sys

import numpy as np

import vyre_core as vyre
from vyre_core import Example, SequenceBuilder, i32, ir, u32

WORKGROUP = 256


@vyre.kernel(workgroup=(WORKGROUP,))
def compare_and_swap(keys: vyre.Array[u32], stage: vyre.Array[i32]):
    """One bitonic pass over ``keys``, ``stage`` its (k, j): invocation t owns the pair
    (i, i + j)."""
    t = vyre.global_id(0)
    j = stage[1]
    i = t // j * (j * 2) + t % j
    if i + j < len(keys):
        a = keys[i]
        b = keys[i + j]
        ascending = (i & stage[0]) == 0
        low, high = min(a, b), max(a, b)
        keys[i] = low if ascending else high
        keys[i + j] = high if ascending else low


@vyre.kernel(workgroup=(WORKGROUP,))
def copy(src: vyre.Array[u32], dst: vyre.Array[u32]):
    i = vyre.global_id(0)
    if i < len(dst):
        dst[i] = src[i]


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
    b.step(copy, {"src": "unsorted", "dst": "keys"}, dim=n)
    for size, j in stages(n):
        stage = b.constant(f"stage_{size}_{j}", ir.i32, [size, j])
        b.step(compare_and_swap, {"stage": stage}, dim=n // 2)  # one invocation per pair
    return b.build(returns=["keys"])


def build(n: int = 1 << 20, seed: int = 0) -> Example:
    if n & (n - 1) or n < 2:
        raise ValueError("n must be a power of two, at least 2")
    keys = np.random.default_rng(seed).integers(0, 2**32, n, dtype=np.uint32)
    return Example(sequence(n), [keys], expected=[np.sort(keys)])


if __name__ == "__main__":
    from vyre_core.cli import main

    sys.exit(main(["run", __file__, *sys.argv[1:]]))
