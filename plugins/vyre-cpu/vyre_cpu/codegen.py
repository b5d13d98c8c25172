"""A Program as the Python source of a numba kernel: one function per invocation, inlined
into loops over every invocation of every workgroup, workgroups in parallel (``prange``)
unless the program has atomics on storage buffers (then in turn: numba has no atomic
memory operations, and the final memory of an atomic is only defined when they apply one
at a time). A program with workgroup memory or barriers runs in lockstep per workgroup
instead (``write_lockstep``): each stretch between barriers, written inline, for every
live lane in turn. Pure text: this module neither imports numba nor compiles anything.

Every operation is a call into ``runtime.py``, which keeps the IR's semantics exactly;
values keep their IR type (np.uint32, np.int32, np.float32, np.float64, bool; an f16
value is the f32 that holds it exactly, rounded to binary16 after every operation) at
every step. A type this backend does not know is refused here, before anything is
compiled, with the reason routing shows."""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, fields, replace
from typing import NamedTuple

from vyre_core.errors import UnsupportedFeatureError
from vyre_core.ir import Program
from vyre_core.ir.dtypes import DType
from vyre_core.ir.exprtypes import type_of
from vyre_core.ir.nodes import (
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
    Stmt,
    Store,
    Subgroup,
    SubgroupOp,
    Table,
    Unary,
    UnOp,
    Var,
    While,
    children,
    loop_jumps,
    walk,
)
from vyre_core.ir.rewrite import transform
from vyre_core.ir.typerules import binop_result, subgroup_result, unop_result
from vyre_core.ir.uniformity import is_uniform
from vyre_core.mathlib.library import OPERATIONS, functions
from vyre_cpu import blocks, mathlib
from vyre_cpu.ranges import INTS, Ranges

#: The types this backend computes in. numba has no binary16: f16 buffers are passed as
#: their 16-bit words, and f16 values are carried as the f32 that holds each exactly.
DTYPES = tuple(DType)
_NP = {DType.U32: "np.uint32", DType.I32: "np.int32", DType.F32: "np.float32",
       DType.F64: "np.float64", DType.F16: "np.float32", DType.U8: "np.uint8",
       DType.U16: "np.uint16", DType.I8: "np.int8", DType.I16: "np.int16",
       DType.U64: "np.uint64", DType.I64: "np.int64"}
_SUFFIX = {DType.U32: "u32", DType.I32: "i32", DType.F32: "f32", DType.F64: "f64",
           DType.F16: "f16", DType.U64: "u64", DType.I64: "i64"}
#: 8- and 16-bit integers, computed by runtime's ``small_*`` in i64 and cast back
_SMALL = (DType.U8, DType.U16, DType.I8, DType.I16)
#: 64-bit integer ops numba's own arithmetic does (wrapping)
_NATIVE_64 = {BinOp.ADD: "+", BinOp.SUB: "-", BinOp.MUL: "*"}
_UNARY_INT = {UnOp.NEG: "neg", UnOp.BIT_NOT: "not", UnOp.ABS: "abs", UnOp.POPCOUNT: "popcount",
              UnOp.CLZ: "clz", UnOp.CTZ: "ctz", UnOp.BIT_REVERSE: "bit_reverse"}
_ATOMIC_CODE = {AtomicOp.ADD: 0, AtomicOp.SUB: 1, AtomicOp.MIN: 2, AtomicOp.MAX: 3,
                AtomicOp.AND: 4, AtomicOp.OR: 5, AtomicOp.XOR: 6, AtomicOp.EXCHANGE: 7,
                AtomicOp.COMPARE_EXCHANGE: 8}
_COMPARE = {BinOp.EQ: "==", BinOp.NE: "!=", BinOp.LT: "<", BinOp.LE: "<=", BinOp.GT: ">",
            BinOp.GE: ">="}
#: The ``op`` code of ``runtime.subgroup_reduce``.
_SUBGROUP_REDUCE = {SubgroupOp.ADD: 0, SubgroupOp.MIN: 1, SubgroupOp.MAX: 2,
                    SubgroupOp.AND: 3, SubgroupOp.OR: 4, SubgroupOp.XOR: 5}
#: A plain program with a loop whose bounds are the same in every lane may run in lockstep
#: when its workgroup has at least this many lanes: the loop runs once for the
#: workgroup, each statement in it over the lanes (independent work the core overlaps,
#: where one lane's loop is a chain of dependent steps), instead of once per lane
#: (``_Writer.workgroup_level`` says which loops).
HOIST_LANES = 32
#: The ids one task of a proven kernel runs along its inner axis (``flat_loops``).
CHUNK = 1024
#: Every this many levels of an expression, a subexpression is written as a variable.
HOIST_EVERY = 48
#: The float unary ops runtime computes (in f64, rounded once to a narrower type); the
#: math library's (``exp`` ..., every type) never reach it: written out or helper calls.
_FLOAT_FN = {UnOp.SQRT: "sqrt", UnOp.FLOOR: "floor", UnOp.CEIL: "ceil", UnOp.ROUND: "round",
             UnOp.TRUNC: "trunc"}


class Proven(NamedTuple):
    """(Proven.) One invocation's lines written on ``Ranges``' assumptions, and where the
    flat loop over x stops (``flat_bound``'s value; None: at the grid's end)."""

    lines: list[str]
    stop_at: str | None


@dataclass(frozen=True)
class Kernel:
    """The generated source of a program's kernel."""

    source: str


#: How often (passes) a loop looks whether its call was cancelled (a power of two).
STOP_EVERY = 1024
#: The workgroup loop's safe point: a cancelled call runs no further workgroup.
_STOP_WORKGROUP = ("        if stopped(stop):", "            continue")


def refusal(program: Program) -> str | None:
    """Why this backend cannot run ``program`` (None: it can)."""
    for b in program.buffers:
        if b.dtype not in DTYPES:
            return f"buffer {b.name!r} is {b.dtype.value}, which the cpu backend does not run"
    for node in walk(program.body):
        if isinstance(node, Lit | Cast | Bitcast | Table) and node.dtype not in DTYPES:
            return f"a {node.dtype.value} value, which the cpu backend does not run"
    return None


def generate(program: Program) -> Kernel:
    """The kernel source of ``program`` (validated); UnsupportedFeatureError if refused."""
    why = refusal(program)
    if why is not None:
        raise UnsupportedFeatureError(f"the cpu backend cannot run this program: {why}",
                                      "Let routing pick another backend (omit backend=).")
    program = _subgroups_as_lets(mathlib.written_out_where_few(program))
    if not _needs_lockstep(program) and math.prod(program.workgroup) >= HOIST_LANES and \
            any(isinstance(n, Loop) for n in walk(program.body)):
        hoisting = _Writer(program, hoist=True)
        kernel = hoisting.write()
        if hoisting.hoisted:
            return _with_serial_twins(kernel)
    writer = _Writer(program)
    kernel = writer.write()
    if _needs_lockstep(program):
        from vyre_cpu import lockstep_proven  # (built on _Writer: imported once it exists)

        if lockstep_proven.needs(program):
            kernel = lockstep_proven.write(program, writer, kernel)
    return _with_serial_twins(kernel)


#: The lines every kernel module starts with.
HEAD = ("# generated by vyre_cpu.codegen: do not edit", "import numpy as np",
         "from numba import njit, prange", "from vyre_cpu.runtime import *  # noqa: F403")
#: A parallel function's head, as the writers write it (``_function``).
_PARALLEL = re.compile(r"^@njit\(cache=True, nogil=True, parallel=True\)\ndef (\w+)\(")
#: A proven kernel's first lines after its entry: where an assumption fails it runs
#: nothing and says so (``fallback`` runs the launch instead).
_UNPROVEN = ("    if not proven:", "        return True")


def _function(name: str, parallel: bool, args: str, body: list[str]) -> list[str]:
    """A kernel function of the module (the grid, the stop words, then ``args``)."""
    return ["", "", f"@njit(cache=True, nogil=True, parallel={parallel})",
            f"def {name}(gx, gy, gz, stop, {args}):", *body]


def check(assumptions: list[str]) -> str:
    """The line that checks a proven version's ``assumptions`` (``&``, not ``and``: one
    block of comparisons, where a chain of ``and`` is a branch each, and numba's compile
    time grows with the blocks)."""
    return f"    proven = {' & '.join(f'({a})' for a in assumptions)}"


def _read(entry: list[str], body: list[str]) -> list[str]:
    """The lines of ``entry`` (assignments, one a line) that ``body`` reads, directly or
    through another: the fallback's share of its proven kernel's entry, without the
    ranges and the check, which would only cost their compile."""
    text, kept = "\n".join(body), []
    for line in reversed(entry):
        name = line.split("=", 1)[0].strip()
        if re.search(rf"\b{re.escape(name)}\b", text):
            kept.append(line)
            text += "\n" + line
    return kept[::-1]


def _with_serial_twins(kernel: Kernel) -> Kernel:
    """``kernel`` with ``NAME_serial`` beside each parallel function ``NAME``: the same
    function, its workgroups in turn on the calling thread (``range`` for ``prange``),
    for a launch too small to gain from threads (``vyre_cpu.threads.parallel_worth``).
    numba compiles each separately, when first asked for (``compiler.compiled``). A
    kernel that runs its workgroups in turn has no twin."""
    source = kernel.source.rstrip()
    twins = []
    for function in source.split("\n\n\n"):
        found = _PARALLEL.match(function)
        if found:
            twins.append(function.replace(
                found.group(0), f"@njit(cache=True, nogil=True)\ndef {found.group(1)}_serial(",
                1).replace(" in prange(", " in range("))
    return Kernel("\n\n\n".join([source, *twins]) + "\n")


