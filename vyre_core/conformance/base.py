"""The conformance case type and the helpers case modules share.

Expected outputs are worked out by hand or with plain numpy, never by a vyre backend.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vyre_core import ir
from vyre_core.contract.types import LoopRun
from vyre_core.sequence import Sequence as Sequence_

MIN, MAX = -(2**31), 2**31 - 1   # i32 range
UMAX = 2**32 - 1                 # u32 all ones
INF, NAN = float("inf"), float("nan")


@dataclass(frozen=True)
class Case:
    """One program, its inputs and its expected outputs (storage dtypes, output order)."""

    name: str
    program: ir.Program
    inputs: tuple[np.ndarray | bytes, ...]
    expected: tuple[np.ndarray, ...]
    grid: tuple[int, ...] | None = None
    ulp: int = 0
    constants: tuple[tuple[str, Any], ...] = ()  # specialization values the case chooses


@dataclass(frozen=True)
class SequenceCase:
    """One sequence, its inputs (declaration order), the expected bytes of each of its
    returns, and how each of its loops runs (``Outputs.loops``)."""

    name: str
    sequence: Sequence_
    inputs: tuple[np.ndarray, ...]
    expected: tuple[np.ndarray, ...]
    loops: tuple[LoopRun, ...]


def arr(dtype: ir.DType, values: Any) -> np.ndarray:
    """``values`` as a 1-D array of ``dtype``'s storage type (bool as 0/1 u32 words)."""
    if dtype is ir.bool_:
        values = np.asarray(values, dtype=bool)
    return np.asarray(values, dtype=dtype.storage_np).reshape(-1)


def wrap_i32(values: Any) -> np.ndarray:
    """Integers (small enough for int64) reduced modulo 2**32 into the i32 range."""
    wide = np.asarray(values, dtype=np.int64)
    return ((wide + 2**31) % 2**32 - 2**31).astype(np.int32)


def case_of(name: str, kernel: ir.Kernel, inputs: Sequence[np.ndarray | bytes],
            expected: Sequence[Any], grid: tuple[int, ...] | None = None, ulp: int = 0,
            constants: dict[str, Any] | None = None) -> Case:
    """Build ``kernel`` and pair it with data; expected values go to output storage dtypes."""
    program = kernel.build()
    outs = tuple(arr(b.dtype, e) for b, e in zip(program.outputs, expected, strict=True))
    return Case(name, program, tuple(inputs), outs, grid, ulp,
                tuple(sorted((constants or {}).items())))


def map_case(name: str, inputs: Sequence[tuple[str, ir.DType, np.ndarray]],
             outputs: Sequence[tuple[str, ir.DType, Callable[..., ir.Val], Any]],
             ulp: int = 0) -> Case:
    """One invocation per element: ``out[i] = fn(in_0[i], in_1[i], ...)`` for each output
    ``(name, dtype, fn, expected)``, guarded by the first input's runtime length."""
    n = len(inputs[0][2])
    k = ir.Kernel(workgroup=(64,))
    ins = [k.read(name_, dtype) for name_, dtype, _ in inputs]
    outs = [(k.output(name_, dtype, count=n), fn) for name_, dtype, fn, _ in outputs]
    i = k.let("i", ir.global_id(0))
    with k.if_(i < ins[0].len):
        args = [b[i] for b in ins]
        for out, fn in outs:
            out[i] = fn(*args)
    return case_of(name, k, [a for *_, a in inputs], [e for *_, e in outputs], ulp=ulp)
