"""Submission and timing: compute passes recorded into command encoders, submitted in
batches, and read back with the status word and pass timestamps in one mapping."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vyre_core.errors import LaunchLimitError, UnsupportedFeatureError, VyreError
from vyre_wgpu.adapter import wgpu_module
from vyre_wgpu.buffers import destroy, padded_size
from vyre_wgpu.loss import fail
from vyre_wgpu.pipelines import Kernel
from vyre_wgpu.state import DeviceState
from vyre_wgpu.wgsl import STATUS_SUBGROUP_SIZE

#: Passes recorded into one command buffer before it is submitted (a long loop).
PASSES_PER_SUBMIT = 1024
_READBACK_KEEP = 64 << 20   # readback buffers larger than this are not kept between calls


#: The most workgroups one launch folds (2**31): their linear number, padding included,
#: stays a u32 in the shader whatever the per-axis limit.
MAX_FOLDED = 2**31


def max_grid_workgroups(limit: int) -> int:
    """Workgroups in all a launch may have with ``limit`` per axis, folded
    (``launch_grid``): the device fact routing reads (``max_grid_workgroups``)."""
    return min(limit ** 3, MAX_FOLDED)


def launch_grid(grid: Sequence[int], limit: int) -> tuple[tuple[int, int, int], int]:
    """The workgroup counts to dispatch for a logical ``grid``, and whether it is folded
    (params word 0).

    A grid within ``limit`` on every axis runs as is (0). Any other is folded (1): its
    workgroups, numbered linearly x fastest, are laid over (S, rows, planes) within
    ``limit`` on every axis, with planes = ceil(total / limit**2), each plane holding
    ceil(total / planes), rows = ceil(plane / limit), S = ceil(plane / rows) (fewer than
    planes * (rows + 1) padding workgroups); the shader numbers each physical workgroup
    the same way, unflattens that over the logical grid and drops the padding, so the
    ids a program sees are those of the logical launch."""
    gx, gy, gz = (int(a) for a in grid)
    if max(gx, gy, gz) <= limit:
        return (gx, gy, gz), 0
    total = gx * gy * gz
    if total > max_grid_workgroups(limit):
        raise LaunchLimitError(
            f"backend 'wgpu': grid {(gx, gy, gz)} has {total} workgroups, the most it runs "
            f"in one launch is {max_grid_workgroups(limit)}",
            "Use larger workgroups (fewer of them), or split the work across several "
            "dispatches.")
    planes = math.ceil(total / limit ** 2)
    plane = math.ceil(total / planes)
    rows = math.ceil(plane / limit)
    return (math.ceil(plane / rows), rows, planes), 1


@dataclass
class Pass:
    """One compute pass: its kernel, bind group and workgroup counts, and the buffers it
    zeroes before it runs (a sequence step's outputs; a reused launch's status word and
    buffers not uploaded). An indirect pass reads its counts from ``args`` at ``offset``
    and zeroes its outputs with its ``fills``, indirect too."""

    kernel: Kernel
    bind_group: Any
    dispatch: tuple[int, int, int]
    zeroed: list[Any]
    args: Any = None
    offset: int = 0
    fills: list[Pass] = field(default_factory=list)


class Readback:
    """The mappable buffer results are copied into, and the timestamp queries, of one
    device generation (used under the device lock)."""

    def __init__(self, dev: DeviceState) -> None:
        self.dev = dev
        self._buffer: Any = None
        self._queries: tuple[Any, Any] | None = None
        self.period = _timestamp_period(dev.queue)

    def buffer(self, nbytes: int) -> Any:
        usage = wgpu_module().BufferUsage
        if self._buffer is None or self._buffer.size < nbytes:
            size = max(4096, 1 << (int(nbytes) - 1).bit_length())
            self._buffer = self.dev.device.create_buffer(
                label="readback", size=size, usage=usage.MAP_READ | usage.COPY_DST)
        return self._buffer

    def release(self, buf: Any, created: list[Any]) -> None:
        """After a read: a buffer too large to keep goes to ``created`` (destroyed)."""
        if buf.size > _READBACK_KEEP:
            self._buffer = None
            created.append(buf)

    def forget(self) -> None:
        """After a failed submission the buffer may be left mapped: make the next fresh."""
        self._buffer = None

    def queries(self) -> tuple[Any, Any]:
        """A query set of two timestamps and the buffer they resolve into."""
        if self._queries is None:
            usage = wgpu_module().BufferUsage
            self._queries = (self.dev.device.create_query_set(type="timestamp", count=2),
                             self.dev.device.create_buffer(
                                 label="timestamps", size=16,
                                 usage=usage.QUERY_RESOLVE | usage.COPY_SRC))
        return self._queries


def _timestamp_period(queue: Any) -> float:
    """Nanoseconds per timestamp tick (wgpu-native resolves raw ticks)."""
    try:
        from wgpu.backends.wgpu_native._api import libf
        period = float(libf.wgpuQueueGetTimestampPeriod(queue._internal))
        return period if period > 0 else 1.0
    except Exception:
        return 1.0


class Recorder:
    """One command encoder at a time (under the device lock): passes and clears go in, a
    submit goes out when it is full and with each read. A read whose status word says the
    adapter cut a loop short raises UnsupportedFeatureError, ``cut_short`` saying what that
    leaves. ``timed``: the passes write timestamps (from the first one's start to the last
    one's end) where the device has them; ``device_ns`` holds that span after a read."""

    def __init__(self, dev: DeviceState, status: Any, created: list[Any], *, cut_short: str,
                 timed: bool = False) -> None:
        self.dev = dev
        self.status = status
        self.created = created
        self.cut_short = cut_short
        self.timed = timed and dev.timestamps
        self.device_ns: int | None = None
        self._encoder: Any = None  # made on first use: none is left over after the last read
        self.passes = 0
        self._started = False

    @property
    def encoder(self) -> Any:
        if self._encoder is None:
            self._encoder = self.dev.device.create_command_encoder()
        return self._encoder

    def clear(self, buf: Any) -> None:
        self.encoder.clear_buffer(buf, 0, buf.size)

    def step(self, p: Pass) -> None:
        if p.args is None:
            for buf in p.zeroed:
                self.clear(buf)
        else:
            for fill in p.fills:
                self.step(fill)
        compute = self.encoder.begin_compute_pass(**self._timestamps())
        compute.set_pipeline(p.kernel.pipeline)
        compute.set_bind_group(0, p.bind_group)
        if p.args is None:
            compute.dispatch_workgroups(*p.dispatch)
        else:
            compute.dispatch_workgroups_indirect(p.args, p.offset)
        compute.end()
        self.passes += 1
        if self.passes >= PASSES_PER_SUBMIT:
            self._submit()

    def read(self, reads: Sequence[tuple[Any, int]]) -> list[bytearray]:
        """Submit what is recorded with copies of the status word, the timestamps and
        ``reads`` (buffer, bytes to keep) into the readback buffer, map it once and copy
        out the reads."""
        readback = self.dev.readback
        # layout: [status word, pad][timestamps: 2 x u64][reads, each 8-aligned]
        cursor = 8 + (16 if self.timed else 0)
        offsets = []
        for buf, _ in reads:
            offsets.append(cursor)
            cursor += (buf.size + 7) & ~7
        target = readback.buffer(cursor)
        self.encoder.copy_buffer_to_buffer(self.status, 0, target, 0, 4)
        if self.timed:
            query_set, resolve = readback.queries()
            self.encoder.resolve_query_set(query_set, 0, 2, resolve, 0)
            self.encoder.copy_buffer_to_buffer(resolve, 0, target, 8, 16)
        for (buf, _), offset in zip(reads, offsets, strict=True):
            self.encoder.copy_buffer_to_buffer(buf, 0, target, offset, buf.size)
        self._submit()
        target.map_sync(wgpu_module().MapMode.READ, 0, cursor)
        try:
            mapped = target.read_mapped(0, cursor, copy=False)
            flag = int(np.frombuffer(bytes(mapped[:4]), np.uint32)[0])
            results = [bytearray(mapped[o:o + nbytes])
                       for (_, nbytes), o in zip(reads, offsets, strict=True)]
            if self.timed:
                begin, end = (int(t) for t in np.frombuffer(bytes(mapped[8:24]), np.uint64))
                self.device_ns = round((end - begin) * readback.period) if end > begin else None
        finally:
            target.unmap()
        readback.release(target, self.created)
        if flag & STATUS_SUBGROUP_SIZE:
            raise subgroups_resized(self.dev, self.cut_short)
        if flag:
            raise loop_cut_short(self.dev, self.cut_short)
        return results

    def _timestamps(self) -> dict[str, Any]:
        if not self.timed:
            return {}
        writes = {"query_set": self.dev.readback.queries()[0], "end_of_pass_write_index": 1}
        if not self._started:
            writes["beginning_of_pass_write_index"] = 0
            self._started = True
        return {"timestamp_writes": writes}

    def _submit(self) -> None:
        self.dev.queue.submit([self.encoder.finish()])
        self._encoder, self.passes = None, 0


@contextlib.contextmanager
def submitting(dev: DeviceState, during: str) -> Iterator[list[Any]]:
    """(Under the device lock.) Around recording and submitting work: yields the list of
    buffers made for it alone, destroyed at the end; on failure the readback buffer is
    made fresh (it may be left mapped) and a wgpu error leaves as a VyreError."""
    created: list[Any] = []
    try:
        yield created
    except VyreError:
        dev.readback.forget()
        raise
    except Exception as exc:
        dev.readback.forget()
        raise fail(dev, exc, during) from exc
    finally:
        destroy(created)


def read_buffer(dev: DeviceState, buf: Any, nbytes: int) -> bytes:
    """(Under the device lock.) The first ``nbytes`` of ``buf`` (a COPY_SRC buffer)."""
    size = padded_size(nbytes)
    readback = dev.readback
    target = readback.buffer(size)
    encoder = dev.device.create_command_encoder()
    encoder.copy_buffer_to_buffer(buf, 0, target, 0, size)
    dev.queue.submit([encoder.finish()])
    target.map_sync(wgpu_module().MapMode.READ, 0, size)
    try:
        data = bytes(target.read_mapped(0, size, copy=False)[:nbytes])
    finally:
        target.unmap()
    created: list[Any] = []
    readback.release(target, created)
    destroy(created)
    return data


def subgroups_resized(dev: DeviceState, outcome: str) -> UnsupportedFeatureError:
    """The error for work whose pipeline formed subgroups of another size than the one
    its program declares (and the probe saw): a driver that picks per pipeline."""
    return UnsupportedFeatureError(
        f"backend 'wgpu' on {dev.name!r} ran a pipeline with subgroups of another size "
        f"than the program declares (the probe saw {dev.subgroup_size}); {outcome}",
        "Run the program on another backend (backend='reference' or 'cpu').",
        subgroup_size=dev.subgroup_size)


def loop_cut_short(dev: DeviceState, outcome: str) -> UnsupportedFeatureError:
    """The error for work whose status word says the adapter cut a loop short."""
    trips = dev.max_loop_trip
    return UnsupportedFeatureError(
        f"backend 'wgpu' on {dev.name!r} cut a loop short"
        + (f" (it stops an invocation after {trips} loop iterations in total)"
           if trips else "") + f"; {outcome}",
        "Run the program on another backend (backend='reference'), or bound its "
        "loops to fewer iterations per invocation.",
        loop_cut_short=True, max_loop_trip=trips)
