"""A ``@vyre.kernel`` as a sequence step: each parameter bound to a sequence buffer (or,
for a scalar, given as a number), the kernel compiled for the signature those buffers
say, the numbers, the extents of shaped arrays and the step's ``dim`` (the kernel's
hidden launch buffer) made constants of the sequence.
Sequence buffers have counts, not shapes: a shaped array's extents come from the
step's ``shapes=``."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from vyre_core.errors import InvalidConfigError, InvalidSequenceError
from vyre_core.ir.dtypes import DType
from vyre_core.ir.program import Program
from vyre_core.kernels.annotations import ArrayType
from vyre_core.kernels.kernel import KernelFunction, axes_of, scalar_array
from vyre_core.kernels.signature import type_of_argument
from vyre_core.kernels.values import Refusal
from vyre_core.sequence.nodes import Role, SequenceBuffer

#: What a kernel parameter may be bound to: a sequence buffer's name, or a number.
Binding = str | bool | int | float | np.generic


@dataclass(frozen=True)
class KernelStep:
    """What a kernel step adds: the program, its buffers' bindings, and the constants
    made for it (scalar values, extents), to be declared in the sequence."""

    program: Program
    bind: dict[str, str]
    constants: tuple[SequenceBuffer, ...]


def kernel_step(kernel: KernelFunction, bind: Mapping[str, Binding], dim: Any,
                shapes: Mapping[str, Any], declared: Mapping[str, SequenceBuffer],
                number: int) -> KernelStep:
    """``kernel`` run over ``dim`` as step ``number`` of a sequence whose buffers so far
    are ``declared``: each parameter bound to the buffer named in ``bind`` or of its own
    name; a number in ``bind`` is a scalar's value (a constant ``step<n>_<param>``)."""
    label = f"kernel {kernel.__name__!r}"
    names = kernel.params.names
    if dim is None:
        raise _refuse(f"{label} in a step needs dim=", "Pass dim=n or dim=(rows, cols): "
                      "the invocations per axis, as drv.launch takes it.")
    try:
        axes = axes_of(dim)
    except InvalidConfigError as exc:
        raise _refuse(exc.cause, exc.fix) from None
    for what, keys in (("bind", bind), ("shapes", shapes)):
        unknown = sorted(set(keys) - set(names))
        if unknown:
            raise _refuse(f"{what} names {unknown}, which {label} does not have (its "
                          f"parameters: {', '.join(names)})",
                          f"Key {what} by the kernel's parameter names.")
    types: list[ArrayType | DType] = []
    bound: dict[str, str] = {}
    made: list[SequenceBuffer] = []
    from_u32: set[str] = set()
    taken = set(declared)
    for name, want in zip(names, kernel.params.declared, strict=True):
        value = bind.get(name, name if name in declared else None)
        if value is None:
            raise _missing(label, name, want)
        if isinstance(value, str):
            buffer = declared.get(value)
            if buffer is None:
                raise _refuse(f"{label}: parameter {name!r} is bound to {value!r}, which the "
                              "sequence does not declare (yet)",
                              "Declare every buffer (input, constant, transient, resident) "
                              "before the steps that use it.")
            t = _type_from(label, name, want, buffer, shapes.get(name))
            if t is DType.I32 and buffer.role is Role.ITERATION:
                from_u32.add(name)
            bound[name] = value
        elif isinstance(value, bool | int | float | np.generic) and not isinstance(
                want, ArrayType):
            t = want if want is not None else type_of_argument(value, name)
            try:
                data = scalar_array(value, t)
            except Refusal as r:
                raise _refuse(f"{label}: parameter {name!r}: {r.cause}", r.fix) from None
            made.append(_constant(_fresh(f"step{number}_{name}", taken), t, data))
            bound[name] = made[-1].name
        else:
            raise _refuse(f"{label}: parameter {name!r} is bound to a "
                          f"{type(value).__name__}", "Bind an array parameter to a sequence "
                          "buffer's name; give a scalar a buffer's name or a number.")
        if name in shapes and not (isinstance(t, ArrayType) and t.ndim > 1):
            raise _refuse(f"{label}: shapes names {name!r}, which is not a shaped array",
                          "Give shapes= only for parameters annotated vyre.Array[dtype, 2] "
                          "(or 3).")
        types.append(t)
    compiled = kernel.compiled_for(tuple(types), axes, frozenset(from_u32))
    hidden = compiled.launch_values(dim, [n for p in compiled.shaped
                                          for n in shapes[names[p]]])
    if hidden is not None:
        made.append(_constant(_fresh(f"step{number}_{compiled.launch}", taken), DType.U32,
                              hidden))
        bound[compiled.launch] = made[-1].name
    return KernelStep(compiled.program, bound, tuple(made))


