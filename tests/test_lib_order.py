"""vyre.lib's order of operations, checked without a process: the passes of
``vyre_core.lib.passes.levels``, the numpy model of the order (tests/lib_model.py)
against the exact sum and against numpy within the bounds docs/lib.md states, and the
arguments every function checks before any work."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from lib_model import arg, chain, gamma, numpy_chain, reduce

from vyre_core.errors import InvalidInputError
from vyre_core.lib.args import as_input, split
from vyre_core.lib.passes import FAN_IN, levels

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("n", [1, 2, 255, 256, 257, 65535, 65536, 65537, 1 << 24, 2**31 - 1])
def test_each_pass_combines_at_most_fan_in_elements_and_the_last_leaves_one(n):
    passes = levels(n)
    assert passes[0][0] == n and passes[-1][1] == 1
    for (_, m), (after, _) in itertools.pairwise(passes):
        assert after == m
    assert all(-(-count // m) <= FAN_IN for count, m in passes)


def test_the_chain_of_additions_is_what_docs_lib_md_says():
    assert [chain(n) for n in (1, 2, 256, 257, 1000, 65536, 1 << 24)] == [
        0, 1, 255, 128 + 1, 249 + 3, 255 + 255, 765]


def _arrays(dtype, elements):
    shapes = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=40)
    return hnp.arrays(dtype, shapes, elements=elements)


def _axis(x, data):
    return data.draw(st.one_of(st.none(), st.integers(-x.ndim, x.ndim - 1)))


FINITE32 = st.floats(-1e6, 1e6, width=32)


@settings(max_examples=60, deadline=None)
@given(x=_arrays(np.float32, FINITE32), data=st.data())
def test_the_order_is_within_its_bound_of_the_exact_sum_and_of_numpys(x, data):
    axis = _axis(x, data)
    ours = reduce("sum", x, axis).astype(np.float64)
    wide = x.astype(np.float64)
    exact = np.apply_along_axis(math.fsum, 0, wide.reshape(-1)) if axis is None else \
        np.apply_along_axis(math.fsum, axis, wide)
    size = np.abs(wide).sum(axis=axis)
    n = x.size if axis is None else x.shape[axis]
    k = chain(n)
    assert np.all(np.abs(ours - exact) <= gamma(k, np.float32) * size + 1e-300)
    contiguous = axis is None or axis % x.ndim == x.ndim - 1
    bound = (gamma(k, np.float32) + gamma(numpy_chain(n, contiguous), np.float32)) * size
    assert np.all(np.abs(ours - np.sum(x, axis=axis)) <= bound)


SPECIAL = st.sampled_from([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 3e38, -3e38,
                           1.0, -1.0])


@settings(max_examples=60, deadline=None)
@given(x=_arrays(np.float32, st.one_of(FINITE32, SPECIAL)), data=st.data())
def test_max_min_argmax_argmin_are_numpys_values_and_indices(x, data):
    axis = _axis(x, data)
    for name in ("max", "min"):
        ours, theirs = reduce(name, x, axis), getattr(np, name)(x, axis=axis)
        assert np.array_equal(ours, theirs, equal_nan=True)  # (-0 == +0: signs may differ)
    for name in ("argmax", "argmin"):
        assert np.array_equal(arg(name, x, axis), getattr(np, name)(x, axis=axis))


@settings(max_examples=40, deadline=None)
@given(x=_arrays(np.int32, st.integers(-2**31, 2**31 - 1)), data=st.data())
def test_integer_sums_and_products_wrap_in_their_type(x, data):
    axis = _axis(x, data)
    assert np.array_equal(reduce("sum", x, axis), np.sum(x, axis=axis, dtype=np.int32))
    assert np.array_equal(reduce("prod", x, axis), np.prod(x, axis=axis, dtype=np.int32))
    assert np.array_equal(arg("argmax", x, axis), np.argmax(x, axis=axis))


def test_a_zeros_sign_is_ieee_maximum_and_minimum_whatever_the_order():
    for x in (np.array([-0.0, 0.0], np.float32), np.array([0.0, -0.0], np.float32)):
        assert not np.signbit(reduce("max", x)) and np.signbit(reduce("min", x))
    assert np.signbit(reduce("sum", np.full(1000, -0.0, np.float32)))


@pytest.mark.parametrize(("shape", "axis", "view"), [
    ((4, 5, 6), None, (1, 120, 1, ())), ((4, 5, 6), 0, (1, 4, 30, (5, 6))),
    ((4, 5, 6), 1, (4, 5, 6, (4, 6))), ((4, 5, 6), -1, (20, 6, 1, (4, 5))),
    ((), None, (1, 1, 1, ()))])
def test_an_axis_splits_the_shape_into_outer_n_inner(shape, axis, view):
    got = split(shape, axis)
    assert (got.outer, got.n, got.inner, got.shape) == view


@pytest.mark.parametrize(("shape", "axis", "cause", "fix"), [
    ((4, 5), 2, "axis 2 is out of range for an array of 2 dimensions", "from -2 to 1"),
    ((4, 5), -3, "axis -3 is out of range", "from -2 to 1"),
    ((), 0, "axis 0 is out of range for an array of 0 dimensions", "pass axis=None"),
    ((4, 5), (0, 1), "axis=(0, 1) is not one axis", "reduce one after another"),
    ((4, 5), 1.0, "axis=1.0 is not one axis", "Pass one int axis")])
def test_a_bad_axis_is_refused_with_a_fix(shape, axis, cause, fix):
    with pytest.raises(InvalidInputError) as err:
        split(shape, axis)
    assert cause in err.value.cause and fix in err.value.fix


@pytest.mark.parametrize("dtype", [np.int64, np.uint8, np.bool_, np.complex64, object])
def test_a_dtype_lib_does_not_compute_in_is_refused_with_the_conversion(dtype):
    with pytest.raises(InvalidInputError) as err:
        as_input(np.zeros(3, dtype), "x")
    assert "does not compute in" in err.value.cause
    assert "x.astype(np.float32)" in err.value.fix and "int32" in err.value.fix


def test_floats_only_refuses_integers_naming_the_float_dtypes():
    with pytest.raises(InvalidInputError) as err:
        as_input(np.zeros(3, np.int32), "x", floats_only=True)
    assert "int32" not in err.value.fix and "float32" in err.value.fix


def test_a_non_contiguous_array_is_made_contiguous():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
    assert as_input(x, "x").flags.c_contiguous


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_a_backend_without_the_dtype_is_passed_over_or_refused_with_the_reasons(dtype):
    """Routing decides (no process): lib's passes in f16/f64 go past a backend that lacks
    the dtype, and naming that backend raises NoCapableBackendError with why."""
    from test_routing import GPU, REFERENCE, router

    from vyre_core.errors import NoCapableBackendError
    from vyre_core.lib.reduce import _sequence

    seq = _sequence("argmax", np.dtype(dtype), 3, 1000, 5)
    routes = router(GPU, REFERENCE)
    assert routes.route(seq).backend == "reference"
    with pytest.raises(NoCapableBackendError) as err:
        routes.route(seq, "gpu")
    assert np.dtype(dtype).name.replace("float", "f") in str(err.value.details["rejections"])
    assert "reference" in err.value.fix


def test_more_elements_than_an_i32_index_reaches_are_refused_before_any_copy():
    huge = np.broadcast_to(np.float32(0), (2**31,))  # (a view: no memory)
    with pytest.raises(InvalidInputError) as err:
        as_input(huge, "x")
    assert "2147483648 elements" in err.value.cause and "in parts" in err.value.fix
