"""vyre_core.mathlib.log2, ``log2 x`` correctly rounded (docs/design-42.md, step 6), held
to MPFR's correctly rounded results (gmpy2 in the binary32 and binary16 contexts) bit for
bit: on the reference in this process over drawn f32 bits and adversarial ones (every power
of two, subnormal inputs of every size, x near 1 from both sides, the table's cell edges
and the sqrt(2) seam, zeros, negatives, NaNs with payloads, infinities, every input of the
exception list) and over every f16 input; then the same programs give the reference's
bytes on cpu and wgpu. (``vyre conform --exhaustive --all-inputs --op log2`` checks every
f32 input.)"""

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
    block,
    f32_bits,
    mpfr,
    operation_is_mpfrs,
    same_bytes_on,
)

from vyre_core import Driver, ir
from vyre_core.mathlib import log2
from vyre_reference import run


def correct(bits: np.ndarray, width: int) -> np.ndarray:
    return mpfr(gmpy2.log2, bits, width)


def program(width: int, lanes: int) -> ir.Program:
    return block(log2.log2_f32 if width == 32 else log2.log2_f16, width, lanes)


def adversarial() -> np.ndarray:
    """Inputs where ``log2 x`` is exact (powers of two, subnormal ones included), near 1
    (no cancellation allowed), on and next to the table's cell edges and the sqrt(2) seam,
    subnormal inputs at every leading-bit position, the special values and every listed
    exception."""
    powers = f32_bits([2.0**e for e in range(-149, 128)])
    one = np.uint32(0x3F800000)
    near_one = np.concatenate([one + np.arange(-4096, 4097, dtype=np.int64),
                               one + (np.int64(1) << np.arange(0, 23)),
                               one - (np.int64(1) << np.arange(0, 22))]).astype(np.uint32)
    # cell edges: significands (1 + (j - 1/2) / 128) and the bits on either side, at
    # exponents 0, -1, 5 and -120
    edges = ((np.arange(0, 130, dtype=np.int64) << 16) - 0x8000) & 0x7FFFFF
    edges = np.concatenate([edges + d for d in (-1, 0, 1)])
    cells = np.concatenate([(edges + (b << 23)) for b in (127, 126, 132, 7)])
    seam = f32_bits([np.sqrt(2), np.sqrt(0.5), 1.4140625, 1.41015625, 1.41796875])
    seam = np.concatenate([seam.astype(np.int64) + d for d in (-1, 0, 1)])
    lead = np.arange(0, 23, dtype=np.int64)
    subnormal = np.concatenate([(np.int64(1) << lead), (np.int64(1) << lead) + 1,
                                (np.int64(2) << lead) - 1, np.array([0x7FFFFF, 0x400001])])
    specials = [0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000,
                0x7F800001, 0xFFFFFFFF, 0x7FBFFFFF, 0x7F7FFFFF, 0xFF7FFFFF, 0xBF800000,
                0x80000001]
    return np.concatenate([powers, near_one, cells.astype(np.uint32), seam.astype(np.uint32),
                           subnormal.astype(np.uint32), np.array(specials, np.uint32),
                           np.array(log2._EXCEPTION_INPUTS, np.uint32)])



# -- the oracle's contexts ---------------------------------------------------------------

@pytest.mark.fast
def test_the_oracle_rounds_as_binary32_and_binary16():
    """Powers of two give their exponents exactly; log2 3 is 1.5849625 rounded once; the
    special values are this page's (semantics.md): -inf at +-0, NaN below zero, inf at
    inf."""
    x = f32_bits([2.0**-149, 0.5, 1, 2.0**127, 3, 0, -0.0, -1, np.inf])
    want32 = f32_bits([-149, -1, 0, 127, np.log2(3), -np.inf, -np.inf, np.nan, np.inf])
    want32[7] = CANONICAL_NAN[32]
    assert correct(x, 32).tolist() == want32.tolist()
    x16 = np.array([2.0**-24, 0.5, 1, 3, 0], np.float16).view(np.uint16)
    want16 = np.array([-24, -1, 0, np.log2(3), -np.inf], np.float16).view(np.uint16)
    assert correct(x16, 16).tolist() == want16.tolist()


