"""Device memory that stays on the device between dispatches: the resident-buffer hooks.

Buffers are kept by integer handle and belong to one device generation: after a device
loss and recovery they are gone, and their handles are refused. A dispatch over resident
buffers binds them directly; its bind group, with the params uniform and status word it
needs, is built once per (kernel, buffers, grid) and reused, so a warm resident dispatch
is one compute pass, one submit and a 4-byte readback of the status word.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from vyre_core import abi
from vyre_core.errors import InvalidInputError, UnsupportedFeatureError
from vyre_core.ir import Program
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
from vyre_wgpu.loss import fail
from vyre_wgpu.pipelines import check_current
from vyre_wgpu.submission import Pass, Recorder, launch_grid, read_buffer, submitting

if TYPE_CHECKING:
    from vyre_wgpu.device import Device
    from vyre_wgpu.pipelines import Kernel

#: Bind groups (each with its params and status buffers) kept for reuse.
BIND_GROUPS = 256


@dataclass
class _Buffer:
    gpu: Any
    byte_len: int


@dataclass
class _Binding:
    """What a dispatch of one kernel over one set of resident buffers reuses."""

    bind_group: Any
    params: Any
    status: Any
    dispatch: tuple[int, int, int]
    handles: frozenset[int]

    def destroy(self) -> None:
        destroy([self.params, self.status])


class Resident:
    """The resident buffers of one :class:`Device` (thread-safe through its lock)."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self._generation = device.generation
        self._buffers: dict[int, _Buffer] = {}
        self._bindings: OrderedDict[tuple, _Binding] = OrderedDict()
        self._handles = itertools.count(1)
        self._lock = threading.Lock()  # (the table; device calls take the device's lock)

    @property
    def cached_bindings(self) -> int:
        """Bind groups kept for reuse (each with its params and status buffers)."""
        return len(self._bindings)

    # -- the hooks -------------------------------------------------------------------------

    def allocate(self, byte_len: int) -> int:
        dev = self.device
        limit = min(dev.limit("max-buffer-size"), dev.limit("max-storage-buffer-binding-size"))
        if not 0 <= byte_len <= limit:
            raise UnsupportedFeatureError(
                f"backend 'wgpu': a resident buffer of {byte_len} bytes (this device binds "
                f"at most {limit})", f"Allocate 0..{limit} bytes, or split the data.")
        usage = wgpu_module().BufferUsage
        with dev._lock:
            self._current()
            try:
                gpu = dev.device.create_buffer(
                    label="vyre-resident", size=padded_size(byte_len),
                    usage=usage.STORAGE | usage.COPY_SRC | usage.COPY_DST)
            except Exception as exc:
                raise fail(dev, exc, "allocating a resident buffer") from exc
            with self._lock:
                handle = next(self._handles)
                self._buffers[handle] = _Buffer(gpu, byte_len)
        return handle

    def upload(self, handle: int, data: bytes) -> None:
        dev = self.device
        with dev._lock:
            target = self._get(handle)
            if len(data) != target.byte_len:
                raise InvalidInputError(
                    f"upload of {len(data)} bytes into a {target.byte_len}-byte resident "
                    "buffer", "Upload exactly the allocated length.")
            if target.byte_len:
                try:
                    dev.queue.write_buffer(target.gpu, 0,
                                           as_words(np.frombuffer(data, dtype=np.uint8)))
                except Exception as exc:
                    raise fail(dev, exc, "uploading a resident buffer") from exc

    def download(self, handle: int) -> bytes:
        dev = self.device
        with dev._lock:
            source = self._get(handle)
            if not source.byte_len:
                return b""
            with submitting(dev, "downloading a resident buffer"):
                return read_buffer(dev, source.gpu, source.byte_len)

    def free(self, handle: int) -> None:
        with self.device._lock:
            buf = self._get(handle)
            with self._lock:
                del self._buffers[handle]
                for key in [k for k, b in self._bindings.items() if handle in b.handles]:
                    self._bindings.pop(key).destroy()
            destroy([buf.gpu])

    def dispatch(self, kernel: Kernel, program: Program, handles: Sequence[int],
                 grid: Sequence[int] | None, timed: bool) -> int | None:
        """Run ``kernel`` over resident buffers (one handle per non-workgroup buffer of
        ``program``, declaration order); outputs stay in their buffers. Returns device
        nanoseconds when ``timed`` and measurable."""
        dev = self.device
        bound = [b for b in program.buffers if b.access.value != "workgroup"]
        if len(handles) != len(bound):
            raise InvalidInputError(
                f"{len(handles)} resident handles for {len(bound)} buffers",
                "Pass one handle per non-workgroup buffer, in declaration order.")
        if len(set(handles)) != len(handles):
            raise InvalidInputError(
                f"resident handles {list(handles)} name one buffer twice (WebGPU binds a "
                "buffer it writes once per dispatch)",
                "Pass a distinct resident buffer for each of the program's buffers.")
        by_name = dict(zip((b.name for b in bound), handles, strict=True))
        declared = {b.name: b for b in bound}
        with dev._lock:
            check_current(dev, kernel)
            bound, lengths = [], []
            for bb in kernel.lowered.buffers:
                buf = self._get(by_name[bb.name])
                decl = declared[bb.name]
                count, rest = divmod(buf.byte_len, bb.element_bytes)
                if rest or (decl.count is not None and count != decl.count):
                    need = ("a whole number of " if decl.count is None
                            else f"exactly {decl.count} ") + f"{decl.dtype.value} elements"
                    raise InvalidInputError(
                        f"resident buffer {by_name[bb.name]} bound to {bb.name!r} holds "
                        f"{buf.byte_len} bytes, not {need}",
                        f"Allocate {bb.name!r} as {need} ({bb.element_bytes} bytes each).")
                bound.append((buf.gpu, binding_size(dev, bb, count)))
                lengths.append(count)
            if grid is None:
                grid = abi.infer_grid(program, dict(zip(
                    (b.name for b in kernel.lowered.buffers), lengths, strict=True)))
            logical = tuple(int(a) for a in grid)
            with submitting(dev, "a resident dispatch") as created:
                binding = self._binding(kernel, [by_name[bb.name] for bb in
                                                 kernel.lowered.buffers], bound, lengths,
                                        logical)
                recorder = Recorder(dev, binding.status, created, timed=timed, cut_short=(
                    "what its resident outputs hold is unspecified"))
                recorder.step(Pass(kernel, binding.bind_group, binding.dispatch,
                                   [binding.status]))
                recorder.read([])
        return recorder.device_ns

    def buffer(self, handle: int) -> Any:
        """The device buffer of ``handle`` (refused when freed or of an older device)."""
        return self._get(handle).gpu

    # -- inside ----------------------------------------------------------------------------

    def _current(self) -> None:
        """Forget the buffers of an earlier device generation (lost with that device)."""
        if self._generation != self.device.generation:
            with self._lock:
                self._buffers.clear()
                self._bindings.clear()
                self._generation = self.device.generation

    def _get(self, handle: int) -> _Buffer:
        self._current()
        try:
            return self._buffers[handle]
        except (KeyError, TypeError):
            raise InvalidInputError(
                f"resident handle {handle!r} is not allocated on this device (freed, never "
                "allocated, or lost with a device that was recovered)",
                "Allocate it with allocate_resident first.") from None

    def _binding(self, kernel: Kernel, handles: list[int], bound: list[tuple[Any, int]],
                 lengths: list[int], logical: tuple[int, ...]) -> _Binding:
        """The bind group of ``kernel`` over ``bound`` (buffer, bytes bound) with its params
        and status word: made once per (kernel, handles, grid) and kept."""
        dev = self.device
        key = (kernel.key, kernel.generation, tuple(handles), logical)  # (compiled: keyed)
        with self._lock:
            found = self._bindings.get(key)
            if found is not None:
                self._bindings.move_to_end(key)
                return found
        dispatch, folded = launch_grid(logical, dev.limit("max-compute-workgroups-per-dimension"))
        pbuf = params(dev, kernel, lengths, logical, folded)
        status = status_word(dev)
        group = bind_group(dev, kernel, bound, pbuf, status)
        binding = _Binding(group, pbuf, status, dispatch, frozenset(handles))
        with self._lock:
            self._bindings[key] = binding
            while len(self._bindings) > BIND_GROUPS:
                self._bindings.popitem(last=False)[1].destroy()
        return binding
