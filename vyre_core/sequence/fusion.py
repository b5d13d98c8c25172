"""Fusing consecutive steps of a sequence into one dispatch, when that cannot change a
byte: the rule (``why_not``) and the fused program (``fuse``), pure.

Two steps fuse when each invocation of the second needs only what the same invocation
of the first did. Unfused, every invocation of the first finishes before any of the
second starts; fused, invocation j runs the second half while invocation k may not have
run the first. So the rule is:

- the same grid and workgroup, one-dimensional (so ``global_id(0)`` names one
  invocation);
- no barriers, atomics or workgroup memory in either (nothing shared between
  invocations), and no ``return`` in the first (it would skip the second half);
- the second reads a buffer the first writes only at ``global_id(0)``, and the first
  writes it only there: the value an invocation reads is the one it wrote itself;
- the second writes nothing the first reads or writes.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from vyre_core.ir.nodes import (
    Access,
    Assign,
    Atomic,
    Buffer,
    BufLen,
    Expr,
    IdKind,
    InvocationId,
    Let,
    Load,
    Loop,
    Return,
    Stmt,
    Store,
    Var,
    walk,
)
from vyre_core.ir.program import Program
from vyre_core.ir.rewrite import transform
from vyre_core.sequence.nodes import Step, StepLoop

GID = InvocationId(IdKind.GLOBAL, 0)


def why_not(first: Step, second: Step) -> list[str]:
    """Every reason ``second`` cannot be fused into ``first`` (empty: it can)."""
    reasons = []
    a, b = first.program, second.program
    if first.grid != second.grid:
        reasons.append(f"grids differ ({first.grid} and {second.grid})")
    if a.workgroup != b.workgroup:
        reasons.append(f"workgroups differ ({a.workgroup} and {b.workgroup})")
    if a.workgroup[1:] != (1, 1) or b.workgroup[1:] != (1, 1) or first.grid[1:] != (1, 1) \
            or second.grid[1:] != (1, 1):
        reasons.append("not one-dimensional")
    for which, program in (("first", a), ("second", b)):
        shared = {"barriers", "atomics", "workgroup_memory", "subgroups"} & \
            program.requirements().features
        if shared:
            reasons.append(f"the {which} uses {', '.join(sorted(shared))}")
    if any(isinstance(n, Return) for n in walk(a.body)):
        reasons.append("the first returns early (the second half would be skipped)")
    written_a, read_a = _names(first, writes=True), _names(first, writes=False)
    written_b, read_b = _names(second, writes=True), _names(second, writes=False)
    clash = sorted(written_b & (written_a | read_a))
    if clash:
        reasons.append(f"the second writes {', '.join(clash)}, which the first uses")
    handed = sorted(written_a & read_b)
    for name in handed:
        if not _only_at_gid(first, name, stores=True):
            reasons.append(f"the first writes {name} other than at global_id(0)")
        if not _only_at_gid(second, name, stores=False):
            reasons.append(f"the second reads {name} other than at global_id(0)")
    if _mixed_reads(first, second):
        reasons.append("a buffer both read is bound as read in one and uniform in the other")
    if any(len(v) > 58 for v in _variables(b)):
        reasons.append("a variable name of the second is too long to rename apart")
    return reasons


def fuse(first: Step, second: Step) -> Step:
    """One step doing ``first`` then ``second`` in each invocation (``why_not`` must be
    empty). Buffers take their sequence names; the second's variables are renamed
    apart from the first's."""
    buffers: dict[str, Buffer] = {}
    for step in (first, second):
        for own, name in step.bound:
            if name not in buffers:  # (the first's access wins: it is the one that writes)
                buffers[name] = Buffer(name, len(buffers), own.dtype, own.access, own.count,
                                       own.shape)
    workgroup = [b for s in (first, second) for b in s.program.buffers
                 if b.access is Access.WORKGROUP]
    assert not workgroup, "fuse() after why_not(): no workgroup memory"
    taken = _variables(first.program)
    prefix = next(p for p in (f"_f{n}_" for n in range(1, 1000))
                  if not any(v.startswith(p) for v in taken))
    body_a = _renamed(first, {})
    body_b = _renamed(second, {v: prefix + v for v in _variables(second.program)})
    program = Program(tuple(buffers.values()), first.program.workgroup, body_a + body_b)
    return Step(program.check(), tuple(buffers), first.grid)


