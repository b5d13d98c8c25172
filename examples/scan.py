"""scan: the inclusive prefix sum of 4M u32, as a sequence of passes in one request.

Level by level: each invocation scans one chunk of 256 consecutive elements in order and
writes the chunk's total; the totals are scanned the same way, one level up, until one
chunk is left; then each level adds the scanned total of the chunks before it, back down.
u32 addition wraps, so every order gives the same bits and numpy's ``cumsum`` checks it
exactly. Every intermediate level stays in the worker (on the device, for a GPU backend);
only the scan comes back.

Run it: ``python examples/scan.py`` or ``vyre run scan``.
"""

from __future__ import annotations

import sys

import numpy as np

from vyre_core import Example, SequenceBuilder, ir

CHUNK = 256


def chunk_scan(n: int, chunk: int) -> ir.Program:
    """y = x scanned within each chunk of ``chunk`` elements; totals[c] = chunk c's sum."""
    lanes = n // chunk
    k = ir.Kernel(workgroup=(min(lanes, 64),))
    x = k.read("x", ir.u32, n)
    y = k.output("y", ir.u32, count=n)
    totals = k.output("totals", ir.u32, count=lanes)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < lanes):
        acc = k.let("acc", ir.u32(0))
        with k.loop("j", 0, chunk) as j:
            at = k.let("at", i * chunk + j)
            k.assign(acc, acc + x[at])
            y[at] = acc
        totals[i] = acc
    return k.build()


def add_offsets(n: int, chunk: int) -> ir.Program:
    """y[i] += scanned[i / chunk - 1] for every chunk but the first."""
    k = ir.Kernel(workgroup=(min(n, 256),))
    y = k.read_write("y", ir.u32, n)
    scanned = k.read("scanned", ir.u32, n // chunk)
    i = k.let("i", ir.global_id(0))
    c = k.let("c", i / chunk)  # (u32 division)
    with k.if_(ir.logical_and(i < n, c > 0)):
        y[i] = y[i] + scanned[c - 1]
    return k.build()


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
        program = chunk_scan(size, chunk)  # one invocation per chunk
        b.step(program, {"x": "x" if level == 0 else f"totals{level - 1}",
                         "y": f"scan{level}", "totals": f"totals{level}"},
               grid=-(-(size // chunk) // program.workgroup[0]))
    for level in range(len(shape) - 2, -1, -1):
        size, chunk = shape[level]
        b.step(add_offsets(size, chunk), {"y": f"scan{level}", "scanned": f"scan{level + 1}"})
    return b.build(returns=["scan0"])


def build(n: int = 1 << 22, seed: int = 0) -> Example:
    if n & (n - 1):
        raise ValueError("n must be a power of two")
    x = np.random.default_rng(seed).integers(0, 2**32, n, dtype=np.uint32)
    return Example(sequence(n), [x], expected=[np.cumsum(x, dtype=np.uint32)])


if __name__ == "__main__":
    from vyre_core.cli import main

    sys.exit(main(["run", __file__, *sys.argv[1:]]))
