"""Value ranges of a plain program's 32-bit integers, for the kernel's proven version
(``codegen._Writer.proven``): where every index of an access lies inside its buffer and
no ``u32``/``i32`` addition, subtraction, multiplication or cast in an index wraps, the
kernel may index without bounds checks and compute indices in plain 64-bit arithmetic,
which LLVM sees as consecutive from lane to lane (contiguous vector loads instead of
masked gathers).

A range is a pair of source expressions (lowest, highest value) over what the dispatch
knows before its workgroups start: literals, the grid, buffer lengths and invariant
loads. Every range rests on assumptions (no wrap here, this select always takes its first
branch, this index below that length), each a boolean expression over the same values;
the kernel evaluates them once per dispatch and runs the proven version only when all
hold. Ranges are computed in f64: exact below 2**53, and a value at or above 2**53 stays
there when rounded, so every comparison with a 32-bit bound is decided right."""

from __future__ import annotations

from collections.abc import Callable

from vyre_core.ir.dtypes import DType
from vyre_core.ir.nodes import (
    Binary,
    BinOp,
    BufLen,
    Cast,
    Expr,
    IdKind,
    InvocationId,
    Lit,
    Load,
    Select,
    Unary,
    UnOp,
    Var,
)

Range = tuple[str, str]
#: The 32-bit integer types whose ranges are followed.
INTS = (DType.U32, DType.I32)
_FLIP = {BinOp.LT: BinOp.GE, BinOp.GE: BinOp.LT, BinOp.GT: BinOp.LE, BinOp.LE: BinOp.GT}
_MIRROR = {BinOp.LT: BinOp.GT, BinOp.GT: BinOp.LT, BinOp.LE: BinOp.GE, BinOp.GE: BinOp.LE}
#: A range's source longer than this is not followed (an expression that deep gains
#: nothing from it, and the check would cost more than it saves).
LONGEST = 600
#: A bound longer than this is computed once, at entry, and named (``Ranges.named``).
SHORT = 24