class _Writer:
    def __init__(self, program: Program, hoist: bool = False) -> None:
        self.program = program
        self.buffers = {b.name: b for b in program.buffers}
        self.arg = {b.name: f"b{i}" for i, b in enumerate(program.buffers)}
        self.consts: list[str] = []
        self.lines: list[str] = []
        self.scopes: list[dict[str, tuple[str, DType]]] = [{}]
        self.names = 0
        self.ids: set[tuple[IdKind, int]] = set()
        self.at = 1       # the indentation of the statement being written
        self.nesting = 0  # how deep in an expression the writer is
        # lockstep: the program has workgroup memory or barriers (or ``hoist``: loops to
        # run once per workgroup), so a workgroup's lanes run each stretch in turn, their
        # variables kept in arrays
        self.lockstep = hoist or _needs_lockstep(program)
        self.arrays: list[tuple[str, DType]] = []  # (lockstep) each variable's lane array
        self.scalars: set[str] = set()   # (lockstep) uniform loop variables: one value
        self.uniform_vars: set[str] = set()  # (lockstep) IR variables the same in all lanes
        self.assigned = {n.name for n in walk(program.body) if isinstance(n, Assign)}
        self.returns = any(isinstance(n, Return) for n in walk(program.body))
        self.mask: str | None = None     # (lockstep) the lanes the current branch runs on
        self.selecting: str | None = None  # (lockstep) the guard lets and assigns select on
        self.hoisted = 0                 # (lockstep) loops run once for the workgroup
        # values the whole dispatch shares, computed once before the workgroups start
        # (``entry_value``, ``divisor``): their lines, and each value's variable and type
        self.entry: list[str] = []
        self.entry_values: dict[Expr | tuple[str, Expr], tuple[str, DType]] = {}
        self.at_entry = False
        self.written = {n.buffer for n in walk(program.body) if isinstance(n, Store | Atomic)}
        # (plain) variables that hold the global x id; buffers read or written at it
        # (``at_gid``); whether the version being written is the one for workgroups whose
        # ids all lie inside those buffers
        self.gid_vars: set[str] = set()
        # (lockstep) the loads of the stretch being written that need no lane, read
        # before its lane loop (``stretch_value``), by load
        self.before_stretch: list[str] | None = None
        self.stretch_names: dict[Load, str] = {}
        self.direct: set[str] = set()
        self.in_bounds = False
        # whether loops look at the stop words (a math helper has none: the library's
        # loops are short and of fixed length)
        self.cancellable = True
        # (plain) the ranges of the version written with its indices proven (``proven``);
        # None while another version is written
        self.ranges: Ranges | None = None
        self.bounds: dict[str, str] = {}  # (proven) the bounds named at entry, by source
        self.gains = 0  # (proven) what it does that the other versions do not
        # (lockstep, proven: ``in_blocks``) the id axis a block's lanes run along, None while
        # another version is written; the lets written as their code, by kernel name
        self.along: int | None = None
        self.inline: dict[str, str] = {}

    # -- the module ------------------------------------------------------------------------

    def write(self) -> Kernel:
        """Every invocation written inline in the loops over the workgroup's lanes (an
        inlined function per invocation kept its arrays' reference counts: 40 ns per
        invocation where workgroups run in turn). Where the program reads or writes
        buffers at the global x id, a workgroup whose ids all lie inside them runs a
        version without those bounds checks (``at_gid``); where no proven version is
        written, the kernel is that version alone for a dispatch whose every workgroup is
        such a one (``all_inside``), and the split one its ``fallback``."""
        if self.lockstep:
            return self.write_lockstep()
        wx = self.program.workgroup[0]
        checked = self.invocation(5)
        parallel = not any(isinstance(n, Atomic) for n in walk(self.program.body))
        proven = self.proven(3) if parallel else None
        fast = None
        if self.direct:
            self.in_bounds = True
            fast = self.invocation(5)
            inside = " and ".join(f"(wx + 1) * {wx} <= {self.arg[b]}.shape[0]"
                                  for b in sorted(self.direct))
            loops = [f"        if {inside}:", *self.lane_loops(3, ["    " + c for c in fast]),
                     "        else:", *self.lane_loops(3, ["    " + c for c in checked])]
        else:
            loops = self.lane_loops(2, checked)
        args = ", ".join(self.arg[b.name] for b in self.program.buffers)
        own = ["    per_plane = gx * gy", *self.workgroups(loops, parallel)]
        if proven is None and fast is not None:
            # (every workgroup inside: the kernel without checks, the split one compiled
            # only for a dispatch that has one outside; most never do)
            body = [*self.all_inside(), *_UNPROVEN, "    per_plane = gx * gy",
                    *self.workgroups(self.lane_loops(2, fast), parallel), "    return False"]
            functions = [*_function("kernel", parallel, args, [*_read(self.entry, body), *body]),
                         *_function("fallback", parallel, args, [*_read(self.entry, own), *own])]
        elif proven is None:
            functions = _function("kernel", parallel, args, [*self.entry, *own])
        else:
            functions = [*_function("kernel", True, args, [
                *self.entry, *_UNPROVEN, *self.flat_loops(proven), "    return False"]),
                *_function("fallback", True, args, [*_read(self.entry, own), *own])]
        return Kernel("\n".join([*HEAD, *self.consts, *functions, ""]))

    def all_inside(self) -> list[str]:
        """(Plain.) The lines that set ``proven``: whether the ids of every workgroup lie
        inside the buffers read or written at the global x id (``direct``), as far as
        invocations reach them (``reach``): those whose id is the launch's bound
        (``launch_bound``) or past it run nothing."""
        reach = f"np.int64(gx) * {self.program.workgroup[0]}"
        bound = launch_bound(self.program.body)
        if bound is not None and self.invariant(bound):
            reach = f"min2({reach}, np.int64({self.entry_value(bound)[0]}))"
        return [f"    reach = {reach}",
                check([f"reach <= {self.arg[b]}.shape[0]" for b in sorted(self.direct)])]

    @staticmethod
    def workgroups(loops: list[str], parallel: bool) -> list[str]:
        """(Plain.) The loop over the workgroups, each running ``loops``."""
        return [f"    for wg in {'prange' if parallel else 'range'}(gx * gy * gz):",
                *_STOP_WORKGROUP,
                "        wz = wg // per_plane",
                "        wy = (wg - wz * per_plane) // gx",
                "        wx = wg - wz * per_plane - wy * gx",
                *loops]

    def invocation(self, depth: int, body: tuple[Stmt, ...] | None = None) -> list[str]:
        """(Plain.) The lines of one invocation: of the program's body, or ``body`` (the
        proven flat loop's, past the launch guard it stops at). A ``return`` leaves a
        one-pass loop around it by ``break``, and every loop it is in (``returned``)."""
        body = self.program.body if body is None else body
        returns, self.returns = self.returns, any(isinstance(n, Return) for n in walk(body))
        self.lines = []
        try:
            if self.returns:
                self.emit(depth, "returned = False")
                self.emit(depth, "for _once in range(1):")
                depth += 1
            self.block(body, depth)
        finally:
            self.returns = returns
        return self.lines

    def lane_loops(self, depth: int, body: list[str]) -> list[str]:
        """(Plain.) The loops over a workgroup's lanes, x fastest, around ``body``."""
        wx, wy, wz = self.program.workgroup
        ids = []
        for kind, axis in sorted(self.ids, key=lambda k: (k[0].value, k[1])):
            group, local, size = f"w{'xyz'[axis]}", f"l{'xyz'[axis]}", (wx, wy, wz)[axis]
            value = {IdKind.GLOBAL: f"{group} * {size} + {local}", IdKind.LOCAL: local,
                     IdKind.WORKGROUP: group}[kind]
            ids.append(f"{'    ' * (depth + 3)}{_id_name(kind, axis)} = np.uint32({value})")
        pad = "    " * depth
        return [f"{pad}for lz in range({wz}):", f"{pad}    for ly in range({wy}):",
                f"{pad}        for lx in range({wx}):", *ids, *body]

    def flat_loops(self, proven: Proven) -> list[str]:
        """(Proven.) The invocations of the whole grid, where its assumptions hold: rows
        of one id axis in parallel, in chunks (task ``wg``), each a loop over that axis's
        global ids (``inner_axis``: the one the program's accesses step along), with
        ``proven``'s lines inside, stopping where it says. Invocations of a program
        without barriers, workgroup memory, subgroups or atomics are independent, so any
        order gives the same memory (semantics.md: racing stores keep an unspecified
        one). One long loop of consecutive ids, the ids 64-bit integers, is what LLVM's
        vectoriser takes (it leaves a loop of 8 lanes that needs alias checks: "tiny trip
        count")."""
        inner = self.inner_axis()
        a, b = (axis for axis in range(3) if axis != inner)
        extent = [f"(g{x} * {size})" for x, size in zip("xyz", self.program.workgroup,
                                                         strict=True)]
        if proven.stop_at is not None:  # (``flat_bound``: x is the inner axis)
            extent[0] = f"min2({extent[0]}, np.int64({proven.stop_at}))"
        ids = []
        for kind, axis in sorted(self.ids, key=lambda k: (k[0].value, k[1])):
            size = self.program.workgroup[axis]
            value = {IdKind.GLOBAL: None, IdKind.LOCAL: f"GID{axis} % {size}",
                     IdKind.WORKGROUP: f"GID{axis} // {size}"}[kind]
            if value is not None:
                ids.append(f"            {_id_name(kind, axis)} = {value}")
        return [
            f"    chunks = ({extent[inner]} + {CHUNK - 1}) // {CHUNK}",
            f"    for wg in prange({extent[a]} * {extent[b]} * chunks):", *_STOP_WORKGROUP,
            "        row = wg // chunks",
            f"        first = (wg - row * chunks) * {CHUNK}",
            f"        GID{a} = row % {extent[a]}",
            f"        GID{b} = row // {extent[a]}",
            f"        for gi in range(first, min2(first + {CHUNK}, {extent[inner]})):",
            f"            GID{inner} = gi",
            *ids, *proven.lines]

    def inner_axis(self) -> int:
        """The id axis most accesses step along by one: the global id added last in
        their index (``a[i, j]`` is ``i * n + j``: j's axis), through casts and the
        variables that hold it; x where none is."""
        lets = {n.name: n.value for n in walk(self.program.body)
                if isinstance(n, Let) and n.name not in self.assigned}
        votes = [0, 0, 0]
        for n in walk(self.program.body):
            if isinstance(n, Load | Store):
                index = n.index
                while isinstance(index, Select):  # (a row's end guarded)
                    index = index.if_true
                term = _last_term(index, lets)
                if isinstance(term, InvocationId) and term.kind is IdKind.GLOBAL:
                    votes[term.axis] += 1
        return max(range(3), key=lambda axis: (votes[axis], -axis))

    def proven(self, depth: int) -> Proven | None:
        """(Plain.) The lines of one invocation written on the assumptions ``Ranges``
        makes (accesses inside their buffers, index arithmetic that does not wrap, the
        first branch of a select that guards a row's end), or None where none was
        needed. The kernel checks them once per dispatch (``proven``, at entry) and runs
        these lines only when all hold."""
        self.ranges = Ranges(self.program.workgroup, self.typeof, self.range_name,
                             self.range_invariant, self.range_length, self.range_bound)
        self.gains = 0
        bound, stop_at = self.flat_bound(), None
        try:
            if bound is None:
                lines = self.invocation(depth)
            else:  # (the ids the loop runs are those the guard lets on)
                self.ranges.refine(self.program.body[0].cond, False)
                lines = self.invocation(depth, self.program.body[1:])
                stop_at = self.entry_value(bound)[0]
            assumptions = list(self.ranges.assumptions)
        finally:
            self.ranges = None
        if not self.gains:  # (nothing the version inside its buffers lacks: not worth
            return None     # its compile, 1.5-2x the kernel's)
        for x, size in zip("xyz", self.program.workgroup, strict=True):  # (native ids)
            assumptions.append(f"np.float64(g{x}) * {size} <= 4294967296.0")
        self.entry.append(check(assumptions))
        return Proven(lines, stop_at)

    def flat_bound(self) -> Expr | None:
        """(Proven.) ``n`` where the program starts with vyre.kernel's launch guard on the
        x id alone (``if gid >= n: return``), ``n`` one value for the whole dispatch, and x
        is the axis the flat loop runs along (``inner_axis``): that loop then stops at
        ``n`` and runs the rest of the body, with no branch per id (which kept LLVM from
        vectorising it: an elementwise kernel at 4 Mi ran 2.5-3.4x slower)."""
        tests = launch_guard(self.program.body)
        bound = _x_bound(tests[0]) if len(tests) == 1 else None
        if bound is not None and self.invariant(bound) and self.inner_axis() == 0:
            return bound
        return None

    def typeof(self, e: Expr) -> DType:
        """The type of ``e`` in this program (validated)."""
        return type_of(e, lambda name: self.var(name)[1], self.buffers)

    def range_name(self, name: str) -> str | None:
        """A variable's kernel name, for ``Ranges``: None for one assigned again."""
        return None if name in self.assigned else self.var(name)[0]

    def range_invariant(self, e: Expr) -> str | None:
        """The name of ``e``'s value computed once per dispatch, for ``Ranges``."""
        return self.entry_value(e)[0] if not self.at_entry and self.invariant(e) else None

    def range_bound(self, code: str) -> str:
        """A bound of a range computed once, at entry, for ``Ranges``: its name."""
        if code not in self.bounds:
            self.bounds[code] = name = self.fresh("r")
            self.entry.append(f"    {name} = {code}")
        return self.bounds[code]

    def range_length(self, buffer: str) -> str | None:
        """A storage buffer's length (f64 source), for ``Ranges``."""
        if self.buffers[buffer].access is Access.WORKGROUP or \
                self.buffers[buffer].dtype in (DType.BOOL, DType.F16):
            return None
        return f"np.float64({self.arg[buffer]}.shape[0])"

    def write_lockstep(self) -> Kernel:
        """Per workgroup: its workgroup buffers and one array per variable (a value per
        lane), then the program's statements, where every stretch without a barrier runs
        for each live lane in turn before the next starts: what a barrier promises. The
        statements that hold barriers are workgroup-uniform (V016): they run once, on the
        values of the first live lane. So do loops whose bounds are uniform (``hoist``),
        their statements run over the lanes of the branch they are in (``mask``)."""
        wx, wy, wz = self.program.workgroup
        lanes = wx * wy * wz
        storage = [b for b in self.program.buffers if b.access is not Access.WORKGROUP]
        shared = [b for b in self.program.buffers if b.access is Access.WORKGROUP]
        self.lines = []
        self.uniform(self.program.body, 1)
        body = self.lines or ["    pass"]  # (a body of barriers only writes nothing)
        arrays, returns = self.arrays, self.returns
        parallel = not any(isinstance(n, Atomic) and self.buffers[n.buffer].access
                           is not Access.WORKGROUP for n in walk(self.program.body))
        proven = self.in_blocks() if parallel and self.hoisted and \
            not _needs_lockstep(self.program) else None
        storage_args = ", ".join(self.arg[b.name] for b in storage)
        group_args = ", ".join(["stop", storage_args,
                                *(name for name, _ in self.entry_values.values())])
        out = [*HEAD, *self.consts]
        out += ["", "", "@njit(cache=True, nogil=True)",
                f"def workgroup(wx, wy, wz, {group_args}):"]
        out += [f"    {self.arg[b.name]} = zeros_{_storage(b.dtype)}(np.int64({b.count}))"
                for b in shared]
        out += [f"    {name} = zeros_{_lane_type(dtype)}(np.int64({lanes}))"
                for name, dtype in arrays]
        if returns:
            out.append(f"    alive = ones_bool_(np.int64({lanes}))")
        out += body
        if proven is not None:
            out += ["", "", "@njit(cache=True, nogil=True)",
                    f"def block(GID{proven.rows[0]}, GID{proven.rows[1]}, first, count, "
                    f"{group_args}):",
                    *(f"    {name} = zeros_{_lane_type(dtype)}(np.int64({blocks.LANES}))"
                      for name, dtype in proven.arrays),
                    *(proven.body or ["    pass"])]
        own = ["    per_plane = gx * gy",
               f"    for wg in {'prange' if parallel else 'range'}(gx * gy * gz):",
               *_STOP_WORKGROUP,
               "        wz = wg // per_plane",
               "        wy = (wg - wz * per_plane) // gx",
               "        wx = wg - wz * per_plane - wy * gx",
               f"        workgroup(wx, wy, wz, {group_args})"]
        if proven is None:
            out += _function("kernel", parallel, storage_args, [*self.entry, *own])
        else:
            out += _function("kernel", True, storage_args, [
                *self.entry, *_UNPROVEN, *self.block_tasks(proven, group_args),
                "    return False"])
            out += _function("fallback", True, storage_args, [*_read(self.entry, own), *own])
        out.append("")
        return Kernel("\n".join(out))

    def uniform(self, stmts: tuple[Stmt, ...], depth: int) -> None:
        """(Lockstep.) ``stmts`` at workgroup level: stretches become a loop over the live
        lanes; a statement holding barriers, or a uniform loop, runs once."""
        self.scopes.append({})
        stretch: list[Stmt] = []
        for s in stmts:
            if isinstance(s, Loop) and (_reads((s.start, s.end)) | _carried(s)) & \
                    {p.name for p in stretch if isinstance(p, Let)}:
                self.run_stretch(stretch, depth)  # (its lets decide whether the bounds
                stretch = []                      # are uniform, and what the loop carries)
            if not self.workgroup_level(s):
                stretch.append(s)
                continue
            self.run_stretch(stretch, depth)
            stretch = []
            match s:
                case Barrier():
                    pass
                case Let(name, Subgroup() as op):
                    self.subgroup(name, op, depth)
                case Break():  # (of a loop run once for the workgroup: the validator lets
                    self.emit(depth, "break")  # only jumps every lane takes stay in one)
                case Continue():
                    self.emit(depth, "continue")
                case Block(body):
                    self.uniform(body, depth)
                case If(cond, then, orelse) if _synchronizes(s):
                    self.first_live(depth)
                    self.at = depth + 1
                    code, _ = self.expr(cond)
                    self.emit(depth + 1, f"if {code}:")
                    self.uniform_branch(then, depth + 2)
                    if orelse:
                        self.emit(depth + 1, "else:")
                        self.uniform_branch(orelse, depth + 2)
                case If(cond, then, orelse):
                    self.masked_if(cond, then, orelse, depth)
                case Loop(var, start, end, body, step):
                    self.hoisted += not _synchronizes(s)
                    self.first_live(depth)
                    self.at = depth + 1
                    counter, name = self.fresh("k"), self.fresh(var)
                    self.scalars.add(name)
                    self.block_loop(name, start, end)
                    rest = self.unrolled(s, depth + 1)
                    self.emit(depth + 1, f"for {counter} in "
                                         f"{rest or self.loop_range(start, end, step)}:")
                    self.stop_check(depth + 2, counter if step == ONE else None)
                    self.emit(depth + 2, f"{name} = np.uint32({counter})")
                    self.scopes.append({var: (name, DType.U32)})
                    self.uniform_vars.add(var)
                    self.uniform(body, depth + 2)
                    self.leave_scope()
                    if self.ranges:
                        self.ranges.pop()
                    if _has_return(s):  # (every lane returned: the rest is for nobody)
                        self.first_live(depth + 2, negate=True)
                        self.emit(depth + 3, "break")
                case While(cond, body, max_trips):  # (holding a barrier: cond is uniform)
                    trip = self.while_head(cond, max_trips, depth, workgroup=True)
                    self.stop_check(depth + 1, trip)
                    self.uniform(body, depth + 1)
        self.run_stretch(stretch, depth)
        self.leave_scope()

    def subgroup(self, name: str, op: Subgroup, depth: int) -> None:
        """(Lockstep.) ``let name = op``: its operands computed in every lane (a stretch
        of lets of their own), then the operation over the lane arrays, subgroup by
        subgroup (lane ``l`` is local index ``l``: subgroups are runs of ``size``)."""
        operands = [Let(f"{name} {part}", e) for part, e in (("value", op.value),
                                                               ("lane", op.lane))
                    if e is not None]
        self.run_stretch(operands, depth)
        args = [self.var(s.name)[0] for s in operands]
        dtype = subgroup_result(op.op, self.var(f"{name} value")[1] if op.value is not None
                                else None,
                                DType.U32 if op.lane is not None else None)
        py = self.fresh(name)
        self.arrays.append((py, dtype))
        self.scopes[-1][name] = (py, dtype)
        self.uniform_vars.discard(name)
        size = op.size
        match op.op:
            case SubgroupOp.ELECT:
                self.emit(depth, f"for l in range({math.prod(self.program.workgroup)}):")
                self.emit(depth + 1, f"{py}[l] = l % {size} == 0")
            case SubgroupOp.BALLOT:
                self.emit(depth, f"subgroup_ballot({args[0]}, {py}, {size})")
            case SubgroupOp.BROADCAST | SubgroupOp.SHUFFLE:
                self.emit(depth, f"subgroup_shuffle({args[0]}, {args[1]}, {py}, {size})")
            case SubgroupOp.INCLUSIVE_ADD | SubgroupOp.EXCLUSIVE_ADD:
                inclusive = op.op is SubgroupOp.INCLUSIVE_ADD
                self.emit(depth, f"subgroup_scan({args[0]}, {py}, {size}, {inclusive})")
            case _:
                self.emit(depth, f"subgroup_reduce({args[0]}, {py}, {size}, "
                                 f"{_SUBGROUP_REDUCE[op.op]})")

    def leave_scope(self) -> None:
        """Its variables are gone: a sibling scope may declare the names again."""
        for name in self.scopes.pop():
            self.uniform_vars.discard(name)

    def uniform_branch(self, stmts: tuple[Stmt, ...], depth: int) -> None:
        """(Lockstep.) A branch of a uniform ``if``: ``pass`` when it writes nothing (a
        lone barrier)."""
        start = len(self.lines)
        self.uniform(stmts, depth)
        if len(self.lines) == start:
            self.emit(depth, "pass")

    def workgroup_level(self, s: Stmt) -> bool:
        """(Lockstep.) Whether ``s`` runs once for the workgroup rather than per lane: it
        holds a barrier, or a loop whose bounds are the same in every lane it runs on and
        that carries a float from one pass to the next (``chains_floats``) or holds an
        atomic (which then apply pass by pass, lanes in order, as on the reference)."""
        if _synchronizes(s):
            return True
        match s:
            case Break() | Continue():  # (here, only in a loop that holds a barrier)
                return True
            case Block(body) if loop_jumps(body):  # (the same: its jumps leave that loop)
                return True
            case Loop(_, start, end, body):  # (a lane that breaks leaves it alone: not once)
                return self.is_uniform(start) and self.is_uniform(end) and \
                    not loop_jumps(body) and (self.chains_floats(s) or _has_atomic(body))
            case If() | Block():
                return any(isinstance(n, Loop) and (_carried(n) or _has_atomic(n.body))
                           for n in walk((s,)))
        return False

    def chains_floats(self, loop: Loop) -> bool:
        """Whether ``loop`` assigns a float variable declared before it: a chain of
        dependent float operations, bound by their latency in one lane, that lanes side
        by side overlap (the reduce example: 23 ms per lane, 6 ms side by side). An
        integer chain is cheap in one lane, and lanes side by side may read memory at a
        stride that thrashes the cache (the scan example: 6x slower)."""
        return any(found is not None and found[1].is_float
                   for found in map(self.lookup, _carried(loop)))

    def is_uniform(self, e: Expr) -> bool:
        return is_uniform(e, self.uniform_vars, self.buffers)

    def masked_if(self, cond: Expr, then: tuple[Stmt, ...], orelse: tuple[Stmt, ...],
                  depth: int) -> None:
        """(Lockstep.) An ``if`` whose branches hold loops that may run once per
        workgroup: each branch runs at workgroup level on the lanes that take it (a mask
        per branch)."""
        lanes = self.lane_count()
        taken, other = self.fresh("m"), self.fresh("m")
        masks = [taken, other] if orelse else [taken]
        self.arrays += [(mask, DType.BOOL) for mask in masks]
        self.emit(depth, f"for l in range({lanes}):")
        self.at = depth + 1
        guard = self.guard("l")
        if guard:  # (a lane that does not run here takes neither branch)
            for mask in masks:
                self.emit(self.at, f"{mask}[l] = False")
            self.emit(self.at, f"if {guard}:")
            self.at += 1
        code, _ = self.expr(cond)
        self.emit(self.at, f"{taken}[l] = {code}")
        if orelse:
            self.emit(self.at, f"{other}[l] = not {taken}[l]")
        outer = self.mask
        for mask, branch in ((taken, then), (other, orelse)):
            self.mask = mask
            self.uniform(branch, depth)
        self.mask = outer

    def guard(self, lane: str) -> str:
        """(Lockstep.) The condition for ``lane`` to run a statement here ("": every
        lane)."""
        parts = ([f"alive[{lane}]"] if self.returns else []) + \
            ([f"{self.mask}[{lane}]"] if self.mask else [])
        return " and ".join(parts)

    def first_live(self, depth: int, negate: bool = False) -> None:
        """Sets ``l`` to the first lane that runs here; what follows runs only if there
        is one (``negate``: only if there is none)."""
        lanes = self.lane_count()
        guard = self.guard("q")
        if not guard:
            self.emit(depth, "l = 0")
            self.emit(depth, "if False:" if negate else "if True:")
            return
        self.emit(depth, "l = -1")
        self.emit(depth, f"for q in range({lanes}):")
        self.emit(depth + 1, f"if {guard}:")
        self.emit(depth + 2, "l = q")
        self.emit(depth + 2, "break")
        self.emit(depth, "if l < 0:" if negate else "if l >= 0:")

    def run_stretch(self, stmts: list[Stmt], depth: int) -> None:
        """The statements of a stretch, written inline in a loop over the live lanes (a
        function per stretch, even inlined by numba, kept its arrays' reference counts:
        50x slower). A ``return`` kills the lane and leaves the stretch by ``break``, from
        a one-pass loop around it, and from every loop it is in (``stmt`` checks after
        each loop). A guarded stretch of lets and assignments only is written as selects
        (``selecting``): a loop without branches vectorises (f64_kernel's Horner step
        took 20% less time)."""
        if not stmts:
            return
        self.before_stretch, self.stretch_names = [], {}
        self.emit(depth, f"for l in range({self.lane_count()}):")
        at, outer = len(self.lines) - 1, depth
        depth += 1
        guard = self.guard("l")
        if guard and all(isinstance(s, Let | Assign) for s in stmts) and \
                not _has_atomic(tuple(stmts)):
            self.selecting = guard  # (pure values: every lane computes, the guard picks)
        elif guard:
            self.emit(depth, f"if {guard}:")
            depth += 1
        if any(_has_return(s) for s in stmts):
            self.emit(depth, "for _once in range(1):")
            depth += 1
        starts = []
        for s in stmts:  # (in the enclosing scope: later stretches read its variables)
            if not self.block_let(s, guard):
                starts.append(len(self.lines))
                self.stmt(s, depth)
        if len(self.lines) == at + 1:  # (every statement went before the loop)
            self.lines.pop()
        elif self.along is not None and not guard and not _has_atomic(tuple(stmts)) and \
                all(isinstance(s, Let | Assign) for s in stmts):
            header = self.lines[at]
            self.lines[at:] = _in_registers(header, _split_chains(header, self.lines, starts),
                                            dict(self.arrays))
        self.selecting = None
        before = [("    " * outer) + line for line in self.before_stretch]
        self.lines[at:at] = before
        self.before_stretch = None

    # -- statements ------------------------------------------------------------------------

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def block(self, stmts: tuple[Stmt, ...], depth: int) -> None:
        self.scopes.append({})
        if self.ranges:
            self.ranges.push()
        start = len(self.lines)
        for s in stmts:
            self.stmt(s, depth)
            if self.ranges and isinstance(s, If) and s.then == (Return(),) and \
                    not s.orelse:  # (the lanes that go on are those where cond is false)
                self.ranges.refine(s.cond, False)
        if len(self.lines) == start:
            self.emit(depth, "pass")
        if self.ranges:
            self.ranges.pop()
        self.leave_scope()

    def branch(self, cond: Expr, truth: bool, stmts: tuple[Stmt, ...], depth: int) -> None:
        """A branch of an ``if``: where ranges are followed, it knows ``cond`` is
        ``truth``."""
        if self.ranges:
            self.ranges.push()
            self.ranges.refine(cond, truth)
        self.block(stmts, depth)
        if self.ranges:
            self.ranges.pop()

    def stmt(self, s: Stmt, depth: int) -> None:
        self.at = depth
        match s:
            case Let(name, value):
                code, dtype = self.expr(value)
                py = self.fresh(name)
                if self.lockstep:
                    self.arrays.append((py, dtype))
                    if self.is_uniform(value) and name not in self.assigned:
                        self.uniform_vars.add(name)
                    else:
                        self.uniform_vars.discard(name)
                self.assign(depth, self.lane(py), code)
                self.scopes[-1][name] = (py, dtype)
                if self.ranges and dtype in INTS and name not in self.assigned:
                    self.ranges.let(py, value)
                if value == InvocationId(IdKind.GLOBAL, 0) and name not in self.assigned:
                    self.gid_vars.add(py)
            case Assign(name, value):
                code, _ = self.expr(value)
                self.assign(depth, self.lane(self.var(name)[0]), code)
            case Store(buffer, index, value):
                buf = self.buffers[buffer]
                idx, _ = self.expr(index)
                val, _ = self.expr(value)
                fn = {DType.F32: "store_f32", DType.F64: "store_f64", DType.F16: "store_f16",
                      DType.BOOL: "store_bool"}.get(buf.dtype, "store")
                fn += "_in" if self.unchecked(buffer, index) else ""
                self.emit(depth, f"{fn}({self.arg[buffer]}, {idx}, {val})")
            case If(cond, then, orelse):
                code, _ = self.expr(cond)
                self.emit(depth, f"if {code}:")
                self.branch(cond, True, then, depth + 1)
                if orelse:
                    self.emit(depth, "else:")
                    self.branch(cond, False, orelse, depth + 1)
            case Loop(var, start, end, body, step):
                counter, name = self.fresh("k"), self.fresh(var)
                if self.lockstep:
                    self.arrays.append((name, DType.U32))
                    self.uniform_vars.discard(var)
                self.emit(depth, f"for {counter} in {self.loop_range(start, end, step)}:")
                self.stop_check(depth + 1, counter if step == ONE else None)
                self.scopes.append({var: (name, DType.U32)})
                self.emit(depth + 1, f"{self.lane(name)} = np.uint32({counter})")
                if self.ranges:
                    self.ranges.push()
                    self.loop_range_of(name, start, end)
                self.block(body, depth + 1)
                if self.ranges:
                    self.ranges.pop()
                self.leave_scope()
                self.after_loop(s, depth)
            case While(cond, body, max_trips):
                trip = self.while_head(cond, max_trips, depth)
                self.stop_check(depth + 1, trip)
                self.block(body, depth + 1)
                self.after_loop(s, depth)
            case Break():
                self.emit(depth, "break")
            case Continue():
                self.emit(depth, "continue")
            case Return():
                self.emit(depth, "alive[l] = False" if self.lockstep else "returned = True")
                self.emit(depth, "break")
            case Block(body):
                self.block(body, depth)
            case _:
                raise UnsupportedFeatureError(f"the cpu backend cannot run {type(s).__name__}",
                                              "Let routing pick another backend.")

    def stop_check(self, depth: int, counter: str | None) -> None:
        """A loop's back-edge is a safe point: a cancelled call leaves the loop there
        (``stop`` is ``vyre_core.cancel.words()``; the worker discards what it computed).
        Looked at once every STOP_EVERY passes of a loop with a unit counter (``counter``:
        a mask and a branch per pass; the stop words' loads, which LLVM may not hoist, only
        then), every pass of any other."""
        if not self.cancellable:
            return
        due = "" if counter is None else f"{counter} & {STOP_EVERY - 1} == 0 and "
        self.emit(depth, f"if {due}stopped(stop):")
        self.emit(depth + 1, "break")

    def loop_range_of(self, name: str, start: Expr, end: Expr) -> None:
        """(Proven.) A loop variable lies from ``start`` to ``end`` less one."""
        lo, hi = self.ranges.of(start), self.ranges.of(end)
        if lo is not None and hi is not None:
            self.ranges.bind(name, (lo[0], f"({hi[1]} - 1.0)"))

    def loop_range(self, start: Expr, end: Expr, step: Expr) -> str:
        """The Python range of a loop's counter (int64: no u32 step wraps it)."""
        lo, _ = self.expr(start)
        hi, _ = self.expr(end)
        stride = "" if step == ONE else f", {step.bits}"  # (a literal: constants are
        return f"range(np.int64({lo}), np.int64({hi}){stride})"  # substituted by then)

    def while_head(self, cond: Expr, max_trips: int, depth: int,
                   workgroup: bool = False) -> str:
        """A while loop's passes and its exit when ``cond`` is false; its body goes at
        ``depth + 1``. Run once for the workgroup (``workgroup``), each pass first finds
        a live lane to evaluate ``cond`` in (leaving when none is). Returns the name of
        its pass counter."""
        trip = self.fresh("t")
        self.emit(depth, f"for {trip} in range({max_trips}):")
        if workgroup:
            self.first_live(depth + 1, negate=True)  # (and sets l: cond's lane)
            self.emit(depth + 2, "break")
        self.at = depth + 1
        code, _ = self.expr(cond)
        self.emit(depth + 1, f"if not {code}:")
        self.emit(depth + 2, "break")
        return trip

    def after_loop(self, loop: Stmt, depth: int) -> None:
        """A return in ``loop`` leaves every loop around it too."""
        if _has_return(loop):
            self.emit(depth, "if not alive[l]:" if self.lockstep else "if returned:")
            self.emit(depth + 1, "break")

    def assign(self, depth: int, target: str, code: str) -> None:
        if self.selecting:
            code = f"{code} if {self.selecting} else {target}"
        self.emit(depth, f"{target} = {code}")

    def fresh(self, name: str) -> str:
        self.names += 1
        return f"v{self.names}_{''.join(c if c.isalnum() else '_' for c in name)}"

    def lane(self, py: str) -> str:
        """A variable as written: its lane's element in lockstep, else itself."""
        if py in self.inline:
            return self.inline[py]
        return f"{py}[l]" if self.lockstep and py not in self.scalars else py

    def var(self, name: str) -> tuple[str, DType]:
        found = self.lookup(name)
        if found is None:
            raise AssertionError(f"unbound variable {name!r}")  # (validated)
        return found

    def lookup(self, name: str) -> tuple[str, DType] | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    # -- expressions -----------------------------------------------------------------------

    def expr(self, e: Expr) -> tuple[str, DType]:
        """``e`` as source; every HOIST_EVERY levels a subexpression goes into a variable
        of its own first (Python's parser stops at 200 nested parentheses, and the IR
        allows expressions that deep; expressions are pure, so evaluating early is
        the same)."""
        self.nesting += 1
        try:
            code, dtype = self._expr(e)
        finally:
            self.nesting -= 1
        if self.nesting and self.nesting % HOIST_EVERY == 0:
            name = self.fresh("t")
            self.emit(self.at, f"{name} = {code}")
            return name, dtype
        return code, dtype

    def _expr(self, e: Expr) -> tuple[str, DType]:
        match e:
            case Lit(dtype, bits):
                return self.literal(dtype, bits), dtype
            case Var(name):
                py, dtype = self.var(name)
                return self.lane(py), dtype
            case Load() if not self.at_entry and self.invariant(e):
                return self.entry_value(e)
            case Load() if not self.at_entry and self.before_stretch is not None and \
                    self.lane_free(e):
                return self.stretch_value(e)
            case Load(buffer, index):
                buf = self.buffers[buffer]
                idx, _ = self.expr(index)
                if buf.dtype in (DType.BOOL, DType.F16):
                    return f"load_{buf.dtype.value}({self.arg[buffer]}, {idx})", buf.dtype
                if self.unchecked(buffer, index):
                    return f"load_in({self.arg[buffer]}, {idx})", buf.dtype
                return f"load({self.arg[buffer]}, {idx}, {_NP[buf.dtype]}(0))", buf.dtype
            case BufLen(buffer):
                return f"np.uint32({self.arg[buffer]}.shape[0])", DType.U32
            case InvocationId(kind, axis):
                if self.lockstep:
                    return self.lane_id(kind, axis), DType.U32
                self.ids.add((kind, axis))
                return _id_name(kind, axis), DType.U32
            case Binary(op, lhs, rhs) if f"binop.{op.value}" in OPERATIONS and \
                    (f"binop.{op.value}", self.typeof(lhs)) in functions():
                return self.library_call(f"binop.{op.value}", [lhs, rhs])
            case Unary(op, operand) if f"unop.{op.value}" in OPERATIONS and \
                    (f"unop.{op.value}", self.typeof(operand)) in functions():
                return self.library_call(f"unop.{op.value}", [operand])
            case Binary(op, lhs, rhs):
                a, ta = self.expr(lhs)
                if op in (BinOp.DIV, BinOp.REM) and ta is DType.U32 and \
                        not isinstance(rhs, Lit) and not self.at_entry and self.invariant(rhs):
                    d, inv = self.divisor(rhs)
                    return f"{op.value}_u32_by({a}, {d}, {inv})", DType.U32
                b, tb = self.expr(rhs)
                if op in (BinOp.ADD, BinOp.SUB, BinOp.MUL) and self.ranges and \
                        ta in INTS and self.ranges.of(e) is not None:  # (does not wrap)
                    self.gains += 1
                    return f"(np.int64({a}) {_NATIVE_64[op]} np.int64({b}))", ta
                return self.binary(op, a, b, ta), binop_result(op, ta, tb)
            case Unary(op, operand):
                a, t = self.expr(operand)
                return self.unary(op, a, t), unop_result(op, t)
            case Select(cond, if_true, if_false) if self.ranges and \
                    self.typeof(e) in INTS and self.ranges.of(e) is not None:
                self.gains += 1
                return self.expr(if_true)  # (its condition holds in every lane)
            case Select(cond, if_true, if_false):
                c, _ = self.expr(cond)
                a, t = self.expr(if_true)
                b, _ = self.expr(if_false)
                return f"({a} if {c} else {b})", t
            case Cast(dtype, value):
                a, t = self.expr(value)
                if self.ranges and dtype in INTS and t in INTS and \
                        self.ranges.of(e) is not None:  # (the value is in both types)
                    return f"np.int64({a})", dtype
                return self.cast(a, t, dtype), dtype
            case Bitcast(dtype, value):
                a, t = self.expr(value)
                return self.bitcast(a, t, dtype), dtype
            case Table(dtype, bits, index):
                i, _ = self.expr(index)
                return f"load({self.table(dtype, bits)}, {i}, {_NP[dtype]}(0))", dtype
            case Fma(a, b, c):
                x, t = self.expr(a)
                y, _ = self.expr(b)
                z, _ = self.expr(c)
                s = _SUFFIX[t]
                return f"add_{s}(mul_{s}({x}, {y}), {z})", t
            case Atomic(op, buffer, index, value, comparand):
                buf = self.buffers[buffer]
                idx, _ = self.expr(index)
                val, _ = self.expr(value)
                cmp = self.expr(comparand)[0] if comparand is not None else \
                    f"{_NP[buf.dtype]}(0)"
                return (f"atomic_{_SUFFIX[buf.dtype]}({self.arg[buffer]}, {idx}, "
                        f"{_ATOMIC_CODE[op]}, {val}, {cmp})"), buf.dtype
        raise AssertionError(f"unhandled node {e!r}")  # (validated)

    def unchecked(self, buffer: str, index: Expr) -> bool:
        """Whether an access needs no bounds check: proven inside (``Ranges``), or at the
        global x id in the version for workgroups inside their buffers (``at_gid``)."""
        if self.ranges:
            inside = self.ranges.inside(index, buffer)
            self.gains += inside and not self.is_gid(index)
            return inside
        return self.at_gid(buffer, index)

    def is_gid(self, index: Expr) -> bool:
        """Whether ``index`` is the global x id (or a variable that holds it)."""
        match index:
            case InvocationId(IdKind.GLOBAL, 0):
                return True
            case Var(name):
                return self.var(name)[0] in self.gid_vars
        return False

    def at_gid(self, buffer: str, index: Expr) -> bool:
        """(Plain.) Whether an access of ``buffer`` at ``index`` needs no bounds check:
        ``index`` is the global x id, and this is the version for workgroups whose ids
        all lie inside the buffers read or written at it (``direct``, which this
        collects). bool and f16 buffers keep their checked helpers."""
        if self.lockstep or self.buffers[buffer].dtype in (DType.BOOL, DType.F16) or \
                not self.is_gid(index):
            return False
        self.direct.add(buffer)
        return self.in_bounds

    def invariant(self, e: Expr) -> bool:
        """Whether ``e`` has one value in the whole dispatch: literals, lengths of storage
        buffers, and loads of buffers the program never writes at such indices, combined
        (a workgroup buffer is each workgroup's own array: not there before they start)."""
        match e:
            case Lit():
                return True
            case BufLen(buffer):
                return self.buffers[buffer].access is not Access.WORKGROUP
            case Load(buffer, index):
                return self.read_only(buffer) and self.invariant(index)
            case Binary() | Unary() | Cast() | Bitcast() | Table() | Select() | Fma():
                return all(map(self.invariant, children(e)))
        return False

    def read_only(self, buffer: str) -> bool:
        """A storage buffer the program never writes: its content is the same all through
        the dispatch."""
        return self.buffers[buffer].access is not Access.WORKGROUP and \
            buffer not in self.written

    def entry_value(self, e: Expr) -> tuple[str, DType]:
        """An invariant value (``a[0]`` in saxpy), computed once before the workgroups
        start. LLVM cannot move a load out of the lane loop itself: for all it knows the
        output aliases the buffer, so it reads it again after every store (saxpy at
        1 Mi: 0.21 ms, read once 0.14 ms). No buffer the program reads is bound to one it
        writes."""
        if e in self.entry_values:
            return self.entry_values[e]
        self.at_entry = True
        try:
            code, dtype = self.expr_into(self.entry, 1, e)
        finally:
            self.at_entry = False
        name = self.fresh("c")
        self.entry_values[e] = (name, dtype)
        self.entry.append(f"    {name} = {code}")
        return name, dtype

    def lane_free(self, e: Expr) -> bool:
        """(Lockstep.) Whether a load's value is the same for every lane and computable
        before the stretch's lane loop: a buffer the program never writes, at an index
        of literals, lengths, workgroup ids and uniform loop variables (the scalars)."""
        match e:
            case Lit() | BufLen():
                return True
            case InvocationId(kind, axis):
                if self.along is not None:  # (a block's lanes differ along its axis only)
                    return axis != self.along
                return kind is IdKind.WORKGROUP
            case Var(name):
                return self.var(name)[0] in self.scalars
            case Load(buffer, index):
                return self.read_only(buffer) and self.lane_free(index)
            case Binary() | Unary() | Cast() | Bitcast() | Table() | Select() | Fma():
                return all(map(self.lane_free, children(e)))
        return False

    def stretch_value(self, e: Load) -> tuple[str, DType]:
        """(Lockstep.) A lane-free load, read once before the stretch's lane loop (the
        coefficient of a Horner step: LLVM reads it again for every lane, for all it
        knows the lane arrays alias it; read once, f64_kernel took half the time)."""
        before = self.before_stretch
        if e not in self.stretch_names:
            self.before_stretch = None  # (its index is written inline, not hoisted again)
            try:
                code, _ = self.expr_into(before, 0, e)
            finally:
                self.before_stretch = before
            self.stretch_names[e] = name = self.fresh("s")
            before.append(f"{name} = {code}")
        return self.stretch_names[e], self.buffers[e.buffer].dtype

    def expr_into(self, lines: list[str], depth: int, e: Expr) -> tuple[str, DType]:
        """``e``'s code for a line written at ``depth`` in ``lines`` rather than here:
        the variables a deep expression is split into go there too."""
        saved = self.lines, self.at, self.nesting
        self.lines, self.at, self.nesting = lines, depth, 0
        try:
            return self.expr(e)
        finally:
            self.lines, self.at, self.nesting = saved

    def divisor(self, e: Expr) -> tuple[str, str]:
        """An invariant u32 divisor and its reciprocal, both computed once before the
        workgroups start (``div_u32_by``: the xor example's ``i % len(key)`` went from
        0.18 to 0.07 ms)."""
        d, _ = self.entry_value(e)
        if ("reciprocal", e) not in self.entry_values:
            self.entry_values[("reciprocal", e)] = f"{d}_inv", DType.F64
            self.entry.append(f"    {d}_inv = reciprocal_u32({d})")
        return d, f"{d}_inv"

    def lane_id(self, kind: IdKind, axis: int) -> str:
        """(Lockstep.) An invocation id of lane ``l``: lanes go x fastest, then y, z."""
        if self.along is not None:
            return self.block_id(kind, axis)
        wx, wy, _ = self.program.workgroup
        size = self.program.workgroup[axis]
        local = ("(l % {wx})", "((l // {wx}) % {wy})", "(l // ({wx} * {wy}))")[axis].format(
            wx=wx, wy=wy)
        group = f"w{'xyz'[axis]}"
        value = {IdKind.GLOBAL: f"{group} * {size} + {local}", IdKind.LOCAL: local,
                 IdKind.WORKGROUP: group}[kind]
        return f"np.uint32({value})"

    def literal(self, dtype: DType, bits: int) -> str:
        if dtype is DType.BOOL:
            return "True" if bits else "False"
        name = f"K{len(self.consts)}"
        if dtype.is_int:
            value = f"{_NP[dtype]}({dtype.from_bits(bits)})"
        elif dtype is DType.F16:  # (its f32 carrier: exact)
            value = f"np.uint16({bits}).view(np.float16).astype(np.float32)"
        else:  # floats by bit pattern: -0.0, infinities and NaN exact
            width = "np.uint32" if dtype is DType.F32 else "np.uint64"
            value = f"{width}({bits}).view({_NP[dtype]})"
        self.consts.append(f"{name} = {value}")
        return name

    def library_call(self, op: str, operands: list[Expr]) -> tuple[str, DType]:
        """A call of the math library's helper for ``op`` (``vyre_cpu.mathlib``), its
        import among the module's constants."""
        args = [self.expr(x)[0] for x in operands]
        code, dtype, imported = mathlib.call((op, self.typeof(operands[0])), args)
        if imported not in self.consts:
            self.consts.append(imported)
        return code, dtype

    def table(self, dtype: DType, bits: tuple[int, ...]) -> str:
        """A module constant holding a table's values (read as a buffer is: 0 past the
        end), by bit pattern; f16 in its f32 carrier (exact)."""
        name = f"K{len(self.consts)}"
        width = {8: "np.uint8", 16: "np.uint16", 32: "np.uint32", 64: "np.uint64"}[dtype.bits]
        of = "np.float16).astype(np.float32" if dtype is DType.F16 else _NP[dtype]
        self.consts.append(f"{name} = np.array({list(bits)}, {width}).view({of})")
        return name

    def binary(self, op: BinOp, a: str, b: str, t: DType) -> str:
        if op in _COMPARE:
            return f"({a} {_COMPARE[op]} {b})"
        if t is DType.BOOL:
            return {BinOp.AND: f"({a} and {b})", BinOp.LOGICAL_AND: f"({a} and {b})",
                    BinOp.OR: f"({a} or {b})", BinOp.LOGICAL_OR: f"({a} or {b})",
                    BinOp.XOR: f"({a} != {b})"}[op]
        if op in (BinOp.AND, BinOp.OR, BinOp.XOR):
            sym = {BinOp.AND: "&", BinOp.OR: "|", BinOp.XOR: "^"}[op]
            return f"{_NP[t]}({a} {sym} {b})"
        if op in (BinOp.MIN, BinOp.MAX) and t.is_int:
            return f"{'min' if op is BinOp.MIN else 'max'}({a}, {b})"
        if t in _SMALL:
            wrapped = {BinOp.ADD: f"np.int64({a}) + np.int64({b})",
                       BinOp.SUB: f"np.int64({a}) - np.int64({b})",
                       BinOp.MUL: f"np.int64({a}) * np.int64({b})"}.get(op)
            return f"{_NP[t]}({wrapped or f'small_{op.value}({a}, {b}, {t.bits}, {t.is_signed})'})"
        if t in (DType.U64, DType.I64) and op in _NATIVE_64:
            return f"{_NP[t]}({a} {_NATIVE_64[op]} {b})"
        if t is DType.I64 and op in (BinOp.ROTL, BinOp.ROTR):
            return f"np.int64({op.value}_u64(np.uint64({a}), {b}))"
        if t is DType.I64 and op in (BinOp.DIV, BinOp.REM, BinOp.SHL, BinOp.SHR, BinOp.MULHI,
                                     BinOp.ADD_SAT, BinOp.SUB_SAT):
            return f"{op.value}_i64({a}, {b})"
        return f"{op.value}_{_SUFFIX[t]}({a}, {b})"

    def unary(self, op: UnOp, a: str, t: DType) -> str:
        if op is UnOp.NOT:
            return f"(not {a})"
        if op is UnOp.ABS and t.is_int and not t.is_signed:
            return a
        if t in _SMALL:
            value = {UnOp.NEG: f"-np.int64({a})", UnOp.BIT_NOT: f"~np.int64({a})",
                     UnOp.ABS: f"abs(np.int64({a}))"}.get(op) or \
                f"small_{op.value}({a}, {t.bits}, {t.is_signed})"
            return f"{_NP[t]}({value})"
        if t in (DType.U64, DType.I64) and op is UnOp.BIT_NOT:
            return f"{_NP[t]}(~{a})"
        if t is DType.I64 and op in (UnOp.POPCOUNT, UnOp.CLZ, UnOp.CTZ, UnOp.BIT_REVERSE):
            return f"np.int64({op.value}_u64(np.uint64({a})))"
        if t.is_int:
            return f"{_UNARY_INT[op]}_{_SUFFIX[t]}({a})"
        if op in (UnOp.ISNAN, UnOp.ISINF):  # (a bool; f64 holds every f16/f32 exactly)
            return f"{op.value}_f64(np.float64({a}))"
        if op is UnOp.NEG:
            return f"(-{a})"
        if op is UnOp.ABS:
            return f"abs({a})"
        fn = f"{_FLOAT_FN[op]}_f64"
        if t is DType.F64:
            return f"{fn}({a})"
        rounded = "to_f16" if t is DType.F16 else "np.float32"
        return f"{rounded}({fn}(np.float64({a})))"

    def cast(self, a: str, src: DType, dst: DType) -> str:
        if src is dst:
            return a
        if dst is DType.BOOL:
            return f"({a} != 0)"
        if src is DType.BOOL:
            return f"({_NP[dst]}(1) if {a} else {_NP[dst]}(0))"
        if src.is_float and dst.is_int:
            if dst in _SMALL:
                lo, hi = dst.int_range
                return f"{_NP[dst]}(float_to_int({a}, {lo}, {hi}))"
            return f"float_to_{_SUFFIX[dst]}({a})"
        if src.is_int and dst.is_int:  # (numba's integer casts keep the low bits, extending
            # by the source's sign: modulo 2^width)
            if {src, dst} == {DType.U32, DType.I32}:
                return f"{_SUFFIX[src]}_to_{_SUFFIX[dst]}({a})"
            return f"{_NP[dst]}({a})"
        if dst is DType.F16:  # (from f64, where every source value is exact: one rounding)
            return f"to_f16(np.float64({a}))"
        return f"{_NP[dst]}({a})"  # int -> float, float -> float: rounded to nearest

    def bitcast(self, a: str, src: DType, dst: DType) -> str:
        """``a``'s bits as ``dst`` (same width). The operand is made its own type first:
        an integer the ranges prove in range is written as an i64 (``expr``)."""
        if src is dst:
            return a
        if src.is_int and dst.is_int:  # (the cast keeps the low bits: the same bits)
            return self.cast(f"{_NP[src]}({a})", src, dst)
        if src is DType.F16:  # (its bits from the f32 that holds it; NaN canonical)
            return f"{_NP[dst]}(f16_bits({a}))"
        if src.is_float:
            return f"bits_{_SUFFIX[src]}({_NP[src]}({a}), {_NP[dst]})"
        if dst is DType.F16:
            return f"f16_value({_NP[DType.U16]}({_NP[src]}({a})))"
        return f"reinterpret({_NP[src]}({a}), {_NP[dst]})"

    # -- the proven version of a lockstep kernel (``vyre_cpu/blocks.py``) -----------------

    def lane_count(self) -> str:
        """(Lockstep.) How many lanes a lane loop runs: the workgroup's, or the block's."""
        return "count" if self.along is not None else str(math.prod(self.program.workgroup))

    def in_blocks(self) -> _Blocks | None:
        """(Lockstep, plain, parallel.) The body of the version that runs the grid in
        blocks of lanes along the axis the accesses step on (``blocks.py``), written on
        the assumptions ``Ranges`` makes, as the plain kernels' proven version is
        (``proven``); None where it cannot be written (a ``return`` besides the launch
        guard, a loop run once whose bounds differ within a block). The kernel checks the
        assumptions once per dispatch and runs the workgroups instead where one fails."""
        found = blocks.launch_guard(self.program.body)
        if found is None or not all(map(self.invariant, found[0].values())):
            return None
        bounds, body = found
        inner = self.inner_axis()
        returns = self.returns
        self.along, self.returns, self.lines, self.arrays = inner, False, [], []
        self.scopes, self.uniform_vars = [{}], set()
        self.ranges = Ranges(self.program.workgroup, self.typeof, self.range_name,
                             self.range_invariant, self.range_length, self.range_bound)
        try:
            for axis, bound in bounds.items():  # (the lanes that do not return)
                self.ranges.refine(Binary(BinOp.LT, InvocationId(IdKind.GLOBAL, axis),
                                          bound), True)
            self.uniform(body, 1)
            assumptions = list(self.ranges.assumptions)
        except blocks.Unblockable:
            return None
        finally:
            self.along, self.ranges, self.returns = None, None, returns
        extents = []
        for axis, (x, size) in enumerate(zip("xyz", self.program.workgroup, strict=True)):
            assumptions.append(f"np.float64(g{x}) * {size} <= 4294967296.0")  # (u32 ids)
            extent = f"np.int64(g{x}) * {size}"
            if axis in bounds:
                extent = f"min2({extent}, np.int64({self.entry_value(bounds[axis])[0]}))"
            extents.append(extent)
        self.entry.append(check(assumptions))
        rows = tuple(axis for axis in range(3) if axis != inner)
        return _Blocks(_unread_dropped(self.lines), self.arrays, inner, rows, tuple(extents))

    def block_tasks(self, proven: _Blocks, group_args: str) -> list[str]:
        """(Lockstep, proven.) The proven kernel's parallel loop: its tasks are the
        blocks (a row of the two other axes, ``LANES`` ids along the block's)."""
        a, b = proven.rows
        lanes, inner = blocks.LANES, proven.inner
        return [*(f"    extent{axis} = {code}" for axis, code in enumerate(proven.extents)),
                f"    chunks = (extent{inner} + {lanes - 1}) // {lanes}",
                f"    chunk = (extent{inner} + chunks - 1) // chunks if chunks else 0",
                f"    for wg in prange(extent{a} * extent{b} * chunks):", *_STOP_WORKGROUP,
                "        row = wg // chunks",
                "        first = (wg - row * chunks) * chunk",
                f"        block(row % extent{a}, row // extent{a}, first, "
                f"min2(chunk, extent{inner} - first), {group_args})"]

    def block_id(self, kind: IdKind, axis: int) -> str:
        """(Lockstep, proven.) An invocation id of lane ``l`` of a block (64-bit): the
        block's axis counts from ``first``, the others are the block's row."""
        size = self.program.workgroup[axis]
        gid = "(first + l)" if axis == self.along else f"GID{axis}"
        return {IdKind.GLOBAL: gid, IdKind.LOCAL: f"({gid} % {size})",
                IdKind.WORKGROUP: f"({gid} // {size})"}[kind]

    def block_loop(self, name: str, start: Expr, end: Expr) -> None:
        """(Lockstep.) A loop run once per block has bounds the same in every lane of
        the block (else ``Unblockable``), and its variable ``name`` lies between them. A
        ranges scope opens for its body (the caller closes it)."""
        if self.along is None:
            return
        if not (self.lane_free(start) and self.lane_free(end)):
            raise blocks.Unblockable
        self.ranges.push()
        self.loop_range_of(name, start, end)

    def unrolled(self, loop: Loop, depth: int) -> str | None:
        """(Lockstep, proven.) A loop run once per block whose body is lets and
        assignments only, written ``UNROLL`` passes at a time, each lane running the
        passes in turn inside one lane loop (unroll and jam): a lane's variables stay in
        registers across them, and its four loads along a row are neighbours (atax's
        ``A x``, lanes across rows: 0.046 -> 0.029 ms). Each lane runs its passes in
        their order; no other lane can see the difference (no stores, no atomics).
        Returns the range of the passes left (None where it is not written so)."""
        if self.along is None or loop.step != ONE or _has_atomic(loop.body) or \
                not all(isinstance(b, Let | Assign) for b in loop.body):
            return None
        times = blocks.UNROLL
        lo, _ = self.expr(loop.start)
        hi, _ = self.expr(loop.end)
        first, last, counter = self.fresh("lo"), self.fresh("hi"), self.fresh("k")
        self.emit(depth, f"{first} = np.int64({lo})")
        self.emit(depth, f"{last} = np.int64({hi})")
        self.emit(depth, f"for {counter} in range({first}, {last} - {times - 1}, {times}):")
        self.stop_check(depth + 1, None)
        scope: dict[str, tuple[str, DType]] = {}
        passes: list[Stmt] = []
        own = {loop.var} | {b.name for b in loop.body if isinstance(b, Let)}
        for step in range(times):
            names = {name: f"{name} {step}" for name in own}  # (no program's own)
            self.assigned |= {names[name] for name in own & self.assigned}
            py = self.fresh(loop.var)
            self.scalars.add(py)
            self.emit(depth + 1, f"{py} = np.uint32({counter} + {step})")
            self.loop_range_of(py, loop.start, loop.end)
            scope[names[loop.var]] = (py, DType.U32)
            self.uniform_vars.add(names[loop.var])
            passes += [transform(b, lambda n, names=names: _renamed(n, names))
                       for b in loop.body]
        self.scopes.append(scope)
        self.uniform(tuple(passes), depth + 1)
        self.leave_scope()
        return f"range(max2({first}, {first} + ({last} - {first}) // {times} * {times}), {last})"

    def block_let(self, s: Stmt, guard: str) -> bool:
        """(Lockstep, proven.) Whether ``s``, a statement of a stretch every lane runs, is
        a let written without a lane array (written here): a value the same in every
        lane of the block as a variable computed before the lane loop (``i`` where the
        lanes run along ``j``), a value of the lane's ids as its code, read where used
        (``j``, so ``b[k, j]`` is seen as consecutive from lane to lane: a lane array
        hid that from LLVM, every load a gather)."""
        if self.along is None or guard or not isinstance(s, Let) or s.name in self.assigned:
            return False
        py = self.fresh(s.name)
        if self.lane_free(s.value):
            code, dtype = self.expr_into(self.before_stretch, 0, s.value)
            self.before_stretch.append(f"{py} = {code}")
            self.scalars.add(py)
        elif self.lane_affine(s.value):
            code, dtype = self.expr(s.value)
            self.inline[py] = code
        else:
            self.names -= 1  # (not taken: ``stmt`` names it)
            return False
        if self.is_uniform(s.value):
            self.uniform_vars.add(s.name)
        else:
            self.uniform_vars.discard(s.name)
        self.scopes[-1][s.name] = (py, dtype)
        if dtype in INTS:
            self.ranges.let(py, s.value)
        return True

    def lane_affine(self, e: Expr) -> bool:
        """(Lockstep, proven.) Whether ``e`` is a short computation on the lane's ids,
        literals, values the dispatch or the block shares, and lets written as their
        code: cheap to compute again where read, and the same value there."""
        if sum(1 for _ in walk((e,))) > blocks.INLINE_NODES:
            return False
        for n in walk((e,)):
            match n:
                case Var(name):
                    py = self.var(name)[0]
                    if py not in self.scalars and py not in self.inline:
                        return False
                case Load():
                    if not self.invariant(n):
                        return False
                case Lit() | BufLen() | InvocationId() | Binary() | Unary() | Cast() | \
                        Bitcast() | Table() | Select():
                    pass
                case _:
                    return False
        return True


