"""The values a builder's kernel computes with: ``Val``, whose Python operators build IR
and make Python numbers literals of the other operand's type, the constructors those
operators call (``lit``, ``as_val``, ``binary``, ``unary``, ``cast``, ``bitcast``, ``**``
and ``//``), and ``BufferRef``, whose loads, length and atomics are values. They are one
module because each needs the others (an operator builds through the constructors, a
constructor makes a ``Val`` and refuses a ``BufferRef`` as one); the functions a user
calls on values are ``expressions.py``, and the statements ``builder.py``, both over this.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from vyre_core.ir import dtypes, scope, typerules
from vyre_core.ir.dtypes import DType
from vyre_core.ir.nodes import (
    Atomic,
    AtomicOp,
    Binary,
    BinOp,
    Bitcast,
    Buffer,
    BufLen,
    Cast,
    Expr,
    Lit,
    Load,
    Stmt,
    Store,
    Unary,
    UnOp,
)

if TYPE_CHECKING:
    from typing import Protocol

    class Kernel(Protocol):
        """What a value and a buffer use of the builder's ``Kernel`` (``builder.py``, which
        imports this module: declared here for type checkers, not imported)."""

        _blocks: list[scope.Body]

        def emit(self, stmt: Stmt) -> None: ...

        def fresh_name(self, prefix: str) -> str: ...

        def let(self, name: str, value: Operand, dtype: DType | None = None) -> Val: ...

        def assign(self, var: Val | str, value: Operand) -> None: ...


Operand = Any  # a Val or a Python bool/int/float

_SERIALS = itertools.count()


class Val:
    """An expression under construction; operators build IR nodes.

    A value built from a kernel's buffers or variables knows that kernel and the ``with``
    body it was built in (``body``): it may be used only while that body is open
    (``scope``). ``var`` is ``"let"`` for a variable ``k.let`` made (``+=`` and the other
    augmented assignments assign it), ``"loop"`` for a loop variable, else ``None``.
    ``reads`` holds the (variable, version) pairs it reads: a value built before a ``+=``
    of a variable it reads is refused after it (``scope.check_current``). ``serial``
    orders values by when they were built (``scope.check_rebound``)."""

    __slots__ = ("body", "dtype", "kernel", "line", "node", "reads", "serial", "var")
    __hash__ = None  # type: ignore[assignment]  # == builds an expression
    __array_ufunc__ = None  # numpy defers to our reflected operators (np.float64(2) * x)

    def __init__(self, node: Expr, dtype: DType | None, kernel: Kernel | None = None,
                 var: str | None = None, reads: frozenset = frozenset()) -> None:
        self.node = node
        self.dtype = dtype
        self.kernel = kernel
        self.var = var
        self.reads = reads
        self.serial = next(_SERIALS)
        self.body = None if kernel is None else kernel._blocks[-1]
        nested = self.body is not None and self.body.parent is not None
        self.line = scope.where(scope.user_frame()) if nested else ""

    @classmethod
    def of(cls, node: Expr, dtype: DType | None, *operands: Val,
           kernel: Kernel | None = None) -> Val:
        """An expression over ``operands``: it belongs to their kernel (or ``kernel``) and
        reads what they read."""
        reads: frozenset = frozenset()
        for v in operands:
            if v.reads:
                reads = reads | v.reads if reads else v.reads
        return cls(node, dtype, kernel or _kernel_of(*operands), reads=reads)

    def __repr__(self) -> str:
        return f"Val({self.node!r}: {self.dtype.value if self.dtype else '?'})"

    def __bool__(self) -> bool:
        raise TypeError(_no_truth_value(self.node))

    def _bin(self, op: BinOp, other: Operand, reflected: bool = False) -> Val:
        rhs_type = DType.U32 if op in typerules.SHIFTS and not reflected else self.dtype
        other = as_val(other, rhs_type)
        lhs, rhs = (other, self) if reflected else (self, other)
        return binary(op, lhs, rhs)

    def _augment(self, build: Any, other: Operand) -> Val:
        """``v op= other`` on a ``let`` variable assigns it in the current body (what
        Python means); on any other value, Python falls back to ``v = v op other``."""
        if self.var == "loop":
            raise TypeError(f"loop variable {self.node.name!r} is read-only. Fix: copy it "
                            f"into a variable, v = k.let('v', {self.node.name}), and update v")
        if self.var != "let":
            return NotImplemented
        self.kernel.assign(self, build(self, other))
        variable = scope.variable_of(self)
        variable.bump(scope.where(scope.user_frame()))
        new = Val(self.node, self.dtype, self.kernel, "let",
                  frozenset({(variable, variable.version)}))
        new.body, new.line = self.body, self.line  # still the variable it declared
        return new

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
    def __rlshift__(self, o): return _reflected_shift(self, o, "<<", BinOp.SHL)
    def __rrshift__(self, o): return _reflected_shift(self, o, ">>", BinOp.SHR)
    def __floordiv__(self, o): return floor_div(self, o)
    def __rfloordiv__(self, o): return floor_div(o, self)
    def __pow__(self, o): return power(self, o)
    def __rpow__(self, o): raise TypeError(_NO_RPOW)
    def __eq__(self, o): return self._bin(BinOp.EQ, o)  # type: ignore[override]
    def __ne__(self, o): return self._bin(BinOp.NE, o)  # type: ignore[override]
    def __lt__(self, o): return self._bin(BinOp.LT, o)
    def __le__(self, o): return self._bin(BinOp.LE, o)
    def __gt__(self, o): return self._bin(BinOp.GT, o)
    def __ge__(self, o): return self._bin(BinOp.GE, o)
    def __neg__(self): return unary(UnOp.NEG, self)
    def __abs__(self): return unary(UnOp.ABS, self)

    def __iadd__(self, o): return self._augment(Val.__add__, o)
    def __isub__(self, o): return self._augment(Val.__sub__, o)
    def __imul__(self, o): return self._augment(Val.__mul__, o)
    def __itruediv__(self, o): return self._augment(Val.__truediv__, o)
    def __imod__(self, o): return self._augment(Val.__mod__, o)
    def __iand__(self, o): return self._augment(Val.__and__, o)
    def __ior__(self, o): return self._augment(Val.__or__, o)
    def __ixor__(self, o): return self._augment(Val.__xor__, o)
    def __ilshift__(self, o): return self._augment(Val.__lshift__, o)
    def __irshift__(self, o): return self._augment(Val.__rshift__, o)
    def __ifloordiv__(self, o): return self._augment(Val.__floordiv__, o)
    def __ipow__(self, o): return self._augment(Val.__pow__, o)

    def __invert__(self) -> Val:
        """Bitwise not for integers, logical not for bool."""
        return unary(UnOp.NOT if self.dtype is DType.BOOL else UnOp.BIT_NOT, self)

    def cast(self, dtype: DType) -> Val:
        return cast(self, dtype)

    def bitcast(self, dtype: DType) -> Val:
        return bitcast(self, dtype)

    # Python asking for a Python value, which an expression has only when the kernel runs
    def __float__(self): raise TypeError(_no_python_value("float(v)", "v.cast(ir.f32)"))
    def __int__(self): raise TypeError(_no_python_value("int(v)", "v.cast(ir.i32)"))
    def __complex__(self): raise TypeError(_no_python_value("complex(v)", "an f32 pair"))
    def __index__(self): raise TypeError(_no_python_value(
        "a Python int (range(v), a list index, a size)", "k.loop('j', 0, v) to loop, "
        "buf[v] to index a buffer"))
    def __round__(self, ndigits=None): raise TypeError(_no_python_value("round(v)",
                                                                        "ir.round(v)"))
    def __trunc__(self): raise TypeError(_no_python_value("math.trunc(v)", "ir.trunc(v)"))
    def __floor__(self): raise TypeError(_no_python_value("math.floor(v)", "ir.floor(v)"))
    def __ceil__(self): raise TypeError(_no_python_value("math.ceil(v)", "ir.ceil(v)"))
    def __len__(self): raise TypeError(_no_python_value("len(v)", "buf.len for a buffer's "
                                                        "length"))
    def __iter__(self): raise TypeError(_no_python_value(
        "iteration (for, in, unpacking)", "with k.loop('j', start, end) as j: to loop"))
    def __contains__(self, item): raise TypeError(_no_python_value(
        "`in` (membership)", "== and | to compare with each candidate"))
    def __getitem__(self, i): raise TypeError(_no_python_value(
        "v[i] (a scalar has no elements)", "index the buffer: buf[i]"))
    def __divmod__(self, o): raise TypeError(_no_python_value("divmod(a, b)",
                                                              "a / b and a % b"))
    __rdivmod__ = __divmod__

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(f"a vyre value has no attribute {name!r}. Fix: a value has "
                             ".dtype, .cast(dtype) and .bitcast(dtype); functions on values "
                             "are in ir (ir.sqrt(v), ir.min(a, b), ...): see docs/ir.md")


def _no_python_value(what: str, instead: str) -> str:
    return (f"{what} needs a Python value, and a vyre expression has one only when the "
            f"kernel runs. Fix: use {instead}")


#: Comparisons: ``__bool__`` on one of them is mostly a chained comparison.
_COMPARISONS = typerules.ORDERING | typerules.EQUALITY


def _no_truth_value(node: Expr) -> str:
    """Why Python may not take an expression's truth, naming the precedence trap when
    the expression shows it: ``x < 4 & y < 4`` is ``x < (4 & y) < 4``, a chained
    comparison, and Python asks the truth of ``x < (4 & y)``."""
    why = ("a vyre expression has no Python truth value (if, while, and, or, not, and a "
           "chained comparison a < b < c all ask for one)")
    if isinstance(node, Binary) and node.op in _COMPARISONS and any(
            isinstance(side, Binary) and side.op in typerules.BITWISE
            for side in (node.lhs, node.rhs)):
        why += ("; this one is a comparison of a bitwise &, | or ^: `x < 4 & y < 4` reads "
                "as `x < (4 & y) < 4`, since & | ^ bind tighter than comparisons")
    return (f"{why}. Fix: use `with k.if_(cond):` for control flow, and combine "
            "conditions with & and |, wrapping each comparison in parentheses: "
            "(x < 4) & (y < 4)")


_NO_RPOW = ("a number raised to a vyre value builds no IR. Fix: ir.pow(ir.f32(base), x) "
            "for floats, or ir.exp2(x) for 2 ** x")


def _reflected_shift(self: Val, other: Operand, symbol: str, op: BinOp) -> Val:
    """``n << v``: a numpy scalar of a vyre type says the shifted type; a Python int does
    not (it would take the count's type, u32, whatever was meant), so it is refused."""
    if getattr(other, "dtype", None) in _NUMPY_DTYPES:
        return binary(op, lit(other), self)
    raise TypeError(f"{other!r} {symbol} value: a Python number has no vyre type here. Fix: "
                    f"type the shifted literal, e.g. ir.u32({other!r}) {symbol} value")


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


def _typed(value: Any, dtype: DType) -> Val:
    """``ir.u32(x)``: a literal of a number, a cast of an expression (what a user who
    calls a type on a value means; ``x.cast(ir.u32)`` is the same)."""
    return cast(value, dtype) if isinstance(value, Val) else lit(value, dtype)


dtypes.make_literals_with(_typed)


def as_val(x: Operand, like: DType | None = None) -> Val:
    """``x`` as a Val; Python numbers take the type ``like`` when given."""
    if isinstance(x, Val):
        scope.check_open(x)
        scope.check_current(x)
        return x
    if isinstance(x, BufferRef):
        x._as_value()
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
    return Val.of(Binary(op, a.node, b.node), dtype, a, b)


def _kernel_of(*operands: Val) -> Kernel | None:
    """The kernel a value built from ``operands`` belongs to (the first one's that has one)."""
    return next((v.kernel for v in operands if v.kernel is not None), None)


def unary(op: UnOp, x: Operand) -> Val:
    v = as_val(x)
    return Val.of(Unary(op, v.node),
                  None if v.dtype is None else typerules.unop_result(op, v.dtype), v)


def cast(x: Operand, dtype: DType) -> Val:
    v = as_val(x)
    return Val.of(Cast(dtype, v.node), dtype, v)


def bitcast(x: Operand, dtype: DType) -> Val:
    """``x``'s bits read as ``dtype``, a numeric type of its width (``ir.bitcast(f,
    ir.u32)``: an f32's bits; a NaN's are the canonical NaN's). The validator refuses
    other pairs (V037)."""
    v = as_val(x)
    return Val.of(Bitcast(dtype, v.node), dtype, v)


#: The largest exponent ``x ** n`` multiplies out (a larger one is ``ir.pow``'s).
MAX_POWER = 16


def power(x: Val, n: Operand) -> Val:
    """``x ** n`` for an int ``n`` in [0, MAX_POWER]: ``x * x * ... * x``, n factors
    multiplied left to right (each product rounded, as ``*`` is), 1 of x's type for 0."""
    if isinstance(n, int | np.integer) and not isinstance(n, bool | np.bool_) \
            and 0 <= n <= MAX_POWER and x.dtype is not DType.BOOL:
        result = as_val(1, x.dtype) if n == 0 else as_val(x)
        for _ in range(int(n) - 1):
            result = result * x
        return result
    float_fix = "ir.pow(x, y) (floats), or ir.sqrt(x) for x ** 0.5" \
        if x.dtype is None or x.dtype.is_float else "a loop of multiplications"
    raise TypeError(f"x ** {n!r}: ** builds x * x * ... for an int exponent from 0 to "
                    f"{MAX_POWER} on a number type only (x is "
                    f"{x.dtype.value if x.dtype else 'untyped'}). Fix: use {float_fix}; "
                    "for a negative n, 1 / x ** -n")


def floor_div(a: Operand, b: Operand) -> Val:
    """``a // b``: on unsigned integers Python's floor division is the IR's ``/`` (both
    truncate non-negative quotients alike); on signed ones they differ (Python floors,
    the IR truncates toward zero) and on floats the IR has no floor division, so both
    are refused with the spelling that says which is meant."""
    lhs = as_val(a, b.dtype if isinstance(b, Val) else None)
    rhs = as_val(b, lhs.dtype)
    t = lhs.dtype if lhs.dtype is not None else rhs.dtype
    if t is None or (t.is_int and not t.is_signed):
        return binary(BinOp.DIV, lhs, rhs)
    if t.is_signed:
        raise TypeError(f"a // b on {t.value}: Python's // rounds toward minus infinity and "
                        "the IR's / toward zero, as its % does; they differ when the signs "
                        "differ. Fix: write a / b (rounds toward zero), or cast both to an "
                        "unsigned type where they are never negative")
    raise TypeError(f"a // b on {t.value}: the IR has no floor division of floats. Fix: "
                    "write ir.floor(a / b)")


# -- Buffers and statements ------------------------------------------------------------

class BufferRef:
    """A declared buffer: ``buf[i]`` loads, ``buf[i] = v`` stores, ``buf.len`` is its length."""

    def __init__(self, kernel: Kernel, buffer: Buffer) -> None:
        self.kernel = kernel
        self.buffer = buffer

    def __getitem__(self, index: Operand | tuple[Operand, ...]) -> Val:
        flat = self._flat(index)
        return Val.of(Load(self.buffer.name, flat.node), self.buffer.dtype, flat,
                      kernel=self.kernel)

    def __setitem__(self, index: Operand | tuple[Operand, ...], value: Operand) -> None:
        self.kernel.emit(Store(self.buffer.name, self._flat(index).node,
                               as_val(value, self.buffer.dtype).node))

    def _flat(self, index: Operand | tuple[Operand, ...]) -> Val:
        """The element index (u32): ``buf[i]`` as given; ``buf[i, j]`` on a shaped buffer
        in numpy's row-major order, ``i * cols + j`` (no axis is bounds-checked on its own:
        only the flat index is, as any index)."""
        name, shape = self.buffer.name, self.buffer.shape
        if isinstance(index, slice) or index is Ellipsis:
            raise TypeError(f"{name}[{index!r}]: a buffer is indexed one element at a time. "
                            f"Fix: load elements {name}[i] inside with k.loop('i', start, end)")
        if not isinstance(index, tuple):
            return as_val(index, DType.U32)
        if shape is None:
            raise TypeError(f"{name}[{', '.join('...' for _ in index)}] indexes buffer {name!r} "
                            f"by axes, and it declares no shape. Fix: declare it with "
                            f"shape=(rows, cols), or index the flat element: "
                            f"{name}[i * cols + j]")
        if len(index) != len(shape):
            raise TypeError(f"{len(index)} indices for buffer {name!r} of shape {shape}. Fix: "
                            f"give one index per axis ({len(shape)}), in numpy's order")
        flat = self._flat(index[0])
        for axis, i in zip(shape[1:], index[1:], strict=True):
            flat = flat * axis + self._flat(i)
        return flat

    @property
    def len(self) -> Val:
        return Val(BufLen(self.buffer.name), DType.U32, self.kernel)

    @property
    def dtype(self) -> DType:
        return self.buffer.dtype

    @property
    def name(self) -> str:
        return self.buffer.name

    @property
    def shape(self) -> tuple[int, ...]:
        """The declared shape (numpy's order); ``__getattr__`` says why there is none."""
        if self.buffer.shape is None:
            raise AttributeError("shape")
        return self.buffer.shape

    def _as_value(self, *_: Any) -> Any:
        """A buffer where a value belongs (``x * 2`` for ``x[i] * 2``): refused."""
        raise TypeError(f"buffer {self.buffer.name!r} used as a value. Fix: load an element "
                        f"with {self.buffer.name}[index] or take its length with .len")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _as_value
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = _as_value
    __pow__ = __rpow__ = __and__ = __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = _as_value
    __lshift__ = __rlshift__ = __rshift__ = __rrshift__ = __neg__ = __abs__ = _as_value
    __invert__ = __lt__ = __le__ = __gt__ = __ge__ = _as_value

    def __len__(self) -> int:
        raise TypeError(f"len({self.buffer.name}): a buffer's length is known when the kernel "
                        f"runs. Fix: use {self.buffer.name}.len (a u32 expression)")

    def __iter__(self) -> Iterator[Val]:
        raise TypeError(f"iterating buffer {self.buffer.name!r} in Python builds nothing. Fix: "
                        f"loop in the kernel: with k.loop('i', 0, {self.buffer.name}.len) as i:")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if name == "shape":  # (the property found none)
            raise AttributeError(f"buffer {self.buffer.name!r} declares no shape. Fix: read "
                                 f"its element count as {self.buffer.name}.len (u32, at run "
                                 "time), or declare shape=(...) with the buffer")
        raise AttributeError(f"a buffer has no attribute {name!r}. Fix: a buffer has buf[i], "
                             "buf[i] = v, .len, .dtype, .name, .shape (when declared) and the "
                             "atomics (.atomic, .atomic_add, .atomic_min, .atomic_max)")

    def atomic(self, op: AtomicOp | str, index: Operand, value: Operand,
               comparand: Operand | None = None, name: str | None = None) -> Val:
        """Emit ``let name = atomic op``; returns the old value."""
        op = AtomicOp(op)
        t = self.buffer.dtype
        node = Atomic(op, self.buffer.name, self._flat(index).node, as_val(value, t).node,
                      None if comparand is None else as_val(comparand, t).node)
        return self.kernel.let(name or self.kernel.fresh_name("atomic"), Val(node, t))

    def atomic_add(self, index: Operand, value: Operand, name: str | None = None) -> Val:
        return self.atomic(AtomicOp.ADD, index, value, name=name)

    def atomic_max(self, index: Operand, value: Operand, name: str | None = None) -> Val:
        return self.atomic(AtomicOp.MAX, index, value, name=name)

    def atomic_min(self, index: Operand, value: Operand, name: str | None = None) -> Val:
        return self.atomic(AtomicOp.MIN, index, value, name=name)
