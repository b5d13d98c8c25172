"""IR nodes: immutable values, compared and hashed by content.

Expressions are pure and total (every input has a defined result), so backends may
evaluate them in any order. The only side effects are statements: stores, assignments,
and atomics, which appear solely as the whole initializer of a ``Let``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from vyre_core.ir.dtypes import DType


class Access(enum.Enum):
    """How a buffer is bound; decides whether it is an input, an output, or both."""

    READ = "read"
    READ_WRITE = "read_write"
    OUTPUT = "output"
    UNIFORM = "uniform"
    WORKGROUP = "workgroup"

    @property
    def writable(self) -> bool:
        return self in (Access.READ_WRITE, Access.OUTPUT, Access.WORKGROUP)


class BinOp(enum.Enum):
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    REM = "rem"
    MIN = "min"
    MAX = "max"
    AND = "and"
    OR = "or"
    XOR = "xor"
    SHL = "shl"
    SHR = "shr"
    EQ = "eq"
    NE = "ne"
    LT = "lt"
    LE = "le"
    GT = "gt"
    GE = "ge"
    LOGICAL_AND = "logical_and"
    LOGICAL_OR = "logical_or"
    ROTL = "rotl"
    ROTR = "rotr"
    MULHI = "mulhi"
    ADD_SAT = "add_sat"
    SUB_SAT = "sub_sat"
    POW = "pow"
    ATAN2 = "atan2"


class UnOp(enum.Enum):
    NEG = "neg"
    BIT_NOT = "bit_not"
    NOT = "not"
    ABS = "abs"
    SQRT = "sqrt"
    EXP = "exp"
    LOG = "log"
    SIN = "sin"
    COS = "cos"
    FLOOR = "floor"
    CEIL = "ceil"
    POPCOUNT = "popcount"
    ROUND = "round"
    TRUNC = "trunc"
    ISNAN = "isnan"
    ISINF = "isinf"
    CLZ = "clz"
    CTZ = "ctz"
    BIT_REVERSE = "bit_reverse"
    TAN = "tan"
    TANH = "tanh"
    EXP2 = "exp2"
    LOG2 = "log2"


class AtomicOp(enum.Enum):
    ADD = "add"
    SUB = "sub"
    MIN = "min"
    MAX = "max"
    AND = "and"
    OR = "or"
    XOR = "xor"
    EXCHANGE = "exchange"
    COMPARE_EXCHANGE = "compare_exchange"


class SubgroupOp(enum.Enum):
    """The subgroup taxonomy: reductions and scans over a subgroup, moving a value between
    its invocations, and asking which of them hold a condition."""

    ADD = "add"
    MIN = "min"
    MAX = "max"
    AND = "and"
    OR = "or"
    XOR = "xor"
    INCLUSIVE_ADD = "inclusive_add"
    EXCLUSIVE_ADD = "exclusive_add"
    BROADCAST = "broadcast"  # the value of one lane, the same for every invocation
    SHUFFLE = "shuffle"      # the value of a lane each invocation names
    BALLOT = "ballot"        # the lanes whose condition holds, as bits of a u32
    ELECT = "elect"          # true in the subgroup's first lane


#: Subgroup ops that take a lane operand; ``ELECT`` alone takes no value.
SUBGROUP_LANE_OPS = frozenset({SubgroupOp.BROADCAST, SubgroupOp.SHUFFLE})


class IdKind(enum.Enum):
    GLOBAL = "global"
    LOCAL = "local"
    WORKGROUP = "workgroup"


# -- Expressions -----------------------------------------------------------------------

class Expr:
    """Base of expression nodes."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Lit(Expr):
    """A literal, stored as its canonical bit pattern so -0.0 and NaN payloads survive."""

    dtype: DType
    bits: int

    @staticmethod
    def of(dtype: DType, value: object) -> Lit:
        return Lit(dtype, dtype.to_bits(value))

    @property
    def value(self) -> object:
        return self.dtype.from_bits(self.bits)


