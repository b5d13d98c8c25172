"""A call in flight (``dispatch_async``, ``launch_async``): the handle a caller polls,
waits on, cancels or awaits. Apart from the Driver because a handle outlives the call
that made it and waits on the call's outcome alone, never on the driver's routing or
locks; a launch's handle also fills the caller's arrays, once, when the answer is read.

``Background``: the asynchronous routing those calls share. A call whose pool is ready is
submitted at once; one whose pool must be started or probed first, or that routing must
try again after a failure, is routed on a background thread, so the caller does not
wait for routing (it does wait, within the call's deadline, for an array in shared
memory that an earlier call in flight still writes: ``shared_arrays.lend_all``)."""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Callable, Generator, Mapping, Sequence
from concurrent.futures import InvalidStateError, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np

from vyre_core.contract.types import Outputs
from vyre_core.deadline import checked_seconds
from vyre_core.driver.calls import (
    _check_out,
    _kernel_plan,
    _launch_config,
    _no_dim,
    _outputs,
    _planned,
    _program_config,
    _read_write,
    _resident_launch,
    _resident_sequence_pool,
    _sequence_outputs,
    _sequence_requested,
    _writing_into,
    _written_into,
)
from vyre_core.driver.resident import ResidentBuffer, ResidentLaunch
from vyre_core.errors import DispatchTimeoutError, PoolFailedError
from vyre_core.kernels.kernel import KernelFunction, Written
from vyre_core.sequence import Sequence as StepSequence
from vyre_core.supervisor.outcome import Outcome

if TYPE_CHECKING:
    from vyre_core.config import DispatchConfig
    from vyre_core.ir import Program
    from vyre_core.launch import Launch, PlannedLaunches
    from vyre_core.routing import RoutingPolicy
    from vyre_core.supervisor.rules.requests import Request
    from vyre_core.supervisor.shell import PoolHandle


class PendingResult:
    """A dispatch in flight: ``is_ready()``, ``result(timeout)`` and ``cancel()``. With
    ``out`` (the arrays checked when the call was made; an array in shared memory its
    worker writes as it runs), ``result()`` writes the outputs there the first time it
    returns, lets go of the reply, and answers those arrays from then on."""

    def __init__(self, future: Outcome, out: Sequence[np.ndarray] | None = None) -> None:
        self._future = future
        self._out = None if out is None else tuple(out)  # (the caller's list may change)
        self._filled: Outputs | None = None
        self._filling = threading.Lock()

    def is_ready(self) -> bool:
        return self._future.done()

    def cancel(self) -> bool:
        """Cancel the call: True if this cancelled it, False (a no-op) when it had already
        finished, failed or been cancelled. Safe from any thread. A waiting call is
        dropped; a running one is stopped at its worker's next safe point (or its worker
        is replaced, docs/operations.md "Cancelling a call"). Exactly one of a cancel and
        the call's answer wins: after a True, ``result()`` raises
        ``DispatchCancelledError``."""
        return self._future.cancel()

    def cancelled(self) -> bool:
        return self._future.cancelled()

    def result(self, timeout: float | None = None) -> Outputs:
        return self._answer(timeout, _outputs)

    def _answer(self, timeout: float | None,
                outputs_of: Callable[[Any, list[Any]], Outputs]) -> Outputs:
        """The outputs, written into ``out`` the first time; the reply is then let go of
        (the handle's outcome holds ``out`` in its place), so a kept handle holds no
        shared memory of the pool's."""
        ran, arrays = self._future_result(timeout)
        if self._out is None:
            return outputs_of(ran, arrays)
        with self._filling:
            if self._filled is None:
                self._filled = _written_into(outputs_of(ran, arrays), self._out)
                self._wrote()
                kept = Outcome()
                kept.set_result((ran, list(self._out)))
                self._future = kept
            return self._filled

    def _wrote(self) -> None:
        """(Once ``out`` holds the outputs.) What else the handle fills: nothing here."""

    def __await__(self) -> Generator[Any, None, Outputs]:
        """``await`` the call from a coroutine: its loop keeps running meanwhile, the
        answer is ``result()``'s, and cancelling the awaiting task cancels the call."""
        from vyre_core.driver import awaiting  # (asyncio: imported only by those who await)

        return awaiting.answer(self._future, lambda: self.result(0),
                               lambda: self.cancel()).__await__()

    def _future_result(self, timeout: float | None) -> tuple[dict[str, Any], list[Any]]:
        timeout = checked_seconds(timeout, "timeout", zero=True)
        try:
            if not self._future.wait(timeout):
                raise DispatchTimeoutError(
                    f"the dispatch did not finish within result(timeout={timeout})",
                    "Wait longer; the dispatch keeps running (its own deadline is "
                    "DispatchConfig.timeout).")
        except DispatchTimeoutError:
            raise
        except BaseException:  # Ctrl-C (any exception) while waiting: the call is cancelled
            self._future.cancel()
            raise
        return self._future.result()


