"""Compute passes of a sequence and their recording into command buffers: what the plain
steps and the device-side flag loops of ``sequence.py`` share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vyre_wgpu.device import Device, Kernel

#: Passes recorded into one command buffer before it is submitted (a long loop).
PASSES_PER_SUBMIT = 1024


@dataclass
class Pass:
    """One compute pass: its kernel, bind group and workgroup counts, and the buffers it
    binds to an ``output`` (zeroed before it runs). An indirect pass reads its counts from
    ``args`` at ``offset`` and zeroes its outputs with its ``fills``, indirect passes too."""

    kernel: Kernel
    bind_group: Any
    dispatch: tuple[int, int, int]
    zeroed: list[Any]
    args: Any = None
    offset: int = 0
    fills: list[Pass] = field(default_factory=list)


class Recorder:
    """One command encoder at a time: passes and clears go in, a submit goes out when it
    is full, and with each readback (a loop's state now, the returns at the end)."""

    def __init__(self, dev: Device, status: Any, created: list[Any]) -> None:
        self.dev = dev
        self.status = status
        self.created = created
        self.encoder = dev.device.create_command_encoder()
        self.passes = 0

    def clear(self, buf: Any) -> None:
        self.encoder.clear_buffer(buf, 0, buf.size)

    def step(self, p: Pass) -> None:
        if p.args is None:
            for buf in p.zeroed:
                self.encoder.clear_buffer(buf, 0, buf.size)
        else:
            for fill in p.fills:
                self.step(fill)
        compute = self.encoder.begin_compute_pass()
        compute.set_pipeline(p.kernel.pipeline)
        compute.set_bind_group(0, p.bind_group)
        if p.args is None:
            compute.dispatch_workgroups(*p.dispatch)
        else:
            compute.dispatch_workgroups_indirect(p.args, p.offset)
        compute.end()
        self.passes += 1
        if self.passes >= PASSES_PER_SUBMIT:
            self.dev.queue.submit([self.encoder.finish()])
            self._fresh()

    def read(self, reads: list[tuple[Any, int]]) -> list[bytearray]:
        """Submit what is recorded with copies of ``reads`` (buffer, bytes) and the status
        word, and read them back in one mapping; a status word that says the adapter cut
        a loop short discards everything."""
        results, status, _ = self.dev.submit_and_read(self.encoder, self.status, reads,
                                                      self.created)
        if status:
            raise self.dev.loop_cut_short("the sequence's results were discarded")
        self._fresh()
        return results

    def _fresh(self) -> None:
        self.encoder = self.dev.device.create_command_encoder()
        self.passes = 0