def fuse_all(items: tuple[Step | StepLoop, ...]) -> tuple[Step | StepLoop, ...]:
    """``items`` with every run of consecutive fusable steps fused (loop bodies too)."""
    out: list[Step | StepLoop] = []
    for item in items:
        if isinstance(item, StepLoop):
            out.append(replace(item, body=tuple(fuse_all(item.body))))
        elif out and isinstance(out[-1], Step) and not why_not(out[-1], item):
            out[-1] = fuse(out[-1], item)
        else:
            out.append(item)
    return tuple(out)


# -- what the rule looks at -------------------------------------------------------------

def _names(step: Step, writes: bool) -> set[str]:
    """The sequence buffers ``step`` writes (``writes``: every output binding, which the
    step replaces whole, and every store) or reads (loads, lengths, and every read_write
    binding, whose old contents it starts from)."""
    own = {b.name: name for b, name in step.bound}
    if writes:
        found = {name for b, name in step.bound if b.is_output}
        kinds: tuple[type, ...] = (Store, Atomic)
    else:
        found = {name for b, name in step.bound if b.access is Access.READ_WRITE}
        kinds = (Load, BufLen, Atomic)
    return found | {own[n.buffer] for n in walk(step.program.body)
                    if isinstance(n, kinds) and n.buffer in own}  # (not workgroup memory)


def _only_at_gid(step: Step, name: str, stores: bool) -> bool:
    """Whether every store (``stores``) or load of sequence buffer ``name`` in ``step``
    is at ``global_id(0)``, directly or through a top-level let never assigned."""
    own = {sequence: b.name for b, sequence in step.bound}[name]
    gid = _gid_variables(step.program.body)
    kind = Store if stores else Load
    return all(n.index == GID or (isinstance(n.index, Var) and n.index.name in gid)
               for n in walk(step.program.body) if isinstance(n, kind) and n.buffer == own)


def _gid_variables(body: tuple[Stmt, ...]) -> set[str]:
    """Top-level lets of ``global_id(0)`` that nothing assigns."""
    assigned = {n.name for n in walk(body) if isinstance(n, Assign)}
    return {s.name for s in body if isinstance(s, Let) and s.value == GID
            and s.name not in assigned}


def _mixed_reads(first: Step, second: Step) -> bool:
    access: dict[str, Access] = {}
    for step in (first, second):
        for b, name in step.bound:
            if b.access in (Access.READ, Access.UNIFORM) and \
                    access.setdefault(name, b.access) is not b.access:
                return True
    return False


def _variables(program: Program) -> set[str]:
    return {n.name for n in walk(program.body) if isinstance(n, Let | Assign | Var)} | \
        {n.var for n in walk(program.body) if isinstance(n, Loop)}


def _renamed(step: Step, variables: dict[str, str]) -> tuple[Stmt, ...]:
    """``step``'s body with its buffers under their sequence names and ``variables``
    renamed."""
    buffers = {b.name: name for b, name in step.bound}

    def rename(node: Expr | Stmt) -> Any:
        if isinstance(node, Load | Store | BufLen | Atomic):
            node = replace(node, buffer=buffers[node.buffer])
        if isinstance(node, Var | Let | Assign) and node.name in variables:
            node = replace(node, name=variables[node.name])
        if isinstance(node, Loop) and node.var in variables:
            node = replace(node, var=variables[node.var])
        return node

    return tuple(transform(s, rename) for s in step.program.body)
