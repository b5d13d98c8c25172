"""Which ``with`` body a builder value belongs to, and the two mistakes that show it.

Python runs the body of ``with k.loop(...)`` once, to build it. A Python name rebound
inside it (``acc = acc + x[i]``) then holds an expression, and the kernel assigns nothing:
the loop would be empty. ``+=`` on a ``k.let`` variable assigns (the builder sees it); a
plain rebinding it cannot see, so it catches the rebinding by what it leaves behind
(docs/ir.md, "Assignment and scope"):

1. a value built inside a body that has ended is used (``o[i] = acc`` after the loop);
2. at the end of a loop or while body, a name of the building frame that held a ``let``
   variable before the body holds a new expression that reads that variable.

Lines are the builder's caller's (``file.py:12``), found by skipping vyre's IR modules.
"""

from __future__ import annotations

import os
import sys
from types import FrameType
from typing import Any

from vyre_core.ir.nodes import Var, walk

#: Modules whose frames are the builder itself (the user's line is outside them).
_BUILDER_MODULES = ("vyre_core.ir", "contextlib")


class Body(list):
    """The statements of one ``with`` body; ``open`` until it ends."""

    __slots__ = ("line", "open", "parent", "what")

    def __init__(self, what: str, line: str, parent: Body | None) -> None:
        super().__init__()
        self.what = what      # "loop 'j'", "if", ... (for messages)
        self.line = line      # where the ``with`` was written
        self.open = True
        self.parent = parent

    def within(self, outer: Body) -> bool:
        """Whether this body is ``outer`` or nested in it."""
        body: Body | None = self
        while body is not None and body is not outer:
            body = body.parent
        return body is outer


def user_frame() -> FrameType | None:
    """The innermost frame outside the builder: the code that builds the kernel."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "").startswith(
            _BUILDER_MODULES):
        frame = frame.f_back
    return frame


def where(frame: FrameType | None) -> str:
    """``file.py:12`` of ``frame`` (empty when there is none)."""
    if frame is None:
        return ""
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"


def check_open(value: Any) -> None:
    """Refuse ``value`` (a builder ``Val``) when the body it was built in has ended."""
    body = value.body
    if body is None or body.open:
        return
    here = where(user_frame())
    name = getattr(value.node, "name", None)
    if value.var == "loop":
        raise TypeError(
            f"loop variable {name!r} is used at {here}, after its loop (the body opened at "
            f"{body.line}) ended. Fix: use {name} inside the loop body; to keep a value "
            "past the loop, declare a variable with k.let before the loop and assign it "
            "inside (v += ..., or k.assign(v, ...))")
    what = f"variable {name!r}, declared" if value.var == "let" else "a value"
    built = f" at {value.line}" if value.line else ""
    raise TypeError(
        f"{what} built{built} inside the body of {body.what} (opened at {body.line}) is "
        f"used at {here}, after that body ended. A Python name rebound inside a with body "
        "(acc = acc + x[i]) holds an expression: it assigns nothing in the kernel. Fix: "
        "declare the variable with k.let before the body and update it inside with "
        "acc += x[i] or k.assign(acc, acc + x[i]); or use the value inside the body")


def variables_in(frame: FrameType | None, kernel: Any) -> dict[str, Any]:
    """The names of ``frame`` bound to a ``let`` variable of ``kernel`` (a snapshot)."""
    if frame is None:
        return {}
    return {name: v for name, v in list(frame.f_locals.items())
            if getattr(v, "var", None) == "let" and getattr(v, "kernel", None) is kernel}


def check_rebound(frame: FrameType | None, before: dict[str, Any], body: Body) -> None:
    """Refuse a loop body after which a name that held a ``let`` variable holds an
    expression built in the body that reads the variable: ``acc = acc + x[i]``, which
    Python runs once and the kernel never assigns."""
    if frame is None or not before:
        return
    now = frame.f_locals
    for name, old in before.items():
        new = now.get(name)
        if new is old or getattr(new, "body", None) is None or not new.body.within(body) \
                or not _reads(new.node, old.node.name):
            continue
        var = old.node.name
        built = f" at {new.line}" if new.line else ""
        raise TypeError(
            f"{name} = ...{built} rebinds the Python name {name!r} inside the body of "
            f"{body.what} (opened at {body.line}) to an expression that reads variable "
            f"{var!r}; the kernel never assigns {var!r}, so every pass would start from its "
            f"value before the loop. Fix: assign the variable: {name} += ... (any of += -= "
            f"*= /= %= &= |= ^= <<= >>= **= //=), or k.assign({name}, ...)")


def _reads(node: Any, name: str) -> bool:
    return any(isinstance(n, Var) and n.name == name for n in walk((node,)))