@dataclass(frozen=True)
class _Blocks:
    """The proven version of a lockstep kernel (``_Writer.in_blocks``): its body and lane
    arrays, the axis its lanes run along, the two others, and each axis's extent (the
    ids that run: the grid's, or fewer under the launch guard)."""

    body: list[str]
    arrays: list[tuple[str, DType]]
    inner: int
    rows: tuple[int, int]
    extents: tuple[str, str, str]


def _split_chains(header: str, lines: list[str], starts: list[int]) -> list[str]:
    """(Lockstep, proven.) A lane loop of lets and assignments (``header``, then each
    statement's lines from its ``starts``) as one lane loop per chain: statements that
    share no lane array (``x[l]``) commute, so each chain may run over all lanes before
    the next. A chain LLVM cannot vectorise (mvt's ``A x``, lanes across rows) no longer
    keeps one it can (its ``A^T y``) scalar."""
    parts = [lines[a:b] for a, b in zip(starts, [*starts[1:], len(lines)], strict=True)]
    chain = list(range(len(parts)))

    def root(n: int) -> int:
        while chain[n] != n:
            n = chain[n]
        return n

    last: dict[str, int] = {}
    for n, part in enumerate(parts):
        for array in set(re.findall(r"(\w+)\[l\]", "\n".join(part))):
            if array in last:
                chain[root(n)] = root(last[array])
            last[array] = n
    firsts = sorted({root(n) for n in range(len(parts))})
    return [line for first in firsts for line in
            [header, *(line for n, part in enumerate(parts) if root(n) == first
                       for line in part)]]


