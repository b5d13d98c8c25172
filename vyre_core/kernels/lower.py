"""A kernel's Python body -> IR statements: one visitor per statement and expression
form (docs/kernels.md, "Statements"). Anything else is refused at its node.

The lowering builds IR nodes itself, where the builder would guess at Python's meaning
from frame locals (docs/ir.md, "Assignment and scope"): here the function's source says
what each name means, so locals are declared where ``flow`` places them and assigned
where Python assigns them.
"""

from __future__ import annotations

import ast
import builtins
import math
from dataclasses import dataclass, field
from typing import Any

from vyre_core.errors import KernelSyntaxError
from vyre_core.ir import typerules
from vyre_core.ir.dtypes import DType
from vyre_core.ir.nodes import (
    SUBGROUP_LANE_OPS,
    Assign,
    Atomic,
    AtomicOp,
    Barrier,
    Binary,
    BinOp,
    Break,
    BufLen,
    Cast,
    Continue,
    Expr,
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
    Unary,
    UnOp,
    Var,
    While,
    walk,
)
from vyre_core.kernels import flow, intrinsics, values, workgroup
from vyre_core.kernels.scope import Capture, Scope, is_number
from vyre_core.kernels.source import Source
from vyre_core.kernels.values import Refusal, Value

#: A ``while`` loop's pass bound: the IR needs one; this is the largest (docs/kernels.md).
WHILE_MAX_TRIPS = 2**32 - 1

#: ``math`` functions of one float the IR has, by function.
_MATH_UNARY = {math.sqrt: UnOp.SQRT, math.exp: UnOp.EXP, math.log: UnOp.LOG,
               math.sin: UnOp.SIN, math.cos: UnOp.COS, math.tan: UnOp.TAN,
               math.tanh: UnOp.TANH, math.log2: UnOp.LOG2}
if hasattr(math, "exp2"):
    _MATH_UNARY[math.exp2] = UnOp.EXP2
#: ``math`` functions Python gives an int for: the IR's rounding, then i32.
_MATH_TO_INT = {math.floor: UnOp.FLOOR, math.ceil: UnOp.CEIL, math.trunc: UnOp.TRUNC}
_MATH_BINARY = {math.pow: BinOp.POW, math.atan2: BinOp.ATAN2}
_MATH_TEST = {math.isnan: UnOp.ISNAN, math.isinf: UnOp.ISINF}

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
           ast.Mod: "%", ast.Pow: "**", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^",
           ast.LShift: "<<", ast.RShift: ">>"}
_CMPOPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">",
           ast.GtE: ">="}
_UNARY = {ast.USub: "-", ast.UAdd: "+", ast.Invert: "~", ast.Not: "not"}

#: Python forms a kernel refuses, with the cause and the Fix.
_REFUSED: dict[type, tuple[str, str]] = {
    ast.List: ("a list", "Use an array parameter (vyre.Array[f32]) or vyre.shared(f32, n)."),
    ast.Tuple: ("a tuple as a value", "Assign each element: r, c = a, b unpacks directly."),
    ast.Dict: ("a dict", "Use arrays and scalars."),
    ast.Set: ("a set", "Use arrays and scalars."),
    ast.ListComp: ("a comprehension", "Write a for loop over range()."),
    ast.SetComp: ("a comprehension", "Write a for loop over range()."),
    ast.DictComp: ("a comprehension", "Write a for loop over range()."),
    ast.GeneratorExp: ("a generator expression", "Write a for loop over range()."),
    ast.Lambda: ("a lambda", "Define a function with @vyre.func and call it."),
    ast.JoinedStr: ("an f-string", "Kernels have no strings; remove it."),
    ast.Await: ("await", "Kernels are not async; remove it."),
    ast.Yield: ("yield", "A kernel writes its results to arrays; store them."),
    ast.YieldFrom: ("yield", "A kernel writes its results to arrays; store them."),
    ast.NamedExpr: ("an assignment expression (:=)", "Assign in a statement of its own."),
    ast.Starred: ("a starred expression", "Pass each argument on its own."),
    ast.Slice: ("a slice", "Index one element at a time, in a for loop over range()."),
    ast.Try: ("try", "Kernels raise nothing; remove the try and check values with if."),
    ast.With: ("with", "Remove the with block; write its body directly."),
    ast.AsyncWith: ("async with", "Kernels are not async; remove it."),
    ast.AsyncFor: ("async for", "Use for v in range(...)."),
    ast.AsyncFunctionDef: ("an async function", "Kernels are not async; remove async."),
    ast.FunctionDef: ("a nested function", "Define it at module level with @vyre.func."),
    ast.ClassDef: ("a class", "Define it outside the kernel."),
    ast.Global: ("global", "Pass the value as a parameter; kernels write arrays only."),
    ast.Nonlocal: ("nonlocal", "Pass the value as a parameter; kernels write arrays only."),
    ast.Delete: ("del", "Remove it: a local lives for the whole kernel."),
    ast.Raise: ("raise", "Kernels raise nothing; write a flag to an array instead."),
    ast.Assert: ("assert", "Kernels raise nothing; write a flag to an array instead."),
    ast.Import: ("import", "Import at module level."),
    ast.ImportFrom: ("import", "Import at module level."),
    ast.Match: ("match", "Use if/elif/else."),
}
if hasattr(ast, "TryStar"):
    _REFUSED[ast.TryStar] = _REFUSED[ast.Try]


