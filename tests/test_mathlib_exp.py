"""vyre_core.mathlib.exp, ``e^x`` correctly rounded (docs/design-42.md, sections 2.4 and
8), held to MPFR's correctly rounded results (gmpy2 in the binary32 and binary16 contexts
of test_mathlib_exp2) bit for bit: on the reference in this process over drawn f32 bits
and adversarial ones (the reduction's points ``n ln 2 / 64`` and their neighbours, the
subnormal results sampled densely, both sides of the overflow and underflow thresholds,
tiny inputs, zeros, NaNs with payloads, infinities, every input of the exception list) and
over every f16 input; then the same programs give the reference's bytes on cpu and wgpu.
(``vyre conform --exhaustive --all-inputs --op exp`` checks every f32 input.)"""

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
from vyre_core.mathlib import exp
from vyre_core.mathlib.exp2 import round_f32


def correct(bits: np.ndarray, width: int) -> np.ndarray:
    return mpfr(gmpy2.exp, bits, width)


def program(width: int, lanes: int) -> ir.Program:
    return block(exp.exp_f32 if width == 32 else exp.exp_f16, width, lanes)


#: ``e^x``'s thresholds in f32 (the first input past each, with its neighbours below):
#: infinity from 0x42B17218, normal results down to 0xC2AEAC4F, +0 from 0xC2CFF1B5.
THRESHOLDS = [88.72283935546875, -87.3365478515625, -103.97208404541016]


def adversarial() -> np.ndarray:
    """Inputs at the reduction's points and next to them, with subnormal results, near
    overflow and underflow, near 1, the special values and every listed exception."""
    f32 = np.float32
    # x nearest n ln 2 / 64 (r nearly 0, every table entry j) for n across the range,
    # and the f32 neighbours either side
    points = (np.arange(-9600, 8200, 7) * (np.log(2) / 64)).astype(f32)
    points = np.concatenate([points, np.nextafter(points, f32(np.inf)),
                             np.nextafter(points, f32(-np.inf))])
    # half-way between points: |r| at its largest, n decided by the f32 product
    halves = ((np.arange(-9600, 8200, 7) + 0.5) * (np.log(2) / 64)).astype(f32)
    # subnormal results and the least normal ones: 4096 bit patterns spread over
    # [-104, -87] (every reduced argument's size)
    subnormal = np.linspace(0xC2AE0000, 0xC2D00000, 4096).astype(np.uint32).view(f32)
    integers = np.arange(-110, 95, dtype=f32)
    near = [np.nextafter(f32(v), f32(d)) for v in THRESHOLDS for d in (-np.inf, np.inf)]
    tiny = [2.0**-149, -(2.0**-149), 2.0**-126, 2.0**-30, -(2.0**-30), 2.0**-25, -(2.0**-25),
            2.0**-24, -(2.0**-24), 2.0**-26, -(2.0**-26), 2.0**-12, -(2.0**-12)]
    tiny += [np.nextafter(f32(v), f32(d)) for v in tiny for d in (0, 1)]
    values = np.concatenate([points, halves, subnormal, integers,
                             f32_bits(THRESHOLDS + near + tiny).view(f32)])
    specials = [0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000,
                0x7F800001, 0xFFFFFFFF, 0x7FBFFFFF, 0x7F7FFFFF, 0xFF7FFFFF]
    return np.concatenate([values.view(np.uint32), np.array(specials, np.uint32),
                           np.array(exp._EXCEPTION_INPUTS, np.uint32)])



# -- the oracle ---------------------------------------------------------------------------

@pytest.mark.fast
def test_the_oracle_gives_exps_exact_case_and_thresholds():
    """``e^0 = 1``; 0x42B17217 is the last input with a finite result; half the least
    subnormal, ``2^-150``, lies between 0xC2CFF1B4 (rounds up to 2^-149) and 0xC2CFF1B5
    (to +0); numpy's ``exp`` in f64 agrees where it is far from a rounding boundary."""
    x = np.array([0, 0x80000000, 0x42B17217, 0x42B17218, 0xC2CFF1B4, 0xC2CFF1B5, 0x3F800000],
                 np.uint32)
    assert correct(x, 32).tolist() == [0x3F800000, 0x3F800000, 0x7F7FFF84, 0x7F800000, 1, 0,
                                       0x402DF854]
    sample = np.linspace(-80, 80, 1001).astype(np.float32)
    assert correct(sample.view(np.uint32), 32).tolist() == np.exp(
        sample.astype(np.float64)).astype(np.float32).view(np.uint32).tolist()


# -- f32 on the reference ----------------------------------------------------------------

def check_f32(bits: np.ndarray) -> None:
    assert_correctly_rounded(exp.exp_f32, gmpy2.exp, 32, bits)


@pytest.mark.fast
def test_f32_is_correctly_rounded_on_adversarial_inputs():
    check_f32(adversarial())


@pytest.mark.fast
def test_the_exception_list_is_sorted_and_each_entry_is_needed_and_right():
    """Sorted (the bisection needs it), and each entry is a correctly rounded result that
    the fast path alone misses (an entry that is not needed is a stale list)."""
    assert_exception_list(exp._EXCEPTION_INPUTS, exp._EXCEPTION_RESULTS, gmpy2.exp,
                          lambda k, x: round_f32(k, *exp.core(k, x)))


@pytest.mark.fast
@settings(max_examples=25, deadline=None, derandomize=True, database=None)
@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=64),
       st.lists(st.integers(0x32000000, 0x42D00000), min_size=1, max_size=64))
def test_f32_is_correctly_rounded_for_drawn_bits(anywhere, ordinary):
    """Any bits, and bits of the inputs whose results are neither 0, 1 nor infinity."""
    ordinary = np.asarray(ordinary, np.uint32)
    check_f32(np.concatenate([np.asarray(anywhere, np.uint32), ordinary,
                              ordinary | 0x80000000]))


# -- f16 on the reference ----------------------------------------------------------------

@pytest.mark.fast
def test_f16_is_correctly_rounded_for_every_input():
    assert_correctly_rounded(exp.exp_f16, gmpy2.exp, 16, EVERY_F16)


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
                          rng.integers(0x32000000, 0x42D00000, 4096, dtype=np.uint32)])
    f32 = np.concatenate([f32, f32[-4096:] | 0x80000000]).astype(np.uint32)
    same_bytes_on(driver, backend, (exp.exp_f32, exp.exp_f16), f32)


@pytest.mark.parametrize("backend", ["reference", "cpu", "wgpu"])
def test_the_ir_operation_is_the_librarys_on_every_backend(driver, backend):
    """A program that uses ``ir.exp`` itself is given to each backend with the library's
    function written out (the worker host does it): MPFR's bytes on every backend, in a
    single dispatch and as the step of a sequence."""
    rng = np.random.default_rng(5)
    f32 = np.concatenate([adversarial(), rng.integers(0, 2**32, 2048, dtype=np.uint32)])
    chained = (rng.standard_normal(4096) * 4).astype(np.float32)
    operation_is_mpfrs(driver, backend, ir.exp, gmpy2.exp, f32, chained)
