"""The source of the math library's numba helpers (``vyre_cpu.mathlib``): every function
of the library, each a ``@njit`` function of its parameters returning its result, written
by the kernels' own writer from the function's IR, so its operations are the ones a
kernel with the function written out runs."""

from __future__ import annotations

from vyre_core.ir import Program
from vyre_core.mathlib.library import functions, param
from vyre_cpu.codegen import _Writer
from vyre_cpu.mathlib import helper_name
from vyre_cpu.writing import HEAD


def source() -> str:
    """The helpers' module source, for this process's library."""
    library = functions()
    writer = _Writer(Program((), (1, 1, 1), tuple(s for fn in library.values()
                                                  for s in fn.body)))
    writer.cancellable = False  # (a helper has no stop words; its loops are short)
    parts: list[str] = []
    for operation, fn in library.items():
        args = [param(i) for i in range(len(fn.params))]
        writer.scopes = [{a: (a, t) for a, t in zip(args, fn.params, strict=True)}]
        writer.lines, writer.entry = [], []
        for statement in fn.body:  # (in the function's scope: the result reads its lets)
            writer.stmt(statement, 1)
        result, _ = writer.expr(fn.result)
        parts += ["", "", "@njit(cache=True, nogil=True)",
                  f"def {helper_name(operation)}({', '.join(args)}):",
                  *writer.entry, *writer.lines, f"    return {result}"]
    return "\n".join([*HEAD, *writer.consts, *parts, ""])
