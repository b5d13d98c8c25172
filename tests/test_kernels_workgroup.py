"""``vyre.workgroup_sum`` and friends (docs/kernels.md, "Workgroup reductions and
scans"): on the in-process reference, the bytes of the order written down (modelled
here in numpy) for every workgroup size and shape, values with NaN, -0 and infinities;
each refusal at its line. The cpu and wgpu backends' bytes are the reference's in
tests/test_kernels_workgroup_backends.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kernels import launch

import vyre_core as vyre
from vyre_core.errors import KernelSyntaxError, ValidationError

pytestmark = pytest.mark.fast

SIZES = [1, 2, 3, 5, 32, 48, 64, 100, 256]


def _maxnum(a, b, greater: bool):
    """IEEE maximumNumber (minimumNumber): NaN only if both are; -0 below +0."""
    pick = np.where(a > b, a, b) if greater else np.where(a < b, a, b)
    zeros = (a == 0) & (b == 0)
    pick = np.where(zeros, (a + b) if greater else -((-a) + (-b)), pick)
    pick = np.where(np.isnan(a), b, pick)
    return np.where(np.isnan(b), a, pick)


COMBINE = {"sum": np.add, "max": lambda a, b: _maxnum(a, b, True),
           "min": lambda a, b: _maxnum(a, b, False)}


def model(op: str, v: np.ndarray) -> np.ndarray:
    """``op`` over each row of ``v`` (a workgroup per row) in the order of
    vyre_core/kernels/workgroup.py, the result in every lane; a NaN is the canonical
    quiet NaN, as a backend stores it (numpy's ``inf - inf`` has the sign bit set)."""
    got = _model(op, v)
    return np.where(np.isnan(got), np.nan, got).astype(v.dtype) if v.dtype.kind == "f" \
        else got


def _model(op: str, v: np.ndarray) -> np.ndarray:
    s = v.copy()
    size = s.shape[1]
    if op in COMBINE:
        live = size
        while live > 1:
            half = (live + 1) // 2
            n = live - half
            s[:, :n] = COMBINE[op](s[:, :n], s[:, half:half + n])
            live = half
        return np.repeat(s[:, :1], size, axis=1)
    step = 1
    while step < size:
        s = np.concatenate([s[:, :step], s[:, :-step] + s[:, step:]], axis=1)
        step *= 2
    if op == "inclusive_sum":
        return s
    return np.concatenate([np.zeros_like(s[:, :1]), s[:, :-1]], axis=1)


def kernels_for(size: int):
    """One kernel per operation over workgroups of ``size`` (1-D)."""

    @vyre.kernel(workgroup=(size,))
    def all_five(x, total, least, most, inc, exc):
        g = vyre.global_id(0)
        v = x[g]
        s = vyre.workgroup_sum(v)
        lo = vyre.workgroup_min(v)
        hi = vyre.workgroup_max(v)
        a = vyre.workgroup_inclusive_sum(v)
        b = vyre.workgroup_exclusive_sum(v)
        total[g] = s
        least[g] = lo
        most[g] = hi
        inc[g] = a
        exc[g] = b

    return all_five


OPS = ["sum", "min", "max", "inclusive_sum", "exclusive_sum"]


def run_all(size: int, x: np.ndarray) -> dict[str, np.ndarray]:
    outs = [np.zeros_like(x) for _ in OPS]
    launch(kernels_for(size), x.size, (x, *outs))
    return dict(zip(OPS, outs, strict=True))


def specials(dtype) -> np.ndarray:
    if np.dtype(dtype).kind == "f":
        return np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e30, 1e-40], dtype)
    info = np.iinfo(dtype)
    return np.array([0, 1, -1 % (info.max + 1) if info.min == 0 else -1, info.min,
                     info.max], dtype)


def sample(dtype, size: int, groups: int) -> np.ndarray:
    """``groups`` workgroups of values: normal floats or integers of the whole range, a
    tenth of them special (specials)."""
    rng = np.random.default_rng(size)
    if np.dtype(dtype).kind == "f":
        x = rng.standard_normal(groups * size).astype(dtype)
    else:
        x = rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, groups * size, dtype)
    spots = rng.random(x.size) < 0.1
    x[spots] = rng.choice(specials(dtype), int(spots.sum()))
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint32])
@pytest.mark.parametrize("size", SIZES)
def test_every_operation_gives_the_orders_bytes(size, dtype):
    groups = 3
    x = sample(dtype, size, groups)
    got = run_all(size, x)
    with np.errstate(over="ignore", invalid="ignore"):
        for op in OPS:
            want = model(op, x.reshape(groups, size)).reshape(-1)
            assert got[op].tobytes() == want.tobytes(), (op, size)


