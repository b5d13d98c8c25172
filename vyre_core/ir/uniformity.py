"""Which expressions have the same value in every invocation of a workgroup: the rule
V016 checks barriers against, and the one a backend may rely on to run a loop once for a
whole workgroup (vyre-cpu's lockstep kernels). Which variables do (``varying``): those
only ever given such values, where every invocation gives them."""

from __future__ import annotations

from collections.abc import Container, Mapping

from vyre_core.ir.nodes import (
    Access,
    Assign,
    Atomic,
    Binary,
    Bitcast,
    Block,
    Break,
    Buffer,
    BufLen,
    Cast,
    Continue,
    Expr,
    Fma,
    IdKind,
    If,
    InvocationId,
    Let,
    Lit,
    Load,
    Loop,
    Return,
    Select,
    SpecRef,
    Stmt,
    Table,
    Unary,
    Var,
    While,
    walk,
)


def is_uniform(e: Expr, uniform_vars: Container[str], buffers: Mapping[str, Buffer]) -> bool:
    """Conservatively: literals, constants, buffer lengths, workgroup ids, the variables the caller
    knows to be uniform, and loads of uniform buffers at uniform indices, combined."""
    match e:
        case Lit() | BufLen() | SpecRef():
            return True
        case InvocationId(kind):
            return kind is IdKind.WORKGROUP
        case Var(name):
            return name in uniform_vars
        case Load(buffer, index):
            buf = buffers.get(buffer)
            return buf is not None and buf.access is Access.UNIFORM and \
                is_uniform(index, uniform_vars, buffers)
        case Atomic():
            return False
        case Binary(_, a, b):
            return is_uniform(a, uniform_vars, buffers) and is_uniform(b, uniform_vars, buffers)
        case Unary(_, a) | Cast(_, a) | Bitcast(_, a) | Table(index=a):
            return is_uniform(a, uniform_vars, buffers)
        case Select(a, b, c) | Fma(a, b, c):
            return all(is_uniform(x, uniform_vars, buffers) for x in (a, b, c))
    return False


def leaves_early(body: tuple[Stmt, ...]) -> bool:
    """Whether some invocations may leave a pass of a loop with this ``body`` early (a
    return under an if or loop, a break or continue of this loop under an if), so the
    passes after it are not the same in every invocation."""
    return _has_nested_return(body) or _has_branching_jump(body)


def _has_nested_return(body: tuple[Stmt, ...]) -> bool:
    """Whether a return sits under an if or loop inside ``body`` (so only some may take it)."""
    return any(isinstance(inner, Return)
               for node in walk(body) if isinstance(node, If | Loop | While)
               for inner in walk(node.then + node.orelse if isinstance(node, If) else node.body))


def _has_branching_jump(body: tuple[Stmt, ...]) -> bool:
    """Whether a break or continue of this loop sits under an if in ``body`` (so only some
    invocations may take it, and the passes after it diverge); nested loops' own are
    theirs."""
    def under_if(stmts: tuple[Stmt, ...], branched: bool) -> bool:
        for s in stmts:
            match s:
                case Break() | Continue() if branched:
                    return True
                case If(then=then, orelse=orelse):
                    if under_if(then, True) or under_if(orelse, True):
                        return True
                case Block(body=inner):
                    if under_if(inner, branched):
                        return True
        return False

    return under_if(body, False)


class _AllBut:
    """Every name except ``names``: the uniform variables while ``names`` are not."""

    def __init__(self, names: set[str]) -> None:
        self.names = names

    def __contains__(self, name: object) -> bool:
        return name not in self.names


def varying(body: tuple[Stmt, ...], buffers: Mapping[str, Buffer]) -> frozenset[str]:
    """The variables an assignment may give different values in different invocations of
    a workgroup: one whose value is not uniform, or that runs under control flow not
    every invocation takes (an if on a varying condition, a loop whose bounds vary or
    that some invocations leave early). A variable only ever given uniform values under
    uniform control flow is uniform, in a loop too (``s = s // 2``): the largest set of
    such variables, found by dropping from "all" those an assignment refutes, pass after
    pass, until a pass drops none (a pass sees what it dropped so far: only a value
    carried backwards, round a loop, takes another). By name, as the validator's other
    rules: a name declared in two places with a varying value in one is varying in both."""
    dropped: set[str] = set()  # names some declaration or assignment gives a varying value
    while True:
        before = len(dropped)
        assigned: set[str] = set()
        _mark(body, True, _AllBut(dropped), buffers, dropped, assigned)
        if len(dropped) == before:
            return frozenset(assigned)


def _mark(stmts: tuple[Stmt, ...], uniform: bool, uniform_vars: Container[str],
          buffers: Mapping[str, Buffer], found: set[str], assigned: set[str]) -> None:
    """Add to ``found`` the variables ``stmts`` may give varying values (to ``assigned``
    those an assignment does), where ``uniform`` says the control flow is uniform and
    ``uniform_vars`` which variables are taken to be."""
    for s in stmts:
        match s:
            case Let(name, value) | Assign(name, value):
                if not (uniform and is_uniform(value, uniform_vars, buffers)):
                    found.add(name)
                    if isinstance(s, Assign):
                        assigned.add(name)
            case If(cond, then, orelse):
                inner = uniform and is_uniform(cond, uniform_vars, buffers)
                _mark(then, inner, uniform_vars, buffers, found, assigned)
                _mark(orelse, inner, uniform_vars, buffers, found, assigned)
            case Loop(var, start, end, body):
                inner = uniform and is_uniform(start, uniform_vars, buffers) and \
                    is_uniform(end, uniform_vars, buffers) and not leaves_early(body)
                if not inner:
                    found.add(var)
                _mark(body, inner, uniform_vars, buffers, found, assigned)
            case While(cond, body):
                inner = uniform and is_uniform(cond, uniform_vars, buffers) and \
                    not leaves_early(body)
                _mark(body, inner, uniform_vars, buffers, found, assigned)
            case Block(body):
                _mark(body, uniform, uniform_vars, buffers, found, assigned)
