"""The validator: every rule a program must meet before any backend sees it.

Codes are stable (append only). Each finding reads ``V###: cause. Fix: action`` and all
findings of a program are reported together. Results are cached by fingerprint.
"""

from __future__ import annotations

import math
import os
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass

from vyre_core import deprecations
from vyre_core.errors import InvalidProgramError, ValidationError
from vyre_core.ir import typerules, wire
from vyre_core.ir.codes import CODES
from vyre_core.ir.dtypes import DType
from vyre_core.ir.nodes import (
    MAX_TABLE,
    Access,
    Assign,
    Atomic,
    Barrier,
    Binary,
    Bitcast,
    Block,
    Break,
    BufLen,
    Cast,
    Continue,
    Expr,
    Fma,
    If,
    InvocationId,
    Let,
    Lit,
    Load,
    Loop,
    Return,
    Select,
    SpecRef,
    Stmt,
    Store,
    Subgroup,
    SubgroupOp,
    Table,
    Unary,
    Var,
    While,
    children,
    walk,
)
from vyre_core.ir.specialize import describe_range, in_range
from vyre_core.ir.uniformity import is_uniform, leaves_early, varying
from vyre_core.ir.wire import MAX_BUFFERS

_SUBGROUP_SIZES = frozenset(1 << n for n in range(8))

#: The statements after which the rest of a block is unreachable, as findings name them.
_JUMPS = {Return: "return", Break: "break", Continue: "continue"}

#: Programs smaller than this cannot reach the wire form's node or list limits.
_SMALL_WIRE = 1 << 16

_U32_MAX = 2**32 - 1

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}\Z")


def _is_name(x: object) -> bool:
    return isinstance(x, str) and _NAME.match(x) is not None


@dataclass(frozen=True)
class Finding:
    code: str
    cause: str
    where: str

    @property
    def fix(self) -> str:
        return CODES[self.code]

    @property
    def message(self) -> str:
        return f"{self.code}: {self.cause} (at {self.where}). Fix: {self.fix}"

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "cause": self.cause, "where": self.where, "fix": self.fix}


_CACHE: OrderedDict[str, tuple[Finding, ...]] = OrderedDict()
_CACHE_LIMIT = 4096
_CACHE_LOCK = threading.Lock()


def _fresh_lock_after_fork() -> None:
    """A forked child may inherit the lock held by a thread that does not exist there."""
    global _CACHE_LOCK
    _CACHE_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_fresh_lock_after_fork)


def validate(program) -> list[Finding]:
    """All findings for ``program``; empty when it is valid."""
    key = program.fingerprint()
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
            return list(hit)
    findings = tuple(_Validator(program).run())
    with _CACHE_LOCK:
        _CACHE[key] = findings
        if len(_CACHE) > _CACHE_LIMIT:
            _CACHE.popitem(last=False)
    return list(findings)


def check(program) -> None:
    """Raise ``ValidationError`` carrying every finding when ``program`` is invalid."""
    findings = validate(program)
    if findings:
        lines = "\n".join("  " + f.message for f in findings)
        raise ValidationError(
            f"program {program.fingerprint()[:16]} has {len(findings)} validation "
            f"finding(s):\n{lines}",
            findings=[f.to_dict() for f in findings])


def _shape_fits(shape: object, count: int | None) -> bool:
    return isinstance(shape, tuple) and 1 <= len(shape) <= 3 and count is not None and \
        all(type(n) is int and n >= 1 for n in shape) and math.prod(shape) == count


@dataclass
class _Scope:
    types: dict[str, DType]
    loop_vars: set[str]


