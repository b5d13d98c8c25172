"""Statements as kernel lines: blocks, branches, loops with their stop checks, lets and
assignments, and the variables' kernel names in their scopes."""

from __future__ import annotations

from vyre_core.errors import UnsupportedFeatureError
from vyre_core.ir.dtypes import DType
from vyre_core.ir.nodes import (
    ONE,
    Assign,
    Block,
    Break,
    Continue,
    Expr,
    IdKind,
    If,
    InvocationId,
    Let,
    Loop,
    Return,
    Stmt,
    Store,
    While,
)
from vyre_cpu.ranges import INTS
from vyre_cpu.writing import STOP_EVERY, has_return


class Statements:
    """The writer's statements (a mixin of ``codegen._Writer``)."""

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
        if has_return(loop):
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
