"""Device buffers of launches: sizes in whole words, the params uniform and status word
every kernel binds, bind groups, and the buffers of recent launch shapes kept for reuse."""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vyre_core.errors import LaunchLimitError
from vyre_wgpu.adapter import wgpu_module
from vyre_wgpu.lowering import params_data
from vyre_wgpu.pipelines import Kernel
from vyre_wgpu.state import DeviceState
from vyre_wgpu.wgsl import BufferBinding

#: The buffers and bind group of a launch are kept for the next launch of the same kernel
#: with the same sizes and grid when they take at most KEEP_BYTES; at most KEEP_LAUNCHES
#: launches and KEEP_TOTAL_BYTES of them are kept (the least recently used go first).
KEEP_BYTES = 16 << 20
KEEP_TOTAL_BYTES = 64 << 20
KEEP_LAUNCHES = 64


def padded_size(nbytes: int) -> int:
    """Buffer size for ``nbytes`` of data: a multiple of 4, at least 4."""
    return max(4, (int(nbytes) + 3) & ~3)


def as_words(array: np.ndarray) -> memoryview | np.ndarray:
    """``array``'s bytes padded to whole 4-byte words (write_buffer copies multiples of 4)."""
    array = np.ascontiguousarray(array)
    if array.nbytes % 4 == 0:
        return array
    padded = np.zeros(padded_size(array.nbytes), np.uint8)
    padded[:array.nbytes] = array.reshape(-1).view(np.uint8)
    return padded


def destroy(buffers: Sequence[Any]) -> None:
    for buf in buffers:
        with contextlib.suppress(Exception):  # best effort: the device may be gone
            buf.destroy()


def binding_size(dev: DeviceState, binding: BufferBinding, count: int) -> int:
    """Bytes bound for ``count`` elements of ``binding``, within the device's limit."""
    size = padded_size(count * binding.element_bytes)
    binding_max = dev.limit("max-storage-buffer-binding-size")
    if size > binding_max:
        raise LaunchLimitError(
            f"backend 'wgpu': buffer {binding.name!r} is {size} bytes, the device binds at "
            f"most {binding_max}", "Split the data across several dispatches.")
    return size


def uniform(dev: DeviceState, data: np.ndarray, label: str = "vyre-params") -> Any:
    """A uniform buffer holding ``data`` (a kernel's params); destroyed again if the
    write fails."""
    usage = wgpu_module().BufferUsage
    words = as_words(data)
    buf = dev.device.create_buffer(label=label, size=words.nbytes,
                                   usage=usage.UNIFORM | usage.COPY_DST)
    try:
        dev.queue.write_buffer(buf, 0, words)
    except BaseException:
        destroy([buf])
        raise
    return buf


def params(dev: DeviceState, kernel: Kernel, lengths: Sequence[int],
           grid: Sequence[int], folded: int) -> Any:
    """The params uniform of one launch of ``kernel``: buffer lengths, the logical grid,
    whether it is folded."""
    return uniform(dev, params_data(kernel.lowered, list(lengths), tuple(grid), folded))


def status_word(dev: DeviceState) -> Any:
    """A status word: the kernel sets it when the adapter cut a loop short."""
    usage = wgpu_module().BufferUsage
    return dev.device.create_buffer(label="vyre-status", size=4,
                                    usage=usage.STORAGE | usage.COPY_SRC | usage.COPY_DST)


def bind_group(dev: DeviceState, kernel: Kernel, bound: Sequence[tuple[Any, int]],
               params_buffer: Any, status: Any) -> Any:
    """A bind group of ``kernel``: ``bound`` is (buffer, bytes bound) per lowered buffer."""
    lowered = kernel.lowered
    entries = [{"binding": b.binding, "resource": {"buffer": buf, "offset": 0, "size": size}}
               for b, (buf, size) in zip(lowered.buffers, bound, strict=True)]
    entries += [{"binding": lowered.params_binding,
                 "resource": {"buffer": params_buffer, "offset": 0, "size": params_buffer.size}},
                {"binding": lowered.status_binding,
                 "resource": {"buffer": status, "offset": 0, "size": 4}}]
    if kernel.tables is not None:
        entries.append({"binding": lowered.tables_binding, "resource": {
            "buffer": kernel.tables, "offset": 0, "size": kernel.tables.size}})
    return dev.device.create_bind_group(layout=kernel.layout, entries=entries)