def refuse_unsupported(tree: ast.AST) -> None:
    """The first node of a form a kernel never accepts, refused before anything else."""
    allowed = set()  # tuples that unpack (r, c = a, b) or index axes (a[i, j])
    tree = ast.Module(body=tree.body, type_ignores=[])  # (not the decorators)
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple):
            allowed.update({id(node.targets[0]), id(node.value)})
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple):
            allowed.add(id(node.slice))
    for node in ast.walk(tree):
        if type(node) in _REFUSED and node is not tree and id(node) not in allowed:
            what, fix = _REFUSED[type(node)]
            raise Refusal(f"{what} is not supported in a kernel", fix, node)


#: A flat index past every array (a buffer holds at most 2**32 - 1 elements): where an
#: element index outside its axis points, so its load reads 0 and its store is dropped.
OUTSIDE = 2**32 - 1


@dataclass
class ArrayRef:
    """An array a kernel names: a buffer, its element type and axes. ``shapes`` is the
    offset of its extents in the hidden launch buffer (shaped arrays), ``count`` a shared
    array's length."""

    name: str
    dtype: DType
    ndim: int = 1
    shapes: int | None = None
    count: int | None = None


@dataclass
class Unit:
    """What one kernel's lowering shares with the functions it inlines: the buffers it
    writes, the names taken, the shared arrays, the line of each statement."""

    taken: set[str]
    launch_buffer: str
    workgroup_buffers: list[tuple[str, DType, int]] = field(default_factory=list)
    written: set[str] = field(default_factory=set)
    lines: dict[int, tuple[str, int]] = field(default_factory=dict)
    inlining: list[Any] = field(default_factory=list)
    subgroup_size: int | None = None
    #: the kernel's workgroup, and the workgroup buffer its workgroup reductions and scans
    #: use, by type (``workgroup.py``)
    workgroup: tuple[int, ...] = (1,)
    scratch: dict[DType, str] = field(default_factory=dict)
    #: whether it synchronizes a workgroup (a barrier, a shared array, a subgroup
    #: operation): then every invocation of a workgroup runs, and none is dropped
    synchronizes: bool = False
    #: what the kernel and its functions read from outside their bodies, by (scope, path)
    captures: dict[tuple[int, tuple[str, ...]], Capture] = field(default_factory=dict)

    def capture(self, scope: Scope, path: tuple[str, ...], value: Any) -> None:
        """Note that the lowering read ``value`` at ``path`` of ``scope``."""
        self.captures.setdefault((id(scope), path), Capture(scope, path, value))

    def fresh(self, base: str) -> str:
        """A variable name no parameter, local or earlier fresh name has (deterministic:
        the program's fingerprint depends on it)."""
        name, n = base, 1
        while name in self.taken:
            n += 1
            name = f"{base}_{n}"
        self.taken.add(name)
        return name


