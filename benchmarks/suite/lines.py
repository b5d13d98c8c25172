"""Kernel lines of a port, counted from its source text with ``ast`` (nothing imported, so
the Warp file is counted where warp-lang is not installed).

The rule, the same for both frameworks: the lines of each function decorated
``@<x>.kernel`` or ``@<x>.func`` (bare or called), from its ``def`` line to its last line,
decorators excluded, that hold code: blank lines, comment lines and the docstring's lines
do not count."""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

MARKS = ("kernel", "func")


def _marked(fn: ast.FunctionDef) -> bool:
    for dec in fn.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        if isinstance(target, ast.Attribute) and target.attr in MARKS:
            return True
    return False


def _code_lines(source: str) -> set[int]:
    """Lines holding a token that is not a comment, a newline or indentation."""
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
            tokenize.ENCODING, tokenize.ENDMARKER}
    lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in skip:
            lines.update(range(tok.start[0], tok.end[0] + 1))
    return lines


def kernel_lines(path: Path) -> dict[str, int]:
    """Function name -> its kernel code lines, for each marked function of ``path``."""
    source = path.read_text()
    code = _code_lines(source)
    counts: dict[str, int] = {}
    for fn in ast.parse(source).body:
        if not isinstance(fn, ast.FunctionDef) or not _marked(fn):
            continue
        span = set(range(fn.lineno, fn.end_lineno + 1))
        doc = fn.body[0] if ast.get_docstring(fn) is not None else None
        if doc is not None:
            span -= set(range(doc.lineno, doc.end_lineno + 1))
        counts[fn.name] = len(span & code)
    return counts
