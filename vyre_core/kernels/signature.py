"""A kernel's parameters as types: from annotations, else from the first arguments
passed (numba's rule). The signature is part of the compile cache key; the values of
scalars and the sizes of arrays are not (they are passed at each launch)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vyre_core.errors import InvalidInputError, KernelSyntaxError
from vyre_core.ir.dtypes import DType
from vyre_core.kernels.annotations import ArrayType, ConstantType

#: A parameter's type: an array, a scalar dtype (a uniform), or ``None`` until an
#: argument says.
ParamType = ArrayType | DType | None

#: The vyre dtype of each numpy dtype that has one.
_BY_NUMPY = {t.value_np: t for t in DType}


@dataclass(frozen=True)
class Parameters:
    """What a kernel's definition says of its parameters."""

    names: tuple[str, ...]                      # positional, in order
    declared: tuple[ParamType, ...]             # annotations (None: from the argument)
    constants: tuple[tuple[str, ConstantType, Any], ...]  # keyword-only: name, type, default

    @classmethod
    def of(cls, fn: Callable[..., Any]) -> Parameters:
        sig = inspect.signature(fn)
        try:
            hints = inspect.get_annotations(fn, eval_str=True)
        except Exception as exc:  # an annotation that does not evaluate
            raise KernelSyntaxError(f"the annotations of {fn.__name__!r} do not evaluate "
                                    f"({exc})", "Annotate with vyre.Array[f32], a dtype "
                                    "(f32) or vyre.Constant[u32].") from None
        names, declared, constants = [], [], []
        for p in sig.parameters.values():
            hint = hints.get(p.name)
            if p.kind is p.KEYWORD_ONLY:
                if not isinstance(hint, ConstantType) or p.default is p.empty:
                    raise KernelSyntaxError(
                        f"keyword-only parameter {p.name!r} of {fn.__name__!r} is not a "
                        "constant with a default",
                        f"Annotate it {p.name}: vyre.Constant[u32] = 16 (a specialization "
                        "constant), or make it positional.")
                constants.append((p.name, hint, p.default))
                continue
            if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                raise KernelSyntaxError(f"parameter {p.name!r} of {fn.__name__!r} is "
                                        f"{p.kind.description}",
                                        "Give kernels plain positional parameters.")
            if hint is not None and not isinstance(hint, ArrayType | DType):
                raise KernelSyntaxError(f"parameter {p.name!r} of {fn.__name__!r} is "
                                        f"annotated {hint!r}",
                                        "Annotate with vyre.Array[f32], vyre.Array[f32, 2] "
                                        "or a dtype (f32, u32, i32, ...).")
            names.append(p.name)
            declared.append(hint)
        return cls(tuple(names), tuple(declared), tuple(constants))


def type_of_argument(value: Any, name: str) -> ArrayType | DType:
    """The type an unannotated parameter takes from its argument."""
    if isinstance(value, np.ndarray):
        dtype = _BY_NUMPY.get(value.dtype)
        if dtype is None or not 1 <= value.ndim <= 3:
            raise InvalidInputError(f"argument {name!r} is a {value.ndim}-D {value.dtype} "
                                    "array, which no kernel array holds",
                                    "Pass a 1-D to 3-D array of a vyre dtype (float32, "
                                    "int32, uint32, ...).")
        return ArrayType(dtype, value.ndim)
    if isinstance(value, bool | np.bool_):
        return DType.BOOL
    if isinstance(value, np.generic):
        dtype = _BY_NUMPY.get(value.dtype)
        if dtype is not None:
            return dtype
    if isinstance(value, int):
        return DType.I32
    if isinstance(value, float):
        return DType.F32
    raise InvalidInputError(f"argument {name!r} is a {type(value).__name__}",
                            "Pass numpy arrays for arrays and numbers for scalars.")


def signature_of(params: Parameters, args: Sequence[Any]) -> tuple[ArrayType | DType, ...]:
    """Each positional parameter's type, for these arguments; an argument that does
    not fit its annotation is refused (nothing is converted: an array is filled in
    place, so it must be the array the kernel writes)."""
    check_count(params, args)
    return tuple(parameter_type(name, declared, value) for name, declared, value in
                 zip(params.names, params.declared, args, strict=True))


def check_count(params: Parameters, args: Any) -> None:
    """Refuse ``args`` unless it is a list or tuple of one value per parameter."""
    if not isinstance(args, list | tuple) or len(args) != len(params.names):
        got = len(args) if isinstance(args, list | tuple) else type(args).__name__
        raise InvalidInputError(f"the kernel takes {len(params.names)} argument(s) "
                                f"({', '.join(params.names)}), got {got}",
                                "Pass one value per parameter, in order: "
                                "drv.launch(kernel, dim=n, args=(x, y)).")


def parameter_type(name: str, declared: ParamType, value: Any) -> ArrayType | DType:
    """The type of parameter ``name`` (annotated ``declared``) for the argument ``value``
    (a numpy array or a number)."""
    found = type_of_argument(value, name) if isinstance(value, np.ndarray) or \
        declared is None else None
    if isinstance(declared, ArrayType):
        if not isinstance(found, ArrayType) or found != declared:
            want = f"a {declared.ndim}-D {declared.dtype.value_np} array"
            raise InvalidInputError(
                f"argument {name!r} is {_describe(value)}, the kernel wants {want} "
                f"({declared!r})",
                f"Pass {want}, e.g. np.asarray({name}, dtype=np."
                f"{declared.dtype.value_np}) (a copy is not filled in place: keep it).")
        return declared
    if isinstance(declared, DType):
        if isinstance(value, np.ndarray) or not isinstance(value, bool | int | float |
                                                           np.generic):
            raise InvalidInputError(f"argument {name!r} is {_describe(value)}, the "
                                    f"kernel wants a {declared.value} number",
                                    f"Pass a number for {name!r}.")
        return declared
    return found


def _describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"a {value.ndim}-D {value.dtype} array"
    return f"a {type(value).__name__}"
