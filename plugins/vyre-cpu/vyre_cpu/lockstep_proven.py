"""The proven version of a kernel with workgroup memory or barriers (issue 39, item 2):
the lockstep workgroup function written a second time on the assumptions ``Ranges``
makes (every access inside its buffer, no ``u32``/``i32`` index arithmetic that wraps,
a guard that holds in every lane), checked for each workgroup before it runs; where one
fails that workgroup runs the lockstep code as before (``codegen._Writer.write_lockstep``):
the workgroups a ragged edge of the grid falls in, or all of them.

It is written the way PoCL and Intel's OpenCL CPU runtime write work-group loops, so
that LLVM's loop vectoriser sees them:

- each stretch between barriers runs in loops over the lanes' z, y and x, x innermost,
  whose trip counts LLVM cannot see as constants (``_EXTENT``): a constant 16-trip loop
  is unrolled before the vectoriser runs, which then vectorises the loop around it, the
  wrong axis (a gather and a scatter per access: matmul's tile loop took 69 ms, not 4);
- ids are 64-bit lane coordinates (``wx * 16 + lx``), and a ``let`` of ids, literals and
  values the dispatch shares is not a lane array but its expression, at every use
  (``rematerialized``): ``a[row, t * 16 + lx]`` is consecutive in ``lx``, where a lane
  array's load hid that;
- a ``let`` read only in its own stretch is a plain variable of the lane loop's body,
  not a lane array (``_private``);
- accesses proven inside their buffers (workgroup buffers included: their length is the
  program's) are unchecked, their index arithmetic in 64 bits.

Every lane still runs its statements in the same order, lanes in the same order, and
every operation is the same runtime helper: the bytes are those of the lockstep code."""

from __future__ import annotations

import re
from collections import Counter

from vyre_core.ir import Program
from vyre_core.ir.dtypes import DType
from vyre_core.ir.nodes import (
    Access,
    Assign,
    Atomic,
    Binary,
    BinOp,
    Bitcast,
    Block,
    BufLen,
    Cast,
    Expr,
    IdKind,
    If,
    InvocationId,
    Let,
    Lit,
    Load,
    Loop,
    Select,
    Stmt,
    Store,
    Subgroup,
    Table,
    Unary,
    Var,
    While,
    walk,
)
from vyre_core.ir.rewrite import transform
from vyre_cpu.codegen import _Writer
from vyre_cpu.ranges import INTS, Range, Ranges
from vyre_cpu.writing import Kernel, check

#: A lane-loop extent LLVM cannot fold to a constant (``stop``, the cancel words, is
#: never empty): the loop stays a loop, and the vectoriser takes the innermost one.
_EXTENT = "    e{axis} = np.int64({size}) if stop.shape[0] else np.int64(0)"
#: A let whose value has more nodes than this stays a variable (its expression, copied
#: to every use, would cost more than the lane array it saves).
_REMAT_NODES = 16
#: An assumption made only of numbers: decided now, not at dispatch.
_CONSTANT = re.compile(r"^[0-9.e+\-*/<>=() ]+$")


def needs(program: Program) -> bool:
    """Whether this module writes a proven version for ``program`` (one with workgroup
    memory or barriers): not where it has subgroup operations (their lockstep reads the
    operands' lane arrays by name, which a plain variable would not have)."""
    return not any(isinstance(n, Subgroup) for n in walk(program.body))


def write(program: Program, fallback: _Writer, kernel: Kernel) -> Kernel:
    """``kernel`` (``fallback``'s lockstep source of ``program``) with a proven
    workgroup function beside its own: ``kernel`` runs it for each workgroup whose
    assumptions hold (checked before it starts: a few comparisons against its hundreds
    of lanes) and returns whether any did not; ``fallback`` runs the lockstep workgroup
    for those (compiled only when a launch first needs it: ``compiler.Compiled``).
    ``kernel`` itself where the proven version would remove nothing."""
    writer = _ProvenWriter(rematerialized(program), fallback)
    proven = writer.write_proven()
    if proven is None:
        return kernel
    function, entry, args, consts = proven
    head, sep, rest = kernel.source.partition(
        "\n\n\n@njit(cache=True, nogil=True)\ndef workgroup(")
    at = rest.index("\n\n\n@njit(cache=True, nogil=True, parallel=")
    own, checked = rest[:at], rest[at:].rstrip("\n")
    call = re.search(r"^        workgroup\(wx, wy, wz, (.*)\)$", checked, re.M)
    before, after = checked[:call.start()], checked[call.end():]
    check = "".join(f"    {line}\n" for line in entry)
    runs = (before.replace("\n    for wg in ", "\n    left = 0\n    for wg in ", 1) + check +
            f"        if proven:\n            workgroup_proven(wx, wy, wz, {args})\n"
            f"        else:\n            left += 1{after}\n    return left > 0")
    falls = (before.replace("\ndef kernel(", "\ndef fallback(", 1) + check +
             f"        if not proven:\n    {call.group(0)}{after}")
    return Kernel("\n".join([head, *consts]) + f"\n\n\n{function}" + sep + own + runs +
                  falls + "\n")


