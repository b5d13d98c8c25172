"""The reference interpreter: every invocation of a dispatch runs in lockstep as numpy
vectors, one element per invocation ("lane").

Values are numpy scalars (uniform across lanes) or arrays of one element per lane.
Control flow is masks: ``None`` means every lane is active. Because all lanes finish a
statement before any starts the next, workgroup barriers are satisfied by construction
(the validator guarantees they sit in uniform control flow). Semantics: docs/semantics.md.

A launch of more than MAX_LANES invocations (or more workgroup memory than
MAX_WORKGROUP_MEMORY_BYTES) runs in chunks of whole workgroups, one after another over
the same buffers: each chunk is a contiguous range of linear workgroup numbers (x
fastest, then y, then z), ascending, and every id is the unchunked launch's. Workgroups
may run in any order relative to each other, so this is a legal execution: what the
semantics specify comes out the same bytes as one lockstep launch (only what they leave
unspecified, such as an atomic's old value under contention, may differ). Within a
chunk, each atomic applies in ascending linear invocation order (x fastest).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from vyre_core import abi, cancel
from vyre_core.errors import LaunchLimitError, UnsupportedFeatureError
from vyre_core.ir import Program
from vyre_core.ir.dtypes import CANONICAL_NAN, DType
from vyre_core.ir.nodes import (
    SUBGROUP_LANE_OPS,
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
    walk,
)
from vyre_core.limits import index_exceeded
from vyre_core.mathlib.inline import expand

#: The most invocations run in lockstep at once (one chunk of a launch): a chunk's
#: per-lane arrays (ids, masks, variables) take a few bytes per lane each.
MAX_LANES = 1 << 26
#: The most workgroup memory one chunk holds (its workgroups' buffers side by side).
MAX_WORKGROUP_MEMORY_BYTES = 1 << 30
#: A loop whose bound differs between lanes goes on with its running lanes alone once
#: fewer than 1/COMPACT_BELOW of them run (in dispatches of at least COMPACT_MIN_LANES).
COMPACT_BELOW = 4
COMPACT_MIN_LANES = 64

Value = Any  # np.generic (uniform) or np.ndarray of shape (lanes,)
Mask = np.ndarray | None

_DTYPE_OF = {t.value_np: t for t in DType}
#: The unsigned numpy type of each width: a number's bit pattern
_UNSIGNED = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
_UFUNC_AT = {AtomicOp.MIN: np.minimum, AtomicOp.MAX: np.maximum, AtomicOp.AND: np.bitwise_and,
             AtomicOp.OR: np.bitwise_or, AtomicOp.XOR: np.bitwise_xor}


def run(program: Program, inputs: Sequence[Any], grid: Sequence[int] | None = None,
        constants: Mapping[str, Any] | None = None) -> list[np.ndarray]:
    """Outputs of one dispatch, in ABI order (see docs/semantics.md); ``constants`` chooses
    the program's specialization values (defaults otherwise). The math library's
    functions are written out first, as a worker host does before any backend runs."""
    program = expand(program.specialize(constants or {}))
    bound = abi.bind_inputs(program, inputs)
    lengths = abi.buffer_lengths(program, bound)
    return execute(program, bound, abi.infer_grid(program, lengths, grid))


def execute(program: Program, bound: Sequence[np.ndarray], grid: tuple[int, int, int],
            into: Sequence[np.ndarray] | None = None) -> list[np.ndarray]:
    """``run`` for a validated program whose inputs are already bound per the ABI and
    whose grid is resolved: what the contract hands a backend. With ``into`` (one
    writable array per output, exact dtype and length), outputs are computed in place
    there: no output memory of its own, and no copy afterwards."""
    with np.errstate(all="ignore"):
        return _Dispatch(program, list(bound), grid, into).run()


Triple = tuple[int, int, int]


def chunks(grid: Triple, per_chunk: int) -> Iterator[tuple[Triple, Triple]]:
    """The launch's workgroups as boxes (first workgroup, workgroups per axis) of at most
    ``per_chunk`` workgroups, in ascending linear workgroup order: the whole grid, else
    whole z-slabs, else whole rows of one slab, else runs of one row. Each box is a
    contiguous range of linear workgroup numbers and, but for the last of the launch, of
    a slab or of a row, holds at least half of ``per_chunk`` workgroups."""
    gx, gy, gz = grid
    if gx * gy * gz <= per_chunk:
        yield (0, 0, 0), grid
    elif gx * gy <= per_chunk:
        step = per_chunk // (gx * gy)
        for z in range(0, gz, step):
            yield (0, 0, z), (gx, gy, min(step, gz - z))
    elif gx <= per_chunk:
        step = per_chunk // gx
        for z in range(gz):
            for y in range(0, gy, step):
                yield (0, y, z), (gx, min(step, gy - y), 1)
    else:
        for z in range(gz):
            for y in range(gy):
                for x in range(0, gx, per_chunk):
                    yield (x, y, z), (min(per_chunk, gx - x), 1, 1)


@functools.lru_cache(maxsize=4)
def _lane_ids(lanes: int) -> np.ndarray:
    """``arange(lanes)`` as u32, shared read-only between dispatches of the same size."""
    ids = np.arange(lanes, dtype=np.uint32)
    ids.setflags(write=False)
    return ids


_USED_VARS: dict[str, frozenset[str]] = {}


def _used_vars(program: Program) -> frozenset[str]:
    """Variables read anywhere in ``program`` (an atomic whose result nobody reads can
    skip computing it); cached by fingerprint."""
    key = program.fingerprint()
    found = _USED_VARS.get(key)
    if found is None:
        if len(_USED_VARS) > 1024:
            _USED_VARS.clear()
        found = _USED_VARS[key] = frozenset(
            n.name for n in walk(program.body) if isinstance(n, Var))
    return found


def _and(a: Mask, b: Mask) -> Mask:
    if a is None:
        return b
    return a if b is None else a & b


def _is_uniform(v: Value) -> bool:
    return np.ndim(v) == 0


@functools.lru_cache(maxsize=4096)
def _literal(node: Lit) -> Value:
    """A literal's value (a numpy scalar: immutable, so shared between dispatches)."""
    if node.dtype.is_numeric:  # (its bit pattern, in the unsigned type of its width)
        return np.array(node.bits, _UNSIGNED[node.dtype.bits]).view(node.dtype.value_np)[()]
    return node.dtype.value_np.type(node.bits)


