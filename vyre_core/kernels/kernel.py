"""``@vyre.kernel`` and ``@vyre.func``: a Python function compiled once per signature to
an ordinary ``Program``, and the plan of one launch (the dispatch inputs, the caller's
arrays the kernel writes)."""

from __future__ import annotations

import ast
import functools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vyre_core import shared_arrays
from vyre_core.errors import (
    InvalidConfigError,
    InvalidInputError,
    KernelSyntaxError,
    ValidationError,
)
from vyre_core.ir.dtypes import DType
from vyre_core.ir.nodes import (
    Access,
    Binary,
    BinOp,
    Buffer,
    Cast,
    IdKind,
    If,
    InvocationId,
    Lit,
    Load,
    Loop,
    Return,
    SpecConstant,
    SpecRef,
    Stmt,
    While,
)
from vyre_core.ir.nodes import Block as BlockStmt
from vyre_core.ir.program import Program
from vyre_core.ir.specialize import describe_range, in_range
from vyre_core.kernels.annotations import ArrayType, ConstantType
from vyre_core.kernels.lower import Lowerer
from vyre_core.kernels.scope import Capture, Scope
from vyre_core.kernels.signature import Parameters, signature_of
from vyre_core.kernels.source import Source
from vyre_core.kernels.unit import ArrayRef, Unit
from vyre_core.kernels.values import Refusal, Value, literal

#: The workgroup a kernel gets for a launch of 1, 2 or 3 axes, unless it names one.
DEFAULT_WORKGROUPS = {1: (64,), 2: (8, 8), 3: (4, 4, 4)}


#: The most invocations along one axis of a kernel's launch: ``global_id(i)`` is an i32,
#: whose largest value is 2**31 - 1 (past it ids would wrap negative, silently).
MAX_AXIS = 2**31


def axes_of(dim: Any) -> int:
    """How many axes a launch's ``dim`` has (part of the compile key); an axis past
    ``MAX_AXIS`` is refused."""
    if isinstance(dim, int | np.integer) and not isinstance(dim, bool):
        counts: tuple[Any, ...] = (dim,)
    elif isinstance(dim, tuple | list) and 1 <= len(dim) <= 3:
        counts = tuple(dim)
    else:
        raise InvalidConfigError(f"dim={dim!r} is not 1 to 3 invocation counts",
                                 "Pass dim=n or dim=(rows, cols), e.g. dim=img.shape: dim[i] "
                                 "is the extent of global_id(i).")
    if any(isinstance(n, int | np.integer) and n > MAX_AXIS for n in counts):
        raise InvalidConfigError(f"dim={dim!r} has an axis of more than 2**31 invocations: "
                                 "global_id is an i32, whose largest value is 2**31 - 1, so "
                                 "the ids past it would wrap negative",
                                 "Launch at most 2**31 invocations per axis: split the work "
                                 "over several launches, or over a second axis of dim.")
    return len(counts)


class FuncFunction:
    """A ``@vyre.func`` function: inlined where a kernel calls it. Called from Python it
    runs as the plain function it is."""

    __vyre_func__ = True

    def __init__(self, fn: Callable[..., Any]) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn

    @functools.cached_property
    def source(self) -> Source:
        return Source.of(self.fn, "@vyre.func")

    @functools.cached_property
    def scope(self) -> Scope:
        return Scope(self.fn)

    def __call__(self, *args: Any) -> Any:
        return self.fn(*args)


def dims_of(dim: Any) -> tuple[int, ...]:
    """A launch's ``dim`` as its invocation counts per axis."""
    axes_of(dim)
    return tuple(int(n) for n in dim) if isinstance(dim, tuple | list) else (int(dim),)


@dataclass(frozen=True)
class Compiled:
    """A kernel compiled for one signature: the program, where each argument goes, and
    its hidden ``launch`` uniform: the extents of its shaped arrays, then (an exact
    kernel's) the launch's ``dim``, one ``u32`` per axis."""

    program: Program
    types: tuple[ArrayType | DType, ...]
    written: tuple[int, ...]        # positions of the arrays the kernel writes
    shaped: tuple[int, ...]         # positions of the arrays whose extents are passed
    launch: str | None = None       # the name of the hidden launch buffer, if it has one
    exact: bool = True              # runs exactly dim invocations (False: whole workgroups)
    captures: tuple[Capture, ...] = ()  # what it read from outside the functions' bodies

    def current(self) -> bool:
        """Whether every outer name it read still names what it read (else: stale)."""
        return all(c.holds() for c in self.captures)

    def launch_values(self, dim: Any, extents: Sequence[int]) -> np.ndarray | None:
        """The hidden launch buffer's contents for ``dim`` and the shaped arrays'
        ``extents`` (their shapes, in parameter order); None when it has none."""
        if self.launch is None:
            return None
        return np.array([*extents, *(dims_of(dim) if self.exact else ())], np.uint32)


