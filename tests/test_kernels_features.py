"""Kernel frontend features beyond the statement forms: constant ranges, subgroup
operations, and the frontend gaps a hostile tester found (docs/kernels.md). Pure: run on
the in-process reference."""

from __future__ import annotations

import numpy as np
import pytest
from kernels import launch

import vyre_core as vyre
from vyre_core import f32, i32, u32
from vyre_core.errors import KernelSyntaxError, ValidationError

pytestmark = pytest.mark.fast


def refused(kernel, args, dim=1) -> KernelSyntaxError:
    with pytest.raises(KernelSyntaxError) as info:
        kernel.program(dim=dim, args=args)
    return info.value


def line_of(err: KernelSyntaxError, kernel) -> int:
    return err.details["line"] - kernel.fn.__code__.co_firstlineno


# -- constant ranges ---------------------------------------------------------------------

@vyre.kernel
def ranged(out: vyre.Array[u32], *, T: vyre.Constant[u32](low=1, high=64) = 16):
    out[vyre.global_id(0)] = T


def test_a_constant_range_lowers_to_the_ir_constants_low_and_high():
    c, = ranged.program(dim=1, args=(np.zeros(1, np.uint32),)).constants
    assert (c.default.value, c.low.value, c.high.value) == (16, 1, 64)


@vyre.kernel
def out_of_range(out: vyre.Array[u32], *,
                 T: vyre.Constant[u32](low=1, high=8) = 16):
    out[vyre.global_id(0)] = T


def test_a_default_outside_its_range_is_refused_at_the_parameters_line():
    err = refused(out_of_range, (np.zeros(1, np.uint32),))
    assert line_of(err, out_of_range) == 2  # (the decorator is line 0)
    assert "default 16 and range [1, 8]" in err.cause and "low=1, high=64" in err.fix


def test_a_range_is_given_by_keyword_once():
    with pytest.raises(KernelSyntaxError, match="no bound"):
        vyre.Constant[u32]()
    with pytest.raises(KernelSyntaxError, match="given twice"):
        vyre.Constant[i32](low=1)(high=2)


# -- subgroup operations -----------------------------------------------------------------


@vyre.kernel(workgroup=(16,), subgroup_size=4)
def lanes(x: vyre.Array[i32], out: vyre.Array[i32], bits: vyre.Array[u32]):
    i = vyre.global_id(0)
    v = x[i]
    out[i * 8] = vyre.subgroup_add(v)
    out[i * 8 + 1] = vyre.subgroup_min(v)
    out[i * 8 + 2] = vyre.subgroup_max(v)
    out[i * 8 + 3] = vyre.subgroup_inclusive_add(v) + vyre.subgroup_exclusive_add(v) * 100
    out[i * 8 + 4] = vyre.subgroup_broadcast(v, 2)
    out[i * 8 + 5] = vyre.subgroup_shuffle(v, u32(3 - i % 4))
    out[i * 8 + 6] = vyre.subgroup_and(v) + vyre.subgroup_or(v) * 100 + \
        vyre.subgroup_xor(v) * 10000
    out[i * 8 + 7] = i32(vyre.subgroup_elect())
    bits[i] = vyre.subgroup_ballot(v > 4)


def test_every_subgroup_operation_gives_what_it_says():
    x = np.array([3, 1, 7, 5] * 4, np.int32) + np.repeat(np.arange(4, dtype=np.int32), 4)
    out = np.zeros(16 * 8, np.int32)
    bits = np.zeros(16, np.uint32)
    launch(lanes, 16, (x, out, bits))
    for g in range(4):
        v = x[4 * g:4 * g + 4]
        for lane in range(4):
            got = out[(4 * g + lane) * 8:(4 * g + lane + 1) * 8].tolist()
            a = int(np.bitwise_and.reduce(v))
            o, xo = int(np.bitwise_or.reduce(v)), int(np.bitwise_xor.reduce(v))
            assert got == [v.sum(), v.min(), v.max(),
                           v[:lane + 1].sum() + v[:lane].sum() * 100, v[2], v[3 - lane],
                           a + o * 100 + xo * 10000, int(lane == 0)]
        assert bits[4 * g] == sum(1 << k for k in range(4) if v[k] > 4)


@vyre.kernel
def no_size(out: vyre.Array[i32]):
    out[0] = vyre.subgroup_add(1)


def test_a_subgroup_operation_needs_a_subgroup_size():
    err = refused(no_size, (np.zeros(1, np.int32),))
    assert line_of(err, no_size) == 2 and "subgroup_size=8" in err.fix


@vyre.kernel(subgroup_size=8)
def float_sum(x: vyre.Array[f32], out: vyre.Array[f32]):
    i = vyre.global_id(0)
    out[i] = vyre.subgroup_add(x[i])


@vyre.kernel(subgroup_size=8)
def i32_lane(x: vyre.Array[i32]):
    i = vyre.global_id(0)
    x[i] = vyre.subgroup_shuffle(x[i], i)


def test_subgroup_operations_keep_the_irs_typing():
    err = refused(float_sum, (np.zeros(8, np.float32), np.zeros(8, np.float32)))
    assert line_of(err, float_sum) == 3 and "of a f32" in err.cause
    err = refused(i32_lane, (np.zeros(8, np.int32),))
    assert line_of(err, i32_lane) == 3 and "u32(" in err.fix


