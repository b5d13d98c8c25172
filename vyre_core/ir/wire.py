"""The canonical byte form of a Program: the identity that fingerprints and caches use.

Layout: ``b"VYIR"``, one format-version byte, then one msgpack array with fixed tags
and field order: ``[buffers, workgroup, body]`` (version 1), or ``[buffers, workgroup,
body, constants]`` (version 2, written only for programs that declare specialization
constants, so every other program keeps the bytes and fingerprint it always had).
Decoding treats bytes as untrusted: total size, nesting depth and node count are
bounded, and every malformation raises ``InvalidProgramError``.
"""

from __future__ import annotations

from typing import Any

import msgpack

from vyre_core.errors import InvalidProgramError
from vyre_core.ir.dtypes import DType
from vyre_core.ir.nodes import (
    MAX_TABLE,
    ONE,
    Access,
    Assign,
    Atomic,
    AtomicOp,
    Barrier,
    Binary,
    BinOp,
    Bitcast,
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
    Table,
    Unary,
    UnOp,
    Var,
    While,
)

MAGIC = b"VYIR"
FORMAT_VERSION = 2        # the newest this vyre reads and writes
PLAIN_FORMAT_VERSION = 1  # what programs without constants are written as
MAX_WIRE_BYTES = 8 * 1024 * 1024
MAX_DEPTH = 200
MAX_NODES = 250_000
MAX_LIST_LEN = 65_536
MAX_NAME_LEN = 64
MAX_BUFFERS = 64

# Stable tags. Append only: a tag is never renumbered or reused.
#: Stable dtype tags, shared by every canonical byte form (programs, sequences).
DTYPE_TAGS = {DType.U32: 0, DType.I32: 1, DType.F32: 2, DType.BOOL: 3, DType.F16: 4, DType.F64: 5,
              DType.U8: 6, DType.U16: 7, DType.I8: 8, DType.I16: 9, DType.U64: 10,
              DType.I64: 11}
_ACCESS_TAGS = {Access.READ: 0, Access.READ_WRITE: 1, Access.OUTPUT: 2, Access.UNIFORM: 3,
                Access.WORKGROUP: 4}
# Op tags follow declaration order in nodes.py, so new enum members go at the end.
_BINOP_TAGS = {op: i for i, op in enumerate(BinOp)}
_UNOP_TAGS = {op: i for i, op in enumerate(UnOp)}
_ATOMIC_TAGS = {op: i for i, op in enumerate(AtomicOp)}
_ID_TAGS = {IdKind.GLOBAL: 0, IdKind.LOCAL: 1, IdKind.WORKGROUP: 2}
_SUBGROUP_TAGS = {op: i for i, op in enumerate(SubgroupOp)}

# Expression tags 1..; statement tags 64..
(E_LIT, E_VAR, E_LOAD, E_BUFLEN, E_ID, E_BIN, E_UN, E_SELECT, E_CAST, E_FMA, E_ATOMIC,
 E_SPEC, E_SUBGROUP, E_BITCAST, E_TABLE) = range(1, 16)
(S_LET, S_ASSIGN, S_STORE, S_IF, S_LOOP, S_RETURN, S_BARRIER, S_BLOCK, S_WHILE, S_BREAK,
 S_CONTINUE, S_LOOP_STEP) = range(64, 76)


def _inverse(table: dict) -> dict:
    return {v: k for k, v in table.items()}


_DTYPES, _ACCESSES, _BINOPS, _UNOPS, _ATOMICS, _IDS, _SUBGROUPS = map(
    _inverse, (DTYPE_TAGS, _ACCESS_TAGS, _BINOP_TAGS, _UNOP_TAGS, _ATOMIC_TAGS, _ID_TAGS,
               _SUBGROUP_TAGS))


# -- Encoding --------------------------------------------------------------------------

def encode(program: Any) -> bytes:
    """Canonical bytes of ``program`` (a :class:`vyre_core.ir.Program`)."""
    try:
        return _encode(program)
    except (KeyError, AttributeError, TypeError, ValueError, OverflowError) as exc:
        # A hand-built node with a field of the wrong kind (e.g. "add" for BinOp.ADD).
        raise InvalidProgramError(
            f"program contains a malformed node or buffer ({type(exc).__name__}: {exc})",
            "Build programs with vyre_core.ir: enum members for ops, dtypes and access, "
            "IR nodes as children, Python ints for counts and bindings.") from None


