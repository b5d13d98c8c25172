"""The dispatch ABI every backend follows: which buffers are inputs and outputs, how
caller data becomes buffer contents, and how many invocations run.

The rules are written down in docs/semantics.md; this module is their one implementation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from vyre_core import shared_arrays
from vyre_core.errors import DispatchError, InvalidInputError
from vyre_core.ir.dtypes import DType
from vyre_core.ir.nodes import Buffer

MAX_ELEMENTS = 2**32 - 1  # buffer_len is a u32


def coerce_input(buffer: Buffer, data: Any) -> np.ndarray:
    """``data`` as a 1-D array of the buffer's storage dtype, padded to a declared count.

    The result may share memory with ``data``; backends copy before writing.
    """
    storage = buffer.dtype.storage_np
    if isinstance(data, bytes | bytearray | memoryview):
        raw = memoryview(data).cast("B")
        if len(raw) % storage.itemsize:
            raise InvalidInputError(
                f"input {buffer.name!r} has {len(raw)} bytes, not a multiple of the "
                f"{storage.itemsize}-byte {buffer.dtype.value} element",
                f"Pass whole {buffer.dtype.value} elements for {buffer.name!r}.")
        array = np.frombuffer(raw, dtype=storage)
    elif isinstance(data, np.ndarray):
        shared_arrays.check(data, f"input {buffer.name!r}")
        if buffer.dtype is DType.BOOL and data.dtype == np.bool_:
            data = data.astype(np.uint32)
        if data.dtype != storage:
            raise InvalidInputError(
                f"input {buffer.name!r} has dtype {data.dtype}, buffer wants {storage} "
                f"({buffer.dtype.value})",
                f"Convert it explicitly, e.g. array.astype(np.{storage}).")
        array = data.reshape(-1)
    else:
        raise InvalidInputError(
            f"input {buffer.name!r} is a {type(data).__name__}, not a numpy array or bytes",
            f"Pass np.asarray(value, dtype=np.{storage}) for {buffer.name!r}.")
    n = array.shape[0]
    if n > MAX_ELEMENTS:
        raise InvalidInputError(f"input {buffer.name!r} has {n} elements, over 2**32-1",
                                "Split the data across several dispatches.")
    if buffer.count is not None:
        if n > buffer.count:
            raise InvalidInputError(
                f"input {buffer.name!r} has {n} elements, more than its declared count "
                f"{buffer.count}",
                f"Pass at most {buffer.count} elements, or declare the buffer runtime-sized.")
        if n < buffer.count:
            array = np.concatenate([array, np.zeros(buffer.count - n, dtype=storage)])
    return array


def bind_inputs(program, inputs: Sequence[Any]) -> list[np.ndarray]:
    """One coerced array per input buffer, in ABI order."""
    expected = program.inputs
    if not isinstance(inputs, list | tuple):
        raise InvalidInputError(
            f"inputs must be a list or tuple of arrays, got {type(inputs).__name__}",
            "Pass one numpy array (or bytes) per input buffer, in a list: "
            "drv.dispatch(program, [x, y]).")
    if len(inputs) != len(expected):
        names = ", ".join(f"{b.name} ({b.dtype.value})" for b in expected) or "none"
        raise InvalidInputError(
            f"program takes {len(expected)} input(s), got {len(inputs)}",
            f"Pass exactly these inputs, in order: {names}.")
    return [coerce_input(b, data) for b, data in zip(expected, inputs, strict=True)]


def input_signature(inputs: Any) -> tuple[tuple[str, tuple[int, ...]], ...] | None:
    """The dtype and shape of each of ``inputs`` when it is a list or tuple of numpy
    arrays (what a ``Binder`` is made for, and the key it is kept under), else None."""
    if not isinstance(inputs, list | tuple):
        return None
    signature = []
    for a in inputs:
        if not isinstance(a, np.ndarray):
            return None
        signature.append((a.dtype.str, a.shape))
    return tuple(signature)


class Binder:
    """``bind_inputs`` for inputs of one ``input_signature``, worked out once from inputs
    that ``bind_inputs`` accepted: every check that depends only on their dtypes and
    shapes (count, dtype, lengths) held for those and holds for any inputs of the same
    signature, so ``bind`` only does what each call's arrays need (whether each is a live
    shared array, its flat view); an input its buffer pads or converts is coerced in
    full."""

    def __init__(self, program, inputs: Sequence[np.ndarray]) -> None:
        self._steps = tuple(
            (b, f"input {b.name!r}", isinstance(a, np.ndarray)
             and a.dtype == b.dtype.storage_np and (b.count is None or a.size == b.count))
            for b, a in zip(program.inputs, inputs, strict=True))

    def bind(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """``bind_inputs(program, inputs)`` for ``inputs`` of this binder's signature."""
        bound = []
        for (buffer, name, plain), data in zip(self._steps, inputs, strict=True):
            if plain:
                shared_arrays.check(data, name)
                bound.append(data.reshape(-1))
            else:
                bound.append(coerce_input(buffer, data))
        return bound