def _in_registers(header: str, lines: list[str], arrays: dict[str, DType]) -> list[str]:
    """(Lockstep, proven.) Lane loops of lets and assignments (each ``header``, then its
    body) with every lane array a loop reads or writes held in a variable for the lane's
    pass: read once at its start, written once at its end, as its element would be (cast
    to the array's type where assigned). A stretch touches only its lane's own element of
    each, so this is the same memory; but LLVM cannot tell one lane array from another,
    so every store made it read the others again, and a select that keeps a value
    (``m = v if v > m else m``) became a masked store whose value the next read could not
    take from the store (lib.max's pass: 0.37 ms a Mi in cache; held, 0.15)."""
    out: list[str] = []
    loops: list[list[str]] = []
    for line in lines:
        if line == header:
            loops.append([])
        else:
            loops[-1].append(line)
    for body in loops:
        text = "\n".join(body)
        names = [n for n in dict.fromkeys(re.findall(r"\b(\w+)\[l\]", text)) if n in arrays]
        pad = re.match(r"\s*", body[0]).group(0) if body else ""
        held = {n: f"{n}_l" for n in names}
        written = [n for n in names if re.search(rf"^\s*{n}\[l\] = ", text, re.M)]
        kept = []
        for line in body:
            target = re.match(r"(\s*)(\w+)\[l\] = (.*)$", line)
            if target and target.group(2) in held:
                cast = _lane_cast(arrays[target.group(2)])
                value = re.sub(r"\b(\w+)\[l\]", lambda m, held=held: held.get(m.group(1),
                                                                               m.group(0)),
                               target.group(3))
                kept.append(f"{target.group(1)}{held[target.group(2)]} = {cast}({value})")
            else:
                kept.append(re.sub(r"\b(\w+)\[l\]",
                                   lambda m, held=held: held.get(m.group(1), m.group(0)),
                                   line))
        read_first = [n for n in names if not _assigned_first(body, n)]
        out += [header, *(f"{pad}{held[n]} = {n}[l]" for n in read_first), *kept,
                *(f"{pad}{n}[l] = {held[n]}" for n in written)]
    return out