class _GroupRanges(Ranges):
    """``Ranges`` with what a workgroup's loops need: a quotient by a positive literal
    (a tile count, ``(k + 15) // 16``), and a select whose condition is not known in
    every lane as the union of its branches' ranges. An assumption made only of numbers
    that is false (``15 < 8``: a guard that fails in some lanes of every dispatch) is
    not made, nor any of a condition not decided: the select stays."""

    def _of(self, e: Expr) -> Range | None:
        match e:
            case Binary(BinOp.DIV, lhs, Lit(dtype, bits)) if dtype in INTS and \
                    dtype.from_bits(bits) > 0 and self.typeof(e) in INTS:
                found = self.of(lhs)
                if found is None:
                    return None
                c = float(dtype.from_bits(bits))  # (truncates toward 0: monotone)
                return self.named((f"np.trunc({found[0]} / {c!r})",
                                   f"np.trunc({found[1]} / {c!r})"))
            case Select(cond, if_true, if_false):
                taken = self.decide(cond)
                if taken is not None:
                    return self.of(if_true)
                a, b = self.of(if_true), self.of(if_false)
                if a is None or b is None:
                    return None
                return self.named((f"min2({a[0]}, {b[0]})", f"max2({a[1]}, {b[1]})"))
        return super()._of(e)

    def id_range(self, kind: IdKind, axis: int) -> Range:
        """Ids of the workgroup being run: the check is made per workgroup, so those
        inside every buffer run the proven version and the one a buffer ends in, the
        lockstep code."""
        if kind is IdKind.LOCAL:
            return super().id_range(kind, axis)
        size, group = self.workgroup[axis], f"w{'xyz'[axis]}"
        if kind is IdKind.WORKGROUP:
            return (f"np.float64({group})",) * 2
        return f"np.float64({group} * {size})", f"np.float64({group} * {size} + {size - 1})"

    def decide(self, cond: Expr) -> bool | None:
        before = dict(self.assumptions)
        taken = super().decide(cond)
        if not taken or any(_constant(a) is False for a in self.assumptions
                            if a not in before):
            self.assumptions = before  # (nor what a part of an undecided ``and`` assumed)
            return None
        return taken


