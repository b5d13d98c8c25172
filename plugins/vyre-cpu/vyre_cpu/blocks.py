"""The proven version of a plain kernel that runs in lockstep
(``codegen._Writer.in_blocks``): what decides whether it can be written, and how its
lanes are laid out. Pure: no numba.

A plain program (no barriers, workgroup memory, subgroups or atomics) whose loops run once
per workgroup has independent invocations, so its lanes need not be a workgroup: this
version runs them in *blocks*, each one row of the grid, up to ``LANES`` consecutive ids
along the axis the program's accesses step on (``_Writer.inner_axis``), the rest fixed. A
loop whose bounds are the same in every lane runs once per block, each statement over the
block's lanes in a loop of consecutive ids that LLVM vectorises, as PoCL and Intel's
OpenCL CPU runtime run a work-group's work-items. The kernel's leading launch guard
(``if global_id(a) >= n: return``) becomes the blocks' extents, so no lane returns and
no lane loop needs a mask."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from vyre_core.ir.dtypes import DType
from vyre_core.ir.nodes import (
    ONE,
    Assign,
    Binary,
    BinOp,
    Bitcast,
    BufLen,
    Cast,
    Expr,
    IdKind,
    InvocationId,
    Let,
    Lit,
    Load,
    Loop,
    Return,
    Select,
    Stmt,
    Table,
    Unary,
    Var,
    walk,
)
from vyre_core.ir.rewrite import transform
from vyre_cpu.ranges import INTS, Ranges
from vyre_cpu.writing import STOP_WORKGROUP, check, guard_tests, has_atomic, renamed

#: The most lanes of a block (a row's ids are split into equal blocks of at most this
#: many): long enough for the vectoriser (a loop of 8 stays scalar, and every pass of a
#: loop run once pays the lane loop's setup), short enough that the rows a block gathers
#: from (lanes across rows: ``a[i, j]`` with ``i`` the lane) stay in the first-level
#: cache. At PolyBench's MEDIUM size, atax's ``A x`` (lanes across rows) took 0.043 ms
#: in blocks of 128, 0.045 in 256, 0.059 in 512; its ``A^T y`` (lanes along rows) 0.010,
#: 0.008 and 0.005 ms.
LANES = 512
#: How many passes of a loop run once per block a lane runs in one lane loop
#: (``_Writer.unrolled``).
UNROLL = 4
#: The same in a proven workgroup's lanes (nested loops over its axes): lib.matmul's
#: 16-pass tile loop at 512 cubed, one thread, took 12.6 ms as written before, 9.2 ms
#: 4 passes at a time, 7.9 ms 8 at a time, 8.2 ms 16 at a time (a lane's sum then stays
#: in a register across the passes, and each pass reads its own row of the tile).
UNROLL_WORKGROUP = 8
#: A let of at most this many nodes over the lane's ids is written as its code where read
#: rather than kept in a lane array.
INLINE_NODES = 8


class Unblockable(Exception):
    """The kernel cannot run in blocks (a loop run once whose bounds differ within one)."""


def launch_guard(body: tuple[Stmt, ...]) -> tuple[dict[int, Expr], tuple[Stmt, ...]] | None:
    """The bounds a leading launch guard (``if gid(a) >= n or gid(b) >= m: return``, as
    ``vyre_core.kernels`` writes it) puts on the global ids, by axis, and the statements
    after it; no bounds where there is no such guard. None when a ``return`` is left
    anywhere else: a lane that returns needs the lockstep's masks, which this version
    is without."""
    bounds: dict[int, Expr] = {}
    found = _bounds(guard_tests(body))
    if found:
        bounds, body = found, body[1:]
    if any(isinstance(n, Return) for n in walk(body)):
        return None
    return bounds, body


def _bounds(tests: list[Expr]) -> dict[int, Expr] | None:
    """Tests ``gid(a) >= x``, ``gid(b) >= y`` ... as ``{a: x, b: y}`` (None: another test,
    or an axis twice)."""
    bounds: dict[int, Expr] = {}
    for test in tests:
        match test:
            case Binary(BinOp.GE, InvocationId(IdKind.GLOBAL, axis), bound) \
                    if axis not in bounds:
                bounds[axis] = bound
            case _:
                return None
    return bounds


class BlockKernel:
    """The writer's proven lockstep kernels, in blocks (a mixin of ``codegen._Writer``)."""

    def lane_count(self) -> str:
        """(Lockstep.) How many lanes a lane loop runs: the workgroup's, or the block's."""
        return "count" if self.along is not None else str(math.prod(self.program.workgroup))

    def in_blocks(self) -> _Blocks | None:
        """(Lockstep, plain, parallel.) The body of the version that runs the grid in
        blocks of lanes along the axis the accesses step on (``py``), written on
        the assumptions ``Ranges`` makes, as the plain kernels' proven version is
        (``proven``); None where it cannot be written (a ``return`` besides the launch
        guard, a loop run once whose bounds differ within a block). The kernel checks the
        assumptions once per dispatch and runs the workgroups instead where one fails."""
        found = launch_guard(self.program.body)
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
        except Unblockable:
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
        lanes, inner = LANES, proven.inner
        return [*(f"    extent{axis} = {code}" for axis, code in enumerate(proven.extents)),
                f"    chunks = (extent{inner} + {lanes - 1}) // {lanes}",
                f"    chunk = (extent{inner} + chunks - 1) // chunks if chunks else 0",
                f"    for wg in prange(extent{a} * extent{b} * chunks):", *STOP_WORKGROUP,
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
            raise Unblockable
        self.ranges.push()
        self.loop_range_of(name, start, end)

    def unrolled(self, loop: Loop, depth: int) -> str | None:
        """(Lockstep, proven.) A loop run once per block whose body is lets and
        assignments only, written ``UNROLL`` passes at a time, each lane running the
        passes in turn inside one lane loop (unroll and jam): a lane's variables stay in
        registers across them, and its four loads along a row are neighbours (atax's
        ``A x``, lanes across rows: 0.046 -> 0.029 ms). Each lane runs its passes in
        their order; no other lane can see the difference (no stores, no atomics).
        Returns the range of the passes left (None where it is not written so). The
        same holds of a proven workgroup's lanes (``UNROLL_WORKGROUP`` passes): its loop
        body stores nothing, so no lane, barrier or not, can see the other order."""
        times = UNROLL if self.along is not None else \
            UNROLL_WORKGROUP if self.ranges is not None else None
        if times is None or loop.step != ONE or has_atomic(loop.body) or \
                not all(isinstance(b, Let | Assign) for b in loop.body) or \
                self.streams(loop):
            return None
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
            passes += [transform(b, lambda n, names=names: renamed(n, names))
                       for b in loop.body]
        self.scopes.append(scope)
        self.uniform(tuple(passes), depth + 1)
        self.leave_scope()
        return f"range(max2({first}, {first} + ({last} - {first}) // {times} * {times}), {last})"

    def streams(self, loop: Loop) -> bool:
        """(Lockstep, proven, in blocks.) Whether every load of ``loop``'s body steps by
        one from lane to lane: each is a vector load, and a lane's passes written
        together would be a chain of dependent operations per vector (``acc += x[...]``
        four times), which waits on each; one pass a lane loop keeps them apart. lib.sum's
        first pass over 16 Mi f32, one thread: 5.5-6.1 ms unrolled, 2.4-2.8 ms not
        (BENCHMARKS.md, session 39)."""
        if self.along is None:
            return False
        lets = self.fixed_lets()
        loads = [n for n in walk(loop.body) if isinstance(n, Load)]
        return bool(loads) and all(self.lane_step(n.index, lets, loop.var) == 1
                                   for n in loads)

    def lane_step(self, e: Expr, lets: dict[str, Expr], counter: str) -> int | None:
        """(Lockstep, proven, in blocks.) How much ``e`` (an integer) grows from one lane
        of a block to the next (0: the same in every lane), where it is that simple
        (None: not known). ``counter`` is the variable of a loop run once per block."""
        match e:
            case InvocationId(kind, axis):
                return 0 if axis != self.along else 1 if kind is IdKind.GLOBAL else None
            case Lit() | BufLen():
                return 0
            case Var(name) if name == counter:
                return 0
            case Var(name) if name in lets:
                return self.lane_step(lets[name], lets, counter)
            case Cast(_, value):
                return self.lane_step(value, lets, counter)
            case Binary(BinOp.ADD | BinOp.SUB as op, a, b):
                sa, sb = self.lane_step(a, lets, counter), self.lane_step(b, lets, counter)
                if sa is None or sb is None:
                    return None
                return sa + sb if op is BinOp.ADD else sa - sb
            case Binary(BinOp.MUL, a, b):
                sa, sb = self.lane_step(a, lets, counter), self.lane_step(b, lets, counter)
                if sa == 0 and sb == 0:
                    return 0
                for step, other in ((sa, b), (sb, a)):
                    if step is not None and isinstance(other, Lit) and \
                            (step == 0 or other.dtype in INTS):
                        return step * int(other.dtype.from_bits(other.bits))
                return None
            case Load(buffer, index):  # (a buffer no lane writes, read the same in each)
                same = self.read_only(buffer) and self.lane_step(index, lets, counter) == 0
                return 0 if same else None
        return None  # (a variable written again, say: not followed)

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
        if sum(1 for _ in walk((e,))) > INLINE_NODES:
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
