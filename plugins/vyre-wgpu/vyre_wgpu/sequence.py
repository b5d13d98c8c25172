"""Sequences on the device: every step of a run recorded as compute passes in one command
encoder, submitted once and read back once.

A run's buffers live on the device: inputs are written before the passes, constants once
when the plan is made, transients are zeroed at the start of each run and a buffer bound
to an ``output`` is zeroed just before its step (as a dispatch's output is). Resident
buffers are bound directly and written in place. The buffers, params and bind groups of
a sequence are made once per (sequence, resident handles, device generation) and kept
for the next run while small. A loop with ``until_zero`` that is not inside another loop
and holds none is decided on the device of a GPU (its iterations recorded in growing
batches, one small readback per batch, ``flag_loop.py``); every other flag loop (and all
of them on a software adapter) on the host, its flag read back after each iteration.
Every other loop is recorded whole (in submits of at most
``submission.PASSES_PER_SUBMIT`` passes). A loop's iteration number is copied into its
buffer before each iteration, from a table of 0, 1, 2, ... made with the plan: a copy
command, ordered with the passes of its encoder (a queue write would not be).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from vyre_core import cancel
from vyre_core.contract.types import LoopRun, SequenceRun, Timing, wall_clock_ns
from vyre_core.ir.nodes import Access
from vyre_core.sequence import Role, Sequence, Step, StepLoop
from vyre_core.sequence.nodes import Item, steps_of
from vyre_wgpu.adapter import wgpu_module
from vyre_wgpu.buffers import (
    as_words,
    bind_group,
    binding_size,
    destroy,
    padded_size,
    params,
    status_word,
)
from vyre_wgpu.flag_loop import FlagLoop, fits_on_device
from vyre_wgpu.pipelines import check_current
from vyre_wgpu.submission import Pass, Recorder, launch_grid, submitting

if TYPE_CHECKING:
    from vyre_wgpu.device import Device
    from vyre_wgpu.pipelines import Kernel
    from vyre_wgpu.resident import Resident

#: Plans (buffers and bind groups of one sequence) kept between runs, and their size cap.
KEEP_PLANS = 16
KEEP_PLAN_BYTES = 64 << 20

@dataclass
class _Plan:
    buffers: dict[str, Any]  # sequence buffer name -> device buffer (residents: theirs)
    owned: list[Any]         # what the plan made (and destroys)
    passes: list[Pass]       # one per step, by step number
    status: Any
    nbytes: int
    loops: dict[int, FlagLoop] = field(default_factory=dict)  # by loop number (seq.loops())
    numbers: Any = None  # the table of iteration numbers (u32 0, 1, 2, ...), when read

    def destroy(self) -> None:
        destroy(self.owned)


class SequenceRunner:
    """Runs sequences on one :class:`Device` (through its lock)."""

    def __init__(self, device: Device, resident: Resident) -> None:
        self.device = device
        self.resident = resident
        #: flag loops decided on the device (see flag_loop.py for why not on software);
        #: never where the driver cuts loops short (the control kernel loops too)
        self.device_side_loops = not device.software and device.max_loop_trip is None
        self._plans: OrderedDict[tuple, _Plan] = OrderedDict()
        self._generation = device.generation

    def run(self, seq: Sequence, kernels: Mapping[str, Kernel],
            inputs: Mapping[str, np.ndarray], resident: Mapping[str, int],
            label: str | None) -> SequenceRun:
        """Run ``seq`` (``kernels`` by program fingerprint) and return its returns."""
        dev = self.device
        start = wall_clock_ns()
        with dev._lock:
            for kernel in kernels.values():
                check_current(dev, kernel)
            if self._generation != dev.generation:  # recovered: the old plans are dead
                self.forget()
                self._generation = dev.generation
            bound = {name: self.resident.buffer(handle) for name, handle in resident.items()}
            key = (seq.fingerprint(), tuple(sorted(resident.items())), self.device_side_loops)
            plan = self._plans.pop(key, None)
            with submitting(dev, "a sequence") as created:
                try:
                    if plan is None:
                        plan = self._plan(seq, kernels, bound)
                    outputs, loops = self._record(seq, plan, inputs, created)
                except BaseException:
                    _destroy(plan)  # half made or half run: never kept
                    raise
            self._keep(key, plan)
        return SequenceRun(outputs, loops, Timing(wall_clock_ns() - start, None, label))

    def forget(self) -> None:
        """Destroy every kept plan (the device is going, or was recovered)."""
        while self._plans:
            self._plans.popitem(last=False)[1].destroy()

    # -- inside (under the device lock) ----------------------------------------------------

    def _plan(self, seq: Sequence, kernels: Mapping[str, Kernel],
              resident: Mapping[str, Any]) -> _Plan:
        dev = self.device
        usage = wgpu_module().BufferUsage
        buffers: dict[str, Any] = {}
        owned: list[Any] = []
        plan = _Plan(buffers, owned, [], None, 0)
        try:
            for b in seq.buffers:
                if b.role is Role.RESIDENT:
                    buffers[b.name] = resident[b.name]
                    continue
                buf = dev.device.create_buffer(
                    label=f"vyre-seq-{b.name}", size=padded_size(b.nbytes),
                    usage=usage.STORAGE | usage.COPY_DST | usage.COPY_SRC)
                owned.append(buf)
                buffers[b.name] = buf
                if b.role is Role.CONSTANT:
                    dev.queue.write_buffer(buf, 0, as_words(np.frombuffer(b.data, np.uint8)))
            plan.status = status_word(dev)
            owned.append(plan.status)
            for _, step in seq.steps():
                plan.passes.append(self._pass(seq, step, kernels[step.program.fingerprint()],
                                              plan))
            first = 0
            numbers = {id(loop): n for n, loop in enumerate(seq.loops())}
            for item in seq.items:  # (a loop inside a loop is decided on the host)
                size = sum(1 for _ in steps_of((item,)))
                body = plan.passes[first:first + size]
                if isinstance(item, StepLoop) and item.until_zero is not None \
                        and self.device_side_loops \
                        and all(isinstance(i, Step) for i in item.body) \
                        and fits_on_device(buffers[item.until_zero], body):
                    plan.loops[numbers[id(item)]] = FlagLoop(
                        dev, buffers[item.until_zero], body, plan.status, owned)
                first += size
            most = max((loop.limit for loop in seq.loops() if loop.index is not None),
                       default=0)
            if most:
                plan.numbers = dev.device.create_buffer(
                    label="vyre-seq-iterations", size=4 * most,
                    usage=usage.COPY_SRC | usage.COPY_DST)
                owned.append(plan.numbers)
                dev.queue.write_buffer(plan.numbers, 0, np.arange(most, dtype=np.uint32))
        except BaseException:
            plan.destroy()
            raise
        plan.nbytes = sum(buf.size for buf in owned)
        return plan

    def _pass(self, seq: Sequence, step: Step, kernel: Kernel, plan: _Plan) -> Pass:
        dev = self.device
        names = {b.name: name for b, name in step.bound}
        lengths = [seq.buffer(names[bb.name]).count for bb in kernel.lowered.buffers]
        dispatch, folded = launch_grid(step.grid,
                                       dev.limit("max-compute-workgroups-per-dimension"))
        pbuf = params(dev, kernel, lengths, step.grid, folded)
        plan.owned.append(pbuf)
        bound = [(plan.buffers[names[bb.name]], binding_size(dev, bb, n))
                 for bb, n in zip(kernel.lowered.buffers, lengths, strict=True)]
        group = bind_group(dev, kernel, bound, pbuf, plan.status)
        zeroed = [plan.buffers[name] for b, name in step.bound if b.access is Access.OUTPUT]
        return Pass(kernel, group, dispatch, zeroed)

    def _record(self, seq: Sequence, plan: _Plan, inputs: Mapping[str, np.ndarray],
                created: list[Any]) -> tuple[list[np.ndarray], list[LoopRun]]:
        dev = self.device
        for name, data in inputs.items():
            if data.nbytes:
                dev.queue.write_buffer(plan.buffers[name], 0, as_words(data))
        for loop in plan.loops.values():
            loop.reset(dev)
        recorder = Recorder(dev, plan.status, created,
                            cut_short="the sequence's results were discarded")
        recorder.clear(plan.status)
        for b in seq.of_role(Role.TRANSIENT):
            recorder.clear(plan.buffers[b.name])
        runs = {id(loop): [n, 0, True] for n, loop in enumerate(seq.loops())}
        self._items(seq.items, 0, plan, recorder, runs)
        loops = [LoopRun(ran, converged) for _, ran, converged in runs.values()]
        reads = [(plan.buffers[name], seq.buffer(name).nbytes) for name in seq.returns]
        raw = recorder.read(reads)
        outputs = [np.frombuffer(data, dtype=seq.buffer(name).dtype.storage_np)
                   for name, data in zip(seq.returns, raw, strict=True)]
        return outputs, loops

    def _items(self, items: tuple[Item, ...], first: int, plan: _Plan, recorder: Recorder,
               runs: dict[int, list]) -> int:
        """Record ``items`` (their steps numbered from ``first``), adding each loop's
        iterations and convergence to ``runs`` (by ``id``: [number, iterations,
        converged]); the number of the step after them."""
        for item in items:
            if isinstance(item, Step):
                recorder.step(plan.passes[first])
                first += 1
                continue
            run = runs[id(item)]
            device = plan.loops.get(run[0])
            if device is not None:
                ran, done = device.run(recorder, item.limit,
                                       lambda i, loop=item: _number(plan, loop, i, recorder))
            elif item.until_zero is None:
                for i in range(item.limit):
                    _number(plan, item, i, recorder)
                    self._items(item.body, first, plan, recorder, runs)
                ran, done = item.limit, True
            else:
                ran, done = self._flag_on_host(item, first, plan, recorder, runs)
            run[1] += ran
            run[2] = run[2] and done
            first += sum(1 for _ in steps_of(item.body))
        return first

    def _flag_on_host(self, loop: StepLoop, first: int, plan: _Plan, recorder: Recorder,
                      runs: dict[int, list]) -> tuple[int, bool]:
        """A flag loop an iteration at a time, its flag read back after each (on a
        software adapter a pass costs more than a readback, see flag_loop.py)."""
        flag = plan.buffers[loop.until_zero]
        for ran in range(1, loop.limit + 1):
            cancel.check()  # (between submissions: a cancelled call stops here)
            recorder.clear(flag)
            _number(plan, loop, ran - 1, recorder)
            self._items(loop.body, first, plan, recorder, runs)
            (value,) = recorder.read([(flag, flag.size)])
            if not any(value):
                return ran, True
        return loop.limit, False

    def _keep(self, key: tuple, plan: _Plan) -> None:
        if plan.nbytes > KEEP_PLAN_BYTES:
            plan.destroy()
            return
        self._plans[key] = plan
        while len(self._plans) > KEEP_PLANS or \
                sum(p.nbytes for p in self._plans.values()) > KEEP_PLAN_BYTES:
            self._plans.popitem(last=False)[1].destroy()


def _number(plan: _Plan, loop: StepLoop, iteration: int, recorder: Recorder) -> None:
    """Before ``iteration`` of ``loop``: its number into its buffer, when a step reads it
    (a copy, ordered with the encoder's passes)."""
    if loop.index is not None:
        recorder.encoder.copy_buffer_to_buffer(plan.numbers, 4 * iteration,
                                               plan.buffers[loop.index], 0, 4)


def _destroy(plan: _Plan | None) -> None:
    """Destroy a plan that failed half made or half run (None: it was never made)."""
    if plan is not None:
        plan.destroy()
