"""The parts a sequence is made of: its buffers, its steps and its loops (plain frozen
values; ``model.Sequence`` holds them and the rules they must keep), and the sizes that
bound them."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from functools import cached_property

from vyre_core.ir.dtypes import DType
from vyre_core.ir.nodes import Access, Buffer
from vyre_core.ir.program import Program

#: Steps in one sequence, counting each step of a loop body once.
MAX_STEPS = 4096
#: Buffers one sequence declares.
MAX_BUFFERS = 1024


class Role(enum.StrEnum):
    INPUT = "input"           # the caller passes it at each run
    CONSTANT = "constant"     # fixed bytes, part of the sequence
    TRANSIENT = "transient"   # lives only inside one run, zero-filled at its start
    RESIDENT = "resident"     # a ResidentBuffer bound at each run


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
    """``body`` run ``times`` times, or until every byte of ``until_zero`` is zero after an
    iteration (at most ``max_iterations``)."""

    body: tuple[Step, ...]
    times: int | None = None
    until_zero: str | None = None
    max_iterations: int | None = None

    @property
    def limit(self) -> int:
        """The most iterations it runs."""
        return self.times if self.times is not None else self.max_iterations  # type: ignore


Item = Step | StepLoop


def bindable(program: Program) -> list[Buffer]:
    """The buffers of ``program`` a step binds: every one but workgroup memory."""
    return [b for b in program.buffers if b.access is not Access.WORKGROUP]


@dataclass(frozen=True)
class LoopRun:
    """How one loop of a sequence ran. ``converged`` is False only for a flag loop that
    stopped at its ``max_iterations`` with the flag still set. (Part of the contract:
    ``vyre_core.contract.LoopRun``.)"""

    iterations: int
    converged: bool
