"""vyre_core.mathlib.exp2, ``2^x`` correctly rounded (docs/design-42.md, step 5), held to
MPFR's correctly rounded results (gmpy2 in the binary32 and binary16 contexts) bit for bit:
on the reference in this process over drawn f32 bits and adversarial ones (every integer
exponent, the subnormal results sampled densely, next to overflow, tiny inputs, zeros,
NaNs with payloads, infinities, every input of the exception list) and over every f16
input; then the same programs give the reference's bytes on cpu and wgpu.
(``vyre conform --exhaustive --all-inputs --op exp2`` checks every f32 input.)"""

from __future__ import annotations

import gmpy2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mathlib_cases import (
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
from vyre_core.mathlib import exp2


def correct(bits: np.ndarray, width: int) -> np.ndarray:
    return mpfr(gmpy2.exp2, bits, width)


def program(width: int, lanes: int) -> ir.Program:
    return block(exp2.exp2_f32 if width == 32 else exp2.exp2_f16, width, lanes)


#: The inputs whose results lie nearest a rounding boundary (within 2^-48, relative) that
#: the exhaustive run found (tools/math_exceptions.py): the fast path alone misrounds them.
HARD = [0x33B8AA3B, 0x37E338EB, 0x383ECB1D, 0x3B429D37, 0x3B53AA14, 0x3C02A9AD, 0x3DC9ABE2,
        0xB4FDEA14, 0xB5160A52, 0xB63B8CF0, 0xB8D3D026, 0xBCAF4D02, 0xBCF3A937]


def adversarial() -> np.ndarray:
    """Inputs where 2^x is exact, a tie, subnormal, near overflow or near 1, the special
    values, the hard cases and every listed exception."""
    f32 = np.float32
    integers = np.arange(-160, 140, dtype=f32)  # (-149..127 exact; beyond 0 and inf)
    # subnormal results and the least normal ones: x in [-150, -124] at every 1/64 (the
    # table's points) and at 2048 bit patterns spread evenly between (every reduced
    # argument's size)
    subnormal = np.concatenate([np.arange(-150 * 64, -124 * 64 + 1, dtype=f32) / 64,
                                np.linspace(0xC2F80000, 0xC3160000, 2048).astype(
                                    np.uint32).view(f32)])
    around = [-150, -149.5, -149, -126, -125.5, 128, 127, -151, 0.5, -0.5, 1, -1]
    near = [np.nextafter(f32(v), f32(d)) for v in around for d in (-np.inf, np.inf)]
    tiny = [2.0**-149, -(2.0**-149), 2.0**-126, 2.0**-30, -(2.0**-30), 2.0**-25, -(2.0**-25),
            2.0**-24, -(2.0**-24), 2.0**-26, -(2.0**-26)]
    tiny += [np.nextafter(f32(v), f32(d)) for v in tiny for d in (0, 1)]
    values = np.concatenate([integers, subnormal, f32_bits(around + near + tiny).view(f32)])
    specials = [0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000,
                0x7F800001, 0xFFFFFFFF, 0x7FBFFFFF, 0x7F7FFFFF, 0xFF7FFFFF]
    return np.concatenate([values.view(np.uint32), np.array(specials + HARD, np.uint32),
                           np.array(exp2._EXCEPTION_INPUTS, np.uint32)])



# -- the oracle's contexts ---------------------------------------------------------------

@pytest.mark.fast
def test_the_oracle_rounds_as_binary32_and_binary16():
    """Exact powers of two are themselves; half the least subnormal (a tie) goes to +0,
    a hair above it to the least subnormal; the first power past the largest finite is
    infinity; a subnormal result lands on its grid (2^-126.5 to 22 significant bits)."""
    x = f32_bits([-149, -150, -149.99, 127, 128, 0, -126.5])
    want32 = f32_bits([2.0**-149, 0, 2.0**-149, 2.0**127, np.inf, 1, 0])
    want32[-1] = round(2**-126.5 * 2**149)  # (the subnormal's bits are its quanta)
    assert correct(x, 32).tolist() == want32.tolist()
    x16 = np.array([-24, -25, -24.99, 15, 16, 0, -14.5], np.float16).view(np.uint16)
    want16 = np.array([2.0**-24, 0, 2.0**-24, 2.0**15, np.inf, 1, 0], np.float16).view(
        np.uint16)
    want16[-1] = round(2**-14.5 * 2**24)
    assert correct(x16, 16).tolist() == want16.tolist()


# -- f32 on the reference ----------------------------------------------------------------

def check_f32(bits: np.ndarray) -> None:
    assert_correctly_rounded(exp2.exp2_f32, gmpy2.exp2, 32, bits)


@pytest.mark.fast
def test_f32_is_correctly_rounded_on_adversarial_inputs():
    check_f32(adversarial())


@pytest.mark.fast
def test_the_exception_list_is_sorted_and_each_entry_is_needed_and_right():
    """Sorted (the bisection needs it), and each entry is a correctly rounded result that
    the fast path alone misses (an entry that is not needed is a stale list)."""
    assert_exception_list(exp2._EXCEPTION_INPUTS, exp2._EXCEPTION_RESULTS, gmpy2.exp2,
                          lambda k, x: exp2.round_f32(k, *exp2._core(k, x)))


@pytest.mark.fast
@settings(max_examples=25, deadline=None, derandomize=True, database=None)
@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=64),
       st.lists(st.integers(0x32000000, 0x43100000), min_size=1, max_size=64))
def test_f32_is_correctly_rounded_for_drawn_bits(anywhere, ordinary):
    """Any bits, and bits of the inputs whose results are neither 0, 1 nor infinity."""
    ordinary = np.asarray(ordinary, np.uint32)
    check_f32(np.concatenate([np.asarray(anywhere, np.uint32), ordinary,
                              ordinary | 0x80000000]))


# -- f16 on the reference ----------------------------------------------------------------



@pytest.mark.fast
def test_f16_is_correctly_rounded_for_every_input():
    assert_correctly_rounded(exp2.exp2_f16, gmpy2.exp2, 16, EVERY_F16)


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
                          rng.integers(0x32000000, 0x43100000, 4096, dtype=np.uint32)])
    f32 = np.concatenate([f32, f32[-4096:] | 0x80000000]).astype(np.uint32)
    same_bytes_on(driver, backend, (exp2.exp2_f32, exp2.exp2_f16), f32)


@pytest.mark.parametrize("backend", ["reference", "cpu", "wgpu"])
def test_the_ir_operation_is_the_librarys_on_every_backend(driver, backend):
    """A program that uses ``ir.exp2`` itself is given to each backend with the library's
    function written out (the worker host does it): MPFR's bytes on every backend, in a
    single dispatch and as the step of a sequence."""
    rng = np.random.default_rng(5)
    f32 = np.concatenate([adversarial(), rng.integers(0, 2**32, 2048, dtype=np.uint32)])
    chained = (rng.standard_normal(4096) * 8).astype(np.float32)
    operation_is_mpfrs(driver, backend, ir.exp2, gmpy2.exp2, f32, chained)
