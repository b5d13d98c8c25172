"""The plain kernel (``codegen._Writer.write``): every invocation written inline in the
loops over a workgroup's lanes, workgroups in parallel; where the program reads or writes
buffers at the global x id, a version without those bounds checks for workgroups inside
them; and the proven version (``Ranges``' assumptions checked once per dispatch), which
runs the whole grid in flat loops LLVM vectorises, stopping at vyre.kernel's launch
guard."""

from __future__ import annotations

from vyre_core.ir.dtypes import DType
from vyre_core.ir.exprtypes import type_of
from vyre_core.ir.nodes import (
    Access,
    Atomic,
    Binary,
    BinOp,
    Expr,
    IdKind,
    If,
    InvocationId,
    Let,
    Load,
    Return,
    Select,
    Stmt,
    Store,
    Var,
    walk,
)
from vyre_cpu.ranges import Ranges
from vyre_cpu.writing import (
    CHUNK,
    HEAD,
    STOP_WORKGROUP,
    UNPROVEN,
    Kernel,
    Proven,
    check,
    guard_tests,
    id_name,
    kernel_function,
    last_term,
    read_entry,
)


class PlainKernel:
    """The writer's plain kernels (a mixin of ``codegen._Writer``)."""

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
            body = [*self.all_inside(), *UNPROVEN, "    per_plane = gx * gy",
                    *self.workgroups(self.lane_loops(2, fast), parallel), "    return False"]
            functions = [
                *kernel_function("kernel", parallel, args,
                                 [*read_entry(self.entry, body), *body]),
                *kernel_function("fallback", parallel, args,
                                 [*read_entry(self.entry, own), *own])]
        elif proven is None:
            functions = kernel_function("kernel", parallel, args, [*self.entry, *own])
        else:
            functions = [*kernel_function("kernel", True, args, [
                *self.entry, *UNPROVEN, *self.flat_loops(proven), "    return False"]),
                *kernel_function("fallback", True, args, [*read_entry(self.entry, own), *own])]
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
                *STOP_WORKGROUP,
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
            ids.append(f"{'    ' * (depth + 3)}{id_name(kind, axis)} = np.uint32({value})")
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
                ids.append(f"            {id_name(kind, axis)} = {value}")
        return [
            f"    chunks = ({extent[inner]} + {CHUNK - 1}) // {CHUNK}",
            f"    for wg in prange({extent[a]} * {extent[b]} * chunks):", *STOP_WORKGROUP,
            "        row = wg // chunks",
            f"        first = (wg - row * chunks) * {CHUNK}",
            f"        GID{a} = row % {extent[a]}",
            f"        GID{b} = row // {extent[a]}",
            f"        for gi in range(first, min2(first + {CHUNK}, {extent[inner]})):",
            f"            GID{inner} = gi",
            *ids, *proven.lines]

    def fixed_lets(self) -> dict[str, Expr]:
        """The value of each let of the program that is never assigned again."""
        return {n.name: n.value for n in walk(self.program.body)
                if isinstance(n, Let) and n.name not in self.assigned}

    def inner_axis(self) -> int:
        """The id axis most accesses step along by one: the global id added last in
        their index (``a[i, j]`` is ``i * n + j``: j's axis), through casts and the
        variables that hold it; x where none is."""
        lets = self.fixed_lets()
        votes = [0, 0, 0]
        for n in walk(self.program.body):
            if isinstance(n, Load | Store):
                index = n.index
                while isinstance(index, Select):  # (a row's end guarded)
                    index = index.if_true
                term = last_term(index, lets)
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
        tests = guard_tests(self.program.body)
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



GLOBAL_X = InvocationId(IdKind.GLOBAL, 0)


def _x_bound(test: Expr) -> Expr | None:
    """``n`` where ``test`` is ``gid >= n`` on the global x id."""
    if isinstance(test, Binary) and test.op is BinOp.GE and test.lhs == GLOBAL_X:
        return test.rhs
    return None


def launch_bound(body: tuple[Stmt, ...]) -> Expr | None:
    """``n`` where ``body`` runs nothing for the invocations whose global x id is ``n`` or
    past it: it starts ``if gid >= n (or ...): return`` (vyre.kernel's launch guard), or
    it is lets of the id, then one ``if gid < n:`` (no else) holding the rest. None where
    it is neither."""
    for test in guard_tests(body):
        if (bound := _x_bound(test)) is not None:
            return bound
    ids = {GLOBAL_X}
    for s in body[:-1]:
        if not (isinstance(s, Let) and s.value == GLOBAL_X):
            return None
        ids.add(Var(s.name))
    last = body[-1] if body else None
    if isinstance(last, If) and not last.orelse and isinstance(last.cond, Binary) and \
            last.cond.op is BinOp.LT and last.cond.lhs in ids:
        return last.cond.rhs
    return None
