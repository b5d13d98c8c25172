"""lib.matmul and lib.transpose on real workers: the bytes of the order's numpy model
(tests/lib_model_matmul.py) on the reference, cpu and wgpu backends for every dtype,
numpy's values within the bound docs/lib.md states, the same bytes for every depth of
the tile, numpy's transposes bit for bit; the refusals; and, without a process (fast),
the model against the rule one operation at a time, the tiled kernel's padding, the
shape rules against numpy's, and the transpose's index arithmetic."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from lib_model import canonical
from lib_model_matmul import bound_to_exact, bound_to_numpy, matmul

from vyre_core import DispatchConfig, Driver, lib
from vyre_core.errors import InvalidInputError
from vyre_core.ir.dtypes import DType
from vyre_core.lib.matmul import TILE, plan, tiled
from vyre_core.lib.transpose import launch, layout
from vyre_core.sequence import SequenceBuilder

#: (a's shape, b's shape): a 1x1, a row by a column, k = 1 (an outer product), sizes
#: off the tile and on it, k = 0, 1-D operands, stacks on either side or both, broadcast.
SHAPES = [((1, 1), (1, 1)), ((1, 37), (37, 1)), ((37, 1), (1, 29)), ((17, 33), (33, 15)),
          ((32, 48), (48, 16)), ((5, 0), (0, 7)), ((40,), (40,)), ((19,), (19, 3)),
          ((4, 21), (21,)), ((2, 3, 17, 9), (9, 5)), ((3, 1, 4, 6), (2, 6, 18)),
          ((4, 6), (3, 6, 5)), ((6,), (2, 6, 5)), ((2, 1, 5, 6), (6,)), ((0, 4), (4, 3))]
DTYPES = [np.float32, np.float64, np.float16, np.int32, np.uint32]
SLOW = {np.float16, np.float64}  # (the reference computes these elementwise: small shapes)


@pytest.fixture(scope="module")
def drv():
    with Driver() as driver:
        yield driver


def adversarial(dtype, shape, seed: int = 0, share: float = 0.05) -> np.ndarray:
    """Small normal values (integers: the type's whole range) with ``share`` of them
    special: +-0, +-inf, NaN, huge, subnormal (integers: the extremes)."""
    rng = np.random.default_rng(seed)
    size = math.prod(shape)
    if np.dtype(dtype).kind == "f":
        info = np.finfo(dtype)
        x = rng.standard_normal(size).astype(dtype)
        specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, info.max, -info.max,
                             info.smallest_subnormal], dtype)
    else:
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, size, dtype=dtype, endpoint=True)
        specials = np.array([info.min, info.max, 0], dtype)
    spots = rng.random(size) < share
    x[spots] = rng.choice(specials, int(spots.sum()))
    return x.reshape(shape)


def _bytes(value) -> bytes:
    return np.asarray(value).tobytes()


# -- matmul on the workers -----------------------------------------------------------------

@pytest.mark.processes
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_backend_gives_the_models_bytes(drv, dtype):
    for seed, (sa, sb) in enumerate(SHAPES):
        if dtype in SLOW and math.prod(sa) * sb[-1] > 5000:
            continue
        a, b = adversarial(dtype, sa, seed), adversarial(dtype, sb, seed + 100)
        want = matmul(a, b)
        with np.errstate(all="ignore"):
            assert want.shape == np.matmul(a, b).shape
        for backend in ("reference", "cpu", "wgpu"):
            got = lib.matmul(drv, a, b, backend=backend)
            assert np.shape(got) == want.shape and np.asarray(got).dtype == dtype, backend
            assert _bytes(got) == _bytes(want), (backend, sa, sb)


@pytest.mark.processes
def test_signed_zeros_infinities_and_nans_follow_the_order(drv):
    a = np.array([[-0.0, -0.0], [1.0, np.inf], [np.inf, 1.0]], np.float32)
    b = np.array([[1.0], [0.0]], np.float32)
    want = matmul(a, b)  # -0 + 0 = +0; 1 + inf * 0 = NaN; inf + 0 = inf
    assert np.signbit(matmul(a[:1, :1], b[:1])).all()  # one product: -0 stays -0
    for backend in ("reference", "cpu", "wgpu"):
        assert _bytes(lib.matmul(drv, a, b, backend=backend)) == _bytes(want)
        assert np.signbit(lib.matmul(drv, a[:1, :1], b[:1], backend=backend)).all()


@pytest.mark.processes
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_values_are_within_the_documented_bound_of_numpys(drv, dtype):
    rng = np.random.default_rng(7)
    a = rng.standard_normal((3, 70, 130)).astype(dtype)
    b = rng.uniform(-4, 4, (130, 45)).astype(dtype)
    want = np.matmul(a, b).astype(np.float64)
    exact = np.matmul(a.astype(np.float64), b.astype(np.float64))  # (within 1e-13 of it)
    for backend in ("cpu", "wgpu"):
        got = lib.matmul(drv, a, b, backend=backend).astype(np.float64)
        assert np.all(np.abs(got - want) <= bound_to_numpy(a, b)), backend
        assert np.all(np.abs(got - exact) <= bound_to_exact(a, b) * (1 + 1e-9)), backend


@pytest.mark.processes
@pytest.mark.parametrize("dtype", [np.int32, np.uint32])
def test_integer_products_are_numpys_bytes_wrapping(drv, dtype):
    a = adversarial(dtype, (33, 70), 1, share=0.2)
    b = adversarial(dtype, (70, 18), 2, share=0.2)
    with np.errstate(all="ignore"):
        want = np.matmul(a, b)
    for backend in ("reference", "cpu", "wgpu"):
        assert _bytes(lib.matmul(drv, a, b, backend=backend)) == _bytes(want)


@pytest.mark.processes
@pytest.mark.parametrize("ktile", [1, 3, 8])
def test_every_depth_of_the_tile_gives_the_same_bytes(drv, ktile):
    """The tuner's candidates (KTILE 1 to 16) change which loads are shared, never the
    order: each gives the model's bytes; in one workgroup's tile of the result and in
    several, with ragged edges, over a stack of two."""
    for (batch, m, k, n), seed in (((1, 21, 45, 19), 3), ((2, 70, 9, 130), 5)):
        a = adversarial(np.float32, (batch, m, k), seed)
        b = adversarial(np.float32, (batch, k, n), seed + 1)
        want = matmul(a, b)
        for backend in ("reference", "cpu", "wgpu"):
            c = np.zeros((batch, m, n), np.float32)
            drv.launch(tiled(DType.F32), dim=(n, m, batch), args=(a, b, c),
                       backend=backend, config=DispatchConfig(constants={"KTILE": ktile}))
            assert _bytes(c) == _bytes(want), (backend, batch, m, k, n)


@pytest.mark.processes
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(m=st.integers(1, 40), k=st.integers(0, 40), n=st.integers(1, 40),
       batch=st.sampled_from([(), (2,), (1, 3)]), data=st.data())
def test_random_shapes_and_values_give_the_models_bytes(drv, m, k, n, batch, data):
    floats = st.floats(width=32)
    a = data.draw(hnp.arrays(np.float32, (*batch, m, k), elements=floats))
    b = data.draw(hnp.arrays(np.float32, (k, n), elements=floats))
    want = matmul(a, b)
    for backend in ("reference", "cpu", "wgpu"):
        assert _bytes(lib.matmul(drv, a, b, backend=backend)) == _bytes(want), backend


@pytest.mark.processes
def test_arrays_of_the_driver_cross_and_numpys_empty_results_are_kept(drv):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.ones((4, 2), np.float32)
    assert lib.matmul(drv, drv.asarray(a), drv.asarray(b)).tolist() == (a @ b).tolist()
    assert lib.matmul(drv, np.ones((3, 0), np.float32), np.ones((0, 2), np.float32)) \
        .tolist() == [[0.0, 0.0]] * 3
    assert lib.matmul(drv, np.ones(0, np.int32), np.ones(0, np.int32)) == 0
    assert lib.matmul(drv, np.ones((0, 3, 4), np.float32), b).shape == (0, 3, 2)
    got = lib.matmul(drv, np.arange(3, dtype=np.float32), np.ones(3, np.float32))
    assert np.ndim(got) == 0 and got == 3.0 and got.dtype == np.float32


@pytest.mark.parametrize(("a", "b", "cause", "fix"), [
    ((2, 3), (4, 2), "the inner dimensions differ (3 and 4)", "k the same"),
    ((3,), (4,), "the inner dimensions differ (3 and 4)", "k the same"),
    ((2, 2, 3), (3, 3, 1), "do not broadcast", "equal or 1"),
    ((), (3,), "0-d", "at least one dimension"),
    ((1000, 1, 1, 3000), (1000, 3000, 1), "would make an array of 3000000000", "in parts")])
def test_mismatched_shapes_are_refused_before_any_work(a, b, cause, fix):
    with pytest.raises(InvalidInputError) as err:  # (broadcast views: no memory)
        lib.matmul(None, np.broadcast_to(np.float32(0), a), np.broadcast_to(np.float32(0), b))
    assert cause in err.value.cause and fix in err.value.fix


def test_mismatched_or_unsupported_dtypes_are_refused_before_any_work():
    with pytest.raises(InvalidInputError) as err:
        lib.matmul(None, np.zeros((2, 2), np.float32), np.zeros((2, 2), np.float64))
    assert "dtypes float32 and float64" in err.value.cause
    assert "b.astype(np.float32)" in err.value.fix
    with pytest.raises(InvalidInputError, match="dtype int64"):
        lib.matmul(None, np.zeros((2, 2), np.int64), np.zeros((2, 2), np.int64))


# -- transpose on the workers --------------------------------------------------------------

TRANSPOSES = [((17, 33), None), ((1, 5), None), ((40, 1, 3), (1, 2, 0)), ((3, 4, 5), None),
              ((70, 130), (1, 0)), ((2, 3, 4, 5), (2, 0, 3, 1)), ((6, 5, 4), (0, 2, 1)),
              ((6, 5, 4), (1, 0, 2)), ((33,), None), ((), None), ((3, 0, 2), (2, 1, 0))]
NUMPY_DTYPES = [np.float32, np.float64, np.float16, np.int32, np.uint8, np.bool_,
                np.complex128, np.int64]


def _with_payloads(x: np.ndarray) -> np.ndarray:
    """Floats with NaNs of other payloads and signs, which a float copy would lose."""
    if x.dtype.kind != "f" or not x.size:
        return x
    words = x.reshape(-1).view(f"u{x.dtype.itemsize}")
    words[::7] = np.array(-1, np.int64).astype(words.dtype)  # (all ones: a negative NaN)
    return x


@pytest.mark.processes
@pytest.mark.parametrize("dtype", NUMPY_DTYPES, ids=lambda d: np.dtype(d).name)
def test_transposes_are_numpys_bytes_on_every_backend(drv, dtype):
    for seed, (shape, axes) in enumerate(TRANSPOSES):
        with np.errstate(over="ignore"):  # (f64's extremes are f32's and f16's infinities)
            x = _with_payloads(adversarial(np.float64, shape, seed).astype(dtype)
                               if np.dtype(dtype).kind in "fc" else
                               np.random.default_rng(seed).integers(0, 200, shape).astype(dtype))
        want = np.array(np.transpose(x, axes), order="C")  # (ascontiguousarray: 0-d is 1-D)
        for backend in ("reference", "cpu", "wgpu"):
            got = lib.transpose(drv, x, axes, backend=backend)
            assert got.shape == want.shape and got.dtype == want.dtype
            assert got.flags.c_contiguous and got.tobytes() == want.tobytes(), (
                backend, shape, axes)


@pytest.mark.processes
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(x=hnp.arrays(st.sampled_from([np.float32, np.uint16]),
                    hnp.array_shapes(min_dims=1, max_dims=5, max_side=20)), data=st.data())
def test_random_transposes_are_numpys_bytes(drv, x, data):
    axes = data.draw(st.permutations(range(x.ndim)))
    want = np.array(np.transpose(x, axes), order="C").tobytes()
    for backend in ("reference", "wgpu"):
        assert lib.transpose(drv, x, axes, backend=backend).tobytes() == want


@pytest.mark.processes
def test_a_transpose_is_a_copy_never_the_callers_array(drv):
    x = np.arange(6, dtype=np.float32)
    got = lib.transpose(drv, x)
    got[0] = 9
    assert x[0] == 0


@pytest.mark.parametrize(("axes", "cause"), [
    ((0, 0), "not a permutation"), ((0,), "not a permutation"), ((0, 2), "not a permutation"),
    ("ab", "not a sequence of ints"), (1.5, "not a sequence of ints")])
def test_bad_axes_are_refused_before_any_work(axes, cause):
    with pytest.raises(InvalidInputError) as err:
        lib.transpose(None, np.zeros((2, 3), np.float32), axes)
    assert cause in err.value.cause and "axes=None" in err.value.fix


def test_a_dtype_that_is_not_a_number_is_refused():
    with pytest.raises(InvalidInputError, match="dtype object"):
        lib.transpose(None, np.array([[1, "a"]], object))


# -- in a sequence -----------------------------------------------------------------------

@pytest.mark.processes
def test_steps_run_the_same_order_inside_a_callers_sequence(drv):
    """x @ x.T with the transpose a step of the same sequence: the model's bytes."""
    x = adversarial(np.float32, (2, 19, 23), 8)
    b = SequenceBuilder()
    b.input("x", DType.F32, x.size)
    xt = lib.steps.transpose(b, "x", shape=x.shape, axes=(0, 2, 1))
    product = lib.steps.matmul(b, "x", xt, m=19, k=23, n=19, batch=2)
    flat = lib.steps.transpose(b, "x", shape=(x.size,), name="copy")  # (the identity)
    seq = b.build(returns=[xt, product, flat])
    for backend in ("reference", "cpu", "wgpu"):
        got_t, got, copy = drv.dispatch(seq, [x.reshape(-1)], backend=backend)
        assert _bytes(got_t) == _bytes(canonical(np.transpose(x, (0, 2, 1)))), backend
        assert _bytes(got) == _bytes(matmul(x, np.transpose(x, (0, 2, 1)))), backend
        assert _bytes(copy) == _bytes(canonical(x)), backend


def test_steps_refuse_buffers_that_do_not_fit_before_adding_a_step():
    b = SequenceBuilder()
    b.input("x", DType.F32, 12)
    b.input("w", DType.I32, 12)
    with pytest.raises(InvalidInputError, match="not the 6 and 12"):
        lib.steps.matmul(b, "x", "x", m=2, k=3, n=4)
    with pytest.raises(InvalidInputError, match=r"matmul of buffers 'x' \(f32\) and 'w' \(i32\)"):
        lib.steps.matmul(b, "x", "w", m=3, k=4, n=3)
    with pytest.raises(InvalidInputError, match="seen as shape"):
        lib.steps.transpose(b, "x", shape=(5, 2))
    with pytest.raises(InvalidInputError, match="not a permutation"):
        lib.steps.transpose(b, "x", shape=(3, 4), axes=(0, 0))


# -- the rules, without a process -------------------------------------------------------

def _by_the_rule(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """docs/lib.md's order for 2-D operands, one numpy scalar operation at a time."""
    out = np.zeros((a.shape[0], b.shape[1]), a.dtype)
    with np.errstate(all="ignore"):
        for i, j in itertools.product(range(a.shape[0]), range(b.shape[1])):
            acc = a[i, 0] * b[0, j]
            for k in range(1, a.shape[1]):
                acc = acc + a[i, k] * b[k, j]
            out[i, j] = acc
    return canonical(out)


@pytest.mark.fast
@settings(max_examples=60, deadline=None)
@given(dtype=st.sampled_from([np.float32, np.float16, np.int32]),
       m=st.integers(1, 6), k=st.integers(1, 9), n=st.integers(1, 6), seed=st.integers(0, 99))
def test_the_model_is_the_rule_docs_lib_md_states(dtype, m, k, n, seed):
    a, b = adversarial(dtype, (m, k), seed, 0.2), adversarial(dtype, (k, n), seed + 1, 0.2)
    assert matmul(a, b).tobytes() == _by_the_rule(a, b).tobytes()


def _tiles(a: np.ndarray, b: np.ndarray, ktile: int) -> np.ndarray:
    """The tiled kernel's arithmetic in numpy: from -0, a step of ``ktile`` at a time
    over tiles padded past k (a's with -0, b's with +0), as vyre_core/lib/matmul.py."""
    k = a.shape[1]
    steps = -(-k // ktile) * ktile
    pa = np.full((a.shape[0], steps), -0.0, a.dtype)
    pb = np.zeros((steps, b.shape[1]), b.dtype)
    pa[:, :k], pb[:k] = a, b
    acc = np.full((a.shape[0], b.shape[1]), -0.0, a.dtype)
    with np.errstate(all="ignore"):
        for j in range(steps):
            acc = acc + pa[:, j:j + 1] * pb[j:j + 1, :]
    return canonical(acc)


@pytest.mark.fast
@pytest.mark.parametrize("ktile", [1, 2, 5, TILE])
@pytest.mark.parametrize("k", [1, 2, 7, 16, 17, 40])
def test_the_tiles_padding_and_start_add_nothing(k, ktile):
    """-0 is the identity of addition (+0 is not: -0 + +0 = +0), and a padded product is
    -0 * +0 = -0: so every depth of the tile gives the model's bytes."""
    for seed in range(3):
        a = adversarial(np.float32, (9, k), seed, 0.3)
        b = adversarial(np.float32, (k, 8), seed + 5, 0.3)
        a[0], b[:, 0] = -0.0, 1.0  # (a row of -0 products: -0 only if nothing is added)
        assert _tiles(a, b, ktile).tobytes() == matmul(a, b).tobytes()
        assert np.signbit(matmul(a, b)[0, 0])


_SHAPE = st.lists(st.integers(0, 3), min_size=0, max_size=4).map(tuple)


@pytest.mark.fast
@settings(max_examples=200, deadline=None)
@given(sa=_SHAPE, sb=_SHAPE)
def test_the_shape_rules_are_numpys(sa, sb):
    try:
        want = np.matmul(np.zeros(sa), np.zeros(sb)).shape
    except ValueError:
        with pytest.raises(InvalidInputError):
            plan(sa, sb)
        return
    assert plan(sa, sb).shape == want


def _run(shape: tuple[int, ...], perm: tuple[int, ...], x: np.ndarray) -> np.ndarray:
    """copy_rows' and transpose_tiles' index arithmetic in numpy, over a layout."""
    run, flat = launch(shape, perm), x.reshape(-1)
    if run.kernel == "copy":
        return flat.copy()
    s = dict(run.sizes)

    def place(index, extents, strides):
        offset = np.zeros_like(index)
        for d in range(len(extents) - 1, -1, -1):
            offset += index % extents[d] * strides[d]
            index = index // extents[d]
        return offset

    out = np.zeros_like(flat)
    if run.kernel == "rows":
        g = np.arange(flat.size)
        out[g] = flat[place(g // s["length"], s["shape"], s["strides"]) + g % s["length"]]
        return out
    z, q, a = np.meshgrid(np.arange(flat.size // (s["la"] * s["lq"])), np.arange(s["lq"]),
                          np.arange(s["la"]), indexing="ij")
    out[z * s["os"] + a * s["oa"] + q] = flat[z * s["xs"] + q * s["sq"] + a]
    return out


@pytest.mark.fast
@settings(max_examples=200, deadline=None)
@given(shape=hnp.array_shapes(min_dims=0, max_dims=5, min_side=1, max_side=4),
       data=st.data())
def test_the_layout_and_the_kernels_index_arithmetic_give_numpys_transpose(shape, data):
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    x = np.arange(math.prod(shape)).reshape(shape)
    merged, order = layout(shape, perm)
    assert len(merged) <= len(shape) and math.prod(merged) == x.size
    want = np.transpose(x, perm).reshape(-1)
    assert np.array_equal(np.transpose(x.reshape(merged), order).reshape(-1), want)
    assert np.array_equal(_run(merged, order, x), want)


@pytest.mark.fast
def test_layouts_merge_what_stays_together():
    assert layout((4, 5, 6), (2, 0, 1)) == ((20, 6), (1, 0))
    assert layout((4, 1, 6), (1, 2, 0)) == ((4, 6), (1, 0))
    assert layout((4, 5, 6, 2), (1, 0, 2, 3)) == ((4, 5, 12), (1, 0, 2))
    assert launch((4, 5, 12), (1, 0, 2)).kernel == "rows"
    assert launch((20, 6), (1, 0)).kernel == "tiles"
    assert launch((7,), (0,)).kernel == "copy"
    assert launch((2, 3, 4), (0, 2, 1)).kernel == "tiles"  # (one other axis)
    assert launch((2, 3, 4, 5), (2, 0, 3, 1)).kernel == "rows"  # (two: a gather)