class _Validator:
    def __init__(self, program) -> None:
        self.program = program
        self.findings: list[Finding] = []
        self.where = "program"
        self.buffers = {b.name: b for b in program.buffers}
        self.constants = {c.name: c for c in program.constants}
        self.scopes: list[_Scope] = []
        # Variables an assignment may leave different per invocation (uniformity.varying).
        self.varying = varying(program.body, self.buffers)
        self.loop_vars = {n.var for n in walk(program.body) if isinstance(n, Loop)}
        self.uniform_vars: set[str] = set()
        self.diverged = False  # a non-uniform return happened earlier
        self.loop_depth = 0    # how many loops enclose the statement being checked
        #: (buffer, index) of every load, store and atomic of the statement being checked
        self.indexed: list[tuple[str, Expr]] = []
        self.subgroup_sizes: set[int] = set()
        self.ballots = False   # whether any subgroup op is a ballot (32 lanes at most)

    def report(self, code: str, cause: str) -> None:
        """Record a finding once: the same one twice (two loads by one index) says nothing
        more."""
        finding = Finding(code, cause, self.where)
        if finding not in self.findings:
            self.findings.append(finding)

    def run(self) -> list[Finding]:
        self.check_buffers()
        self.check_constants()
        if any(not 1 <= axis <= _U32_MAX for axis in self.program.workgroup):
            self.report("V013", f"workgroup size {self.program.workgroup} has an axis out of "
                        "range")
        self.block(self.program.body, "body", uniform=True)
        self.check_subgroup_size()
        self.check_wire_limits()
        if not self.findings:
            self.check_deprecated_ops()
        return self.findings

    def check_subgroup_size(self) -> None:
        self.where = "program"
        invocations = math.prod(self.program.workgroup)
        if len(self.subgroup_sizes) > 1:
            self.report("V034", f"subgroup operations of sizes {sorted(self.subgroup_sizes)} "
                        "in one program")
        for size in self.subgroup_sizes:
            if type(size) is not int or size not in _SUBGROUP_SIZES or invocations % size:
                self.report("V034", f"subgroup size {size!r} is not a power of two from 1 to "
                            f"128 dividing the workgroup's {invocations} invocations")
            elif self.ballots and size > 32:
                self.report("V034", f"a ballot over subgroups of {size}: its u32 holds 32 lanes")

    def subgroups_here(self, exprs: tuple[Expr | None, ...], uniform: bool) -> None:
        """Subgroup operations need every invocation of the workgroup: where barriers may
        be (V016), and a broadcast's lane the same in all of them."""
        for node in walk(tuple(e for e in exprs if e is not None)):
            if not isinstance(node, Subgroup):
                continue
            if not uniform or self.diverged:
                self.report("V035", f"subgroup {node.op.value} where only some invocations "
                            "may run it")
            elif node.op is SubgroupOp.BROADCAST and node.lane is not None and \
                    not self.is_uniform(node.lane):
                self.report("V035", "subgroup broadcast from a lane that may differ between "
                            "invocations")

    def check_deprecated_ops(self) -> None:
        """A deprecated op warns (once per process), a removed one is a finding."""
        deprecated = deprecations.of_kind("op")
        if not deprecated:
            return
        self.where = "program"
        for op in sorted(self.program.requirements().ops & deprecated.keys()):
            entry = deprecated[op]
            if entry.removed():
                self.report("V029", f"{entry.describe('it')}: {entry.replacement}")
            else:
                deprecations.warn_once(entry, "a program")

    def check_wire_limits(self) -> None:
        """A worker decodes a program under bounds (size, nodes, list length): a program
        past them is found here, not as a refusal in the worker."""
        data = self.program.to_wire()
        if len(data) < _SMALL_WIRE:
            return
        try:
            wire.decode(data)
        except InvalidProgramError as exc:
            self.where = "program"
            self.report("V026", f"its wire form would be refused: {exc.cause}")

    def check_buffers(self) -> None:
        names: set[str] = set()
        bindings: set[int] = set()
        if len(self.program.buffers) > MAX_BUFFERS:
            self.where = "buffers"
            self.report("V025", f"{len(self.program.buffers)} buffers, more than {MAX_BUFFERS}")
        for b in self.program.buffers:
            self.where = f"buffer {b.name!r}"
            if not _is_name(b.name):
                self.report("V021", f"buffer name {b.name!r} is not an identifier")
            if b.name in names:
                self.report("V001", f"buffer name {b.name!r} is declared twice")
            if b.binding in bindings:
                self.report("V002", f"binding {b.binding} is used by two buffers")
            if not isinstance(b.binding, int) or not 0 <= b.binding <= _U32_MAX:
                self.report("V024", f"binding {b.binding!r} of {b.name!r} is out of range")
            names.add(b.name)
            bindings.add(b.binding)
            needs_count = b.access in (Access.OUTPUT, Access.UNIFORM, Access.WORKGROUP)
            if b.count is None and needs_count:
                self.report("V014", f"{b.access.value} buffer {b.name!r} has no element count")
            elif b.count is not None and not 1 <= b.count <= _U32_MAX:
                self.report("V014", f"buffer {b.name!r} declares count {b.count}, out of range")
            if b.shape is not None and not _shape_fits(b.shape, b.count):
                self.report("V033", f"buffer {b.name!r} declares shape {b.shape!r} for count "
                            f"{b.count}")

    def check_constants(self) -> None:
        seen: set[str] = set()
        for c in self.program.constants:
            self.where = f"constant {c.name!r}"
            if not _is_name(c.name):
                self.report("V021", f"constant name {c.name!r} is not an identifier")
            if c.name in seen:
                self.report("V028", f"constant {c.name!r} is declared twice")
            seen.add(c.name)
            lits = [x for x in (c.default, c.low, c.high) if x is not None]
            if not isinstance(c.default, Lit):
                self.report("V028", f"constant {c.name!r} has no default")
            elif any(x.dtype is not c.dtype for x in lits):  # (non-literals: wire refuses)
                self.report("V028", f"constant {c.name!r} mixes types: "
                            + ", ".join(x.dtype.value for x in lits))
            elif all(self.expr(x) is not None for x in lits) and (
                    not in_range(c, c.default) or (c.low is not None and c.high is not None
                                                   and not c.low.value <= c.high.value)):
                self.report("V028", f"constant {c.name!r} has default {c.default.value!r} "
                            f"and range {describe_range(c)}")

    # -- statements --------------------------------------------------------------------

    def lookup(self, name: str) -> DType | None:
        for scope in reversed(self.scopes):
            if name in scope.types:
                return scope.types[name]
        return None

    def declared(self, name: str) -> bool:
        return any(name in s.types for s in self.scopes)

    def is_loop_var(self, name: str) -> bool:
        return any(name in s.loop_vars for s in self.scopes)

    def declare(self, name: str, dtype: DType | None, uniform: bool, loop: bool = False) -> None:
        if not _is_name(name):
            self.report("V021", f"variable name {name!r} is not an identifier")
        if self.declared(name):
            self.report("V005", f"variable {name!r} is already declared in an enclosing scope")
        scope = self.scopes[-1]
        scope.types[name] = dtype  # type: ignore[assignment]  # None after an error
        if loop:
            scope.loop_vars.add(name)
        if uniform and name not in self.varying:
            self.uniform_vars.add(name)
        else:
            self.uniform_vars.discard(name)

    def block(self, stmts: tuple[Stmt, ...], path: str, uniform: bool) -> None:
        self.scopes.append(_Scope({}, set()))
        returned = False
        for i, stmt in enumerate(stmts):
            self.where = f"{path}[{i}]"
            if returned:
                self.report("V015", f"{type(stmt).__name__} follows a {returned} in the same "
                            "block")
                break
            self.stmt(stmt, f"{path}[{i}]", uniform)
            returned = _JUMPS.get(type(stmt), "")
        for name in self.scopes.pop().types:
            self.uniform_vars.discard(name)

    def stmt(self, s: Stmt, path: str, uniform: bool) -> None:
        own = tuple(c for c in children(s) if isinstance(c, Expr))
        self.indexed = [(n.buffer, n.index) for n in walk(own) if isinstance(n, Load | Atomic)]
        if isinstance(s, Store):
            self.indexed.append((s.buffer, s.index))
        if own:  # (a while condition is evaluated again by the invocations still in it)
            self.subgroups_here(own, uniform and not isinstance(s, While))
        match s:
            case Let(name, value):
                t = self.atomic(value) if isinstance(value, Atomic) else self.expr(value)
                self.declare(name, t, uniform and self.is_uniform(value))
            case Assign(name, value):
                t = self.expr(value)
                target = self.lookup(name)
                if self.is_loop_var(name):
                    self.report("V020", f"assignment to loop variable {name!r}")
                elif not self.declared(name):
                    self.report("V004", f"assignment to undeclared variable {name!r}")
                elif t is not None and target is not None and t is not target:
                    self.report("V008", f"assigns {t.value} to {name!r} of type {target.value}")
            case Store(buffer, index, value):
                buf = self.buffer(buffer)
                self.index(index, buffer)
                t = self.expr(value)
                if buf is not None:
                    if not buf.access.writable:
                        self.report("V006", f"store into {buf.access.value} buffer {buffer!r}")
                    elif t is not None and t is not buf.dtype:
                        self.report("V008", f"stores {t.value} into {buf.dtype.value} "
                                    f"buffer {buffer!r}")
            case If(cond, then, orelse):
                t = self.expr(cond)
                if t is not None and t is not DType.BOOL:
                    self.report("V019", f"if condition has type {t.value}, not bool")
                inner = uniform and self.is_uniform(cond)
                self.block(then, f"{path}.then", inner)
                self.block(orelse, f"{path}.else", inner)
            case Loop(var, start, end, body, step):
                for bound, label in ((start, "start"), (end, "end")):
                    t = self.expr(bound)
                    if t is not None and t is not DType.U32:
                        self.report("V012", f"loop {label} bound has type {t.value}, not u32")
                self.check_step(step)
                inner = uniform and self.is_uniform(start) and self.is_uniform(end) and \
                    not self.diverges(body)
                self.scopes.append(_Scope({}, set()))
                self.declare(var, DType.U32, inner, loop=True)
                self.loop_body(body, path, inner)
                self.uniform_vars.discard(var)
                self.scopes.pop()
            case While(cond, body, max_trips):
                t = self.expr(cond)
                if t is not None and t is not DType.BOOL:
                    self.report("V019", f"while condition has type {t.value}, not bool")
                if type(max_trips) is not int or not 1 <= max_trips <= _U32_MAX:
                    self.report("V032", f"while loop bound {max_trips!r} is not between 1 and "
                                "2**32-1")
                self.loop_body(body, path, uniform and self.is_uniform(cond) and
                               not self.diverges(body))
            case Break() | Continue():
                if not self.loop_depth:
                    self.report("V030", f"{type(s).__name__.lower()} outside any loop")
            case Return():
                if not uniform:
                    self.diverged = True
            case Barrier():
                if not uniform or self.diverged:
                    why = "after an early return" if uniform else "under non-uniform control flow"
                    self.report("V016", f"workgroup barrier {why}")
            case Block(body):
                self.block(body, f"{path}.block", uniform)
            case _:
                self.report("V023", f"{type(s).__name__} is not a statement")

    def diverges(self, body: tuple[Stmt, ...]) -> bool:
        """Whether some invocations may leave a pass of this loop early (a return, break
        or continue under an if), so the passes after it are not uniform."""
        return leaves_early(body)

    def loop_body(self, body: tuple[Stmt, ...], path: str, uniform: bool) -> None:
        """``uniform``: the loop's passes are the same in every invocation (its bounds or
        condition, and no early leaving: ``diverges``)."""
        self.loop_depth += 1
        self.block(body, f"{path}.body", uniform)
        self.loop_depth -= 1

    def check_step(self, step: Expr) -> None:
        t = self.expr(step)
        match step:
            case Lit(DType.U32, bits) if bits >= 1:
                return
            case SpecRef(name) if t is DType.U32:
                low = self.constants[name].low
                if low is not None and low.bits >= 1:
                    return
        self.report("V031", "loop step is not a u32 literal or constant of at least 1")

    # -- expressions -------------------------------------------------------------------

    def buffer(self, name: str):
        buf = self.buffers.get(name)
        if buf is None:
            self.report("V003", f"unknown buffer {name!r}")
        return buf

    def index(self, index: Expr, buffer: str) -> None:
        """V011 once per index of a statement, naming every buffer it indexes there."""
        t = self.expr(index)
        if t is not None and t is not DType.U32:
            names = sorted({buffer, *(b for b, i in self.indexed if i == index)})
            self.report("V011", f"index of {'buffers' if len(names) > 1 else 'buffer'} "
                        f"{', '.join(map(repr, names))} has type {t.value}, not u32")

    def atomic(self, e: Atomic) -> DType | None:
        buf = self.buffer(e.buffer)
        self.index(e.index, e.buffer)
        vt = self.expr(e.value)
        ct = None if e.comparand is None else self.expr(e.comparand)
        if buf is None or vt is None or (e.comparand is not None and ct is None):
            return None
        if not buf.access.writable:
            self.report("V018", f"atomic {e.op.value} on {buf.access.value} buffer {e.buffer!r}")
            return None
        result = typerules.atomic_result(e.op, buf.dtype, vt, ct)
        if result is None:
            self.report("V017", f"atomic {e.op.value} on {buf.dtype.value} buffer {e.buffer!r} "
                        f"with value {vt.value}" + (f" and comparand {ct.value}" if ct else ""))
        return result

    def expr(self, e: Expr) -> DType | None:
        """Type of ``e``; None when it is ill-typed (already reported)."""
        match e:
            case Lit(dtype, bits):
                hi = 1 if dtype is DType.BOOL else 2**dtype.bits - 1
                if not isinstance(bits, int) or not 0 <= bits <= hi:
                    self.report("V023", f"literal bits {bits!r} out of range for {dtype.value}")
                return dtype
            case Var(name):
                t = self.lookup(name)
                if not self.declared(name) and name in self.loop_vars:
                    self.report("V036", f"loop variable {name!r} is used outside its loop")
                elif not self.declared(name):
                    self.report("V004", f"variable {name!r} is not declared")
                return t
            case SpecRef(name):
                constant = self.constants.get(name)
                if constant is None:
                    self.report("V027", f"constant {name!r} is not declared")
                    return None
                return constant.dtype if isinstance(constant.default, Lit) else None
            case Load(buffer, index):
                buf = self.buffer(buffer)
                self.index(index, buffer)
                return None if buf is None else buf.dtype
            case BufLen(buffer):
                self.buffer(buffer)
                return DType.U32
            case InvocationId(_, axis):
                if axis not in (0, 1, 2):
                    self.report("V023", f"invocation id axis {axis!r} is not 0, 1 or 2")
                return DType.U32
            case Binary(op, lhs, rhs):
                lt, rt = self.expr(lhs), self.expr(rhs)
                if lt is None or rt is None:
                    return None
                result = typerules.binop_result(op, lt, rt)
                if result is None:
                    self.report("V007", f"{op.value} is not defined for ({lt.value}, {rt.value})")
                return result
            case Unary(op, operand):
                t = self.expr(operand)
                result = None if t is None else typerules.unop_result(op, t)
                if t is not None and result is None:
                    self.report("V010", f"{op.value} is not defined for {t.value}")
                return result
            case Select(cond, if_true, if_false):
                ct, tt, ft = self.expr(cond), self.expr(if_true), self.expr(if_false)
                if ct is not None and ct is not DType.BOOL:
                    self.report("V009", f"select condition has type {ct.value}, not bool")
                if tt is not None and ft is not None and tt is not ft:
                    self.report("V009", f"select branches have types {tt.value} and {ft.value}")
                    return None
                return tt
            case Cast(dtype, value):
                t = self.expr(value)
                if t is not None and not typerules.cast_allowed(t, dtype):
                    self.report("V010", f"cast from {t.value} to {dtype.value} is not defined "
                                "(compare explicitly, e.g. x != 0.0)")
                return dtype
            case Bitcast(dtype, value):
                t = self.expr(value)
                if t is not None and not typerules.bitcast_allowed(t, dtype):
                    self.report("V037", f"bitcast from {t.value} ({t.bits} bit) to "
                                f"{dtype.value} ({dtype.bits} bit)")
                return dtype
            case Table(dtype, bits, index):
                t = self.expr(index)
                if t is not None and t is not DType.U32:
                    self.report("V038", f"table index has type {t.value}, not u32")
                if dtype is DType.BOOL or not 1 <= len(bits) <= MAX_TABLE:
                    self.report("V038", f"table of {len(bits)} {dtype.value} values")
                elif any(not 0 <= b < 1 << dtype.bits for b in bits):
                    self.report("V038", f"table value bits out of the {dtype.bits}-bit range")
                return dtype
            case Fma(a, b, c):
                ts = (self.expr(a), self.expr(b), self.expr(c))
                if None in ts:
                    return None
                result = typerules.fma_result(*ts)
                if result is None:
                    self.report("V010", "fma needs three operands of one float type, got "
                                + ", ".join(t.value for t in ts))
                return result
            case Subgroup(op, size, value, lane):
                ts = (None if value is None else self.expr(value),
                      None if lane is None else self.expr(lane))
                if (value is not None and ts[0] is None) or (lane is not None and ts[1] is None):
                    return None
                self.subgroup_sizes.add(size)
                self.ballots |= op is SubgroupOp.BALLOT
                result = typerules.subgroup_result(op, *ts)
                if result is None:
                    given = ", ".join(t.value if t else "nothing" for t in ts)
                    self.report("V010", f"subgroup {op.value} is not defined for ({given})")
                return result
            case Atomic():
                self.report("V022", f"atomic {e.op.value} used inside an expression")
                return self.atomic(e)
        self.report("V023", f"{type(e).__name__} is not an expression")
        return None

    def is_uniform(self, e: Expr) -> bool:
        return is_uniform(e, self.uniform_vars, self.buffers)
