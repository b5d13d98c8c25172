"""Workgroup memory and barriers: a tree reduction, per-workgroup zero-initialised memory
(with out-of-bounds rules), atomics on workgroup memory, a 2-D tiled transpose."""

from __future__ import annotations

import numpy as np

from vyre_core import ir

from .base import arr, case_of

u32 = ir.u32


def workgroup_tree_reduction_sum():
    size, groups = 64, 4
    k = ir.Kernel(workgroup=(size,))
    x = k.read("x", u32)
    sums = k.output("sums", u32, count=groups)
    shared = k.workgroup_buffer("shared", u32, count=size)
    lid = k.let("lid", ir.local_id(0))
    shared[lid] = x[ir.global_id(0)]
    k.barrier()
    with k.loop("step", 0, 6) as step:
        stride = k.let("stride", ir.u32(size // 2) >> step)
        with k.if_(lid < stride):
            shared[lid] = shared[lid] + shared[lid + stride]
        k.barrier()
    with k.if_(lid == 0):
        sums[ir.workgroup_id(0)] = shared[0]
    xs = (np.arange(size * groups) * 37 + 11) % 1000
    return case_of("workgroup_tree_reduction_sum", k, [arr(u32, xs)],
                   [xs.reshape(groups, size).sum(axis=1)], grid=(groups,))


def workgroup_memory_per_workgroup_zero_init():
    size, groups = 8, 3
    k = ir.Kernel(workgroup=(size,))
    seen = k.output("seen", u32, count=size * groups)
    first = k.output("first", u32, count=size * groups)
    past_end = k.output("past_end", u32, count=size * groups)
    shared = k.workgroup_buffer("shared", u32, count=size)
    lid = k.let("lid", ir.local_id(0))
    gid = k.let("gid", ir.global_id(0))
    before = k.let("before", shared[lid])          # zero in every workgroup, every dispatch
    k.barrier()
    shared[lid] = ir.workgroup_id(0) * 100 + lid + 1
    shared[lid + size] = 77                        # past count: dropped
    k.barrier()
    seen[gid] = shared[(lid + 1) % size]           # a neighbour in the same workgroup
    first[gid] = before
    past_end[gid] = shared[lid + size] + 5         # past count: reads 0
    g = np.arange(size * groups)
    return case_of("workgroup_memory_per_workgroup_zero_init", k, [], [
        (g // size) * 100 + (g % size + 1) % size + 1, np.zeros(size * groups),
        np.full(size * groups, 5),
    ])


def workgroup_atomic_counter():
    size, groups = 32, 3
    k = ir.Kernel(workgroup=(size,))
    flags = k.read("flags", u32)
    counts = k.output("counts", u32, count=groups)
    counter = k.workgroup_buffer("counter", u32, count=1)
    with k.if_(flags[ir.global_id(0)] != 0):
        counter.atomic_add(0, 1)
    k.barrier()
    with k.if_(ir.local_id(0) == 0):
        counts[ir.workgroup_id(0)] = counter[0]
    fl = (np.arange(size * groups) * 5 + 3) % 7 < 3
    return case_of("workgroup_atomic_counter", k, [arr(u32, fl)],
                   [fl.reshape(groups, size).sum(axis=1)], grid=(groups,))


def workgroup_2d_tile_transpose():
    tile, height, width = 4, 12, 8
    k = ir.Kernel(workgroup=(tile, tile))
    m = k.read("m", u32, count=height * width)
    out = k.output("out", u32, count=height * width)
    shared = k.workgroup_buffer("shared", u32, count=tile * tile)
    lx, ly = k.let("lx", ir.local_id(0)), k.let("ly", ir.local_id(1))
    wx, wy = k.let("wx", ir.workgroup_id(0)), k.let("wy", ir.workgroup_id(1))
    shared[ly * tile + lx] = m[ir.global_id(1) * width + ir.global_id(0)]
    k.barrier()
    out[(wx * tile + ly) * height + wy * tile + lx] = shared[lx * tile + ly]
    mat = (np.arange(height * width) * 13 + 1).reshape(height, width)
    return case_of("workgroup_2d_tile_transpose", k, [arr(u32, mat)], [mat.T],
                   grid=(width // tile, height // tile))


CASES = [
    workgroup_tree_reduction_sum(), workgroup_memory_per_workgroup_zero_init(),
    workgroup_atomic_counter(), workgroup_2d_tile_transpose(),
]
