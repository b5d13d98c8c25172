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

import vyre_core as vyre
from vyre_core import Example, SequenceBuilder, i32, ir, u32

SWEEPS = 8          # sweeps per loop iteration (an even number: the grid ends where it began)
MAX_ITERATIONS = 2000
HOT = 1 << 20


@vyre.func
def relaxed(src, side, x, y):
    """Cell (x, y) after one sweep: the floor of its neighbours' mean, or itself on an edge."""
    at = y * side + x
    new = src[at]
    if not (x == 0 or y == 0 or x == side - 1 or y == side - 1):
        new = (src[at - side] + src[at + side] + src[at - 1] + src[at + 1]) >> 2
    return new


@vyre.kernel(workgroup=(16, 16))
def sweep(side: i32, src: vyre.Array[u32], dst: vyre.Array[u32]):
    """dst = one Jacobi sweep of src, a ``side`` x ``side`` grid."""
    x, y = vyre.global_id(0), vyre.global_id(1)
    if x < side and y < side:
        dst[y * side + x] = relaxed(src, side, x, y)


@vyre.kernel(workgroup=(16, 16))
def flagged_sweep(side: i32, src: vyre.Array[u32], dst: vyre.Array[u32],
                  flag: vyre.Array[u32]):
    """``sweep``, and flag[0] = 1 where a cell changed."""
    x, y = vyre.global_id(0), vyre.global_id(1)
    if x < side and y < side:
        new = relaxed(src, side, x, y)
        dst[y * side + x] = new
        if new != src[y * side + x]:
            flag[0] = 1


def sequence(side: int):
    b = SequenceBuilder()
    b.input("start", ir.u32, side * side)
    b.constant("side", ir.i32, [side])
    b.transient("u", ir.u32, side * side)
    b.transient("v", ir.u32, side * side)
    b.transient("changed", ir.u32, 1)
    dim = (side, side)
    b.step(sweep, {"src": "start", "dst": "u"}, dim=dim)
    with b.loop(until_zero="changed", max_iterations=MAX_ITERATIONS):
        for s in range(SWEEPS):
            last = s == SWEEPS - 1
            src, dst = ("u", "v") if s % 2 == 0 else ("v", "u")
            bind = {"src": src, "dst": dst, **({"flag": "changed"} if last else {})}
            b.step(flagged_sweep if last else sweep, bind, dim=dim)
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
