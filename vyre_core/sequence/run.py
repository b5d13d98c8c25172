"""Running a sequence step by step over arrays in the worker: the executor every backend
falls back on (the contract's default ``vyre_dispatch_sequence``), and the semantics any
native implementation must match byte for byte (docs/sequences.md)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping

import numpy as np

from vyre_core import cancel
from vyre_core.config import DispatchConfig
from vyre_core.sequence.model import Sequence
from vyre_core.sequence.nodes import Item, LoopRun, Role, Step, StepLoop

#: Runs one step's program on its input arrays (input ABI order) and returns its outputs
#: as arrays (output ABI order, checked). The third argument, in output ABI order, is for
#: each output an array the runner may write that output into and return, or None: the
#: run's own array of a transient buffer (a read_write one is also among the inputs, the
#: same array), so a runner that can update it in place saves a copy of it per step.
#: A runner may ignore it and return new arrays.
StepRunner = Callable[[Step, list[np.ndarray], list[np.ndarray | None]], list[np.ndarray]]


@functools.lru_cache(maxsize=1024)
def step_config(config: DispatchConfig, grid: tuple[int, int, int]) -> DispatchConfig:
    """The config one step's dispatch gets: the sequence's, with the step's grid."""
    return config.evolve(grid_override=grid)


def run_sequence(seq: Sequence, inputs: Mapping[str, np.ndarray],
                 resident: Mapping[str, np.ndarray], run_step: StepRunner,
                 write_back: Callable[[str, np.ndarray], None],
                 ) -> tuple[list[np.ndarray], list[LoopRun]]:
    """Run ``seq`` over arrays (``resident``: each resident buffer's current content):
    the returned buffers in order, and how each loop ran. ``write_back(name, array)`` is
    called for each resident buffer a step wrote; a returned resident nobody wrote is a
    copy (its array may be a view of live memory)."""
    arrays = _initial_arrays(seq, inputs, resident)
    loops = _run_items(seq, arrays, run_step)
    for name, start in resident.items():
        if arrays[name] is not start:
            write_back(name, arrays[name])
    return [arrays[name].copy() if arrays[name] is resident.get(name) else arrays[name]
            for name in seq.returns], loops


class _Arrays(dict):
    """Every buffer's current array, by name; which of them this run owns."""

    def __init__(self, seq: Sequence) -> None:
        super().__init__()
        self._transient = {b.name for b in seq.of_role(Role.TRANSIENT)}

    def owned(self, name: str) -> bool:
        """Whether ``name``'s array is the run's own: a transient's (zeros it made, or
        what a step returned for it)."""
        return name in self._transient


def _initial_arrays(seq: Sequence, inputs: Mapping[str, np.ndarray],
                    resident: Mapping[str, np.ndarray]) -> _Arrays:
    """Every buffer's content at the start of a run."""
    arrays = _Arrays(seq)
    for b in seq.buffers:
        if b.role is Role.INPUT:
            arrays[b.name] = inputs[b.name]
        elif b.role is Role.RESIDENT:
            arrays[b.name] = resident[b.name]
        elif b.role is Role.CONSTANT:
            arrays[b.name] = np.frombuffer(b.data, dtype=b.dtype.storage_np)
        else:
            arrays[b.name] = np.zeros(b.count, dtype=b.dtype.storage_np)
    return arrays


def _run_items(seq: Sequence, arrays: _Arrays,
               run_step: StepRunner) -> list[LoopRun]:
    """Run every step in order, updating ``arrays`` (a step's outputs replace the arrays
    of the buffers they are bound to); how each loop ran, in ``seq.loops()`` order."""
    runs = {id(loop): [0, True] for loop in seq.loops()}
    _run_body(seq.items, arrays, run_step, runs)
    return [LoopRun(n, converged) for n, converged in runs.values()]


def _run_body(items: tuple[Item, ...], arrays: _Arrays, run_step: StepRunner,
              runs: dict[int, list]) -> None:
    for item in items:
        if not isinstance(item, StepLoop):
            _run(item, arrays, run_step)
            continue
        ran, done = 0, item.until_zero is None
        while ran < item.limit:
            if item.until_zero is not None:
                flag = arrays[item.until_zero]
                arrays[item.until_zero] = np.zeros(flag.shape, flag.dtype)
            if item.index is not None:
                arrays[item.index] = np.array([ran], np.uint32)
            _run_body(item.body, arrays, run_step, runs)
            ran += 1
            if item.until_zero is not None and not arrays[item.until_zero].view(np.uint8).any():
                done = True
                break
        total = runs[id(item)]
        total[0] += ran
        total[1] = total[1] and done


def _run(step: Step, arrays: _Arrays, run_step: StepRunner) -> None:
    cancel.check()  # (between steps: a safe point to stop a cancelled call)
    outputs = run_step(step, [arrays[name] for name in step.inputs()], _in_place(step, arrays))
    for name, out in zip(step.outputs(), outputs, strict=True):
        arrays[name] = out


def _in_place(step: Step, arrays: _Arrays) -> list[np.ndarray | None]:
    """For each output of ``step``, the array it may be written into: a transient's, which
    only this run holds (never a caller's input, a constant, or a resident buffer, which
    is written back only when the run ends). No other buffer of the step is bound to it:
    the sequence refuses a written buffer bound twice (``SequenceBuilder.step``)."""
    return [arrays[name] if arrays.owned(name) else None for name in step.outputs()]
