"""What the rooms of a kernel's lowering share: the ``Unit`` one kernel's lowering keeps
across the functions it inlines, the ``ArrayRef`` a name of an array stands for, the
operators' table the statements and the expressions both read, and ``_Lowering``, the
state and the methods the mixins of ``lower.Lowerer`` call on one another, declared for
type checkers only, so that each mixin's file reads alone and none imports ``lower.py``
back.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vyre_core.ir.dtypes import DType
from vyre_core.ir.nodes import (
    Atomic,
    Expr,
    Stmt,
)
from vyre_core.kernels import flow
from vyre_core.kernels.scope import Capture, Scope
from vyre_core.kernels.source import Source
from vyre_core.kernels.values import Value

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
           ast.Mod: "%", ast.Pow: "**", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^",
           ast.LShift: "<<", ast.RShift: ">>"}


@dataclass
class ArrayRef:
    """An array a kernel names: a buffer, its element type and axes. ``shapes`` is the
    offset of its extents in the hidden launch buffer (shaped arrays), ``count`` a shared
    array's length."""

    name: str
    dtype: DType
    ndim: int = 1
    shapes: int | None = None
    count: int | None = None


@dataclass
class Unit:
    """What one kernel's lowering shares with the functions it inlines: the buffers it
    writes, the names taken, the shared arrays, the line of each statement."""

    taken: set[str]
    launch_buffer: str
    workgroup_buffers: list[tuple[str, DType, int]] = field(default_factory=list)
    written: set[str] = field(default_factory=set)
    lines: dict[int, tuple[str, int]] = field(default_factory=dict)
    inlining: list[Any] = field(default_factory=list)
    subgroup_size: int | None = None
    #: the kernel's workgroup, and the workgroup buffer its workgroup reductions and scans
    #: use, by type (``workgroup.py``)
    workgroup: tuple[int, ...] = (1,)
    scratch: dict[DType, str] = field(default_factory=dict)
    #: whether it synchronizes a workgroup (a barrier, a shared array, a subgroup
    #: operation): then every invocation of a workgroup runs, and none is dropped
    synchronizes: bool = False
    #: what the kernel and its functions read from outside their bodies, by (scope, path)
    captures: dict[tuple[int, tuple[str, ...]], Capture] = field(default_factory=dict)

    def capture(self, scope: Scope, path: tuple[str, ...], value: Any) -> None:
        """Note that the lowering read ``value`` at ``path`` of ``scope``."""
        self.captures.setdefault((id(scope), path), Capture(scope, path, value))

    def fresh(self, base: str) -> str:
        """A variable name no parameter, local or earlier fresh name has (deterministic:
        the program's fingerprint depends on it)."""
        name, n = base, 1
        while name in self.taken:
            n += 1
            name = f"{base}_{n}"
        self.taken.add(name)
        return name


class _Lowering:
    """What the mixins of ``lower.Lowerer`` share, declared for type checkers: the
    state ``Lowerer.__init__`` sets and the methods one room calls on another.
    Nothing here runs: the methods exist only under TYPE_CHECKING."""

    source: Source
    unit: Unit
    env: dict[str, Any]
    scope: Scope
    inlined: bool
    types: dict[str, DType]
    blocks: list[list[Stmt]]
    loops: int
    in_select: int
    locals: set[str]
    copies: dict[str, Value]
    rename: dict[str, str]
    decls: dict[str, flow.Declaration]
    result: Value | None

    if TYPE_CHECKING:
        def block(self, body: list[ast.stmt], path: flow.Path) -> tuple[Stmt, ...]: ...

        def block_into(self, out: list[Stmt], body: list[ast.stmt], path: flow.Path) -> None: ...

        def emit(self, stmt: Stmt, node: ast.AST) -> None: ...

        def _effects_since(self, start: int) -> bool: ...

        def read_before(self, earlier: Value, start: int) -> Value: ...

        def stmt(self, s: ast.stmt, path: flow.Path, k: int) -> None: ...

        def set_local(self, name: str, v: Value, node: ast.AST, declare: bool) -> None: ...

        def expr(self, node: ast.AST) -> Value: ...

        def as_value(self, found: Any, node: ast.AST) -> Value: ...

        def _expr(self, node: ast.AST) -> Any: ...

        def _static(self, node: ast.AST) -> Any: ...

        def array_of(self, node: ast.AST) -> ArrayRef: ...

        def extent(self, array: ArrayRef, axis: int) -> Value: ...

        def index(self, array: ArrayRef, node: ast.AST) -> Expr: ...

        def _no_keywords(self, call: ast.Call) -> None: ...

        def _no_args(self, call: ast.Call, n: int) -> None: ...

        def call(self, node: ast.Call) -> Value: ...

        def atomic(self, node: ast.Call) -> tuple[Atomic, DType]: ...

        def workgroup(self, node: ast.Call) -> Value: ...

        def inline(self, fn: Any, node: ast.Call) -> Value: ...


def _is_func(fn: Any) -> bool:
    return getattr(fn, "__vyre_func__", False)
