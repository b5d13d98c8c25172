"""jacobi: a stencil iterated until it converges, with the loop in the worker.

Heat on a square grid of u32: the top edge is held hot, the other edges cold, and every
interior cell becomes the average of its four neighbours (rounded down: integer
arithmetic, so every backend gets the same bits). One iteration of the sequence's loop is
``SWEEPS`` sweeps between two grids; the last one sets a flag when any cell changed. The
loop runs until an iteration leaves the flag clear (at most ``MAX_ITERATIONS``), in the
worker: no round trip per iteration, and only the final grid comes back.

Run it: ``python examples/jacobi.py`` or ``vyre run jacobi``.
"""

from __future__ import annotations

import sys

import numpy as np

from vyre_core import Example, SequenceBuilder, ir

SWEEPS = 8          # sweeps per loop iteration (an even number: the grid ends where it began)
MAX_ITERATIONS = 2000
HOT = 1 << 20


def sweep(side: int, flagged: bool) -> ir.Program:
    """dst = one Jacobi sweep of src; with ``flagged``, flag[0] = 1 where a cell changed."""
    n = side * side
    k = ir.Kernel(workgroup=(16, 16))
    src = k.read("src", ir.u32, n)
    dst = k.output("dst", ir.u32, count=n)
    flag = k.read_write("flag", ir.u32, 1) if flagged else None
    x = k.let("x", ir.global_id(0))
    y = k.let("y", ir.global_id(1))
    with k.if_(ir.logical_and(x < side, y < side)):
        at = k.let("at", y * side + x)
        edge = ir.logical_or(ir.logical_or(x == 0, y == 0),
                             ir.logical_or(x == side - 1, y == side - 1))
        new = k.let("new", src[at])
        with k.if_(ir.logical_not(edge)):
            k.assign(new, (src[at - side] + src[at + side] + src[at - 1] + src[at + 1]) >> 2)
        dst[at] = new
        if flag is not None:
            with k.if_(new != src[at]):
                flag[0] = ir.u32(1)
    return k.build()


def sequence(side: int):
    b = SequenceBuilder()
    b.input("start", ir.u32, side * side)
    b.transient("u", ir.u32, side * side)
    b.transient("v", ir.u32, side * side)
    b.transient("changed", ir.u32, 1)
    grid = (-(-side // 16), -(-side // 16))
    b.step(sweep(side, False), {"src": "start", "dst": "u"}, grid=grid)
    with b.loop(until_zero="changed", max_iterations=MAX_ITERATIONS):
        for s in range(SWEEPS):
            last = s == SWEEPS - 1
            src, dst = ("u", "v") if s % 2 == 0 else ("v", "u")
            bind = {"src": src, "dst": dst, **({"flag": "changed"} if last else {})}
            b.step(sweep(side, last), bind, grid=grid)
    return b.build(returns=["u"])


def start_grid(side: int) -> np.ndarray:
    grid = np.zeros((side, side), np.uint32)
    grid[0, :] = HOT
    return grid.reshape(-1)


def in_numpy(start: np.ndarray, side: int) -> np.ndarray:
    def step(u: np.ndarray) -> np.ndarray:
        v = u.copy()
        v[1:-1, 1:-1] = (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]) >> 2
        return v

    u = step(start.reshape(side, side))
    for _ in range(MAX_ITERATIONS):
        for _ in range(SWEEPS):
            before, u = u, step(u)
        if np.array_equal(before, u):
            break
    return u.reshape(-1)


def build(side: int = 32) -> Example:
    start = start_grid(side)
    return Example(sequence(side), [start], expected=[in_numpy(start, side)])


if __name__ == "__main__":
    from vyre_core.cli import main

    sys.exit(main(["run", __file__, *sys.argv[1:]]))