def _assigned_first(body: list[str], name: str) -> bool:
    """Whether the first line of ``body`` that touches ``name[l]`` assigns it from a
    value that does not read it (its element before the loop is then never read)."""
    for line in body:
        if f"{name}[l]" in line:
            target = re.match(rf"\s*{name}\[l\] = (.*)$", line)
            return bool(target) and f"{name}[l]" not in target.group(1)
    return False


def _unread_dropped(lines: list[str]) -> list[str]:
    """(Lockstep, proven.) The block's lines without the stores of lane arrays no line
    reads (``_in_registers``' stores of a loop body's lets, whose scope ends with it):
    each was a store per lane and pass, at addresses a multiple of 4 KiB from the loads of
    a pass along a power-of-two stride, which a core then waits on."""
    stores = [re.match(r"\s*(\w+)\[l\] = (\w+)_l$", line) for line in lines]
    touched: dict[str, int] = {}
    for line in lines:
        for name in re.findall(r"\b(\w+)\[l\]", line):
            touched[name] = touched.get(name, 0) + 1
    dead = {m.group(1) for m in stores if m and m.group(2) == m.group(1)}
    dead = {n for n in dead if touched[n] == sum(1 for m in stores if m and m.group(1) == n)}
    return [line for line, m in zip(lines, stores, strict=True)
            if not (m and m.group(1) in dead)]