@dataclass(frozen=True, slots=True)
class Var(Expr):
    name: str


@dataclass(frozen=True, slots=True)
class Load(Expr):
    buffer: str
    index: Expr


@dataclass(frozen=True, slots=True)
class BufLen(Expr):
    """Element count of a buffer as bound for this dispatch (u32)."""

    buffer: str


@dataclass(frozen=True, slots=True)
class InvocationId(Expr):
    kind: IdKind
    axis: int


@dataclass(frozen=True, slots=True)
class SpecRef(Expr):
    """The value of the specialization constant ``name``, fixed before the program runs
    (``Program.specialize``); a backend only ever sees programs with these substituted."""

    name: str


@dataclass(frozen=True, slots=True)
class Binary(Expr):
    op: BinOp
    lhs: Expr
    rhs: Expr


@dataclass(frozen=True, slots=True)
class Unary(Expr):
    op: UnOp
    operand: Expr


@dataclass(frozen=True, slots=True)
class Select(Expr):
    cond: Expr
    if_true: Expr
    if_false: Expr


@dataclass(frozen=True, slots=True)
class Cast(Expr):
    dtype: DType
    value: Expr


@dataclass(frozen=True, slots=True)
class Bitcast(Expr):
    """``value``'s bits read as ``dtype``, a numeric type of the same width (a conversion
    of the value is ``Cast``'s). A float NaN reads as its type's canonical NaN's bits,
    whatever its payload (docs/semantics.md, "Bitcasts")."""

    dtype: DType
    value: Expr


#: The most elements a table holds: the math library's tables with room to spare, and
#: within what WGSL promises on every device (array constructors of 2047 elements, 8 KiB
#: of private memory a shader: an f64 table of 1024 fills it).
MAX_TABLE = 1024


@dataclass(frozen=True, slots=True)
class Table(Expr):
    """Element ``index`` (u32) of a constant array of ``dtype``, each element given by its
    bits (``bits[i]`` read as ``dtype``, as a literal's are); an index past the end reads
    0, as a load does (docs/semantics.md, "Tables"). The math library's tables of
    constants (docs/design-42.md)."""

    dtype: DType
    bits: tuple[int, ...]
    index: Expr


@dataclass(frozen=True, slots=True)
class Fma(Expr):
    a: Expr
    b: Expr
    c: Expr


@dataclass(frozen=True, slots=True)
class Atomic(Expr):
    """Read-modify-write of ``buffer[index]``; evaluates to the value before the write.

    ``comparand`` is set only for compare-exchange, which writes ``value`` when the old
    value equals ``comparand``.
    """

    op: AtomicOp
    buffer: str
    index: Expr
    value: Expr
    comparand: Expr | None = None


@dataclass(frozen=True, slots=True)
class Subgroup(Expr):
    """``op`` over a subgroup: ``size`` invocations of a workgroup consecutive in local
    index (lane = local index mod ``size``). The size is part of the program, so every
    backend that runs it forms the same subgroups and gives the same bytes."""

    op: SubgroupOp
    size: int
    value: Expr | None = None
    lane: Expr | None = None


# -- Statements ------------------------------------------------------------------------

class Stmt:
    """Base of statement nodes."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Let(Stmt):
    name: str
    value: Expr


@dataclass(frozen=True, slots=True)
class Assign(Stmt):
    name: str
    value: Expr


@dataclass(frozen=True, slots=True)
class Store(Stmt):
    buffer: str
    index: Expr
    value: Expr


@dataclass(frozen=True, slots=True)
class If(Stmt):
    cond: Expr
    then: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...] = ()


#: A loop's default step.
ONE = Lit(DType.U32, 1)


@dataclass(frozen=True, slots=True)
class Loop(Stmt):
    """``for var in [start, end)`` over u32, ``step`` apart; ``var`` is read-only in the
    body. The step is a u32 literal or constant of at least 1, and the trip count is
    fixed when the loop starts, so no step can wrap ``var`` past ``end``
    (docs/semantics.md)."""

    var: str
    start: Expr
    end: Expr
    body: tuple[Stmt, ...]
    step: Expr = ONE


@dataclass(frozen=True, slots=True)
class While(Stmt):
    """``while cond`` for at most ``max_trips`` passes: the bound a GPU needs to promise
    the loop ends (the loop ends there whatever ``cond`` says)."""

    cond: Expr
    body: tuple[Stmt, ...]
    max_trips: int


@dataclass(frozen=True, slots=True)
class Break(Stmt):
    """Leaves the innermost loop (``Loop`` or ``While``)."""


@dataclass(frozen=True, slots=True)
class Continue(Stmt):
    """Goes on with the innermost loop's next pass."""