def _encode(program: Any) -> bytes:
    body = [
        [[b.name, b.binding, DTYPE_TAGS[b.dtype], _ACCESS_TAGS[b.access], b.count,
          *([] if b.shape is None else [list(b.shape)])]  # (the bytes from before shapes)
         for b in program.buffers],
        list(program.workgroup),
        [_enc_stmt(s, 1) for s in program.body],
    ]
    if program.constants:
        body.append([[c.name, _enc_lit(c.default), _enc_lit(c.low), _enc_lit(c.high)]
                     for c in program.constants])
    version = FORMAT_VERSION if program.constants else PLAIN_FORMAT_VERSION
    return MAGIC + bytes([version]) + msgpack.packb(body, use_bin_type=True)


def _enc_lit(lit: Lit | None) -> list | None:
    return None if lit is None else [DTYPE_TAGS[lit.dtype], lit.bits]


def _too_deep() -> InvalidProgramError:
    return InvalidProgramError(
        f"program nests deeper than {MAX_DEPTH} levels",
        "Flatten deep expressions into a sequence of let statements.")


def _enc_stmt(s: Stmt, depth: int) -> list:
    if depth > MAX_DEPTH:
        raise _too_deep()
    d = depth + 1
    match s:
        case Let(name, value):
            return [S_LET, name, _enc_expr(value, d)]
        case Assign(name, value):
            return [S_ASSIGN, name, _enc_expr(value, d)]
        case Store(buffer, index, value):
            return [S_STORE, buffer, _enc_expr(index, d), _enc_expr(value, d)]
        case If(cond, then, orelse):
            return [S_IF, _enc_expr(cond, d), [_enc_stmt(x, d) for x in then],
                    [_enc_stmt(x, d) for x in orelse]]
        case Loop(var, start, end, body, step) if step == ONE:  # (the bytes from before steps)
            return [S_LOOP, var, _enc_expr(start, d), _enc_expr(end, d),
                    [_enc_stmt(x, d) for x in body]]
        case Loop(var, start, end, body, step):
            return [S_LOOP_STEP, var, _enc_expr(start, d), _enc_expr(end, d), _enc_expr(step, d),
                    [_enc_stmt(x, d) for x in body]]
        case While(cond, body, max_trips):
            return [S_WHILE, _enc_expr(cond, d), [_enc_stmt(x, d) for x in body], max_trips]
        case Break():
            return [S_BREAK]
        case Continue():
            return [S_CONTINUE]
        case Return():
            return [S_RETURN]
        case Barrier():
            return [S_BARRIER]
        case Block(body):
            return [S_BLOCK, [_enc_stmt(x, d) for x in body]]
    raise InvalidProgramError(f"{type(s).__name__} is not an IR statement",
                              "Build statements with vyre_core.ir only.")


def _enc_expr(e: Expr, depth: int) -> list:
    if depth > MAX_DEPTH:
        raise _too_deep()
    d = depth + 1
    match e:
        case Lit(dtype, bits):
            return [E_LIT, DTYPE_TAGS[dtype], bits]
        case Var(name):
            return [E_VAR, name]
        case SpecRef(name):
            return [E_SPEC, name]
        case Load(buffer, index):
            return [E_LOAD, buffer, _enc_expr(index, d)]
        case BufLen(buffer):
            return [E_BUFLEN, buffer]
        case InvocationId(kind, axis):
            return [E_ID, _ID_TAGS[kind], axis]
        case Binary(op, lhs, rhs):
            return [E_BIN, _BINOP_TAGS[op], _enc_expr(lhs, d), _enc_expr(rhs, d)]
        case Unary(op, operand):
            return [E_UN, _UNOP_TAGS[op], _enc_expr(operand, d)]
        case Select(cond, if_true, if_false):
            return [E_SELECT, _enc_expr(cond, d), _enc_expr(if_true, d), _enc_expr(if_false, d)]
        case Cast(dtype, value):
            return [E_CAST, DTYPE_TAGS[dtype], _enc_expr(value, d)]
        case Bitcast(dtype, value):
            return [E_BITCAST, DTYPE_TAGS[dtype], _enc_expr(value, d)]
        case Table(dtype, bits, index):
            return [E_TABLE, DTYPE_TAGS[dtype], list(bits), _enc_expr(index, d)]
        case Fma(a, b, c):
            return [E_FMA, _enc_expr(a, d), _enc_expr(b, d), _enc_expr(c, d)]
        case Atomic(op, buffer, index, value, comparand):
            return [E_ATOMIC, _ATOMIC_TAGS[op], buffer, _enc_expr(index, d), _enc_expr(value, d),
                    None if comparand is None else _enc_expr(comparand, d)]
        case Subgroup(op, size, value, lane):
            return [E_SUBGROUP, _SUBGROUP_TAGS[op], size,
                    None if value is None else _enc_expr(value, d),
                    None if lane is None else _enc_expr(lane, d)]
    raise InvalidProgramError(f"{type(e).__name__} is not an IR expression",
                              "Build expressions with vyre_core.ir only.")


