"""scan: the inclusive prefix sum of 4M u32, as a sequence of passes in one request.

Level by level: each invocation scans one chunk of 256 consecutive elements in order and
writes the chunk's total; the totals are scanned the same way, one level up, until one
chunk is left; then each level adds the scanned total of the chunks before it, back down.
u32 addition wraps, so every order gives the same bits and numpy's ``cumsum`` checks it
exactly. Every intermediate level stays in the worker (on the device, for a GPU backend);
only the scan comes back.

To scan an array, call ``lib.cumsum(drv, x)`` (``from vyre_core import lib``,
docs/lib.md): the same chunked rule, for any length, axis and dtype, its float order
written down. This example keeps the long way because it teaches the levels: a kernel
per pass, up and back down, as one sequence.

Run it: ``python examples/scan.py`` or ``vyre run scan``.
"""

from __future__ import annotations

import sys

import numpy as np

import vyre_core as vyre
from vyre_core import Example, SequenceBuilder, ir, u32

CHUNK = 256
U32 = vyre.Array[u32]


@vyre.kernel(workgroup=(64,))
def chunk_scan(x: U32, y: U32, totals: U32):
    """y = x scanned within each of the len(totals) chunks; totals[c] = chunk c's sum."""
    i = vyre.global_id(0)
    if i < len(totals):
        chunk = len(x) // len(totals)
        acc = u32(0)
        for j in range(chunk):
            at = i * chunk + j
            acc += x[at]
            y[at] = acc
        totals[i] = acc


@vyre.kernel(workgroup=(256,))
def add_offsets(y: U32, scanned: U32):
    """y[i] += scanned[c - 1] for i in chunk c, every chunk but the first."""
    i = vyre.global_id(0)
    c = i // (len(y) // len(scanned))
    if i < len(y) and c > 0:
        y[i] += scanned[c - 1]


def levels(n: int) -> list[tuple[int, int]]:
    """(elements, chunk) per level, up to the level that is one chunk."""
    found = []
    while True:
        chunk = min(CHUNK, n)
        found.append((n, chunk))
        if chunk == n:
            return found
        n //= chunk


def sequence(n: int):
    b = SequenceBuilder()
    b.input("x", ir.u32, n)
    shape = levels(n)
    for level, (size, chunk) in enumerate(shape):
        b.transient(f"scan{level}", ir.u32, size)
        b.transient(f"totals{level}", ir.u32, size // chunk)
        b.step(chunk_scan, {"x": "x" if level == 0 else f"totals{level - 1}",
                      "y": f"scan{level}", "totals": f"totals{level}"},
               dim=size // chunk)  # one invocation per chunk
    for level in range(len(shape) - 2, -1, -1):
        size, _ = shape[level]
        b.step(add_offsets, {"y": f"scan{level}", "scanned": f"scan{level + 1}"}, dim=size)
    return b.build(returns=["scan0"])


def build(n: int = 1 << 22, seed: int = 0) -> Example:
    if n & (n - 1):
        raise ValueError("n must be a power of two")
    x = np.random.default_rng(seed).integers(0, 2**32, n, dtype=np.uint32)
    return Example(sequence(n), [x], expected=[np.cumsum(x, dtype=np.uint32)])


if __name__ == "__main__":
    from vyre_core.cli import main

    sys.exit(main(["run", __file__, *sys.argv[1:]]))