def check_outputs(program, outputs: Sequence[Any], lengths: dict[str, int],
                  backend: str) -> list[np.ndarray]:
    """A backend's outputs as arrays of the right dtype and length, or a DispatchError."""
    expected = program.outputs
    if not isinstance(outputs, list | tuple) or len(outputs) != len(expected):
        got = len(outputs) if isinstance(outputs, list | tuple) else type(outputs).__name__
        raise DispatchError(f"backend {backend!r} returned {got} outputs, program has "
                            f"{len(expected)}", BACKEND_BUG_FIX)
    checked = []
    for b, out in zip(expected, outputs, strict=True):
        storage = b.dtype.storage_np
        if isinstance(out, bytes | bytearray | memoryview):
            out = np.frombuffer(out, dtype=storage) if len(out) % storage.itemsize == 0 else None
        if not isinstance(out, np.ndarray) or out.dtype != storage:
            raise DispatchError(f"backend {backend!r} returned output {b.name!r} as "
                                f"{getattr(out, 'dtype', type(out).__name__)}, not {storage}",
                                BACKEND_BUG_FIX)
        out = out.reshape(-1)
        if len(out) != lengths[b.name]:
            raise DispatchError(f"backend {backend!r} returned {len(out)} elements for output "
                                f"{b.name!r}, expected {lengths[b.name]}", BACKEND_BUG_FIX)
        checked.append(out)
    return checked


#: The Fix of an error in what a backend returned.
BACKEND_BUG_FIX = "This is a bug in the backend; report it with the program's wire bytes."


def buffer_lengths(program, bound_inputs: Sequence[np.ndarray]) -> dict[str, int]:
    """Element count of every non-workgroup buffer for this dispatch."""
    lengths = {b.name: len(a) for b, a in zip(program.inputs, bound_inputs, strict=True)}
    for b in program.buffers:
        if b.name not in lengths and b.count is not None:
            lengths[b.name] = b.count
    return lengths


def output_shapes(program, bound_inputs: Sequence[np.ndarray]) -> list[tuple[np.dtype, int]]:
    """Storage dtype and element count of each output, in ABI order: what a dispatch of
    these inputs returns, known before it runs."""
    lengths = buffer_lengths(program, bound_inputs)
    return [(b.dtype.storage_np, lengths[b.name]) for b in program.outputs]


def normalize_grid(grid: Sequence[int]) -> tuple[int, int, int]:
    """A 1-3 axis grid of workgroup counts as a 3-tuple; every axis at least 1."""
    axes = tuple(grid)
    if not 1 <= len(axes) <= 3 or any(not isinstance(a, int | np.integer) or a < 1 for a in axes):
        raise InvalidInputError(f"grid {grid!r} is not 1 to 3 workgroup counts of at least 1",
                                "Pass a grid such as (64,) or (8, 8, 1).")
    return tuple(int(a) for a in axes) + (1,) * (3 - len(axes))  # type: ignore[return-value]


def grid_for_dim(dim: int | Sequence[int], workgroup: Sequence[int]) -> tuple[int, int, int]:
    """Workgroups per axis that cover ``dim`` invocations per axis (an int: along x), each
    axis rounded up to whole workgroups; the invocations past ``dim`` in the last
    workgroup of an axis run too (a program guards with its buffers' lengths)."""
    axes = (dim,) if isinstance(dim, int | np.integer) else \
        tuple(dim) if isinstance(dim, list | tuple) else (None,)
    if not 1 <= len(axes) <= 3 or any(isinstance(a, bool | np.bool_)
                                      or not isinstance(a, int | np.integer) or a < 1
                                      for a in axes):
        raise InvalidInputError(f"dim={dim!r} is not 1 to 3 invocation counts of at least 1",
                                "Pass dim as the number of invocations, e.g. dim=n or "
                                "dim=(rows, cols).")
    extent = (*(int(a) for a in axes), 1, 1)[:3]
    return tuple(-(-e // w) for e, w in zip(extent, workgroup, strict=True))  # type: ignore[return-value]


def shaped_output(program) -> Buffer | None:
    """The output whose shape grid inference follows: the largest declaring a shape of 2
    or 3 axes (the first declared on a tie); None when no output declares one."""
    shaped = [b for b in program.outputs if b.shape is not None and len(b.shape) > 1]
    return max(shaped, key=lambda b: b.count) if shaped else None


def shape_extent(buffer: Buffer) -> tuple[int, int, int]:
    """Invocations per axis, x first, that cover a shaped buffer element by element."""
    return (*reversed(buffer.shape), 1, 1)[:3]  # type: ignore[return-value]


def infer_grid(program, lengths: dict[str, int], grid: Sequence[int] | None = None,
               elements: int | None = None,
               dim: Sequence[int] | None = None) -> tuple[int, int, int]:
    """Workgroups per axis: ``grid`` when given; else those covering ``dim`` invocations
    per axis; else enough along x to cover ``elements`` invocations; else, when an output
    declares a shape of 2 or 3 axes, an invocation per element of the largest such
    output, axis by axis; else the longest output's elements along x."""
    if grid is not None:
        return normalize_grid(grid)
    if dim is not None:
        return grid_for_dim(dim, program.workgroup)
    if elements is None:
        shaped = shaped_output(program)
        if shaped is not None:
            return tuple(max(1, math.ceil(e / w))  # type: ignore[return-value]
                         for e, w in zip(shape_extent(shaped), program.workgroup,
                                         strict=True))
        elements = max((lengths.get(b.name, 0) for b in program.outputs), default=0)
    return (max(1, math.ceil(elements / program.invocations_per_workgroup)), 1, 1)