@vyre.kernel(subgroup_size=8)
def divergent(x: vyre.Array[i32]):
    i = vyre.global_id(0)
    if i < 3:
        x[i] = vyre.subgroup_add(x[i])


def test_a_subgroup_finding_names_its_python_line():
    with pytest.raises(ValidationError) as info:
        divergent.program(dim=8, args=(np.zeros(8, np.int32),))
    finding, = info.value.details["findings"]
    line = divergent.fn.__code__.co_firstlineno + 4
    assert finding["code"] == "V035" and f"{__file__}:{line}:" in finding["where"]


# -- gaps a hostile tester found ---------------------------------------------------------

@vyre.kernel
def shifted(x: vyre.Array[u32]):
    x[0] = x[0] << 33


def test_a_constant_shift_count_past_the_width_is_refused():
    err = refused(shifted, (np.zeros(1, np.uint32),))
    assert line_of(err, shifted) == 2 and "by 33" in err.cause and "0 to 31" in err.fix


@vyre.kernel
def negative_bound(n: u32, out: vyre.Array[i32]):
    if n > -1:
        out[0] = 1


def test_an_unsigned_value_against_a_negative_number_names_the_cast():
    err = refused(negative_bound, (3, np.zeros(1, np.int32)))
    assert line_of(err, negative_bound) == 2 and "i64(n)" in err.fix


@vyre.func
def scaled_sum(v, scale=2, bias=0.5):
    return f32(v) * f32(scale) + bias


@vyre.kernel
def defaults(x: vyre.Array[i32], out: vyre.Array[f32]):
    i = vyre.global_id(0)
    out[i] = scaled_sum(x[i]) + scaled_sum(x[i], 3) + scaled_sum(x[i], 1, 4.0)


def test_a_func_fills_left_off_arguments_from_its_defaults():
    x = np.array([1, -2, 5], np.int32)
    out = np.zeros(3, np.float32)
    launch(defaults, 3, (x, out))
    f = x.astype(np.float32)
    want = (f * 2 + np.float32(0.5)) + (f * 3 + np.float32(0.5)) + (f * 1 + np.float32(4))
    assert out.tobytes() == want.tobytes()


@vyre.func
def list_default(v, table=(1, 2)):
    return v


@vyre.kernel
def calls_list_default(x: vyre.Array[i32]):
    x[0] = list_default(x[0])


def test_a_default_that_is_not_a_number_is_refused_with_a_fix():
    err = refused(calls_list_default, (np.zeros(1, np.int32),))
    assert line_of(err, calls_list_default) == 2 and "defaults to a tuple" in err.cause
    assert "Pass table in the call" in err.fix
    err = refused(vyre.kernel(too_few_arguments), (np.zeros(1, np.int32),))
    assert "takes 1 to 2 positional argument(s), got 0" in err.cause


def too_few_arguments(x: vyre.Array[i32]):
    x[0] = list_default()


@vyre.func
def collatz_steps(n, limit):
    steps = 0
    while n != 1 and limit > 0:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
        limit -= 1
    return steps


@vyre.kernel
def collatz(x: vyre.Array[i32], out: vyre.Array[i32]):
    i = vyre.global_id(0)
    v = x[i]
    out[i] = collatz_steps(v, 100) * 1000 + v   # the caller's v is not changed


def test_a_func_assigns_its_scalar_parameters_as_locals_of_the_call():
    x = np.array([1, 6, 7, 27], np.int32)
    out = np.zeros(4, np.int32)
    launch(collatz, 4, (x, out))

    def steps(n, limit):
        s = 0
        while n != 1 and limit > 0:
            n = n // 2 if n % 2 == 0 else 3 * n + 1
            s, limit = s + 1, limit - 1
        return s
    assert out.tolist() == [steps(v, 100) * 1000 + v for v in x.tolist()]


@vyre.func
def rebinds_array(a, i):
    a = i
    return a


@vyre.kernel
def calls_rebinds_array(x: vyre.Array[i32]):
    x[0] = rebinds_array(x, 0)


def test_a_func_assigning_an_array_parameter_is_refused_at_its_line():
    err = refused(calls_rebinds_array, (np.zeros(1, np.int32),))
    assert err.details["line"] == rebinds_array.fn.__code__.co_firstlineno + 2
    assert "assigns array parameter 'a'" in err.cause and "x[i] = v" in err.fix


@vyre.func
def overwrite_then_return(v, a):
    a[0] = 100
    return v


@vyre.func
def doubled(v):
    return v + v


@vyre.func
def next_ticket(c):
    c[1] += 1
    return c[1]


@vyre.kernel
def argument_order(a: vyre.Array[i32], c: vyre.Array[u32], out: vyre.Array[i32]):
    out[0] = overwrite_then_return(a[0], a)          # a[0] read before the body stores
    out[1] = i32(doubled(vyre.atomic_add(c, 0, 1)))  # the atomic runs once
    out[2] = i32(doubled(next_ticket(c)))            # the func's store runs once


def test_a_funcs_arguments_are_evaluated_once_before_its_body():
    a = np.array([5], np.int32)
    c = np.array([3, 10], np.uint32)
    out = np.zeros(3, np.int32)
    launch(argument_order, 1, (a, c, out))
    assert out.tolist() == [5, 6, 22] and a.tolist() == [100] and c.tolist() == [4, 11]
