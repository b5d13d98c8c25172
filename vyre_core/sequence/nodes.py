"""The parts a sequence is made of: its buffers, its steps and its loops (plain frozen
values; ``model.Sequence`` holds them and the rules they must keep), and the sizes that
bound them."""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

from vyre_core.ir.dtypes import DType
from vyre_core.ir.nodes import Access, Buffer
from vyre_core.ir.program import Program

#: Steps in one sequence, counting each step of a loop body once.
MAX_STEPS = 4096
#: Buffers one sequence declares.
MAX_BUFFERS = 1024
#: Loops inside loops, at most (a loop of steps only is depth 1).
MAX_LOOP_DEPTH = 4


class Role(enum.StrEnum):
    INPUT = "input"           # the caller passes it at each run
    CONSTANT = "constant"     # fixed bytes, part of the sequence
    TRANSIENT = "transient"   # lives only inside one run, zero-filled at its start
    RESIDENT = "resident"     # a ResidentBuffer bound at each run
    ITERATION = "iteration"   # one u32: its loop's current iteration, kept by the runner


@dataclass(frozen=True)
class SequenceBuffer:
    name: str
    dtype: DType
    count: int
    role: Role
    data: bytes | None = None  # a constant's bytes

    @property
    def nbytes(self) -> int:
        return self.count * self.dtype.storage_bytes

    def as_ir_buffer(self) -> Buffer:
        """This buffer as a read buffer of its dtype and count (for ABI coercion)."""
        return Buffer(self.name, 0, self.dtype, Access.READ, self.count)


@dataclass(frozen=True)
class Step:
    """One dispatch: ``bindings`` names the sequence buffer bound to each non-workgroup
    buffer of ``program``, in declaration order; ``grid`` is the workgroups it launches."""

    program: Program
    bindings: tuple[str, ...]
    grid: tuple[int, int, int]

    @cached_property
    def bound(self) -> tuple[tuple[Buffer, str], ...]:
        """(program buffer, sequence buffer name) per binding."""
        return tuple(zip(bindable(self.program), self.bindings, strict=True))

    def inputs(self) -> list[str]:
        """The sequence buffers passed as the program's inputs, in its input ABI order."""
        return [name for b, name in self.bound if b.is_input]

    def outputs(self) -> list[str]:
        """The sequence buffers that take the program's outputs, in its output ABI order."""
        return [name for b, name in self.bound if b.is_output]


@dataclass(frozen=True)
class StepLoop:
    """``body`` (steps and loops) run ``times`` times, or until every byte of
    ``until_zero`` is zero after an iteration (at most ``max_iterations``). ``index``
    names the ``ITERATION`` buffer that holds the current iteration (from 0) while the
    body runs, when a step reads it."""

    body: tuple[Item, ...]
    times: int | None = None
    until_zero: str | None = None
    max_iterations: int | None = None
    index: str | None = None

    @property
    def limit(self) -> int:
        """The most iterations it runs."""
        return self.times if self.times is not None else self.max_iterations  # type: ignore


Item = Step | StepLoop


def steps_of(items: tuple[Item, ...]) -> Iterator[Step]:
    """Every step of ``items`` in order, a loop's body once (loops inside it too)."""
    for item in items:
        if isinstance(item, StepLoop):
            yield from steps_of(item.body)
        else:
            yield item


def loops_of(items: tuple[Item, ...]) -> Iterator[StepLoop]:
    """Every loop of ``items`` in the order their with-blocks open (an outer loop before
    the loops inside it): the order a run reports them in."""
    for item in items:
        if isinstance(item, StepLoop):
            yield item
            yield from loops_of(item.body)


def bindable(program: Program) -> list[Buffer]:
    """The buffers of ``program`` a step binds: every one but workgroup memory."""
    return [b for b in program.buffers if b.access is not Access.WORKGROUP]


@dataclass(frozen=True)
class LoopRun:
    """How one loop of a sequence ran, over the whole run: ``iterations`` counts every
    iteration (of every time it ran, inside an enclosing loop); ``converged`` is False
    only for a flag loop that stopped at its ``max_iterations`` with the flag still set,
    any of the times it ran. (Part of the contract: ``vyre_core.contract.LoopRun``.)"""

    iterations: int
    converged: bool
