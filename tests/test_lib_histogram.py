"""lib.bincount and lib.histogram on real workers: numpy's counts and numpy's bins
exactly on the reference, cpu and wgpu backends (adversarial values: on the edges, the
last edge, NaN and inf, tiny ranges, one bin, every dtype of range numpy's rules tell
apart); weighted sums with numpy's bytes up to a chunk (numpy.histogram's: always, while
the chunk is its block) and the order's model's bytes beyond (tests/histogram_model.py),
within the bound docs/lib.md states of numpy's; hypothesis for random inputs; every
refusal, where numpy raises, for the same inputs. The rules without a process: fast."""

from __future__ import annotations

import math

import histogram_model as model
import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from lib_model import gamma

import vyre_core as vyre
from vyre_core import Driver, i32, lib
from vyre_core.errors import InvalidInputError
from vyre_core.ir.dtypes import DType
from vyre_core.lib import binning
from vyre_core.lib.histogram import CHUNK, PARTIALS, rounds
from vyre_core.sequence import SequenceBuilder

BACKENDS = ["reference", "cpu", "wgpu"]
SLOW = settings(max_examples=12, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def drv():
    with Driver() as driver:
        yield driver


def _bytes(a) -> bytes:
    return np.asarray(a).tobytes()


def _on_edges(dtype, bins: int, range_, seed: int) -> np.ndarray:
    """Values exactly on numpy's edges (the last one too), a step either side of each,
    and random values, in ``dtype``."""
    rng = np.random.default_rng(seed)
    lo, hi = (-3.0, 5.0) if range_ is None else (float(range_[0]), float(range_[1]))
    x = rng.uniform(lo - 1, hi + 1, 300).astype(dtype)
    if range_ is None:
        x[:2] = lo, hi
    edges = np.histogram_bin_edges(x, bins, range_)
    near = edges.astype(dtype)
    if np.dtype(dtype).kind == "f":
        near = np.concatenate([near, np.nextafter(near, np.inf).astype(dtype),
                               np.nextafter(near, -np.inf).astype(dtype)])
    return rng.permutation(np.concatenate([x, near]).astype(dtype))


def _edge_case(dtype, bins: int, range_, seed: int) -> tuple[np.ndarray, int, object]:
    return _on_edges(dtype, bins, range_, seed), bins, range_


#: (x, bins, range): adversarial for numpy's bins; each is checked against numpy.histogram
def _cases() -> list[tuple[np.ndarray, int, object]]:
    f32 = np.float32
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, 2.0], f32)
    one = np.float32(1)
    return [
        _edge_case(f32, 10, None, 0),                                  # f32 edges, f32 math
        _edge_case(f32, 7, (0.1, 0.9), 1),                             # f32 - f32, / f64
        _edge_case(f32, 7, (np.float64(0.1), np.float64(0.7)), 2),     # float64 bins
        _edge_case(f32, 3, (np.float32(-1), np.float32(3)), 3),        # all float32
        _edge_case(f32, 5, (-2, 3), 4),                                # int edges
        _edge_case(np.float64, 13, (-0.3, 1.7), 5),
        _edge_case(np.float16, 6, None, 6),
        _edge_case(np.float16, 4, (0.25, 1.5), 7),
        (np.arange(-40, 60, dtype=np.int32), 10, None),
        (np.arange(-40, 60, dtype=np.int32), 7, (-5, 5)),
        (np.arange(0, 3000, 7, dtype=np.uint32), 9, (10, 2**32 + 5)),
        (np.array([7, 7, 7], np.int32), 4, None),                      # widened by 0.5
        (specials, 4, (0.0, 2.0)),                                     # NaN, inf: nowhere
        (np.full(5, 3.5, f32), 1, None),                               # one bin
        (np.array([one, np.nextafter(one, f32(2)), f32(0.5)]), 1,
         (1.0, float(np.nextafter(one, f32(2))))),                     # a tiny range
        (one + np.arange(5, dtype=f32) * np.spacing(one), 2, None),    # 4 ulps, 2 bins
        (np.random.default_rng(8).standard_normal(5000).astype(f32), 100_000, None),
    ]


