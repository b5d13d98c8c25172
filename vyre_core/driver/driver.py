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

import contextlib
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from vyre_core import lifetime
from vyre_core.cluster import connect
from vyre_core.config import DispatchConfig
from vyre_core.contract.types import Capabilities, DeviceInfo, Outputs
from vyre_core.deadline import Deadline
from vyre_core.driver.call_forms import (
    alias,
    explain_timeout_second,
    launch_dim_first,
    route_backend_second,
    verb,
)
from vyre_core.driver.calls import (
    _checked_program,
    _config,
    _dispatch_resident,
    _dispatched,
    _dispatched_sequence,
    _kernel_plan,
    _launch_config,
    _no_dim,
    _program_config,
    _weighed,
    dispatched_on,
)
from vyre_core.driver.compiled import compiled_pipeline, compiled_sequence
from vyre_core.driver.owned import (
    _DRIVERS,
    _after_fork_in_child,
    _close,
    _Closing,
    _keeping,
    _metrics,
    _on_uncaught_exit,
    _shadow_options,
    _SharedArrays,
    _started,
    _status,
    _watch,
)
from vyre_core.driver.pending import PendingResult
from vyre_core.driver.resident import ResidentBuffer, ResidentLaunch, allocate
from vyre_core.ir import Program
from vyre_core.kernels.kernel import KernelFunction
from vyre_core.launch import PlannedLaunches
from vyre_core.pipeline import CompiledPipeline, CompiledSequence
from vyre_core.registry import BackendRegistration, Registry
from vyre_core.routing import Explanations, RouteDecision
from vyre_core.sequence import Sequence as StepSequence
from vyre_core.shadow_sampler import ShadowOptions
from vyre_core.supervisor.options import PoolOptions
from vyre_core.supervisor.rundir import RunDir
from vyre_core.tuning.candidates import DEFAULT_LIMIT
from vyre_core.tuning.tuner import DEFAULT_REPEATS, Measured, TuneResult