class Lowerer:
    """Lowers one function body. ``env`` holds the parameters (arrays, scalar values);
    ``rename`` maps the function's locals to IR names (an inlined function's are fresh)."""

    def __init__(self, source: Source, unit: Unit, env: dict[str, Any],
                 scope: Scope, inlined: bool = False) -> None:
        self.source = source
        self.unit = unit
        self.env = env
        self.scope = scope
        self.inlined = inlined
        self.types: dict[str, DType] = {}
        self.blocks: list[list[Stmt]] = []
        self.loops = 0
        self.in_select = 0
        body = source.tree.body
        self.locals: set[str] = set()
        self.locals = flow.local_names(body) - self._shared_targets(body)
        #: an inlined function's scalar parameters it assigns: locals, copies of their
        #: arguments declared first (as a Python parameter is a local of its call)
        self.copies: dict[str, Value] = {}
        for name in sorted(self.locals & set(env)):
            if inlined and isinstance(env[name], Value):
                self.copies[name] = env.pop(name)
                continue
            node = next(n for n in ast.walk(source.tree) if isinstance(n, ast.Name)
                        and n.id == name and isinstance(n.ctx, ast.Store))
            what = "array parameter" if isinstance(env[name], ArrayRef) else "parameter"
            raise source.error(node, f"assigns {what} {name!r}",
                               "Assign a new local instead (y = x * 2); to write an array "
                               "element, index it: x[i] = v.")
        self.rename = {n: (unit.fresh(f"{source.tree.name}_{n}") if inlined else n)
                       for n in sorted(self.locals)}
        self.decls = flow.declarations(body, self.locals)
        for name in self.copies:  # declared before the body: every use assigns it
            self.decls[name] = flow.Declaration((), -1, "copy")
        self.result: Value | None = None

    def _shared_targets(self, body: list[ast.stmt]) -> set[str]:
        found = set()
        for s in body:
            if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call):
                try:
                    fn = self._static(s.value.func)
                except Refusal:
                    continue
                if fn is intrinsics.shared:
                    found.update(n for t in s.targets for n in flow._assigned_names(t))
        return found

    # -- driving -----------------------------------------------------------------------

    def run(self, out: list[Stmt]) -> Value | None:
        """Lower the body into ``out``; a ``KernelSyntaxError`` at the first refusal."""
        body = self.source.tree.body
        try:
            refuse_unsupported(self.source.tree)
            flow.Assigned(self.locals).block(body, set(self.copies))
            self.blocks.append(out)
            for name, v in self.copies.items():
                self.set_local(name, v, self.source.tree, declare=True)
            self.block_into(out, body, ())
        except Refusal as r:
            raise self.source.error(r.node or self.source.tree, r.cause, r.fix) from None
        return self.result

    def block(self, body: list[ast.stmt], path: flow.Path) -> tuple[Stmt, ...]:
        out: list[Stmt] = []
        self.blocks.append(out)
        try:
            self.block_into(out, body, path)
        finally:
            self.blocks.pop()
        return tuple(out)

    def block_into(self, out: list[Stmt], body: list[ast.stmt], path: flow.Path) -> None:
        zeros: dict[int, list[str]] = {}
        for name, d in self.decls.items():
            if d.path == path and d.kind == "zero":
                zeros.setdefault(d.index, []).append(name)
        for k, s in enumerate(body):
            if k and isinstance(body[k - 1], ast.Return | ast.Break | ast.Continue):
                jump = type(body[k - 1]).__name__.lower()
                raise Refusal(f"this statement follows a {jump} in the same block: it never "
                              "runs", f"Remove it, or put the {jump} in an if.", s)
            start = len(out)
            try:
                self.stmt(s, path, k)
            except Refusal as r:
                r.node = r.node or s
                raise
            for name in sorted(zeros.get(k, ())):
                dtype = self.types.get(name)
                if dtype is None:
                    raise Refusal(f"{name!r} is never given a value here",
                                  f"Assign {name} a value before it is used.", s)
                let = Let(self.rename[name], Lit.of(dtype, 0))
                out.insert(start, let)
                self.unit.lines[id(let)] = (self.source.file, self.source.line_of(s))

    def emit(self, stmt: Stmt, node: ast.AST) -> None:
        self.blocks[-1].append(stmt)
        self.unit.lines[id(stmt)] = (self.source.file, self.source.line_of(node))

    def _effects_since(self, start: int) -> bool:
        """Whether the statements emitted since ``start`` write memory (a called
        function's store or atomic) or wait at a barrier."""
        return any(isinstance(n, Store | Atomic | Barrier)
                   for n in walk(tuple(self.blocks[-1][start:])))

    def read_before(self, earlier: Value, start: int) -> Value:
        """``earlier``, an operand Python evaluates before the statements emitted since
        ``start``: where those write memory and it reads memory, its value kept in a fresh
        variable declared before them, so it reads what Python reads."""
        if earlier.weak or not self._effects_since(start) or \
                not any(isinstance(n, Load) for n in walk((earlier.node,))):
            return earlier
        name = self.unit.fresh("read")
        let = Let(name, earlier.node)
        where = self.unit.lines.get(id(self.blocks[-1][start]))
        self.blocks[-1].insert(start, let)
        if where is not None:  # (the line of the call it is read before)
            self.unit.lines[id(let)] = where
        return Value(Var(name), earlier.dtype)

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

    # -- expressions -------------------------------------------------------------------

    def expr(self, node: ast.AST) -> Value:
        try:
            found = self._expr(node)
        except Refusal as r:
            r.node = r.node or node
            raise
        return self.as_value(found, node)

    def as_value(self, found: Any, node: ast.AST) -> Value:
        """What ``_expr`` found at ``node`` as a value (an array or a function is not)."""
        if isinstance(found, Value):
            if found.weak and found.const is None:
                raise Refusal(f"{ast.unparse(node)} has no value: the function returns none",
                              "Return a value as the function's last statement: return v.",
                              node)
            return found
        if isinstance(found, ArrayRef):
            raise Refusal(f"array {found.name!r} used as a value",
                          f"Index it: {found.name}[i], or take len({found.name}).", node)
        return values.number(found) if is_number(found) else _not_a_value(found, node)

    def _expr(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool | int | float):
                return Value(None, None, node.value)
            raise Refusal(f"{type(node.value).__name__} constant {node.value!r} in a kernel",
                          "Kernels compute numbers only.", node)
        if isinstance(node, ast.Name):
            return self.name(node)
        if isinstance(node, ast.Attribute):
            base = self._expr(node.value)
            if isinstance(base, ArrayRef) and node.attr == "shape":
                return ("shape", base)
            if isinstance(base, Value | ArrayRef | tuple):
                raise Refusal(f"attribute .{node.attr} of a kernel value",
                              "Arrays have .shape; values have no attributes.", node)
            if not hasattr(base, node.attr):
                raise Refusal(f"{ast.unparse(node)} does not exist", "Correct the name.", node)
            found = getattr(base, node.attr)
            path = self._outer_path(node)
            if path is not None and is_number(found):   # (cfg.N: rebound later, noted)
                self.unit.capture(self.scope, path, found)
            return found
        if isinstance(node, ast.Subscript):
            return self.subscript(node)
        if isinstance(node, ast.BinOp):
            left = self.expr(node.left)
            start = len(self.blocks[-1])
            right = self.expr(node.right)
            return values.binop(_BINOPS[type(node.op)], self.read_before(left, start), right,
                                (ast.unparse(node.left), ast.unparse(node.right)))
        if isinstance(node, ast.UnaryOp):
            return values.unary(_UNARY[type(node.op)], self.expr(node.operand))
        if isinstance(node, ast.BoolOp):
            symbol = "and" if isinstance(node.op, ast.And) else "or"
            self.in_select += 1
            try:
                result = self.expr(node.values[0])
                for operand in node.values[1:]:
                    result = values.logical(symbol, result, self.expr(operand))
            finally:
                self.in_select -= 1
            return result
        if isinstance(node, ast.Compare):
            return self.compare(node)
        if isinstance(node, ast.IfExp):
            self.in_select += 1
            try:
                return values.select(self.expr(node.test), self.expr(node.body),
                                     self.expr(node.orelse))
            finally:
                self.in_select -= 1
        if isinstance(node, ast.Call):
            return self.call(node)
        raise Refusal(f"{type(node).__name__} is not supported in a kernel",
                      "See the expressions docs/kernels.md lists.", node)

    def name(self, node: ast.Name) -> Any:
        if node.id in self.locals:
            return Value(Var(self.rename[node.id]), self.types[node.id])
        if node.id in self.env:
            return self.env[node.id]
        return self.outer(node.id, node)

    def outer(self, name: str, node: ast.AST) -> Any:
        """What ``name`` names outside the function (noted: a launch after it is rebound
        compiles the kernel again)."""
        found = self.scope(name, node)
        self.unit.capture(self.scope, (name,), found)
        return found

    def _outer_path(self, node: ast.AST) -> tuple[str, ...] | None:
        """``a.b.c`` as ("a", "b", "c") when ``a`` is a name from outside the function."""
        if isinstance(node, ast.Attribute):
            base = self._outer_path(node.value)
            return None if base is None else (*base, node.attr)
        if isinstance(node, ast.Name) and node.id not in self.locals and \
                node.id not in self.env:
            return (node.id,)
        return None

    def _static(self, node: ast.AST) -> Any:
        """The Python object a name or attribute chain names (a function, a dtype)."""
        if isinstance(node, ast.Name) and node.id not in self.locals and node.id not in self.env:
            return self.outer(node.id, node)
        if isinstance(node, ast.Attribute):
            base = self._static(node.value)
            return getattr(base, node.attr, None)
        return None

    def compare(self, node: ast.Compare) -> Value:
        """``a < b < c`` is ``a < b and b < c`` with ``b`` evaluated once (expressions
        have no effects, so its node serves both)."""
        left = self.expr(node.left)
        result = None
        sources = [node.left, *node.comparators]
        for i, (op, right_node) in enumerate(zip(node.ops, node.comparators, strict=True)):
            if type(op) not in _CMPOPS:
                raise Refusal(f"{type(op).__name__} (in, is) in a kernel",
                              "Compare values with == != < <= > >=.", node)
            start = len(self.blocks[-1])
            right = self.expr(right_node)
            left = self.read_before(left, start)
            if result is not None:
                result = self.read_before(result, start)
            test = values.compare(_CMPOPS[type(op)], left, right,
                                  (ast.unparse(sources[i]), ast.unparse(right_node)))
            result = test if result is None else values.logical("and", result, test)
            left = right
        return result

    def subscript(self, node: ast.Subscript) -> Any:
        base = self._expr(node.value)
        if isinstance(base, tuple) and base[0] == "shape":
            axis = self.expr(node.slice)
            if not axis.weak or not isinstance(axis.const, int) or not \
                    0 <= axis.const < base[1].ndim:
                raise Refusal(f"{base[1].name}.shape takes a constant axis from 0 to "
                              f"{base[1].ndim - 1}", f"Write {base[1].name}.shape[0].", node)
            return self.extent(base[1], axis.const)
        if isinstance(base, list | tuple | dict | set):
            _not_a_value(base, node.value)
        if not isinstance(base, ArrayRef):
            raise Refusal(f"{ast.unparse(node.value)}[...] indexes something that is not an "
                          "array", "Index array parameters and shared arrays only.", node)
        return Value(Load(base.name, self.index(base, node.slice)), base.dtype)

    def array_of(self, node: ast.AST) -> ArrayRef:
        base = self._expr(node)
        if not isinstance(base, ArrayRef):
            raise Refusal(f"{ast.unparse(node)} is not an array", "Index array parameters "
                          "(vyre.Array[...]) or shared arrays.", node)
        return base

    def extent(self, array: ArrayRef, axis: int) -> Value:
        """``a.shape[axis]`` as an i32: a shared array's count, a flat array's length, a
        shaped one's extent from the hidden launch buffer."""
        if array.count is not None:
            return Value(Lit.of(DType.I32, array.count), DType.I32)
        if array.shapes is None:
            return Value(Cast(DType.I32, BufLen(array.name)), DType.I32)
        return Value(Cast(DType.I32, self._extent_u32(array, axis)), DType.I32)

    def _extent_u32(self, array: ArrayRef, axis: int) -> Expr:
        return Load(self.unit.launch_buffer, Lit.of(DType.U32, array.shapes + axis))

    def _one_index(self, node: ast.AST) -> Expr:
        v = self.expr(node)
        if v.weak:
            if not isinstance(v.const, int) or isinstance(v.const, bool) or v.const < 0:
                raise Refusal(f"index {v.const!r}: an index is a non-negative int (arrays "
                              "are not indexed from the end)",
                              "Use an index from 0 to len(a) - 1.", node)
            return Lit.of(DType.U32, v.const)
        if v.dtype is DType.U32:
            return v.node
        if v.dtype is DType.I32:
            return Cast(DType.U32, v.node)
        raise Refusal(f"a {v.dtype.value} index", f"Index with an int: "
                      f"{ast.unparse(node)} as i32({ast.unparse(node)}) or a u32.", node)

    def index(self, array: ArrayRef, node: ast.AST) -> Expr:
        """The flat element index (u32): ``a[i]``, or ``a[i, j]`` in numpy's row-major
        order, ``u32(i) * shape[1] + u32(j)``; an index outside its axis (below 0 or past
        the extent) makes the element out of bounds, not another row's (the first axis
        through the flat index, each later one by a compare that selects ``OUTSIDE``)."""
        axes = node.elts if isinstance(node, ast.Tuple) else [node]
        if len(axes) != array.ndim:
            raise Refusal(f"{len(axes)} index(es) for {array.name!r}, which has "
                          f"{array.ndim} axes", f"Give one index per axis: "
                          f"{array.name}[{', '.join('ijk'[:array.ndim])}].", node)
        flat = self._one_index(axes[0])
        inside: Expr | None = None
        for axis, i in enumerate(axes[1:], start=1):
            extent, j = self._extent_u32(array, axis), self._one_index(i)
            flat = Binary(BinOp.ADD, Binary(BinOp.MUL, flat, extent), j)
            fits = Binary(BinOp.LT, j, extent)
            inside = fits if inside is None else Binary(BinOp.LOGICAL_AND, inside, fits)
        return flat if inside is None else Select(inside, flat, Lit.of(DType.U32, OUTSIDE))

    # -- calls -------------------------------------------------------------------------

    def _no_keywords(self, call: ast.Call) -> None:
        if call.keywords:
            kw = call.keywords[0]
            raise Refusal(f"keyword argument {kw.arg}= is not supported here",
                          "Pass the arguments by position.", kw)

    def _no_args(self, call: ast.Call, n: int) -> None:
        self._no_keywords(call)
        if len(call.args) != n:
            raise Refusal(f"{ast.unparse(call.func)}() takes {n} argument(s), got "
                          f"{len(call.args)}", "Pass exactly those arguments.", call)

    def call(self, node: ast.Call) -> Value:
        fn = self._expr(node.func)
        if isinstance(fn, DType):
            self._no_args(node, 1)
            return values.cast(self.expr(node.args[0]), fn)
        if fn in intrinsics.IDS:
            self._no_keywords(node)
            axis = self.expr(node.args[0]) if node.args else Value(None, None, 0)
            if len(node.args) > 1 or not axis.weak or axis.const not in (0, 1, 2):
                raise Refusal("an id's axis is 0, 1 or 2, a constant",
                              "Write vyre.global_id(0).", node)
            return Value(Cast(DType.I32, InvocationId(IdKind(intrinsics.IDS[fn]), axis.const)),
                         DType.I32)
        if fn is intrinsics.bitcast:
            self._no_args(node, 2)
            dtype = self._expr(node.args[1])
            if not isinstance(dtype, DType):
                raise Refusal(f"vyre.bitcast() to {ast.unparse(node.args[1])}, not a type",
                              "Name a vyre type: vyre.bitcast(x, vyre.u32).", node.args[1])
            return values.bitcast(self.expr(node.args[0]), dtype)
        if fn in intrinsics.ATOMICS:
            atomic, dtype = self.atomic(node)
            name = self.unit.fresh("atomic")
            self.emit(Let(name, atomic), node)
            return Value(Var(name), dtype)
        if fn in intrinsics.SUBGROUPS:
            return self.subgroup(fn, node)
        if fn in intrinsics.WORKGROUP_OPS:
            raise Refusal(f"vyre.{fn.__name__}() inside an expression",
                          f"Assign it to a name of its own, on a line where every invocation "
                          f"of the workgroup runs: s = vyre.{fn.__name__}(v).", node)
        if fn in (intrinsics.barrier, intrinsics.shared):
            raise Refusal(f"vyre.{fn.__name__}() used as a value",
                          "vyre.barrier() is a statement of its own; assign vyre.shared(f32, "
                          "64) to a name at the kernel's top level.", node)
        if _is_func(fn):
            return self.inline(fn, node)
        return self.builtin(fn, node)

    def builtin(self, fn: Any, node: ast.Call) -> Value:
        self._no_keywords(node)
        args = node.args
        if fn is len:
            self._no_args(node, 1)
            return self.extent(self.array_of(args[0]), 0)
        if fn in (min, max):
            if len(args) < 2:
                raise Refusal(f"{fn.__name__}() of fewer than two values",
                              f"Write {fn.__name__}(a, b).", node)
            result = self.expr(args[0])
            for a in args[1:]:
                op = BinOp.MIN if fn is min else BinOp.MAX
                v = self.expr(a)
                result = values.Value(None, None, fn(result.const, v.const)) \
                    if result.weak and v.weak else \
                    values.binary_function(op, result, v, fn.__name__)
            return result
        if fn is abs:
            self._no_args(node, 1)
            v = self.expr(args[0])
            if v.weak:
                return Value(None, None, abs(v.const))
            return values.Value(values.function(UnOp.ABS, v, "abs").node, v.dtype) \
                if v.dtype.is_numeric else _refuse_type("abs", v, node)
        if fn in (float, int, bool):
            self._no_args(node, 1)
            v = self.expr(args[0])
            if fn is bool:
                return values.truth(v)
            return values.cast(v, DType.F32 if fn is float else DType.I32)
        if fn is round:
            self._no_args(node, 1)
            return values.cast(values.function(UnOp.ROUND, self.expr(args[0]), "round"),
                               DType.I32)
        if fn in _MATH_UNARY or fn in _MATH_TEST or fn in _MATH_TO_INT:
            self._no_args(node, 1)
            op = _MATH_UNARY.get(fn) or _MATH_TEST.get(fn) or _MATH_TO_INT[fn]
            v = values.function(op, self.expr(args[0]), f"math.{fn.__name__}")
            return values.cast(v, DType.I32) if fn in _MATH_TO_INT else v
        if fn in _MATH_BINARY:
            self._no_args(node, 2)
            a, b = (self.expr(x) for x in args)
            a = values.settle(a, DType.F32) if a.weak and b.weak else a
            return values.binary_function(_MATH_BINARY[fn], a, b, f"math.{fn.__name__}")
        if fn is range:
            raise Refusal("range() outside a for statement", "Loop: for i in range(n):.", node)
        if fn is print:
            raise Refusal("print() in a kernel", "Write the values to an output array and "
                          "print them after the launch.", node)
        what = getattr(fn, "__name__", type(fn).__name__)
        raise Refusal(f"{what}() cannot be called in a kernel",
                      "Call the functions docs/kernels.md lists, or a function marked "
                      "@vyre.func.", node)

    def atomic(self, node: ast.Call) -> tuple[Atomic, DType]:
        """An atomic on an array element, and the type of the old value it returns."""
        if self.in_select:
            raise Refusal("an atomic inside and/or/if-else: both sides of those are "
                          "evaluated, so the atomic would always run",
                          "Run the atomic in an if statement of its own.", node)
        fn = self._static(node.func)
        op = AtomicOp(intrinsics.ATOMICS[fn])
        n = 4 if op is AtomicOp.COMPARE_EXCHANGE else 3
        self._no_args(node, n)
        array = self.array_of(node.args[0])
        if array.dtype not in (DType.U32, DType.I32):
            raise Refusal(f"an atomic on {array.dtype.value} array {array.name!r}",
                          "Atomics work on u32 and i32 arrays.", node.args[0])
        index = self.index(array, node.args[1])
        operands = []
        for a in node.args[2:]:
            v = self.expr(a)
            v = values.settle(v, array.dtype) if v.weak else v
            if v.dtype is not array.dtype:
                raise Refusal(f"a {v.dtype.value} value for an atomic on {array.dtype.value} "
                              f"array {array.name!r}", f"Cast it: {array.dtype.value}(...).", a)
            operands.append(v.node)
        self.unit.written.add(array.name)
        if op is AtomicOp.COMPARE_EXCHANGE:
            expected, value = operands
            return Atomic(op, array.name, index, value, expected), array.dtype
        return Atomic(op, array.name, index, operands[0]), array.dtype

    def subgroup(self, fn: Any, node: ast.Call) -> Value:
        """A subgroup operation over the kernel's ``subgroup_size``, typed as the IR types
        it (typerules.subgroup_result); a number alone is an ``i32``, a lane a ``u32``."""
        size = self.unit.subgroup_size
        if size is None:
            raise Refusal(f"vyre.{fn.__name__}() in a kernel that declares no subgroup size",
                          "Declare one: @vyre.kernel(workgroup=(64,), subgroup_size=8) "
                          "(routing sends the program to a backend that forms subgroups "
                          "of that size).", node)
        self.unit.synchronizes = True
        op = SubgroupOp(intrinsics.SUBGROUPS[fn])
        self._no_args(node, 0 if op is SubgroupOp.ELECT else
                      2 if op in SUBGROUP_LANE_OPS else 1)
        value = lane = None
        if node.args:
            value = values.settle(self.expr(node.args[0]))
        if len(node.args) == 2:
            lane = self.expr(node.args[1])
            lane = values.settle(lane, DType.U32) if lane.weak else lane
            if lane.dtype is not DType.U32:
                raise Refusal(f"the lane of vyre.{fn.__name__}() is a {lane.dtype.value}",
                              "Give a u32 lane: u32(...).", node.args[1])
        dtype = typerules.subgroup_result(op, None if value is None else value.dtype,
                                          None if lane is None else lane.dtype)
        if dtype is None:
            raise Refusal(f"vyre.{fn.__name__}() of a {value.dtype.value}",
                          "Pass the types the subgroup table of docs/semantics.md lists "
                          "(i32/u32 to reduce and scan; u32, i32, f32 to move; a bool to "
                          "ballot), casting if need be: i32(v).", node.args[0])
        return Value(Subgroup(op, size, None if value is None else value.node,
                              None if lane is None else lane.node), dtype)

    def workgroup(self, node: ast.Call) -> Value:
        """``vyre.workgroup_<op>(v)``: its statements (``workgroup.expand``) over a
        workgroup buffer of the value's type, one per type for the whole kernel."""
        fn = self._static(node.func)
        self._no_args(node, 1)
        value = values.settle(self.expr(node.args[0]))
        if value.dtype is DType.BOOL:
            raise Refusal(f"vyre.{fn.__name__}() of a bool",
                          "Reduce numbers: i32(flag) counts the invocations where flag "
                          "holds.", node.args[0])
        self.unit.synchronizes = True
        scratch = self.unit.scratch.get(value.dtype)
        if scratch is None:
            scratch = self.unit.scratch[value.dtype] = self.unit.fresh(
                f"workgroup_{value.dtype.value}")
            self.unit.workgroup_buffers.append((scratch, value.dtype,
                                                math.prod(self.unit.workgroup)))
        stmts, result = workgroup.expand(intrinsics.WORKGROUP_OPS[fn], value.node,
                                         value.dtype, self.unit.workgroup, scratch,
                                         self.unit.fresh)
        for stmt in stmts:
            self.emit(stmt, node)
        return Value(Var(result), value.dtype)

    def argument(self, fn_name: str, param: str, node: ast.AST) -> Any:
        """One argument of an inlined call, evaluated once, before the body (Python's
        order): an array by reference; a value that reads memory (a load, a subgroup
        operation) kept in a fresh variable, so that a store in the body does not change
        it, nor does a branch of the body move it."""
        try:
            found = self._expr(node)
        except Refusal as r:
            r.node = r.node or node
            raise
        if isinstance(found, ArrayRef):
            return found
        v = self.as_value(found, node)
        if v.weak or not any(isinstance(n, Load | Subgroup) for n in walk([v.node])):
            return v
        kept = self.unit.fresh(f"{fn_name}_{param}_arg")
        self.emit(Let(kept, v.node), node)
        return Value(Var(kept), v.dtype)

    def inline(self, fn: Any, node: ast.Call) -> Value:
        """A ``@vyre.func`` call: its body lowered here, its locals renamed, its
        parameters bound to the arguments (arrays by reference, values as expressions:
        they have no effects). Recursion is refused."""
        self._no_keywords(node)
        if fn in self.unit.inlining:
            raise Refusal(f"{fn.__name__} calls itself (recursion)",
                          "Write the recursion as a loop.", node)
        source = fn.source
        params = [a.arg for a in source.tree.args.args]
        defaults = fn.fn.__defaults__ or ()
        least = len(params) - len(defaults)
        if not least <= len(node.args) <= len(params) or source.tree.args.vararg or \
                source.tree.args.kwonlyargs:
            takes = f"{least} to {len(params)}" if defaults else f"{len(params)}"
            raise Refusal(f"{fn.__name__}() takes {takes} positional argument(s), got "
                          f"{len(node.args)}", "Pass one argument per parameter (those "
                          "with a default may be left off the end).", node)
        env: dict[str, Any] = {}
        for p, a in zip(params, node.args, strict=False):
            env[p] = self.argument(source.tree.name, p, a)
        for p, default in zip(params[len(node.args):], defaults[len(node.args) - least:],
                              strict=True):
            if not is_number(default):
                raise Refusal(f"{fn.__name__}() parameter {p!r} defaults to a "
                              f"{type(default).__name__}: a default fills a value, so it "
                              "must be a number", f"Pass {p} in the call, or give it a "
                              "number as its default.", node)
            env[p] = values.number(default)
        inner = Lowerer(source, self.unit, env, fn.scope, inlined=True)
        inner.loops = 0
        self.unit.inlining.append(fn)
        start = len(self.blocks[-1])
        try:
            result = inner.run(self.blocks[-1])
        finally:
            self.unit.inlining.pop()
        if self.in_select:
            effects = sorted({type(n).__name__.lower() for n in walk(tuple(
                self.blocks[-1][start:])) if isinstance(n, Store | Atomic | Barrier)})
            if effects:
                raise Refusal(f"a call of {fn.__name__}() inside and/or/if-else, whose body "
                              f"has a {' and a '.join(effects)}: both sides of those are "
                              "evaluated, so it would always run",
                              f"Call {fn.__name__}() in an if statement of its own.", node)
        if result is None:
            return Value(None, None, None)
        return result


def _pos(node: ast.AST) -> dict[str, int]:
    return {"lineno": node.lineno, "col_offset": node.col_offset,
            "end_lineno": node.end_lineno, "end_col_offset": node.end_col_offset}


def _is_func(fn: Any) -> bool:
    return getattr(fn, "__vyre_func__", False)


def _refuse_type(what: str, v: Value, node: ast.AST) -> Value:
    raise Refusal(f"{what} of a {v.dtype.value}", "Use a number.", node)


def _not_a_value(found: Any, node: ast.AST) -> Value:
    what = type(found).__name__
    if isinstance(found, list | dict | set | tuple):
        raise Refusal(f"{ast.unparse(node)} is a {what} from outside the kernel: a kernel "
                      "captures numbers only",
                      "Pass it as an array parameter (np.asarray(...)) or make it a number.",
                      node)
    raise Refusal(f"{ast.unparse(node)} is a {what}, not a kernel value",
                  "Kernels use numbers, arrays, dtypes and the vyre functions.", node)


__all__ = ["ArrayRef", "KernelSyntaxError", "Lowerer", "Unit"]
