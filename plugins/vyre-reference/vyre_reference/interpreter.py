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
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from vyre_core import abi, cancel
from vyre_core.errors import LaunchLimitError, UnsupportedFeatureError
from vyre_core.ir import Program
from vyre_core.ir.dtypes import DType
from vyre_core.ir.nodes import (
    SUBGROUP_LANE_OPS,
    Access,
    Assign,
    Atomic,
    AtomicOp,
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
    Var,
    While,
    walk,
)
from vyre_core.limits import index_exceeded
from vyre_core.mathlib.inline import expand
from vyre_reference.chunks import MAX_LANES, MAX_WORKGROUP_MEMORY_BYTES, Triple, chunks
from vyre_reference.operators import (
    SCANS,
    SUBGROUP_REDUCE,
    UNSIGNED,
    Mask,
    Value,
    as_scalar,
    binary_op,
    bitcast_to,
    cast_to,
    is_uniform,
    literal_value,
    mask_and,
    table_lookup,
    unary_op,
    unsort,
)

#: A loop whose bound differs between lanes goes on with its running lanes alone once
#: fewer than 1/COMPACT_BELOW of them run (in dispatches of at least COMPACT_MIN_LANES).
COMPACT_BELOW = 4
COMPACT_MIN_LANES = 64

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
            m = mask_and(mask_and(mask, self.alive), self.in_pass)
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
                if is_uniform(c) or c.all() or not c.any():
                    self.block(then if (c if is_uniform(c) else c[0]) else orelse, mask)
                else:
                    self.block(then, mask_and(mask, c))
                    self.block(orelse, mask_and(mask, ~c))
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
        return np.zeros(self.lanes, dtype=bool) if mask is None else mask_and(lanes, ~mask)

    def enter_loop(self) -> tuple[Mask, Mask]:
        """A loop's own break and continue state, starting with every lane in; returns the
        enclosing loop's, to restore when this one ends."""
        outer = self.in_pass, self.in_loop
        self.in_pass = self.in_loop = None
        return outer

    def loop(self, var: str, start: Value, end: Value, step: int, body: tuple[Stmt, ...],
             mask: Mask) -> None:
        if is_uniform(start) and is_uniform(end):
            for i in range(int(start), int(end), step):
                cancel.check()  # (a back-edge: a safe point to stop a cancelled call)
                running = mask_and(mask, self.in_loop)
                live = mask_and(running, self.alive)
                if live is not None and not live.any():
                    break
                self.vars[var] = np.uint32(i)
                self.in_pass = None
                self.block(body, running)
        else:  # (u64 counters past a step: start + trips * step can pass 2**32 - 1)
            i = np.broadcast_to(start, (self.lanes,)).astype(np.uint32 if step == 1 else np.uint64)
            self.loop_lanes(var, i, end, step, body, mask_and(mask, i < end))
        self.vars.pop(var, None)

    def loop_lanes(self, var: str, i: np.ndarray, end: Value, step: int,
                   body: tuple[Stmt, ...], running: np.ndarray) -> None:
        """A loop whose bound differs between lanes, from iteration ``i`` of each lane on.
        Once fewer than 1/COMPACT_BELOW of the lanes still run, the rest of it runs on
        those lanes alone (``subset``), so a few long-running lanes do not cost the work
        of every lane for their whole trip count."""
        while True:
            cancel.check()
            running = mask_and(mask_and(running, self.alive), self.in_loop)
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
            running = mask_and(mask_and(running, self.alive), self.in_loop)
            c = self.eval(cond)
            if is_uniform(c):
                if not c:
                    return
            else:
                running = mask_and(running, c)
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
            if is_uniform(flat) and is_uniform(inside):
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
        if mask is None and value.ndim == 0 and is_uniform(index) \
                and buf.access is not Access.WORKGROUP:
            if index < len(self.mem[name]):  # every lane stores the same value there
                self.mem[name][index] = value
            return
        data, flat, inside = self.address(name, index)
        if mask is None and np.ndim(flat) == 1 and inside.all():  # every lane, in bounds
            data[flat] = value
            return
        lanes = self.active_lanes(mask_and(mask, np.broadcast_to(inside, (self.lanes,))))
        data[np.broadcast_to(flat, (self.lanes,))[lanes]] = \
            np.broadcast_to(value, (self.lanes,))[lanes]

    def active_lanes(self, mask: Mask) -> np.ndarray:
        return np.arange(self.lanes) if mask is None else np.nonzero(mask)[0]

    def atomic(self, e: Atomic, mask: Mask, want_old: bool) -> Value:
        buf = self.buffers[e.buffer]
        data, flat, inside = self.address(e.buffer, self.eval(e.index))
        lanes = self.active_lanes(mask_and(mask, np.broadcast_to(inside, (self.lanes,))))
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
                return literal_value(e)
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
                return binary_op(op, self.eval(lhs), self.eval(rhs))
            case Unary(op, operand):
                return unary_op(op, self.eval(operand))
            case Select(cond, if_true, if_false):
                return as_scalar(np.where(self.eval(cond), self.eval(if_true), self.eval(if_false)))
            case Cast(dtype, value):
                return cast_to(self.eval(value), dtype)
            case Bitcast(dtype, value):
                return bitcast_to(self.eval(value), dtype)
            case Table(dtype, bits, index):
                values = self.tables.get(id(e))
                if values is None:  # (once a dispatch: not hashing the bits at every read)
                    values = self.tables[id(e)] = np.array(
                        [*bits, 0], UNSIGNED[dtype.bits]).view(dtype.value_np)
                return table_lookup(values, self.eval(index))
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
            return unsort(moved, order)
        if e.op is SubgroupOp.BALLOT:
            bits = grouped.astype(np.uint32) << np.arange(e.size, dtype=np.uint32)
            return unsort(np.repeat(np.bitwise_or.reduce(bits, axis=1), e.size), order)
        words = grouped.view(np.uint32)  # (sums wrap: i32 adds as its u32 bits)
        if e.op in SCANS:
            sums = np.cumsum(words, axis=1, dtype=np.uint32)
            if e.op is SubgroupOp.EXCLUSIVE_ADD:
                sums -= words
            return unsort(sums.view(value.dtype), order)
        if e.op is SubgroupOp.ADD:
            total = np.add.reduce(words, axis=1, dtype=np.uint32).view(value.dtype)
        else:
            total = SUBGROUP_REDUCE[e.op].reduce(grouped, axis=1)
        return unsort(np.repeat(total, e.size), order)