class _ProvenWriter(_Writer):
    """The lockstep writer with ranges followed (``_GroupRanges``), lanes in nested
    loops, ids in 64 bits, and private lets as plain variables. It continues
    ``fallback``'s names and constants, so both functions share one module."""

    def __init__(self, program: Program, fallback: _Writer) -> None:
        super().__init__(program)
        self.names = fallback.names
        self.consts = list(fallback.consts)
        self.inherited = len(fallback.consts)
        self.entry_values = dict(fallback.entry_values)  # (computed at entry already)
        self.nested = False          # writing a stretch's lane loops (ids from lx, ly, lz)
        self.private: set[str] = set()   # IR lets of the stretch being written, plain
        self.locals: set[str] = set()    # their kernel names
        self.uses = Counter(_names(program.body))

    def write_proven(self) -> tuple[str, list[str], str, list[str]] | None:
        """The proven workgroup function, the lines each workgroup runs before it (its
        values and the ``proven`` check), the function's arguments after the ids, and
        the constants it adds; None where it removes no check and no wrapping operation."""
        self.ranges = _GroupRanges(self.program.workgroup, self.typeof, self.range_name,
                                   self.range_invariant, self.range_length, self.range_bound)
        try:
            source = self.write_lockstep().source
            assumptions = list(self.ranges.assumptions)
        finally:
            self.ranges = None
        if not self.gains or any(_constant(a) is False for a in assumptions):
            return None  # (nothing gained, or never true)
        assumptions = [a for a in assumptions if _constant(a) is None]
        for x, size in zip("xyz", self.program.workgroup, strict=True):  # (native ids)
            assumptions.append(f"np.float64(g{x}) * {size} <= 4294967296.0")
        start = source.index("@njit(cache=True, nogil=True)\ndef workgroup(")
        end = source.index("\n\n\n@njit(cache=True, nogil=True, parallel=")
        function = source[start:end].replace("def workgroup(", "def workgroup_proven(", 1)
        header, body = function.split(":\n", 1)
        extents = [_EXTENT.format(axis="xyz"[a], size=size)
                   for a, size in enumerate(self.program.workgroup)]
        function = "\n".join([f"{header}:", *extents, body])
        args = header[header.index("stop"):-1]
        entry = [*self.entry, check(assumptions)]
        return function, entry, args, self.consts[self.inherited:]

    # -- lanes -----------------------------------------------------------------------------

    def run_stretch(self, stmts: list[Stmt], depth: int) -> None:
        """The stretch in loops over the lanes' z, y, x (x innermost; ``l`` the lane's
        index, the same order as one loop over ``l``), its private lets plain."""
        if not stmts:
            return
        lanes = self.program.workgroup[0] * self.program.workgroup[1] * \
            self.program.workgroup[2]
        start = len(self.lines)
        outer_private, self.private = self.private, _private(stmts, self.uses)
        self.nested = True
        try:
            super().run_stretch(stmts, depth)
        finally:
            self.nested, self.private = False, outer_private
        pad = "    " * depth
        header = self.lines.index(f"{pad}for l in range({lanes}):", start)
        axes = [a for a in (2, 1, 0) if self.program.workgroup[a] > 1 or a == 0]
        loops = [f"{pad}{'    ' * i}for l{'xyz'[a]} in range(e{'xyz'[a]}):"
                 for i, a in enumerate(axes)]
        index = "lx"
        if self.program.workgroup[1] > 1:
            index = f"ly * ex + {index}"
        if self.program.workgroup[2] > 1:
            index = f"lz * ex * ey + {index}"
        deeper = "    " * (len(axes) - 1)
        self.lines[header:header + 1] = [
            *loops, f"{pad}    {deeper}l = np.uint64({index})"]
        at = header + len(loops) + 1
        self.lines[at:] = [deeper + line for line in self.lines[at:]]

    def lane_id(self, kind: IdKind, axis: int) -> str:
        """In a stretch's lane loops: the id from the lane's coordinates, in 64 bits."""
        if not self.nested:
            return super().lane_id(kind, axis)
        size = self.program.workgroup[axis]
        local = f"l{'xyz'[axis]}" if size > 1 or axis == 0 else "np.int64(0)"
        group = f"w{'xyz'[axis]}"
        return {IdKind.GLOBAL: f"({group} * {size} + {local})", IdKind.LOCAL: local,
                IdKind.WORKGROUP: group}[kind]

    def block_loop(self, name: str, start: Expr, end: Expr) -> None:
        """A loop run once per workgroup: its variable lies between its bounds in its body
        (a ranges scope the caller closes while there are ranges: ``_Writer.uniform``)."""
        if self.ranges:
            self.ranges.push()
            self.loop_range_of(name, start, end)

    def lane(self, py: str) -> str:
        return py if py in self.locals else super().lane(py)

    def stmt(self, s: Stmt, depth: int) -> None:
        """A private let is a plain variable of the lane loop's body (computed in every
        lane that runs the stretch: a value, never a guarded effect)."""
        if not (isinstance(s, Let) and s.name in self.private):
            super().stmt(s, depth)
            return
        self.at = depth
        code, dtype = self.expr(s.value)
        py = self.fresh(s.name)
        self.locals.add(py)
        if self.is_uniform(s.value) and s.name not in self.assigned:
            self.uniform_vars.add(s.name)
        else:
            self.uniform_vars.discard(s.name)
        self.emit(depth, f"{py} = {code}")
        self.scopes[-1][s.name] = (py, dtype)
        if dtype in INTS and s.name not in self.assigned:
            self.ranges.let(py, s.value)

    def _expr(self, e: Expr) -> tuple[str, DType]:
        """A select of any type whose condition holds in every lane is its first branch;
        otherwise each branch is written knowing its side of the condition."""
        if not isinstance(e, Select) or not self.ranges:
            return super()._expr(e)
        if self.ranges.decide(e.cond):
            self.gains += 1
            return self.expr(e.if_true)
        c, _ = self.expr(e.cond)
        branches = []
        for branch, truth in ((e.if_true, True), (e.if_false, False)):
            self.ranges.push()
            self.ranges.refine(e.cond, truth)
            try:
                branches.append(self.expr(branch))
            finally:
                self.ranges.pop()
        (a, t), (b, _) = branches
        return f"({a} if {c} else {b})", t

    def entry_value(self, e: Expr) -> tuple[str, DType]:
        """Computed before the ``proven`` check: with every access checked."""
        ranges, self.ranges = self.ranges, None
        try:
            return super().entry_value(e)
        finally:
            self.ranges = ranges

    def range_length(self, buffer: str) -> str | None:
        """A workgroup buffer's length is the program's own."""
        b = self.buffers[buffer]
        if b.access is Access.WORKGROUP and b.dtype not in (DType.BOOL, DType.F16):
            return repr(float(b.count))
        return super().range_length(buffer)


