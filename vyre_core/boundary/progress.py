"""The page of memory a worker shares with its parent: it hands the worker its identity
and hello token at start (never on the command line), and the worker's main thread writes
into it the id of each request the moment it receives it and once it has answered, so the
parent can tell a request that never arrived from one that is running in a worker too
busy to send heartbeats; the parent writes into it the id of a call its caller cancelled.
"""

from __future__ import annotations

import mmap
import os
import struct
from typing import Any

import msgpack

from vyre_core.errors import ProtocolError


class ProgressPage:
    """A page of memory shared by a worker and its parent (a memfd the worker inherits).

    Layout: the id of the last request the worker's main thread received, the id of the
    last one it answered and that answer's size in bytes, the id of a request its caller
    cancelled (written by the parent; little-endian u64 each), then the start-up hand-over
    (identity and hello token, msgpack), which the worker erases once read. The worker is
    to stop the request it runs when the first and fourth words are equal
    (``stop_requested``; ``vyre_core.cancel``)."""

    SIZE = 4096
    _IDS = struct.Struct("<QQQ")
    _WORDS = struct.Struct("<QQQQ")
    CANCEL_AT = 24
    _BOOT = 64

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._map = mmap.mmap(fd, self.SIZE)

    @classmethod
    def create(cls, handover: dict[str, Any]) -> ProgressPage:
        """A new page carrying ``handover`` for the worker (the caller passes ``fd`` to it)."""
        blob = msgpack.packb(handover, use_bin_type=True)
        if len(blob) > cls.SIZE - cls._BOOT - 4:
            raise ValueError("hand-over too large for the progress page")
        fd = os.memfd_create("vyre-worker-progress", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, cls.SIZE)
            page = cls(fd)
        except BaseException:
            os.close(fd)
            raise
        page._map[cls._BOOT:cls._BOOT + 4] = len(blob).to_bytes(4, "little")
        page._map[cls._BOOT + 4:cls._BOOT + 4 + len(blob)] = blob
        return page

    def take_handover(self) -> dict[str, Any]:
        """Read the start-up hand-over and erase it from the page (worker side)."""
        size = int.from_bytes(self._map[self._BOOT:self._BOOT + 4], "little")
        if not 0 < size <= self.SIZE - self._BOOT - 4:
            raise ProtocolError("the progress page carries no start-up hand-over",
                                "Workers are started by the vyre supervisor only.")
        blob = self._map[self._BOOT + 4:self._BOOT + 4 + size]
        self._map[self._BOOT:self.SIZE] = bytes(self.SIZE - self._BOOT)
        handover = msgpack.unpackb(blob, raw=False)
        if not isinstance(handover, dict):
            raise ProtocolError("the start-up hand-over is malformed",
                                "Workers are started by the vyre supervisor only.")
        return handover

    def read(self) -> tuple[int, int, int]:
        """(last received request id, last answered request id, its answer's bytes)."""
        return self._IDS.unpack_from(self._map, 0)

    def received(self, request_id: int) -> None:
        struct.pack_into("<Q", self._map, 0, request_id)

    def answered(self, request_id: int, nbytes: int) -> None:
        struct.pack_into("<Q", self._map, 16, nbytes)  # the size first: read with the id
        struct.pack_into("<Q", self._map, 8, request_id)

    def cancel(self, request_id: int) -> None:
        """(Parent.) Ask the worker to stop request ``request_id`` at its next safe point."""
        struct.pack_into("<Q", self._map, self.CANCEL_AT, request_id)

    def stop_requested(self) -> bool:
        """(Worker.) Whether the request it received last was cancelled."""
        received, _, _, cancelled = self._WORDS.unpack_from(self._map, 0)
        return received != 0 and received == cancelled

    def words(self) -> memoryview:
        """The four words as a writable u64 view (for code that checks the stop itself,
        compiled code say: ``words[0] == words[3]``)."""
        return memoryview(self._map)[:self._WORDS.size].cast("Q")

    def close(self) -> None:
        self._map.close()
        os.close(self.fd)