class Driver(_Closing, _SharedArrays):
    """Routes programs to backends and runs them in supervised worker processes.

    ``options`` (or keyword fields of PoolOptions, e.g. ``workers=2`` or
    ``timeouts=Timeouts(startup=10.0)``) apply to every backend's pool; ``backend_options``
    overrides them per backend id. ``cluster`` (else ``VYRE_CLUSTER``) says where workers
    run: ``"local"`` processes (the default), or Ray actors: ``"ray"`` (a private Ray
    instance), ``"auto"`` (the cluster running here), ``"HOST:PORT"`` /
    ``"ray://HOST:PORT"`` (cluster/connect.py). ``shadow=ShadowOptions(every=N)`` runs 1
    in N dispatches that another backend served again on the reference, in the
    background, and saves each divergence as a replay bundle in its ``dir``
    (``shadow_sampler.py``; ``shadow_report()`` counts them). ``shadow_every=`` and
    ``shadow_dir=`` are its deprecated spellings.
    """

    def __init__(self, registry: Registry | None = None, *, options: PoolOptions | None = None,
                 backend_options: Mapping[str, PoolOptions] | None = None,
                 shadow: ShadowOptions | None = None, shadow_every: int | None = None,
                 shadow_dir: str | os.PathLike | None = None, cluster: str | None = None,
                 **option_fields: Any) -> None:
        where = lifetime.made_at()
        if registry is None:
            registry = Registry.discover()
            registry.check_selection()  # (a registry passed in is the caller's: vyre doctor)
        self.registry = registry
        self.options = options or PoolOptions(**option_fields)
        self._backend_options = dict(backend_options or {})
        spec = connect.parse(cluster)  # (checked before anything is made)
        self._plans = PlannedLaunches()
        _started(self, spec, RunDir, _shadow_options(shadow, shadow_every, shadow_dir))
        self._made_at = where
        _watch(self)
        _DRIVERS.add(self)

    def shadow_report(self) -> dict[str, Any] | None:
        """What the production shadow did (None without a shadow): samples taken,
        compared, diverged, dropped (the reference fell behind), failed, and the bundles."""
        return None if self._shadow is None else self._shadow.report()

    def backends(self) -> list[BackendRegistration]:
        """Registered backends in precedence order."""
        return self.registry.backends()

    @verb(old_form=route_backend_second, timeout_in_config=True)
    def route(self, work: Program | StepSequence, inputs: Sequence[Any] | None = None, *,
              backend: str | None = None, config: DispatchConfig | None = None,
              dim: int | Sequence[int] | None = None) -> RouteDecision:
        """The backend ``dispatch`` would use (with ``config``: its constants and workgroup
        override weigh, and the launch: its grid from ``dim``, the config, or inference
        over ``inputs`` or the declared sizes, and the buffer sizes). Backends judged on
        static claims are probed first, as ``dispatch`` does: apart, when routing may pass
        them over; the chosen one by starting its pool."""
        config = _launch_config(config, dim)
        return self.routing.route(_weighed(work, config, inputs), backend,
                                  Deadline.after(config.timeout))

    @verb(old_form=explain_timeout_second, timeout_in_config=True)
    def explain(self, work: Program | StepSequence, inputs: Sequence[Any] | None = None, *,
                config: DispatchConfig | None = None,
                dim: int | Sequence[int] | None = None) -> Explanations:
        """Every backend, accepted or why not, as ``dispatch`` would see them (the winner
        probed first; the launch weighed as ``route`` weighs it), also when none can run
        it; ``print`` it for the text."""
        config = _launch_config(config, dim)
        return self.routing.explain(_weighed(work, config, inputs),
                                    Deadline.after(config.timeout))

    @verb("timeout")
    def probe(self, backend: str, *, timeout: float | None = None) -> Capabilities:
        """What ``backend``'s worker probed on its device, starting its pool if needed.
        Raises PoolFailedError (with the worker's traceback) when it cannot start, and
        DispatchTimeoutError past ``timeout`` (default None: wait while workers start, up
        to the pool's Timeouts.startup per try)."""
        return self.pools.probe(backend, Deadline.after(timeout))

    @verb("timeout")
    def devices(self, backend: str, *, timeout: float | None = None) -> list[DeviceInfo]:
        """The devices ``backend`` lists (``PoolOptions(devices=...)`` names them by id), as
        its worker reported them: probed first, as ``probe`` does."""
        self.probe(backend, timeout=timeout)
        return self.pools.open(backend).devices

    @verb("backend", "config", "out")
    def dispatch(self, work: Program | StepSequence, inputs: Sequence[Any] = (), *,
                 backend: str | None = None, config: DispatchConfig | None = None,
                 out: Sequence[np.ndarray] | None = None, dim: int | Sequence[int] | None = None,
                 resident: Mapping[str, ResidentBuffer] | None = None) -> Outputs:
        """Outputs of one dispatch, in ABI order, from the routed (or named) backend.
        ``work``: a program, or a sequence (every step in one request to one worker; its
        ``returns`` in order, ``outputs.loops`` says how each loop ran; ``resident``: a
        ResidentBuffer per resident buffer, all of one worker, which then runs it). With
        ``out`` (one writable, C-contiguous array per output, of its storage dtype and
        length) the outputs are written there and returned. ``dim``: the invocations per
        axis (``dim[i]`` is the extent of ``global_id(i)``), instead of the grid inferred
        from the outputs (docs/ir.md)."""
        if isinstance(work, StepSequence):
            return _dispatched_sequence(self.routing, work, inputs, resident, backend,
                                        _no_dim(config, dim), out)
        config = _program_config(config, dim, resident)
        if config.tuned:
            config = self.tuned_config(work, inputs, backend=backend, config=config)
        return _dispatched(self.routing, self._plans, work, inputs, backend, config, out,
                           self._shadow)

    @verb("backend", "config", old_form=launch_dim_first)
    def launch(self, kernel: KernelFunction, args: Sequence[Any], *, dim: int | Sequence[int],
               backend: str | None = None, config: DispatchConfig | None = None,
               shapes: Mapping[str, Sequence[int]] | None = None) -> Outputs:
        """Run a ``@vyre.kernel`` over ``dim`` invocations with ``args`` (one per
        parameter), as ``dispatch`` runs its program (routing, config, timeouts, errors),
        and fill the numpy arrays the kernel writes in place; returns them as ``Outputs``.
        Resident buffers among ``args`` run it in their worker, written in place there
        (``shapes`` gives a shaped one's extents): docs/kernels.md, "Launching"."""
        plan = _kernel_plan(kernel, dim, args, shapes, config)
        if isinstance(plan, ResidentLaunch):
            outputs = self.dispatch(plan.sequence, plan.inputs, resident=plan.resident,
                                    backend=backend, config=plan.config, out=plan.out)
        else:
            outputs = self.dispatch(plan.program, plan.inputs, backend=backend, config=config,
                                    out=plan.out, dim=dim)
        plan.fill()
        return outputs

    @verb("backend", "config", old_form=launch_dim_first)
    def launch_async(self, kernel: KernelFunction, args: Sequence[Any], *,
                     dim: int | Sequence[int], backend: str | None = None,
                     config: DispatchConfig | None = None,
                     shapes: Mapping[str, Sequence[int]] | None = None) -> PendingResult:
        """``launch`` started at once: the caller's arrays are filled when ``result()``
        returns (as Warp's arrays are after a synchronize)."""
        return self._background.launch_async(self.routing, self._plans, self.tuned_config,
                                             kernel, dim, args, backend, config, shapes)

    @verb()
    def dispatch_on(self, backend: str, program: Program, inputs: Sequence[Any],
                    config: DispatchConfig | None = None, *,
                    dim: int | Sequence[int] | None = None) -> Outputs:
        """Deprecated (until 1.0.0): ``vyre_core.testing.dispatch_on(driver, backend,
        program, inputs, config=..., dim=...)``."""
        return dispatched_on(self, backend, program, inputs, config, dim,
                             "Driver.dispatch_on")

    @verb("backend", "config")
    def dispatch_async(self, work: Program | StepSequence, inputs: Sequence[Any] = (), *,
                       backend: str | None = None, config: DispatchConfig | None = None,
                       out: Sequence[np.ndarray] | None = None,
                       dim: int | Sequence[int] | None = None,
                       resident: Mapping[str, ResidentBuffer] | None = None) -> PendingResult:
        """``dispatch`` started at once (``out`` filled when ``result()`` first returns);
        the handle has ``is_ready()``, ``result(timeout)``, ``cancel()``, is awaitable. A
        pool to start or probe is started off the caller's thread; bad work or arguments
        are refused here."""
        return self._background.dispatch_async(self.routing, self._plans, self.tuned_config,
                                               work, inputs, backend, config, dim, out, resident)

    @verb("backend", "config", timeout_in_config=True)
    def compile(self, work: Program | StepSequence, *, backend: str | None = None,
                config: DispatchConfig | None = None) -> CompiledPipeline | CompiledSequence:
        """Compile a program (or a sequence's programs) once in one worker of the routed
        (or named) backend, to run there through the handle until that worker restarts;
        ``config.timeout`` bounds the call (each compile also Timeouts.compile)."""
        made = compiled_sequence if isinstance(work, StepSequence) else compiled_pipeline
        return _keeping(self, made(self.routing, work, backend, config))

    @verb("backend")
    def tune(self, program: Program, inputs: Sequence[Any], *, backend: str | None = None,
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

    @verb("backend", "config")
    def tuned_config(self, program: Program, inputs: Sequence[Any], *,
                     backend: str | None = None,
                     config: DispatchConfig | None = None) -> DispatchConfig:
        """``config`` with the workgroup and constants tuning chose for this program, this
        config, backend, device and input sizes (``Driver.tune``); ``config`` as it is
        when none was chosen. What a dispatch with ``DispatchConfig(tuned=True)`` runs
        with. Routing, probing and reading the cache happen here, on the caller's thread,
        within ``config.timeout``."""
        config = _config(config).replace(tuned=False)
        return self._tuner.tuned_config(_checked_program(program), inputs, backend, config)

    @verb("backend", "timeout", "near")
    def allocate_resident(self, byte_len: int, *, backend: str | None = None,
                          timeout: float | None = None,
                          near: ResidentBuffer | None = None) -> ResidentBuffer:
        """Device memory of ``byte_len`` bytes in a worker of ``backend``, or in the worker
        that holds ``near`` (buffers a sequence uses together must share a worker).
        ``timeout``: seconds for the whole call, default None."""
        return _keeping(self, allocate(self.pools, byte_len, backend, timeout, near))

    @verb("config")
    def dispatch_resident(self, work: Program, buffers: Sequence[ResidentBuffer], *,
                          config: DispatchConfig | None = None) -> Outputs:
        """Dispatch on resident buffers (one per non-workgroup buffer, declaration order):
        outputs are written into their buffers, all of one worker; the ``Outputs`` hold no
        arrays, and ``timing`` says how long it ran."""
        return _dispatch_resident(self.routing, work, buffers, config)

    dispatch_sequence = alias("dispatch_sequence", dispatch, 2,
                              ("resident", "backend", "config", "out"))
    compile_sequence = alias("compile_sequence", compile, 1, ("backend", "config", "timeout"))

    def dispatch_sequence_on(self, backend: str, sequence: StepSequence,
                             inputs: Sequence[Any] = (), config: Any = None) -> Outputs:
        """Deprecated (until 1.0.0): ``vyre_core.testing.dispatch_on``, which takes a
        sequence too."""
        return dispatched_on(self, backend, sequence, inputs, config, None,
                             "Driver.dispatch_sequence_on")

    def status(self) -> dict[str, Any]:
        """Every registered backend's pool: workers with pid, generation, state, restarts,
        in-flight requests and their last outputs; messages dropped or rejected; plus
        plugins that failed to load."""
        return _status(self.pools, self.registry)

    def metrics(self) -> dict[str, Any]:
        """What each started pool counted since the driver started it: calls by operation
        and outcome, latency histograms, bytes in and out, worker restarts by reason, the
        program and pipeline caches, with calls queued and in flight now. The fields are
        listed in docs/operations.md; ``vyre_core.observability.prometheus`` exports them.
        ``driver`` names this driver as ``vyre top`` and Prometheus do: its run directory."""
        return _metrics(self.pools)

    @verb("timeout")
    def close(self, *, timeout: float | None = None) -> None:
        """Fail pending calls, stop every worker (SIGTERM, SIGKILL after the kill grace)
        and remove the run directory. Idempotent, and safe against Ctrl-C: interrupted, it
        still kills every worker it started and removes the run directory. ``timeout``
        bounds the wait for each pool (default: its kill grace plus 5 s). A driver
        garbage-collected without it is closed in the background, with a ResourceWarning
        naming the line that made it (``lifetime.py``); one alive at exit is closed then."""
        _close(self, timeout)


os.register_at_fork(after_in_child=_after_fork_in_child)
with contextlib.suppress(AttributeError, RuntimeError):  # private since Python 3.9
    threading._register_atexit(_on_uncaught_exit)