@dataclass(frozen=True)
class Launch:
    """One dispatch of ``kernel``, one entry of ``data``/``lengths``/``read`` per lowered
    buffer: ``data`` is uploaded (None: zero-filled), ``lengths`` are element counts (into
    the params), ``read`` buffers are read back, trimmed to their length."""

    kernel: Kernel
    data: Sequence[np.ndarray | None]
    lengths: tuple[int, ...]
    grid: tuple[int, int, int]      # the logical grid (folded by launch_grid when too wide)
    read: tuple[bool, ...]

    def __post_init__(self) -> None:  # plain tuples, so that key() is hashable
        object.__setattr__(self, "lengths", tuple(map(int, self.lengths)))
        object.__setattr__(self, "grid", tuple(map(int, self.grid)))
        object.__setattr__(self, "read", tuple(map(bool, self.read)))

    def key(self) -> tuple | None:
        """What launches that can share buffers have in common (None: never kept)."""
        if self.kernel.key is None:
            return None
        return (self.kernel.key, self.kernel.generation, self.lengths, self.read, self.grid)


@dataclass
class LaunchBuffers:
    """The buffers and bind group of one launch shape, kept for the next one like it."""

    storage: list[Any]  # one per lowered buffer
    params: Any
    status: Any
    bind_group: Any

    @property
    def nbytes(self) -> int:
        return sum(buf.size for buf in self.buffers())

    def buffers(self) -> list[Any]:
        return [*self.storage, self.params, self.status]


def launch_buffers(dev: DeviceState, launch: Launch, folded: int) -> LaunchBuffers:
    """New storage buffers for ``launch`` (its read ones can be copied out; each checked
    against the binding limit first), its params uniform (``folded``: the grid is folded), a
    status word and their bind group; destroyed again if any step fails."""
    kernel = launch.kernel
    sizes = [binding_size(dev, b, n) for b, n in zip(kernel.lowered.buffers, launch.lengths,
                                                      strict=True)]
    usage = wgpu_module().BufferUsage
    made: list[Any] = []
    try:
        for b, size, rd in zip(kernel.lowered.buffers, sizes, launch.read, strict=True):
            made.append(dev.device.create_buffer(
                label=b.name, size=size,
                usage=usage.STORAGE | usage.COPY_DST | (usage.COPY_SRC if rd else 0)))
        storage = list(made)
        made.append(params(dev, kernel, launch.lengths, launch.grid, folded))
        made.append(status_word(dev))
        group = bind_group(dev, kernel, list(zip(storage, sizes, strict=True)), *made[-2:])
    except BaseException:
        destroy(made)
        raise
    return LaunchBuffers(storage, made[-2], made[-1], group)


class KeptLaunches:
    """Launch buffers by (kernel, sizes, reads, grid), least recently used dropped first
    (see KEEP_*). Used under the device lock; a new device generation starts empty."""

    def __init__(self) -> None:
        self._kept: OrderedDict[tuple, LaunchBuffers] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._kept)

    def get(self, key: tuple) -> LaunchBuffers | None:
        found = self._kept.get(key)
        if found is not None:
            self._kept.move_to_end(key)
        return found

    def keep(self, key: tuple, launch: LaunchBuffers) -> bool:
        """Keep ``launch`` when it is small enough; False: the caller destroys it."""
        if launch.nbytes > KEEP_BYTES:
            return False
        self._kept[key] = launch
        self._bytes += launch.nbytes
        while self._bytes > KEEP_TOTAL_BYTES or len(self._kept) > KEEP_LAUNCHES:
            _, old = self._kept.popitem(last=False)
            self._bytes -= old.nbytes
            destroy(old.buffers())
        return True

    def clear(self) -> None:
        destroy([buf for kept in self._kept.values() for buf in kept.buffers()])
        self._kept.clear()
        self._bytes = 0
