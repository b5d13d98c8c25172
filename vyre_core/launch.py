"""Turning (program, inputs, config) into one launch a backend can run, and running it.

Backend-neutral: applies the DispatchConfig (workgroup override, grid, dispatch
elements, max output bytes, fixpoint iterations, profiling), checks the launch against a
backend's limits with messages that name the axis and the limit, and checks what the
backend returns. Every executor (in-process host, worker) goes through here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vyre_core import abi, cancel
from vyre_core.config import DispatchConfig
from vyre_core.contract.types import Capabilities, Outputs, TimedDispatch, Timing, wall_clock_ns
from vyre_core.errors import InvalidConfigError, InvalidInputError, LaunchLimitError
from vyre_core.ir import Program
from vyre_core.ir.nodes import Access
from vyre_core.ir.requirements import Requirements
from vyre_core.ir.specialize import specialize
from vyre_core.limits import buffer_exceeded, grid_exceeded, index_exceeded, workgroup_exceeded


@dataclass(frozen=True)
class LaunchPlan:
    program: Program            # constants chosen, the workgroup override applied
    inputs: list[np.ndarray]    # bound per the input ABI
    lengths: dict[str, int]     # element count of every non-workgroup buffer
    grid: tuple[int, int, int]
    config: DispatchConfig      # grid_override = grid; workgroup_override, constants consumed


def effective_program(program: Program, config: DispatchConfig) -> Program:
    """``program`` as it runs: its constants given the config's values (or their
    defaults), then the config's workgroup override applied; validated."""
    if program.constants or config.constants:
        program = specialize(program.check(), config.constants)
    if config.workgroup_override is not None:
        program = Program(program.buffers, config.workgroup_override, program.body)
    return program.check()


def plan_launch(program: Program, inputs: Sequence[Any], config: DispatchConfig,
                caps: Capabilities | None = None, backend: str = "backend") -> LaunchPlan:
    """Validate, bind and size one dispatch; refuse it before it runs if it cannot fit."""
    program = effective_program(program, config)
    bound = abi.bind_inputs(program, inputs)
    lengths = abi.buffer_lengths(program, bound)
    grid, config = plan_grid(program, lengths, config, caps, backend)
    return LaunchPlan(program, bound, lengths, grid, config)


def plan_grid(program: Program, lengths: dict[str, int], config: DispatchConfig,
              caps: Capabilities | None, backend: str) -> tuple[tuple[int, int, int],
                                                                DispatchConfig]:
    """The grid of an effective program with known buffer lengths (from the config's
    grid, its dim, or inference), checked against the index types, the inputs, the
    output-size cap and ``caps``; and the config the backend receives."""
    grid = checked_grid(program, lengths, config)
    if caps is not None:
        check_limits(program, grid, lengths, caps, backend)
    return grid, config.evolve(grid_override=grid, dim=None, workgroup_override=None,
                               constants=())


def checked_grid(program: Program, lengths: dict[str, int],
                 config: DispatchConfig) -> tuple[int, int, int]:
    """The grid of ``plan_grid``, checked against everything but a backend's limits."""
    grid = abi.infer_grid(program, lengths, config.grid_override, config.dispatch_elements,
                          config.dim)
    check_grid(program, grid, lengths, config)
    if config.max_output_bytes is not None:
        out_bytes = sum(lengths[b.name] * b.dtype.storage_bytes for b in program.outputs)
        if out_bytes > config.max_output_bytes:
            raise LaunchLimitError(
                f"{config.describe()} would return {out_bytes} bytes of outputs, over "
                f"max_output_bytes={config.max_output_bytes}",
                "Raise DispatchConfig.max_output_bytes, or shrink the output buffers.")
    return grid


