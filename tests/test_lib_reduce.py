"""vyre.lib's reductions on real workers: the same bytes on the reference, cpu and wgpu
backends, the bytes of the order's numpy model (tests/lib_model.py), numpy's values
within the bounds docs/lib.md states, on random and adversarial inputs; and every
refusal. One Driver for the module; the cpu backend compiles each kernel once per dtype
(seconds), so it runs every function in float32 and one or two in each other dtype."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from lib_model import arg, chain, gamma, numpy_chain, reduce

from vyre_core import Driver, lib
from vyre_core.errors import InvalidInputError

pytestmark = [pytest.mark.processes]

SHAPES = [((1,), None), ((2,), 0), ((255,), None), ((257,), -1), ((513,), None),
          ((7, 300), None), ((7, 300), 0), ((7, 300), 1), ((3, 4, 5), 1), ((3, 1, 5), 1),
          ((65537,), None)]

#: dtype -> the functions whose bytes the cpu backend is checked on too
CPU = {np.float32: {"sum", "prod", "max", "min", "argmax", "argmin"}, np.int32: {"sum",
       "argmin"}, np.uint32: {"max"}, np.float64: {"sum"}, np.float16: {"max"}}
NAMES = ["sum", "prod", "max", "min", "argmax", "argmin"]
#: The most elements a drawn array has: lanes of up to 300 places (past one partial's 256)
#: on up to three axes, but never 300**3 (27 M elements took the reference and lavapipe
#: minutes, past the test's timeout).
DRAWN = 30_000


@st.composite
def shapes(draw: st.DrawFn) -> tuple[int, ...]:
    """1 to 3 axes of 1 to 300 places each, ``DRAWN`` elements at most."""
    shape, left = [], DRAWN
    for _ in range(draw(st.integers(1, 3))):
        shape.append(draw(st.integers(1, min(300, left))))
        left //= shape[-1]
    return tuple(shape)


@pytest.fixture(scope="module")
def drv():
    with Driver() as driver:
        yield driver


def adversarial(dtype, shape, seed: int = 0) -> np.ndarray:
    """Normal values with, for floats, +-0, +-inf, NaN, huge, tiny and subnormal ones
    scattered in; for integers, the type's extremes."""
    rng = np.random.default_rng(seed)
    size = math.prod(shape)
    if np.dtype(dtype).kind == "f":
        info = np.finfo(dtype)
        x = rng.standard_normal(size).astype(dtype)
        specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, info.max, -info.max,
                             info.tiny, info.smallest_subnormal, -info.smallest_subnormal],
                            dtype)
    else:
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, size, dtype=dtype, endpoint=True)
        specials = np.array([info.min, info.max, 0, 1], dtype)
    spots = rng.random(size) < 0.002
    x[spots] = rng.choice(specials, int(spots.sum()))
    return x.reshape(shape)


def _model(name, x, axis):
    return arg(name, x, axis) if name.startswith("arg") else reduce(name, x, axis)


def _bytes(value) -> bytes:
    return np.asarray(value).tobytes()


