"""Grids: inferred from the largest output or from an output's 2-D/3-D shape, given
explicitly, 2-D/3-D workgroups with global, local and workgroup ids per axis, and grids
just past 65,535 workgroups along an axis (what a GPU backend folds across axes: the ids
must be the logical launch's). Expected ids are enumerated in plain numpy."""

from __future__ import annotations

import numpy as np

from vyre_core import ir

from .base import case_of

u32 = ir.u32


def _pack(x, y, z=0):
    """Three small ids in one u32: x | y << 8 | z << 16."""
    return x | (y << 8) | (z << 16)


def _ids():
    """(global, local, workgroup) id triples, one id per axis."""
    return [tuple(f(a) for a in range(3)) for f in (ir.global_id, ir.local_id, ir.workgroup_id)]


def _counted(name: str, workgroup: int, count: int, grid: tuple[int, ...] | None,
             invocations: int):
    """out[gid] = gid + 1 over a too-large or too-small grid, plus an invocation count."""
    k = ir.Kernel(workgroup=(workgroup,))
    out = k.output("out", u32, count=count)
    ran = k.output("ran", u32, count=1)
    gid = k.let("gid", ir.global_id(0))
    out[gid] = gid + 1
    ran.atomic_add(0, 1)
    covered = min(count, invocations)
    expected = np.concatenate([np.arange(1, covered + 1), np.zeros(count - covered)])
    return case_of(name, k, [], [expected, [invocations]], grid=grid)


