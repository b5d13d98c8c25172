"""Which runtime-sized inputs a program reads at its global id: the inputs whose length
says how many invocations it means to launch.

The rule (docs/ir.md, "How many invocations run"): an input of no declared count is read
by global id along axis ``a`` when every load from it (and every atomic applied to it) is
at an index that is ``global_id(a)`` itself, a cast of it, or a variable bound once by
``let`` to one of those and never assigned. An index computed from the id (``2 * i``,
``i + half``, ``row * cols + col``) or a loop's variable (a grid-stride loop) anywhere
is the program saying itself how it covers its input: then it is not such a read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vyre_core.ir.nodes import (
    Assign,
    Atomic,
    Cast,
    Expr,
    IdKind,
    InvocationId,
    Let,
    Load,
    Var,
    walk,
)

if TYPE_CHECKING:
    from vyre_core.ir.program import Program


def _id_axis(index: Expr, named: dict[str, int]) -> int | None:
    """The axis of the global id ``index`` is (through casts and id-bound lets), or None."""
    while isinstance(index, Cast):
        index = index.value
    if isinstance(index, InvocationId) and index.kind is IdKind.GLOBAL:
        return index.axis
    if isinstance(index, Var):
        return named.get(index.name)
    return None


def read_by_global_id(program: Program) -> frozenset[tuple[str, int]]:
    """(input name, axis) for each runtime-sized input read at ``global_id(axis)``."""
    nodes = list(walk(program.body))
    assigned = {n.name for n in nodes if isinstance(n, Assign)}
    named: dict[str, int] = {}
    conflicting: set[str] = set(assigned)
    for n in nodes:
        if isinstance(n, Let):
            axis = _id_axis(n.value, named)
            if axis is None or named.get(n.name, axis) != axis:
                conflicting.add(n.name)
            else:
                named[n.name] = axis
    named = {name: axis for name, axis in named.items() if name not in conflicting}
    sized = {b.name for b in program.inputs if b.count is None}
    axes: dict[str, set[int | None]] = {}
    for n in nodes:
        if isinstance(n, Load | Atomic) and n.buffer in sized:
            axes.setdefault(n.buffer, set()).add(_id_axis(n.index, named))
    return frozenset((name, axis) for name, found in axes.items() if None not in found
                     for axis in found)
