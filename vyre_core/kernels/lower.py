"""A kernel's Python body -> IR statements: one visitor per statement and expression
form (docs/kernels.md, "Statements"). Anything else is refused at its node.

The lowering builds IR nodes itself, where the builder would guess at Python's meaning
from frame locals (docs/ir.md, "Assignment and scope"): here the function's source says
what each name means, so locals are declared where ``flow`` places them and assigned
where Python assigns them.

The visitors are written in rooms, mixins of ``Lowerer`` over ``unit._Lowering``:
``statements.py``, ``expressions.py`` and ``calls.py``; this module drives them and
inlines a called ``@vyre.func`` with a ``Lowerer`` of its own.
"""

from __future__ import annotations

import ast
from typing import Any

from vyre_core.ir.dtypes import DType
from vyre_core.ir.nodes import (
    Atomic,
    Barrier,
    Let,
    Lit,
    Load,
    Stmt,
    Store,
    Subgroup,
    Var,
    walk,
)
from vyre_core.kernels import flow, intrinsics, values
from vyre_core.kernels.calls import Calls
from vyre_core.kernels.expressions import Expressions
from vyre_core.kernels.scope import Scope, is_number
from vyre_core.kernels.source import Source
from vyre_core.kernels.statements import Statements
from vyre_core.kernels.unit import ArrayRef, Unit
from vyre_core.kernels.values import Refusal, Value

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


class Lowerer(Statements, Expressions, Calls):
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

    # -- inlining a @vyre.func --------------------------------------------------------

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

