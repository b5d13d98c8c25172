"""Compiled-pipeline handles and their cache keys.

A key is blake3 over the canonical program bytes, the dispatch policy that changes
compiled code (workgroup override, constants, ULP budget), the backend id and version and
the math library's version (a backend that computes the library itself is given the
program without it written out), so equal IR built differently shares a pipeline and any
change to those parts gets a new one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import blake3
import msgpack
import numpy as np

from vyre_core.config import DispatchConfig
from vyre_core.contract.types import Outputs
from vyre_core.errors import InvalidConfigError, PipelineInvalidatedError
from vyre_core.ir import Program
from vyre_core.ir.dtypes import DType
from vyre_core.ir.specialize import specialize
from vyre_core.launch import effective_program
from vyre_core.mathlib.library import version as math_library_version
from vyre_core.sequence import Sequence as StepSequence
from vyre_core.sequence import output_buffers


def pipeline_cache_key(program: Program, config: DispatchConfig, backend_id: str,
                       backend_version: str) -> str:
    """The key of the program as it will run (``effective_program``): an override equal
    to the program's own workgroup, or a constant given its default, shares the key."""
    effective = effective_program(program, config)
    policy = msgpack.packb([config.ulp_budget, backend_id, backend_version,
                            math_library_version()])
    digest = blake3.blake3(effective.to_wire())
    digest.update(b"\x00vyre-pipeline\x00")
    digest.update(policy)
    return digest.hexdigest()


Runner = Callable[[Sequence[Any], DispatchConfig], Outputs]


class _PinnedHandle:
    """What a compiled handle shares: it belongs to one worker generation of one backend,
    and once ``is_current`` says that generation is gone (the worker restarted or the
    device was lost) it refuses to run on state that no longer exists."""

    def __init__(self, work: Program | StepSequence, config: DispatchConfig, backend: str,
                 generation: int, is_current: Callable[[int], bool]) -> None:
        self.config = config
        self.backend = backend
        self.generation = generation
        self._work = work
        self._is_current = is_current

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.backend!r}, {self._kind}="
                f"{self.fingerprint[:12]}, generation={self.generation})")

    _kind = "program"

    @property
    def valid(self) -> bool:
        return self._is_current(self.generation)

    @property
    def fingerprint(self) -> str:
        return self._work.fingerprint()

    def output_buffers(self) -> list[tuple[str, DType]]:
        """Name and dtype of each output, in order (what ``dispatch`` returns)."""
        return output_buffers(self._work)

    def _refuse_if_stale(self, what: str, fix: str) -> None:
        if not self.valid:
            raise PipelineInvalidatedError(
                f"{what} for backend {self.backend!r} was compiled in worker generation "
                f"{self.generation}, which has since restarted", fix,
                generation=self.generation, backend=self.backend)


class CompiledPipeline(_PinnedHandle):
    """A program compiled for one backend, in one worker generation; ``dispatch`` runs it
    there until that generation is gone. ``key`` is its pipeline cache key, computed once
    where it was compiled (the worker) and carried back with the handle;
    ``compile_seconds`` what compiling took there (a backend that caches compiled code on
    disk, as cpu does, pays little in a second process), None where not measured.
    ``program`` is the program as it runs (constants chosen); ``source`` the one compiled,
    which a dispatch's ``constants`` are checked against."""

    def __init__(self, program: Program, config: DispatchConfig, backend: str, key: str,
                 generation: int, runner: Runner,
                 is_current: Callable[[int], bool] = lambda _generation: True,
                 compile_seconds: float | None = None, source: Program | None = None) -> None:
        super().__init__(program, config, backend, generation, is_current)
        self.program = program
        self.source = program if source is None else source
        self.key = key
        self.compile_seconds = compile_seconds
        self._runner = runner

    def dispatch(self, inputs: Sequence[Any], config: DispatchConfig | None = None, *,
                 dim: int | Sequence[int] | None = None) -> Outputs:
        """Run the compiled program; ``config`` defaults to the one it was compiled with;
        ``dim``: the invocations per axis, as in ``Driver.dispatch``."""
        self._refuse_if_stale(f"pipeline {self.key[:12]}",
                              "Compile the program again (Driver.compile) and use the new "
                              "handle; Driver.dispatch recompiles by itself.")
        config = config or self.config
        if dim is not None:
            config = config.with_dim(dim)
        if config.tuned:
            raise InvalidConfigError(
                "tuned=True has no tuned choice to apply to a compiled pipeline",
                "Compile with the config Driver.tuned_config(program, inputs) returns.")
        if config.workgroup_override not in (None, self.program.workgroup):
            raise InvalidConfigError(
                f"workgroup_override={config.workgroup_override} differs from the "
                f"workgroup {self.program.workgroup} this pipeline was compiled for",
                "Compile the program again with that workgroup_override.")
        if config.constants:  # (the bodies: a compile-time workgroup override stays)
            if specialize(self.source, config.constants).body != self.program.body:
                raise InvalidConfigError(
                    f"constants {dict(config.constants)} differ from the values this pipeline "
                    "was compiled with", "Compile the program again with those constants.")
            config = config.evolve(constants=())
        return self._runner(inputs, config)


SequenceRunner = Callable[[Sequence[Any], Mapping[str, Any], DispatchConfig,
                           Sequence[np.ndarray] | None], Outputs]


class CompiledSequence(_PinnedHandle):
    """A sequence compiled in one worker generation of one backend. ``dispatch`` runs it
    there (one request per run) until that generation is gone."""

    _kind = "sequence"

    def __init__(self, sequence: StepSequence, config: DispatchConfig, backend: str,
                 generation: int, runner: SequenceRunner,
                 is_current: Callable[[int], bool]) -> None:
        super().__init__(sequence, config, backend, generation, is_current)
        self.sequence = sequence
        self._runner = runner

    def dispatch(self, inputs: Sequence[Any] = (), config: DispatchConfig | None = None,
                 resident: Mapping[str, Any] | None = None,
                 out: Sequence[np.ndarray] | None = None) -> Outputs:
        """Run the sequence: ``inputs`` one per input buffer in declaration order,
        ``resident`` a ResidentBuffer of this handle's worker per resident buffer; with
        ``out`` the returns are written there, as ``Driver.dispatch`` does."""
        self._refuse_if_stale(f"sequence {self.fingerprint[:12]}",
                              "Compile the sequence again (Driver.compile) and use the new "
                              "handle; Driver.dispatch recompiles by itself.")
        return self._runner(inputs, resident or {}, config or self.config, out)
