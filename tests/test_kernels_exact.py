"""A launch runs exactly ``dim`` invocations (docs/kernels.md, "How many invocations
run"): the lowering returns those past ``dim``, read from the hidden launch buffer, so a
kernel needs no bounds check; a kernel that synchronizes its workgroup runs whole
workgroups. Pure: the in-process reference (tests/test_kernels_features.py's launch)."""

from __future__ import annotations

import numpy as np
import pytest

import vyre_core as vyre
from tests.test_kernels_features import launch
from vyre_core import i32, u32
from vyre_core.example import Example
from vyre_reference import run

pytestmark = pytest.mark.fast


@vyre.kernel
def count(data: vyre.Array[i32], bins: vyre.Array[u32]):
    vyre.atomic_add(bins, data[vyre.global_id(0)], 1)


@pytest.mark.parametrize("n", [1, 5, 63, 65, 130])
def test_an_unguarded_histogram_counts_exactly_len_data(n):
    """Fails on main before this commit: the 64-wide workgroup's excess invocations load
    0 past the end of data and count it into bin 0."""
    data = (np.arange(n, dtype=np.int32) * 7 + 1) % 4
    bins = np.zeros(4, np.uint32)
    launch(count, n, (data, bins))
    assert bins.tolist() == np.bincount(data, minlength=4).tolist()
    assert count.exact(dim=n, args=(data, bins))


@vyre.kernel
def ones(out: vyre.Array[u32]):
    vyre.atomic_add(out, 0, 1)


@vyre.kernel
def mark2(hits: vyre.Array[u32], out: vyre.Array[u32, 2]):
    r, c = vyre.global_id(0), vyre.global_id(1)
    vyre.atomic_add(hits, 0, 1)
    out[r, c] = u32(1)


@vyre.kernel
def mark3(hits: vyre.Array[u32]):
    vyre.atomic_add(hits, 0, 1)


@pytest.mark.parametrize("dim", [7, 64, 100])
def test_a_1d_launch_runs_exactly_dim_invocations(dim):
    out = np.zeros(1, np.uint32)
    launch(ones, dim, (out,))
    assert out.tolist() == [dim]


def test_a_2d_and_a_3d_launch_run_exactly_dim_invocations():
    hits, out = np.zeros(1, np.uint32), np.zeros((5, 7), np.uint32)
    launch(mark2, (5, 6), (hits, out))                # a workgroup of (8, 8) covers 64
    assert hits.tolist() == [30] and out[:, :6].all() and not out[:, 6].any()
    hits = np.zeros(1, np.uint32)
    launch(mark3, (3, 5, 6), (hits,))                 # (4, 4, 4) workgroups cover 4*8*8
    assert hits.tolist() == [3 * 5 * 6]


def test_a_new_dim_is_not_a_new_compile():
    before = ones.compiles
    for dim in (3, 17, 200):
        out = np.zeros(1, np.uint32)
        launch(ones, dim, (out,))
        assert out.tolist() == [dim]
    assert ones.compiles - before <= 1
    assert ones.plan(3, (out,)).program == ones.plan(200, (out,)).program


@vyre.kernel(workgroup=(8,))
def synced(out: vyre.Array[u32]):
    tile = vyre.shared(u32, 8)
    tile[vyre.local_id(0)] = u32(1)
    vyre.barrier()
    if vyre.local_id(0) == 0:
        vyre.atomic_add(out, 0, tile[0] + tile[7])


def test_a_synchronizing_kernel_runs_whole_workgroups():
    out = np.zeros(1, np.uint32)
    launch(synced, 9, (out,))                         # 2 workgroups of 8, both whole
    assert out.tolist() == [4]
    plan = synced.plan(9, (out,))
    assert not plan.exact and not synced.exact(dim=9, args=(out,))
    assert [b.name for b in plan.program.inputs] == ["out"]   # no launch buffer


def test_an_example_of_a_kernel_carries_its_dim():
    data = np.array([3, 3, 1], np.int32)
    example = Example.of_kernel(count, 3, (data, np.zeros(4, np.uint32)))
    assert example.inputs[-1].tolist() == [3]
    bins, = run(example.program, example.inputs, grid=(1, 1, 1))
    assert bins.tolist() == [0, 1, 0, 2]


@pytest.mark.processes
def test_a_sequence_step_runs_exactly_its_dim():
    b = vyre.SequenceBuilder()
    b.input("data", vyre.ir.i32, 5)
    b.transient("bins", vyre.ir.u32, 4)
    b.step(count, {}, dim=5)
    seq = b.build(returns=["bins"])
    with vyre.Driver() as drv:
        bins, = drv.dispatch(seq, [np.array([1, 2, 2, 3, 1], np.int32)],
                             backend="reference")
    assert bins.tolist() == [0, 2, 2, 1]
