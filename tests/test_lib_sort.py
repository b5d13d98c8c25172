"""lib.sort and lib.argsort on real workers: numpy's stable sort has one result, so every
backend (reference, cpu, wgpu) must give numpy's bytes exactly (NaNs canonical), on
adversarial arrays (every special value, NaN payloads, ties, sizes around a block) along
every axis; the refusals; and, without a process (fast), the key rule of docs/lib.md
("Sorts") against numpy's order on every special value and every f16."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lib_model import adversarial, numpys

from vyre_core import Driver, lib
from vyre_core.errors import InvalidInputError
from vyre_core.lib.sorts import KEYS, MAX_BLOCK, RADIX, Keys, block_length, digit_passes

DTYPES = [np.float32, np.int32, np.uint32, np.float16, np.float64]
BACKENDS = ["reference", "cpu", "wgpu"]
#: The reference interprets every step of every pass (about a second a call on a few
#: elements, 3-4 s past a block): it runs these shapes, each with one ``ties`` setting (one
#: lane; strided lanes; one-element lanes), and one array past a block
#: (test_the_reference_sorts_past_a_block); cpu and wgpu run every shape with both.
REFERENCE = [((7,), None, False), ((2, 3, 4), 1, True), ((4, 1, 5), 1, False)]
#: Lanes past 65,536 (3 passes of lane digits) are big enough for cpu's threads, whose
#: compile of each dtype's word kernels costs 5-9 s: cpu runs them for one word (f32)
#: and two (f64), wgpu for every dtype.
MANY_LANES = ((66_000, 2), 1)
SHAPES = [((1,), -1), ((2,), 0), ((7,), None), ((RADIX + 1,), -1), ((513,), None),
          ((5, 300), 1), ((300, 5), 0), ((2, 3, 4), 1), ((2, 3, 4), None), ((4, 1, 5), 1),
          ((3, 0), 1), ((0,), None), ((MAX_BLOCK + 1,), None), ((70_001,), -1),
          MANY_LANES]


@pytest.fixture(scope="module")
def drv():
    with Driver() as driver:
        yield driver


@pytest.mark.processes
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_backend_gives_numpys_stable_bytes(drv, dtype):
    for k, (shape, axis) in enumerate(SHAPES):
        for ties in (False, True):
            backends = BACKENDS if (shape, axis, ties) in REFERENCE else BACKENDS[1:]
            if (shape, axis) == MANY_LANES and dtype not in (np.float32, np.float64):
                backends = ["wgpu"]
            _check(drv, adversarial(dtype, shape, seed=k, ties=ties), axis, backends, ties)


@pytest.mark.processes
def test_the_reference_sorts_past_a_block(drv):
    _check(drv, adversarial(np.float32, (RADIX + 1,), seed=3, ties=True), -1, ["reference"],
           True)


def _check(drv, x, axis, backends, ties):
    want, want_order = numpys(x, axis)
    for backend in backends:
        got = lib.sort(drv, x, axis, backend=backend)
        order = lib.argsort(drv, x, axis, backend=backend)
        where = (x.shape, axis, ties, backend)
        assert got.dtype == x.dtype and order.dtype == np.intp, where
        assert got.shape == order.shape == (x.shape if axis is not None
                                            else (x.size,)), where
        assert got.tobytes() == want and order.tobytes() == want_order, where


@pytest.mark.processes
@settings(max_examples=15, deadline=None)
@given(st.sampled_from(DTYPES), st.lists(st.integers(1, 40), min_size=1, max_size=3),
       st.integers(0, 2**32 - 1), st.booleans(), st.data())
def test_random_arrays_along_any_axis_are_numpys(drv, dtype, shape, seed, ties, data):
    axis = data.draw(st.sampled_from([None, *range(-len(shape), len(shape))]))
    x = adversarial(dtype, tuple(shape), seed, ties)
    want, want_order = numpys(x, axis)
    # (the reference: small arrays only, as above)
    backend = data.draw(st.sampled_from(BACKENDS if x.size <= 64 else BACKENDS[1:]))
    assert lib.sort(drv, x, axis, backend=backend).tobytes() == want
    assert lib.argsort(drv, x, axis, backend=backend).tobytes() == want_order


@pytest.mark.processes
def test_equal_keys_keep_their_order_and_zeros_their_signs(drv):
    x = np.array([0.0, -0.0, np.nan, 1.0, -0.0, 0.0, -np.nan, -1.0], np.float32)
    got = lib.sort(drv, x, backend="cpu")
    assert np.signbit(got[1:5]).tolist() == [False, True, True, False]  # input order
    assert lib.argsort(drv, x, backend="cpu").tolist() == [7, 0, 1, 4, 5, 3, 2, 6]
    same = np.full(10_000, 3, np.int32)
    assert lib.argsort(drv, same, backend="cpu").tolist() == list(range(10_000))


@pytest.mark.processes
def test_an_array_of_the_driver_crosses_and_the_result_is_writable(drv):
    x = np.random.default_rng(1).standard_normal(100_000).astype(np.float32)
    got = lib.sort(drv, drv.asarray(x), backend="cpu")
    assert got.tobytes() == np.sort(x, kind="stable").tobytes() and got.flags.writeable
    # a 0-d array is one element, as numpy's argsort has it (numpy's sort refuses it)
    assert lib.sort(drv, np.float32(2.5)).tolist() == [2.5]
    assert lib.argsort(drv, np.float32(2.5)).tolist() == [0]


def test_bad_input_is_refused_before_any_work():
    with pytest.raises(InvalidInputError, match="dtype int64"):
        lib.argsort(None, np.zeros(3, np.int64))
    with pytest.raises(InvalidInputError, match="out of range"):
        lib.sort(None, np.zeros((2, 3), np.float32), 2)
    with pytest.raises(InvalidInputError, match="not one axis"):
        lib.argsort(None, np.zeros((2, 3), np.float32), (0, 1))


# -- the key rule, without a process -------------------------------------------------------

#: f64's rule, as its two words together
WIDE = Keys(64, 1 << 63, 0x7FF0000000000000, 0x7FF8000000000000, True)


def key(x: np.ndarray) -> np.ndarray:
    """docs/lib.md's key of each element, in numpy (uint64, wide enough for any)."""
    rule = KEYS.get(x.dtype, WIDE)
    bits = x.view(f"u{x.itemsize}").astype(np.uint64)
    sign, ones = np.uint64(rule.sign), np.uint64((1 << rule.width) - 1)
    inf = np.uint64(rule.inf)
    if not rule.floating:
        return bits ^ sign
    mag = bits & (sign - np.uint64(1))
    return np.where(mag > inf, ones, np.where(
        mag == 0, sign, np.where(bits >= sign, bits ^ ones, bits | sign)))