class Written:
    """The caller's arrays a launch writes (``targets``, named ``names``) and the ``out=``
    arrays its dispatch writes them through: the array itself when it is C-contiguous
    and writable, else a scratch array that ``fill()`` copies into it. A read-only
    array (one a dispatch returned, say) is refused here, before any work."""

    def __init__(self, targets: Sequence[np.ndarray], names: Sequence[str]) -> None:
        for name, target in zip(names, targets, strict=True):
            if not target.flags.writeable:
                raise InvalidInputError(
                    f"argument {name!r} is a read-only array, and the kernel writes it",
                    f"Pass a writable array for {name!r}: {name}.copy(), or an array to "
                    f"receive the result such as np.empty_like({name}) (the arrays a "
                    "dispatch returns are read-only views of its results).")
        self.targets = list(targets)
        self.direct = [_direct(t) for t in self.targets]
        self.out = [t.reshape(-1) if direct else
                    np.empty(t.size, DType.BOOL.storage_np if t.dtype == np.bool_ else t.dtype)
                    for t, direct in zip(self.targets, self.direct, strict=True)]

    def fill(self) -> None:
        """Copy each output the dispatch could not write in place into its array."""
        for target, out, direct in zip(self.targets, self.out, self.direct, strict=True):
            if not direct:
                np.copyto(target, out.reshape(target.shape), casting="unsafe")


class LaunchPlan(Written):
    """One launch: the dispatch inputs (ABI order) and the ``out=`` arrays of the
    outputs (``Written``)."""

    def __init__(self, compiled: Compiled, dim: Any, args: Sequence[Any],
                 names: Sequence[str]) -> None:
        self.program = compiled.program
        self.exact = compiled.exact
        for name, value, t in zip(names, args, compiled.types, strict=True):
            if isinstance(t, ArrayType):
                shared_arrays.check(value, f"argument {name!r}")
        self.inputs: list[Any] = [value.reshape(-1) if isinstance(t, ArrayType) else
                                  scalar_argument(name, value, t) for name, value, t in
                                  zip(names, args, compiled.types, strict=True)]
        hidden = compiled.launch_values(dim, [n for p in compiled.shaped
                                              for n in args[p].shape])
        if hidden is not None:
            self.inputs.append(hidden)
        super().__init__([args[p] for p in compiled.written],
                         [names[p] for p in compiled.written])


def scalar_array(value: Any, dtype: DType) -> np.ndarray:
    """A scalar argument as the one-element array its uniform buffer holds (Refusal
    when the number does not fit ``dtype``)."""
    return np.array([literal(_plain(value), dtype).value], dtype.storage_np)


def scalar_argument(name: str, value: Any, dtype: DType) -> np.ndarray:
    """``scalar_array`` of a launch's argument ``name``: a number its type cannot hold is
    the caller's error, with the range it can."""
    try:
        return scalar_array(value, dtype)
    except Refusal as exc:
        held = f" from {dtype.int_range[0]} to {dtype.int_range[1]}" if dtype.is_int else ""
        raise InvalidInputError(f"argument {name!r}: {exc.cause}",
                                f"Pass {name!r} as a {dtype.value} value{held}, or annotate "
                                "the parameter with a type that holds it.") from None


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _direct(array: np.ndarray) -> bool:
    """Whether the dispatch can write its output straight into ``array``."""
    return array.flags.c_contiguous and array.flags.writeable and array.dtype != np.bool_