@dataclass(frozen=True, slots=True)
class Return(Stmt):
    pass


@dataclass(frozen=True, slots=True)
class Barrier(Stmt):
    """Workgroup barrier: memory and execution, for workgroup and storage memory."""


@dataclass(frozen=True, slots=True)
class Block(Stmt):
    body: tuple[Stmt, ...]


@dataclass(frozen=True, slots=True)
class Buffer:
    """A buffer binding. ``count`` None means runtime-sized (length taken from the input).
    ``shape`` (1 to 3 axes, numpy's order: the last is x) describes a counted buffer as
    a row-major array: an output's shape is what a 2-D or 3-D grid is inferred from."""

    name: str
    binding: int
    dtype: DType
    access: Access
    count: int | None = None
    shape: tuple[int, ...] | None = None

    @property
    def is_input(self) -> bool:
        return self.access not in (Access.OUTPUT, Access.WORKGROUP)

    @property
    def is_output(self) -> bool:
        return self.access in (Access.OUTPUT, Access.READ_WRITE)


@dataclass(frozen=True, slots=True)
class SpecConstant:
    """A named compile-time value with a default and an optional inclusive range, all
    literals of one dtype. Choosing values is specializing: each choice is its own program
    (and pipeline)."""

    name: str
    default: Lit
    low: Lit | None = None
    high: Lit | None = None

    @property
    def dtype(self) -> DType:
        return self.default.dtype


def children(node: Expr | Stmt) -> tuple[Expr | Stmt, ...]:
    """Direct child nodes, in field order."""
    match node:
        case Load(index=i) | Table(index=i):
            return (i,)
        case Binary(lhs=a, rhs=b):
            return (a, b)
        case Unary(operand=a) | Cast(value=a) | Bitcast(value=a) | Let(value=a) | \
                Assign(value=a):
            return (a,)
        case Select(cond=c, if_true=t, if_false=f):
            return (c, t, f)
        case Fma(a=a, b=b, c=c):
            return (a, b, c)
        case Atomic(index=i, value=v, comparand=c):
            return (i, v) if c is None else (i, v, c)
        case Subgroup(value=v, lane=lane):
            return tuple(x for x in (v, lane) if x is not None)
        case Store(index=i, value=v):
            return (i, v)
        case If(cond=c, then=t, orelse=e):
            return (c, *t, *e)
        case Loop(start=s, end=e, body=b, step=st):
            return (s, e, *b) if st == ONE else (s, e, st, *b)
        case While(cond=c, body=b):
            return (c, *b)
        case Block(body=b):
            return b
        case _:
            return ()


def loop_jumps(body: tuple[Stmt, ...]) -> frozenset[type[Stmt]]:
    """The kinds of jump (``Break``, ``Continue``) in a loop's ``body`` that are its own,
    not those of a loop nested in it."""
    found: set[type[Stmt]] = set()
    stack = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, Break | Continue):
            found.add(type(node))
        elif not isinstance(node, Loop | While):
            stack.extend(n for n in children(node) if isinstance(n, Stmt))
    return frozenset(found)


def walk(nodes: tuple[Expr | Stmt, ...] | list[Expr | Stmt]):
    """Every node under ``nodes``, pre-order, without recursion."""
    stack = list(reversed(nodes))
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(children(node)))
