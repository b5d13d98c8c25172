"""Kernel frontend features beyond the statement forms: constant ranges, subgroup
operations, and the frontend gaps a hostile tester found (docs/kernels.md). Pure: run on
the in-process reference."""

from __future__ import annotations

import numpy as np
import pytest

import vyre_core as vyre
from vyre_core import i32, u32
from vyre_core.errors import KernelSyntaxError

pytestmark = pytest.mark.fast


def refused(kernel, args, dim=1) -> KernelSyntaxError:
    with pytest.raises(KernelSyntaxError) as info:
        kernel.program(dim=dim, args=args)
    return info.value


def line_of(err: KernelSyntaxError, kernel) -> int:
    return err.details["line"] - kernel.fn.__code__.co_firstlineno


# -- constant ranges ---------------------------------------------------------------------

@vyre.kernel
def ranged(out: vyre.Array[u32], *, T: vyre.Constant[u32](low=1, high=64) = 16):
    out[vyre.global_id(0)] = T


def test_a_constant_range_lowers_to_the_ir_constants_low_and_high():
    c, = ranged.program(dim=1, args=(np.zeros(1, np.uint32),)).constants
    assert (c.default.value, c.low.value, c.high.value) == (16, 1, 64)


@vyre.kernel
def out_of_range(out: vyre.Array[u32], *,
                 T: vyre.Constant[u32](low=1, high=8) = 16):
    out[vyre.global_id(0)] = T


def test_a_default_outside_its_range_is_refused_at_the_parameters_line():
    err = refused(out_of_range, (np.zeros(1, np.uint32),))
    assert line_of(err, out_of_range) == 2  # (the decorator is line 0)
    assert "default 16 and range [1, 8]" in err.cause and "low=1, high=64" in err.fix


def test_a_range_is_given_by_keyword_once():
    with pytest.raises(KernelSyntaxError, match="no bound"):
        vyre.Constant[u32]()
    with pytest.raises(KernelSyntaxError, match="given twice"):
        vyre.Constant[i32](low=1)(high=2)