@pytest.mark.parametrize("dtype", list(CPU), ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", NAMES)
def test_every_backend_gives_the_models_bytes(drv, name, dtype):
    backends = ["reference", "wgpu"] + (["cpu"] if name in CPU[dtype] else [])
    for k, (shape, axis) in enumerate(SHAPES):
        x = adversarial(dtype, shape, seed=k)
        want = _model(name, x, axis)
        for backend in backends:
            got = getattr(lib, name)(drv, x, axis, backend=backend)
            assert np.shape(got) == want.shape, (backend, shape, axis)
            assert _bytes(got) == _bytes(want.astype(np.intp) if name.startswith("arg")
                                         else want), (backend, shape, axis)


@pytest.mark.parametrize(("shape", "axis"), [((3, 140000), 1), ((140000, 2), 0),
                                           ((2, 3, 70001), 2), ((70000, 3), 1)])
def test_long_lanes_and_many_lanes_give_the_models_bytes_on_cpu_and_wgpu(drv, shape, axis):
    """Lanes of more than one block (their whole blocks one step of a pass, the short
    last one another) along any axis, and more outer lanes (70,000) than wgpu's grid
    holds along one axis (it folds them): the model's bytes. Fails before session 39,
    whose order for lanes past 65,536 is another."""
    x = adversarial(np.float32, shape, seed=len(shape))
    for name in ("sum", "max", "argmin"):
        want = _model(name, x, axis)
        want = want.astype(np.intp) if name.startswith("arg") else want
        for backend in ("cpu", "wgpu"):
            got = getattr(lib, name)(drv, x, axis, backend=backend)
            assert _bytes(got) == _bytes(want), (name, backend)


@pytest.mark.parametrize("backend", ["reference", "cpu", "wgpu"])
def test_dot_norm_and_mean_are_the_same_bytes_on_every_backend(drv, backend):
    x, y = adversarial(np.float32, (1000,), 1), adversarial(np.float32, (1000,), 2)
    finite = np.random.default_rng(3).standard_normal((7, 300)).astype(np.float32)
    assert _bytes(lib.dot(drv, x, y, backend=backend)) == _bytes(
        reduce("sum", x * y))
    assert _bytes(lib.norm(drv, finite, backend=backend)) == _bytes(
        np.sqrt(reduce("sum", finite * finite)))
    assert _bytes(lib.norm(drv, finite, 1, backend=backend)) == _bytes(
        np.sqrt(reduce("sum", finite * finite, 1)))
    assert _bytes(lib.mean(drv, finite, 0, backend=backend)) == _bytes(
        (reduce("sum", finite, 0).astype(np.float64) / 7).astype(np.float32))


def test_values_are_within_the_documented_bound_of_numpys(drv):
    """One larger case: 2**20 + 17 float32 (every pass ragged) on cpu and wgpu."""
    x = np.random.default_rng(4).standard_normal((1 << 20) + 17).astype(np.float32)
    y = np.random.default_rng(5).standard_normal(x.size).astype(np.float32)
    size, k = float(np.abs(x.astype(np.float64)).sum()), chain(x.size)
    exact = math.fsum(x.astype(np.float64))
    for backend in ("cpu", "wgpu"):
        total = float(lib.sum(drv, x, backend=backend))
        assert abs(total - exact) <= gamma(k, np.float32) * size
        bound = (gamma(k, np.float32) + gamma(numpy_chain(x.size, True), np.float32)) * size
        assert abs(total - float(np.sum(x))) <= bound
        assert lib.max(drv, x, backend=backend) == np.max(x)
        assert lib.argmin(drv, x, backend=backend) == np.argmin(x)
        dot_exact = math.fsum(x.astype(np.float64) * y.astype(np.float64))
        dot_size = float(np.abs(x.astype(np.float64) * y).sum())
        assert abs(float(lib.dot(drv, x, y, backend=backend)) - dot_exact) <= gamma(
            k + 1, np.float32) * dot_size


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(x=hnp.arrays(np.float32, shapes(),
                    elements=st.floats(width=32)),
       name=st.sampled_from(NAMES), data=st.data())
def test_random_arrays_give_the_models_bytes_on_the_reference_and_wgpu(drv, x, name, data):
    axis = data.draw(st.one_of(st.none(), st.integers(-x.ndim, x.ndim - 1)))
    want = _model(name, x, axis)
    for backend in ("reference", "wgpu"):
        got = getattr(lib, name)(drv, x, axis, backend=backend)
        assert _bytes(got) == _bytes(want.astype(np.intp) if name.startswith("arg")
                                     else want), backend


def test_a_shared_array_crosses_and_gives_the_same_bytes(drv):
    x = adversarial(np.float32, (70000,), 6)
    shared = drv.asarray(x)
    for backend in ("reference", "cpu", "wgpu"):
        assert _bytes(lib.sum(drv, shared, backend=backend)) == _bytes(reduce("sum", x))


def test_signed_zeros_and_nans_are_kept(drv):
    zeros = np.full(600, -0.0, np.float32)
    mixed = np.array([0.0, -0.0] * 300, np.float32)
    nan_late = np.arange(600, dtype=np.float32)
    nan_late[[411, 599]] = np.nan
    for backend in ("reference", "cpu", "wgpu"):
        assert np.signbit(lib.sum(drv, zeros, backend=backend))
        assert not np.signbit(lib.max(drv, mixed, backend=backend))
        assert np.signbit(lib.min(drv, mixed, backend=backend))
        assert np.isnan(lib.max(drv, nan_late, backend=backend))
        assert lib.argmax(drv, nan_late, backend=backend) == np.argmax(nan_late) == 411
        assert lib.argmin(drv, nan_late, backend=backend) == 411


def test_integer_sums_wrap_as_numpy_with_the_same_dtype(drv):
    x = np.full(1000, 2**30, np.int32)
    for backend in ("reference", "cpu", "wgpu"):
        got = lib.sum(drv, x, backend=backend)
        assert got.dtype == np.int32 and got == np.sum(x, dtype=np.int32) == 0


def test_empty_sums_and_products_are_defined_and_the_rest_refused(drv):
    empty = np.zeros((0, 3), np.float32)
    assert lib.sum(drv, empty) == 0 and lib.prod(drv, empty) == 1
    assert lib.sum(drv, empty, 0).tolist() == [0, 0, 0]
    assert lib.prod(drv, empty, 0).tolist() == [1, 1, 1]
    assert lib.sum(drv, empty, 1).shape == (0,) and lib.argmax(drv, empty, 1).shape == (0,)
    assert lib.norm(drv, empty) == 0 and lib.dot(drv, empty[:, 0], empty[:, 0]) == 0
    for name in ("max", "min", "argmax", "argmin", "mean"):
        with pytest.raises(InvalidInputError) as err:
            getattr(lib, name)(drv, empty)
        assert "empty" in err.value.cause and "x.size" in err.value.fix


@pytest.mark.parametrize(("x", "y", "cause"), [
    (np.zeros(3, np.float32), np.zeros(4, np.float32), "shapes (3,) and (4,)"),
    (np.zeros((2, 2), np.float32), np.zeros((2, 2), np.float32), "shapes (2, 2) and"),
    (np.zeros(3, np.float32), np.zeros(3, np.float64), "dtypes float32 and float64")])
def test_dot_refuses_mismatched_vectors(drv, x, y, cause):
    with pytest.raises(InvalidInputError) as err:
        lib.dot(drv, x, y)
    assert cause in err.value.cause and "equal length and dtype" in err.value.fix


def test_bad_axes_and_dtypes_are_refused_before_any_work(drv):
    with pytest.raises(InvalidInputError, match="axis 2 is out of range"):
        lib.sum(drv, np.zeros((2, 3), np.float32), axis=2)
    with pytest.raises(InvalidInputError, match="dtype int64"):
        lib.max(drv, np.zeros(3, np.int64))
    with pytest.raises(InvalidInputError, match="dtype int32"):
        lib.mean(drv, np.zeros(3, np.int32))
    with pytest.raises(InvalidInputError, match="dtype int32"):
        lib.norm(drv, np.zeros(3, np.int32))


def test_docs_lib_md_runs_as_written():
    page = Path(__file__).resolve().parent.parent / "docs" / "lib.md"
    text = page.read_text()
    blocks = list(re.finditer(r"```python\n(.*?)```", text, re.S))
    assert len(blocks) >= 2
    for block in blocks:  # (at its own lines: a kernel's source is read from the page)
        line = text.count("\n", 0, block.start(1))
        exec(compile("\n" * line + block.group(1), str(page), "exec"), {})
