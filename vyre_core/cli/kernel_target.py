"""``vyre run path/to/file.py:kernel --dim N``: a ``@vyre.kernel`` of a module as an
``Example``, launched over ``dim`` on arguments generated from its parameters' types
(fixed seed), or read by parameter name from ``--inputs FILE.npz``.

Sizes follow ``dim``: an array with as many axes as ``dim`` has its shape; a 1-D array
has ``prod(dim)`` elements. Values: floats uniform in [0, 1), ints in [0, 100), bools
half true, drawn in parameter order (skipping those given) from
``numpy.random.default_rng(0)``."""

from __future__ import annotations

import math
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from vyre_core.config import DispatchConfig
from vyre_core.errors import InvalidInputError
from vyre_core.example import Example
from vyre_core.ir.dtypes import DType
from vyre_core.kernels.annotations import ArrayType
from vyre_core.kernels.kernel import KernelFunction

#: The seed of generated arguments: every run of a kernel target sees the same ones.
SEED = 0
_DIM = re.compile(r"[0-9]+(,[0-9]+){0,2}\Z")
_DIM_FIX = "Pass --dim N, --dim ROWS,COLS or --dim X,Y,Z: invocations per axis, each >= 1."


def split_spec(spec: str) -> tuple[Path, str] | None:
    """``file.py:name`` as (path, name); None when ``spec`` names no kernel."""
    head, colon, name = spec.rpartition(":")
    if not colon or not head.endswith(".py"):
        return None
    return Path(head), name


def parse_dim(text: str | None, spec: str) -> tuple[int, ...]:
    """``--dim``'s ``N``, ``R,C`` or ``X,Y,Z`` as invocation counts."""
    if text is None:
        raise InvalidInputError(f"target {spec!r} is a kernel, and no --dim says how many "
                                "invocations to launch", _DIM_FIX)
    if not _DIM.match(text.replace(" ", "")) or any(
            int(n) < 1 for n in text.split(",")):
        raise InvalidInputError(f"the --dim {text!r} is not 1 to 3 counts of at least 1",
                                _DIM_FIX)
    return tuple(int(n) for n in text.split(","))


def kernel_of(module: ModuleType, name: str, spec: str) -> KernelFunction:
    """The ``@vyre.kernel`` named ``name`` in ``module``."""
    kernels = sorted(k for k, v in vars(module).items() if isinstance(v, KernelFunction))
    found = getattr(module, name, None)
    listed = ", ".join(kernels) or "none"
    if found is None:
        raise InvalidInputError(f"{spec!r}: the module has no {name!r}",
                                f"Name one of its kernels after the colon (kernels: {listed}).")
    if not isinstance(found, KernelFunction):
        raise InvalidInputError(f"{spec!r}: {name!r} is of type {type(found).__name__}, "
                                "not a @vyre.kernel",
                                f"Name a function marked @vyre.kernel (kernels: {listed}).")
    return found


def kernel_example(kernel: KernelFunction, dim: tuple[int, ...], spec: str,
                   inputs: str | None = None) -> Example:
    """The launch of ``kernel`` over ``dim``: given arguments from ``inputs`` (an .npz
    keyed by parameter name), the rest generated."""
    given = _given(kernel, inputs, spec)
    rng = np.random.default_rng(SEED)
    args = []
    for name, want in zip(kernel.params.names, kernel.params.declared, strict=True):
        if name in given:
            args.append(given[name])
            continue
        if want is None:
            raise InvalidInputError(f"{spec!r}: parameter {name!r} has no annotation, so no "
                                    "argument can be made for it",
                                    f"Annotate it ({name}: vyre.Array[f32], or a dtype), or "
                                    f"pass it by name in --inputs FILE.npz.")
        args.append(_draw(rng, want, dim, name, spec))
    plan = kernel.plan(dim, args)
    return Example(plan.program, plan.inputs, config=DispatchConfig(dim=dim))


def _given(kernel: KernelFunction, inputs: str | None, spec: str) -> dict[str, Any]:
    if inputs is None:
        return {}
    try:
        with np.load(inputs, allow_pickle=False) as data:
            given = {k: data[k] for k in data.files}
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"--inputs {inputs!r} is not a readable .npz ({exc})",
                                "Write it with np.savez(path, x=x, a=np.float32(2)), one "
                                "array per parameter name.") from None
    unknown = sorted(set(given) - set(kernel.params.names))
    if unknown:
        raise InvalidInputError(f"--inputs names {unknown}, which {spec!r} does not take",
                                f"Name arrays after its parameters: "
                                f"{', '.join(kernel.params.names)}.")
    return {k: v[()] if v.ndim == 0 else v for k, v in given.items()}


def _draw(rng: np.random.Generator, want: ArrayType | DType, dim: tuple[int, ...],
          name: str, spec: str) -> Any:
    dtype = want.dtype if isinstance(want, ArrayType) else want
    shape: tuple[int, ...] = ()
    if isinstance(want, ArrayType):
        if want.ndim == len(dim):
            shape = dim
        elif want.ndim == 1:
            shape = (math.prod(dim),)
        else:
            raise InvalidInputError(f"{spec!r}: parameter {name!r} is {want!r}, and the "
                                    f"--dim has {len(dim)} axis(es): its shape cannot follow "
                                    "from it",
                                    f"Pass --dim with {want.ndim} counts, or the array by "
                                    "name in --inputs FILE.npz.")
    np_type = dtype.value_np
    if dtype is DType.BOOL:
        drawn = rng.random(shape) < 0.5
    elif dtype.is_float:
        drawn = rng.random(shape).astype(np_type)
    else:
        drawn = rng.integers(0, 100, shape).astype(np_type)
    return drawn if shape else drawn[()]