class _SequenceResult(PendingResult):
    """A sequence in flight: its returns, and how each loop ran (``outputs.loops``)."""

    def result(self, timeout: float | None = None) -> Outputs:
        return self._answer(timeout, _sequence_outputs)


class _LaunchResult(PendingResult):
    """A launch in flight: ``result()`` fills the caller's arrays, once (the dispatch's
    ``out``, then the arrays it could not write in place), as a dispatch's handle fills
    its ``out``: under its lock, the reply let go of after."""

    def __init__(self, future: Outcome, plan: Written) -> None:
        super().__init__(future, plan.out)
        self._plan = plan

    def _wrote(self) -> None:
        self._plan.fill()


class Background:
    """The asynchronous routing of ``dispatch_async`` and ``launch_async``, and the
    executor whose threads route a call off its caller's thread (made on first use)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None

    def dispatch_async(self, routing: RoutingPolicy, plans: PlannedLaunches,
                       tuned_config: Callable[..., DispatchConfig], work: Program | StepSequence,
                       inputs: Sequence[Any], backend: str | None, config: Any, dim: Any,
                       out: Sequence[np.ndarray] | None,
                       resident: Mapping[str, ResidentBuffer] | None) -> PendingResult:
        """``Driver.dispatch_async`` of a program or a sequence: checked and its request
        built here, at once; a sequence on resident buffers submitted to their worker."""
        if not isinstance(work, StepSequence):
            return PendingResult(self._program_async(
                routing, plans, tuned_config, work, inputs, backend,
                _program_config(config, dim, resident), out), out)
        sequence, request = _sequence_requested(work, inputs, resident, _no_dim(config, dim))
        if out is not None:
            _check_out(sequence, request.call.outputs, out)
            _writing_into(request, out, {})
        if request.call.slot is None:
            return _SequenceResult(self._routed(routing, sequence, backend, request), out)
        pool = _resident_sequence_pool(routing, sequence, request, resident, backend)
        return _SequenceResult(pool.submit(request), out)

    def _program_async(self, routing: RoutingPolicy, plans: PlannedLaunches,
                       tuned_config: Callable[..., DispatchConfig], program: Program,
                       inputs: Sequence[Any], backend: str | None, config: DispatchConfig,
                       out: Sequence[np.ndarray] | None) -> Outcome:
        """A program's call, checked, its request built and on its way: its outcome, the
        outputs written into ``out`` when given (the handle's to fill)."""
        if config.tuned:
            config = tuned_config(program, inputs, backend=backend, config=config)
        source, (program, request) = program, _planned(plans, program, inputs, config)
        if out is not None:  # (program: now the launch, what routing weighs)
            _check_out(source, request.call.outputs, out)
            _writing_into(request, out, _read_write(source))
        return self._routed(routing, program, backend, request)

    def _routed(self, routing: RoutingPolicy, work: Launch | StepSequence,
                backend: str | None, request: Request) -> Outcome:
        """The outcome of ``request``, submitted at once where ``work``'s pool is ready,
        else routed on a background thread."""
        outcome = Outcome()
        running: list[Outcome] = []  # the outcome of the request that runs it now
        outcome.on_cancel = lambda: running and running[-1].cancel()
        caller = contextvars.copy_context()  # (its span is the parent of the call's spans)
        pool, _ = routing.decide(work, backend)
        if pool is None:
            self._in_background(routing, outcome, running, work, backend, request, caller)
        else:
            first = routing.place(request.renewed(), work, backend, pool)
            running.append(first.call.future)
            pool.submit(first).add_done_callback(
                lambda done: self._async_done(routing, done, outcome, running, work,
                                              backend, request, pool, first, caller))
        return outcome

    def launch_async(self, routing: RoutingPolicy, plans: PlannedLaunches,
                     tuned_config: Callable[..., DispatchConfig], kernel: KernelFunction,
                     dim: Any, args: Sequence[Any], backend: str | None, config: Any,
                     shapes: Any) -> PendingResult:
        """``launch_async``: a plain launch routed as ``dispatch_async``; one on resident
        buffers submitted to the worker that holds them."""
        plan = _kernel_plan(kernel, dim, args, shapes, config)
        if isinstance(plan, ResidentLaunch):
            return _LaunchResult(_resident_launch(routing, plan, backend), plan)
        outcome = self._program_async(routing, plans, tuned_config, plan.program, plan.inputs,
                                      backend, _launch_config(config, dim), plan.out)
        return _LaunchResult(outcome, plan)

    def _async_done(self, routing: RoutingPolicy, done: Outcome, outcome: Outcome,
                    running: list[Outcome], program: Launch, backend: str | None,
                    request: Request, pool: PoolHandle, ran: Request,
                    caller: contextvars.Context) -> None:
        """Runs in the pool's I/O thread: pass the answer on (of ``ran``, the copy of
        ``request`` that ran), or hand the call to a background thread when routing must
        try again. (``outcome`` may be cancelled meanwhile: it then stays so.)"""
        if done.cancelled() or outcome.done():
            return
        exc = done.exception()
        with contextlib.suppress(InvalidStateError):
            if exc is not None and routing.again(exc, program, backend, pool, ran):
                self._in_background(routing, outcome, running, program, backend, request,
                                    caller)
            elif exc is not None:
                outcome.set_exception(exc)
            else:
                outcome.set_result(done.result())

    def _in_background(self, routing: RoutingPolicy, outcome: Outcome,
                       running: list[Outcome], program: Launch, backend: str | None,
                       request: Request, caller: contextvars.Context) -> None:
        """Route and run the call on a background thread, in (a copy of) the caller's
        context; each request made for it goes into ``running`` (so a cancel reaches it)."""
        def made(pool: PoolHandle) -> Request:
            renewed = request.renewed()
            running.append(renewed.call.future)
            if outcome.cancelled():
                renewed.call.future.cancel()
            return renewed

        def run() -> None:
            if outcome.done():
                return
            try:
                _, _, reply = routing.call(program, backend, made, request.call.deadline)
                outcome.set_result(reply)
            except BaseException as exc:
                with contextlib.suppress(InvalidStateError):
                    outcome.set_exception(exc)

        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(4, thread_name_prefix="vyre-route")
            executor = self._executor
        try:
            executor.submit(caller.copy().run, run)
        except RuntimeError:  # shut down: the driver is closing
            with contextlib.suppress(InvalidStateError):
                outcome.set_exception(PoolFailedError("the driver was closed",
                                                      "Create a new vyre Driver."))

    def shutdown(self) -> None:
        """Stop taking calls (the pools are closed: queued routing fails fast now)."""
        with self._lock:
            executor = self._executor
        if executor is not None:
            executor.shutdown(wait=False)