class KernelFunction:
    """A ``@vyre.kernel`` function. ``program(dim=, args=)`` is its IR for those
    arguments; ``Driver.launch`` runs it. Compiled once per (signature, launch axes):
    array sizes and scalar values are passed at each launch, and constants are the
    program's specialization constants (``DispatchConfig(constants=...)``)."""

    def __init__(self, fn: Callable[..., Any], workgroup: tuple[int, ...] | None = None,
                 subgroup_size: int | None = None) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.workgroup = None if workgroup is None else tuple(workgroup)
        self.subgroup_size = subgroup_size
        self.params = Parameters.of(fn)
        self._compiled: dict[tuple[Any, ...], Compiled] = {}
        self._lock = threading.Lock()
        self.compiles = 0  # how many times the source was lowered (tests count them)

    def __repr__(self) -> str:
        return f"<vyre kernel {self.fn.__qualname__}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise KernelSyntaxError(f"kernel {self.fn.__name__!r} was called like a function",
                                f"Launch it: drv.launch({self.fn.__name__}, dim=n, "
                                "args=(...)).")

    def compiled(self, dim: Any, args: Sequence[Any]) -> Compiled:
        """The compiled kernel for these arguments' signature (cached)."""
        return self.compiled_for(signature_of(self.params, args), axes_of(dim))

    def compiled_for(self, types: tuple[ArrayType | DType, ...], axes: int,
                     from_u32: frozenset[str] = frozenset()) -> Compiled:
        """The compiled kernel for a signature (cached). ``from_u32`` names ``i32``
        scalar parameters kept in a ``u32`` buffer and cast when read (a sequence loop's
        iteration number, which the runner keeps as a ``u32``)."""
        key = (types, axes, from_u32)
        found = self._compiled.get(key)
        if found is None or not found.current():
            with self._lock:
                found = self._compiled.get(key)
                if found is None or not found.current():
                    found = self._compile(*key)
                    self._compiled[key] = found
        return found

    def program(self, *, dim: Any, args: Sequence[Any]) -> Program:
        """The IR program for a launch of ``dim`` with ``args`` (an ordinary Program)."""
        return self.compiled(dim, args).program

    def exact(self, *, dim: Any, args: Sequence[Any]) -> bool:
        """Whether a launch runs exactly ``dim`` invocations (True), or whole workgroups
        (False: the kernel synchronizes a workgroup, and guards its own bounds)."""
        return self.compiled(dim, args).exact

    def plan(self, dim: Any, args: Sequence[Any]) -> LaunchPlan:
        return LaunchPlan(self.compiled(dim, args), dim, args, self.params.names)

    def _compile(self, types: tuple[ArrayType | DType, ...], axes: int,
                 from_u32: frozenset[str]) -> Compiled:
        self.compiles += 1
        source = Source.of(self.fn, "@vyre.kernel")
        names = self.params.names
        taken = {n.id for n in ast.walk(source.tree) if isinstance(n, ast.Name)} | \
            set(names) | {c[0] for c in self.params.constants}
        workgroup = self.workgroup or DEFAULT_WORKGROUPS[axes]
        unit = Unit(taken, "", subgroup_size=self.subgroup_size, workgroup=workgroup)
        unit.launch_buffer = unit.fresh("launch")
        env: dict[str, Any] = {}
        offset = 0
        shaped = []
        for p, (name, t) in enumerate(zip(names, types, strict=True)):
            if isinstance(t, ArrayType):
                env[name] = ArrayRef(name, t.dtype, t.ndim, offset if t.ndim > 1 else None)
                if t.ndim > 1:
                    offset += t.ndim
                    shaped.append(p)
            elif name in from_u32:
                env[name] = Value(Cast(DType.I32, _scalar_load(name)), t)
            else:
                env[name] = Value(_scalar_load(name), t)
        constants = []
        for name, ctype, default in self.params.constants:
            constants.append(_spec_constant(source, name, ctype, default))
            env[name] = Value(SpecRef(name), ctype.dtype)
        body: list[Stmt] = []
        Lowerer(source, unit, env, Scope(self.fn)).run(body)
        exact = not unit.synchronizes
        if exact:
            body.insert(0, _launch_guard(unit.launch_buffer, offset, axes))
            offset += axes
        buffers = []
        for name, t in zip(names, types, strict=True):
            if isinstance(t, ArrayType):
                access = Access.READ_WRITE if name in unit.written else Access.READ
                buffers.append(Buffer(name, len(buffers), t.dtype, access))
            else:
                stored = DType.U32 if name in from_u32 else t
                buffers.append(Buffer(name, len(buffers), stored, Access.UNIFORM, 1))
        for name, dtype, count in unit.workgroup_buffers:
            buffers.append(Buffer(name, len(buffers), dtype, Access.WORKGROUP, count))
        if offset:
            buffers.append(Buffer(unit.launch_buffer, len(buffers), DType.U32,
                                  Access.UNIFORM, offset))
        program = Program(tuple(buffers), workgroup, tuple(body), tuple(constants))
        findings = program.validate()
        if findings:
            raise _located(findings, program, unit.lines)
        written = tuple(p for p, name in enumerate(names) if name in unit.written)
        return Compiled(program, types, written, tuple(shaped),
                        unit.launch_buffer if offset else None, exact,
                        tuple(unit.captures.values()))


