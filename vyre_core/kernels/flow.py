"""Where each local of a kernel is declared, and the check that it is assigned before it
is read (docs/kernels.md, "Locals").

Python's locals live for the whole function; the IR's variables live in the block that
declares them. A local is declared in the innermost block holding every use of it: by
its first statement there when that is a plain assignment of it, else as a zero just
before the statement of that block that first mentions it. A read of a local that is not
assigned on every path to it is refused, so the zero is never read.

A block is named by its path from the function's body: ``((3, "body"), (0, "orelse"))``
is the else block of the first statement of the body of the fourth statement.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from vyre_core.kernels.values import Refusal

Path = tuple[tuple[int, str], ...]
_FIELDS = ("body", "orelse")


@dataclass(frozen=True)
class Declaration:
    """``kind`` "let": the statement ``index`` of block ``path`` declares it; "zero": a
    zero is declared just before that statement; "for": it is a loop's variable,
    declared first thing in that loop's body ``path``; "copy": an inlined function's
    parameter it assigns, declared before its body from the argument."""

    path: Path
    index: int
    kind: str


def _assigned_names(target: ast.AST) -> Iterator[str]:
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, ast.Tuple | ast.List):
        for element in target.elts:
            yield from _assigned_names(element)


def _names(node: ast.AST | None) -> Iterator[ast.Name]:
    if node is not None:
        yield from (n for n in ast.walk(node) if isinstance(n, ast.Name))


def local_names(body: list[ast.stmt]) -> set[str]:
    """Every name the body assigns (Python's rule for what is local)."""
    found: set[str] = set()
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                found.update(_assigned_names(t))
        elif isinstance(node, ast.AugAssign | ast.AnnAssign | ast.For):
            found.update(_assigned_names(node.target))
    return found


def _own_expressions(s: ast.stmt) -> list[ast.AST]:
    """The expressions of ``s`` evaluated in its own block (not its nested bodies)."""
    if isinstance(s, ast.If | ast.While):
        return [s.test]
    if isinstance(s, ast.For):
        return [s.iter]
    return [s]


def _occurrences(body: list[ast.stmt], path: Path = ()) -> Iterator[tuple[str, Path, int]]:
    for k, s in enumerate(body):
        for expr in _own_expressions(s):
            for name in _names(expr):
                yield name.id, path, k
        if isinstance(s, ast.For):
            for name in _assigned_names(s.target):
                yield name, (*path, (k, "body")), -1
        if isinstance(s, ast.If | ast.For | ast.While):
            for field in _FIELDS:
                yield from _occurrences(getattr(s, field), (*path, (k, field)))


def declarations(body: list[ast.stmt], names: set[str]) -> dict[str, Declaration]:
    """Where each of ``names`` (the locals) is declared."""
    found: dict[str, list[tuple[Path, int]]] = {}
    for name, path, k in _occurrences(body):
        if name in names:
            found.setdefault(name, []).append((path, k))
    decls: dict[str, Declaration] = {}
    for name, places in found.items():
        home = places[0][0]
        for path, _ in places[1:]:
            n = 0
            while n < min(len(home), len(path)) and home[n] == path[n]:
                n += 1
            home = home[:n]
        first = min(k if path == home else path[len(home)][0] for path, k in places)
        if first == -1:
            decls[name] = Declaration(home, -1, "for")
            continue
        block = _block(body, home)
        s = block[first]
        direct = isinstance(s, ast.Assign | ast.AnnAssign) and (
            name in {n for t in getattr(s, "targets", [getattr(s, "target", None)])
                     for n in _assigned_names(t)}) and s.value is not None and \
            name not in {n.id for n in _names(s.value)}
        decls[name] = Declaration(home, first, "let" if direct else "zero")
    return decls


def _block(body: list[ast.stmt], path: Path) -> list[ast.stmt]:
    for k, field in path:
        body = getattr(body[k], field)
    return body


def _jumps(s: ast.stmt) -> bool:
    return isinstance(s, ast.Return | ast.Break | ast.Continue)


class Assigned:
    """The definite-assignment check: a read of a local not assigned on every path to
    it is a ``Refusal`` at that read."""

    def __init__(self, names: set[str]) -> None:
        self.names = names

    def reads(self, node: ast.AST | None, assigned: set[str]) -> None:
        for name in _names(node):
            if isinstance(name.ctx, ast.Load) and name.id in self.names \
                    and name.id not in assigned:
                raise Refusal(
                    f"{name.id!r} may be read before it is assigned (not every path to "
                    "this line gives it a value)",
                    f"Give it a value first on every path, e.g. {name.id} = 0 before the "
                    "if or loop that assigns it.", name)

    def block(self, body: list[ast.stmt], assigned: set[str]) -> set[str] | None:
        """The names assigned after ``body`` (None: it never falls through)."""
        assigned = set(assigned)
        for s in body:
            if _jumps(s):
                self.reads(getattr(s, "value", None), assigned)
                return None
            after = self.stmt(s, assigned)
            if after is None:
                return None
            assigned = after
        return assigned

    def stmt(self, s: ast.stmt, assigned: set[str]) -> set[str] | None:
        if isinstance(s, ast.Assign):
            self.reads(s.value, assigned)
            for t in s.targets:
                if not isinstance(t, ast.Name | ast.Tuple | ast.List):
                    self.reads(t, assigned)
            return assigned | {n for t in s.targets for n in _assigned_names(t)}
        if isinstance(s, ast.AugAssign):
            self.reads(s.value, assigned)
            target = s.target
            if isinstance(target, ast.Name):
                self.reads(ast.Name(target.id, ast.Load(), lineno=target.lineno,
                                    col_offset=target.col_offset,
                                    end_lineno=target.end_lineno,
                                    end_col_offset=target.end_col_offset), assigned)
            else:
                self.reads(target, assigned)
            return assigned
        if isinstance(s, ast.AnnAssign):
            self.reads(s.value, assigned)
            return assigned | set(_assigned_names(s.target))
        if isinstance(s, ast.If):
            self.reads(s.test, assigned)
            branches = [self.block(s.body, assigned), self.block(s.orelse, assigned)]
            falls = [b for b in branches if b is not None]
            return None if not falls else set.intersection(*falls)
        if isinstance(s, ast.For):
            self.reads(s.iter, assigned)
            self.block(s.body, assigned | set(_assigned_names(s.target)))
            return assigned
        if isinstance(s, ast.While):
            self.reads(s.test, assigned)
            self.block(s.body, assigned)
            return assigned
        self.reads(s, assigned)
        return assigned