class _Dispatch:
    def __init__(self, program: Program, bound: list[np.ndarray], grid: tuple[int, int, int],
                 into: Sequence[np.ndarray] | None = None):
        self.program = program
        self.grid = grid
        self.wg = program.workgroup
        self.buffers = {b.name: b for b in program.buffers}
        self.per_chunk = self.workgroups_per_chunk()
        self.mem: dict[str, np.ndarray] = {}
        inputs = dict(zip((b.name for b in program.inputs), bound, strict=True))
        targets = {} if into is None else dict(zip((b.name for b in program.outputs), into,
                                                   strict=True))
        for b in program.buffers:
            if b.access is Access.WORKGROUP:
                continue  # (each chunk's own: enter_chunk)
            if b.name in targets:
                target = self.mem[b.name] = targets[b.name]
                if b.access is Access.READ_WRITE:
                    np.copyto(target, inputs[b.name])
                else:
                    target.fill(0)
            elif b.access is Access.OUTPUT:
                self.mem[b.name] = np.zeros(b.count, dtype=b.dtype.storage_np)
            elif b.access is Access.READ_WRITE:
                self.mem[b.name] = inputs[b.name].copy()
            else:
                self.mem[b.name] = inputs[b.name]
        self.used_vars = _used_vars(program)
        self.tables: dict[int, np.ndarray] = {}  # id of a Table node -> its values, 0 last

    def workgroups_per_chunk(self) -> int:
        """As many workgroups as MAX_LANES and MAX_WORKGROUP_MEMORY_BYTES allow. A launch
        whose ids do not fit a u32, or one workgroup past either bound, is refused; through
        a Driver neither gets here (the worker checks the launch, and the claims are far
        below the bounds), only calls of ``run``/``execute`` themselves."""
        for over in index_exceeded(self.grid, self.wg):
            raise LaunchLimitError(f"backend 'reference': {over.cause}", over.fix)
        lanes = math.prod(self.wg)
        memory = sum(b.count * b.dtype.storage_bytes for b in self.program.buffers
                     if b.access is Access.WORKGROUP)
        if lanes > MAX_LANES:
            raise UnsupportedFeatureError(
                f"a workgroup of {lanes} invocations exceeds the {MAX_LANES} the reference "
                "backend runs at once", f"Use a workgroup of at most {MAX_LANES} invocations.")
        if memory > MAX_WORKGROUP_MEMORY_BYTES:
            raise UnsupportedFeatureError(
                f"the workgroup buffers need {memory} bytes per workgroup, more than the "
                f"{MAX_WORKGROUP_MEMORY_BYTES} the reference backend holds at once",
                f"Use at most {MAX_WORKGROUP_MEMORY_BYTES} bytes of workgroup buffers per "
                "workgroup.")
        return min(MAX_LANES // lanes, MAX_WORKGROUP_MEMORY_BYTES // memory if memory
                   else MAX_LANES)

    def run(self) -> list[np.ndarray]:
        for first, groups in chunks(self.grid, self.per_chunk):
            cancel.check()
            self.enter_chunk(first, groups)
            self.block(self.program.body, None)
        return [self.mem[b.name] for b in self.program.outputs]

    def enter_chunk(self, first: Triple, groups: Triple) -> None:
        """Lanes for the workgroups of the box ``groups`` from workgroup ``first`` (a whole
        launch is one box), in linear invocation order within it; fresh workgroup memory
        and variables, shared storage buffers."""
        self.origin = tuple(f * w for f, w in zip(first, self.wg, strict=True))
        self.extent = tuple(g * w for g, w in zip(groups, self.wg, strict=True))  # per axis
        self.lanes = self.extent[0] * self.extent[1] * self.extent[2]
        self.first_group = first[0] + self.grid[0] * (first[1] + self.grid[1] * first[2])
        n_groups = groups[0] * groups[1] * groups[2]
        for b in self.program.buffers:
            if b.access is Access.WORKGROUP:
                self.mem[b.name] = np.zeros(n_groups * b.count, dtype=b.dtype.storage_np)
        self.vars: dict[str, Value] = {}
        self.alive: Mask = None    # lanes that have not returned
        self.in_pass: Mask = None  # (in a loop) lanes that have not left this pass
        self.in_loop: Mask = None  # (in a loop) lanes that have not left the loop
        self.lane_index = _lane_ids(self.lanes)  # each lane's number (a subset's: a gather)
        self.ids: dict[tuple[IdKind, int], np.ndarray] = {}
        # With a 1-D extent, global_id(0) is exactly origin + arange(lanes): loads and
        # stores indexed by it become slices from the origin.
        self.iota = self.invocation_id(IdKind.GLOBAL, 0) if self.extent[1:] == (1, 1) else None

    # -- statements --------------------------------------------------------------------

    def block(self, stmts: tuple[Stmt, ...], mask: Mask) -> None:
        for stmt in stmts:
            m = _and(_and(mask, self.alive), self.in_pass)
            if m is not None and not m.any():
                return
            self.stmt(stmt, m)

    def stmt(self, s: Stmt, mask: Mask) -> None:
        match s:
            case Let(name, Atomic() as atomic):
                self.vars[name] = self.atomic(atomic, mask, want_old=name in self.used_vars)
            case Let(name, value):
                self.vars[name] = self.eval(value)
            case Assign(name, value):
                new = self.eval(value)
                self.vars[name] = new if mask is None else np.where(mask, new, self.vars[name])
            case Store(buffer, index, value):
                self.store(buffer, self.eval(index), self.eval(value), mask)
            case If(cond, then, orelse):
                c = self.eval(cond)
                if _is_uniform(c) or c.all() or not c.any():
                    self.block(then if (c if _is_uniform(c) else c[0]) else orelse, mask)
                else:
                    self.block(then, _and(mask, c))
                    self.block(orelse, _and(mask, ~c))
            case Loop(var, start, end, body, Lit(bits=step)):
                outer = self.enter_loop()
                self.loop(var, self.eval(start), self.eval(end), step, body, mask)
                self.in_pass, self.in_loop = outer
            case While(cond, body, max_trips):
                outer = self.enter_loop()
                self.while_loop(cond, body, max_trips, mask)
                self.in_pass, self.in_loop = outer
            case Break():
                self.in_pass = self.without(self.in_pass, mask)
                self.in_loop = self.without(self.in_loop, mask)
            case Continue():
                self.in_pass = self.without(self.in_pass, mask)
            case Return():
                self.alive = self.without(self.alive, mask)
            case Barrier():
                pass  # lockstep execution already orders every lane's memory effects
            case Block(body):
                self.block(body, mask)
            case _:  # (a loop's step is a literal once its constants are chosen)
                raise AssertionError(f"unhandled statement {s!r}")

    def without(self, lanes: Mask, mask: Mask) -> np.ndarray:
        """``lanes`` less those of ``mask`` (None: every lane)."""
        return np.zeros(self.lanes, dtype=bool) if mask is None else _and(lanes, ~mask)

    def enter_loop(self) -> tuple[Mask, Mask]:
        """A loop's own break and continue state, starting with every lane in; returns the
        enclosing loop's, to restore when this one ends."""
        outer = self.in_pass, self.in_loop
        self.in_pass = self.in_loop = None
        return outer

    def loop(self, var: str, start: Value, end: Value, step: int, body: tuple[Stmt, ...],
             mask: Mask) -> None:
        if _is_uniform(start) and _is_uniform(end):
            for i in range(int(start), int(end), step):
                cancel.check()  # (a back-edge: a safe point to stop a cancelled call)
                running = _and(mask, self.in_loop)
                live = _and(running, self.alive)
                if live is not None and not live.any():
                    break
                self.vars[var] = np.uint32(i)
                self.in_pass = None
                self.block(body, running)
        else:  # (u64 counters past a step: start + trips * step can pass 2**32 - 1)
            i = np.broadcast_to(start, (self.lanes,)).astype(np.uint32 if step == 1 else np.uint64)
            self.loop_lanes(var, i, end, step, body, _and(mask, i < end))
        self.vars.pop(var, None)

    def loop_lanes(self, var: str, i: np.ndarray, end: Value, step: int,
                   body: tuple[Stmt, ...], running: np.ndarray) -> None:
        """A loop whose bound differs between lanes, from iteration ``i`` of each lane on.
        Once fewer than 1/COMPACT_BELOW of the lanes still run, the rest of it runs on
        those lanes alone (``subset``), so a few long-running lanes do not cost the work
        of every lane for their whole trip count."""
        while True:
            cancel.check()
            running = _and(_and(running, self.alive), self.in_loop)
            count = int(np.count_nonzero(running))
            if not count:
                return
            if count * COMPACT_BELOW < self.lanes and self.lanes >= COMPACT_MIN_LANES:
                idx = np.nonzero(running)[0]
                sub = self.subset(idx)
                sub.loop_lanes(var, i[idx], end[idx] if np.ndim(end) else end, step, body,
                               np.ones(len(idx), dtype=bool))
                self.merge(sub, idx)
                return
            self.vars[var] = i if step == 1 else i.astype(np.uint32)
            self.in_pass = None
            self.block(body, running)
            i = i + i.dtype.type(step)
            running &= i < end

    def while_loop(self, cond: Expr, body: tuple[Stmt, ...], max_trips: int,
                   mask: Mask) -> None:
        """``cond`` is checked before each pass, on the lanes still in the loop; the loop
        ends when it holds for none, or after ``max_trips`` passes."""
        running = mask
        for _ in range(max_trips):
            cancel.check()
            running = _and(_and(running, self.alive), self.in_loop)
            c = self.eval(cond)
            if _is_uniform(c):
                if not c:
                    return
            else:
                running = _and(running, c)
            if running is not None and not running.any():
                return
            self.in_pass = None
            self.block(body, running)

    def subset(self, idx: np.ndarray) -> _Dispatch:
        """This dispatch restricted to lanes ``idx`` (ascending): same memory, those lanes'
        variables, ids and liveness."""
        sub = object.__new__(_Dispatch)
        sub.__dict__.update(self.__dict__)
        sub.lanes = len(idx)
        sub.lane_index = self.lane_index[idx]
        sub.ids = {}
        sub.iota = None
        sub.alive = None if self.alive is None else self.alive[idx]
        sub.in_pass = sub.in_loop = None  # (between passes of the loop: every lane in runs)
        sub.vars = {name: value[idx] if np.ndim(value) else value
                    for name, value in self.vars.items()}
        return sub

    def merge(self, sub: _Dispatch, idx: np.ndarray) -> None:
        """Take back what lanes ``idx`` did in ``sub``: their variables and liveness (new
        arrays: a variable may be a view of a buffer)."""
        for name, value in sub.vars.items():
            before = self.vars.get(name)
            if value is before:
                continue  # (uniform, and untouched)
            merged = np.zeros(self.lanes, dtype=np.asarray(value).dtype)
            if before is not None:
                merged[:] = before
            merged[idx] = value
            self.vars[name] = merged
        if sub.alive is not None:
            alive = np.ones(self.lanes, dtype=bool) if self.alive is None else self.alive.copy()
            alive[idx] = sub.alive
            self.alive = alive

    # -- memory ------------------------------------------------------------------------

    def address(self, name: str, index: Value) -> tuple[np.ndarray, Value, Value]:
        """Backing array, flat element index, and in-bounds flags for ``name[index]``."""
        data = self.mem[name]
        buf = self.buffers[name]
        if buf.access is not Access.WORKGROUP:
            return data, index, index < len(data)
        group = self.workgroup_linear()
        return data, group * buf.count + index.astype(np.int64), index < buf.count

    def load(self, name: str, index: Value) -> Value:
        buf = self.buffers[name]
        data = self.mem[name]
        if index is self.iota and buf.access is not Access.WORKGROUP:
            lo = self.origin[0]
            n = max(0, min(self.lanes, len(data) - lo))
            out = data[lo:lo + n]
            if buf.access not in (Access.READ, Access.UNIFORM):
                out = out.copy()
            if n < self.lanes:
                out = np.concatenate([out, np.zeros(self.lanes - n, dtype=data.dtype)])
        else:
            data, flat, inside = self.address(name, index)
            if _is_uniform(flat) and _is_uniform(inside):
                out = data[flat] if inside else data.dtype.type(0)
            elif np.ndim(flat) == 1 and inside.all():  # every lane in bounds: one gather
                out = data[flat]
            else:
                flat = np.broadcast_to(flat, (self.lanes,))
                inside = np.broadcast_to(inside, (self.lanes,))
                out = data[np.where(inside, flat, 0)] if len(data) else \
                    np.zeros(self.lanes, dtype=data.dtype)
                out[~inside] = 0
        return out != 0 if buf.dtype is DType.BOOL else out

    def store(self, name: str, index: Value, value: Value, mask: Mask) -> None:
        buf = self.buffers[name]
        value = np.asarray(value).astype(buf.dtype.storage_np, copy=False)
        if buf.dtype.is_float:  # every NaN stored is the canonical quiet NaN (semantics.md)
            nan = np.isnan(value)
            if nan.any():
                value = np.where(nan, buf.dtype.storage_np.type(np.nan), value)
        if index is self.iota and buf.access is not Access.WORKGROUP:
            lo = self.origin[0]
            n = max(0, min(self.lanes, len(self.mem[name]) - lo))
            if mask is None:
                self.mem[name][lo:lo + n] = value if value.ndim == 0 else value[:n]
            else:  # (lane i stores to element origin + i: a masked slice, no gather)
                kept = mask[:n]
                self.mem[name][lo:lo + n][kept] = value if value.ndim == 0 else value[:n][kept]
            return
        if mask is None and value.ndim == 0 and _is_uniform(index) \
                and buf.access is not Access.WORKGROUP:
            if index < len(self.mem[name]):  # every lane stores the same value there
                self.mem[name][index] = value
            return
        data, flat, inside = self.address(name, index)
        if mask is None and np.ndim(flat) == 1 and inside.all():  # every lane, in bounds
            data[flat] = value
            return
        lanes = self.active_lanes(_and(mask, np.broadcast_to(inside, (self.lanes,))))
        data[np.broadcast_to(flat, (self.lanes,))[lanes]] = \
            np.broadcast_to(value, (self.lanes,))[lanes]

    def active_lanes(self, mask: Mask) -> np.ndarray:
        return np.arange(self.lanes) if mask is None else np.nonzero(mask)[0]

    def atomic(self, e: Atomic, mask: Mask, want_old: bool) -> Value:
        buf = self.buffers[e.buffer]
        data, flat, inside = self.address(e.buffer, self.eval(e.index))
        lanes = self.active_lanes(_and(mask, np.broadcast_to(inside, (self.lanes,))))
        targets = np.broadcast_to(flat, (self.lanes,))[lanes]
        values = np.broadcast_to(self.eval(e.value), (self.lanes,))[lanes]
        old = np.zeros(self.lanes, dtype=buf.dtype.storage_np)
        if not len(lanes):
            return old
        if e.op in (AtomicOp.ADD, AtomicOp.SUB):
            bits = data.view(np.uint32)
            delta = values.view(np.uint32) if e.op is AtomicOp.ADD else \
                np.uint32(0) - values.view(np.uint32)
            # Old value of each lane = initial + contributions of earlier lanes to its target.
            order = np.argsort(targets, kind="stable")
            t, d = targets[order], delta[order]
            before = np.cumsum(d, dtype=np.uint32) - d
            is_start = np.r_[True, t[1:] != t[:-1]]
            group_base = before[is_start][np.cumsum(is_start) - 1]
            old.view(np.uint32)[lanes[order]] = bits[t] + (before - group_base)
            np.add.at(bits, targets, delta)
        elif e.op in _UFUNC_AT and not want_old:
            _UFUNC_AT[e.op].at(data, targets, values)
        else:
            comparand = None if e.comparand is None else \
                np.broadcast_to(self.eval(e.comparand), (self.lanes,))[lanes]
            self.atomic_in_order(e.op, data, lanes, targets, values, comparand, old)
        return old

    @staticmethod
    def atomic_in_order(op: AtomicOp, data: np.ndarray, lanes: np.ndarray, targets: np.ndarray,
                        values: np.ndarray, comparand: np.ndarray | None,
                        old: np.ndarray) -> None:
        """Apply order-dependent atomics one lane at a time, in ascending lane order."""
        for k, (lane, t, v) in enumerate(zip(lanes, targets, values, strict=True)):
            cur = data[t]
            old[lane] = cur
            if op is AtomicOp.COMPARE_EXCHANGE:
                data[t] = v if cur == comparand[k] else cur
            elif op is AtomicOp.EXCHANGE:
                data[t] = v
            else:
                data[t] = _UFUNC_AT[op](cur, v)

    # -- expressions -------------------------------------------------------------------

    def invocation_id(self, kind: IdKind, axis: int) -> np.ndarray:
        key = (kind, axis)
        if key not in self.ids:
            if kind is IdKind.GLOBAL:  # (the lane's place in the chunk, from its origin)
                lane = self.lane_index
                if axis or self.extent[1:] != (1, 1):
                    lane = lane // np.uint32(math.prod(self.extent[:axis])) \
                        % np.uint32(self.extent[axis])
                if self.origin[axis]:
                    lane = lane + np.uint32(self.origin[axis])
                self.ids[key] = lane
            elif kind is IdKind.LOCAL:
                self.ids[key] = self.invocation_id(IdKind.GLOBAL, axis) % np.uint32(self.wg[axis])
            else:
                self.ids[key] = self.invocation_id(IdKind.GLOBAL, axis) // np.uint32(self.wg[axis])
        return self.ids[key]

    def workgroup_linear(self) -> np.ndarray:
        key = (IdKind.WORKGROUP, -1)
        if key not in self.ids:
            wid = [self.invocation_id(IdKind.WORKGROUP, a).astype(np.int64) for a in range(3)]
            self.ids[key] = wid[0] + self.grid[0] * (wid[1] + self.grid[1] * wid[2]) \
                - self.first_group  # (the chunk's own workgroup memory)
        return self.ids[key]

    def eval(self, e: Expr) -> Value:
        match e:
            case Lit():
                return _literal(e)
            case Var(name):
                return self.vars[name]
            case Load(buffer, index):
                return self.load(buffer, self.eval(index))
            case BufLen(buffer):
                b = self.buffers[buffer]
                return np.uint32(b.count if b.access is Access.WORKGROUP else len(self.mem[buffer]))
            case InvocationId(kind, axis):
                return self.invocation_id(kind, axis)
            case Binary(op, lhs, rhs):
                return _binary(op, self.eval(lhs), self.eval(rhs))
            case Unary(op, operand):
                return _unary(op, self.eval(operand))
            case Select(cond, if_true, if_false):
                return _scalar(np.where(self.eval(cond), self.eval(if_true), self.eval(if_false)))
            case Cast(dtype, value):
                return _cast(self.eval(value), dtype)
            case Bitcast(dtype, value):
                return _bitcast(self.eval(value), dtype)
            case Table(dtype, bits, index):
                values = self.tables.get(id(e))
                if values is None:  # (once a dispatch: not hashing the bits at every read)
                    values = self.tables[id(e)] = np.array(
                        [*bits, 0], _UNSIGNED[dtype.bits]).view(dtype.value_np)
                return _table(values, self.eval(index))
            case Fma(a, b, c):  # a * b + c, rounded twice in the type (semantics.md)
                va, vb, vc = self.eval(a), self.eval(b), self.eval(c)
                return va * vb + vc
            case Subgroup():
                return self.subgroup(e)
        raise AssertionError(f"unhandled node {e!r}")  # unreachable after validation

    def subgroup_layout(self, size: int) -> tuple[np.ndarray, np.ndarray]:
        """The lanes in subgroup order (each subgroup's ``size`` lanes side by side, by
        local index), and each lane's place in its subgroup."""
        key = (IdKind.LOCAL, -size)
        if key not in self.ids:
            wx, wy, _ = self.wg
            local = [self.invocation_id(IdKind.LOCAL, a).astype(np.int64) for a in range(3)]
            index = local[0] + wx * (local[1] + wy * local[2])
            group = self.workgroup_linear() * (math.prod(self.wg) // size) + index // size
            place = index % size
            self.ids[key] = (np.lexsort((place, group)), place)
        return self.ids[key]

    def subgroup(self, e: Subgroup) -> Value:
        """Every invocation runs it (the validator's rule), so each subgroup is whole."""
        order, place = self.subgroup_layout(e.size)
        if e.op is SubgroupOp.ELECT:
            return place == 0
        value = np.broadcast_to(self.eval(e.value), (self.lanes,))
        grouped = value[order].reshape(-1, e.size)
        if e.op in SUBGROUP_LANE_OPS:
            lane = np.broadcast_to(self.eval(e.lane), (self.lanes,)) % np.uint32(e.size)
            moved = np.take_along_axis(grouped, lane[order].reshape(-1, e.size), axis=1)
            return _unsort(moved, order)
        if e.op is SubgroupOp.BALLOT:
            bits = grouped.astype(np.uint32) << np.arange(e.size, dtype=np.uint32)
            return _unsort(np.repeat(np.bitwise_or.reduce(bits, axis=1), e.size), order)
        words = grouped.view(np.uint32)  # (sums wrap: i32 adds as its u32 bits)
        if e.op in _SCANS:
            sums = np.cumsum(words, axis=1, dtype=np.uint32)
            if e.op is SubgroupOp.EXCLUSIVE_ADD:
                sums -= words
            return _unsort(sums.view(value.dtype), order)
        if e.op is SubgroupOp.ADD:
            total = np.add.reduce(words, axis=1, dtype=np.uint32).view(value.dtype)
        else:
            total = _SUBGROUP_REDUCE[e.op].reduce(grouped, axis=1)
        return _unsort(np.repeat(total, e.size), order)


_SCANS = (SubgroupOp.INCLUSIVE_ADD, SubgroupOp.EXCLUSIVE_ADD)
_SUBGROUP_REDUCE = {SubgroupOp.MIN: np.minimum, SubgroupOp.MAX: np.maximum,
                    SubgroupOp.AND: np.bitwise_and, SubgroupOp.OR: np.bitwise_or,
                    SubgroupOp.XOR: np.bitwise_xor}


def _unsort(values: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Per-lane values back from subgroup order."""
    out = np.empty(len(order), dtype=values.dtype)
    out[order] = values.reshape(-1)
    return out


def _scalar(v: Value) -> Value:
    return v[()] if isinstance(v, np.ndarray) and v.ndim == 0 else v


def _bits(a: Value, dtype: DType) -> np.ndarray:
    """An integer's bit pattern (the unsigned type of its width)."""
    return np.asarray(a).view(_UNSIGNED[dtype.bits])


def _of_bits(bits: np.ndarray, dtype: DType) -> Value:
    return _scalar(np.asarray(bits, _UNSIGNED[dtype.bits]).view(dtype.value_np))


def _int_div_rem(a: Value, b: Value, dtype: DType) -> tuple[Value, Value]:
    """Truncating quotient and remainder with vyre's total rules (x/0 all ones, x%0 0, MIN /
    -1 == MIN): unsigned as numpy divides (it truncates), signed up to 32 bits in i64, and
    i64 on the magnitudes as unsigned numbers (no wider type to hold them)."""
    if not dtype.is_signed:
        if np.ndim(b) == 0 and b:
            return a // b, a % b
        zero = b == 0
        safe = np.where(zero, a.dtype.type(1), b)
        return (_scalar(np.where(zero, a.dtype.type(np.iinfo(a.dtype).max), a // safe)),
                _scalar(np.where(zero, a.dtype.type(0), a % safe)))
    if dtype.bits <= 32:
        a64, b64 = np.asarray(a, np.int64), np.asarray(b, np.int64)
        zero = b64 == 0
        safe = np.where(zero, 1, b64)
        q = np.abs(a64) // np.abs(safe) * (np.sign(a64) * np.sign(safe))
        r = np.where(zero, 0, a64 - q * safe)
        return _scalar(np.where(zero, -1, q).astype(a.dtype)), _scalar(r.astype(a.dtype))
    u = np.uint64
    ua, ub = _bits(a, dtype), _bits(b, dtype)
    neg_a, neg_b = np.asarray(a) < 0, np.asarray(b) < 0
    mag_a = np.where(neg_a, u(0) - ua, ua).astype(u)
    mag_b = np.where(neg_b, u(0) - ub, ub).astype(u)
    zero = mag_b == 0
    safe = np.where(zero, u(1), mag_b).astype(u)
    q, r = mag_a // safe, mag_a % safe
    q = np.where(neg_a != neg_b, u(0) - q, q).astype(u)
    r = np.where(neg_a, u(0) - r, r).astype(u)
    return (_of_bits(np.where(zero, u(2**64 - 1), q), dtype),
            _of_bits(np.where(zero, u(0), r), dtype))


def _mulhi(a: Value, b: Value, dtype: DType) -> Value:
    """The high half of the exact double-width product."""
    if dtype.bits <= 32:
        wide = np.int64 if dtype.is_signed else np.uint64
        high = (np.asarray(a, wide) * np.asarray(b, wide)) >> wide(dtype.bits)
        return _scalar(high.astype(a.dtype))
    u, half, mask = np.uint64, np.uint64(32), np.uint64(0xFFFFFFFF)
    ua, ub = _bits(a, dtype), _bits(b, dtype)
    a0, a1, b0, b1 = ua & mask, ua >> half, ub & mask, ub >> half
    mid = ((a0 * b0) >> half) + (a1 * b0 & mask) + (a0 * b1 & mask)
    high = a1 * b1 + ((a1 * b0) >> half) + ((a0 * b1) >> half) + (mid >> half)
    if dtype.is_signed:  # (a signed product's high word: the unsigned one less the
        # other operand for each negative one, mod 2^64)
        high = high - np.where(np.asarray(a) < 0, ub, u(0)) - np.where(np.asarray(b) < 0,
                                                                      ua, u(0))
    return _of_bits(high, dtype)


def _saturating(op: BinOp, a: Value, b: Value, dtype: DType) -> Value:
    """add_sat/sub_sat: the wrapped result, or the bound it crossed."""
    lo, hi = (np.array(v, dtype.value_np) for v in dtype.int_range)
    out = a + b if op is BinOp.ADD_SAT else a - b
    a, b = np.asarray(a), np.asarray(b)
    if not dtype.is_signed:
        crossed = out < a if op is BinOp.ADD_SAT else b > a
        return _scalar(np.where(crossed, hi if op is BinOp.ADD_SAT else lo, out))
    same_signs = (a < 0) == (b < 0)
    crossed = (same_signs if op is BinOp.ADD_SAT else ~same_signs) & ((out < 0) != (a < 0))
    return _scalar(np.where(crossed, np.where(a < 0, lo, hi), out))


def _float_extreme(pick: np.ufunc, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IEEE minimumNumber/maximumNumber: ``pick`` (fmin/fmax: a NaN loses to a number),
    with -0 below +0 where both are zeros (numpy leaves that to chance)."""
    out = pick(a, b)
    zeros = (a == 0) & (b == 0)
    if np.any(zeros):
        negative = np.signbit(a) | np.signbit(b) if pick is np.fmin else \
            np.signbit(a) & np.signbit(b)
        out = np.where(zeros, np.where(negative, -0.0, 0.0).astype(out.dtype), out)
    return out

def _binary(op: BinOp, a: Value, b: Value) -> Value:
    dtype = _DTYPE_OF[a.dtype]
    match op:
        case BinOp.ADD:
            return a + b
        case BinOp.SUB:
            return a - b
        case BinOp.MUL:
            return a * b
        case BinOp.DIV:
            return _int_div_rem(a, b, dtype)[0] if dtype.is_int else a / b
        case BinOp.REM:
            return _int_div_rem(a, b, dtype)[1] if dtype.is_int else np.fmod(a, b)
        case BinOp.MIN:
            return _float_extreme(np.fmin, a, b) if dtype.is_float else np.minimum(a, b)
        case BinOp.MAX:
            return _float_extreme(np.fmax, a, b) if dtype.is_float else np.maximum(a, b)
        case BinOp.AND | BinOp.LOGICAL_AND:
            return a & b
        case BinOp.OR | BinOp.LOGICAL_OR:
            return a | b
        case BinOp.XOR:
            return a ^ b
        case BinOp.SHL | BinOp.SHR | BinOp.ROTL | BinOp.ROTR:  # (amounts mod the width)
            w, u = dtype.bits, _UNSIGNED[dtype.bits]
            if op is BinOp.SHR:  # (arithmetic on a signed type)
                return _scalar(a >> (b & np.uint32(w - 1)).astype(a.dtype))
            n = (b & np.uint32(w - 1)).astype(u)
            if op is BinOp.SHL:
                return _of_bits(_bits(a, dtype) << n, dtype)
            left = n if op is BinOp.ROTL else (u(w) - n) & u(w - 1)
            bits = _bits(a, dtype)
            return _of_bits((bits << left) | (bits >> ((u(w) - left) & u(w - 1))), dtype)
        case BinOp.MULHI:
            return _mulhi(a, b, dtype)
        case BinOp.ADD_SAT | BinOp.SUB_SAT:
            return _saturating(op, a, b, dtype)
        case BinOp.EQ:
            return a == b
        case BinOp.NE:
            return a != b
        case BinOp.LT:
            return a < b
        case BinOp.LE:
            return a <= b
        case BinOp.GT:
            return a > b
        case BinOp.GE:
            return a >= b
    raise AssertionError(op)


#: The float unary ops numpy computes here; the math library's (``exp`` ..., every type)
#: never reach the interpreter: programs are run written out.
_FLOAT_FUNCS = {UnOp.SQRT: np.sqrt, UnOp.FLOOR: np.floor, UnOp.CEIL: np.ceil,
                UnOp.ROUND: np.rint, UnOp.TRUNC: np.trunc}  # (rint: ties to even)
#: Each byte with its bits in reverse order.
_REVERSED_BYTE = np.array([int(f"{i:08b}"[::-1], 2) for i in range(256)], np.uint64)


def _unary(op: UnOp, a: Value) -> Value:
    dtype = _DTYPE_OF[a.dtype]
    match op:
        case UnOp.NEG:
            return -a
        case UnOp.BIT_NOT:
            return ~a
        case UnOp.NOT:
            return ~a
        case UnOp.ABS:
            return a if dtype.is_int and not dtype.is_signed else np.abs(a)
        case UnOp.POPCOUNT:
            return _scalar(np.bitwise_count(_bits(a, dtype)).astype(a.dtype))
        case UnOp.CLZ:  # the width minus the bits up to the highest set one (smeared down)
            bits = _bits(a, dtype)
            shift = 1
            while shift < dtype.bits:
                bits = bits | (bits >> bits.dtype.type(shift))
                shift *= 2
            return _scalar((dtype.bits - np.bitwise_count(bits)).astype(a.dtype))
        case UnOp.CTZ:  # the ones below the lowest set bit (the width for zero)
            bits = _bits(a, dtype)
            below = (bits & (~bits + bits.dtype.type(1))) - bits.dtype.type(1)
            return _scalar(np.bitwise_count(below).astype(a.dtype))
        case UnOp.BIT_REVERSE:
            bits = _bits(a, dtype).astype(np.uint64)
            out = np.zeros_like(bits)
            for byte in range(dtype.bits // 8):
                out |= _REVERSED_BYTE[(bits >> np.uint64(8 * byte)) & np.uint64(255)] \
                    << np.uint64(dtype.bits - 8 - 8 * byte)
            return _of_bits(out.astype(_UNSIGNED[dtype.bits]), dtype)
        case UnOp.ISNAN:
            return np.isnan(a)
        case UnOp.ISINF:
            return np.isinf(a)
    return _FLOAT_FUNCS[op](a)


def _table(values: np.ndarray, index: Value) -> Value:
    """Element ``index`` of a table's values, which end with the 0 an index past the end
    reads."""
    return _scalar(values[np.minimum(index, np.uint32(len(values) - 1))])


def _bitcast(v: Value, dst: DType) -> Value:
    """``v``'s bits as ``dst`` (numpy's view); a NaN's are the canonical NaN's."""
    src = _DTYPE_OF[v.dtype]
    bits = _bits(v, src)
    if src.is_float:
        nan = np.isnan(v)
        if np.any(nan):
            bits = np.where(nan, bits.dtype.type(CANONICAL_NAN[src]), bits)
    return _of_bits(bits, dst)


def _cast(v: Value, dst: DType) -> Value:
    src = _DTYPE_OF[v.dtype]
    if dst is DType.BOOL:
        return v if src is DType.BOOL else v != 0
    if src.is_float and dst.is_int:  # (the bounds as floats: 2^63 and 2^64 are exact)
        lo, hi = dst.int_range
        x = np.trunc(np.nan_to_num(np.asarray(v, np.float64), nan=0.0))
        over, under = x >= float(hi), x <= float(lo)
        inside = np.where(over | under, 0.0, x).astype(dst.value_np)
        return _scalar(np.where(over, np.array(hi, dst.value_np),
                                np.where(under, np.array(lo, dst.value_np), inside)))
    if src.is_int and dst.is_int:  # (modulo 2^width: numpy's integer casts wrap so)
        return _scalar(np.asarray(v).astype(dst.value_np))
    return _scalar(np.asarray(v).astype(dst.value_np))
