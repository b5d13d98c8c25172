"""The names a kernel or ``@vyre.func`` reads from outside its body (its closure, its
module, builtins), and what it read when it compiled: a kernel is compiled again when one
of them has been rebound since, so it never computes with a value Python no longer holds
(docs/kernels.md, "Caching")."""

from __future__ import annotations

import ast
import builtins
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from vyre_core.kernels.values import Refusal

_ABSENT = object()


class Scope:
    """A function's outer names, read when asked (never a snapshot): closure cells first,
    then the module's globals, then builtins, as Python resolves them."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        #: the closure's cells by name (a cell is fixed; what it holds is read when asked)
        self.cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True))

    def get(self, name: str) -> Any:
        """The object ``name`` names now (KeyError when nothing does)."""
        cell = self.cells.get(name)
        if cell is not None:
            try:
                return cell.cell_contents
            except ValueError:  # (a closure variable not assigned yet)
                raise KeyError(name) from None
        found = self.fn.__globals__.get(name, _ABSENT)
        if found is _ABSENT:
            found = vars(builtins).get(name, _ABSENT)
        if found is _ABSENT:
            raise KeyError(name)
        return found

    def __call__(self, name: str, node: ast.AST) -> Any:
        """``get`` for the lowering: an unknown name is refused at its node."""
        try:
            return self.get(name)
        except KeyError:
            raise Refusal(f"unknown name {name!r}", f"Define {name} (a parameter, a local "
                          "assigned before this line, or a module-level number or "
                          "function).", node) from None


@dataclass(frozen=True)
class Capture:
    """What the lowering read at ``path`` (a name of ``scope``, then attributes)."""

    scope: Scope
    path: tuple[str, ...]
    value: Any

    def holds(self) -> bool:
        """Whether ``path`` still names the same object, or an equal number."""
        try:
            now = self.scope.get(self.path[0])
            for attr in self.path[1:]:
                now = getattr(now, attr)
        except (KeyError, AttributeError):
            return False
        return now is self.value or (type(now) is type(self.value) and is_number(now) and (
            now == self.value or (now != now and self.value != self.value)))  # (NaN)


def is_number(value: Any) -> bool:
    """A Python or numpy number (not complex): what a kernel captures as a constant."""
    return isinstance(value, bool | int | float | np.number | np.bool_) and not \
        isinstance(value, np.complexfloating)


__all__ = ["Capture", "Scope", "is_number"]
