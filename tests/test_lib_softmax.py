"""lib.softmax and lib.logsumexp on real workers: the bytes of the order's numpy model
(tests/lib_model.py) on every backend (f16 and f32 on the reference, cpu and wgpu: exp
and log are correctly rounded on each, issue 42; f64 on the reference and cpu, one
algorithm on both), scipy's values (written out here in float64) within the bound
docs/lib.md states, scipy's special cases, the refusals."""

from __future__ import annotations

import numpy as np
import pytest
from lib_model import softmax as model
from lib_model import unit_roundoff
from test_lib_reduce import adversarial

from vyre_core import Driver, lib
from vyre_core.errors import InvalidInputError
from vyre_core.lib.passes import levels

pytestmark = [pytest.mark.processes]

SHAPES = [((1,), None), ((10,), 0), ((1000,), None), ((7, 300), 1), ((300, 7), 0),
          ((3, 4, 5), 1), ((70000,), None)]
NAMES = ["softmax", "logsumexp"]


@pytest.fixture(scope="module")
def drv():
    with Driver() as driver:
        yield driver


def _exact(x: np.ndarray, axis, name: str) -> np.ndarray:
    """scipy.special's definition in float64."""
    x64 = x.astype(np.float64)
    m = np.max(x64, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    e = np.exp(x64 - m)
    s = e.sum(axis=axis, keepdims=True)
    if name == "softmax":
        return e / s
    return np.squeeze(m + np.log(s), axis=axis)


#: dtype -> the backends that give the model's bytes (wgpu has no f64 math library: its
#: WGSL has no 64-bit integers)
BYTES = {np.float32: ["reference", "cpu", "wgpu"], np.float16: ["reference", "cpu", "wgpu"],
         np.float64: ["reference", "cpu"]}


@pytest.mark.parametrize("dtype", list(BYTES), ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", NAMES)
def test_every_backend_gives_the_models_bytes(drv, name, dtype):
    for k, (shape, axis) in enumerate(SHAPES):
        with np.errstate(over="ignore"):
            x = adversarial(dtype, shape, seed=k) * dtype(4)
        want = np.asarray(model(x, axis, name)).tobytes()
        for backend in BYTES[dtype]:
            got = getattr(lib, name)(drv, x, axis, backend=backend)
            assert np.asarray(got).tobytes() == want, (shape, axis, backend)


@pytest.mark.parametrize("backend", ["reference", "cpu", "wgpu"])
def test_values_are_scipys_within_the_bound(drv, backend):
    """Relative error at most (|x - m| + K(n) + 6) u per element: the difference's rounding
    magnified by exp, exp and log within an ULP (wgpu's) and the sum's chain K(n)."""
    u = unit_roundoff(np.float32)
    for k, (shape, axis) in enumerate(SHAPES):
        x = (np.random.default_rng(k).standard_normal(shape) * 8).astype(np.float32)
        n = x.size if axis is None else x.shape[axis]
        chain = sum(count // m + (count % m > 0) - 1 for count, m in levels(n))
        spread = np.abs(x - np.max(x, axis=axis, keepdims=True)).astype(np.float64)
        got = lib.softmax(drv, x, axis, backend=backend).astype(np.float64)
        exact = _exact(x, axis, "softmax")
        assert np.all(np.abs(got - exact) <= (spread.max() + chain + 6) * u * exact), shape
        got = np.asarray(lib.logsumexp(drv, x, axis, backend=backend), np.float64)
        exact = _exact(x, axis, "logsumexp")
        assert np.all(np.abs(got - exact) <= (chain + 6) * u * np.maximum(np.abs(exact), 1))


def test_scipys_special_cases(drv):
    f = np.float32
    got = lib.softmax(drv, np.array([np.inf, 1, 2], f), backend="cpu")
    assert np.isnan(got[0]) and got[1:].tolist() == [0.0, 0.0]   # (inf / inf; e / inf)
    assert lib.softmax(drv, np.array([-np.inf, 0], f)).tolist() == [0.0, 1.0]
    assert lib.logsumexp(drv, np.array([np.inf, 1], f)) == np.inf
    assert lib.logsumexp(drv, np.array([-np.inf, -np.inf], f)) == -np.inf
    assert np.isnan(lib.logsumexp(drv, np.array([np.nan, 1], f)))
    big = np.array([1000, 1000], f)                               # (shifted: no overflow)
    assert lib.softmax(drv, big).tolist() == [0.5, 0.5]
    assert lib.logsumexp(drv, big) == f(1000) + np.log(f(2))
    assert lib.softmax(drv, np.zeros((2, 0), f), 1).shape == (2, 0)
    assert lib.logsumexp(drv, np.zeros((2, 0), f), 1).tolist() == [-np.inf, -np.inf]


def test_integers_and_bad_axes_are_refused_before_any_work():
    with pytest.raises(InvalidInputError, match="dtype int32"):
        lib.softmax(None, np.zeros(3, np.int32))
    with pytest.raises(InvalidInputError, match="out of range"):
        lib.logsumexp(None, np.zeros(3, np.float32), 1)