def _constant(assumption: str) -> bool | None:
    """An assumption made only of numbers, decided now (None: known at dispatch)."""
    if not _CONSTANT.match(assumption):
        return None
    return bool(eval(assumption))  # (numbers and operators only: nothing to call)


def _names(stmts: tuple[Stmt, ...]) -> list[str]:
    """Every declaration, read and assignment of a variable in ``stmts``, by name."""
    return [n.name for n in walk(stmts) if isinstance(n, Var | Let | Assign)]


def _private(stmts: list[Stmt], uses: Counter[str]) -> set[str]:
    """The lets of ``stmts`` that nothing outside them declares, reads or assigns (a name
    the program lacks is the writer's own, made for these statements: an unrolled pass's
    copy of a let)."""
    inside = Counter(_names(tuple(stmts)))
    return {n.name for n in walk(tuple(stmts))
            if isinstance(n, Let) and uses.get(n.name, inside[n.name]) == inside[n.name]}


def rematerialized(program: Program) -> Program:
    """``program`` with each let never assigned whose value is made of invocation ids,
    literals, buffer lengths and loads at literal indices of buffers it never writes
    (``col = global_id(0)``, ``m = a.shape[0]``) replaced by that value at every use: a
    pure value of the lane, the same wherever it is computed."""
    assigned = {n.name for n in walk(program.body) if isinstance(n, Assign)}
    written = {n.buffer for n in walk(program.body) if isinstance(n, Atomic | Store)}
    fixed = {b.name for b in program.buffers if b.access is not Access.WORKGROUP} - written

    def lane_value(e: Expr) -> bool:
        nodes = list(walk((e,)))
        return len(nodes) <= _REMAT_NODES and all(
            isinstance(n, Lit | InvocationId | BufLen | Binary | Unary | Cast | Bitcast |
                       Table | Select) or
            (isinstance(n, Load) and n.buffer in fixed and isinstance(n.index, Lit))
            for n in nodes)

    def block(stmts: tuple[Stmt, ...], env: dict[str, Expr]) -> tuple[Stmt, ...]:
        env = dict(env)
        out: list[Stmt] = []
        for s in stmts:
            s = transform(s, lambda n: env.get(n.name, n) if isinstance(n, Var) else n) \
                if env and not _has_body(s) else _inner(s, env)
            if isinstance(s, Let):
                if s.name not in assigned and lane_value(s.value):
                    env[s.name] = s.value
                    continue
                env.pop(s.name, None)
            out.append(s)
        return tuple(out)

    def _inner(s: Stmt, env: dict[str, Expr]) -> Stmt:
        """A statement with a body: its own expressions substituted, its bodies as
        blocks (a loop's variable hides a let of its name)."""
        def sub(e: Expr) -> Expr:
            return transform(e, lambda n: env.get(n.name, n) if isinstance(n, Var) else n) \
                if env else e
        match s:
            case If(cond, then, orelse):
                return If(sub(cond), block(then, env), block(orelse, env))
            case Loop(var, start, end, body, step):
                inner = {k: v for k, v in env.items() if k != var}
                return Loop(var, sub(start), sub(end), block(body, inner), step)
            case While(cond, body, max_trips):
                return While(sub(cond), block(body, env), max_trips)
            case Block(body):
                return Block(block(body, env))
        return transform(s, lambda n: env.get(n.name, n) if isinstance(n, Var) else n) \
            if env else s

    return Program(program.buffers, program.workgroup, block(program.body, {}))


def _has_body(s: Stmt) -> bool:
    return isinstance(s, If | Loop | While | Block)
