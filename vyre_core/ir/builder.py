"""A builder that reads like the kernel it builds.

``Val`` wraps an expression node with its type so that Python operators build IR and
Python numbers become literals of the other operand's type. ``Kernel`` collects
statements; ``with`` blocks open if/else/loop bodies. Nothing here checks the program;
``Kernel.build()`` runs the validator.

``Val`` and ``BufferRef``, with the constructors their operators call, are in
``values.py``; the functions over values (``ir.select``, ``ir.sqrt``, ...) in
``expressions.py``; ``vyre_core.ir`` names them all.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from vyre_core.errors import InvalidConfigError
from vyre_core.ir import scope, typerules
from vyre_core.ir.dtypes import DType
from vyre_core.ir.nodes import (
    Access,
    Assign,
    Barrier,
    Block,
    Break,
    Buffer,
    Continue,
    If,
    Let,
    Lit,
    Loop,
    Return,
    SpecConstant,
    SpecRef,
    Stmt,
    Subgroup,
    SubgroupOp,
    Var,
    While,
)
from vyre_core.ir.program import Program
from vyre_core.ir.specialize import typed_literal
from vyre_core.ir.values import (
    _SERIALS,
    BufferRef,
    Operand,
    Val,
    as_val,
)


def _shape(name: str, shape: Any) -> tuple[int, ...]:
    """``shape`` as a tuple of Python ints, 1 to 3 axes of at least 1 each (numpy ints
    taken as ints), or a TypeError/ValueError at the declaration."""
    fix = "Fix: give the shape as 1 to 3 positive ints in numpy's order, e.g. (rows, cols)"
    axes = tuple(shape) if isinstance(shape, tuple | list) else (shape,)
    if not all(isinstance(n, int | np.integer) and not isinstance(n, bool | np.bool_)
               for n in axes):
        raise TypeError(f"buffer {name!r}: shape {shape!r} is not a tuple of ints. {fix}")
    if not 1 <= len(axes) <= 3 or any(n < 1 for n in axes):
        raise ValueError(f"buffer {name!r}: shape {shape!r} needs 1 to 3 axes of at least "
                         f"1 each. {fix}")
    return tuple(int(n) for n in axes)


class Kernel:
    """Collects buffers and statements into a :class:`Program`."""

    def __init__(self, workgroup: tuple[int, ...] = (64,),
                 subgroup_size: int | None = None) -> None:
        self.workgroup = tuple(workgroup)
        self.subgroup_size = subgroup_size  # what ``subgroup`` operations run over
        self.buffers: list[Buffer] = []
        self.constants: list[SpecConstant] = []
        self._blocks: list[scope.Body] = [scope.Body("the kernel", "", None)]
        self._names = 0

    # buffers
    def buffer(self, name: str, dtype: DType, access: Access | str = Access.READ,
               count: int | None = None, binding: int | None = None,
               shape: tuple[int, ...] | None = None) -> BufferRef:
        """A buffer; ``shape`` (numpy's order, 1 to 3 axes) gives its count as the
        product, and for an output, the grid a dispatch infers (docs/semantics.md)."""
        if shape is not None:
            shape = _shape(name, shape)
            if count is None:
                count = math.prod(shape)
        b = Buffer(name, len(self.buffers) if binding is None else binding, dtype,
                   Access(access), count, shape)
        self.buffers.append(b)
        return BufferRef(self, b)

    def read(self, name: str, dtype: DType, count: int | None = None,
             shape: tuple[int, ...] | None = None) -> BufferRef:
        return self.buffer(name, dtype, Access.READ, count, shape=shape)

    def read_write(self, name: str, dtype: DType, count: int | None = None,
                   shape: tuple[int, ...] | None = None) -> BufferRef:
        return self.buffer(name, dtype, Access.READ_WRITE, count, shape=shape)

    def output(self, name: str, dtype: DType, count: int | None = None,
               shape: tuple[int, ...] | None = None) -> BufferRef:
        return self.buffer(name, dtype, Access.OUTPUT, count, shape=shape)

    def uniform(self, name: str, dtype: DType, count: int = 1) -> BufferRef:
        return self.buffer(name, dtype, Access.UNIFORM, count)

    def workgroup_buffer(self, name: str, dtype: DType, count: int) -> BufferRef:
        return self.buffer(name, dtype, Access.WORKGROUP, count)

    # specialization constants
    def constant(self, name: str, dtype: DType, default: Any, low: Any = None,
                 high: Any = None) -> Val:
        """A named compile-time value: ``default`` unless a dispatch or compile chooses
        another (``DispatchConfig(constants={name: value})`` or ``Program.specialize``),
        within ``[low, high]`` when given. Each choice compiles its own pipeline, so a
        constant costs nothing at run time: use it for tile sizes and unroll counts."""
        def literal(value: Any, what: str) -> Lit | None:
            if value is None and what != "default":
                return None
            try:
                return typed_literal(dtype, value, f"constant {name!r}: {what}")
            except InvalidConfigError as exc:
                raise TypeError(f"{exc.cause}. Fix: {exc.fix}") from None

        self.constants.append(SpecConstant(name, literal(default, "default"),
                                           literal(low, "low"), literal(high, "high")))
        return Val(SpecRef(name), dtype)

    # statements
    def emit(self, stmt: Stmt) -> None:
        self._blocks[-1].append(stmt)

    def fresh_name(self, prefix: str) -> str:
        self._names += 1
        return f"_{prefix}{self._names}"

    def let(self, name: str, value: Operand, dtype: DType | None = None) -> Val:
        """A variable; ``dtype`` types a Python number, and must match an expression's."""
        v = as_val(value, dtype)
        if dtype is not None and v.dtype is not dtype:
            raise TypeError(f"let {name!r} is declared {dtype.value} but its value is "
                            f"{v.dtype.value}. Fix: convert it, e.g. value.cast(ir.{dtype.value})")
        self.emit(Let(name, v.node))
        return Val(Var(name), v.dtype, self, "let", frozenset({(scope.Variable(name), 0)}))

    def assign(self, var: Val | str, value: Operand) -> None:
        if isinstance(var, Val):
            scope.check_open(var)
            if not isinstance(var.node, Var):
                raise TypeError("assign needs a variable made by kernel.let. Fix: assign to the "
                                "Val returned by let")
            name, dtype = var.node.name, var.dtype
        else:
            name, dtype = var, None
        self.emit(Assign(name, as_val(value, dtype).node))

    def subgroup(self, op: SubgroupOp | str, value: Operand = None,
                 lane: Operand = None) -> Val:
        """``op`` over this kernel's subgroups: ``subgroup_size`` invocations consecutive
        in local index (``Kernel(subgroup_size=n)``; routing sends the program only to a
        backend that runs subgroups of exactly n). ``value`` for every op but ``elect``;
        ``lane`` (u32) for ``broadcast`` and ``shuffle``."""
        if self.subgroup_size is None:
            raise TypeError("subgroup operations need a subgroup size. Fix: make the "
                            "kernel with ir.Kernel(workgroup=..., subgroup_size=n)")
        op = SubgroupOp(op)
        v = None if value is None else as_val(value)
        ln = None if lane is None else as_val(lane, DType.U32)
        dtype = typerules.subgroup_result(op, None if v is None else v.dtype,
                                          None if ln is None else ln.dtype)
        if dtype is None:
            raise TypeError(f"subgroup {op.value} is not defined for value "
                            f"{None if v is None else v.dtype} and lane "
                            f"{None if ln is None else ln.dtype}. Fix: see the subgroup "
                            "table in docs/semantics.md")
        return Val.of(Subgroup(op, self.subgroup_size, None if v is None else v.node,
                               None if ln is None else ln.node), dtype,
                      *(o for o in (v, ln) if o is not None), kernel=self)

    def ret(self) -> None:
        self.emit(Return())

    def barrier(self) -> None:
        self.emit(Barrier())

    @contextlib.contextmanager
    def _body(self, what: str, loop: bool = False) -> Iterator[list[Stmt]]:
        """A ``with`` body; at its end, values built in it may no longer be used, and a
        loop body must not have rebound a variable's name (``scope``)."""
        frame = scope.user_frame()
        body = scope.Body(what, scope.where(frame), self._blocks[-1])
        serial = next(_SERIALS)  # values built in the body come after it
        values = scope.values_in(frame, Val, self) if loop else {}
        self._blocks.append(body)
        try:
            yield body
        finally:
            self._blocks.pop()
            body.open = False
        scope.check_rebound(frame, values, body, serial)

    @contextlib.contextmanager
    def if_(self, cond: Operand) -> Iterator[None]:
        test = as_val(cond, DType.BOOL).node  # (checked before the body assigns)
        with self._body("an if_") as body:
            yield
        self.emit(If(test, tuple(body)))

    @contextlib.contextmanager
    def else_(self) -> Iterator[None]:
        block = self._blocks[-1]
        if not block or not isinstance(block[-1], If) or block[-1].orelse:
            raise SyntaxError("else_ must directly follow an if_ block. Fix: place "
                              "`with k.else_():` right after `with k.if_(...):`")
        with self._body("an else_") as body:
            yield
        last = block.pop()
        block.append(If(last.cond, last.then, tuple(body)))

    @contextlib.contextmanager
    def loop(self, var: str, start: Operand, end: Operand, step: Operand = 1) -> Iterator[Val]:
        """``for var in [start, end)`` over u32, ``step`` apart (a literal or a constant of
        at least 1)."""
        bounds = [as_val(b, DType.U32).node for b in (start, end, step)]
        with self._body(f"loop {var!r}", loop=True) as body:
            yield Val(Var(var), DType.U32, self, "loop")
        self.emit(Loop(var, bounds[0], bounds[1], tuple(body), bounds[2]))

    @contextlib.contextmanager
    def while_(self, cond: Operand, max_trips: int) -> Iterator[None]:
        """``while cond``, checked before each pass, for at most ``max_trips`` passes (the
        bound every loop on a GPU needs; the loop ends there whatever ``cond`` says)."""
        test = as_val(cond, DType.BOOL).node  # (read before each pass, assigned or not)
        with self._body("a while_", loop=True) as body:
            yield
        self.emit(While(test, tuple(body), max_trips))

    def break_(self) -> None:
        """Leave the innermost loop."""
        self.emit(Break())

    def continue_(self) -> None:
        """Go on with the innermost loop's next pass."""
        self.emit(Continue())

    @contextlib.contextmanager
    def block(self) -> Iterator[None]:
        with self._body("a block") as body:
            yield
        self.emit(Block(tuple(body)))

    def build(self, validate: bool = True) -> Program:
        """The finished program; raises ``ValidationError`` with every finding if invalid."""
        if len(self._blocks) != 1:
            raise RuntimeError("build() called inside an open if_/loop block")
        prog = Program(tuple(self.buffers), self.workgroup, tuple(self._blocks[0]),
                       tuple(self.constants))
        return prog.check() if validate else prog
