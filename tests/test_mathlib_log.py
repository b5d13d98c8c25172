"""vyre_core.mathlib.log, ``ln x`` correctly rounded (docs/design-42.md, step 8), held to
MPFR's correctly rounded results (gmpy2 in the binary32 and binary16 contexts) bit for
bit: on the reference in this process over drawn f32 bits and adversarial ones (x near 1
from both sides, powers of two, where ``e ln 2`` is largest, subnormal inputs of every
size, the table's cell edges and the sqrt(2) seam, zeros, negatives, NaNs with payloads,
infinities, every input of the exception list) and over every f16 input; then the same
programs give the reference's bytes on cpu and wgpu. (``vyre conform --exhaustive
--all-inputs --op log`` checks every f32 input.)"""

from __future__ import annotations

import gmpy2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mathlib_cases import (
    CANONICAL_NAN,
    EVERY_F16,
    assert_correctly_rounded,
    assert_exception_list,
    f32_bits,
    mpfr,
    operation_is_mpfrs,
    same_bytes_on,
)

from vyre_core import Driver, ir
from vyre_core.mathlib import log


def correct(bits: np.ndarray, width: int) -> np.ndarray:
    return mpfr(gmpy2.log, bits, width)


def adversarial() -> np.ndarray:
    """Inputs near 1 (results near 0: nothing may cancel), every power of two and its
    neighbours (``e ln 2`` alone, exponents to -149), the largest and least finite
    inputs, on and next to the table's cell edges and the sqrt(2) seam, subnormal inputs
    at every leading-bit position, the special values and every listed exception."""
    powers = f32_bits([2.0**e for e in range(-149, 128)])
    powers = np.concatenate([powers.astype(np.int64) + d for d in (-1, 0, 1)])
    one = np.uint32(0x3F800000)
    near_one = np.concatenate([one + np.arange(-4096, 4097, dtype=np.int64),
                               one + (np.int64(1) << np.arange(0, 23)),
                               one - (np.int64(1) << np.arange(0, 22))])
    # cell edges: significands (1 + (j - 1/2) / 128) and the bits on either side, at
    # exponents 0, -1, 5, 100 and -120
    edges = ((np.arange(0, 130, dtype=np.int64) << 16) - 0x8000) & 0x7FFFFF
    edges = np.concatenate([edges + d for d in (-1, 0, 1)])
    cells = np.concatenate([(edges + (b << 23)) for b in (127, 126, 132, 227, 7)])
    seam = f32_bits([np.sqrt(2), np.sqrt(0.5), 1.4140625, 1.41015625, 1.41796875])
    seam = np.concatenate([seam.astype(np.int64) + d for d in (-1, 0, 1)])
    lead = np.arange(0, 23, dtype=np.int64)
    subnormal = np.concatenate([(np.int64(1) << lead), (np.int64(1) << lead) + 1,
                                (np.int64(2) << lead) - 1, np.array([0x7FFFFF, 0x400001])])
    specials = [0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000,
                0x7F800001, 0xFFFFFFFF, 0x7FBFFFFF, 0x7F7FFFFF, 0xFF7FFFFF, 0xBF800000,
                0x80000001]
    ints = np.concatenate([powers, near_one, cells, seam, subnormal]).astype(np.uint32)
    return np.concatenate([ints, np.array(specials, np.uint32),
                           np.array(log._EXCEPTION_INPUTS, np.uint32)])


# -- the oracle's contexts ---------------------------------------------------------------

@pytest.mark.fast
def test_the_oracle_rounds_as_binary32_and_binary16():
    """``ln 1`` is +0; ``ln 2`` and ``ln 2^-149`` are ln 2 and -149 ln 2 rounded once (f64's
    values, far from a boundary, give the same); the special values are semantics.md's:
    -inf at +-0, NaN below zero, inf at inf."""
    x = f32_bits([1, 2, 2.0**-149, 0, -0.0, -1, np.inf])
    want32 = f32_bits([0, np.log(2), -149 * np.log(2), -np.inf, -np.inf, np.nan, np.inf])
    want32[5] = CANONICAL_NAN[32]
    assert correct(x, 32).tolist() == want32.tolist()
    x16 = np.array([1, 2, 2.0**-24, 0], np.float16).view(np.uint16)
    want16 = np.array([0, np.log(2), -24 * np.log(2), -np.inf], np.float16).view(np.uint16)
    assert correct(x16, 16).tolist() == want16.tolist()