@settings(max_examples=30, deadline=None)
@given(st.sampled_from([1, 7, 16, 33]),
       st.lists(st.sampled_from([0.0, -0.0, 1.0, -2.5, 3e38, -3e38, float("inf"),
                                 float("-inf"), float("nan"), 1e-45]), min_size=99,
                max_size=99))
def test_adversarial_values_give_the_orders_bytes(size, values):
    x = np.array(values[:2 * size], np.float32)
    got = run_all(size, x)
    with np.errstate(over="ignore", invalid="ignore"):
        for op in OPS:
            want = model(op, x.reshape(2, size)).reshape(-1)
            assert got[op].tobytes() == want.tobytes(), op


@pytest.mark.parametrize("workgroup", [(8, 4), (4, 2, 3)])
def test_a_workgroup_of_two_or_three_axes_counts_its_lanes_x_fastest(workgroup):
    lanes, wx, wy = math.prod(workgroup), workgroup[0], workgroup[1]

    @vyre.kernel(workgroup=workgroup)
    def planes(x, inc):
        lane = vyre.local_id(0) + wx * (vyre.local_id(1) + wy * vyre.local_id(2))
        slot = vyre.workgroup_id(0) * lanes + lane
        a = vyre.workgroup_inclusive_sum(x[slot])
        inc[slot] = a

    x = np.arange(2 * lanes, dtype=np.int32) * 7 - 40
    inc = np.zeros_like(x)
    launch(planes, (2 * workgroup[0], *workgroup[1:]), (x, inc))
    assert inc.tobytes() == model("inclusive_sum", x.reshape(2, lanes)).reshape(-1).tobytes()


def test_the_buffer_is_reused_and_one_call_after_another_reads_its_own_values():
    @vyre.kernel(workgroup=(16,))
    def twice(x, out):
        g = vyre.global_id(0)
        s = vyre.workgroup_sum(x[g])
        t = vyre.workgroup_sum(s - x[g])
        out[g] = t

    x = np.arange(32, dtype=np.int32)
    out = np.zeros_like(x)
    launch(twice, 32, (x, out))
    sums = x.reshape(2, 16).sum(axis=1)
    assert out.tolist() == np.repeat(sums * 16 - sums, 16).tolist()
    workgroup_buffers = [b for b in twice.program(dim=32, args=(x, out)).buffers
                         if b.access.value == "workgroup"]
    assert [(b.dtype.value, b.count) for b in workgroup_buffers] == [("i32", 16)]


# -- refusals --------------------------------------------------------------------------------

def test_inside_an_expression_it_is_refused_with_the_assignment_to_write():
    @vyre.kernel(workgroup=(8,))
    def nested(x, out):
        g = vyre.global_id(0)
        out[g] = vyre.workgroup_sum(x[g]) + 1

    with pytest.raises(KernelSyntaxError) as info:
        nested.program(dim=8, args=(np.zeros(8, np.int32), np.zeros(8, np.int32)))
    assert "inside an expression" in info.value.cause
    assert "s = vyre.workgroup_sum(v)" in info.value.fix
    assert info.value.details["line"] == nested.fn.__code__.co_firstlineno + 3


def test_of_a_bool_it_is_refused():
    @vyre.kernel(workgroup=(8,))
    def flags(x, out):
        g = vyre.global_id(0)
        n = vyre.workgroup_sum(x[g] > 0)
        out[g] = n

    with pytest.raises(KernelSyntaxError) as info:
        flags.program(dim=8, args=(np.zeros(8, np.int32), np.zeros(8, np.int32)))
    assert "of a bool" in info.value.cause and "i32(flag)" in info.value.fix


def test_where_some_invocations_skip_it_the_validator_names_the_line():
    @vyre.kernel(workgroup=(8,))
    def divergent(x, out):
        g = vyre.global_id(0)
        if x[g] > 0:
            s = vyre.workgroup_sum(x[g])
            out[g] = s

    with pytest.raises(ValidationError) as info:
        divergent.program(dim=8, args=(np.zeros(8, np.int32), np.zeros(8, np.int32)))
    line = divergent.fn.__code__.co_firstlineno + 4
    assert any(f.get("code") == "V016" and f"test_kernels_workgroup.py:{line}:" in f["where"]
               for f in info.value.findings)


def test_called_from_python_it_says_it_runs_only_in_a_kernel():
    with pytest.raises(KernelSyntaxError, match="only inside a kernel"):
        vyre.workgroup_sum(1.0)