def check_grid(program: Program, grid: tuple[int, int, int], lengths: dict[str, int],
               config: DispatchConfig) -> None:
    """Refuse, before any work, a launch no backend can run as meant: an axis past what a
    u32 global id numbers; a dim of several axes that runs past the output shape it lays
    ids over (the axes swapped, most likely); an inferred grid that leaves elements of an
    input the program reads at its global id unread (docs/ir.md)."""
    for over in index_exceeded(grid, program.workgroup):
        raise LaunchLimitError(f"{config.describe()}: {over.cause}", over.fix)
    shaped = abi.shaped_output(program)
    if config.dim is not None and len(config.dim) > 1 and shaped is not None:
        extent = abi.shape_extent(shaped)
        for axis, (want, has) in enumerate(zip(config.dim, extent, strict=False)):
            if want > has:
                raise InvalidConfigError(
                    f"dim={config.dim} runs {want} invocations along global_id({axis}), "
                    f"past the {has} of output {shaped.name!r} of shape {shaped.shape} "
                    "(dim is x first; a shape is numpy's order, its last axis is x)",
                    f"Pass dim={tuple(extent[:len(config.dim)])} for that shape (or fewer "
                    "along an axis, to launch part of it), or leave dim out to infer it.")
    if config.grid_override is None and config.dispatch_elements is None \
            and config.dim is None:
        for name, axis in sorted(program.global_reads):
            count = lengths.get(name)
            covered = grid[axis] * program.workgroup[axis]
            if count is not None and count > covered:
                dim = f"dim=len({name})" if axis == 0 else "dim=(" + ", ".join(
                    f"len({name})" if a == axis else str(grid[a] * program.workgroup[a])
                    for a in range(axis + 1)) + ")"
                raise InvalidInputError(
                    f"the inferred grid runs {covered} invocations along "
                    f"global_id({axis}) (from the outputs), but input {name!r} has {count} "
                    f"elements and the program reads {name}[global_id({axis})]: "
                    f"{count - covered} of them would never be read",
                    f"Say how many invocations to launch: {dim} (drv.dispatch(program, "
                    f"inputs, {dim})), or DispatchConfig(grid_override=...).")


@dataclass(frozen=True)
class Launch:
    """A program with the launch one dispatch makes of it (grid, largest buffer as
    bound): what routing weighs, so it never chooses a backend that would refuse the
    launch. Its fingerprint and requirements are its program's (a refusal at compile
    holds for every launch of a program); ``route_key`` adds what the launch adds."""

    program: Program
    grid: tuple[int, int, int]
    largest: tuple[str, int] = ("", 0)   # (buffer, bytes): the largest non-workgroup one

    def fingerprint(self) -> str:
        return self.program.fingerprint()

    def requirements(self) -> Requirements:
        return self.program.requirements()

    def route_key(self) -> tuple[str, tuple[int, int, int], tuple[str, int]]:
        return self.program.fingerprint(), self.grid, self.largest


def launch_of(program: Program, config: DispatchConfig,
              bound: Sequence[np.ndarray] | None = None) -> tuple[Launch | Program,
                                                                   DispatchConfig]:
    """What routing weighs for ``program`` run with ``config`` (on ``bound`` inputs when
    known), and the config a worker gets for it (the grid planned here, so every check
    of ``check_grid`` happens before any work). Without inputs, a launch whose grid needs
    their lengths is not known: the effective program alone is weighed."""
    effective = effective_program(program, config)
    if bound is not None:
        lengths = abi.buffer_lengths(effective, bound)
    else:
        lengths = {b.name: b.count for b in effective.buffers
                   if b.count is not None and b.access is not Access.WORKGROUP}
        if config.grid_override is None and config.dim is None and \
                config.dispatch_elements is None and abi.shaped_output(effective) is None \
                and any(b.name not in lengths for b in effective.outputs):
            return effective, config
    grid = checked_grid(effective, lengths, config)
    sizes = [(lengths[b.name] * b.dtype.storage_bytes, b.name) for b in effective.buffers
             if b.name in lengths and b.access is not Access.WORKGROUP]
    nbytes, name = max(sizes, default=(0, ""))
    return Launch(effective, grid, (name, nbytes)), config.evolve(grid_override=grid,
                                                                  dim=None)


