"""The lockstep kernel (``codegen._Writer.write_lockstep``): a program with workgroup
memory, barriers or subgroups (or loops worth running once per workgroup) runs each
stretch between barriers for every live lane in turn, its variables in lane arrays, its
branches as masks."""

from __future__ import annotations

import math
import re

from vyre_core.ir.dtypes import DType
from vyre_core.ir.nodes import (
    ONE,
    Access,
    Assign,
    Atomic,
    Barrier,
    Block,
    Break,
    Continue,
    Expr,
    If,
    Let,
    Loop,
    Stmt,
    Subgroup,
    SubgroupOp,
    While,
    loop_jumps,
    walk,
)
from vyre_core.ir.typerules import subgroup_result
from vyre_core.ir.uniformity import is_uniform
from vyre_cpu import blocks
from vyre_cpu.writing import (
    HEAD,
    STOP_WORKGROUP,
    SUBGROUP_REDUCE,
    UNPROVEN,
    Kernel,
    carried_vars,
    has_atomic,
    has_return,
    kernel_function,
    lane_cast,
    lane_type,
    needs_lockstep,
    read_entry,
    read_vars,
    storage_dtype,
    synchronizes,
)


class LockstepKernel:
    """The writer's lockstep kernels (a mixin of ``codegen._Writer``)."""

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
            not needs_lockstep(self.program) else None
        storage_args = ", ".join(self.arg[b.name] for b in storage)
        group_args = ", ".join(["stop", storage_args,
                                *(name for name, _ in self.entry_values.values())])
        out = [*HEAD, *self.consts]
        out += ["", "", "@njit(cache=True, nogil=True)",
                f"def workgroup(wx, wy, wz, {group_args}):"]
        out += [f"    {self.arg[b.name]} = zeros_{storage_dtype(b.dtype)}(np.int64({b.count}))"
                for b in shared]
        out += lane_arrays(arrays, lanes)
        if returns:
            out.append(f"    alive = ones_bool_(np.int64({lanes}))")
        out += body
        if proven is not None:
            out += ["", "", "@njit(cache=True, nogil=True)",
                    f"def block(GID{proven.rows[0]}, GID{proven.rows[1]}, first, count, "
                    f"{group_args}):",
                    *(f"    {name} = zeros_{lane_type(dtype)}(np.int64({blocks.LANES}))"
                      for name, dtype in proven.arrays),
                    *(proven.body or ["    pass"])]
        own = ["    per_plane = gx * gy",
               f"    for wg in {'prange' if parallel else 'range'}(gx * gy * gz):",
               *STOP_WORKGROUP,
               "        wz = wg // per_plane",
               "        wy = (wg - wz * per_plane) // gx",
               "        wx = wg - wz * per_plane - wy * gx",
               f"        workgroup(wx, wy, wz, {group_args})"]
        if proven is None:
            out += kernel_function("kernel", parallel, storage_args, [*self.entry, *own])
        else:
            out += kernel_function("kernel", True, storage_args, [
                *self.entry, *UNPROVEN, *self.block_tasks(proven, group_args),
                "    return False"])
            out += kernel_function("fallback", True, storage_args,
                                   [*read_entry(self.entry, own), *own])
        out.append("")
        return Kernel("\n".join(out))

    def uniform(self, stmts: tuple[Stmt, ...], depth: int) -> None:
        """(Lockstep.) ``stmts`` at workgroup level: stretches become a loop over the live
        lanes; a statement holding barriers, or a uniform loop, runs once."""
        self.scopes.append({})
        stretch: list[Stmt] = []
        for s in stmts:
            if isinstance(s, Loop) and (read_vars((s.start, s.end)) | carried_vars(s)) & \
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
                case If(cond, then, orelse) if synchronizes(s):
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
                    self.hoisted += not synchronizes(s)
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
                    if has_return(s):  # (every lane returned: the rest is for nobody)
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
                                 f"{SUBGROUP_REDUCE[op.op]})")

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
        if synchronizes(s):
            return True
        match s:
            case Break() | Continue():  # (here, only in a loop that holds a barrier)
                return True
            case Block(body) if loop_jumps(body):  # (the same: its jumps leave that loop)
                return True
            case Loop(_, start, end, body):  # (a lane that breaks leaves it alone: not once)
                return self.is_uniform(start) and self.is_uniform(end) and \
                    not loop_jumps(body) and (self.chains_floats(s) or has_atomic(body))
            case If() | Block():
                return any(isinstance(n, Loop) and (carried_vars(n) or has_atomic(n.body))
                           for n in walk((s,)))
        return False

    def chains_floats(self, loop: Loop) -> bool:
        """Whether ``loop`` assigns a float variable declared before it: a chain of
        dependent float operations, bound by their latency in one lane, that lanes side
        by side overlap (the reduce example: 23 ms per lane, 6 ms side by side). An
        integer chain is cheap in one lane, and lanes side by side may read memory at a
        stride that thrashes the cache (the scan example: 6x slower)."""
        return any(found is not None and found[1].is_float
                   for found in map(self.lookup, carried_vars(loop)))

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
                not has_atomic(tuple(stmts)):
            self.selecting = guard  # (pure values: every lane computes, the guard picks)
        elif guard:
            self.emit(depth, f"if {guard}:")
            depth += 1
        if any(has_return(s) for s in stmts):
            self.emit(depth, "for _once in range(1):")
            depth += 1
        starts = []
        for s in stmts:  # (in the enclosing scope: later stretches read its variables)
            if not self.block_let(s, guard):
                starts.append(len(self.lines))
                self.stmt(s, depth)
        if len(self.lines) == at + 1:  # (every statement went before the loop)
            self.lines.pop()
        elif self.along is not None and not guard and not has_atomic(tuple(stmts)) and \
                all(isinstance(s, Let | Assign) for s in stmts):
            header = self.lines[at]
            self.lines[at:] = _in_registers(header, _split_chains(header, self.lines, starts),
                                            dict(self.arrays))
        self.selecting = None
        before = [("    " * outer) + line for line in self.before_stretch]
        self.lines[at:at] = before
        self.before_stretch = None


def lane_arrays(arrays: list[tuple[str, DType]], lanes: int) -> list[str]:
    """The lines that allocate each lane array: those of one type as consecutive slices of
    one array of that type (``lanes_<type>``). LLVM then sees one object at fixed offsets
    where it saw an allocation each, which might overlap: a lane loop that writes more
    than a few lane arrays (lib.matmul's sixteen sums an invocation) needed more runtime
    overlap checks than its vectoriser makes, and ran one lane at a time (38 ms at 512
    cubed, one thread; 4.1 ms as slices)."""
    by_type: dict[str, list[str]] = {}
    for name, dtype in arrays:
        by_type.setdefault(lane_type(dtype), []).append(name)
    out = []
    for kind, names in by_type.items():
        out.append(f"    lanes_{kind} = zeros_{kind}(np.int64({lanes * len(names)}))")
        out += [f"    {name} = lanes_{kind}[{i * lanes}:{(i + 1) * lanes}]"
                for i, name in enumerate(names)]
    return out


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
                cast = lane_cast(arrays[target.group(2)])
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
