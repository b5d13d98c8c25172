"""vyre.lib's reductions as steps of a caller's own sequence (``lib.steps``): on real
workers, a reduction of a buffer an earlier step computed, and of a resident buffer, and
a sort and an argsort of one, give the bytes ``lib`` gives for the same values, on the
reference, cpu and wgpu backends; wrong shapes, dtypes and names are refused before any
work."""

from __future__ import annotations

import numpy as np
import pytest
from lib_model import adversarial, arg, numpys, reduce

import vyre_core as vyre
from vyre_core import Driver, f32, lib
from vyre_core.errors import InvalidInputError, InvalidSequenceError, NoCapableBackendError
from vyre_core.ir.dtypes import DType
from vyre_core.lib.args import DTYPES
from vyre_core.sequence import SequenceBuilder

pytestmark = [pytest.mark.processes]

BACKENDS = ["reference", "cpu", "wgpu"]


@vyre.kernel(workgroup=(64,))
def halve_less_one(x, out):
    g = vyre.global_id(0)
    out[g] = x[g] * f32(0.5) - f32(1.0)


@pytest.fixture(scope="module")
def drv():
    with Driver() as driver:
        yield driver


def _values(shape, seed=0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    x.reshape(-1)[::97] = np.float32(-0.0)
    return x


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_reduction_of_what_an_earlier_step_computed_is_lib_s_bytes(drv, backend):
    """x -> x/2 - 1 (a kernel step) -> its sum over axis 1 and its argmax over all, in one
    request; the model's bytes of the same halved values."""
    shape = (5, 700, 3)
    x = _values(shape)
    b = SequenceBuilder()
    b.input("x", DType.F32, x.size)
    b.transient("h", DType.F32, x.size)
    b.step(halve_less_one, {"x": "x", "out": "h"}, dim=x.size)
    total = lib.steps.sum(b, "h", shape=shape, axis=1)
    best = lib.steps.argmax(b, "h", shape=shape, name="best")
    got_sum, got_best = drv.dispatch(b.build(returns=[total, best]),
                                     [x.reshape(-1)], backend=backend)
    halved = x * np.float32(0.5) - np.float32(1.0)
    assert got_sum.tobytes() == reduce("sum", halved, 1).tobytes()
    assert got_best.tobytes() == np.asarray(arg("argmax", halved, None),
                                            np.int32).reshape(-1).tobytes()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_reduction_of_a_resident_buffer_runs_in_its_worker(drv, backend):
    x = _values(3000, seed=1)
    y = _values(3000, seed=2)
    rx = drv.allocate_resident(x.nbytes, backend=backend)
    ry = drv.allocate_resident(y.nbytes, near=rx)
    try:
        rx.upload(x)
        ry.upload(y)
        b = SequenceBuilder()
        b.resident("x", DType.F32, x.size)
        b.resident("y", DType.F32, y.size)
        seq = b.build(returns=[lib.steps.dot(b, "x", "y"), lib.steps.max(b, "x")])
        got_dot, got_max = drv.dispatch(seq, [], resident={"x": rx, "y": ry})
        assert got_dot.tobytes() == np.asarray(lib.dot(drv, x, y, backend=backend)).tobytes()
        assert got_max.tobytes() == np.asarray(lib.max(drv, x, backend=backend)).tobytes()
    finally:
        rx.free()
        ry.free()


SORTED = [np.float32, np.int32, np.uint32, np.float16, np.float64]
#: (shape, axis) pairs: a last axis, a first one (gathered into lanes), every element
SORT_SHAPES = [((700,), -1), ((5, 300), 1), ((300, 5), 0), ((2, 3, 40), None)]
#: The reference interprets every step (seconds a sort even of a few hundred elements):
#: a first axis (gathered into lanes) and every element, small
REFERENCE_SHAPES = [((2, 3, 4), None), ((6, 3), 0)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", SORTED, ids=lambda d: np.dtype(d).name)
def test_a_sort_and_an_argsort_as_steps_are_lib_s_bytes(drv, backend, dtype):
    """Each element's bits into words (a bitcast), lib.sort's passes, the words back:
    numpy's stable bytes (NaNs canonical) and lib's, every special value and NaN payload
    among them. An f64's bits need 64-bit integers, which wgpu lacks: routed elsewhere."""
    shapes = REFERENCE_SHAPES if backend == "reference" else SORT_SHAPES
    for k, (shape, axis) in enumerate(shapes):
        x = adversarial(dtype, shape, seed=k)
        b = SequenceBuilder()
        b.input("x", DTYPES[np.dtype(dtype)], x.size)
        seq = b.build(returns=[lib.steps.sort(b, "x", shape=shape, axis=axis),
                               lib.steps.argsort(b, "x", shape=shape, axis=axis)])
        if backend == "wgpu" and dtype is np.float64:
            with pytest.raises(NoCapableBackendError, match=r"dtype\.u64"):
                drv.dispatch(seq, [x.reshape(-1)], backend=backend)
            return
        got_sort, got_order = drv.dispatch(seq, [x.reshape(-1)], backend=backend)
        want_sort, want_order = numpys(x, axis)
        assert got_sort.dtype == x.dtype and got_order.dtype == np.int32
        assert got_sort.tobytes() == want_sort, (shape, axis)
        assert got_order.astype(np.intp).tobytes() == want_order, (shape, axis)
        if k == 0:  # (lib.sort is numpy's at every shape: tests/test_lib_sort.py)
            assert got_sort.tobytes() == lib.sort(drv, x, axis, backend=backend).reshape(
                -1).tobytes()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_sort_of_what_an_earlier_step_computed_is_lib_s_bytes(drv, backend):
    shape = (4, 25) if backend == "reference" else (4, 250)  # (the reference: small)
    x = _values(shape, seed=3)
    b = SequenceBuilder()
    b.input("x", DType.F32, x.size)
    b.transient("h", DType.F32, x.size)
    b.step(halve_less_one, {"x": "x", "out": "h"}, dim=x.size)
    rows = lib.steps.sort(b, "h", shape=shape, name="rows")
    order = lib.steps.argsort(b, "h", axis=None)
    got_rows, got_order = drv.dispatch(b.build(returns=[rows, order]),
                                       [x.reshape(-1)], backend=backend)
    halved = x * np.float32(0.5) - np.float32(1.0)
    assert got_rows.tobytes() == lib.sort(drv, halved, backend=backend).tobytes()
    assert got_order.tobytes() == lib.argsort(drv, halved, None).astype(np.int32).tobytes()


@pytest.mark.parametrize("shaped", [lib.steps.sum, lib.steps.max, lib.steps.cumsum,
                                    lib.steps.sort, lib.steps.argsort])
def test_bad_arguments_are_refused_before_any_step_is_added(shaped):
    """Every step helper that sees a buffer as a shape (a reduction, a scan) refuses the
    same way (a cumsum once took a shape of another count, and stopped at a bool buffer
    with an error from inside lib's own kernel)."""
    b = SequenceBuilder()
    b.input("x", DType.F32, 12)
    b.input("bits", DType.BOOL, 12)
    b.input("y", DType.F32, 11)
    with pytest.raises(InvalidSequenceError) as err:
        shaped(b, "nowhere")
    assert "'nowhere'" in err.value.cause and "'x'" in err.value.fix
    with pytest.raises(InvalidInputError) as err:
        shaped(b, "x", shape=(5, 2))
    assert "has 10 elements" in err.value.cause
    with pytest.raises(InvalidInputError) as err:
        shaped(b, "x", shape=(3, 4), axis=2)
    assert "out of range" in err.value.cause
    with pytest.raises(InvalidInputError) as err:
        shaped(b, "bits")
    assert "bool" in err.value.cause and "f32" in err.value.fix
    with pytest.raises(InvalidInputError) as err:
        lib.steps.dot(b, "x", "y")
    assert "differ" in err.value.cause
    seq = b.build(returns=[lib.steps.sum(b, "x")])  # (12 elements: one pass)
    assert len(list(seq.steps())) == 1  # (the refused calls added no step)