# -- Decoding --------------------------------------------------------------------------

_FIX_BYTES = "Pass the exact bytes of Program.to_wire(); do not edit or truncate them."


def decode(data: bytes | bytearray | memoryview) -> tuple[
        tuple[Buffer, ...], tuple[int, ...], tuple[Stmt, ...], tuple[SpecConstant, ...]]:
    """Buffers, workgroup, body and constants of untrusted program bytes."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise InvalidProgramError(f"program bytes must be bytes, got {type(data).__name__}",
                                  _FIX_BYTES)
    data = bytes(data)
    if len(data) > MAX_WIRE_BYTES:
        raise InvalidProgramError(f"program is {len(data)} bytes, over the {MAX_WIRE_BYTES} limit",
                                  "Split the work into smaller programs.")
    if data[:4] != MAGIC:
        raise InvalidProgramError("bytes do not start with the vyre program magic b'VYIR'",
                                  _FIX_BYTES)
    if len(data) < 5:
        raise InvalidProgramError("program bytes end before the format version", _FIX_BYTES)
    version = data[4]
    if not PLAIN_FORMAT_VERSION <= version <= FORMAT_VERSION:
        newer = version > FORMAT_VERSION
        raise InvalidProgramError(
            f"program format version {version} is {'newer' if newer else 'older'} than "
            f"this vyre's version {FORMAT_VERSION}",
            "Upgrade vyre to read these bytes." if newer
            else "Rebuild the program with this vyre and re-serialise it.")
    budget = _ElementBudget()
    try:
        body = msgpack.unpackb(
            data[5:], raw=False, use_list=True, strict_map_key=True, list_hook=budget,
            max_str_len=MAX_NAME_LEN * 4, max_bin_len=0, max_array_len=MAX_LIST_LEN,
            max_map_len=0, max_ext_len=0)
    except _TooManyNodes:
        raise _too_many_nodes() from None
    except Exception as exc:  # the msgpack boundary: map every failure to one class
        raise InvalidProgramError(f"program bytes are not well-formed msgpack ({exc})",
                                  _FIX_BYTES) from None
    return _Decoder().program(body, version)


class _TooManyNodes(Exception):
    pass


def _too_many_nodes() -> InvalidProgramError:
    return InvalidProgramError(f"program has more than {MAX_NODES} nodes",
                               "Split the work into smaller programs.")


class _ElementBudget:
    """msgpack ``list_hook`` that stops decoding once more array elements were built
    than any program of MAX_NODES nodes has, so memory stays bounded while decoding."""

    LIMIT = 6 * MAX_NODES

    def __init__(self) -> None:
        self.elements = 0

    def __call__(self, items: list) -> list:
        self.elements += len(items) + 1
        if self.elements > self.LIMIT:
            raise _TooManyNodes
        return items


class _Decoder:
    def __init__(self) -> None:
        self.nodes = 0

    def fail(self, what: str) -> InvalidProgramError:
        return InvalidProgramError(f"malformed program bytes: {what}", _FIX_BYTES)

    def count(self, depth: int) -> None:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _too_many_nodes()
        if depth > MAX_DEPTH:
            raise _too_deep()

    def arr(self, v: Any, what: str, n: int | None = None) -> list:
        if not isinstance(v, list) or (n is not None and len(v) != n):
            want = "an array" if n is None else f"an array of {n}"
            raise self.fail(f"{what} must be {want}, got {_describe(v)}")
        return v

    def int_(self, v: Any, what: str, lo: int = 0, hi: int = 2**32 - 1) -> int:
        if type(v) is not int or not lo <= v <= hi:
            raise self.fail(f"{what} must be an integer in [{lo}, {hi}], got {_describe(v)}")
        return v

    def name(self, v: Any, what: str) -> str:
        if not isinstance(v, str) or not v or len(v) > MAX_NAME_LEN:
            raise self.fail(f"{what} must be a name of 1..{MAX_NAME_LEN} characters, "
                            f"got {_describe(v)}")
        return v

    def tag(self, table: dict, v: Any, what: str) -> Any:
        if type(v) is not int or v not in table:
            raise self.fail(f"unknown {what} tag {_describe(v)}")
        return table[v]

    def program(self, body: Any, version: int) -> tuple:
        plain = version == PLAIN_FORMAT_VERSION
        buffers, workgroup, stmts, *constants = self.arr(body, "program", 3 if plain else 4)
        if len(self.arr(buffers, "buffer list")) > MAX_BUFFERS:
            raise self.fail(f"more than {MAX_BUFFERS} buffers")
        if not plain and not self.arr(constants[0], "constant list"):
            raise self.fail(f"format version {version} without constants")
        return (tuple(self.buffer(b) for b in buffers),
                tuple(self.int_(w, "workgroup axis") for w in self.arr(workgroup, "workgroup", 3)),
                self.stmts(stmts, 1),
                tuple(self.constant(c) for c in (constants[0] if constants else ())))

    def constant(self, c: Any) -> SpecConstant:
        self.count(1)
        name, default, low, high = self.arr(c, "constant", 4)
        lit = self.lit(default, "constant default")
        return SpecConstant(self.name(name, "constant name"), lit,
                            None if low is None else self.lit(low, "constant low"),
                            None if high is None else self.lit(high, "constant high"))

    def lit(self, v: Any, what: str) -> Lit:
        dtype_tag, bits = self.arr(v, what, 2)
        dtype = self.tag(_DTYPES, dtype_tag, "dtype")
        hi = 1 if dtype is DType.BOOL else 2**dtype.bits - 1
        return Lit(dtype, self.int_(bits, "literal bits", 0, hi))

    def buffer(self, b: Any) -> Buffer:
        fields = self.arr(b, "buffer")
        name, binding, dtype, access, count, *shape = self.arr(
            fields, "buffer", 6 if len(fields) == 6 else 5)
        return Buffer(self.name(name, "buffer name"), self.int_(binding, "binding"),
                      self.tag(_DTYPES, dtype, "dtype"), self.tag(_ACCESSES, access, "access"),
                      None if count is None else self.int_(count, "buffer count"),
                      tuple(self.int_(n, "buffer shape axis")
                            for n in self.arr(shape[0], "buffer shape")) if shape else None)

    def stmts(self, v: Any, depth: int) -> tuple[Stmt, ...]:
        return tuple(self.stmt(s, depth) for s in self.arr(v, "statement list"))

    def stmt(self, v: Any, depth: int) -> Stmt:
        self.count(depth)
        v = self.arr(v, "statement")
        d = depth + 1
        shape = {S_LET: 3, S_ASSIGN: 3, S_STORE: 4, S_IF: 4, S_LOOP: 5, S_RETURN: 1,
                 S_BARRIER: 1, S_BLOCK: 2, S_WHILE: 4, S_BREAK: 1, S_CONTINUE: 1,
                 S_LOOP_STEP: 6}
        tag = self.tag({t: t for t in shape}, v[0] if v else None, "statement")
        self.arr(v, f"statement {tag}", shape[tag])
        if tag == S_LET:
            return Let(self.name(v[1], "variable"), self.expr(v[2], d))
        if tag == S_ASSIGN:
            return Assign(self.name(v[1], "variable"), self.expr(v[2], d))
        if tag == S_STORE:
            return Store(self.name(v[1], "buffer"), self.expr(v[2], d), self.expr(v[3], d))
        if tag == S_IF:
            return If(self.expr(v[1], d), self.stmts(v[2], d), self.stmts(v[3], d))
        if tag == S_LOOP:
            return Loop(self.name(v[1], "loop variable"), self.expr(v[2], d), self.expr(v[3], d),
                        self.stmts(v[4], d))
        if tag == S_LOOP_STEP:
            return Loop(self.name(v[1], "loop variable"), self.expr(v[2], d), self.expr(v[3], d),
                        self.stmts(v[5], d), self.expr(v[4], d))
        if tag == S_WHILE:
            return While(self.expr(v[1], d), self.stmts(v[2], d),
                         self.int_(v[3], "while loop bound"))
        if tag == S_BREAK:
            return Break()
        if tag == S_CONTINUE:
            return Continue()
        if tag == S_RETURN:
            return Return()
        if tag == S_BARRIER:
            return Barrier()
        return Block(self.stmts(v[1], d))

    def expr(self, v: Any, depth: int) -> Expr:
        self.count(depth)
        v = self.arr(v, "expression")
        d = depth + 1
        shape = {E_LIT: 3, E_VAR: 2, E_LOAD: 3, E_BUFLEN: 2, E_ID: 3, E_BIN: 4, E_UN: 3,
                 E_SELECT: 4, E_CAST: 3, E_FMA: 4, E_ATOMIC: 6, E_SPEC: 2, E_SUBGROUP: 5,
                 E_BITCAST: 3, E_TABLE: 4}
        tag = self.tag({t: t for t in shape}, v[0] if v else None, "expression")
        self.arr(v, f"expression {tag}", shape[tag])
        if tag == E_LIT:
            return self.lit(v[1:], "literal")
        if tag == E_VAR:
            return Var(self.name(v[1], "variable"))
        if tag == E_SPEC:
            return SpecRef(self.name(v[1], "constant"))
        if tag == E_LOAD:
            return Load(self.name(v[1], "buffer"), self.expr(v[2], d))
        if tag == E_BUFLEN:
            return BufLen(self.name(v[1], "buffer"))
        if tag == E_ID:
            return InvocationId(self.tag(_IDS, v[1], "invocation id"),
                                self.int_(v[2], "axis", 0, 2))
        if tag == E_BIN:
            return Binary(self.tag(_BINOPS, v[1], "binary op"), self.expr(v[2], d),
                          self.expr(v[3], d))
        if tag == E_UN:
            return Unary(self.tag(_UNOPS, v[1], "unary op"), self.expr(v[2], d))
        if tag == E_SELECT:
            return Select(self.expr(v[1], d), self.expr(v[2], d), self.expr(v[3], d))
        if tag == E_CAST:
            return Cast(self.tag(_DTYPES, v[1], "dtype"), self.expr(v[2], d))
        if tag == E_BITCAST:
            return Bitcast(self.tag(_DTYPES, v[1], "dtype"), self.expr(v[2], d))
        if tag == E_TABLE:
            dtype = self.tag(_DTYPES, v[1], "dtype")
            values = self.arr(v[2], "table values")
            if not 1 <= len(values) <= MAX_TABLE:
                raise self.fail(f"a table of {len(values)} values, not 1 to {MAX_TABLE}")
            hi = 1 if dtype is DType.BOOL else 2**dtype.bits - 1
            return Table(dtype, tuple(self.int_(b, "table value bits", 0, hi) for b in values),
                         self.expr(v[3], d))
        if tag == E_FMA:
            return Fma(self.expr(v[1], d), self.expr(v[2], d), self.expr(v[3], d))
        if tag == E_SUBGROUP:
            return Subgroup(self.tag(_SUBGROUPS, v[1], "subgroup op"),
                            self.int_(v[2], "subgroup size"),
                            None if v[3] is None else self.expr(v[3], d),
                            None if v[4] is None else self.expr(v[4], d))
        comparand = None if v[5] is None else self.expr(v[5], d)
        return Atomic(self.tag(_ATOMICS, v[1], "atomic op"), self.name(v[2], "buffer"),
                      self.expr(v[3], d), self.expr(v[4], d), comparand)


def _describe(v: Any) -> str:
    """A short description that never walks nested values (they may be huge or deep)."""
    if isinstance(v, list):
        return f"an array of {len(v)}"
    text = repr(v[:40] if isinstance(v, str) else v)
    return text if len(text) <= 40 else text[:37] + "..."