class Ranges:
    """The ranges known at the statement being written (a stack of scopes, keyed by the
    kernel variable's name or an invocation id's) and the assumptions made so far.
    ``typeof`` gives an expression's type, ``name_of`` a variable's kernel name (None for
    one assigned again: its range is not followed), ``length`` a buffer's length,
    ``define`` the name of a value computed at entry from the given source, and
    ``invariant`` the name of a value computed once per dispatch (None: it is not)."""

    def __init__(self, workgroup: tuple[int, int, int], typeof: Callable[[Expr], DType],
                 name_of: Callable[[str], str | None], invariant: Callable[[Expr], str | None],
                 length: Callable[[str], str | None], define: Callable[[str], str]) -> None:
        self.workgroup = workgroup
        self.typeof, self.name_of, self.invariant, self.length, self.define = \
            typeof, name_of, invariant, length, define
        #: by key: a range, or the key of the value it holds (a let of another variable
        #: or of an id: what a guard learns of one, it learns of both)
        self.scopes: list[dict[str, Range | str]] = [{}]
        self.assumptions: dict[str, None] = {}  # (ordered, without repeats)
        #: while a guard is read (``refine``): quotients and remainders have ranges, and a
        #: select may take its second branch (``branch``). Not in an index: one built of
        #: a quotient and a remainder (``(g // s) * span + g % s``, then a row's tail under
        #: a guard on ``g % s`` alone) is inside its buffer by a relation between them that
        #: ranges, one per value, lose, so its assumption would fail in every dispatch and
        #: send the launch to the checked version, where without a range only that access
        #: is checked (lib's reductions along an axis); nor a floor division of a dividend
        #: that may be negative whose sign test ``never`` would assume away.
        self.guarding = 0

    # -- scopes ----------------------------------------------------------------------------

    def push(self) -> None:
        self.scopes.append({})

    def pop(self) -> None:
        self.scopes.pop()

    def bind(self, key: str, found: Range | None) -> None:
        """``key`` (a kernel variable never assigned again) holds a value in ``found``."""
        if found is not None:
            self.scopes[-1][key] = self.named(found)

    def let(self, key: str, value: Expr) -> None:
        """``key`` (a kernel variable never assigned again) holds ``value``: the same
        value as the variable or id it names (``t = g``, ``base = g``), else its range."""
        other = self.key_of(value)
        if other is not None and isinstance(value, InvocationId) and \
                self.lookup(other) is None:  # (an id's range, where no guard narrowed it)
            self.scopes[-1][other] = self.id_range(value.kind, value.axis)
        if other is not None:
            self.scopes[-1][key] = self.root(other)
        else:
            self.bind(key, self.of(value))

    def key_of(self, e: Expr) -> str | None:
        """The key of a variable never assigned again, or of an id (None: another
        expression)."""
        match e:
            case Var(name):
                return self.name_of(name)
            case InvocationId(kind, axis):
                return id_key(kind, axis)
        return None

    def root(self, key: str) -> str:
        """The key whose range ``key`` has (itself, or the one it holds the value of)."""
        for scope in reversed(self.scopes):
            if key in scope:
                found = scope[key]
                return self.root(found) if isinstance(found, str) else key
        return key

    def lookup(self, key: str) -> Range | None:
        key = self.root(key)
        for scope in reversed(self.scopes):
            if key in scope:
                return scope[key]
        return None

    def assume(self, condition: str) -> None:
        self.assumptions[condition] = None

    # -- ranges ----------------------------------------------------------------------------

    def of(self, e: Expr) -> Range | None:
        """The range of ``e`` (a u32 or i32 value), or None where it is not known."""
        found = self._of(e)
        if found is None or len(found[0]) + len(found[1]) > LONGEST:
            return None
        return found

    def _of(self, e: Expr) -> Range | None:
        match e:
            case Lit(dtype, bits) if dtype in INTS:
                value = repr(float(dtype.from_bits(bits)))
                return value, value
            case Var(name):
                key = self.name_of(name)
                return None if key is None else self.lookup(key)
            case InvocationId(kind, axis):
                return self.lookup(id_key(kind, axis)) or self.id_range(kind, axis)
            case BufLen(buffer):
                n = self.length(buffer)
                return None if n is None else (n, n)
            case Load() if self.typeof(e) in INTS:
                name = self.invariant(e)
                return None if name is None else (f"np.float64({name})",) * 2
            case Binary(op, lhs, rhs) if op in (BinOp.ADD, BinOp.SUB, BinOp.MUL) and \
                    self.typeof(e) in INTS:
                a, b = self.of(lhs), self.of(rhs)
                if a is None or b is None:
                    return None
                return self.fits(self.named(_arith(op, a, b)), self.typeof(e))
            case Binary(BinOp.DIV | BinOp.REM as op, lhs, rhs) if self.guarding and \
                    self.typeof(e) in INTS:
                a, b = self.of(lhs), self.of(rhs)
                if a is None or b is None:
                    return None
                return self.named(self._quotient(a, b) if op is BinOp.DIV else _remainder(a, b))
            case Cast(dtype, value) if dtype in INTS and self.typeof(value) in INTS:
                found = self.of(value)
                return None if found is None else self.fits(found, dtype)
            case Select(cond, if_true, if_false):
                taken = self.branch(cond)
                if taken is None:
                    return None
                return self.of(if_true if taken else if_false)
        return None

    def _quotient(self, a: Range, b: Range) -> Range:
        """``a / b`` (``div``: truncates toward 0), assuming the divisor is 1 or more (no
        ``x / 0``, all ones, nor ``i32::MIN / -1``, which wraps): monotone in each operand,
        so its extremes are at the corners (one divisor: its ends)."""
        self.assume(f"{b[0]} >= 1.0")
        if b[0] == b[1]:
            return f"np.trunc({a[0]} / {b[0]})", f"np.trunc({a[1]} / {b[0]})"
        p, q, r, s = (f"np.trunc({x} / {y})" for x in a for y in b)
        return f"min2({p}, {q})", f"max2({r}, {s})"

    def id_range(self, kind: IdKind, axis: int) -> Range:
        size = self.workgroup[axis]
        grid = f"g{'xyz'[axis]}"
        return {IdKind.GLOBAL: ("0.0", f"np.float64({grid} * {size} - 1)"),
                IdKind.LOCAL: ("0.0", f"{float(size - 1)!r}"),
                IdKind.WORKGROUP: ("0.0", f"np.float64({grid} - 1)")}[kind]

    def fits(self, found: Range, dtype: DType) -> Range:
        """``found``, assuming it lies inside ``dtype`` (the operation does not wrap)."""
        lo, hi = dtype.int_range
        self.assume(f"{found[0]} >= {float(lo)!r}")
        self.assume(f"{found[1]} <= {float(hi)!r}")
        return found

    def inside(self, index: Expr, buffer: str) -> bool:
        """Whether ``index`` can be assumed inside ``buffer`` (the assumption made)."""
        if self.typeof(index) not in INTS:
            return False
        found, n = self.of(index), self.length(buffer)
        if found is None or n is None:
            return False
        self.assume(f"{found[0]} >= 0.0")
        self.assume(f"{found[1]} < {n}")
        return True

    # -- conditions ------------------------------------------------------------------------

    def decide(self, cond: Expr) -> bool | None:
        """Which way a comparison goes in every lane, by assumption (None: unknown)."""
        match cond:
            case Binary(BinOp.AND | BinOp.LOGICAL_AND, a, b):  # (a guard per axis)
                return True if self.decide(a) and self.decide(b) else None
            case Binary(op, lhs, rhs) if op in _FLIP and self.typeof(lhs) in INTS:
                a, b = self.of(lhs), self.of(rhs)
                if a is None or b is None:
                    return None
                self.assume(_holds(op, a, b))  # (the first branch: where it is wanted)
                return True
        return None

    def branch(self, cond: Expr) -> bool | None:
        """The branch a select on ``cond`` takes in every lane, by assumption: True (the
        first: ``decide``), False (the second: ``never``), None where neither is known."""
        if self.decide(cond):
            return True
        return False if self.guarding and self.never(cond) else None

    def never(self, cond: Expr) -> bool:
        """Whether ``cond`` can be assumed false in every lane (the assumptions made; none
        where it cannot): a comparison whose ranges say so, an ``and`` with such a side,
        an ``or`` or a ``!=`` of two booleans with both (``(r < 0) != (q < 0)``, the sign
        test of the floor division and modulo vyre.kernel writes for ``//`` and ``%``)."""
        before = dict(self.assumptions)
        if self._never(cond):
            return True
        self.assumptions = before  # (nor what a part that failed assumed)
        return False

    def _never(self, cond: Expr) -> bool:
        match cond:
            case Binary(BinOp.AND | BinOp.LOGICAL_AND, a, b):
                return self.never(a) or self.never(b)
            case Binary(BinOp.OR | BinOp.LOGICAL_OR, a, b):
                return self._never(a) and self._never(b)
            case Binary(BinOp.NE, a, b) if self.typeof(a) is DType.BOOL:
                return self._never(a) and self._never(b)
            case Binary(op, lhs, rhs) if op in _FLIP and self.typeof(lhs) in INTS:
                a, b = self.of(lhs), self.of(rhs)
                if a is None or b is None:
                    return False
                self.assume(_holds(_FLIP[op], a, b))
                return True
        return False

    def refine(self, cond: Expr, truth: bool) -> None:
        """What the statements run where ``cond`` is ``truth`` know of the variables and
        ids it compares (added to the innermost scope)."""
        self.guarding += 1
        try:
            self._refine(cond, truth)
        finally:
            self.guarding -= 1

    def _refine(self, cond: Expr, truth: bool) -> None:
        match cond:
            case Binary(BinOp.AND | BinOp.LOGICAL_AND, a, b) if truth:
                self.refine(a, True)
                self.refine(b, True)
            case Binary(BinOp.OR | BinOp.LOGICAL_OR, a, b) if not truth:
                self.refine(a, False)
                self.refine(b, False)
            case Unary(UnOp.NOT, a):
                self.refine(a, not truth)
            case Binary(op, lhs, rhs) if op in _FLIP and self.typeof(lhs) in INTS:
                op = op if truth else _FLIP[op]
                for x, y, how in ((lhs, rhs, op), (rhs, lhs, _MIRROR[op])):
                    theirs = self.of(y)
                    if theirs is not None:
                        self._bound(x, how, theirs)

    def _bound(self, x: Expr, op: BinOp, theirs: Range) -> None:
        """``x op y`` holds, ``y`` in ``theirs``: narrow the range of ``x`` (a variable or
        an id), or of the variables and ids of a sum or difference that does not wrap
        (``i + k * n < m``: ``i < m - k * n``, so ``a[i + k * n]`` under that guard is
        inside a buffer of ``m``; its no-wrap assumption is the one ``of`` made)."""
        match x:
            case Var() | InvocationId():
                key = self.key_of(x)
            case Cast(_, value) if self.typeof(value) in INTS and self.of(x) is not None:
                self._bound(value, op, theirs)  # (the same value in both types)
                return
            case Binary(BinOp.REM | BinOp.DIV as how, p, q) if op in (BinOp.GT, BinOp.GE) \
                    and self.of(x) is not None:
                # (``x >= t``, t at least 1: a remainder has its dividend's sign and no
                # greater magnitude, so ``p >= x >= t``; a quotient by ``q >= 1`` (``of``
                # assumed it) truncated is at most ``p / q``, so ``p >= t * q``. Below 1, or
                # for a quotient of ``p < 0``, nothing: ``-4 % 2 >= 0``, ``-1 / 2 >= 0``.)
                t = f"({theirs[0]} + 1.0)" if op is BinOp.GT else theirs[0]
                least = t if how is BinOp.REM else f"{t} * ({self.of(q)[0]})"
                self._bound(p, BinOp.GE, (f"({least} if {t} >= 1.0 else -np.inf)",
                                          theirs[1]))
                return
            case Binary(BinOp.ADD | BinOp.SUB as how, p, q) if self.of(x) is not None:
                a, b = self.of(p), self.of(q)
                if b is not None:  # (p op y - q, or y + q)
                    sign = "-" if how is BinOp.ADD else "+"
                    low, high = (b[1], b[0]) if how is BinOp.ADD else b
                    self._bound(p, op, (f"({theirs[0]} {sign} {low})",
                                        f"({theirs[1]} {sign} {high})"))
                if a is not None and how is BinOp.ADD:  # (q op y - p)
                    self._bound(q, op, (f"({theirs[0]} - {a[1]})", f"({theirs[1]} - {a[0]})"))
                elif a is not None:  # (p - q op y: q mirrored op p - y)
                    self._bound(q, _MIRROR[op], (f"({a[0]} - {theirs[1]})",
                                                 f"({a[1]} - {theirs[0]})"))
                return
            case _:
                return
        if key is None:
            return
        mine = self.of(x)
        if mine is None:
            return
        key = self.root(key)
        lo, hi = mine
        if op is BinOp.LT:
            hi = f"min2({hi}, {theirs[1]} - 1.0)"
        elif op is BinOp.LE:
            hi = f"min2({hi}, {theirs[1]})"
        elif op is BinOp.GT:
            lo = f"max2({lo}, {theirs[0]} + 1.0)"
        else:
            lo = f"max2({lo}, {theirs[0]})"
        self.scopes[-1][key] = self.named((lo, hi))

    def named(self, found: Range) -> Range:
        """``found`` with each bound longer than a name computed once, at entry, under
        one (an expression's range repeats its operands' ranges)."""
        return tuple(b if len(b) <= SHORT else self.define(b) for b in found)


