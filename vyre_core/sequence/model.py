"""``Sequence``: an ordered list of steps that runs as one request in one worker.

A sequence names its buffers once: *inputs* (passed by the caller at each run),
*constants* (bytes fixed in the sequence, e.g. a pass's parameters), *transients* (live
only inside one run, zero-filled at its start), *residents* (bound at each run to a
``ResidentBuffer`` of the worker that runs it) and *iteration numbers* (one u32 per loop
whose number a step reads, kept by the runner). A step is a program with one sequence
buffer bound to each of its non-workgroup buffers, and the grid it launches; a loop
repeats its steps (and loops, up to ``MAX_LOOP_DEPTH`` deep) a fixed number of times, or
until a flag buffer is zero. An input a step writes is the run's own copy: the caller's
array is never written (return the buffer to see what the steps made of it). Every rule of
what makes a sequence valid lives here and is checked when it is built, before any work
runs: the worker only executes.

Semantics, the same on every backend: steps run in order, each seeing everything earlier
steps wrote; a buffer bound to an ``output`` buffer is zero-filled before the step writes
it (as a dispatch's output is); a loop with ``until_zero`` zero-fills its flag before each
iteration and stops after the first iteration that leaves every byte of it zero, or
after ``max_iterations`` (reported, not raised).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import blake3
import numpy as np

from vyre_core import abi
from vyre_core.errors import InvalidInputError, InvalidSequenceError, ValidationError
from vyre_core.ir.dtypes import DType
from vyre_core.ir.nodes import Access, Buffer
from vyre_core.ir.program import Program
from vyre_core.ir.wire import MAX_WIRE_BYTES
from vyre_core.kernels.kernel import KernelFunction
from vyre_core.sequence import wire
from vyre_core.sequence.kernel_step import Binding, kernel_step
from vyre_core.sequence.nodes import (
    MAX_BUFFERS,
    MAX_LOOP_DEPTH,
    MAX_STEPS,
    Item,
    Role,
    SequenceBuffer,
    Step,
    StepLoop,
    bindable,
    loops_of,
    steps_of,
)

#: The most a loop may run (``times``, or ``max_iterations`` of a flag loop).
MAX_ITERATIONS = 1_000_000
#: Iterations of a flag loop when ``max_iterations`` is not given.
DEFAULT_MAX_ITERATIONS = 10_000
#: Bytes of one constant; larger data is an input or a resident.
MAX_CONSTANT_BYTES = 1 << 16
#: Dispatches one run may make, counting every iteration of every loop.
MAX_PASSES = 1 << 24
_U32_MAX = 2**32 - 1
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}\Z")
#: The names of loops' iteration numbers (``iteration_0`` for the first loop opened): no
#: other buffer may take one.
_ITERATION_NAME = re.compile(r"iteration_[0-9]+\Z")
_WRITES = (Access.OUTPUT, Access.READ_WRITE)
#: Buffers no step may write: a constant's bytes are the sequence's, a loop's number the
#: runner's.
_READ_ONLY = (Role.CONSTANT, Role.ITERATION)
#: Buffers a flag loop may not wait on (it zero-fills its flag before each iteration).
_FIXED_FLAGS = (Role.INPUT, Role.CONSTANT, Role.ITERATION)


@dataclass(frozen=True)
class Sequence:
    buffers: tuple[SequenceBuffer, ...]
    items: tuple[Item, ...]
    returns: tuple[str, ...]
    _by_name: dict[str, SequenceBuffer] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {b.name: b for b in self.buffers})

    # -- identity ------------------------------------------------------------------------

    @cached_property
    def _wire(self) -> bytes:
        return wire.encode(self.buffers, self.items, self.returns)

    def to_wire(self) -> bytes:
        """Canonical bytes: equal sequences give equal bytes however they were built."""
        return self._wire

    @classmethod
    def from_wire(cls, data: bytes) -> Sequence:
        """Decode untrusted bytes and check them; raise InvalidSequenceError if malformed."""
        return cls(*wire.decode(data)).check()

    @cached_property
    def _fingerprint(self) -> str:
        return blake3.blake3(b"vyre-sequence\x00" + self._wire).hexdigest()

    def fingerprint(self) -> str:
        return self._fingerprint

    # -- shape ---------------------------------------------------------------------------

    def buffer(self, name: str) -> SequenceBuffer:
        return self._by_name[name]

    def of_role(self, role: Role) -> list[SequenceBuffer]:
        return [b for b in self.buffers if b.role is role]

    def steps(self) -> Iterator[tuple[int, Step]]:
        """Every step with its number, in order (a loop's body once)."""
        yield from enumerate(steps_of(self.items))

    def loops(self) -> list[StepLoop]:
        """Every loop, outer before inner, in the order their with-blocks open: the order
        of a run's ``loops``."""
        return list(loops_of(self.items))

    def programs(self) -> list[tuple[Program, list[int]]]:
        """Each distinct program with the numbers of the steps that run it."""
        found: dict[str, tuple[Program, list[int]]] = {}
        for n, step in self.steps():
            found.setdefault(step.program.fingerprint(), (step.program, []))[1].append(n)
        return list(found.values())

    def with_programs(self, change: Callable[[Program], Program]) -> Sequence:
        """This sequence with each step's program replaced by ``change(program)`` (the
        buffers a program binds must stay as they were); itself where nothing changed."""
        programs = {p.fingerprint(): p for p, _ in self.programs()}
        changed = {fp: change(p) for fp, p in programs.items()}
        if all(changed[fp] is p for fp, p in programs.items()):
            return self
        def items(body: tuple[Item, ...]) -> tuple[Item, ...]:
            return tuple(replace(item, body=items(item.body)) if isinstance(item, StepLoop)
                         else replace(item, program=changed[item.program.fingerprint()])
                         for item in body)
        return replace(self, items=items(self.items))

    def lengths(self, step: Step) -> dict[str, int]:
        """Element count of each non-workgroup buffer of ``step``'s program, by its name."""
        return {b.name: self._by_name[name].count for b, name in step.bound}

    def return_shapes(self) -> list[tuple[np.dtype, int]]:
        return [(self._by_name[r].dtype.storage_np, self._by_name[r].count)
                for r in self.returns]

    def bind_inputs(self, inputs: Any) -> list[np.ndarray]:
        """One array per input buffer, in declaration order, checked like a dispatch's."""
        expected = [b.as_ir_buffer() for b in self.of_role(Role.INPUT)]
        names = ", ".join(f"{b.name} ({b.dtype.value}[{b.count}])" for b in expected)
        if not isinstance(inputs, list | tuple) or len(inputs) != len(expected):
            got = len(inputs) if isinstance(inputs, list | tuple) else type(inputs).__name__
            raise InvalidSequenceError(
                f"the sequence takes {len(expected)} input(s), got {got}",
                f"Pass a list with exactly these inputs, in order: {names or 'none'}.")
        return [abi.coerce_input(b, data) for b, data in zip(expected, inputs, strict=True)]

    @cached_property
    def _fused(self) -> Sequence:
        from vyre_core.sequence.fusion import fuse_all

        items = fuse_all(self.check().items)
        return self if items == self.items else Sequence(self.buffers, items,
                                                         self.returns).check()

    def fused(self) -> Sequence:
        """This sequence with each run of consecutive steps that can share one dispatch
        fused into one (``sequence/fusion.py`` has the rule); itself when none can. What
        ``DispatchConfig(fuse=True)`` runs."""
        return self._fused

    @cached_property
    def _checked(self) -> bool:
        check(self)  # (raises: nothing is cached, the next call checks again)
        return True

    def check(self) -> Sequence:
        """Raise InvalidSequenceError for the first rule broken; return self when valid.
        A sequence is immutable: it is checked once (every run asks)."""
        self._checked  # noqa: B018
        return self


def output_buffers(work: Program | Sequence) -> list[tuple[str, DType]]:
    """What a program (its outputs) or a sequence (its returns) gives back, in order:
    each buffer's name and dtype."""
    if isinstance(work, Sequence):
        return [(name, work.buffer(name).dtype) for name in work.returns]
    return [(b.name, b.dtype) for b in work.outputs]


# -- rules ---------------------------------------------------------------------------------


def _refuse(cause: str, fix: str) -> InvalidSequenceError:
    return InvalidSequenceError(cause, fix)


def check(seq: Sequence) -> None:
    """Raise InvalidSequenceError for the first rule ``seq`` breaks."""
    _check_buffers(seq.buffers)
    if not seq.items:
        raise _refuse("the sequence has no steps", "Add at least one step with .step(...).")
    _check_shapes(seq.items, 1)
    total = sum(1 for _ in steps_of(seq.items))
    if total > MAX_STEPS:
        raise _refuse(f"the sequence has {total} steps, more than {MAX_STEPS}",
                      "Split it into several sequences, or loop over repeated steps.")
    _check_iteration_buffers(seq)
    written = {b.name for b in seq.buffers if b.role is not Role.TRANSIENT}
    _check_items(seq, seq.items, 0, written, ())
    size = len(seq.to_wire())
    if size > MAX_WIRE_BYTES:
        raise _refuse(f"the sequence is {size} bytes as sent to a worker, over {MAX_WIRE_BYTES}",
                      "Split it into several sequences, or pass large constants as inputs.")
    passes = _passes(seq.items)
    if passes > MAX_PASSES:
        raise _refuse(f"one run would make {passes} dispatches, more than {MAX_PASSES}",
                      "Loop fewer times, or split the work into several runs.")
    seen: set[str] = set()
    for name in seq.returns:
        if name not in seq._by_name:
            raise _refuse(f"returns names {name!r}, which the sequence does not declare",
                          f"Return declared buffers: {', '.join(seq._by_name)}.")
        if seq._by_name[name].role is Role.ITERATION:
            raise _refuse(f"returns names {name!r}, a loop's iteration number",
                          "Return a buffer a step writes; a loop's number exists only "
                          "inside the loop.")
        if name in seen:
            raise _refuse(f"returns names {name!r} twice", "Name each buffer once.")
        seen.add(name)


def _passes(items: tuple[Item, ...]) -> int:
    """Dispatches one run makes at most: every iteration of every loop, nested ones
    multiplied out."""
    return sum(i.limit * _passes(i.body) if isinstance(i, StepLoop) else 1 for i in items)


def _check_shapes(items: tuple[Item, ...], depth: int) -> None:
    """Only steps and loops, loops at most ``MAX_LOOP_DEPTH`` deep."""
    for item in items:
        if not isinstance(item, Step | StepLoop) or (
                isinstance(item, StepLoop) and not isinstance(item.body, tuple)):
            raise _refuse(f"the sequence holds a {type(item).__name__} where a step or a loop "
                          "of steps belongs", "Build sequences with SequenceBuilder.")
        if isinstance(item, StepLoop):
            if depth > MAX_LOOP_DEPTH:
                raise _refuse(f"loops nest {depth} deep, more than {MAX_LOOP_DEPTH}",
                              f"Nest at most {MAX_LOOP_DEPTH} loops: unroll the innermost "
                              "into steps, or run the outermost as several runs.")
            _check_shapes(item.body, depth + 1)


def _check_iteration_buffers(seq: Sequence) -> None:
    """Each loop's ``index`` names an iteration buffer, and each iteration buffer is the
    index of exactly one loop."""
    owners: dict[str, int] = {}
    for loop in seq.loops():
        if loop.index is None:
            continue
        found = seq._by_name.get(loop.index)
        if found is None or found.role is not Role.ITERATION:
            raise _refuse(f"a loop keeps its iteration number in {loop.index!r}, which is not "
                          "an iteration buffer of the sequence",
                          "Build sequences with SequenceBuilder: `with b.loop(...) as k:`.")
        owners[loop.index] = owners.get(loop.index, 0) + 1
    for b in seq.of_role(Role.ITERATION):
        if owners.get(b.name) != 1:
            raise _refuse(f"iteration buffer {b.name!r} belongs to {owners.get(b.name, 0)} "
                          "loops, not one", "Build sequences with SequenceBuilder: "
                          "`with b.loop(...) as k:` gives each loop its own number.")


def _check_items(seq: Sequence, items: tuple[Item, ...], n: int, written: set[str],
                 enclosing: tuple[StepLoop, ...]) -> int:
    """Check ``items`` (the steps numbered from ``n``) inside the loops ``enclosing``;
    return the number of the next step."""
    for item in items:
        if isinstance(item, Step):
            _check_step(seq, item, n, written, enclosing)
            n += 1
            continue
        first = n
        _check_loop(seq, item, n)
        n = _check_items(seq, item.body, n, written, (*enclosing, item))
        if item.until_zero is not None and not any(
                item.until_zero in s.outputs() for s in steps_of(item.body)):
            raise _refuse(f"the loop of steps {first} to {n - 1} waits for "
                          f"{item.until_zero!r} to be zero, and no step of its body writes it",
                          "Bind the flag to an output or read_write buffer of a step in "
                          "the loop, which sets it while another iteration is needed.")
    return n


def _check_buffers(buffers: tuple[SequenceBuffer, ...]) -> None:
    if len(buffers) > MAX_BUFFERS:
        raise _refuse(f"the sequence declares {len(buffers)} buffers, more than {MAX_BUFFERS}",
                      "Use fewer, larger buffers.")
    names: set[str] = set()
    for b in buffers:
        if not isinstance(b.name, str) or not _NAME.match(b.name):
            raise _refuse(f"buffer name {b.name!r} is not an identifier of 1 to 64 characters",
                          "Name buffers like Python variables, e.g. 'partial_sums'.")
        if b.name in names:
            raise _refuse(f"buffer {b.name!r} is declared twice", "Give each buffer one name.")
        names.add(b.name)
        if (b.role is Role.ITERATION) != bool(_ITERATION_NAME.match(b.name)):
            raise _refuse(f"{b.role.value} buffer {b.name!r}: names iteration_<n> are the "
                          "loops' iteration numbers, and only theirs",
                          "Give the buffer another name (iteration_<n> is what "
                          "`with b.loop(...) as k` names loop n's number).")
        if not isinstance(b.dtype, DType):
            raise _refuse(f"buffer {b.name!r} has dtype {b.dtype!r}, not an IR dtype",
                          "Pass an IR dtype such as ir.f32 or ir.u32.")
        if isinstance(b.count, bool) or not isinstance(b.count, int) \
                or not 1 <= b.count <= abi.MAX_ELEMENTS:
            raise _refuse(f"buffer {b.name!r} has count {b.count!r}, not 1 to 2**32-1",
                          "Declare every sequence buffer with its element count.")
        if (b.role is Role.CONSTANT) != (b.data is not None):
            raise _refuse(f"buffer {b.name!r}: only a constant carries data",
                          "Declare fixed data with .constant(name, dtype, values).")
        if b.data is not None and len(b.data) != b.nbytes:
            raise _refuse(f"constant {b.name!r} has {len(b.data)} bytes, its dtype and count "
                          f"need {b.nbytes}", "Pass the constant's array unchanged.")
        if b.role is Role.ITERATION and (b.dtype is not DType.U32 or b.count != 1):
            raise _refuse(f"iteration buffer {b.name!r} is {b.dtype.value}[{b.count}], not "
                          "u32[1]", "Build sequences with SequenceBuilder: "
                          "`with b.loop(...) as k:`.")
        if b.data is not None and b.nbytes > MAX_CONSTANT_BYTES:
            raise _refuse(f"constant {b.name!r} is {b.nbytes} bytes, over "
                          f"{MAX_CONSTANT_BYTES}", "Pass large data as an input instead.")


def _check_loop(seq: Sequence, loop: StepLoop, first: int) -> None:
    where = f"the loop starting at step {first}"
    if not loop.body:
        raise _refuse(f"{where} has no steps", "Add steps inside the loop, or remove it.")
    if (loop.times is None) == (loop.until_zero is None):
        raise _refuse(f"{where} needs exactly one of times= or until_zero=",
                      "Pass times=N for a fixed count, or until_zero='flag'.")
    bound = loop.times if loop.times is not None else loop.max_iterations
    label = "times" if loop.times is not None else "max_iterations"
    if isinstance(bound, bool) or not isinstance(bound, int) \
            or not 1 <= bound <= MAX_ITERATIONS:
        raise _refuse(f"{where} has {label}={bound!r}, not 1 to {MAX_ITERATIONS}",
                      f"Pass {label} from 1 to {MAX_ITERATIONS}; longer work is several runs.")
    if loop.times is not None and loop.max_iterations is not None:
        raise _refuse(f"{where} has both times= and max_iterations=",
                      "max_iterations bounds an until_zero loop; drop it with times=.")
    if loop.until_zero is not None and loop.until_zero not in seq._by_name:
        raise _refuse(f"{where} waits on {loop.until_zero!r}, which the sequence does not "
                      "declare", "Declare the flag, e.g. .transient('flag', ir.u32, 1).")
    if loop.until_zero is not None and seq._by_name[loop.until_zero].role in _FIXED_FLAGS:
        raise _refuse(f"{where} waits on {loop.until_zero!r}, an "
                      f"{seq._by_name[loop.until_zero].role.value} the loop would overwrite",
                      "Use a transient (or resident) buffer as the flag.")


def _check_step(seq: Sequence, step: Step, n: int, written: set[str],
                enclosing: tuple[StepLoop, ...]) -> None:
    where = f"step {n}"
    if not isinstance(step.program, Program):
        raise _refuse(f"{where} runs a {type(step.program).__name__}, not a Program",
                      "Pass a program built with vyre_core.ir.")
    try:
        step.program.check()
    except ValidationError as exc:
        raise _refuse(f"{where}: its program is not valid: {exc.cause}",
                      "Fix the program's findings (Program.validate()).") from None
    if step.program.constants:
        raise _refuse(f"{where}'s program declares constants "
                      f"({', '.join(c.name for c in step.program.constants)}), unchosen",
                      "Add the step with SequenceBuilder.step(program, constants=...), or "
                      "specialize its program first (Program.specialize).")
    grid = step.grid
    if not isinstance(grid, tuple) or len(grid) != 3 or not all(
            isinstance(a, int) and not isinstance(a, bool) and 1 <= a <= _U32_MAX
            for a in grid):
        raise _refuse(f"{where} launches grid {grid!r}, not three workgroup counts from 1 to "
                      "2**32-1", "Pass grid= as e.g. (64,) or (8, 8); every axis >= 1.")
    own = bindable(step.program)
    if len(step.bindings) != len(own):
        raise _refuse(f"{where} binds {len(step.bindings)} buffers, its program has "
                      f"{len(own)}", "Bind every non-workgroup buffer of the program.")
    used: dict[str, Buffer] = {}
    for b, name in zip(own, step.bindings, strict=True):
        found = seq._by_name.get(name)
        if found is None:
            raise _refuse(f"{where} binds {b.name!r} to {name!r}, which the sequence does not "
                          "declare", f"Declare {name!r} (input, constant, transient or "
                          "resident), or bind another buffer.")
        if found.dtype is not b.dtype:
            raise _refuse(f"{where} binds {b.name!r} ({b.dtype.value}) to {name!r} "
                          f"({found.dtype.value})", "Bind a buffer of the same dtype.")
        if b.count is not None and b.count != found.count:
            raise _refuse(f"{where} binds {b.name!r} of {b.count} elements to {name!r} of "
                          f"{found.count}: the sizes disagree",
                          f"Declare {name!r} with {b.count} elements, or make the program's "
                          "buffer runtime-sized.")
        if b.access in _WRITES and found.role in _READ_ONLY:
            raise _refuse(f"{where} writes {found.role.value} {name!r} (through {b.name!r})",
                          "Copy it into a transient first, or declare it resident."
                          if found.role is Role.CONSTANT else "Bind the loop's number to a "
                          "read or uniform buffer: the runner keeps it, steps only read it.")
        if found.role is Role.ITERATION and all(loop.index != name for loop in enclosing):
            raise _refuse(f"{where} reads iteration number {name!r} (as {b.name!r}) outside "
                          "its loop", "Bind a loop's number (`with b.loop(...) as k:`) only in "
                          "steps inside that with-block; outside it, keep what you need in a "
                          "buffer a step writes.")
        twice = used.get(name)
        if twice is not None and (b.access in _WRITES or twice.access in _WRITES):
            raise _refuse(f"{where} binds {name!r} to both {twice.name!r} and {b.name!r}, "
                          "and writes one of them",
                          "Bind a buffer a step writes to one of its program's buffers only.")
        used[name] = b
        if b.access in (Access.READ, Access.UNIFORM) and name not in written:
            raise _refuse(f"{where} reads transient {name!r} (as {b.name!r}) before any step "
                          "writes it", "Write it in an earlier step, or make it an input.")
    written.update(name for b, name in zip(own, step.bindings, strict=True)
                   if b.access in _WRITES)


# -- builder -------------------------------------------------------------------------------


class SequenceBuilder:
    """Builds a Sequence: declare buffers, add steps (and loops of steps), then
    ``build(returns=[...])``, which checks every rule.

    >>> b = SequenceBuilder()
    >>> b.input("x", ir.f32, n); b.transient("partial", ir.f32, groups)
    >>> b.step(partial_sums, {"src": "x", "dst": "partial"})
    >>> seq = b.build(returns=["partial"])
    """

    def __init__(self) -> None:
        self._buffers: list[SequenceBuffer] = []
        self._items: list[Item] = []
        self._open: list[list[Item]] = []  # the bodies of the loops being built, outer first
        self._numbers: list[str] = []      # each loop's iteration buffer, in opening order
        self._steps = 0                    # steps added, loops' bodies once (names constants)

    def _declare(self, name: str, dtype: DType, count: int, role: Role,
                 data: bytes | None = None) -> str:
        self._buffers.append(SequenceBuffer(name, dtype, count, role, data))
        return name

    def input(self, name: str, dtype: DType, count: int) -> str:
        """A buffer the caller passes at each run, in declaration order among inputs. A
        step may update it in place: the run works on its own copy (return it to see it)."""
        return self._declare(name, dtype, count, Role.INPUT)

    def transient(self, name: str, dtype: DType, count: int) -> str:
        """A buffer that lives only inside one run, zero-filled at its start."""
        return self._declare(name, dtype, count, Role.TRANSIENT)

    def resident(self, name: str, dtype: DType, count: int) -> str:
        """A buffer bound at each run to a ResidentBuffer of ``count`` elements."""
        return self._declare(name, dtype, count, Role.RESIDENT)

    def constant(self, name: str, dtype: DType, values: Any) -> str:
        """Fixed data, part of the sequence (and of its fingerprint)."""
        array = np.ascontiguousarray(values, dtype=dtype.storage_np).reshape(-1)
        return self._declare(name, dtype, int(array.size), Role.CONSTANT, array.tobytes())

    def buffer(self, name: str) -> SequenceBuffer:
        """A buffer declared so far: what a helper that adds steps (``vyre_core.lib.steps``)
        reads of the buffers it is handed."""
        for declared in self._buffers:
            if declared.name == name:
                return declared
        raise _refuse(f"no buffer {name!r} is declared (yet)",
                      f"Declare it before the steps that read it; declared so far: "
                      f"{[b.name for b in self._buffers]}.")

    def step(self, program: Program | KernelFunction,
             bind: Mapping[str, Binding] | None = None,
             grid: tuple[int, ...] | int | None = None,
             constants: Mapping[str, Any] | None = None, *,
             dim: tuple[int, ...] | int | None = None,
             shapes: Mapping[str, tuple[int, ...]] | None = None) -> None:
        """Run ``program``. A program buffer binds to the sequence buffer named in ``bind``,
        else to the one of its own name (a loop's number, ``with b.loop(...) as k``, binds
        to a u32 ``read`` or ``uniform`` buffer of one element). ``dim`` is the number of
        invocations per axis (``dim[i]`` is ``global_id(i)``'s extent), ``grid`` the
        workgroups per axis; neither: one invocation per element of the longest output, as
        a dispatch infers it. ``constants`` chooses the program's specialization values
        (defaults otherwise): the step runs the specialized program.

        A ``@vyre.kernel`` runs over ``dim`` (required), compiled for the dtypes of the
        buffers bound to its parameters; a scalar parameter takes a number in ``bind``
        (a constant of the sequence) or a one-element buffer (a loop's number binds to a
        ``u32`` or ``i32`` scalar); ``shapes`` gives each shaped array's extents."""
        bind = dict(bind or {})
        if grid is not None and dim is not None:
            raise _refuse("step() got both grid= and dim=",
                          "Pass dim= (invocations per axis) or grid= (workgroups per axis), "
                          "not both.")
        number, self._steps = self._steps, self._steps + 1
        declared = {s.name: s for s in self._buffers}
        declared.update((name, _iteration(name)) for name in self._numbers)
        if isinstance(program, KernelFunction):
            made = kernel_step(program, bind, dim, dict(shapes or {}), declared, number)
            self._buffers.extend(made.constants)
            declared.update((c.name, c) for c in made.constants)
            program, bind = made.program, made.bind
        elif shapes is not None:
            raise _refuse("step() got shapes= for a Program",
                          "shapes= gives a @vyre.kernel's shaped arrays their extents; a "
                          "program's buffers are flat.")
        if not isinstance(program, Program):
            raise _refuse(f"step() takes a Program or a @vyre.kernel, got "
                          f"{type(program).__name__}",
                          "Pass a program built with vyre_core.ir, or a @vyre.kernel "
                          "function with dim=.")
        if any(not isinstance(v, str) for v in bind.values()):
            raise _refuse("bind gives a program buffer a value that is not a sequence "
                          "buffer's name", "Bind each program buffer to a declared buffer "
                          "by name (numbers are for a @vyre.kernel's scalars).")
        if program.constants or constants:
            program = program.specialize(constants or {})
        own = bindable(program)
        unknown = set(bind) - {b.name for b in own}
        if unknown:
            raise _refuse(f"bind names {sorted(unknown)}, which the program does not have "
                          f"(it has {[b.name for b in own]})",
                          "Key bind by the program's own buffer names.")
        bindings = tuple(bind.get(b.name, b.name) for b in own)
        undeclared = sorted(set(bindings) - set(declared))
        if undeclared:
            raise _refuse(f"the step binds {undeclared}, not declared (yet)",
                          "Declare every buffer (input, constant, transient, resident) before "
                          "the steps that use it.")
        if dim is not None:
            try:
                grid = abi.grid_for_dim(dim, program.workgroup)
            except InvalidInputError as exc:
                raise _refuse(exc.cause, exc.fix) from None
        elif grid is None:
            grid = abi.infer_grid(program, {b.name: declared[name].count
                                            for b, name in zip(own, bindings, strict=True)})
        else:
            axes = tuple(grid) if isinstance(grid, tuple | list) else (grid,)
            grid = tuple(int(a) if isinstance(a, np.integer) else a for a in axes)
            grid += (1,) * (3 - len(grid)) if len(grid) < 3 else ()
        made = Step(program, bindings, grid)
        (self._open[-1] if self._open else self._items).append(made)

    @contextmanager
    def loop(self, times: int | None = None, until_zero: str | None = None,
             max_iterations: int | None = None) -> Iterator[str]:
        """Steps (and loops, up to 4 deep) added inside run ``times`` times, or until
        ``until_zero`` (zero-filled before each iteration) is still all zero after one,
        at most ``max_iterations`` (default 10,000) times. Gives the name of the loop's
        iteration number (``with b.loop(times=n) as k``): bound to a step's u32 ``read``
        or ``uniform`` buffer of one element, it holds the current iteration, from 0."""
        if until_zero is not None and max_iterations is None:
            max_iterations = DEFAULT_MAX_ITERATIONS
        number = f"iteration_{len(self._numbers)}"  # (an _ITERATION_NAME)
        self._numbers.append(number)
        self._open.append([])
        try:
            yield number
            body = tuple(self._open.pop())
            made = StepLoop(body, times, until_zero, max_iterations, number)
            (self._open[-1] if self._open else self._items).append(made)
        except BaseException:
            self._open.clear()
            raise

    def build(self, returns: list[str] | tuple[str, ...] = ()) -> Sequence:
        if self._open:
            raise _refuse("build() inside a loop", "Close the loop's with-block first.")
        bound = {name for step in steps_of(tuple(self._items)) for name in step.bindings}
        read = [name for name in self._numbers if name in bound]
        items = tuple(_without_unread(item, set(read)) for item in self._items)
        buffers = (*self._buffers, *(_iteration(name) for name in read))
        return Sequence(buffers, items, tuple(returns)).check()


def _iteration(name: str) -> SequenceBuffer:
    return SequenceBuffer(name, DType.U32, 1, Role.ITERATION)


def _without_unread(item: Item, read: set[str]) -> Item:
    """``item`` with the loops whose number no step reads keeping none (one sequence,
    one form: a loop costs nothing for a number nobody reads)."""
    if not isinstance(item, StepLoop):
        return item
    return replace(item, body=tuple(_without_unread(i, read) for i in item.body),
                   index=item.index if item.index in read else None)
