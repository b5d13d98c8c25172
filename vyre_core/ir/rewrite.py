"""Rebuilding IR trees: one bottom-up walk that passes transformations (substituting
constants, renaming buffers and variables for fusion) share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields, replace
from typing import TypeVar

from vyre_core.ir.nodes import Expr, Stmt

Node = TypeVar("Node", Expr, Stmt)


def transform(node: Node, fn: Callable[[Expr | Stmt], Expr | Stmt]) -> Node:
    """``node`` rebuilt bottom-up: its children transformed first, then ``fn`` applied to
    the node carrying them (``fn`` returns the node itself to keep it). A subtree nothing
    changed is kept as the same object."""
    changes = {}
    for field in fields(node):
        old = getattr(node, field.name)
        if isinstance(old, Expr | Stmt):
            new = transform(old, fn)
            if new is not old:
                changes[field.name] = new
        elif isinstance(old, tuple) and old and isinstance(old[0], Stmt):
            body = tuple(transform(s, fn) for s in old)
            if any(a is not b for a, b in zip(body, old, strict=True)):
                changes[field.name] = body
    return fn(replace(node, **changes) if changes else node)
