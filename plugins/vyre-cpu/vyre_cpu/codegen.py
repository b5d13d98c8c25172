"""A Program as the Python source of a numba kernel: one function per invocation, inlined
into loops over every invocation of every workgroup, workgroups in parallel (``prange``)
unless the program has atomics on storage buffers (then in turn: numba has no atomic
memory operations, and the final memory of an atomic is only defined when they apply one
at a time). A program with workgroup memory or barriers runs in lockstep per workgroup
instead (``write_lockstep``): each stretch between barriers, written inline, for every
live lane in turn. Pure text: this module neither imports numba nor compiles anything.

Every operation is a call into ``runtime/``, which keeps the IR's semantics exactly;
values keep their IR type (np.uint32, np.int32, np.float32, np.float64, bool; an f16
value is the f32 that holds it exactly, rounded to binary16 after every operation) at
every step. A type this backend does not know is refused here, before anything is
compiled, with the reason routing shows."""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import fields, replace

from vyre_core.errors import UnsupportedFeatureError
from vyre_core.ir import Program
from vyre_core.ir.dtypes import DType
from vyre_core.ir.nodes import (
    Assign,
    Atomic,
    Bitcast,
    Cast,
    Expr,
    IdKind,
    Let,
    Lit,
    Load,
    Loop,
    Return,
    Stmt,
    Store,
    Subgroup,
    Table,
    Var,
    walk,
)
from vyre_core.ir.rewrite import transform
from vyre_cpu import mathlib
from vyre_cpu.blocks import BlockKernel
from vyre_cpu.expressions import Expressions
from vyre_cpu.lockstep import LockstepKernel
from vyre_cpu.plain import PlainKernel
from vyre_cpu.ranges import Ranges
from vyre_cpu.statements import Statements
from vyre_cpu.writing import DTYPES, HOIST_LANES, Kernel, needs_lockstep


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
    if not needs_lockstep(program) and math.prod(program.workgroup) >= HOIST_LANES and \
            any(isinstance(n, Loop) for n in walk(program.body)):
        hoisting = _Writer(program, hoist=True)
        kernel = hoisting.write()
        if hoisting.hoisted:
            return _with_serial_twins(kernel)
    writer = _Writer(program)
    kernel = writer.write()
    if needs_lockstep(program):
        from vyre_cpu import lockstep_proven  # (built on _Writer: imported once it exists)

        if lockstep_proven.needs(program):
            kernel = lockstep_proven.write(program, writer, kernel)
    return _with_serial_twins(kernel)


#: A parallel function's head, as the writers write it (``kernel_function``).
_PARALLEL = re.compile(r"^@njit\(cache=True, nogil=True, parallel=True\)\ndef (\w+)\(")


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


class _Writer(PlainKernel, LockstepKernel, Statements, Expressions, BlockKernel):
    """One program's kernel module being written: the state its rooms share (the
    buffers' names, the scopes, the entry's values, the version being written), and the
    rooms as mixins: plain kernels (``plain.py``), lockstep (``lockstep.py``),
    statements, expressions, and blocks (``blocks.py``)."""

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
        self.lockstep = hoist or needs_lockstep(program)
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