@pytest.mark.processes
@pytest.mark.parametrize("backend", BACKENDS)
def test_histogram_puts_every_value_in_numpys_bin(drv, backend):
    for k, (x, bins, range_) in enumerate(_cases()):
        want, edges = np.histogram(x, bins, range_)
        got, got_edges = lib.histogram(drv, x, bins, range_, backend=backend)
        assert got.dtype == want.dtype and _bytes(got) == _bytes(want), (k, backend)
        assert got_edges.dtype == edges.dtype and _bytes(got_edges) == _bytes(edges), k
        assert _bytes(model.histogram(x, bins, range_)) == _bytes(want), k


#: backend -> the weights' dtypes its weighted histograms are checked in (wgpu has no
#: f64 -> f16 cast: routing passes it over for f16 weights; the cpu backend: one compile
#: fewer; the reference interprets each chunk's loop, 10-25 s a chunk: two dtypes within
#: a chunk, and past one in test_bincount_counts_are_numpys_and_weighted_sums_the_orders)
WEIGHTED = {"reference": (np.float32, np.float16), "cpu": (np.float64, np.float32),
            "wgpu": (np.float64, np.float32)}


@pytest.mark.processes
@pytest.mark.parametrize("backend", BACKENDS)
def test_weighted_histograms_are_numpys_bytes(drv, backend):
    rng = np.random.default_rng(9)
    n = 2 * CHUNK + 7
    finite = rng.standard_normal(n).astype(np.float32)
    holes = finite.copy()
    holes[::1000] = np.nan  # (outside any range: in no bin)
    for k, dtype in enumerate(WEIGHTED[backend]):
        w = rng.standard_normal(n).astype(dtype)
        x, bins, range_ = ((holes, 16, (-2.0, 2.0)), (finite, 300, None))[k]
        if backend == "reference":  # (within a chunk: past one, its bincount's sums)
            x, w = x[:5000], w[:5000]
        want, _ = np.histogram(x, bins, range_, weights=w)
        got, _ = lib.histogram(drv, x, bins, range_, weights=w, backend=backend)
        assert got.dtype == dtype and _bytes(got) == _bytes(want), (dtype, bins)


def _edge_cases() -> list[tuple[np.ndarray, object]]:
    """(x, edges) of the caller's: repeated edges (empty bins), the last edge, NaN and
    inf, integer data with float edges, float32 data with float64 edges (compared in
    float64, as numpy's searchsorted does) and with float32 ones, a step either side."""
    rng = np.random.default_rng(15)
    f32 = np.float32
    edges32 = np.array([-1, -0.1, 0.1, 0.1, 1.0], f32)
    near = np.concatenate([edges32, np.nextafter(edges32, f32(np.inf)),
                           np.nextafter(edges32, f32(-np.inf))])
    return [
        (np.array([0, 0.5, 1, 1, 1.5, 2, 2, 3, np.nan, np.inf, -1], f32), [0, 1, 1, 2, 3]),
        (np.arange(-5, 20, dtype=np.int32), np.array([-3, 0, 0.5, 7, 7, 19])),
        (np.arange(0, 50, dtype=np.uint32), np.array([3, 10, 2**40], np.int64)),
        (np.concatenate([near, rng.standard_normal(3000).astype(f32)]), edges32),
        (np.concatenate([near, rng.standard_normal(3000).astype(f32)]),
         np.array([-1, -0.1, 0.1, 1.0], np.float64)),
        (np.array([1.0, 2.0, np.inf, -np.inf], np.float64), [0, 1, np.inf]),
        (rng.standard_normal(500).astype(np.float16), np.linspace(-2, 2, 9)),
    ]


