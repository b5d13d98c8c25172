"""vyre_core.mathlib.tanh, ``tanh x`` correctly rounded (docs/design-42.md, sections 2.4 and
8), held to MPFR's correctly rounded results (gmpy2 in the binary32 and binary16 contexts
of mathlib_cases) bit for bit: on the reference in this process over drawn f32 bits and
adversarial ones (both sides of the switch from the series to the quotient at 1/16, the
exp reduction's points ``n ln 2 / 128`` and their neighbours, both sides of where the
result starts rounding to 1 and of where it stops being ``x``, tiny and subnormal inputs,
zeros, NaNs with payloads, infinities, every input of the exception list with its
negative) and over every f16 input; then the same programs give the reference's bytes on
cpu and wgpu. (``vyre conform --exhaustive --all-inputs --op tanh`` checks every f32
input.)"""

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
    f32_bits,
    mpfr,
    operation_is_mpfrs,
    same_bytes_on,
    whole_workgroups,
)

from vyre_core import Driver, ir
from vyre_core.mathlib import tanh


def correct(bits: np.ndarray, width: int) -> np.ndarray:
    return mpfr(gmpy2.tanh, bits, width)


#: The first input whose result is 1 (0x41102CB4, about 9.0109) and the last whose result
#: is ``x`` itself (0x39B89BA2, about 3.5e-4), found by bisection with MPFR.
TO_ONE, LAST_SELF = 0x41102CB4, 0x39B89BA2
#: The magnitudes the exhaustive run found the pair alone misrounding (the exception
#: list's inputs, written again here: a list that loses one fails).
MISROUNDED_BY_THE_PAIR = [0x3AC37DE2, 0x3DC95DB7, 0x40A6EF82]


def adversarial() -> np.ndarray:
    """Inputs at the switch, at the reduction's points and next to them, near the
    thresholds, tiny and subnormal, the special values and every listed exception, each
    with its negative."""
    f32 = np.float32
    # a nearest n ln 2 / 128 (-2a at the exp core's points: r nearly 0, every table entry)
    # and its f32 neighbours either side
    points = (np.arange(1, 1700) * (np.log(2) / 128)).astype(f32)
    points = np.concatenate([points, np.nextafter(points, f32(np.inf)),
                             np.nextafter(points, f32(-np.inf))])
    halves = ((np.arange(1, 1700) + 0.5) * (np.log(2) / 128)).astype(f32)
    switch = np.arange(0x3D800000 - 2048, 0x3D800000 + 2048, dtype=np.uint32)
    thresholds = np.concatenate([np.arange(t - 512, t + 512, dtype=np.uint32)
                                 for t in (TO_ONE, LAST_SELF, 0x39800000)])
    # every power of two from the least subnormal to 16, and their neighbours
    powers = np.arange(-149, 5, dtype=np.float64)
    powers = f32_bits(np.exp2(powers))
    tiny = np.concatenate([powers, powers + 1, powers - 1, np.arange(1, 4096, dtype=np.uint32),
                           np.linspace(0x00800000, 0x39800000, 4096).astype(np.uint32)])
    listed = np.array(MISROUNDED_BY_THE_PAIR + tanh._EXCEPTION_INPUTS, np.uint32)
    values = np.concatenate([f32_bits(np.concatenate([points, halves])), switch, thresholds,
                             tiny, listed])
    specials = [0x00000000, 0x7F800000, 0x7FC00000, 0x7F800001, 0x7FBFFFFF, 0x7F7FFFFF]
    positive = np.concatenate([values, np.array(specials, np.uint32)]).astype(np.uint32)
    return np.concatenate([positive, positive | 0x80000000])



# -- the oracle ---------------------------------------------------------------------------

@pytest.mark.fast
def test_the_oracle_gives_tanhs_special_values_and_thresholds():
    """``tanh(+-0) = +-0``, ``tanh(+-inf) = +-1``; 1 from ``TO_ONE`` on, ``x`` itself up to
    ``LAST_SELF``; numpy's ``tanh`` in f64 agrees where it is far from a rounding boundary."""
    x = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, TO_ONE - 1, TO_ONE, LAST_SELF,
                  LAST_SELF + 1], np.uint32)
    assert correct(x, 32).tolist() == [0, 0x80000000, 0x3F800000, 0xBF800000, 0x3F7FFFFF,
                                       0x3F800000, LAST_SELF, LAST_SELF]
    sample = np.linspace(-10, 10, 1001).astype(np.float32)
    assert correct(sample.view(np.uint32), 32).tolist() == np.tanh(
        sample.astype(np.float64)).astype(np.float32).view(np.uint32).tolist()


