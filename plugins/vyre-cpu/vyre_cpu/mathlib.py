"""The math library's functions as numba helpers, one per function, in one module per
library version, for kernels that call the library often.

Written out, every call of a function is its whole body in the kernel (``exp2``: about
170 operations). numba vectorizes that (4.5 ns an element over 2 cores, measured), but
its compile time grows faster than the code: 2 s a call, 400 s for a kernel of 32 calls.
A helper is compiled once (kept in numba's cache on disk beside the kernels, under the
library's version), and a kernel's compile sees only calls (32 calls: 3 s), but a call
is not vectorized (50 ns an element). So a kernel whose calls of the library weigh at
most ``INLINE_CALLS`` (a call weighs one per ``CALL_NODES`` of its function) has them
written out (``mathlib.inline``, as every other backend), and a heavier one the helpers.
The helpers are written by the kernels' own writer from the library's IR, so they
compute the same operations, rounded the same way: the bytes are the library's either
way (``vyre_lowers_math_library`` says so for exactly this version). Here: the rule and
the names; ``math_helpers``: the helpers' source; ``compiler``: their module, loaded once.
"""

from __future__ import annotations

import re
from functools import cache

from vyre_core.ir import Program
from vyre_core.ir.dtypes import DType
from vyre_core.ir.nodes import walk
from vyre_core.mathlib.inline import calls, expand
from vyre_core.mathlib.library import Operation, functions

#: The most calls of the library a kernel has written out; past it, it calls helpers.
INLINE_CALLS = 4

#: The name kernels import the helpers by: the module of this library version's helpers
#: is registered under it when loaded (``compiler.helpers_module``).
MODULE = "vyre_cpu_mathlib"


#: A function's written-out body counts as one call per this many nodes, rounded up:
#: `exp`, `exp2`, `log`, `log2` and f32 and f64 `tanh` (300 to 850 nodes) count one; `sin`,
#: `cos` and `tan` in every type, f16 `tanh`, `pow` and `atan2`, f64 `atan2` and `pow`
#: (1000 to 1600) two (four f64 trigonometric calls written out took numba past a
#: dispatch's 60 s deadline on the loaded 2-core machine); f32 `atan2` (4225, its accurate
#: path in loops) five, so it is always its helper.
CALL_NODES = 1000


def written_out_where_few(program: Program) -> Program:
    """``program`` with the library written out if its calls of it weigh at most
    ``INLINE_CALLS``, each weighed by its function's length (``CALL_NODES``), else as it
    is (its calls become helper calls)."""
    called = calls(program)
    if not called:  # (the library's functions stay unbuilt in a worker that runs none)
        return program
    weights = _weights()
    return expand(program) if sum(weights[c] for c in called) <= INLINE_CALLS else program


@cache
def _weights() -> dict[Operation, int]:
    """What one call of each of the library's functions counts as."""
    return {operation: -(-sum(1 for _ in walk(fn.body)) // CALL_NODES)
            for operation, fn in functions().items()}


def helper_name(operation: Operation) -> str:
    """The helper of ``operation`` (``("unop.exp2", f32)`` → ``mathlib_exp2_f32``)."""
    op, dtype = operation
    return f"mathlib_{re.sub(r'[^0-9a-z]', '_', op.split('.', 1)[1])}_{dtype.value}"


def call(operation: Operation, args: list[str]) -> tuple[str, DType, str] | None:
    """The call of ``operation``'s helper on ``args`` (source), its type, and the import
    line a kernel module needs for it; None when the library has no such function."""
    fn = functions().get(operation)
    if fn is None:
        return None
    name = helper_name(operation)
    return (f"{name}({', '.join(args)})", fn.dtype,
            f"from {MODULE} import {name}")
