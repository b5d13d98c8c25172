"""A resident buffer's handle. Device memory that stays in one worker outlives the call
that made it and belongs to that worker's generation, not to routing: its handle talks
to its own worker directly and refuses use once that worker has restarted, whichever
driver call it is passed to."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vyre_core.deadline import Deadline
from vyre_core.errors import PipelineInvalidatedError
from vyre_core.protocol import Op
from vyre_core.supervisor.pool import Pool, Request

Reply = tuple[dict[str, Any], list[Any]]


class ResidentBuffer:
    """Device memory that stays in one worker between dispatches. It belongs to the
    worker generation that allocated it: after that worker restarts, using it raises
    PipelineInvalidatedError. Each method takes ``timeout`` (seconds, default None: no
    deadline, the call waits only while a live worker runs it)."""

    def __init__(self, pool: Pool, slot: int, generation: int, handle: int,
                 byte_len: int) -> None:
        self.pool = pool
        self.slot = slot
        self.generation = generation
        self.handle = handle
        self.byte_len = byte_len

    def __repr__(self) -> str:
        return (f"ResidentBuffer({self.pool.backend!r}, {self.byte_len} bytes, "
                f"generation={self.generation})")

    @property
    def valid(self) -> bool:
        return self.pool.holds(self.slot, self.generation)

    def refuse_if_stale(self, name: str | None = None) -> None:
        """PipelineInvalidatedError when the worker generation it lived in is gone."""
        if not self.valid:
            raise PipelineInvalidatedError(
                f"resident buffer {name or self.handle!r} of {self.pool.backend!r} lived in "
                f"worker generation {self.generation}, which has since restarted",
                "Allocate the buffer again and upload its data.",
                generation=self.generation, backend=self.pool.backend)

    def _call(self, op: Op, meta: dict[str, Any], arrays: Sequence[Any] = (),
              timeout: float | None = None, deadline: Deadline | None = None) -> Reply:
        """One request to the buffer's worker, within ``deadline`` (made by the caller's
        call), else ``timeout`` seconds from now."""
        self.refuse_if_stale()
        return self.pool.call(Request(
            op, meta, list(arrays), deadline=deadline or Deadline.after(timeout),
            slot=self.slot, generation=self.generation))

    def upload(self, data: Any, timeout: float | None = None) -> None:
        self._call(Op.UPLOAD, {"handle": self.handle}, [data], timeout)

    def download(self, timeout: float | None = None) -> bytes:
        return self._call(Op.DOWNLOAD, {"handle": self.handle}, (), timeout)[1][0].tobytes()

    def free(self, timeout: float | None = None) -> None:
        if self.valid:
            self._call(Op.FREE, {"handle": self.handle}, (), timeout)