class PlannedLaunches:
    """Launches already planned, by (program, config, input shapes). A loop launching one
    kernel on arrays of the same shapes gets the same grid, checks and output shapes each
    time, so they are worked out at its first launch only; the inputs themselves are
    still bound per call. Safe from any thread (a race plans a launch twice)."""

    SIZE = 64  # entries kept; past it the memo starts again empty

    def __init__(self) -> None:
        self._entries: dict[tuple[Any, ...], tuple[Any, ...]] = {}

    def plan(self, program: Program, config: DispatchConfig, bound: Sequence[np.ndarray]
             ) -> tuple[Launch | Program, dict[str, Any], list[tuple[np.dtype, int]]]:
        """``launch_of(program, config, bound)``, its config as sent (a dict, shared:
        read it, never change it), and ``abi.output_shapes``."""
        key = (id(program), config, tuple(a.shape for a in bound))  # (a config's values
        entry = self._entries.get(key)  # are checked plain numbers and text: they hash)
        if entry is not None and entry[0] is program:  # (the id of a program still held)
            return entry[1:]  # type: ignore[return-value]
        launch, sent = launch_of(program, config, bound)
        planned = (launch, sent.to_wire(), abi.output_shapes(program, bound))
        if len(self._entries) >= self.SIZE:
            self._entries.clear()
        self._entries[key] = (program, *planned)
        return planned


def check_limits(program: Program, grid: tuple[int, int, int], lengths: dict[str, int],
                 caps: Capabilities, backend: str) -> None:
    """Raise LaunchLimitError naming the first limit of ``backend`` the launch exceeds."""
    req = program.requirements()
    over = [*index_exceeded(grid, program.workgroup),  # (a sequence step's grid too)
            *workgroup_exceeded(program.workgroup, req.workgroup_memory_bytes,
                                "workgroup_memory" in req.features, caps),
            *grid_exceeded(grid, caps),
            *(buffer_exceeded(b.name, lengths.get(b.name, 0) * b.dtype.storage_bytes, caps)
              for b in program.buffers if b.access is not Access.WORKGROUP)]
    first = next((e for e in over if e is not None), None)
    if first is not None:
        raise LaunchLimitError(f"backend {backend!r}: {first.cause}", first.fix)


Runner = Callable[[Program, list[np.ndarray], DispatchConfig], "list[Any] | TimedDispatch"]


def run_launch(plan: LaunchPlan, runner: Runner, backend: str) -> Outputs:
    """Run ``plan`` with ``runner``, re-running while read_write buffers change, up to
    ``fixpoint_iterations`` times. When profiling, wall time is the runner's own report
    if it returns a TimedDispatch, else measured here; device time only when reported."""
    inputs = plan.inputs
    wall = device = 0
    device_known = True
    rw: list[int] = []  # (what feeds back: a fixpoint's read_write buffers)
    rw_out: list[int] = []
    if plan.config.fixpoint_iterations > 1:
        rw = [i for i, b in enumerate(plan.program.inputs) if b.access is Access.READ_WRITE]
        rw_out = [i for i, b in enumerate(plan.program.outputs)
                  if b.access is Access.READ_WRITE]
    for _ in range(plan.config.fixpoint_iterations):
        cancel.check()  # (between passes: a safe point to stop a cancelled call)
        start = wall_clock_ns()
        result = runner(plan.program, inputs, plan.config)
        elapsed = wall_clock_ns() - start
        if isinstance(result, TimedDispatch):
            wall += result.timing.wall_ns
            device += result.timing.device_ns or 0
            device_known &= result.timing.device_ns is not None
            result = result.outputs
        else:
            wall += elapsed
            device_known = False
        outputs = abi.check_outputs(plan.program, result, plan.lengths, backend)
        if plan.config.fixpoint_iterations == 1 or all(
                np.array_equal(inputs[i].view(np.uint8), outputs[o].view(np.uint8))
                for i, o in zip(rw, rw_out, strict=True)):
            break  # bitwise fixpoint (NaN-safe, no copies); with no read_write buffer, one run
        inputs = list(inputs)
        for i, o in zip(rw, rw_out, strict=True):
            inputs[i] = outputs[o]
    result = Outputs(outputs)
    if plan.config.profile:
        result.timing = Timing(wall, device if device_known else None, plan.config.label)
    return result
