"""Sequences on the device: every step of a run recorded as compute passes in one command
encoder, submitted once and read back once.

A run's buffers live on the device: inputs are written before the passes, constants once
when the plan is made, transients are zeroed at the start of each run and a buffer bound
to an ``output`` is zeroed just before its step (as a dispatch's output is). Resident
buffers are bound directly and written in place. The buffers, params and bind groups of
a sequence are made once per (sequence, resident handles, device generation) and kept
for the next run while small. A loop with ``until_zero`` is decided on the device of a
GPU (its iterations recorded in growing batches, one small readback per batch) and on the
host on a software adapter (``flag_loop.py``); every other loop is recorded whole (in
submits of at most ``submission.PASSES_PER_SUBMIT`` passes).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from vyre_core.contract.types import LoopRun, SequenceRun, Timing, wall_clock_ns
from vyre_core.ir.nodes import Access
from vyre_core.sequence import Role, Sequence, Step, StepLoop
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
from vyre_wgpu.flag_loop import FlagLoop, fits_on_device, run_on_host
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
    loops: dict[int, FlagLoop] = field(default_factory=dict)  # by item index

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
            for index, item in enumerate(seq.items):
                size = len(item.body) if isinstance(item, StepLoop) else 1
                body = plan.passes[first:first + size]
                if isinstance(item, StepLoop) and item.until_zero is not None \
                        and self.device_side_loops \
                        and fits_on_device(buffers[item.until_zero], body):
                    plan.loops[index] = FlagLoop(dev, buffers[item.until_zero], body,
                                                 plan.status, owned)
                first += size
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
        loops = []
        first = 0  # the number of the item's first step (plan.passes is by step number)
        for index, item in enumerate(seq.items):
            if isinstance(item, Step):
                recorder.step(plan.passes[first])
                first += 1
                continue
            body = plan.passes[first:first + len(item.body)]
            first += len(item.body)
            if item.until_zero is None:
                for _ in range(item.limit):
                    for p in body:
                        recorder.step(p)
                loops.append(LoopRun(item.limit, True))
            elif index in plan.loops:
                loops.append(plan.loops[index].run(recorder, item.limit))
            else:
                loops.append(run_on_host(plan.buffers[item.until_zero], body, recorder,
                                         item.limit))
        reads = [(plan.buffers[name], seq.buffer(name).nbytes) for name in seq.returns]
        raw = recorder.read(reads)
        outputs = [np.frombuffer(data, dtype=seq.buffer(name).dtype.storage_np)
                   for name, data in zip(seq.returns, raw, strict=True)]
        return outputs, loops

    def _keep(self, key: tuple, plan: _Plan) -> None:
        if plan.nbytes > KEEP_PLAN_BYTES:
            plan.destroy()
            return
        self._plans[key] = plan
        while len(self._plans) > KEEP_PLANS or \
                sum(p.nbytes for p in self._plans.values()) > KEEP_PLAN_BYTES:
            self._plans.popitem(last=False)[1].destroy()


def _destroy(plan: _Plan | None) -> None:
    """Destroy a plan that failed half made or half run (None: it was never made)."""
    if plan is not None:
        plan.destroy()
