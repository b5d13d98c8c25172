"""A Python function's source as the frontend reads it, and errors placed in it: file,
line and column, the line itself and a caret under the offending code."""

from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass
from typing import Any

from vyre_core.errors import KernelSyntaxError


@dataclass(frozen=True)
class Source:
    """``tree`` is the function's definition; its lines count from 1 at ``first_line``
    of ``file``, its columns from ``indent`` (the source was dedented to parse it)."""

    file: str
    first_line: int
    indent: int
    lines: tuple[str, ...]
    tree: ast.FunctionDef

    @classmethod
    def of(cls, fn: Any, what: str) -> Source:
        try:
            lines, first = inspect.getsourcelines(fn)
        except (OSError, TypeError) as exc:
            raise KernelSyntaxError(
                f"the source of {what} {getattr(fn, '__name__', fn)!r} cannot be read ({exc})",
                "Define the kernel in a .py file (not in an interactive prompt or exec), "
                "so its source can be read.") from None
        text = "".join(lines)
        indent = len(lines[0]) - len(lines[0].lstrip())
        name = getattr(fn, "__name__", "?")
        try:
            module = ast.parse(textwrap.dedent(text))
            tree = next(n for n in module.body
                        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))
        except (SyntaxError, StopIteration):
            tree = None
        if tree is None or tree.name != name:
            where = f"{inspect.getsourcefile(fn)}:{first}"
            raise KernelSyntaxError(
                f"the source Python gives for {what} {name!r} ({where}) is not its "
                "definition: its code was compiled from a string under that file's name",
                "Define the kernel in a .py file, or compile the string under a name that "
                "is no file's, e.g. compile(text, '<kernels>', 'exec').")
        return cls(inspect.getsourcefile(fn) or "<unknown>", first, indent,
                   tuple(line.rstrip("\n") for line in lines), tree)

    def line_of(self, node: ast.AST) -> int:
        return self.first_line + node.lineno - 1

    def error(self, node: ast.AST, cause: str, fix: str) -> KernelSyntaxError:
        """``KernelSyntaxError`` at ``node``: ``file:line:col: cause``, the source line and
        a caret under the node (col counts from 1)."""
        text = self.lines[node.lineno - 1] if node.lineno <= len(self.lines) else ""
        dedented = text[self.indent:]
        col = len(dedented.encode()[:node.col_offset].decode(errors="ignore")) + self.indent
        end = getattr(node, "end_col_offset", None)
        width = 1
        if end is not None and getattr(node, "end_lineno", node.lineno) == node.lineno:
            width = max(1, len(dedented.encode()[:end].decode(errors="ignore"))
                        + self.indent - col)
        caret = " " * col + "^" * width
        line = self.line_of(node)
        return KernelSyntaxError(f"{self.file}:{line}:{col + 1}: {cause}\n    {text}\n    "
                                 f"{caret}", fix, file=self.file, line=line, col=col + 1,
                                 source_line=text, caret=caret)
