"""``Driver``: the one object callers use. It routes each program to a backend, runs it in
that backend's supervised worker pool, and hands back outputs, compiled pipelines and
resident buffers. Pools start lazily; nothing runs until the first dispatch.

Every call has one deadline, fixed when it is made (``DispatchConfig.timeout`` or the
method's ``timeout``): it bounds queueing, starting and probing pools, retries and
re-routing alike. Without one, a call waits only while a live worker is running it.

Outputs are read-only numpy arrays, no copy: views of the shared memory the worker wrote
large outputs into (released when the last view is collected), or of the received message
for small ones; copy one to modify it, or pass ``out=`` arrays to ``dispatch``.
Thread-safe: any number of threads may dispatch at once. Fork-safe: in a forked child an
inherited Driver starts pools of its own and never touches the parent's.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import functools
import inspect
import os
import sys
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import InvalidStateError, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from vyre_core import abi, lifetime
from vyre_core.cluster import connect
from vyre_core.config import DispatchConfig
from vyre_core.contract.types import Capabilities, DeviceInfo, Outputs, Timing
from vyre_core.deadline import Deadline, checked_seconds
from vyre_core.driver.calls import (
    _check_out,
    _checked_program,
    _checked_sequence,
    _config,
    _kernel_plan,
    _launch_config,
    _outputs,
    _read_write,
    _resident_pool,
    _sequence_config,
    _sequence_into,
    _sequence_outputs,
    _sequence_request,
    _untuned,
    _unwritten,
    _weighed,
    _writing_into,
    one_worker,
)
from vyre_core.driver.owned import _options_for, _Owned
from vyre_core.driver.pending import PendingResult, _LaunchResult
from vyre_core.driver.resident import ResidentBuffer, ResidentLaunch
from vyre_core.errors import (
    InvalidConfigError,
    InvalidInputError,
    InvalidSequenceError,
    NoCapableBackendError,
    PoolFailedError,
)
from vyre_core.ir import Program
from vyre_core.kernels.kernel import KernelFunction
from vyre_core.launch import Launch, PlannedLaunches, effective_program, launch_of
from vyre_core.pipeline import CompiledPipeline, CompiledSequence
from vyre_core.protocol import Op
from vyre_core.registry import BackendRegistration, Registry
from vyre_core.routing import Explanation, RouteDecision, RoutingPolicy
from vyre_core.sequence import Sequence as StepSequence
from vyre_core.shadow_sampler import Every, Sample, ShadowSampler, default_dir
from vyre_core.supervisor.outcome import Outcome
from vyre_core.supervisor.pool import Pool, PoolOptions, Request
from vyre_core.supervisor.pools import Pools
from vyre_core.supervisor.rundir import RunDir
from vyre_core.tuning.candidates import DEFAULT_LIMIT
from vyre_core.tuning.tuner import DEFAULT_REPEATS, Measured, Tuner, TuneResult

_Handle = TypeVar("_Handle", CompiledPipeline, CompiledSequence, "ResidentBuffer")


def _keywords_checked(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` refusing a keyword it does not take (``grid=``, say) with the spellings it
    does take, where Python would raise a bare TypeError."""
    known = frozenset(inspect.signature(fn).parameters)

    @functools.wraps(fn)
    def checked(*args: Any, **kwargs: Any) -> Any:
        unknown = kwargs.keys() - known
        if unknown:
            names = ", ".join(f"{name}=" for name in sorted(unknown))
            raise InvalidConfigError(
                f"{fn.__name__}() got an unknown keyword argument {names}",
                "Say how many invocations run with dim= (e.g. dim=len(x), or dim=(64, 32): "
                "dim[i] is the extent of global_id(i)), or count workgroups with "
                "config=DispatchConfig(grid_override=(4,)).")
        return fn(*args, **kwargs)
    return checked


_DRIVERS: weakref.WeakSet[Driver] = weakref.WeakSet()


def _invalidate_routing(driver: weakref.ref[Driver]) -> None:
    if (alive := driver()) is not None:
        alive.routing.router.invalidate()


def _keeping(driver: Driver, handle: _Handle) -> _Handle:
    """``handle``, holding ``driver``: a driver is closed once garbage-collected, and the
    handles it gave out (pipelines, resident buffers) keep it, and so their workers."""
    handle._driver = driver  # type: ignore[union-attr]
    return handle