def grid_inferred_from_largest_output():
    k = ir.Kernel(workgroup=(64,))
    small = k.output("small", u32, count=10)
    big = k.output("big", u32, count=150)
    ran = k.output("ran", u32, count=1)
    gid = k.let("gid", ir.global_id(0))
    big[gid] = _pack(ir.local_id(0), ir.workgroup_id(0))
    small[gid] = gid * 3
    ran.atomic_add(0, 1)
    i = np.arange(150)
    return case_of("grid_inferred_from_largest_output", k, [],
                   [np.arange(10) * 3, _pack(i % 64, i // 64), [192]])


def grid_inferred_2d_workgroup_lays_along_x():
    k = ir.Kernel(workgroup=(4, 4))
    out = k.output("out", u32, count=40)
    g, loc, w = _ids()
    linear = k.let("linear", w[0] * 16 + loc[1] * 4 + loc[0])
    out[linear] = _pack(g[0], g[1], w[1] + w[2] + g[2])
    j = np.arange(40)
    wg, ly, lx = j // 16, (j % 16) // 4, j % 4
    return case_of("grid_inferred_2d_workgroup_lays_along_x", k, [],
                   [_pack(wg * 4 + lx, ly)])


def grid_2d():
    k = ir.Kernel(workgroup=(4, 2))
    outs = [k.output(n, u32, count=48) for n in ("gids", "lids", "wids", "zs")]
    g, loc, w = _ids()
    idx = k.let("idx", g[1] * 8 + g[0])
    outs[0][idx] = _pack(g[0], g[1])
    outs[1][idx] = _pack(loc[0], loc[1])
    outs[2][idx] = _pack(w[0], w[1])
    outs[3][idx] = g[2] + loc[2] + w[2] + 1
    gy, gx = np.divmod(np.arange(48), 8)
    return case_of("grid_2d", k, [], [
        _pack(gx, gy), _pack(gx % 4, gy % 2), _pack(gx // 4, gy // 2), np.ones(48),
    ], grid=(2, 3))


def grid_3d():
    k = ir.Kernel(workgroup=(2, 2, 2))
    outs = [k.output(n, u32, count=48) for n in ("gids", "lids", "wids")]
    g, loc, w = _ids()
    idx = k.let("idx", (g[2] * 2 + g[1]) * 4 + g[0])
    for out, ids in zip(outs, (g, loc, w), strict=True):
        out[idx] = _pack(*ids)
    gz, rest = np.divmod(np.arange(48), 8)
    gy, gx = np.divmod(rest, 4)
    return case_of("grid_3d", k, [], [
        _pack(gx, gy, gz), _pack(gx % 2, gy % 2, gz % 2), _pack(gx // 2, gy // 2, gz // 2),
    ], grid=(2, 1, 3))


def _shaped(name: str, workgroup: tuple[int, ...], shape: tuple[int, ...]):
    """An output of ``shape`` (no grid given): each invocation inside it writes its ids
    at its element, and every invocation counts itself; a longer flat output does not
    decide the grid."""
    k = ir.Kernel(workgroup=workgroup)
    out = k.output("out", u32, shape=shape)
    calls = k.output("calls", u32, count=1)
    k.output("flat", u32, count=4096)
    g, _, _ = _ids()
    extent = (*reversed(shape), 1, 1)[:3]
    inside = ir.logical_and(ir.logical_and(g[0] < extent[0], g[1] < extent[1]),
                            g[2] < extent[2])
    calls.atomic("add", 0, 1)
    with k.if_(inside):
        out[(g[2] * extent[1] + g[1]) * extent[0] + g[0]] = _pack(g[0], g[1], g[2])
    z, rest = np.divmod(np.arange(int(np.prod(shape))), extent[0] * extent[1])
    y, x = np.divmod(rest, extent[0])
    wg = (*workgroup, 1, 1)[:3]
    invocations = int(np.prod([-(-e // w) * w for e, w in zip(extent, wg, strict=True)]))
    return case_of(name, k, [], [_pack(x, y, z), [invocations], np.zeros(4096)])


#: One past the per-dimension limit of every GPU API vyre targets (65,535), and a few.
PAST_LIMIT = 65540


def _folded(name: str, grid: tuple[int, int, int], workgroup: tuple[int, int, int] = (1, 1, 1)):
    """Each invocation writes its global, local and workgroup id on every axis into its
    own slots (x + 1000 y + 1000000 z would not fit: one axis is past 65,535), and counts
    itself: a fold that moves, repeats, drops or pads a workgroup shows in the bytes."""
    k = ir.Kernel(workgroup=workgroup)
    extent = [g * w for g, w in zip(grid, workgroup, strict=True)]
    n = extent[0] * extent[1] * extent[2]
    ids = k.output("ids", u32, count=9 * n)
    ran = k.output("ran", u32, count=1)
    g, loc, w = _ids()
    lin = k.let("lin", g[0] + extent[0] * (g[1] + extent[1] * g[2]))
    for slot, value in enumerate((*g, *loc, *w)):
        ids[lin * 9 + slot] = value
    ran.atomic_add(0, 1)
    gz, gy, gx = np.meshgrid(*(np.arange(e) for e in reversed(extent)), indexing="ij")
    per_axis = [(gx, gy, gz)[a] for a in range(3)]
    columns = [*per_axis, *(per_axis[a] % workgroup[a] for a in range(3)),
               *(per_axis[a] // workgroup[a] for a in range(3))]
    expected = np.stack([c.reshape(-1) for c in columns], axis=1).reshape(-1)
    return case_of(name, k, [], [expected, [n]], grid=grid)


CASES = [
    _folded("grid_folded_x_past_the_axis_limit", (PAST_LIMIT, 1, 1)),
    _folded("grid_folded_y_past_the_axis_limit", (1, PAST_LIMIT, 1)),
    _folded("grid_folded_z_past_the_axis_limit", (1, 1, PAST_LIMIT)),
    _folded("grid_folded_2d_past_the_axis_limit", (PAST_LIMIT, 2, 1)),
    _folded("grid_folded_z_with_a_2_wide_workgroup", (1, 1, PAST_LIMIT), (2, 1, 1)),
    _shaped("grid_inferred_2d_from_an_output_shape", (4, 2), (5, 7)),
    _shaped("grid_inferred_3d_from_an_output_shape", (2, 2, 2), (3, 3, 5)),
    _shaped("grid_inferred_2d_shape_with_a_1d_workgroup", (8,), (3, 10)),
    grid_inferred_from_largest_output(),
    grid_inferred_2d_workgroup_lays_along_x(),
    _counted("grid_inferred_small_workgroup", 8, 20, None, 24),
    _counted("grid_explicit_smaller_than_data", 4, 16, (2,), 8),
    _counted("grid_explicit_larger_than_data", 4, 8, (5,), 20),
    grid_2d(),
    grid_3d(),
]
