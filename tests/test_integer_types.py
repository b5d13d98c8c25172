"""The integer types u8, u16, i8, i16, u64 and i64 beside u32 and i32: every integer op and
cast against the corpus's model in Python integers (vyre_core.conformance.cases_widths) over
random and edge values, on the reference in this process and on every backend that claims
the type through workers; u64 and i64 are gated (``dtype.u64``/``dtype.i64`` ops), so a
backend without them is never routed them; 8- and 16-bit buffers of odd lengths, stored
from every invocation at once and in workgroup memory."""

from __future__ import annotations

import numpy as np
import pytest

from vyre_core import Driver, ir
from vyre_core.conformance.cases_widths import INT_TYPES as TYPES
from vyre_core.conformance.cases_widths import WIDE, edges, split_case
from vyre_reference import run as reference_run

N = 2048


def inputs(t: ir.DType) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(t.bits + t.is_signed)
    lo, hi = t.int_range
    a = rng.integers(lo, hi, N, dtype=t.value_np, endpoint=True)
    b = rng.integers(lo, hi, N, dtype=t.value_np, endpoint=True)
    e = np.array(edges(t), t.value_np)
    a[:e.size ** 2] = np.repeat(e, e.size)  # every pair of edge values
    b[:e.size ** 2] = np.tile(e, e.size)
    b[-64:] = rng.integers(-3, 4, 64).astype(t.value_np) if t.is_signed else b[-64:] % 5
    s = rng.integers(0, 2**32, N, dtype=np.uint32)
    s[:80] = np.arange(80)
    return a, b, s


def check(t: ir.DType, run, where: str, types: tuple = tuple(TYPES)) -> None:
    a, b, s = inputs(t)
    for case in split_case(t.value, t, a.tolist(), b.tolist(), s.tolist(), types):
        got = run(case.program, list(case.inputs))
        for out, want, have in zip(case.program.outputs, case.expected, got, strict=True):
            bad = np.flatnonzero(want.view(f"u{want.itemsize}") != have.view(f"u{have.itemsize}"))
            assert bad.size == 0, (f"{where} {t.value} {out.name}: a={a[bad[0]]} b={b[bad[0]]} "
                                   f"s={s[bad[0]]}: got {have[bad[0]]}, want {want[bad[0]]} "
                                   f"({bad.size} differ)")


@pytest.mark.fast
@pytest.mark.parametrize("t", TYPES, ids=str)
def test_the_reference_follows_the_integer_model(t):
    check(t, reference_run, "reference")


@pytest.fixture(scope="module")
def driver():
    with Driver() as drv:
        yield drv


@pytest.mark.parametrize("t", TYPES, ids=str)
def test_every_backend_claiming_the_type_follows_the_model(driver, t):
    check(t, lambda prog, args: driver.dispatch(prog, args, "cpu"), "cpu")
    if t not in WIDE:
        check(t, lambda prog, args: driver.dispatch(prog, args, "wgpu"), "wgpu",
              tuple(d for d in TYPES if d not in WIDE))