# -- f32 on the reference ----------------------------------------------------------------

def check_f32(bits: np.ndarray) -> None:
    assert_correctly_rounded(log.log_f32, gmpy2.log, 32, bits)


@pytest.mark.fast
def test_f32_is_correctly_rounded_on_adversarial_inputs():
    check_f32(adversarial())


@pytest.mark.fast
def test_the_exception_list_is_sorted_and_each_entry_is_needed_and_right():
    """Sorted (the bisection needs it), and each entry is a correctly rounded result that
    the fast path alone misses (an entry that is not needed is a stale list)."""
    assert_exception_list(log._EXCEPTION_INPUTS, log._EXCEPTION_RESULTS, gmpy2.log,
                          lambda k, x: log._core(k, x).hi)


@pytest.mark.fast
@settings(max_examples=25, deadline=None, derandomize=True, database=None)
@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=64),
       st.lists(st.integers(0x3F000000, 0x40000000), min_size=1, max_size=64),
       st.lists(st.integers(0x5F000000, 0x7F7FFFFF), min_size=1, max_size=64))
def test_f32_is_correctly_rounded_for_drawn_bits(anywhere, near, large):
    """Any bits; bits of inputs in [1/2, 2] (results near 0, where nothing may cancel)
    and their subnormal namesakes (the same significand bits, exponent field 0); large
    inputs (``e ln 2`` the most of the result, where most of the exceptions are)."""
    near = np.asarray(near, np.uint32)
    check_f32(np.concatenate([np.asarray(anywhere, np.uint32), near, near & 0x7FFFFF,
                              np.asarray(large, np.uint32)]))


# -- f16 on the reference ----------------------------------------------------------------

@pytest.mark.fast
def test_f16_is_correctly_rounded_for_every_input():
    assert_correctly_rounded(log.log_f16, gmpy2.log, 16, EVERY_F16)


# -- the same bytes on every backend -----------------------------------------------------

@pytest.fixture(scope="module")
def driver():
    with Driver() as drv:
        yield drv


# (cpu: the operation's own test below compiles the same written-out IR; a second
# compile of it here cost the suite a minute)
@pytest.mark.parametrize("backend", ["wgpu"])
def test_every_backend_gives_the_references_bytes(driver, backend):
    rng = np.random.default_rng(42)
    f32 = np.concatenate([adversarial(), rng.integers(0, 2**32, 4096, dtype=np.uint32),
                          rng.integers(0x3F000000, 0x40000000, 4096, dtype=np.uint32)])
    f32 = np.concatenate([f32, f32[-4096:] & 0x7FFFFF]).astype(np.uint32)
    same_bytes_on(driver, backend, (log.log_f32, log.log_f16), f32)


@pytest.mark.parametrize("backend", ["reference", "cpu", "wgpu"])
def test_the_ir_operation_is_the_librarys_on_every_backend(driver, backend):
    """A program that uses ``ir.log`` itself is given to each backend with the library's
    function written out (the worker host does it): MPFR's bytes on every backend, in a
    single dispatch and as the step of a sequence (the second step takes the log of the
    first's logs: its positive ones, the rest NaN)."""
    rng = np.random.default_rng(5)
    f32 = np.concatenate([adversarial(), rng.integers(0, 2**32, 2048, dtype=np.uint32)])
    with np.errstate(over="ignore"):  # (the largest overflow to inf: inputs too)
        chained = np.exp2(rng.standard_normal(4096) * 40).astype(np.float32)
    operation_is_mpfrs(driver, backend, ir.log, gmpy2.log, f32, chained)
