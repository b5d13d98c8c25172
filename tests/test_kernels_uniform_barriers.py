"""A barrier in a loop whose condition reads a local that is the same in every invocation
of the workgroup: the tree reduction (``while s > 0: ...; s = s // 2``) is accepted and
gives numpy's bytes on the reference, cpu and wgpu backends; a local that may differ
between invocations (from ``local_id``, a load at a varying index, an assignment under a
varying branch, itself carried with a varying value) still makes it V016, at the
barrier's Python line."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import vyre_core as vyre
from vyre_core import i32, u32
from vyre_core.errors import ValidationError

BACKENDS = ["reference", "cpu", "wgpu"]
GROUP = 128


@vyre.kernel(workgroup=(GROUP,))
def halving(x: vyre.Array[u32], out: vyre.Array[u32]):
    lid = vyre.local_id(0)
    tile = vyre.shared(u32, 128)
    tile[lid] = x[vyre.global_id(0)]
    vyre.barrier()
    s = 64
    while s > 0:
        if lid < s:
            tile[lid] += tile[lid + s]
        vyre.barrier()
        s = s // 2
    if lid == 0:
        out[vyre.workgroup_id(0)] = tile[0]


@vyre.kernel(workgroup=(GROUP,))
def shifting(half: i32, x: vyre.Array[u32], out: vyre.Array[u32], *,
             SPREAD: vyre.Constant[i32](low=1, high=4) = 1):
    lid = vyre.local_id(0)
    tile = vyre.shared(u32, 128)
    tile[lid] = x[vyre.global_id(0)]
    vyre.barrier()
    s = half * SPREAD + len(x) * 0 + vyre.workgroup_id(0) * 0   # a scalar, a constant, ...
    while s > 0:
        if lid < s:
            tile[lid] += tile[lid + s]
        vyre.barrier()
        s >>= 1
    if lid == 0:
        out[vyre.workgroup_id(0)] = tile[0]


def sums_of_groups(x: np.ndarray) -> np.ndarray:
    return x.reshape(-1, GROUP).sum(axis=1, dtype=np.uint32)


@pytest.mark.fast
def test_the_reductions_lower_to_valid_programs():
    x, out = np.zeros(GROUP, np.uint32), np.zeros(1, np.uint32)
    assert not halving.exact(dim=GROUP, args=(x, out))   # it synchronizes: whole groups
    shifting.program(dim=GROUP, args=(64, x, out))       # (valid: no ValidationError)


@pytest.mark.processes
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_tree_reduction_runs_with_numpys_bytes(backend):
    x = (np.arange(8 * GROUP, dtype=np.uint64) * 2654435761 % 2**32).astype(np.uint32)
    want = sums_of_groups(x)
    with vyre.Driver() as drv:
        out = np.zeros(8, np.uint32)
        drv.launch(halving, dim=len(x), args=(x, out), backend=backend)
        assert out.tobytes() == want.tobytes()
        out = np.zeros(8, np.uint32)
        drv.launch(shifting, dim=len(x), args=(32, x, out), backend=backend,
                   config=vyre.DispatchConfig(constants={"SPREAD": 2}))
        assert out.tobytes() == want.tobytes()


# -- refused: the local may differ between invocations ------------------------------------

@vyre.kernel(workgroup=(GROUP,))
def from_local_id(out: vyre.Array[u32]):
    s = vyre.local_id(0)
    while s > 0:
        vyre.barrier()  # <- V016
        s = s // 2
    out[0] = 1


@vyre.kernel(workgroup=(GROUP,))
def carried_with_local_id(out: vyre.Array[u32]):
    s = 64
    while s > 0:
        vyre.barrier()  # <- V016
        s = s - 1 - vyre.local_id(0)
    out[0] = 1


@vyre.kernel(workgroup=(GROUP,))
def under_a_varying_branch(out: vyre.Array[u32]):
    s = 64
    if vyre.local_id(0) == 0:
        s = 32
    while s > 0:
        vyre.barrier()  # <- V016
        s = s // 2
    out[0] = 1


@vyre.kernel(workgroup=(GROUP,))
def loaded_at_a_varying_index(x: vyre.Array[i32], out: vyre.Array[u32]):
    s = x[vyre.global_id(0)]
    while s > 0:
        vyre.barrier()  # <- V016
        s = s // 2
    out[0] = 1


@vyre.kernel(workgroup=(GROUP,))
def through_another_local(out: vyre.Array[u32]):
    s = 64
    t = 64
    while s > 0:
        vyre.barrier()  # <- V016
        s = t // 2
        t = vyre.global_id(0)
    out[0] = 1


REFUSED = [from_local_id, carried_with_local_id, under_a_varying_branch,
           loaded_at_a_varying_index, through_another_local]


def marked_line(kernel: vyre.kernels.KernelFunction) -> int:
    lines, first = inspect.getsourcelines(kernel.fn)
    return first + next(n for n, text in enumerate(lines) if "# <- V016" in text)


@pytest.mark.fast
@pytest.mark.parametrize("kernel", REFUSED, ids=lambda k: k.__name__)
def test_a_barrier_under_a_varying_local_is_v016_at_its_line(kernel):
    args = [np.zeros(GROUP, np.int32)] * (len(kernel.params.names) - 1) + \
        [np.zeros(1, np.uint32)]
    with pytest.raises(ValidationError) as info:
        kernel.program(dim=GROUP, args=args)
    found = info.value.details["findings"]
    assert [f["code"] for f in found] == ["V016"]
    assert found[0]["cause"] == "workgroup barrier under non-uniform control flow"
    assert found[0]["where"].startswith(f"{__file__}:{marked_line(kernel)}: ")