@pytest.mark.processes
@pytest.mark.parametrize("backend", BACKENDS)
def test_edges_of_your_own_put_every_value_in_numpys_bin(drv, backend):
    for k, (x, edges) in enumerate(_edge_cases()):
        want, want_edges = np.histogram(x, edges)
        got, got_edges = lib.histogram(drv, x, edges, backend=backend)
        assert got.dtype == want.dtype and _bytes(got) == _bytes(want), (k, backend)
        assert _bytes(got_edges) == _bytes(want_edges), k
        at = model.edge_bins(x, np.asarray(edges))
        assert _bytes(np.bincount(at[at >= 0], minlength=want.size)) == _bytes(want), k
    # (past a chunk on cpu and wgpu; the reference's chunk loop: one chunk here, past one
    # in the weighted histograms and bincounts)
    n = 5000 if backend == "reference" else 2 * CHUNK + 3
    x = np.random.default_rng(16).standard_normal(n).astype(np.float32)
    w = np.random.default_rng(17).standard_normal(x.size).astype(np.float32)
    edges = np.array([-3.0, -1.0, 0.0, 0.0, 0.5, 2.0, 3.0])
    got, _ = lib.histogram(drv, x, edges, weights=w, backend=backend)
    at = model.edge_bins(x, edges)
    assert _bytes(got) == _bytes(model.sums(at, w, 6, np.float32))
    wide = w.astype(np.float64)
    exact = np.array([math.fsum(wide[at == i]) for i in range(6)])
    size = np.array([math.fsum(np.abs(wide[at == i])) for i in range(6)])
    chunks = -(-x.size // CHUNK)
    assert np.all(np.abs(got - exact) <= (gamma(chunks, np.float32) + 2 * gamma(
        CHUNK, np.float64)) * size)


def _bincount_bound(x, w, bins: int) -> np.ndarray:
    """docs/lib.md's bound on |lib.bincount - numpy.bincount| per bin (weighted)."""
    n = x.size
    size = np.bincount(x, np.abs(w.astype(np.float64)), minlength=bins)
    return (gamma(CHUNK + -(-n // CHUNK) - 2, np.float64) + gamma(n - 1, np.float64)) * size


#: backend -> (values, largest value + 1) of the bincount cases (the reference interprets
#: each chunk's loop, seconds a chunk: small ones and one past a chunk)
SIZES = {"reference": [(1, 1), (7, 3), (CHUNK + 1, 300)],
         "cpu": [(1, 1), (7, 3), (CHUNK, 40), (CHUNK + 1, 300), (3 * CHUNK + 5, 1000)]}
SIZES["wgpu"] = SIZES["cpu"]


@pytest.mark.processes
@pytest.mark.parametrize("backend", BACKENDS)
def test_bincount_counts_are_numpys_and_weighted_sums_the_orders(drv, backend):
    rng = np.random.default_rng(10)
    for n, top in SIZES[backend]:
        for dtype, minlength in ((np.int32, 0), (np.uint32, top + 3)):
            x = rng.integers(0, top, n).astype(dtype)
            if backend == "reference" and n > CHUNK:
                continue  # (past a chunk, the reference checks the weighted sums only)
            want = np.bincount(x, minlength=minlength)
            got = lib.bincount(drv, x, minlength=minlength, backend=backend)
            assert got.dtype == np.intp and _bytes(got) == _bytes(want), (n, dtype)
        w = rng.standard_normal(n).astype(np.float64) * 10.0 ** rng.integers(-8, 8, n)
        got = lib.bincount(drv, x, w, backend=backend)
        assert got.dtype == np.float64
        assert _bytes(got) == _bytes(model.bincount(x, w)), n
        theirs = np.bincount(x, w)
        if n <= CHUNK:  # (one chunk: numpy's own order)
            assert _bytes(got) == _bytes(theirs), n
        assert np.all(np.abs(got - theirs) <= _bincount_bound(x, w, got.size))
    x = x[:1000] if backend == "reference" else x
    for dtype in (np.float32, np.float16):
        w = rng.standard_normal(x.size).astype(dtype)
        assert _bytes(lib.bincount(drv, x, w, backend=backend)) == _bytes(
            model.bincount(x, w))


@pytest.mark.processes
def test_more_partials_than_a_round_holds_run_in_rounds_and_keep_numpys_bytes(drv):
    """300,000 values into 2**20 bins: 5 chunks, 4 a round (a sequence loop of two)."""
    rng = np.random.default_rng(11)
    n, bins = 300_000, 1 << 20
    assert rounds(n, bins) == (5, 4)
    x = rng.uniform(0, 1, n).astype(np.float32)
    w = rng.standard_normal(n).astype(np.float32)
    want, _ = np.histogram(x, bins, weights=w)
    for backend in ("cpu", "wgpu"):
        got, _ = lib.histogram(drv, x, bins, weights=w, backend=backend)
        assert _bytes(got) == _bytes(want), backend
        counts, _ = lib.histogram(drv, x, bins, backend=backend)
        assert _bytes(counts) == _bytes(np.histogram(x, bins)[0])
    values = rng.integers(0, bins, n).astype(np.int32)
    weights = rng.standard_normal(n)
    got = lib.bincount(drv, values, weights, backend="wgpu")
    assert _bytes(got) == _bytes(model.bincount(values, weights))


FLOATS = st.floats(width=32, allow_subnormal=True)


@pytest.mark.processes
@SLOW
@given(x=hnp.arrays(np.float32, st.integers(1, 2000), elements=FLOATS),
       picks=st.lists(st.integers(0, 1999), min_size=1, max_size=40))
def test_random_edges_of_your_own_count_as_numpy(drv, x, picks):
    finite = np.sort(x[np.isfinite(x)]) if np.isfinite(x).any() else np.zeros(1, np.float32)
    edges = np.sort(finite[[p % finite.size for p in picks]])  # (repeats: empty bins)
    want, _ = np.histogram(x, edges)
    for backend in BACKENDS:
        got, _ = lib.histogram(drv, x, edges, backend=backend)
        assert _bytes(got) == _bytes(want), backend


@pytest.mark.processes
@SLOW
@given(x=hnp.arrays(np.float32, st.integers(1, 3000), elements=FLOATS),
       bins=st.integers(1, 300), data=st.data())
def test_random_values_land_in_numpys_bins(drv, x, bins, data):
    finite = x[np.isfinite(x)] if np.isfinite(x).any() else np.zeros(1, np.float32)
    if data.draw(st.booleans()):
        a, b = sorted(data.draw(st.sampled_from(finite.tolist())) for _ in range(2))
        range_ = (a, b)
    else:
        range_, x = None, finite
    try:
        want, edges = np.histogram(x, bins, range_)
    except ValueError:
        event("numpy refuses")
        with pytest.raises(InvalidInputError):
            lib.histogram(drv, x, bins, range_)
        return
    event("binned")
    for backend in BACKENDS:
        got, got_edges = lib.histogram(drv, x, bins, range_, backend=backend)
        assert _bytes(got) == _bytes(want) and _bytes(got_edges) == _bytes(edges), backend


@pytest.mark.processes
@SLOW
@given(x=hnp.arrays(np.int32, st.integers(0, 2000), elements=st.integers(0, 500)),
       minlength=st.integers(0, 600))
def test_random_counts_and_weights_are_numpys(drv, x, minlength):
    w = np.random.default_rng(x.size).standard_normal(x.size)
    for backend in BACKENDS:
        got = lib.bincount(drv, x, minlength=minlength, backend=backend)
        assert _bytes(got) == _bytes(np.bincount(x, minlength=minlength)), backend
        got = lib.bincount(drv, x, w, minlength, backend=backend)
        assert _bytes(got) == _bytes(np.bincount(x, w, minlength)), backend


@pytest.mark.processes
def test_empty_inputs_and_driver_arrays(drv):
    assert _bytes(lib.bincount(drv, np.zeros(0, np.int32), minlength=3)) == _bytes(
        np.bincount(np.zeros(0, np.int32), minlength=3))
    hist, edges = lib.histogram(drv, np.zeros(0, np.float32), 4)
    want, want_edges = np.histogram(np.zeros(0, np.float32), 4)
    assert _bytes(hist) == _bytes(want) and _bytes(edges) == _bytes(want_edges)
    x = np.random.default_rng(12).integers(0, 9, 5000).astype(np.int32)
    assert _bytes(lib.bincount(drv, drv.asarray(x), backend="cpu")) == _bytes(np.bincount(x))
    shaped = np.random.default_rng(13).standard_normal((30, 40)).astype(np.float32)
    w = np.ones_like(shaped)
    got, _ = lib.histogram(drv, shaped, 5, weights=w, backend="wgpu")
    assert _bytes(got) == _bytes(np.histogram(shaped, 5, weights=w)[0])


@vyre.kernel(workgroup=(64,))
def remainder(x: vyre.Array[i32], out: vyre.Array[i32]):
    g = vyre.global_id(0)
    out[g] = x[g] % 7


@pytest.mark.processes
@pytest.mark.parametrize("backend", BACKENDS)
def test_bincount_is_a_step_of_your_own_sequence(drv, backend):
    """lib.steps.bincount of a buffer an earlier step computed: values 5 and 6 fall
    outside its 5 bins; the bytes are lib.bincount's for the values inside. (Past a
    chunk on cpu and wgpu; the reference, which loops over a lane's values one pass at a
    time, takes 1009 values: the chunks' merge is checked on it by the weighted tests.)"""
    n = 1009 if backend == "reference" else CHUNK + 9
    x = np.random.default_rng(18).integers(0, 1000, n).astype(np.int32)
    w = np.random.default_rng(19).standard_normal(n)
    b = SequenceBuilder()
    b.input("x", DType.I32, n)
    b.input("w", DType.F64, n)
    b.transient("m", DType.I32, n)
    b.step(remainder, {"out": "m"}, dim=n)
    counts = lib.steps.bincount(b, "m", 5)
    sums = lib.steps.bincount(b, "m", 5, weights="w", name="sums")
    got_counts, got_sums = drv.dispatch(b.build(returns=[counts, sums]), [x, w],
                                        backend=backend)
    m = x % 7
    assert _bytes(got_counts) == _bytes(np.bincount(m[m < 5]).astype(np.uint32))
    assert _bytes(got_sums) == _bytes(model.sums(np.where(m < 5, m, -1), w, 5, np.float64))


@pytest.mark.fast
def test_a_bincount_step_refuses_bad_buffers_before_adding_any():
    b = SequenceBuilder()
    b.input("f", DType.F32, 4)
    b.input("i", DType.I32, 4)
    b.input("short", DType.F32, 3)
    for call, cause in [(lambda: lib.steps.bincount(b, "f", 3), "i32 or u32"),
                        (lambda: lib.steps.bincount(b, "i", 3, weights="short"), "float"),
                        (lambda: lib.steps.bincount(b, "i", 0), "bins=0")]:
        with pytest.raises(InvalidInputError) as err:
            call()
        assert cause in err.value.cause and err.value.fix


# -- refusals: numpy's errors, for the same inputs --------------------------------------------

NUMPY_ERRORS = [
    ("bincount", (np.array([3, -1], np.int32),), {}),
    ("bincount", (np.zeros((2, 2), np.int32),), {}),
    ("bincount", (np.zeros(3, np.int32),), {"minlength": -1}),
    ("bincount", (np.zeros(3, np.int32), np.ones(4)), {}),
    ("bincount", (np.zeros(3, np.float32),), {}),
    ("histogram", (np.zeros(3, np.float32), 5, (0.0, np.inf)), {}),
    ("histogram", (np.zeros(3, np.float32), 5, (np.nan, 1.0)), {}),
    ("histogram", (np.zeros(3, np.float32), 5, (2.0, 1.0)), {}),
    ("histogram", (np.array([1.0, np.nan], np.float32), 5), {}),
    ("histogram", (np.array([1.0, -np.inf], np.float64), 5), {}),
    ("histogram", (np.zeros(3, np.float32), 0), {}),
    ("histogram", (np.zeros(3, np.float32), -3), {}),
    ("histogram", (np.zeros(3, np.float32), 1000, (1.0, 1.0000001)), {}),
    ("histogram", (np.zeros(3, np.float32), 5), {"weights": np.ones(4, np.float32)}),
    ("histogram", (np.zeros(3, np.float32), [0.0, 2.0, 1.0]), {}),
    ("histogram", (np.zeros(3, np.float32), np.zeros((2, 2))), {}),
]


@pytest.mark.fast
@pytest.mark.parametrize(("name", "args", "kwargs"), NUMPY_ERRORS)
def test_where_numpy_raises_lib_refuses_with_a_fix_before_any_work(name, args, kwargs):
    with pytest.raises((ValueError, TypeError)):
        getattr(np, name)(*args, **kwargs)
    with pytest.raises(InvalidInputError) as err:
        getattr(lib, name)(None, *args, **kwargs)
    assert err.value.fix


@pytest.mark.fast
@pytest.mark.parametrize(("call", "cause"), [
    (lambda: lib.histogram(None, np.zeros(3, np.float32), "auto"), "estimator name"),
    (lambda: lib.histogram(None, np.zeros(3, np.float32), [0, np.nan, 2]), "NaN edge"),
    (lambda: lib.histogram(None, np.zeros(3, np.float32), ["a", "b"]), "not numbers"),
    (lambda: lib.histogram(None, np.zeros(3, np.float32), 2.5), "not an int"),
    (lambda: lib.histogram(None, np.zeros(3, np.int64)), "dtype int64"),
    (lambda: lib.histogram(None, np.zeros(3, np.float32), weights=np.ones(3, np.int32)),
     "dtype int32"),
    (lambda: lib.bincount(None, np.zeros(3, np.int64)), "int32 or uint32"),
    (lambda: lib.bincount(None, np.array([2**31], np.uint32)), "bins"),
])
def test_what_numpy_takes_but_lib_does_not_is_refused_with_a_fix(call, cause):
    with pytest.raises(InvalidInputError) as err:
        call()
    assert cause in err.value.cause and err.value.fix


# -- the rules, without a process -------------------------------------------------------------

@pytest.mark.fast
@pytest.mark.parametrize(("n", "bins"), [(1, 1), (CHUNK, 10**6), (2**31 - 1, 1),
                                         (2**31 - 1, 256), (10**7, 10**5), (5, 2**30)])
def test_a_round_holds_at_most_partials_bins_and_every_chunk_is_in_one(n, bins):
    chunks, per = rounds(n, bins)
    assert chunks == -(-n // CHUNK) and 1 <= per <= chunks
    assert per * bins <= max(PARTIALS, bins)
    assert per == chunks or (per + 1) * bins > PARTIALS  # (as many as fit)
    assert chunks <= 65535  # (a combining pass's loop: within wgpu's passes)


def _one_at_a_time(x: np.ndarray, w: np.ndarray, bins: int, dtype) -> np.ndarray:
    """docs/lib.md's order, one Python float addition at a time."""
    out = [dtype(0)] * bins
    for start in range(0, x.size, CHUNK):
        part = [0.0] * bins
        for b, v in zip(x[start:start + CHUNK].tolist(), w[start:start + CHUNK].tolist(),
                        strict=True):
            if 0 <= b < bins:
                part[b] = part[b] + v  # (Python floats: float64, rounded to nearest)
        out = [dtype(o + dtype(p)) for o, p in zip(out, part, strict=True)]
    return np.array(out, dtype)


@pytest.mark.fast
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_model_is_the_rule_docs_lib_md_states(dtype):
    rng = np.random.default_rng(14)
    x = rng.integers(-1, 5, 2 * CHUNK + 9)
    w = rng.standard_normal(x.size).astype(dtype)
    assert _bytes(model.sums(x, w, 5, dtype)) == _bytes(_one_at_a_time(x, w, 5, dtype))


@pytest.mark.fast
@settings(max_examples=60, deadline=None)
@given(x=hnp.arrays(st.sampled_from([np.float16, np.float32, np.float64]),
                    st.integers(1, 400), elements=st.floats(-1e4, 1e4, width=16)),
       bins=st.integers(1, 50), data=st.data())
def test_binning_gives_numpys_edges_and_scalars(x, bins, data):
    range_ = data.draw(st.sampled_from([None, (-1.5, 2.5), (np.float64(-1.0), np.float64(
        0.3)), (np.float32(0.0), np.float32(7.0)), (-3, 3)]))
    try:
        edges = np.histogram_bin_edges(x, bins, range_)
    except ValueError:  # (too many bins for the data's dtype: f16 around 1000, say)
        with pytest.raises(InvalidInputError):
            binning.uniform(x, bins, range_)
        return
    uniform = binning.uniform(x, bins, range_)
    assert uniform.edges.dtype == edges.dtype and _bytes(uniform.edges) == _bytes(edges)
    assert uniform.bins == bins and uniform.scale[1] == bins
    assert math.isfinite(float(uniform.scale[0]))
    # (that they are numpy's bins: test_histogram_puts_every_value_in_numpys_bin)
