"""``Program``: buffers, a workgroup size and a body; identified by its canonical bytes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import blake3

from vyre_core.errors import InvalidProgramError
from vyre_core.ir import wire
from vyre_core.ir.nodes import Buffer, SpecConstant, Stmt

if TYPE_CHECKING:
    from vyre_core.ir.requirements import Requirements
    from vyre_core.ir.validate import Finding


@dataclass(frozen=True, eq=True)
class Program:
    buffers: tuple[Buffer, ...]
    workgroup: tuple[int, int, int]
    body: tuple[Stmt, ...]
    constants: tuple[SpecConstant, ...] = ()  # specialization constants, declaration order

    def __post_init__(self) -> None:
        wg = tuple(self.workgroup)
        if not 1 <= len(wg) <= 3 or not all(isinstance(a, int) for a in wg):
            raise InvalidProgramError(f"workgroup {self.workgroup!r} is not 1 to 3 integers",
                                      "Pass a workgroup size such as (64,) or (8, 8).")
        wg += (1,) * (3 - len(wg))
        object.__setattr__(self, "buffers", tuple(self.buffers))
        object.__setattr__(self, "workgroup", wg)
        object.__setattr__(self, "body", tuple(self.body))
        object.__setattr__(self, "constants", tuple(self.constants))

    # -- identity ----------------------------------------------------------------------

    @cached_property
    def _wire(self) -> bytes:
        return wire.encode(self)

    def to_wire(self) -> bytes:
        """Canonical bytes: equal IR gives equal bytes however it was built."""
        return self._wire

    @classmethod
    def from_wire(cls, data: bytes | bytearray | memoryview) -> Program:
        """Decode untrusted bytes; any malformation raises ``InvalidProgramError``."""
        return cls(*wire.decode(data))

    @cached_property
    def _fingerprint(self) -> str:
        return blake3.blake3(self._wire).hexdigest()

    def fingerprint(self) -> str:
        """blake3 hex digest of the canonical bytes."""
        return self._fingerprint

    # -- analysis ----------------------------------------------------------------------

    def validate(self) -> list[Finding]:
        """Every validation finding (empty when valid); cached by fingerprint."""
        from vyre_core.ir.validate import validate

        return validate(self)

    def check(self) -> Program:
        """Raise ``ValidationError`` listing every finding; return self when valid."""
        from vyre_core.ir.validate import check

        check(self)
        return self

    @cached_property
    def _requirements(self) -> Requirements:
        from vyre_core.ir.requirements import requirements_of

        return requirements_of(self)

    def requirements(self) -> Requirements:
        """What a backend must support to run this program."""
        return self._requirements

    @cached_property
    def global_reads(self) -> frozenset[tuple[str, int]]:
        """(input, axis) for each runtime-sized input read at ``global_id(axis)``
        (``vyre_core.ir.indexing``): what grid inference is checked against."""
        from vyre_core.ir.indexing import read_by_global_id

        return read_by_global_id(self)

    def specialize(self, values: Mapping[str, Any] | None = None, /, **named: Any) -> Program:
        """This program with its constants fixed: each named value (checked against the
        constant's type and declared range), the default for the rest. The result declares
        no constants; the program itself is returned when it declares none."""
        from vyre_core.ir.specialize import canonical_values, specialize

        self.check()
        return specialize(self, canonical_values({**(values or {}), **named})).check()

    # -- ABI ---------------------------------------------------------------------------

    def buffer(self, name: str) -> Buffer:
        for b in self.buffers:
            if b.name == name:
                return b
        raise KeyError(name)

    @cached_property
    def inputs(self) -> tuple[Buffer, ...]:
        """Buffers the caller passes, in declaration order (asked on every dispatch)."""
        return tuple(b for b in self.buffers if b.is_input)

    @cached_property
    def outputs(self) -> tuple[Buffer, ...]:
        """Buffers the dispatch returns, in declaration order (asked on every dispatch)."""
        return tuple(b for b in self.buffers if b.is_output)

    @property
    def invocations_per_workgroup(self) -> int:
        x, y, z = self.workgroup
        return x * y * z