def _lane_cast(dtype: DType) -> str:
    """What storing into a lane array of ``dtype`` does to a value (numba's setitem)."""
    return f"np.{_lane_type(dtype)}" if dtype is not DType.BOOL else "bool"


def _renamed(node: Expr | Stmt, names: dict[str, str]) -> Expr | Stmt:
    """``node`` with the variables ``names`` maps read, declared or assigned under their
    new names (``transform``'s step)."""
    match node:
        case Var(name) if name in names:
            return Var(names[name])
        case Let(name, value) if name in names:
            return Let(names[name], value)
        case Assign(name, value) if name in names:
            return Assign(names[name], value)
    return node


def _last_term(e: Expr, lets: dict[str, Expr]) -> Expr:
    """What ``e`` adds last (``i * n + j``: ``j``), through casts and let variables."""
    for _ in range(16):  # (a chain of lets and casts; bounded, never a cycle)
        match e:
            case Binary(BinOp.ADD, _, rhs):
                e = rhs
            case Cast(_, value):
                e = value
            case Var(name) if name in lets:
                e = lets[name]
            case _:
                return e
    return e


def _has_barrier(s: Stmt) -> bool:
    return any(isinstance(n, Barrier) for n in walk((s,)))


def _synchronizes(s: Stmt) -> bool:
    """A barrier or a subgroup operation: every lane of the workgroup reaches it before
    any goes on, so the statement runs at workgroup level."""
    return any(isinstance(n, Barrier | Subgroup) for n in walk((s,)))


