"""Launches past the reference interpreter's chunk size (issue 35 item 1): the reference
runs them in chunks of whole workgroups, one after another over the same buffers, and
every invocation sees the ids of the unchunked launch. The chunk size (``MAX_LANES``) is
lowered in process so each case is small; every result is compared as exact bytes with
the same launch run unchunked, and where it is simple, with numpy. Before chunking, the
reference refused any launch past ``MAX_LANES`` invocations."""

from __future__ import annotations

import math

import numpy as np
import pytest

import vyre_reference.interpreter as interpreter
from vyre_core import ir
from vyre_core.driver import Driver
from vyre_core.errors import UnsupportedFeatureError
from vyre_core.registry import Registry
from vyre_core.testing import dispatch_on
from vyre_reference import run
from vyre_reference.chunks import chunks
from vyre_reference.interpreter import execute

pytestmark = pytest.mark.fast  # the fast tier: pure, no process (make test-fast)

u32 = ir.u32
#: (grid, workgroup, chunk lanes): one of each way ``chunks`` cuts a launch (z-slabs,
#: rows of a slab, runs of a row), 1-D, 2-D and 3-D, with chunks that end mid-row.
LAUNCHES = [
    ((37, 1, 1), (8, 1, 1), 64),      # runs of one row, 1-D: the sliced fast path
    ((40, 2, 2), (4, 1, 1), 64),      # runs of rows with y and z origins, still 1-D lanes
    ((9, 3, 1), (2, 4, 1), 32),       # runs of a row, 2-D workgroups
    ((5, 7, 1), (4, 2, 1), 256),      # rows of a slab (6 per chunk: the last is short)
    ((3, 4, 5), (2, 2, 2), 256),      # z-slabs (2 per chunk)
    ((3, 2, 7), (1, 1, 4), 8),        # z-slabs of single workgroups, a 1-D z workgroup
]


def outputs(program: ir.Program, inputs: list[np.ndarray], grid: tuple[int, ...],
            monkeypatch, chunk: int | None = None) -> list[bytes]:
    """The outputs as bytes, run with at most ``chunk`` lanes a chunk (None: unchunked).
    A chunked run must cut the launch in more than one chunk."""
    if chunk is None:
        return [out.tobytes() for out in run(program, inputs, grid=grid)]
    grid3 = tuple(grid) + (1,) * (3 - len(grid))
    per_chunk = chunk // math.prod(program.workgroup)
    assert len(list(chunks(grid3, per_chunk))) > 1
    with monkeypatch.context() as patch:
        patch.setattr(interpreter, "MAX_LANES", chunk)
        return [out.tobytes() for out in run(program, inputs, grid=grid)]


def same_chunked(program: ir.Program, inputs: list[np.ndarray], grid: tuple[int, ...],
                 monkeypatch, chunk: int) -> list[bytes]:
    whole = outputs(program, inputs, grid, monkeypatch)
    assert outputs(program, inputs, grid, monkeypatch, chunk) == whole
    return whole


# -- how a launch is cut -----------------------------------------------------------------

@pytest.mark.parametrize("grid", [(g0, g1, g2) for g0 in (1, 2, 5) for g1 in (1, 3, 4)
                                  for g2 in (1, 2, 7)])
@pytest.mark.parametrize("per_chunk", [1, 2, 3, 4, 6, 13, 200])
def test_chunks_cover_every_workgroup_once_in_ascending_contiguous_ranges(grid, per_chunk):
    gx, gy, _ = grid
    start = 0
    for first, groups in chunks(grid, per_chunk):
        boxed = [x + gx * (y + gy * z)
                 for z in range(first[2], first[2] + groups[2])
                 for y in range(first[1], first[1] + groups[1])
                 for x in range(first[0], first[0] + groups[0])]
        assert sorted(boxed) == list(range(start, start + len(boxed)))
        assert 1 <= len(boxed) <= per_chunk
        start += len(boxed)
    assert start == math.prod(grid)


def test_a_launch_within_the_chunk_size_is_one_chunk():
    assert list(chunks((7, 3, 2), 42)) == [((0, 0, 0), (7, 3, 2))]


# -- ids -----------------------------------------------------------------------------------