def _launch_guard(launch: str, first: int, axes: int) -> If:
    """``return`` for the invocations past the launch's ``dim``, whose extents are the
    launch buffer's elements from ``first``: so an exact kernel runs ``dim`` invocations
    however the workgroups round it up (a rule of the lowering, not the kernel's)."""
    past = None
    for axis in range(axes):
        test = Binary(BinOp.GE, InvocationId(IdKind.GLOBAL, axis),
                      Load(launch, Lit.of(DType.U32, first + axis)))
        past = test if past is None else Binary(BinOp.LOGICAL_OR, past, test)
    return If(past, (Return(),), ())


def _spec_constant(source: Source, name: str, ctype: ConstantType, default: Any
                   ) -> SpecConstant:
    """The IR constant of a keyword-only parameter; a default or bound that its dtype
    does not hold, or a default outside the range (V028's rule), is refused at the
    parameter's line."""
    node = next(a for a in source.tree.args.kwonlyargs if a.arg == name)
    bounds = {}
    for what, value in (("default", default), ("low", ctype.low), ("high", ctype.high)):
        if value is None and what != "default":
            continue
        try:
            bounds[what] = literal(_plain(value), ctype.dtype)
        except Refusal as r:
            raise source.error(node, f"constant {name!r}: its {what} {r.cause}", r.fix) \
                from None
    constant = SpecConstant(name, bounds["default"], bounds.get("low"), bounds.get("high"))
    if not in_range(constant, constant.default) or (
            constant.low is not None and constant.high is not None
            and constant.low.value > constant.high.value):
        raise source.error(node, f"constant {name!r} has default {default!r} and range "
                           f"{describe_range(constant)} (V028)",
                           "Give the constant a default within its range, and low <= high: "
                           f"{name}: vyre.Constant[{ctype.dtype.value}](low=1, high=64) = 16.")
    return constant


def _scalar_load(name: str) -> Any:
    return Load(name, Lit.of(DType.U32, 0))


def statement_lines(body: tuple[Stmt, ...], lines: dict[int, tuple[str, int]],
                    path: str = "body") -> dict[str, tuple[str, int]]:
    """Each statement's path as the validator writes it (``body[1].then[0]``) -> the
    Python file and line that made it."""
    found: dict[str, tuple[str, int]] = {}
    for i, s in enumerate(body):
        here = f"{path}[{i}]"
        if id(s) in lines:
            found[here] = lines[id(s)]
        if isinstance(s, If):
            found.update(statement_lines(s.then, lines, f"{here}.then"))
            found.update(statement_lines(s.orelse, lines, f"{here}.else"))
        elif isinstance(s, Loop | While):
            found.update(statement_lines(s.body, lines, f"{here}.body"))
        elif isinstance(s, BlockStmt):
            found.update(statement_lines(s.body, lines, f"{here}.block"))
    return found


def _located(findings: list[Any], program: Program, lines: dict[int, tuple[str, int]]
             ) -> ValidationError:
    """The validator's findings, each placed at the Python line that made it."""
    by_path = statement_lines(program.body, lines)
    placed = []
    for f in findings:
        where = f.where
        match = max((p for p in by_path if where == p or where.startswith(p + ".")),
                    key=len, default=None)
        at = "" if match is None else f"{by_path[match][0]}:{by_path[match][1]}: "
        placed.append({**f.to_dict(), "where": f"{at}{where}"})
    text = "; ".join(f"{f['code']}: {f['cause']} (at {f['where']})" for f in placed)
    return ValidationError(f"the kernel's program is not valid: {text}", details_fix(),
                           findings=placed)


def details_fix() -> str:
    return "Resolve each finding at the Python line it names; each code has its Fix in " \
        "docs/validator-codes.md."


def kernel(fn: Callable[..., Any] | None = None, *, workgroup: tuple[int, ...] | None = None,
           subgroup_size: int | None = None) -> Any:
    """``@vyre.kernel`` or ``@vyre.kernel(workgroup=(64,), subgroup_size=8)``: a kernel
    from a function; ``subgroup_size`` is what its ``vyre.subgroup_*`` operations run over."""
    if fn is None:
        return lambda f: KernelFunction(f, workgroup, subgroup_size)
    return KernelFunction(fn, workgroup, subgroup_size)


def func(fn: Callable[..., Any]) -> FuncFunction:
    """``@vyre.func``: a function a kernel may call; inlined where it is called."""
    return FuncFunction(fn)
