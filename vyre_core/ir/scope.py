"""Which ``with`` body a builder value belongs to, which version of a variable it reads,
and the mistakes that show a Python meaning the kernel would not have.

Python runs the body of ``with k.loop(...)`` once, to build it. A Python name rebound
inside it (``acc = acc + x[i]``) then holds an expression, and the kernel assigns nothing:
the loop would be empty. ``+=`` on a ``k.let`` variable assigns (the builder sees it); a
plain rebinding it cannot see, so it catches the rebinding by what it leaves behind
(docs/ir.md, "Assignment and scope"):

1. a value built inside a body that has ended is used (``o[i] = acc`` after the loop);
2. at the end of a loop or while body, a name of the building frame that held a value
   before the body holds a new expression, built in the body, that reads that value.

And an expression is read where it is used, not where it was built: one built before a
``+=`` of a variable it reads would see the new value, so it is refused after it
(``check_current``).

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


class Variable:
    """A ``k.let`` variable as ``+=`` updates it: ``version`` counts its augmented
    assignments, ``lines[n]`` is where the one that made version ``n + 1`` was written."""

    __slots__ = ("lines", "name", "version")

    def __init__(self, name: str) -> None:
        self.name = name
        self.version = 0
        self.lines: list[str] = []

    def bump(self, line: str) -> None:
        self.lines.append(line)
        self.version += 1


def variable_of(value: Any) -> Variable:
    """The variable a ``let`` value (``var == "let"``) names: the one pair it reads."""
    return next(iter(value.reads))[0]


def check_current(value: Any) -> None:
    """Refuse ``value`` when it reads a variable that ``+=`` (or another augmented
    assignment) has assigned since it was built: Python means the value before."""
    for variable, version in value.reads:
        if version != variable.version:
            name = variable.name
            raise TypeError(
                f"a value that reads variable {name!r} was built before {name} was assigned "
                f"at {variable.lines[version]} ({name} += ... or another augmented "
                f"assignment), and is used at {where(user_frame())}: the kernel reads {name} "
                "where the value is used, so it would see the new value, where Python means "
                f"the old one. Fix: keep the value in a variable before the assignment, "
                f"t = k.let('t', ...), and use t")


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


def values_in(frame: FrameType | None, kind: type, kernel: Any) -> dict[str, Any]:
    """The names of ``frame`` bound to a value (a ``kind``) of ``kernel`` or of no kernel
    (a literal): a snapshot."""
    if frame is None:
        return {}
    return {name: v for name, v in list(frame.f_locals.items())
            if isinstance(v, kind) and v.kernel in (None, kernel)}


def check_rebound(frame: FrameType | None, before: dict[str, Any], body: Body,
                  serial: int) -> None:
    """Refuse a loop body after which a name that held a value holds an expression built
    in the body (after ``serial``) that reads it: ``acc = acc + x[i]``, which Python runs
    once and the kernel never assigns. (``+=`` on a variable leaves the name on it.)"""
    if frame is None or not before:
        return
    now = frame.f_locals
    for name, old in before.items():
        new = now.get(name)
        if new is old or getattr(new, "serial", -1) < serial or not _reads(new, old):
            continue
        built = f" at {new.line}" if new.line else ""
        rebinds = (f"{name} = ...{built} rebinds the Python name {name!r} inside the body of "
                   f"{body.what} (opened at {body.line}) to an expression that reads")
        if old.var == "let":
            var = old.node.name
            raise TypeError(
                f"{rebinds} variable {var!r}; the kernel never assigns {var!r}, so every "
                f"pass would start from its value before the loop. Fix: assign the "
                f"variable: {name} += ... (any of += -= *= /= %= &= |= ^= <<= >>= **= //=), "
                f"or k.assign({name}, ...)")
        raise TypeError(
            f"{rebinds} its value before the loop; that value is no kernel variable, so "
            f"every pass would start from it again (Python means it carries from pass to "
            f"pass). Fix: declare it before the loop, {name} = k.let({name!r}, ...), and "
            f"update it inside with {name} += ... (or k.assign({name}, ...))")


def _reads(new: Any, old: Any) -> bool:
    """Whether expression ``new`` reads value ``old``: its variable, or its very node."""
    if old.var == "let":
        if new.var == "let" and new.node.name == old.node.name:
            return False  # the variable itself, as ``+=`` left it
        return any(isinstance(n, Var) and n.name == old.node.name
                   for n in walk((new.node,)))
    return any(n is old.node for n in walk((new.node,)))