def every_id(grid: tuple[int, int, int], wg: tuple[int, int, int]) -> ir.Program:
    """Each invocation stores its 9 ids (global, local, workgroup on x, y, z) at 9 x its
    linear global id."""
    ex, ey, _ = (g * w for g, w in zip(grid, wg, strict=True))
    k = ir.Kernel(workgroup=wg)
    out = k.output("out", u32, 9 * math.prod(grid) * math.prod(wg))
    gid = [ir.global_id(a) for a in range(3)]
    lin = k.let("lin", gid[0] + ex * (gid[1] + ey * gid[2]))
    ids = [*gid, *(ir.local_id(a) for a in range(3)), *(ir.workgroup_id(a) for a in range(3))]
    for slot, value in enumerate(ids):
        out[9 * lin + slot] = value
    return k.build()


def expected_ids(grid: tuple[int, int, int], wg: tuple[int, int, int]) -> np.ndarray:
    extent = [g * w for g, w in zip(grid, wg, strict=True)]
    gz, gy, gx = np.indices(extent[::-1], dtype=np.uint32)
    gid = [gx, gy, gz]
    ids = [*gid, *(g % w for g, w in zip(gid, wg, strict=True)),
           *(g // w for g, w in zip(gid, wg, strict=True))]
    return np.stack([i.reshape(-1) for i in ids], axis=1).reshape(-1).astype(np.uint32)


@pytest.mark.parametrize(("grid", "wg", "chunk"), LAUNCHES)
def test_every_id_of_a_chunked_launch_is_the_unchunked_launchs(grid, wg, chunk, monkeypatch):
    (got,) = same_chunked(every_id(grid, wg), [], grid, monkeypatch, chunk)
    assert got == expected_ids(grid, wg).tobytes()


# -- memory: the 1-D fast path, read_write buffers, into= --------------------------------

def offset_copy() -> ir.Program:
    """Loads and stores at global_id(0) (slices on a 1-D extent), masked and not, over
    buffers shorter than the launch, and a read_write buffer updated in place."""
    k = ir.Kernel(workgroup=(8,))
    x = k.read("x", u32)
    rw = k.read_write("rw", u32)
    out = k.output("out", u32, 250)
    masked = k.output("masked", u32, 250)
    i = k.let("i", ir.global_id(0))
    out[i] = x[i] * 3 + i
    with k.if_(i % 3 != 0):
        masked[i] = x[i] + 1
    rw[i] = rw[i] + x[i] + ir.workgroup_id(0)
    return k.build()


def test_slices_at_the_global_id_take_each_chunks_offset(monkeypatch):
    x = np.arange(100, 200, dtype=np.uint32)  # shorter than both outputs and the launch
    rw = np.arange(270, dtype=np.uint32)
    got = same_chunked(offset_copy(), [x, rw], (37,), monkeypatch, 64)  # 296 lanes
    i = np.arange(296, dtype=np.uint32)
    xi = np.r_[x, np.zeros(196, np.uint32)]
    assert got[0] == (rw + xi[:270] + i[:270] // 8).tobytes()
    assert got[1] == (xi * 3 + i)[:250].tobytes()
    assert got[2] == np.where(i % 3 != 0, xi + 1, 0)[:250].astype(np.uint32).tobytes()


def test_outputs_computed_into_given_arrays_are_shared_by_every_chunk(monkeypatch):
    x = np.arange(100, 200, dtype=np.uint32)
    rw = np.arange(270, dtype=np.uint32)
    program = offset_copy()
    want = run(program, [x, rw], grid=(37,))
    into = [np.full(270, 7, np.uint32), np.full(250, 7, np.uint32), np.full(250, 7, np.uint32)]
    with monkeypatch.context() as patch:
        patch.setattr(interpreter, "MAX_LANES", 64)
        got = execute(program, [x, rw], (37, 1, 1), into=into)
    assert all(g is t for g, t in zip(got, into, strict=True))
    assert [g.tobytes() for g in got] == [w.tobytes() for w in want]


# -- atomics -------------------------------------------------------------------------------

def atomics(ex: int, ey: int) -> ir.Program:
    """Contended adds and maxes into 7 bins, and per-lane atomics whose old values do not
    depend on the order: an add and an exchange on the lane's own slot; the tickets of the
    contended add are kept too."""
    k = ir.Kernel(workgroup=(4, 2))
    bins = k.read_write("bins", u32, count=7)
    top = k.output("top", u32, count=7)
    own = k.read_write("own", u32)
    old = k.output("old", u32, count=2 * ex * ey)
    tickets = k.output("tickets", u32, count=ex * ey)
    lin = k.let("lin", ir.global_id(0) + ex * ir.global_id(1))
    ticket = bins.atomic_add(lin % 7, 1)
    top.atomic_max(lin % 7, lin * 5)
    mine = own.atomic_add(lin, lin)
    swapped = own.atomic("exchange", lin + ex * ey, 9)
    old[2 * lin] = mine
    old[2 * lin + 1] = swapped
    tickets[lin] = ticket
    return k.build()


def test_atomics_total_and_old_values_agree_across_chunks(monkeypatch):
    grid = (5, 7)
    ex, ey = 5 * 4, 7 * 2
    n = ex * ey
    bins = np.arange(7, dtype=np.uint32) * 1000
    own = np.arange(2 * n, dtype=np.uint32) + 50
    whole = outputs(atomics(ex, ey), [bins, own], grid, monkeypatch)
    chunked = outputs(atomics(ex, ey), [bins, own], grid, monkeypatch, 64)
    lin = np.arange(n, dtype=np.uint32)
    counts = np.bincount(lin % 7, minlength=7).astype(np.uint32)
    for got in (whole, chunked):
        out_bins, top, out_own, old, tickets = (np.frombuffer(b, np.uint32) for b in got)
        assert out_bins.tolist() == (bins + counts).tolist()
        assert top.tolist() == [int(lin[lin % 7 == b].max()) * 5 for b in range(7)]
        assert out_own.tolist() == np.r_[own[:n] + lin, np.full(n, 9)].tolist()
        assert old.tolist() == np.stack([own[:n], own[n:]], axis=1).reshape(-1).tolist()
        for b in range(7):  # each bin hands out each ticket once, in any order
            assert sorted(tickets[lin % 7 == b]) == list(range(1000 * b, 1000 * b + counts[b]))
    assert chunked[:4] == whole[:4]


# -- workgroup memory and barriers ---------------------------------------------------------

def workgroup_sums(ex: int) -> ir.Program:
    """A tree reduction in workgroup memory with barriers, one sum per workgroup."""
    k = ir.Kernel(workgroup=(4, 4))
    x = k.read("x", u32)
    sums = k.output("sums", u32, 30)
    tile = k.workgroup_buffer("tile", u32, 16)
    local = k.let("local", ir.local_id(0) + 4 * ir.local_id(1))
    tile[local] = tile[local] + x[ir.global_id(0) + ex * ir.global_id(1)]  # (zeroed first)
    k.barrier()
    with k.loop("s", 0, 4) as s:
        half = k.let("half", ir.lit(8, u32) >> s)
        with k.if_(local < half):
            tile[local] = tile[local] + tile[local + half]
        k.barrier()
    with k.if_(local == 0):
        sums[ir.workgroup_id(0) + 6 * ir.workgroup_id(1)] = tile[0]
    return k.build()


def test_a_per_workgroup_reduction_in_workgroup_memory(monkeypatch):
    grid, ex, ey = (6, 5), 24, 20
    x = np.random.default_rng(0).integers(0, 1000, ex * ey, dtype=np.uint32)
    (got,) = same_chunked(workgroup_sums(ex), [x], grid, monkeypatch, 64)
    want = x.reshape(5, 4, 6, 4).sum(axis=(1, 3), dtype=np.uint32).reshape(-1)
    assert got == want.tobytes()


def test_workgroup_memory_past_the_bound_runs_in_chunks(monkeypatch):
    """A launch whose workgroups need more workgroup memory than the bound in all runs a
    chunk of as many workgroups as fit at a time (before: refused)."""
    grid, ex = (6, 5), 24
    x = np.arange(24 * 20, dtype=np.uint32)
    whole = outputs(workgroup_sums(ex), [x], grid, monkeypatch)
    with monkeypatch.context() as patch:
        patch.setattr(interpreter, "MAX_WORKGROUP_MEMORY_BYTES", 3 * 64)  # 3 workgroups
        assert [o.tobytes() for o in run(workgroup_sums(ex), [x], grid=grid)] == whole


# -- control flow and subgroups ------------------------------------------------------------

def control_flow(ex: int, ey: int) -> ir.Program:
    """Lane-dependent loops (compacted once few lanes run), a while loop with a break,
    and a return part way, on a 2-D grid."""
    k = ir.Kernel(workgroup=(8, 2))
    x = k.read("x", u32)
    out = k.output("out", u32, 2 * ex * ey)
    lin = k.let("lin", ir.global_id(0) + ex * ir.global_id(1))
    acc = k.let("acc", ir.lit(0, u32))
    with k.loop("j", 0, x[lin]) as j:
        k.assign(acc, acc * 3 + j + ir.workgroup_id(1))
        with k.if_(acc % 11 == 10):
            k.break_()
    n = k.let("n", x[lin] + 1)
    with k.while_(n != 1, 64):
        with k.if_(n % 2 == 0):
            k.assign(n, n >> 1)
        with k.else_():
            k.assign(n, 3 * n + 1)
        with k.if_(n == 16):
            k.break_()
    out[2 * lin] = acc
    with k.if_(lin % 5 == 2):
        k.ret()
    out[2 * lin + 1] = n + ir.local_id(0)
    return k.build()


def test_loops_breaks_and_returns_agree_across_chunks(monkeypatch):
    grid, ex, ey = (8, 20), 64, 40
    x = np.random.default_rng(1).integers(0, 4, ex * ey, dtype=np.uint32)
    x[::97] = 300  # a few long loops: the rest of those runs on those lanes alone
    same_chunked(control_flow(ex, ey), [x], grid, monkeypatch, 256)


def subgroups(ex: int, ey: int) -> ir.Program:
    k = ir.Kernel(workgroup=(8, 4), subgroup_size=8)
    x = k.read("x", u32)
    out = k.output("out", u32, 5 * ex * ey)
    lin = k.let("lin", ir.global_id(0) + ex * ir.global_id(1))
    v = k.let("v", x[lin])
    results = [k.subgroup("add", v), k.subgroup("inclusive_add", v),
               k.subgroup("shuffle", v, ir.local_id(0) + 3),
               k.subgroup("ballot", v % 2 == 1), k.subgroup("elect").cast(u32)]
    for slot, value in enumerate(results):
        out[5 * lin + slot] = value
    return k.build()


def test_subgroups_are_formed_within_each_chunks_workgroups(monkeypatch):
    grid, ex, ey = (3, 5), 24, 20
    x = np.random.default_rng(2).integers(0, 100, ex * ey, dtype=np.uint32)
    (got,) = same_chunked(subgroups(ex, ey), [x], grid, monkeypatch, 64)
    rows = x.reshape(ey, 3, 8)  # (a subgroup: 8 lanes of one row of one workgroup)
    sums = np.frombuffer(got, np.uint32).reshape(ey, 3, 8, 5)[..., 0]
    assert (sums == rows.sum(axis=2, keepdims=True)).all()


# -- what is still refused -----------------------------------------------------------------

def test_one_workgroup_past_either_bound_is_refused_with_a_fix(monkeypatch):
    k = ir.Kernel(workgroup=(16, 2))
    tile = k.workgroup_buffer("tile", u32, 16)
    out = k.output("out", u32, 4)
    tile[ir.local_id(0)] = u32(1)
    out[0] = tile[0]
    with monkeypatch.context() as patch:
        patch.setattr(interpreter, "MAX_LANES", 16)
        with pytest.raises(UnsupportedFeatureError, match="workgroup of 32 invocations") \
                as info:
            run(k.build(), [])
        assert info.value.fix == "Use a workgroup of at most 16 invocations."
    with monkeypatch.context() as patch:
        patch.setattr(interpreter, "MAX_WORKGROUP_MEMORY_BYTES", 32)
        with pytest.raises(UnsupportedFeatureError, match="need 64 bytes per workgroup") \
                as info:
            run(k.build(), [])
        assert info.value.fix == "Use at most 32 bytes of workgroup buffers per workgroup."


# -- a real launch past 2**26 invocations --------------------------------------------------

@pytest.mark.processes
def test_a_launch_past_2_to_the_26_runs_on_the_reference_worker():
    """2**26 + 256 invocations storing a byte each, through a Driver and the reference's
    worker: two chunks (about 1 s and 0.7 GiB in the worker). Before: E1102 'dispatch of
    67109120 invocations exceeds the reference backend's 67108864'."""
    n = 2**26 + 256
    k = ir.Kernel(workgroup=(64,))
    out = k.output("out", ir.u8, count=n)
    i = k.let("i", ir.global_id(0))
    out[i] = (i & 255).cast(ir.u8)
    with Driver(Registry.discover("reference")) as drv:
        (got,) = dispatch_on(drv, "reference", k.build(), [], dim=n)
    assert got.dtype == np.uint8 and len(got) == n
    assert (got.reshape(-1, 256) == np.arange(256, dtype=np.uint8)).all()