def id_key(kind: IdKind, axis: int) -> str:
    """The kernel's name of an invocation id (``GID0``): its key among the ranges."""
    return f"{kind.value[0].upper()}ID{axis}"


def _arith(op: BinOp, a: Range, b: Range) -> Range:
    if op is BinOp.ADD:
        return f"({a[0]} + {b[0]})", f"({a[1]} + {b[1]})"
    if op is BinOp.SUB:
        return f"({a[0]} - {b[1]})", f"({a[1]} - {b[0]})"
    if a[0] == a[1] and b[0] == b[1]:
        return f"({a[0]} * {b[0]})", f"({a[0]} * {b[0]})"
    p, q, r, s = (f"{x} * {y}" for x in a for y in b)  # (runtime's min2, max2: numba
    return (f"min2(min2({p}, {q}), min2({r}, {s}))",     # compiles its own min and max
            f"max2(max2({p}, {q}), max2({r}, {s}))")     # again in every process)


def _remainder(a: Range, b: Range) -> Range:
    """``a % b`` (``rem``: the sign of the dividend, ``x % 0 == 0``), for every divisor:
    between 0 and the dividend, and below the divisor's greatest magnitude."""
    most = f"max2(max2(-({b[0]}), {b[1]}) - 1.0, 0.0)"
    return f"max2(min2({a[0]}, 0.0), -{most})", f"min2(max2({a[1]}, 0.0), {most})"


def _holds(op: BinOp, a: Range, b: Range) -> str:
    """The condition for ``x op y`` in every lane, ``x`` in ``a`` and ``y`` in ``b``."""
    return {BinOp.LT: f"{a[1]} < {b[0]}", BinOp.LE: f"{a[1]} <= {b[0]}",
            BinOp.GT: f"{a[0]} > {b[1]}", BinOp.GE: f"{a[0]} >= {b[1]}"}[op]