def _subgroups_as_lets(program: Program) -> Program:
    """``program`` with every subgroup operation the whole value of a let of its own,
    before the statement that used it (its operands free of others): the kernel computes
    its operands in every lane, then the operation over the lanes' arrays. The validator
    put each where every invocation runs it, so moving it before its statement (an if's
    condition, a loop's bounds: evaluated once anyway) changes nothing."""
    if not any(isinstance(n, Subgroup) for n in walk(program.body)):
        return program
    count = itertools.count()

    def hoisted(stmts: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        out: list[Stmt] = []
        for s in stmts:
            lets: list[Stmt] = []

            def lift(node: Expr | Stmt, lets: list[Stmt] = lets) -> Expr | Stmt:
                if isinstance(node, Subgroup):
                    name = f"subgroup {next(count)}"  # (no identifier: no program's own)
                    lets.append(Let(name, node))
                    return Var(name)
                return node

            s = replace(s, **{f.name: transform(getattr(s, f.name), lift)
                              for f in fields(s) if isinstance(getattr(s, f.name), Expr)})
            s = replace(s, **{f.name: hoisted(getattr(s, f.name)) for f in fields(s)
                              if _is_body(getattr(s, f.name))})
            if isinstance(s, Let) and isinstance(s.value, Var) and lets and \
                    s.value.name == lets[-1].name:  # (already a let of one: keep its name)
                lets[-1] = Let(s.name, lets[-1].value)
                s = None
            out += lets + ([s] if s is not None else [])
        return tuple(out)

    return Program(program.buffers, program.workgroup, hoisted(program.body))


def _is_body(value: object) -> bool:
    return isinstance(value, tuple) and bool(value) and isinstance(value[0], Stmt)


def _needs_lockstep(program: Program) -> bool:
    """Workgroup memory, barriers or subgroups: lanes must run side by side."""
    return any(b.access is Access.WORKGROUP for b in program.buffers) or \
        any(isinstance(n, Barrier | Subgroup) for n in walk(program.body))


_GID = InvocationId(IdKind.GLOBAL, 0)


def launch_guard(body: tuple[Stmt, ...]) -> list[Expr]:
    """The tests of vyre.kernel's launch guard where ``body`` starts with one (``if t1 or
    t2 ...: return``, no else), one per axis of the launch; none where it does not."""
    if not (body and isinstance(body[0], If) and body[0].then == (Return(),) and
            not body[0].orelse):
        return []
    tests, disjuncts = [body[0].cond], []
    while tests:
        test = tests.pop()
        if isinstance(test, Binary) and test.op is BinOp.LOGICAL_OR:
            tests += [test.lhs, test.rhs]
        else:
            disjuncts.append(test)
    return disjuncts


def _x_bound(test: Expr) -> Expr | None:
    """``n`` where ``test`` is ``gid >= n`` on the global x id."""
    if isinstance(test, Binary) and test.op is BinOp.GE and test.lhs == _GID:
        return test.rhs
    return None


def launch_bound(body: tuple[Stmt, ...]) -> Expr | None:
    """``n`` where ``body`` runs nothing for the invocations whose global x id is ``n`` or
    past it: it starts ``if gid >= n (or ...): return`` (vyre.kernel's launch guard), or
    it is lets of the id, then one ``if gid < n:`` (no else) holding the rest. None where
    it is neither."""
    for test in launch_guard(body):
        if (bound := _x_bound(test)) is not None:
            return bound
    ids = {_GID}
    for s in body[:-1]:
        if not (isinstance(s, Let) and s.value == _GID):
            return None
        ids.add(Var(s.name))
    last = body[-1] if body else None
    if isinstance(last, If) and not last.orelse and isinstance(last.cond, Binary) and \
            last.cond.op is BinOp.LT and last.cond.lhs in ids:
        return last.cond.rhs
    return None


def _reads(exprs: tuple[Expr, ...]) -> set[str]:
    """The variables ``exprs`` read."""
    return {n.name for n in walk(exprs) if isinstance(n, Var)}


def _has_atomic(stmts: tuple[Stmt, ...]) -> bool:
    return any(isinstance(n, Atomic) for n in walk(stmts))


def _carried(loop: Loop) -> set[str]:
    """The variables ``loop`` assigns that are declared before it: what one pass hands the
    next."""
    inner = {n.name for n in walk(loop.body) if isinstance(n, Let)}
    return {n.name for n in walk(loop.body) if isinstance(n, Assign)} - inner


def _has_return(s: Stmt) -> bool:
    return any(isinstance(n, Return) for n in walk((s,)))


def _storage(dtype: DType) -> str:
    """The numpy type of a buffer element as the kernel holds it."""
    return {DType.BOOL: "uint32", DType.F16: "uint16"}.get(dtype, dtype.value_np.name)


def _lane_type(dtype: DType) -> str:
    """The numpy type of a variable's lane array (its name in numpy, and in runtime's
    ``zeros_*``)."""
    return {DType.BOOL: "bool_", DType.F16: "float32"}.get(dtype, _NP.get(dtype, "")[3:])


def _id_name(kind: IdKind, axis: int) -> str:
    return f"{kind.value[0].upper()}ID{axis}"
