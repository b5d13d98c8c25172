"""A builder that reads like the kernel it builds.

``Val`` wraps an expression node with its type so that Python operators build IR and
Python numbers become literals of the other operand's type. ``Kernel`` collects
statements; ``with`` blocks open if/else/loop bodies. Nothing here checks the program;
``Kernel.build()`` runs the validator.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from vyre_core.errors import InvalidConfigError
from vyre_core.ir import dtypes, typerules
from vyre_core.ir.dtypes import DType
from vyre_core.ir.nodes import (
    Access,
    Assign,
    Atomic,
    AtomicOp,
    Barrier,
    Binary,
    BinOp,
    Block,
    Break,
    Buffer,
    BufLen,
    Cast,
    Continue,
    Expr,
    Fma,
    IdKind,
    If,
    InvocationId,
    Let,
    Lit,
    Load,
    Loop,
    Return,
    Select,
    SpecConstant,
    SpecRef,
    Stmt,
    Store,
    Subgroup,
    SubgroupOp,
    Unary,
    UnOp,
    Var,
    While,
)
from vyre_core.ir.program import Program
from vyre_core.ir.specialize import typed_literal

Operand = Any  # a Val or a Python bool/int/float


class Val:
    """An expression under construction; operators build IR nodes."""

    __slots__ = ("dtype", "node")
    __hash__ = None  # type: ignore[assignment]  # == builds an expression

    def __init__(self, node: Expr, dtype: DType | None) -> None:
        self.node = node
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"Val({self.node!r}: {self.dtype.value if self.dtype else '?'})"

    def __bool__(self) -> bool:
        raise TypeError("a vyre expression has no Python truth value. Fix: use `with "
                        "kernel.if_(cond):` for control flow and `&`/`|` to combine conditions")

    def _bin(self, op: BinOp, other: Operand, reflected: bool = False) -> Val:
        rhs_type = DType.U32 if op in typerules.SHIFTS and not reflected else self.dtype
        other = as_val(other, rhs_type)
        lhs, rhs = (other, self) if reflected else (self, other)
        return binary(op, lhs, rhs)

    def __add__(self, o): return self._bin(BinOp.ADD, o)
    def __radd__(self, o): return self._bin(BinOp.ADD, o, True)
    def __sub__(self, o): return self._bin(BinOp.SUB, o)
    def __rsub__(self, o): return self._bin(BinOp.SUB, o, True)
    def __mul__(self, o): return self._bin(BinOp.MUL, o)
    def __rmul__(self, o): return self._bin(BinOp.MUL, o, True)
    def __truediv__(self, o): return self._bin(BinOp.DIV, o)
    def __rtruediv__(self, o): return self._bin(BinOp.DIV, o, True)
    def __mod__(self, o): return self._bin(BinOp.REM, o)
    def __rmod__(self, o): return self._bin(BinOp.REM, o, True)
    def __and__(self, o): return self._bin(BinOp.AND, o)
    def __rand__(self, o): return self._bin(BinOp.AND, o, True)
    def __or__(self, o): return self._bin(BinOp.OR, o)
    def __ror__(self, o): return self._bin(BinOp.OR, o, True)
    def __xor__(self, o): return self._bin(BinOp.XOR, o)
    def __rxor__(self, o): return self._bin(BinOp.XOR, o, True)
    def __lshift__(self, o): return self._bin(BinOp.SHL, o)
    def __rshift__(self, o): return self._bin(BinOp.SHR, o)
    def __eq__(self, o): return self._bin(BinOp.EQ, o)  # type: ignore[override]
    def __ne__(self, o): return self._bin(BinOp.NE, o)  # type: ignore[override]
    def __lt__(self, o): return self._bin(BinOp.LT, o)
    def __le__(self, o): return self._bin(BinOp.LE, o)
    def __gt__(self, o): return self._bin(BinOp.GT, o)
    def __ge__(self, o): return self._bin(BinOp.GE, o)
    def __neg__(self): return unary(UnOp.NEG, self)
    def __abs__(self): return unary(UnOp.ABS, self)

    def __invert__(self) -> Val:
        """Bitwise not for integers, logical not for bool."""
        return unary(UnOp.NOT if self.dtype is DType.BOOL else UnOp.BIT_NOT, self)

    def cast(self, dtype: DType) -> Val:
        return cast(self, dtype)


# -- Expression constructors -----------------------------------------------------------

#: The numpy scalar types a literal keeps: numpy's default integers (int64, and uint64) are
#: taken as plain ints, as a Python int is (they turn up without being chosen); a 64-bit
#: literal is written ``ir.i64(v)``
_NUMPY_DTYPES = {dt.value_np: dt for dt in DType if dt not in (DType.I64, DType.U64)}


def _kind(value: Any) -> str:
    if isinstance(value, bool | np.bool_):
        return "bool"
    if isinstance(value, int | np.integer):
        return "int"
    if isinstance(value, float | np.floating):
        return "float"
    raise TypeError(f"{value!r} ({type(value).__name__}) is not an IR value. Fix: use a "
                    "Python bool/int/float, a numpy scalar, or an expression")


def lit(value: Any, dtype: DType | None = None) -> Val:
    """A literal. Without ``dtype``: a numpy scalar of a vyre dtype keeps it (but int64 and
    uint64, numpy's defaults: ints); otherwise bool -> bool, int -> u32 (i32 if negative),
    float -> f32."""
    kind = _kind(value)
    if dtype is None:
        dtype = _NUMPY_DTYPES.get(getattr(value, "dtype", None))
    if dtype is None:
        dtype = {"bool": DType.BOOL, "float": DType.F32}.get(
            kind, DType.U32 if value >= 0 else DType.I32)
    elif (kind == "bool") != (dtype is DType.BOOL) or (kind == "float" and dtype.is_int):
        raise TypeError(f"{value!r} is not a {dtype.value} literal. Fix: pass "
                        f"{'True/False' if dtype is DType.BOOL else 'a number of that type'}")
    return Val(Lit.of(dtype, value), dtype)


dtypes.make_literals_with(lit)


def as_val(x: Operand, like: DType | None = None) -> Val:
    """``x`` as a Val; Python numbers take the type ``like`` when given."""
    if isinstance(x, Val):
        return x
    if isinstance(x, BufferRef):
        raise TypeError(f"buffer {x.buffer.name!r} used as a value. Fix: load an element "
                        f"with {x.buffer.name}[index] or take its length with .len")
    kind = _kind(x)
    if like is None or getattr(x, "dtype", None) in _NUMPY_DTYPES:
        return lit(x)
    if kind == "float" and like.is_int:
        raise TypeError(f"float {x!r} used with a {like.value} operand. Fix: write an int, "
                        f"or cast the other operand")
    return lit(x, like) if (kind == "bool") == (like is DType.BOOL) else lit(x)


def binary(op: BinOp, lhs: Operand, rhs: Operand) -> Val:
    a = as_val(lhs, rhs.dtype if isinstance(rhs, Val) else None)
    b = as_val(rhs, DType.U32 if op in typerules.SHIFTS else a.dtype)
    dtype = None if None in (a.dtype, b.dtype) else typerules.binop_result(op, a.dtype, b.dtype)
    return Val(Binary(op, a.node, b.node), dtype)


def unary(op: UnOp, x: Operand) -> Val:
    v = as_val(x)
    return Val(Unary(op, v.node), None if v.dtype is None else typerules.unop_result(op, v.dtype))


def cast(x: Operand, dtype: DType) -> Val:
    return Val(Cast(dtype, as_val(x).node), dtype)


def select(cond: Operand, if_true: Operand, if_false: Operand) -> Val:
    """``if_true`` where ``cond`` holds, else ``if_false`` (both evaluated)."""
    c = as_val(cond, DType.BOOL)
    t = as_val(if_true, if_false.dtype if isinstance(if_false, Val) else None)
    f = as_val(if_false, t.dtype)
    return Val(Select(c.node, t.node, f.node), t.dtype if t.dtype is f.dtype else None)


def fma(a: Operand, b: Operand, c: Operand) -> Val:
    """``a * b + c`` for floats, fused or not (see docs/semantics.md)."""
    like = next((v.dtype for v in (a, b, c) if isinstance(v, Val)), None)
    va, vb, vc = (as_val(v, like) for v in (a, b, c))
    return Val(Fma(va.node, vb.node, vc.node),
               None if None in (va.dtype, vb.dtype, vc.dtype)
               else typerules.fma_result(va.dtype, vb.dtype, vc.dtype))


def _id(kind: IdKind, axis: int) -> Val:
    return Val(InvocationId(kind, axis), DType.U32)


def global_id(axis: int = 0) -> Val:
    """Global invocation id along ``axis`` (u32)."""
    return _id(IdKind.GLOBAL, axis)


def local_id(axis: int = 0) -> Val:
    """Invocation id within the workgroup along ``axis`` (u32)."""
    return _id(IdKind.LOCAL, axis)


def workgroup_id(axis: int = 0) -> Val:
    """Workgroup id along ``axis`` (u32)."""
    return _id(IdKind.WORKGROUP, axis)


def min(a: Operand, b: Operand) -> Val:
    return binary(BinOp.MIN, a, b)


def max(a: Operand, b: Operand) -> Val:
    return binary(BinOp.MAX, a, b)


def logical_and(a: Operand, b: Operand) -> Val:
    return binary(BinOp.LOGICAL_AND, a, b)


def logical_or(a: Operand, b: Operand) -> Val:
    return binary(BinOp.LOGICAL_OR, a, b)


def logical_not(a: Operand) -> Val:
    return unary(UnOp.NOT, a)


def sqrt(x: Operand) -> Val: return unary(UnOp.SQRT, x)
def exp(x: Operand) -> Val: return unary(UnOp.EXP, x)
def log(x: Operand) -> Val: return unary(UnOp.LOG, x)
def sin(x: Operand) -> Val: return unary(UnOp.SIN, x)
def cos(x: Operand) -> Val: return unary(UnOp.COS, x)
def tan(x: Operand) -> Val: return unary(UnOp.TAN, x)
def tanh(x: Operand) -> Val: return unary(UnOp.TANH, x)
def exp2(x: Operand) -> Val: return unary(UnOp.EXP2, x)
def log2(x: Operand) -> Val: return unary(UnOp.LOG2, x)
def pow(x: Operand, y: Operand) -> Val: return binary(BinOp.POW, x, y)
def atan2(y: Operand, x: Operand) -> Val: return binary(BinOp.ATAN2, y, x)
def floor(x: Operand) -> Val: return unary(UnOp.FLOOR, x)
def ceil(x: Operand) -> Val: return unary(UnOp.CEIL, x)
def popcount(x: Operand) -> Val: return unary(UnOp.POPCOUNT, x)
def round(x: Operand) -> Val: return unary(UnOp.ROUND, x)
def trunc(x: Operand) -> Val: return unary(UnOp.TRUNC, x)
def isnan(x: Operand) -> Val: return unary(UnOp.ISNAN, x)
def isinf(x: Operand) -> Val: return unary(UnOp.ISINF, x)
def clz(x: Operand) -> Val: return unary(UnOp.CLZ, x)
def ctz(x: Operand) -> Val: return unary(UnOp.CTZ, x)
def bit_reverse(x: Operand) -> Val: return unary(UnOp.BIT_REVERSE, x)
def rotl(x: Operand, n: Operand) -> Val: return binary(BinOp.ROTL, x, n)
def rotr(x: Operand, n: Operand) -> Val: return binary(BinOp.ROTR, x, n)
def mulhi(a: Operand, b: Operand) -> Val: return binary(BinOp.MULHI, a, b)
def add_sat(a: Operand, b: Operand) -> Val: return binary(BinOp.ADD_SAT, a, b)
def sub_sat(a: Operand, b: Operand) -> Val: return binary(BinOp.SUB_SAT, a, b)


# -- Buffers and statements ------------------------------------------------------------

class BufferRef:
    """A declared buffer: ``buf[i]`` loads, ``buf[i] = v`` stores, ``buf.len`` is its length."""

    def __init__(self, kernel: Kernel, buffer: Buffer) -> None:
        self.kernel = kernel
        self.buffer = buffer

    def __getitem__(self, index: Operand) -> Val:
        return Val(Load(self.buffer.name, as_val(index, DType.U32).node), self.buffer.dtype)

    def __setitem__(self, index: Operand, value: Operand) -> None:
        self.kernel.emit(Store(self.buffer.name, as_val(index, DType.U32).node,
                               as_val(value, self.buffer.dtype).node))

    @property
    def len(self) -> Val:
        return Val(BufLen(self.buffer.name), DType.U32)

    def atomic(self, op: AtomicOp | str, index: Operand, value: Operand,
               comparand: Operand | None = None, name: str | None = None) -> Val:
        """Emit ``let name = atomic op``; returns the old value."""
        op = AtomicOp(op)
        t = self.buffer.dtype
        node = Atomic(op, self.buffer.name, as_val(index, DType.U32).node, as_val(value, t).node,
                      None if comparand is None else as_val(comparand, t).node)
        return self.kernel.let(name or self.kernel.fresh_name("atomic"), Val(node, t))

    def atomic_add(self, index: Operand, value: Operand, name: str | None = None) -> Val:
        return self.atomic(AtomicOp.ADD, index, value, name=name)

    def atomic_max(self, index: Operand, value: Operand, name: str | None = None) -> Val:
        return self.atomic(AtomicOp.MAX, index, value, name=name)

    def atomic_min(self, index: Operand, value: Operand, name: str | None = None) -> Val:
        return self.atomic(AtomicOp.MIN, index, value, name=name)


class Kernel:
    """Collects buffers and statements into a :class:`Program`."""

    def __init__(self, workgroup: tuple[int, ...] = (64,),
                 subgroup_size: int | None = None) -> None:
        self.workgroup = tuple(workgroup)
        self.subgroup_size = subgroup_size  # what ``subgroup`` operations run over
        self.buffers: list[Buffer] = []
        self.constants: list[SpecConstant] = []
        self._blocks: list[list[Stmt]] = [[]]
        self._names = 0

    # buffers
    def buffer(self, name: str, dtype: DType, access: Access | str = Access.READ,
               count: int | None = None, binding: int | None = None,
               shape: tuple[int, ...] | None = None) -> BufferRef:
        """A buffer; ``shape`` (numpy's order, 1 to 3 axes) gives its count as the
        product, and for an output, the grid a dispatch infers (docs/semantics.md)."""
        if shape is not None:
            shape = tuple(shape)
            if count is None and all(isinstance(n, int) for n in shape):
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
        return Val(Var(name), v.dtype)

    def assign(self, var: Val | str, value: Operand) -> None:
        if isinstance(var, Val):
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
        return Val(Subgroup(op, self.subgroup_size, None if v is None else v.node,
                            None if ln is None else ln.node), dtype)

    def ret(self) -> None:
        self.emit(Return())

    def barrier(self) -> None:
        self.emit(Barrier())

    @contextlib.contextmanager
    def _body(self) -> Iterator[list[Stmt]]:
        self._blocks.append([])
        try:
            yield self._blocks[-1]
        finally:
            self._blocks.pop()

    @contextlib.contextmanager
    def if_(self, cond: Operand) -> Iterator[None]:
        with self._body() as body:
            yield
        self.emit(If(as_val(cond, DType.BOOL).node, tuple(body)))

    @contextlib.contextmanager
    def else_(self) -> Iterator[None]:
        block = self._blocks[-1]
        if not block or not isinstance(block[-1], If) or block[-1].orelse:
            raise SyntaxError("else_ must directly follow an if_ block. Fix: place "
                              "`with k.else_():` right after `with k.if_(...):`")
        with self._body() as body:
            yield
        last = block.pop()
        block.append(If(last.cond, last.then, tuple(body)))

    @contextlib.contextmanager
    def loop(self, var: str, start: Operand, end: Operand, step: Operand = 1) -> Iterator[Val]:
        """``for var in [start, end)`` over u32, ``step`` apart (a literal or a constant of
        at least 1)."""
        with self._body() as body:
            yield Val(Var(var), DType.U32)
        self.emit(Loop(var, as_val(start, DType.U32).node, as_val(end, DType.U32).node,
                       tuple(body), as_val(step, DType.U32).node))

    @contextlib.contextmanager
    def while_(self, cond: Operand, max_trips: int) -> Iterator[None]:
        """``while cond``, checked before each pass, for at most ``max_trips`` passes (the
        bound every loop on a GPU needs; the loop ends there whatever ``cond`` says)."""
        with self._body() as body:
            yield
        self.emit(While(as_val(cond, DType.BOOL).node, tuple(body), max_trips))

    def break_(self) -> None:
        """Leave the innermost loop."""
        self.emit(Break())

    def continue_(self) -> None:
        """Go on with the innermost loop's next pass."""
        self.emit(Continue())

    @contextlib.contextmanager
    def block(self) -> Iterator[None]:
        with self._body() as body:
            yield
        self.emit(Block(tuple(body)))

    def build(self, validate: bool = True) -> Program:
        """The finished program; raises ``ValidationError`` with every finding if invalid."""
        if len(self._blocks) != 1:
            raise RuntimeError("build() called inside an open if_/loop block")
        prog = Program(tuple(self.buffers), self.workgroup, tuple(self._blocks[0]),
                       tuple(self.constants))
        return prog.check() if validate else prog