# -- f32 on the reference ----------------------------------------------------------------

def check_f32(bits: np.ndarray) -> None:
    assert_correctly_rounded(log2.log2_f32, gmpy2.log2, 32, bits)


@pytest.mark.fast
def test_f32_is_correctly_rounded_on_adversarial_inputs():
    check_f32(adversarial())


@pytest.mark.fast
def test_the_exception_list_is_sorted_and_each_entry_is_needed_and_right():
    """Sorted (the bisection needs it), and each entry is a correctly rounded result that
    the fast path alone misses (an entry that is not needed is a stale list)."""
    assert_exception_list(log2._EXCEPTION_INPUTS, log2._EXCEPTION_RESULTS, gmpy2.log2,
                          lambda k, x: log2._core(k, x).hi)


@pytest.mark.fast
def test_the_table_is_minus_log2_of_the_reciprocals_the_function_computes():
    """``-log2 c_j`` (less 1 from the halved cells on) to 48 bits, for the ``c_j`` that
    ``_reciprocal`` gives on the reference: the table and the computation agree, and
    ``c_j`` is near ``1 / (1 + j / 128)`` (|r| stays within 2^-8 + 2^-15), exactly 1 and
    1/2 at the ends."""
    k = ir.Kernel(workgroup=(64,))
    source = k.read("j", ir.u32)
    out = k.output("out", ir.f32, 129)
    i = k.let("i", ir.global_id())
    out[i] = log2._reciprocal(k, source[i])
    c = run(k.build(), [np.arange(129, dtype=np.uint32)])[0].view(np.float32)
    assert (c[0], c[128]) == (1.0, 0.5)
    m = 1 + np.arange(129) / 128
    assert np.max(np.abs(c * m - 1)) < 2.0**-15
    with gmpy2.context(precision=200):
        for j, cj in enumerate(c):
            want = -gmpy2.log2(gmpy2.mpfr(float(cj))) - (j >= log2._HALVED_FROM)
            error = want - gmpy2.mpfr(float(log2._T_HI[j])) - gmpy2.mpfr(float(log2._T_LO[j]))
            assert abs(error) <= 2.0**-48 * max(abs(want), 2.0**-100), j


@pytest.mark.fast
@settings(max_examples=25, deadline=None, derandomize=True, database=None)
@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=64),
       st.lists(st.integers(0x3F000000, 0x40000000), min_size=1, max_size=64))
def test_f32_is_correctly_rounded_for_drawn_bits(anywhere, near):
    """Any bits, and bits of inputs in [1/2, 2] (results near 0, where nothing may
    cancel), and their subnormal namesakes (the same significand bits, exponent field 0)."""
    near = np.asarray(near, np.uint32)
    check_f32(np.concatenate([np.asarray(anywhere, np.uint32), near, near & 0x7FFFFF]))


# -- f16 on the reference ----------------------------------------------------------------



@pytest.mark.fast
def test_f16_is_correctly_rounded_for_every_input():
    assert_correctly_rounded(log2.log2_f16, gmpy2.log2, 16, EVERY_F16)


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
    same_bytes_on(driver, backend, (log2.log2_f32, log2.log2_f16), f32)


@pytest.mark.parametrize("backend", ["reference", "cpu", "wgpu"])
def test_the_ir_operation_is_the_librarys_on_every_backend(driver, backend):
    """A program that uses ``ir.log2`` itself is given to each backend with the library's
    function written out (the worker host does it): MPFR's bytes on every backend, in a
    single dispatch and as the step of a sequence."""
    rng = np.random.default_rng(5)
    f32 = np.concatenate([adversarial(), rng.integers(0, 2**32, 2048, dtype=np.uint32)])
    with np.errstate(over="ignore"):  # (the largest overflow to inf: inputs too)
        chained = np.exp2(rng.standard_normal(4096) * 40).astype(np.float32)
    operation_is_mpfrs(driver, backend, ir.log2, gmpy2.log2, f32, chained)
