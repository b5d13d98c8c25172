"""One OpenTelemetry span per call a pool answers, with ``PoolOptions(tracing=True)``:
named ``vyre <op>`` (``vyre dispatch``, ``vyre compile``...), a child of the span that was
current where the call was made, and carrying its label, backend, worker, generation,
bytes each way and outcome; an error sets the span's status to ERROR with the error's
cause. Spans go to the global TracerProvider, so the application decides where they go
(an exporter of its own, or none: with only ``opentelemetry-api`` installed they cost
little and go nowhere). Needs the ``opentelemetry`` extra."""

from __future__ import annotations

import collections
import logging
import time
from typing import Any

from vyre_core import __version__
from vyre_core.errors import VyreError
from vyre_core.supervisor.metrics import data_bytes
from vyre_core.supervisor.rules.requests import Request

_log = logging.getLogger("vyre.supervisor")


class CallSpans:
    """The spans of one pool's calls: ``begin`` on the caller's thread; ``answered`` as the
    answer is handed over (under the pool's lock: it only notes the time); ``flush``, after
    the callers have their answers and outside the lock, makes the spans, so a span
    processor that exports as each span ends (slowly, or failing) never holds up the
    pool."""

    def __init__(self, backend: str) -> None:
        from opentelemetry import context, trace
        from opentelemetry.trace import SpanKind, Status, StatusCode

        self._backend = backend
        self._tracer = trace.get_tracer("vyre", __version__)
        self._current = context.get_current
        self._kind = SpanKind.CLIENT
        self._error = lambda text: Status(StatusCode.ERROR, text)
        self._due: collections.deque[tuple[Request, Any, int]] = collections.deque()
        self._failing = False

    def begin(self, request: Request) -> None:
        request.transfer.trace = (self._current(), time.time_ns())

    def answered(self, request: Request, value: Any) -> None:
        if request.transfer.trace is not None:
            self._due.append((request, value, time.time_ns()))

    def flush(self) -> None:
        """Make the spans of the calls answered so far (any thread; a failing processor is
        logged once, and costs only its spans)."""
        while self._due:
            try:
                request, value, ended = self._due.popleft()
            except IndexError:  # (another thread took the last one)
                return
            try:
                self._span(request, value, ended)
            except Exception as exc:
                if not self._failing:
                    _log.warning("pool %r: could not record the span of a call (%s: %s); "
                                 "calls go on", self._backend, type(exc).__name__, exc)
                self._failing = True

    def _span(self, request: Request, value: Any, ended: int) -> None:
        parent, started = request.transfer.trace
        request.transfer.trace = None
        attributes: dict[str, Any] = {"vyre.backend": self._backend,
                                      "vyre.op": request.call.op.value,
                                      "vyre.input_bytes": request.transfer.input_bytes}
        label = request.call.message.label
        if label:
            attributes["vyre.label"] = label
        if request.tracking.served_by is not None:
            attributes["vyre.worker"], attributes["vyre.generation"] = request.tracking.served_by
        if isinstance(value, BaseException):
            attributes["error.type"] = type(value).__name__
            if isinstance(value, VyreError):
                attributes["vyre.error_code"] = value.code
        else:
            attributes["vyre.output_bytes"] = data_bytes(value[1])
        span = self._tracer.start_span(f"vyre {request.call.op.value}", context=parent,
                                       kind=self._kind, attributes=attributes,
                                       start_time=started)
        if isinstance(value, BaseException):
            cause = value.cause if isinstance(value, VyreError) else str(value)
            span.set_status(self._error(f"{type(value).__name__}: {cause}"))
        span.end(end_time=ended)