class Driver:
    """Routes programs to backends and runs them in supervised worker processes.

    ``options`` (or keyword fields of PoolOptions, e.g. ``workers=2``) apply to every
    backend's pool; ``backend_options`` overrides them per backend id. ``cluster`` (else
    ``VYRE_CLUSTER``) says where workers run: ``"local"`` processes (the default), or Ray
    actors: ``"ray"`` (a private Ray instance), ``"auto"`` (the cluster running here),
    ``"HOST:PORT"`` / ``"ray://HOST:PORT"`` (cluster/connect.py). ``shadow_every=N``
    runs 1 in N dispatches that another backend served again on the reference, in the
    background, and saves each divergence as a replay bundle in ``shadow_dir``
    (``shadow_sampler.py``; ``shadow_report()`` counts them).
    """

    def __init__(self, registry: Registry | None = None, *, options: PoolOptions | None = None,
                 backend_options: Mapping[str, PoolOptions] | None = None,
                 shadow_every: int | None = None, shadow_dir: str | os.PathLike | None = None,
                 cluster: str | None = None, **option_fields: Any) -> None:
        where = lifetime.made_at()
        if registry is None:
            registry = Registry.discover()
            registry.check_selection()  # (a registry passed in is the caller's: vyre doctor)
        self.registry = registry
        self.options = options or PoolOptions(**option_fields)
        self._backend_options = dict(backend_options or {})
        spec = connect.parse(cluster)  # (checked before anything is made)
        # checked before the run directory exists; its thread starts last, when nothing
        # after it can fail and leave it behind
        shadow = None if shadow_every is None else self._shadow_plan(shadow_every)
        self._shadow: ShadowSampler | None = None
        self.cluster: connect.RayCluster | None = None
        self._plans = PlannedLaunches()
        rundir = RunDir()
        try:  # (what was made is let go of when a later step fails)
            self.cluster = None if spec.local else connect.RayCluster(spec)
            self._own_process(rundir)
            self.routing = RoutingPolicy(self.registry, self.pools)
            if shadow is not None:
                self._shadow = self._owned.shadow = self._shadow_sampler(*shadow, shadow_dir)
        except BaseException:
            if self.cluster is not None:
                self.cluster.close()
            rundir.remove()
            with contextlib.suppress(AttributeError):  # (made by _own_process)
                atexit.unregister(self._owned.close)
            raise
        self._made_at = where
        self._watch()
        _DRIVERS.add(self)

    def _watch(self) -> None:
        """Dropped unclosed, this driver is closed by the reaper thread, with a
        ResourceWarning naming the line that made it (``lifetime.py``)."""
        self._dropped = lifetime.watch(self, self._owned.close, "a vyre Driver",
                                       self._made_at)

    def _own_process(self, rundir: RunDir | None) -> None:
        """State that belongs to one process: made at construction, and made again in a
        forked child, which must never touch the parent's sockets, workers or locks."""
        self._owner_pid = os.getpid()
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._tuner = Tuner(self)
        # nothing the pools keep may refer to the Driver: their threads would keep it alive
        self._owned = owned = _Owned(self.cluster)
        self.pools = owned.pools = Pools(
            self.registry, functools.partial(_options_for, self._backend_options, self.options),
            functools.partial(_invalidate_routing, weakref.ref(self)), rundir,
            owned.close_in_multiprocessing_child, self.cluster)
        atexit.register(owned.close)

    def _shadow_plan(self, every: int) -> tuple[Every, str]:
        """The sampling rule and the reference backend's id, or the error saying why not."""
        rule = Every(every)
        reference = next((r.id for r in self.registry.backends() if r.is_reference), None)
        if reference is None:
            raise InvalidConfigError("shadow_every needs the reference backend, which is not "
                                     "loaded", "Install vyre-reference, or leave shadow_every "
                                     "out.")
        return rule, reference

    def _shadow_sampler(self, rule: Every, reference: str,
                        directory: str | os.PathLike | None) -> ShadowSampler:
        driver = weakref.ref(self)  # (the sampler's thread must not keep the Driver alive)

        def run_reference(program: Program, inputs: Sequence[Any],
                          config: DispatchConfig) -> Outputs:
            alive = driver()
            if alive is None:
                raise PoolFailedError("the driver was dropped", "Close the driver after "
                                      "the dispatches it shadows.")
            return alive._dispatch(program, inputs, reference, config, None, sample=False)

        return ShadowSampler(rule, Path(directory) if directory else default_dir(),
                             run_reference)

    def shadow_report(self) -> dict[str, Any] | None:
        """What the production shadow did (None without ``shadow_every``): samples taken,
        compared, diverged, dropped (the reference fell behind), failed, and the bundles."""
        return None if self._shadow is None else self._shadow.report()

    def _forked(self) -> None:
        # the parent's pools: kept (never collected, never used), across nested forks too
        self._inherited = [*getattr(self, "_inherited", []), *self.pools.forget()]
        self._shadow = None  # (its thread stayed in the parent)
        self._dropped.detach()  # (the parent's parts: never closed here)
        self._own_process(None)  # (the run directory is made on first use in this process)
        self.routing.attach(self.pools)
        self._watch()

    def __enter__(self) -> Driver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Driver:
        return self

    async def __aexit__(self, *exc: object) -> None:
        """``close()`` on a worker thread: stopping workers waits (up to their kill grace),
        and the event loop must keep running meanwhile."""
        import asyncio

        await asyncio.to_thread(self.close)

    def _options_for(self, backend: str) -> PoolOptions:
        return _options_for(self._backend_options, self.options, backend)

    # -- routing ---------------------------------------------------------------------------

    def backends(self) -> list[BackendRegistration]:
        """Registered backends in precedence order."""
        return self.registry.backends()

    def route(self, program: Program, backend: str | None = None,
              timeout: float | None = None,
              config: DispatchConfig | None = None, *, inputs: Sequence[Any] | None = None,
              dim: int | Sequence[int] | None = None) -> RouteDecision:
        """The backend ``dispatch`` would use (with ``config``: its constants and workgroup
        override weigh, and the launch: its grid from ``dim``, the config, or inference
        over ``inputs`` or the declared sizes, and the buffer sizes). Backends judged on
        static claims are probed first, exactly as ``dispatch`` does (within ``timeout``
        seconds): apart, when routing may pass them over; the chosen one by starting its
        pool."""
        config = _launch_config(config, dim)
        return self.routing.route(_weighed(program, config, inputs), backend,
                                  Deadline.after(timeout))

    def explain(self, program: Program, timeout: float | None = None,
                config: DispatchConfig | None = None, *, inputs: Sequence[Any] | None = None,
                dim: int | Sequence[int] | None = None) -> list[Explanation]:
        """Every backend, accepted or why not, as ``dispatch`` would see them (the winner
        probed first; the launch weighed as ``route`` weighs it), also when none can run
        it."""
        config = _launch_config(config, dim)
        return self.routing.explain(_weighed(program, config, inputs),
                                    Deadline.after(timeout))

    def probe(self, backend: str, timeout: float | None = None) -> Capabilities:
        """What ``backend``'s worker probed on its device, starting its pool if needed.
        Raises PoolFailedError (with the worker's traceback) when it cannot start, and
        DispatchTimeoutError past ``timeout`` (default None: wait while workers start, up
        to the pool's startup_timeout per try)."""
        return self.pools.probe(backend, Deadline.after(timeout))

    def devices(self, backend: str, timeout: float | None = None) -> list[DeviceInfo]:
        """The devices ``backend`` lists (``PoolOptions(devices=...)`` names them by id), as
        its worker reported them: probed first, as ``probe`` does."""
        self.probe(backend, timeout)
        return self.pools.open(backend).devices

    # -- dispatch --------------------------------------------------------------------------

    def _planned(self, program: Program, inputs: Sequence[Any], config: DispatchConfig
                 ) -> tuple[Launch, Request]:
        """The request of one dispatch with its launch planned here, before any work: the
        grid (from dim, the config, or inference) checked against the index types and the
        inputs; routing weighs the launch, the worker gets its grid."""
        program = _checked_program(program).check()
        bound = abi.bind_inputs(program, inputs)
        launch, sent, outputs = self._plans.plan(program, config, bound)
        meta = {"fp": program.fingerprint(), "program": program.to_wire(), "config": sent,
                "label": config.label}
        return launch, Request(  # type: ignore[return-value]
            Op.DISPATCH, meta, bound, deadline=Deadline.after(config.timeout),
            retries=config.retries, outputs=outputs)

    @_keywords_checked
    def dispatch(self, program: Program, inputs: Sequence[Any], backend: str | None = None,
                 config: DispatchConfig | None = None,
                 out: Sequence[np.ndarray] | None = None, *,
                 dim: int | Sequence[int] | None = None) -> Outputs:
        """Outputs of one dispatch, in ABI order, from the routed (or named) backend. With
        ``out`` (one writable, C-contiguous array per output, of its storage dtype and
        length), the outputs are written into those arrays, which are returned. ``dim``:
        the invocations per axis (``dim[i]`` is the extent of ``global_id(i)``), instead of
        the grid inferred from the outputs (docs/ir.md)."""
        config = _launch_config(config, dim)
        if config.tuned:
            config = self.tuned_config(program, inputs, backend, config)
        return self._dispatch(program, inputs, backend, config, out, sample=True)

    def _dispatch(self, program: Program, inputs: Sequence[Any], backend: str | None,
                  config: DispatchConfig, out: Sequence[np.ndarray] | None,
                  sample: bool) -> Outputs:
        launch, request = self._planned(program, inputs, config)
        if out is not None:
            _check_out(program, request.outputs, out)
            _writing_into(request, out, _read_write(program))
        shadow = self._shadow if sample else None
        bound = None if shadow is None else _unwritten(request.arrays, out)
        pool, _, (meta, arrays) = self.routing.call(
            launch, backend, lambda pool: request.renewed(), request.deadline)
        if out is not None:
            for target, array in zip(out, arrays, strict=True):
                np.copyto(target.reshape(-1), array, casting="no")
            arrays = list(out)  # the shared results go back to the pool now
        outputs = _outputs(meta, arrays)
        if bound is not None and not pool.registration.is_reference and shadow.rule.due():
            shadow.offer(Sample(program, [np.array(a, copy=True) for a in bound], config,
                                [np.array(a, copy=out is not None) for a in outputs],
                                pool.backend))
        return outputs

    def launch(self, kernel: KernelFunction, dim: int | Sequence[int], args: Sequence[Any],
               backend: str | None = None, config: DispatchConfig | None = None, *,
               shapes: Mapping[str, Sequence[int]] | None = None) -> Outputs:
        """Run a ``@vyre.kernel`` over ``dim`` invocations with ``args`` (one per
        parameter), as ``dispatch`` runs its program (routing, config, timeouts, errors),
        and fill the numpy arrays the kernel writes in place; returns them as ``Outputs``.
        Resident buffers among ``args`` run it in their worker, written in place there
        (``shapes`` gives a shaped one's extents): docs/kernels.md, "Launching"."""
        plan = _kernel_plan(kernel, dim, args, shapes, config)
        if isinstance(plan, ResidentLaunch):
            outputs = self.dispatch_sequence(plan.sequence, plan.inputs, plan.resident,
                                             backend, plan.config, out=plan.out)
        else:
            outputs = self.dispatch(plan.program, plan.inputs, backend, config,
                                    out=plan.out, dim=dim)
        plan.fill()
        return outputs

    def launch_async(self, kernel: KernelFunction, dim: int | Sequence[int],
                     args: Sequence[Any], backend: str | None = None,
                     config: DispatchConfig | None = None, *,
                     shapes: Mapping[str, Sequence[int]] | None = None) -> PendingResult:
        """``launch`` started at once: the caller's arrays are filled when ``result()``
        returns (as Warp's arrays are after a synchronize)."""
        plan = _kernel_plan(kernel, dim, args, shapes, config)
        if isinstance(plan, ResidentLaunch):
            request = _sequence_request(plan.sequence, plan.inputs, plan.resident,
                                        _sequence_config(plan.config))
            _check_out(plan.sequence, request.outputs, plan.out)
            _writing_into(request, plan.out, {})
            pool = self._resident_sequence_pool(plan.sequence, request, plan.resident,
                                                backend)
            return _LaunchResult(pool.submit(request), plan)
        pending = self._dispatch_async(plan.program, plan.inputs, backend,
                                       _launch_config(config, dim), plan.out)
        return _LaunchResult(pending._future, plan)

    @_keywords_checked
    def dispatch_on(self, backend: str, program: Program, inputs: Sequence[Any],
                    config: DispatchConfig | None = None, *,
                    dim: int | Sequence[int] | None = None) -> Outputs:
        """Send ``program`` straight to ``backend``'s worker, skipping routing's capability
        check: how a conformance kit sees that a backend itself refuses what it did not
        claim. Everything else (ABI binding, the launch planned, ``dim``, supervision,
        timeouts) is as ``dispatch``."""
        config = _untuned(_launch_config(config, dim), "dispatch_on")
        _, request = self._planned(program, inputs, config)
        return _outputs(*self.pools.open(backend).call(request))

    @_keywords_checked
    def dispatch_async(self, program: Program, inputs: Sequence[Any], backend: str | None = None,
                       config: DispatchConfig | None = None, *,
                       dim: int | Sequence[int] | None = None) -> PendingResult:
        """Start a dispatch and return at once; the handle has ``is_ready()``,
        ``result(timeout)`` and ``cancel()``. Routing, fall-over and refusals work as in
        ``dispatch``: when a pool must be started or probed first, that happens off the
        caller's thread. Errors in the program, inputs or launch are raised here, at once.
        ``dim`` as in ``dispatch``."""
        return self._dispatch_async(program, inputs, backend, _launch_config(config, dim),
                                    None)

    def _dispatch_async(self, program: Program, inputs: Sequence[Any], backend: str | None,
                        config: DispatchConfig, out: Sequence[np.ndarray] | None
                        ) -> PendingResult:
        """``dispatch_async``, its outputs written into ``out`` when given (a launch's)."""
        if config.tuned:
            config = self.tuned_config(program, inputs, backend, config)
        source, (program, request) = program, self._planned(program, inputs, config)
        if out is not None:  # (program: now the launch, what routing weighs)
            _check_out(source, request.outputs, out)
            _writing_into(request, out, _read_write(source))
        outcome = Outcome()
        running: list[Outcome] = []  # the outcome of the request that runs it now
        outcome.on_cancel = lambda: running and running[-1].cancel()
        caller = contextvars.copy_context()  # (its span is the parent of the call's spans)
        pool, _ = self.routing.decide(program, backend)
        if pool is None:
            self._in_background(outcome, running, program, backend, request, caller)
        else:
            first = self.routing.place(request.renewed(), program, backend, pool)
            running.append(first.future)
            pool.submit(first).add_done_callback(
                lambda done: self._async_done(done, outcome, running, program, backend,
                                              request, pool, first, caller))
        return PendingResult(outcome)

    def _async_done(self, done: Outcome, outcome: Outcome, running: list[Outcome],
                    program: Launch, backend: str | None, request: Request, pool: Pool,
                    ran: Request, caller: contextvars.Context) -> None:
        """Runs in the pool's I/O thread: pass the answer on (of ``ran``, the copy of
        ``request`` that ran), or hand the call to a background thread when routing must
        try again. (``outcome`` may be cancelled meanwhile: it then stays so.)"""
        if done.cancelled() or outcome.done():
            return
        exc = done.exception()
        with contextlib.suppress(InvalidStateError):
            if exc is not None and self.routing.again(exc, program, backend, pool, ran):
                self._in_background(outcome, running, program, backend, request, caller)
            elif exc is not None:
                outcome.set_exception(exc)
            else:
                outcome.set_result(done.result())

    def _in_background(self, outcome: Outcome, running: list[Outcome], program: Launch,
                       backend: str | None, request: Request,
                       caller: contextvars.Context) -> None:
        """Route and run the call on a background thread, in (a copy of) the caller's
        context; each request made for it goes into ``running`` (so a cancel reaches it)."""
        def made(pool: Pool) -> Request:
            renewed = request.renewed()
            running.append(renewed.future)
            if outcome.cancelled():
                renewed.future.cancel()
            return renewed

        def run() -> None:
            if outcome.done():
                return
            try:
                _, _, reply = self.routing.call(program, backend, made, request.deadline)
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

    def compile(self, program: Program, backend: str | None = None,
                config: DispatchConfig | None = None,
                timeout: float | None = None) -> CompiledPipeline:
        """Compile once in one worker; dispatch many times through the returned handle.
        ``timeout`` bounds the whole call (default: routing unbounded, the compile itself
        bounded by the backend's PoolOptions.compile_timeout)."""
        config = _untuned(_config(config), "compile (a choice is kept per input size)")
        source, program = program, effective_program(_checked_program(program), config)
        weighed = _weighed(source, config)  # (its launch, when its grid is known already)
        config = config.replace(workgroup_override=None, constants=())
        meta = {"program": program.to_wire(), "config": config.to_wire()}
        deadline = Deadline.after(timeout)

        def request(pool: Pool) -> Request:
            return Request(Op.COMPILE, meta, [],
                           deadline=deadline.within(pool.options.compile_timeout))

        pool, ran, (meta, _) = self.routing.call(weighed, backend, request, deadline)
        slot, generation = ran.served_by
        pipeline_id = meta["pipeline"]

        # the last launch's config and input shapes, its config as sent and output shapes
        last: list[Any] = [(None, None, None, None)]

        def run(inputs: Sequence[Any], cfg: DispatchConfig) -> Outputs:
            bound = abi.bind_inputs(program, inputs)
            shapes = [a.shape for a in bound]
            seen, seen_shapes, wire, outputs = last[0]  # (one read: threads share handles)
            if cfg is not seen or shapes != seen_shapes:  # (a repeated launch: checked once)
                _, sent = launch_of(program, cfg, bound)  # (checked here, as dispatch)
                wire, outputs = sent.to_wire(), abi.output_shapes(program, bound)
                last[0] = (cfg, shapes, wire, outputs)
            reply, arrays = pool.call(Request(
                Op.PIPELINE_DISPATCH, {"pipeline": pipeline_id, "config": wire,
                                       "label": cfg.label},
                bound, deadline=Deadline.after(cfg.timeout), slot=slot,
                generation=generation, outputs=outputs))
            return _outputs(reply, arrays)

        took = meta.get("compile_ns")
        return _keeping(self, CompiledPipeline(
            program, config, pool.backend, meta["key"], generation, run,
            lambda g: pool.holds(slot, g), took / 1e9 if isinstance(took, int) else None,
            source=source))

    # -- tuning ----------------------------------------------------------------------------

    def tune(self, program: Program, inputs: Sequence[Any], backend: str | None = None, *,
             config: DispatchConfig | None = None,
             workgroups: Sequence[Sequence[int]] | None = None,
             constants: Mapping[str, Sequence[Any]] | None = None,
             repeats: int = DEFAULT_REPEATS, limit: int = DEFAULT_LIMIT,
             refresh: bool = False,
             on_measured: Callable[[Measured], None] | None = None) -> TuneResult:
        """Try workgroup sizes and specialization values (``vyre_core.tuning.candidates``)
        on the routed (or named) backend with these inputs, each best of ``repeats`` timed
        runs in its worker; keep the fastest whose output bytes equal those of ``config``
        as given (what it fixes, constants or a workgroup override, stays fixed unless
        ``workgroups``/``constants`` name it), in the tuning cache. A cached choice for
        this program, config, backend and version, device and input sizes is returned
        without measuring, unless ``refresh`` or it is not among the candidates asked
        for. ``on_measured`` sees each candidate as it is measured."""
        config = _config(config).replace(tuned=False)
        _checked_program(program).check()
        return self._tuner.tune(program, inputs, backend, config=config,
                                workgroups=workgroups, constants=constants, repeats=repeats,
                                limit=limit, refresh=refresh, on_measured=on_measured)

    def tuned_config(self, program: Program, inputs: Sequence[Any], backend: str | None = None,
                     config: DispatchConfig | None = None) -> DispatchConfig:
        """``config`` with the workgroup and constants tuning chose for this program, this
        config, backend, device and input sizes (``Driver.tune``); ``config`` as it is
        when none was chosen. What a dispatch with ``DispatchConfig(tuned=True)`` runs
        with. Routing, probing and reading the cache happen here, on the caller's thread,
        within ``config.timeout``."""
        config = _config(config).replace(tuned=False)
        return self._tuner.tuned_config(_checked_program(program), inputs, backend, config)

    # -- resident buffers ------------------------------------------------------------------

    def allocate_resident(self, byte_len: int, backend: str | None = None,
                          timeout: float | None = None,
                          near: ResidentBuffer | None = None) -> ResidentBuffer:
        """Device memory of ``byte_len`` bytes in a worker of ``backend``, or in the worker
        that holds ``near`` (buffers a sequence uses together must share a worker).
        ``timeout``: seconds for the whole call, default None."""
        if isinstance(byte_len, bool) or not isinstance(byte_len, int | np.integer) \
                or not 0 <= byte_len < 2**62:
            raise InvalidInputError(f"byte_len={byte_len!r} is not a byte count",
                                    "Pass an int from 0 to 2**62.")
        if near is not None:
            if not isinstance(near, ResidentBuffer):
                raise InvalidInputError(f"near= is a {type(near).__name__}, not a "
                                        "ResidentBuffer", "Pass a buffer of allocate_resident.")
            if backend not in (None, near.pool.backend):
                raise InvalidInputError(f"backend={backend!r}, but near= lives in "
                                        f"{near.pool.backend!r}", "Leave backend out.")
            meta, _ = near._call(Op.ALLOCATE, {"byte_len": int(byte_len)}, (), timeout)
            return _keeping(self, ResidentBuffer(near.pool, near.slot, near.generation,
                                                 meta["handle"], int(byte_len)))
        if backend is None:
            raise InvalidInputError("allocate_resident needs backend= or near=",
                                    "Name the backend, e.g. backend='wgpu'.")
        pool = self.pools.open(backend)
        request = Request(Op.ALLOCATE, {"byte_len": int(byte_len)}, [],
                          deadline=Deadline.after(timeout))
        meta, _ = pool.call(request)
        slot, generation = request.served_by
        return _keeping(self, ResidentBuffer(pool, slot, generation, meta["handle"],
                                             int(byte_len)))

    def dispatch_resident(self, program: Program, buffers: Sequence[ResidentBuffer],
                          config: DispatchConfig | None = None) -> Timing:
        """Dispatch on resident buffers (one per non-workgroup buffer, declaration order);
        outputs are written into their buffers. All must live in the same worker."""
        config = _untuned(_config(config), "dispatch_resident")
        one_worker(buffers, [f"buffers[{i}]" for i in range(len(buffers))])
        first, deadline = buffers[0], Deadline.after(config.timeout)
        self._check_device(effective_program(_checked_program(program), config), first,
                           deadline)
        meta, _ = first._call(Op.DISPATCH_RESIDENT, {
            "fp": program.check().fingerprint(), "program": program.to_wire(),
            "config": config.to_wire(),
            "handles": [b.handle for b in buffers], "label": config.label},
            deadline=deadline)
        return Timing(meta["wall_ns"], meta.get("device_ns"), config.label)

    def _check_device(self, work: Program | StepSequence, buffer: ResidentBuffer,
                      deadline: Deadline) -> None:
        """Refuse work for resident buffers whose device cannot run it (a pool with one
        worker set per device: capabilities differ per device)."""
        pool = buffer.pool
        if not pool.pinned:
            return
        device = pool.device_of(buffer.slot)
        devices = self.routing.route(work, pool.backend, deadline).devices
        if devices is not None and device not in devices:
            raise NoCapableBackendError(
                f"the resident buffers live on device {device} of {pool.backend!r}, which "
                f"cannot run {type(work).__name__.lower()} {work.fingerprint()[:12]} (its "
                f"devices that can: {', '.join(map(str, devices))})",
                "Allocate the buffers with allocate_resident(near=...) next to a buffer on a "
                "capable device, or run the work without resident buffers.",
                rejections={pool.backend: [f"device {device} cannot run it"]})

    # -- sequences -------------------------------------------------------------------------

    def dispatch_sequence(self, sequence: StepSequence, inputs: Sequence[Any] = (),
                          resident: Mapping[str, ResidentBuffer] | None = None,
                          backend: str | None = None,
                          config: DispatchConfig | None = None,
                          out: Sequence[np.ndarray] | None = None) -> Outputs:
        """Run every step of ``sequence`` in one request to one worker, and return its
        ``returns`` in order (``outputs.loops`` says how each loop ran). ``inputs``: one
        per input buffer, in declaration order (never written: an input a step updates
        comes back as a return); ``resident``: a ResidentBuffer per resident buffer, all
        of one worker, which then runs the sequence. With ``out`` (one array per return,
        as ``dispatch`` takes them) the returns are written there, which may be the
        caller's inputs. Routing takes the sequence as a whole: every step must run on
        the backend it picks."""
        config = _sequence_config(config)
        if config.fuse:
            sequence = _checked_sequence(sequence).fused()
        request = _sequence_request(sequence, inputs, resident, config)
        if out is not None:
            _check_out(sequence, request.outputs, out)
            _writing_into(request, out, {})
        return _sequence_into(self._run_sequence(sequence, request, resident, backend), out)

    def dispatch_sequence_on(self, backend: str, sequence: StepSequence,
                             inputs: Sequence[Any] = (),
                             config: DispatchConfig | None = None) -> Outputs:
        """``dispatch_on`` for a sequence: straight to ``backend``'s worker, skipping
        routing's capability check, so a conformance kit sees the backend itself refuse a
        step it did not claim. Everything else is as ``dispatch_sequence``."""
        config = _sequence_config(config)
        if config.fuse:
            sequence = _checked_sequence(sequence).fused()
        request = _sequence_request(sequence, inputs, None, config)
        return _sequence_outputs(*self.pools.open(backend).call(request))

    def _run_sequence(self, sequence: StepSequence, request: Request,
                      resident: Mapping[str, ResidentBuffer] | None,
                      backend: str | None) -> Outputs:
        if request.slot is not None:  # resident buffers: their worker runs it
            pool = self._resident_sequence_pool(sequence, request, resident, backend)
            return _sequence_outputs(*pool.call(request))
        _, _, reply = self.routing.call(sequence, backend, lambda pool: request.renewed(),
                                        request.deadline)
        return _sequence_outputs(*reply)

    def _resident_sequence_pool(self, sequence: StepSequence, request: Request,
                                resident: Mapping[str, ResidentBuffer],
                                backend: str | None) -> Pool:
        """The pool whose worker holds ``resident`` and runs ``sequence`` (``request``
        is pinned to it), once it is seen able to."""
        pool = _resident_pool(resident)
        if backend not in (None, pool.backend):
            raise InvalidSequenceError(
                f"backend={backend!r}, but the resident buffers live in "
                f"{pool.backend!r}", "Leave backend out, or allocate the buffers there.")
        # (capable, or every reason why not)
        self.routing.route(sequence, pool.backend, request.deadline)
        self._check_device(sequence, next(iter(resident.values())), request.deadline)
        return pool

    def compile_sequence(self, sequence: StepSequence, backend: str | None = None,
                         config: DispatchConfig | None = None,
                         timeout: float | None = None) -> CompiledSequence:
        """Check ``sequence`` against the routed (or named) backend and compile its programs
        in one worker; the handle runs it there until that worker restarts."""
        config = _sequence_config(config)
        _checked_sequence(sequence)
        if config.fuse:
            sequence = sequence.fused()
        meta = {"fp": sequence.fingerprint(), "program": sequence.to_wire(),
                "config": config.to_wire()}
        deadline = Deadline.after(timeout)

        def request(pool: Pool) -> Request:
            return Request(Op.COMPILE_SEQUENCE, meta, [],
                           deadline=deadline.within(pool.options.compile_timeout))

        pool, ran, _ = self.routing.call(sequence, backend, request, deadline)
        slot, generation = ran.served_by

        def run(inputs: Sequence[Any], resident: Mapping[str, ResidentBuffer],
                cfg: DispatchConfig, out: Sequence[np.ndarray] | None) -> Outputs:
            cfg = _sequence_config(cfg)
            req = _sequence_request(sequence, inputs, resident, cfg)
            if out is not None:
                _check_out(sequence, req.outputs, out)
                _writing_into(req, out, {})
            if req.slot is not None:
                one_worker(list(resident.values()), list(resident), (pool, slot, generation))
            req.slot, req.generation = slot, generation
            return _sequence_into(_sequence_outputs(*pool.call(req)), out)

        return _keeping(self, CompiledSequence(sequence, config, pool.backend, generation,
                                               run, lambda g: pool.holds(slot, g)))

    # -- arrays in shared memory ----------------------------------------------------------

    def empty(self, shape: int | Sequence[int], dtype: Any = np.float64) -> np.ndarray:
        """A writable numpy array in shared memory (zero-filled, as ``np.zeros``): passed to
        a dispatch, launch or sequence of any open Driver of this process, it crosses
        without a copy (its descriptor travels), and as an output (``out=``, a launch's
        written argument) it is written in place by the worker. Under 64 KiB, or without
        shared memory, it is an ordinary array. Its lifetime rules: docs/operations.md,
        "Arrays in shared memory". Such an array keeps its driver, as a pipeline does."""
        return self._owned.arrays.empty(shape, dtype, self)

    def zeros(self, shape: int | Sequence[int], dtype: Any = np.float64) -> np.ndarray:
        """``empty``: its memory is always zero-filled when made."""
        return self._owned.arrays.empty(shape, dtype, self)

    def asarray(self, data: Any, dtype: Any = None) -> np.ndarray:
        """``data`` in shared memory (``empty``): itself when it already is an open one
        of this ``dtype``, else a copy."""
        return self._owned.arrays.asarray(data, dtype, self)

    # -- lifecycle -------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """Every registered backend's pool: workers with pid, generation, state, restarts,
        in-flight requests and their last outputs; messages dropped or rejected; plus
        plugins that failed to load."""
        pools = {pool.backend: pool for pool in self.pools.all()}
        return {
            "closed": self.pools.closed,
            "pools": {reg.id: (pools[reg.id].status() if reg.id in pools
                               else {"backend": reg.id, "state": "not started", "workers": []})
                      for reg in self.registry.backends()},
            "broken_plugins": [{"name": b.name, "error": b.error} for b in self.registry.broken],
        }

    def metrics(self) -> dict[str, Any]:
        """What each started pool counted since the driver started it: calls by operation
        and outcome, latency histograms, bytes in and out, worker restarts by reason, the
        program and pipeline caches, with calls queued and in flight now. The fields are
        listed in docs/operations.md; ``vyre_core.observability.prometheus`` exports them.
        ``driver`` names this driver as ``vyre top`` and Prometheus do: its run directory."""
        rundir = self.pools.rundir
        return {"driver": rundir.path.name if rundir is not None else str(os.getpid()),
                "pools": {pool.backend: pool.metrics() for pool in self.pools.all()}}

    def close(self, timeout: float | None = None) -> None:
        """Fail pending calls, stop every worker (SIGTERM, SIGKILL after the kill grace)
        and remove the run directory. Idempotent, and safe against Ctrl-C: interrupted, it
        still kills every worker it started and removes the run directory. ``timeout``
        bounds the wait for each pool (default: its kill grace plus 5 s). A driver
        garbage-collected without it is closed in the background, with a ResourceWarning
        naming the line that made it (``lifetime.py``); one alive at exit is closed then."""
        if os.getpid() != self._owner_pid:
            return  # forked without Python's fork hooks: nothing here is this process's
        timeout = checked_seconds(timeout, "close timeout", zero=True)
        self._dropped.detach()  # (closed by its user: no warning when collected)
        try:
            self._owned.close(timeout)
        finally:
            with self._lock:
                executor = self._executor
            if executor is not None and self.pools.closed:  # queued routing fails fast now
                executor.shutdown(wait=False)


def _after_fork_in_child() -> None:
    for driver in list(_DRIVERS):
        driver._forked()


def _on_uncaught_exit() -> None:
    """Runs when the main thread ends, before Python waits for other threads. After an
    uncaught exception (Ctrl-C, say), close every driver now: other threads' dispatches
    fail at once instead of keeping the interpreter alive."""
    if getattr(sys, "last_value", None) is None:
        return
    for driver in list(_DRIVERS):
        with contextlib.suppress(Exception):
            driver.close(timeout=1.0)


os.register_at_fork(after_in_child=_after_fork_in_child)
with contextlib.suppress(AttributeError, RuntimeError):  # private since Python 3.9
    threading._register_atexit(_on_uncaught_exit)