# -- f32 on the reference ----------------------------------------------------------------

def check_f32(bits: np.ndarray) -> None:
    assert_correctly_rounded(tanh.tanh_f32, gmpy2.tanh, 32, bits)


@pytest.mark.fast
def test_f32_is_correctly_rounded_on_adversarial_inputs():
    check_f32(adversarial())


@pytest.mark.fast
def test_the_exception_list_is_sorted_and_each_entry_is_needed_and_right():
    """Sorted (the bisection needs it), and each entry is a correctly rounded result that
    the pair alone misses (an entry that is not needed is a stale list); the list holds
    magnitudes, and a listed input's negative gets the negated result."""
    assert_exception_list(tanh._EXCEPTION_INPUTS, tanh._EXCEPTION_RESULTS, gmpy2.tanh,
                          lambda k, x: tanh._core(k, x).hi)
    assert all(bits < 0x80000000 for bits in tanh._EXCEPTION_INPUTS)
    check_f32(np.array(tanh._EXCEPTION_INPUTS, np.uint32) | 0x80000000)


@pytest.mark.fast
@settings(max_examples=25, deadline=None, derandomize=True, database=None)
@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=64),
       st.lists(st.integers(0x39000000, 0x41180000), min_size=1, max_size=64))
def test_f32_is_correctly_rounded_for_drawn_bits(anywhere, ordinary):
    """Any bits, and bits of the inputs whose results are neither ``x`` nor +-1."""
    ordinary = np.asarray(ordinary, np.uint32)
    check_f32(np.concatenate([np.asarray(anywhere, np.uint32), ordinary,
                              ordinary | 0x80000000]))


# -- f16 on the reference ----------------------------------------------------------------

@pytest.mark.fast
def test_f16_is_correctly_rounded_for_every_input():
    assert_correctly_rounded(tanh.tanh_f16, gmpy2.tanh, 16, EVERY_F16)


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
                          rng.integers(0x39000000, 0x41180000, 4096, dtype=np.uint32)])
    f32 = np.concatenate([f32, f32[-4096:] | 0x80000000]).astype(np.uint32)
    same_bytes_on(driver, backend, (tanh.tanh_f32, tanh.tanh_f16), f32)


@pytest.mark.parametrize("backend", ["reference", "cpu", "wgpu"])
def test_the_ir_operation_is_the_librarys_on_every_backend(driver, backend):
    """A program that uses ``ir.tanh`` itself is given to each backend with the library's
    function written out (the worker host does it): MPFR's bytes on every backend, in a
    single dispatch and as the step of a sequence."""
    rng = np.random.default_rng(5)
    f32 = np.concatenate([adversarial(), rng.integers(0, 2**32, 2048, dtype=np.uint32)])
    chained = (rng.standard_normal(4096) * 3).astype(np.float32)
    operation_is_mpfrs(driver, backend, ir.tanh, gmpy2.tanh, f32, chained)


@pytest.mark.parametrize("floats", [ir.f32, ir.f16], ids=str)
def test_the_cpu_backends_helper_gives_the_references_bytes(driver, floats):
    """Past ``INLINE_CALLS`` calls in a kernel the cpu backend calls one numba helper
    written from the library's IR (vyre_cpu/mathlib.py): ``tanh`` applied five times over,
    the same bytes as the reference, which writes each call out."""
    from vyre_cpu.mathlib import INLINE_CALLS

    calls = INLINE_CALLS + 1
    rng = np.random.default_rng(9)
    x = (EVERY_F16.view(np.float16) if floats is ir.f16 else whole_workgroups(np.concatenate([
        adversarial().view(np.float32), (rng.standard_normal(4096) * 3).astype(np.float32)])))
    k = ir.Kernel(workgroup=(64,))
    src, out = k.read("x", floats), k.output("out", floats, x.size)
    i = k.let("i", ir.global_id())
    v = src[i]
    for _ in range(calls):
        v = ir.tanh(v)
    out[i] = v
    program = k.build()
    from vyre_cpu import codegen

    assert f"mathlib_tanh_{floats.value}(" in codegen.generate(program).source
    want = driver.dispatch(program, [x], backend="reference")[0]
    assert driver.dispatch(program, [x], backend="cpu")[0].tobytes() == want.tobytes()