def _type_from(label: str, name: str, want: ArrayType | DType | None,
               buffer: SequenceBuffer, shape: Any) -> ArrayType | DType:
    """The parameter's type, as the sequence buffer bound to it says: an unannotated
    parameter is an array of the buffer's dtype (shaped when ``shapes=`` names it)."""
    annotated = want.value if isinstance(want, DType) else \
        "unannotated" if want is None else repr(want)
    where = f"{label}: parameter {name!r} ({annotated}) is bound to {buffer.role.value} " \
        f"{buffer.name!r} ({buffer.dtype.value}[{buffer.count}])"
    if isinstance(want, DType):
        iteration = buffer.role is Role.ITERATION and want in (DType.U32, DType.I32)
        if buffer.count != 1 or (buffer.dtype is not want and not iteration):
            raise _refuse(where, f"Bind it to a buffer of dtype {want.value} and one element, "
                          f"or give its value as a number: bind={{{name!r}: "
                          f"{1.0 if want.is_float else 1}}}.")
        return want
    dtype = buffer.dtype if want is None else want.dtype
    ndim = (len(shape) if isinstance(shape, tuple | list) else 1) if want is None \
        else want.ndim
    if buffer.dtype is not dtype:
        raise _refuse(where, f"Bind it to a buffer of dtype {dtype.value}.")
    if ndim > 1:
        _check_shape(where, name, ndim, shape, buffer.count)
    return ArrayType(dtype, ndim)


def _check_shape(where: str, name: str, ndim: int, shape: Any, count: int) -> None:
    axes = ["rows", "cols", "depth"][:ndim]
    example = f"shapes={{{name!r}: ({', '.join(axes)})}}"
    if shape is None:
        raise _refuse(f"{where}: a shaped array, and shapes= does not give its shape",
                      f"Pass its extents, numpy's order: {example}, their product "
                      f"{count}.")
    if not isinstance(shape, tuple | list) or len(shape) != ndim or not all(
            isinstance(n, int | np.integer) and not isinstance(n, bool) and n >= 1
            for n in shape) or math.prod(int(n) for n in shape) != count:
        raise _refuse(f"{where}: shapes gives {shape!r}, not {ndim} extents whose product "
                      f"is {count}", f"Pass {example} with {' * '.join(axes)} == {count}.")


def _missing(label: str, name: str, want: ArrayType | DType | None) -> InvalidSequenceError:
    if isinstance(want, DType):
        return _refuse(f"{label}: scalar parameter {name!r} has no value",
                       f"Give it one in bind: bind={{{name!r}: 2.0}} (a number), or "
                       f"bind={{{name!r}: 'buffer'}} (a buffer of dtype {want.value} and one "
                       "element, a loop's number `k` too).")
    return _refuse(f"{label}: parameter {name!r} is bound to no sequence buffer (none is "
                   f"named {name!r})", f"Bind it: bind={{{name!r}: 'buffer'}}, or declare a "
                   f"buffer named {name!r} before the step.")


def _constant(name: str, dtype: DType, data: np.ndarray) -> SequenceBuffer:
    return SequenceBuffer(name, dtype, int(data.size), Role.CONSTANT,
                          np.ascontiguousarray(data, dtype.storage_np).tobytes())


def _fresh(name: str, taken: set[str]) -> str:
    """``name``, or it with leading underscores until no buffer has it."""
    while name in taken:
        name = "_" + name
    taken.add(name)
    return name


def _refuse(cause: str, fix: str) -> InvalidSequenceError:
    return InvalidSequenceError(cause, fix)