def _specials(dtype) -> np.ndarray:
    return adversarial(dtype, (20_000,), seed=5)


@pytest.mark.fast
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_sorting_by_key_is_numpys_stable_order(dtype):
    x = np.concatenate([_specials(dtype), adversarial(dtype, (5000,), seed=6, ties=True)])
    assert np.array_equal(np.argsort(key(x), kind="stable"), np.argsort(x, kind="stable"))


@pytest.mark.fast
def test_every_float16_is_keyed_in_numpys_order():
    x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    assert np.array_equal(np.argsort(key(x), kind="stable"), np.argsort(x, kind="stable"))


@pytest.mark.fast
def test_keys_of_special_values():
    f = np.array([-np.inf, -1.0, -0.0, 0.0, 1.0, np.inf, np.nan, -np.nan], np.float32)
    assert key(f).tolist() == [0x007FFFFF, 0x407FFFFF, 0x80000000, 0x80000000, 0xBF800000,
                               0xFF800000, 0xFFFFFFFF, 0xFFFFFFFF]
    assert key(np.array([-2**31, -1, 0, 2**31 - 1], np.int32)).tolist() == [
        0, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF]


@pytest.mark.fast
@pytest.mark.parametrize("total", [1, 255, 256, 5000, 65_536, 1 << 20, 1 << 24, 2**31 - 1])
def test_blocks_are_powers_of_two_between_radix_and_the_most(total):
    size = block_length(total)
    assert RADIX <= size <= MAX_BLOCK and size & (size - 1) == 0
    assert -(-total // size) * RADIX <= max(total, RADIX * RADIX)  # counts: not above n


@pytest.mark.fast
def test_the_passes_are_the_keys_digits_then_the_lanes():
    assert digit_passes(32, 1) == [(0, 0), (0, 8), (0, 16), (0, 24)]
    assert digit_passes(16, 2) == [(0, 0), (0, 8), (1, 0)]
    assert digit_passes(16, 300) == [(0, 0), (0, 8), (1, 0), (1, 8)]
