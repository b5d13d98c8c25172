"""Resident buffers for backends whose device memory is the host's (the reference
interpreter, the cpu backend): ``HostMemory`` hands out handles to byte buffers kept in
the worker's memory, and lends them to a dispatch as numpy arrays of the live memory, so
data stays put between dispatches exactly as it would on a device."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Mapping

import numpy as np

from vyre_core.config import DispatchConfig
from vyre_core.contract.types import SequenceRun, Timing, wall_clock_ns
from vyre_core.errors import InvalidInputError, UnsupportedFeatureError
from vyre_core.ir import Program
from vyre_core.ir.nodes import Buffer
from vyre_core.sequence.model import Sequence
from vyre_core.sequence.nodes import SequenceBuffer
from vyre_core.sequence.run import StepRunner, run_sequence


class HostMemory:
    """One backend's resident buffers: ``handle -> bytearray``, at most ``limit`` bytes
    each. Thread-safe; a handle is never reused within the process."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._buffers: dict[int, bytearray] = {}
        self._handles = itertools.count(1)
        self._lock = threading.Lock()

    def allocate(self, byte_len: int) -> int:
        if byte_len < 0 or byte_len > self.limit:
            raise UnsupportedFeatureError(f"resident buffer of {byte_len} bytes",
                                          f"Allocate 0..{self.limit} bytes.")
        with self._lock:
            handle = next(self._handles)
            self._buffers[handle] = bytearray(byte_len)
        return handle

    def buffer(self, handle: int) -> bytearray:
        try:
            return self._buffers[handle]
        except KeyError:
            raise InvalidInputError(f"resident handle {handle} is not allocated",
                                    "Allocate it with allocate_resident first.") from None

    def upload(self, handle: int, data: bytes) -> None:
        target = self.buffer(handle)
        if len(data) != len(target):
            raise InvalidInputError(f"upload of {len(data)} bytes into a {len(target)}-byte "
                                    f"resident buffer", "Upload exactly the allocated length.")
        target[:] = data

    def download(self, handle: int) -> bytes:
        return bytes(self.buffer(handle))

    def free(self, handle: int) -> None:
        with self._lock:
            self.buffer(handle)
            del self._buffers[handle]

    def array(self, handle: int, decl: Buffer | SequenceBuffer) -> np.ndarray:
        """The live memory of ``handle`` as ``decl``'s elements (writes land in the buffer),
        refused where it does not hold a whole number of them, or not exactly a fixed-size
        buffer's count."""
        data = self.buffer(handle)
        size = decl.dtype.storage_bytes
        count, rest = divmod(len(data), size)
        if rest or (decl.count is not None and count != decl.count):
            need = ("a whole number of " if decl.count is None
                    else f"exactly {decl.count} ") + f"{decl.dtype.value} elements"
            raise InvalidInputError(
                f"resident buffer {handle} bound to {decl.name!r} holds {len(data)} bytes, "
                f"not {need}", f"Allocate {decl.name!r} as {need} ({size} bytes each).")
        return np.frombuffer(data, dtype=decl.dtype.storage_np)

    def bind(self, program: Program, handles: list[int]) -> dict[str, np.ndarray]:
        """Each non-workgroup buffer of ``program`` (one handle each, declaration order)
        as the live array of its handle. A buffer the program writes must be bound once
        (which write would win is not defined); one it only reads may share a handle."""
        bound = [b for b in program.buffers if b.access.value != "workgroup"]
        if len(handles) != len(bound):
            raise InvalidInputError(f"{len(handles)} resident handles for {len(bound)} buffers",
                                    "Pass one handle per non-workgroup buffer, in declaration "
                                    "order.")
        written = [h for b, h in zip(bound, handles, strict=True) if b.is_output]
        if len(set(written)) != len(written):
            raise InvalidInputError(
                f"resident handles {list(handles)} bind one buffer to two of the buffers "
                f"{[b.name for b in program.outputs]} the program writes",
                "Pass a distinct resident buffer for each buffer it writes.")
        return {b.name: self.array(handle, b) for b, handle in zip(bound, handles, strict=True)}

    def run_sequence(self, sequence: Sequence, inputs: Mapping[str, np.ndarray],
                     resident: Mapping[str, int], config: DispatchConfig,
                     run_step: StepRunner) -> SequenceRun:
        """A sequence over arrays in this process: resident buffers are read in place and
        the ones a step wrote are written back once, at the end."""
        start = wall_clock_ns()
        held = {name: self.array(handle, sequence.buffer(name))
                for name, handle in resident.items()}

        def write_back(name: str, array: np.ndarray) -> None:
            held[name][:] = array

        outputs, loops = run_sequence(sequence, inputs, held, run_step, write_back)
        return SequenceRun(outputs, loops, Timing(wall_clock_ns() - start, None, config.label))
