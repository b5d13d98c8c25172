"""A kernel body's statements as IR statements, one visitor per form (docs/kernels.md,
"Statements"): where each local is declared and assigned, the loops Python's ``for`` and
``while`` become, the shared arrays. Apart from the expressions because a statement is
where Python's order of effects and a local's type are decided, and its rules are read
and changed on their own; a mixin of ``lower.Lowerer``.
"""

from __future__ import annotations

import ast
import builtins

from vyre_core.ir.dtypes import DType
from vyre_core.ir.nodes import (
    Assign,
    Barrier,
    Binary,
    BinOp,
    Break,
    Cast,
    Continue,
    Expr,
    If,
    Let,
    Lit,
    Loop,
    Return,
    Select,
    Stmt,
    Store,
    Unary,
    UnOp,
    Var,
    While,
)
from vyre_core.kernels import flow, intrinsics, values
from vyre_core.kernels.unit import _BINOPS, ArrayRef, _is_func, _Lowering
from vyre_core.kernels.values import Refusal, Value

#: A ``while`` loop's pass bound: the IR needs one; this is the largest (docs/kernels.md).
WHILE_MAX_TRIPS = 2**32 - 1


class Statements(_Lowering):
    """A body's statements (a mixin of ``lower.Lowerer``)."""

    # -- statements --------------------------------------------------------------------

    def stmt(self, s: ast.stmt, path: flow.Path, k: int) -> None:
        if isinstance(s, ast.Assign):
            self.assign(s, path, k)
        elif isinstance(s, ast.AugAssign):
            self.augassign(s, path, k)
        elif isinstance(s, ast.AnnAssign):
            self.annassign(s, path, k)
        elif isinstance(s, ast.If):
            cond = values.truth(self.expr(s.test))
            then = self.block(s.body, (*path, (k, "body")))
            orelse = self.block(s.orelse, (*path, (k, "orelse")))
            self.emit(If(cond.node, then, orelse), s)
        elif isinstance(s, ast.For):
            self.for_(s, path, k)
        elif isinstance(s, ast.While):
            self.while_(s, path, k)
        elif isinstance(s, ast.Break | ast.Continue):
            if not self.loops:
                raise Refusal(f"{'break' if isinstance(s, ast.Break) else 'continue'} "
                              "outside a loop", "Remove it.", s)
            self.emit(Break() if isinstance(s, ast.Break) else Continue(), s)
        elif isinstance(s, ast.Return):
            self.return_(s, path)
        elif isinstance(s, ast.Pass):
            pass
        elif isinstance(s, ast.Expr):
            self.expr_stmt(s, path, k)
        else:
            raise Refusal(f"{type(s).__name__} statements are not supported in a kernel",
                          "See the statements docs/kernels.md lists.", s)

    def expr_stmt(self, s: ast.Expr, path: flow.Path, k: int) -> None:
        if isinstance(s.value, ast.Constant) and isinstance(s.value.value, str) \
                and path == () and k == 0:
            return  # the docstring
        if isinstance(s.value, ast.Call):
            fn = self._static(s.value.func)
            if fn is intrinsics.barrier:
                self._no_args(s.value, 0)
                self.unit.synchronizes = True
                self.emit(Barrier(), s)
                return
            if fn in intrinsics.ATOMICS or _is_func(fn):
                self._expr(s.value)
                return
            if fn is print:
                raise Refusal("print() in a kernel", "Write the values to an output array "
                              "and print them after the launch.", s.value)
        raise Refusal("an expression statement whose value is dropped",
                      "Assign or store the value, or remove the line.", s)

    def return_(self, s: ast.Return, path: flow.Path) -> None:
        if self.inlined:
            if path != () or s is not self.source.tree.body[-1]:
                raise Refusal("return inside a block of an inlined @vyre.func",
                              "Return once, as the function's last statement: keep the "
                              "result in a local and return it at the end.", s)
            self.result = None if s.value is None else self.expr(s.value)
            return
        if s.value is not None and not (isinstance(s.value, ast.Constant)
                                        and s.value.value is None):
            raise Refusal("return with a value from a kernel",
                          "Store the result in an array parameter: out[i] = value; "
                          "then `return`.", s.value)
        self.emit(Return(), s)

    def _declares(self, name: str, path: flow.Path, k: int) -> bool:
        d = self.decls[name]
        return d.kind == "let" and d.path == path and d.index == k

    def set_local(self, name: str, v: Value, node: ast.AST, declare: bool) -> None:
        """``name = v``: the first assignment fixes the local's type; a later one of
        another type is refused at its line."""
        t = self.types.get(name)
        if t is None:
            v = values.settle(v)
            self.types[name] = v.dtype
        else:
            if v.weak:
                try:
                    v = values.settle(v, t)
                except Refusal:
                    v = values.settle(v)
            if v.dtype is not t:
                raise Refusal(f"{name!r} is {t.value} (from its first assignment) and this "
                              f"assigns a {v.dtype.value}: a local keeps its type",
                              f"Cast the value: {name} = {t.value}(...), or use another "
                              "name for the new value.", node)
        target = self.rename[name]
        self.emit(Let(target, v.node) if declare else Assign(target, v.node), node)

    def assign(self, s: ast.Assign, path: flow.Path, k: int) -> None:
        if len(s.targets) != 1:
            raise Refusal("chained assignment (a = b = v)", "Assign each name on its own.", s)
        target = s.targets[0]
        if isinstance(s.value, ast.Call) and self._static(s.value.func) is intrinsics.shared:
            return self.shared(target, s.value)
        if isinstance(target, ast.Tuple | ast.List):
            return self.unpack(target, s.value, path, k)
        if isinstance(target, ast.Name) and isinstance(s.value, ast.Call) and \
                self._static(s.value.func) in intrinsics.WORKGROUP_OPS:
            return self.store(target, self.workgroup(s.value), path, k, s)
        if isinstance(target, ast.Name) and isinstance(s.value, ast.Call) and \
                self._static(s.value.func) in intrinsics.ATOMICS and \
                self._declares(target.id, path, k) and target.id not in self.types:
            node, dtype = self.atomic(s.value)
            self.types[target.id] = dtype
            self.emit(Let(self.rename[target.id], node), s)
            return None
        self.store(target, self.expr(s.value), path, k, s)
        return None

    def store(self, target: ast.AST, v: Value, path: flow.Path, k: int, s: ast.AST) -> None:
        if isinstance(target, ast.Name):
            if target.id not in self.locals:
                raise Refusal(f"assigns {target.id!r}, which is not a local", "Use a new "
                              "name.", target)
            self.set_local(target.id, v, s, self._declares(target.id, path, k))
        elif isinstance(target, ast.Subscript):
            array = self.array_of(target.value)
            start = len(self.blocks[-1])
            index = self.index(array, target.slice)
            v = self.read_before(v, start)  # (Python evaluates the value, then the index)
            v = values.settle(v, array.dtype) if v.weak else v
            if v.dtype is not array.dtype:
                raise Refusal(f"stores a {v.dtype.value} into {array.name!r}, an array of "
                              f"{array.dtype.value}",
                              f"Cast the value: {array.dtype.value}(...).", s)
            self.unit.written.add(array.name)
            self.emit(Store(array.name, index, v.node), s)
        elif isinstance(target, ast.Attribute):
            raise Refusal("assigns an attribute", "Kernels assign locals and array "
                          "elements only.", target)
        else:
            raise Refusal("this assignment target is not supported", "Assign a local or "
                          "an array element.", target)

    def unpack(self, target: ast.Tuple | ast.List, value: ast.AST, path: flow.Path,
               k: int) -> None:
        """``r, c = a, b``: every value first, then every target (Python's order): a value
        reading a name assigned before it is kept in a fresh variable first."""
        if not isinstance(value, ast.Tuple) or len(value.elts) != len(target.elts):
            raise Refusal("unpacking needs a tuple of as many values as names",
                          "Write r, c = a, b with one value per name.", value)
        # what the targets write: locals, and the arrays of element targets (x[0], x[1] =
        # x[1], x[0] swaps: each value is read before any target is written)
        names = {n for t in target.elts for n in flow._assigned_names(t)} | \
            {t.value.id for t in target.elts
             if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)}
        vals = []
        for element in value.elts:
            v = self.expr(element)
            read = {n.id for n in ast.walk(element) if isinstance(n, ast.Name)}
            if read & names and len(value.elts) > 1:
                tmp = self.unit.fresh("unpacked")
                v = values.settle(v)
                self.emit(Let(tmp, v.node), element)
                v = Value(Var(tmp), v.dtype)
            vals.append(v)
        for t, v in zip(target.elts, vals, strict=True):
            self.store(t, v, path, k, t)

    def augassign(self, s: ast.AugAssign, path: flow.Path, k: int) -> None:
        symbol = _BINOPS[type(s.op)]
        start = len(self.blocks[-1])
        current = self.expr(s.target if isinstance(s.target, ast.Subscript)
                            else ast.Name(s.target.id, ast.Load(), **_pos(s.target)))
        if self._effects_since(start):  # (the index would run again for the store)
            raise Refusal(f"the index of {ast.unparse(s.target)} calls a function that "
                          "writes memory: Python runs it once, the load and the store of "
                          "an augmented assignment would each run it",
                          "Compute the index first: i = ...; then a[i] += v.", s.target)
        start = len(self.blocks[-1])
        value = self.expr(s.value)
        v = values.binop(symbol, self.read_before(current, start), value,
                         (ast.unparse(s.target), ast.unparse(s.value)))
        if isinstance(s.target, ast.Name) and not current.weak and v.dtype is not current.dtype:
            raise Refusal(f"{ast.unparse(s)} makes {s.target.id!r} a {v.dtype.value}: a local "
                          "keeps its type", "Cast the value to the local's type.", s)
        self.store(s.target, v, path, k, s)

    def annassign(self, s: ast.AnnAssign, path: flow.Path, k: int) -> None:
        dtype = self._static(s.annotation)
        if not isinstance(dtype, DType) or not isinstance(s.target, ast.Name):
            raise Refusal("an annotation other than a dtype on a local",
                          "Annotate locals with a dtype: x: f32 = 0.", s.annotation)
        if s.value is None:
            raise Refusal("a declaration without a value", f"Give it one: "
                          f"{s.target.id}: {dtype.value} = 0.", s)
        if s.target.id in self.types and self.types[s.target.id] is not dtype:
            raise Refusal(f"{s.target.id!r} is already {self.types[s.target.id].value}",
                          "A local keeps its type; use another name.", s)
        self.types.setdefault(s.target.id, dtype)
        v = self.expr(s.value)
        self.store(s.target, values.settle(v, dtype) if v.weak else v, path, k, s)

    def for_(self, s: ast.For, path: flow.Path, k: int) -> None:
        """``for v in range(start, stop, step)``: a u32 trip counter ``t`` and ``v = start
        + i32(t) * step`` first in the body (the trip count fixed when the loop starts)."""
        if s.orelse:
            raise Refusal("for ... else", "Remove the else block; test after the loop.",
                          s.orelse[0])
        call = s.iter
        if not (isinstance(call, ast.Call) and self._static(call.func) is builtins.range):
            raise Refusal("a for loop over something other than range()",
                          "Loop over indices: for i in range(len(x)): ... x[i].", s.iter)
        if call.keywords or not 1 <= len(call.args) <= 3:
            raise Refusal("range() takes 1 to 3 positional arguments",
                          "Write range(stop), range(start, stop) or range(start, stop, "
                          "step).", call)
        if not isinstance(s.target, ast.Name):
            raise Refusal("a for loop unpacking its target", "Loop over one name.", s.target)
        args = [self.expr(a) for a in call.args]
        start, stop, step = ([*args, Value(None, None, 1)])[:3] if len(args) > 1 else \
            (Value(None, None, 0), args[0], Value(None, None, 1))
        if len(args) == 3:
            step = args[2]
        if not step.weak or not isinstance(step.const, int) or isinstance(step.const, bool) \
                or step.const == 0 or not -2**31 <= step.const < 2**31:
            raise Refusal("range()'s step must be a non-zero int constant (an i32)",
                          "Write the step as a number, e.g. range(n, 0, -1).",
                          call.args[2] if len(call.args) == 3 else call)
        n = step.const
        for v, a in zip((start, stop), call.args[:2] if len(call.args) > 1 else
                        (call.args[0], call.args[0]), strict=True):
            if not v.weak and v.dtype is not DType.I32:
                raise Refusal(f"range() bound of type {v.dtype.value}: range variables are "
                              "i32", f"Cast it: i32({ast.unparse(a)}).", a)
            if v.weak and not isinstance(v.const, int):
                raise Refusal("a range() bound that is not an int",
                              f"Use an int, e.g. int({ast.unparse(a)}).", a)
            if v.weak and not -2**31 <= v.const < 2**31:
                raise Refusal(f"range() bound {v.const} is not an i32: range variables are i32",
                              "Use bounds from -2**31 to 2**31 - 1.", a)
        name = s.target.id
        trip_name = self.unit.fresh(f"{self.rename[name]}_trip")
        if start.weak and stop.weak:
            trip: Expr = Lit.of(DType.U32, len(range(start.const, stop.const, n)))
            first = values.settle(start, DType.I32)
        else:
            first = values.settle(start, DType.I32)
            if not isinstance(first.node, Lit):
                kept = self.unit.fresh(f"{self.rename[name]}_start")
                self.emit(Let(kept, first.node), s.iter)
                first = Value(Var(kept), DType.I32)
            last = values.settle(stop, DType.I32)
            lo, hi = (first, last) if n > 0 else (last, first)
            diff = Binary(BinOp.SUB, Cast(DType.U32, hi.node), Cast(DType.U32, lo.node))
            count = diff if abs(n) == 1 else Binary(BinOp.ADD, Binary(
                BinOp.DIV, Binary(BinOp.SUB, diff, Lit.of(DType.U32, 1)),
                Lit.of(DType.U32, abs(n))), Lit.of(DType.U32, 1))
            trip = Select(Binary(BinOp.GT, hi.node, lo.node), count, Lit.of(DType.U32, 0))
        counter: Expr = Cast(DType.I32, Var(trip_name))
        if n != 1:
            counter = Binary(BinOp.MUL, counter, Lit.of(DType.I32, n))
        if not (isinstance(first.node, Lit) and first.node.value == 0):
            counter = Binary(BinOp.ADD, first.node, counter)
        body_path = (*path, (k, "body"))
        out: list[Stmt] = []
        self.blocks.append(out)
        self.loops += 1
        try:
            declare = self.decls[name].kind == "for" and self.decls[name].path == body_path
            self.set_local(name, Value(counter, DType.I32), s.target, declare)
            self.block_into(out, s.body, body_path)
        finally:
            self.loops -= 1
            self.blocks.pop()
        self.emit(Loop(trip_name, Lit.of(DType.U32, 0), trip, tuple(out)), s)

    def while_(self, s: ast.While, path: flow.Path, k: int) -> None:
        if s.orelse:
            raise Refusal("while ... else", "Remove the else block; test after the loop.",
                          s.orelse[0])
        before: list[Stmt] = []  # (what the condition runs first: an atomic, a call's body)
        self.blocks.append(before)
        try:
            cond = values.truth(self.expr(s.test))
        finally:
            self.blocks.pop()
        self.loops += 1
        try:
            body = self.block(s.body, (*path, (k, "body")))
        finally:
            self.loops -= 1
        if before:  # (run before every test, as Python does: at the top of each pass)
            leave = If(Unary(UnOp.NOT, cond.node), (Break(),), ())
            self.unit.lines[id(leave)] = (self.source.file, self.source.line_of(s.test))
            body = (*before, leave, *body)
            cond = Value(Lit.of(DType.BOOL, True), DType.BOOL)
        self.emit(While(cond.node, body, WHILE_MAX_TRIPS), s)

    def shared(self, target: ast.AST, call: ast.Call) -> None:
        if self.inlined or len(self.blocks) != 1 or not isinstance(target, ast.Name):
            raise Refusal("vyre.shared() outside the kernel's top level",
                          "Declare shared arrays at the top of the kernel: "
                          "tile = vyre.shared(f32, 64).", call)
        self._no_keywords(call)
        if len(call.args) != 2:
            raise Refusal("vyre.shared takes a dtype and a count",
                          "Write vyre.shared(f32, 64).", call)
        dtype = self._static(call.args[0])
        count = self.expr(call.args[1])
        if not isinstance(dtype, DType) or not count.weak or not isinstance(count.const, int) \
                or count.const < 1:
            raise Refusal("vyre.shared needs a dtype and a constant count of at least 1",
                          "Write vyre.shared(f32, 64) (a module-level constant works).", call)
        if target.id in self.env:
            raise Refusal(f"{target.id!r} is declared twice", "Use another name.", target)
        self.unit.synchronizes = True
        self.unit.workgroup_buffers.append((target.id, dtype, count.const))
        self.unit.taken.add(target.id)
        self.env[target.id] = ArrayRef(target.id, dtype, count=count.const)


def _pos(node: ast.AST) -> dict[str, int]:
    return {"lineno": node.lineno, "col_offset": node.col_offset,
            "end_lineno": node.end_lineno, "end_col_offset": node.end_col_offset}
