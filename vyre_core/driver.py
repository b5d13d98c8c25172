"""``Driver``: the one object callers use. It routes each program to a backend, runs it in
that backend's supervised worker pool, and hands back outputs, compiled pipelines and
resident buffers. Pools start lazily; nothing runs until the first dispatch.

Outputs are read-only numpy arrays over the received message (no copy); copy one to
modify it. Thread-safe: any number of threads may dispatch at once.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from vyre_core import abi
from vyre_core.config import DispatchConfig
from vyre_core.contract.types import Capabilities, Outputs, Timing
from vyre_core.errors import (
    DispatchTimeoutError,
    InvalidInputError,
    NoCapableBackendError,
    PipelineInvalidatedError,
    PoolFailedError,
    UnsupportedFeatureError,
)
from vyre_core.ir import Program
from vyre_core.launch import effective_program
from vyre_core.pipeline import CompiledPipeline
from vyre_core.protocol import Op
from vyre_core.registry import BackendRegistration, Registry
from vyre_core.routing import Explanation, RouteDecision, Router
from vyre_core.supervisor.pool import Pool, PoolOptions, Request
from vyre_core.supervisor.rundir import RunDir


def _outputs(meta: dict[str, Any], arrays: list[Any]) -> Outputs:
    out = Outputs(arrays)
    if "wall_ns" in meta:
        out.timing = Timing(meta["wall_ns"], meta.get("device_ns"), meta.get("label"))
    return out


class PendingResult:
    """A dispatch in flight: ``is_ready()`` and ``result(timeout)``."""

    def __init__(self, future: Future) -> None:
        self._future = future

    def is_ready(self) -> bool:
        return self._future.done()

    def result(self, timeout: float | None = None) -> Outputs:
        try:
            meta, arrays = self._future.result(timeout)
        except FutureTimeout:
            raise DispatchTimeoutError(
                f"the dispatch did not finish within result(timeout={timeout})",
                "Wait longer; the dispatch keeps running (its own deadline is "
                "DispatchConfig.timeout).") from None
        return _outputs(meta, arrays)


class ResidentBuffer:
    """Device memory that stays in one worker between dispatches. It belongs to the
    worker generation that allocated it: after that worker restarts, using it raises
    PipelineInvalidatedError."""

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
        return self.pool.generation_of(self.slot) == self.generation

    def _call(self, op: Op, meta: dict[str, Any], arrays: list[Any] = (),
              timeout: float | None = None) -> tuple[dict[str, Any], list[Any]]:
        if not self.valid:
            raise PipelineInvalidatedError(
                f"resident buffer {self.handle} of {self.pool.backend!r} lived in worker "
                f"generation {self.generation}, which has since restarted",
                "Allocate the buffer again and upload its data.",
                generation=self.generation, backend=self.pool.backend)
        return self.pool.call(Request(op, meta, list(arrays), timeout=timeout, slot=self.slot,
                                      generation=self.generation))

    def upload(self, data: Any) -> None:
        self._call(Op.UPLOAD, {"handle": self.handle}, [data])

    def download(self) -> bytes:
        return self._call(Op.DOWNLOAD, {"handle": self.handle})[1][0].tobytes()

    def free(self) -> None:
        if self.valid:
            self._call(Op.FREE, {"handle": self.handle})


class Driver:
    """Routes programs to backends and runs them in supervised worker processes.

    ``options`` (or keyword fields of PoolOptions, e.g. ``workers=2``) apply to every
    backend's pool; ``backend_options`` overrides them per backend id.
    """

    def __init__(self, registry: Registry | None = None, *, options: PoolOptions | None = None,
                 backend_options: Mapping[str, PoolOptions] | None = None,
                 **option_fields: Any) -> None:
        self.registry = registry if registry is not None else Registry.discover()
        self.options = options or PoolOptions(**option_fields)
        self._backend_options = dict(backend_options or {})
        self._pools: dict[str, Pool] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._owner_pid = os.getpid()  # a forked child inherits this object, not the workers
        # program fingerprint -> {backend: its refusal}: routing passes over these
        self._refusals: dict[str, dict[str, str]] = {}
        self._rundir = RunDir()
        self.router = Router(self._candidates, self._skip)
        atexit.register(self.close)

    def __enter__(self) -> Driver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- routing ---------------------------------------------------------------------------

    def backends(self) -> list[BackendRegistration]:
        """Registered backends in precedence order."""
        return self.registry.backends()

    def _candidates(self) -> list[tuple[BackendRegistration, Capabilities]]:
        pairs = []
        for reg in self.registry.backends():
            pool = self._pools.get(reg.id)
            probed = pool.capabilities if pool is not None else None
            pairs.append((reg, probed or reg.claims))
        return pairs

    def _skip(self, backend: str, fingerprint: str) -> str | None:
        pool = self._pools.get(backend)
        if pool is not None and pool.failure is not None:
            return f"its worker pool failed ({pool.failure.cause.splitlines()[0]})"
        refusal = self._refusals.get(fingerprint, {}).get(backend)
        return None if refusal is None else f"it refused this program at compile: {refusal}"

    def route(self, program: Program, backend: str | None = None) -> RouteDecision:
        """The backend ``dispatch`` would use. A backend chosen on static claims is started
        and probed first, exactly as ``dispatch`` does."""
        self._routed_pool(program.check(), backend)
        return self.router.route(program, backend)

    def explain(self, program: Program) -> list[Explanation]:
        """Every backend, accepted or why not, as ``dispatch`` would see them (the winner
        probed first), also when none can run it."""
        with contextlib.suppress(NoCapableBackendError):
            self._routed_pool(program.check(), None)
        return self.router.explain(program)

    def probe(self, backend: str) -> Capabilities:
        """What ``backend``'s worker probed on its device, starting its pool if needed.
        Raises PoolFailedError (with the worker's traceback) when it cannot start."""
        pool = self._pool(backend)
        if pool.capabilities is None:
            pool.call(Request(Op.PING, {}, []))
        assert pool.capabilities is not None  # set by the worker's hello
        return pool.capabilities

    def _pool(self, backend: str) -> Pool:
        with self._lock:
            if self._closed:
                raise PoolFailedError("the driver is closed", "Create a new vyre Driver.")
            pool = self._pools.get(backend)
            if pool is None:
                pool = self._pools[backend] = Pool(self.registry.get(backend), self._rundir,
                                                   f"p{len(self._pools)}",
                                                   self._options_for(backend),
                                                   self.router.invalidate)
            return pool

    def _options_for(self, backend: str) -> PoolOptions:
        return self._backend_options.get(backend, self.options)

    def _routed_call(self, program: Program, backend: str | None,
                     make_request: Callable[[Pool], Request],
                     ) -> tuple[Pool, Request, tuple[dict[str, Any], list[Any]]]:
        """Run a request (built for the pool that serves it) on the routed backend. A pool
        that fails makes routing fall over to the next capable backend, unless the backend
        was named. Returns the pool, the request that ran, and its reply."""
        while True:
            pool = None
            try:
                pool = self._routed_pool(program, backend)
                request = make_request(pool)
                return pool, request, pool.call(request)
            except PoolFailedError as exc:
                failed = self._pools.get(exc.details.get("backend", ""))
                if backend is not None or failed is None or failed.failure is None:
                    raise
            except UnsupportedFeatureError as exc:
                # The backend refused this program (e.g. an op it cannot lower for one
                # dtype): a routing rejection found late. Remember it and route again.
                if backend is not None or pool is None:
                    raise
                with self._lock:
                    self._refusals.setdefault(program.fingerprint(), {})[pool.backend] = \
                        exc.cause.splitlines()[0]

    def _routed_pool(self, program: Program, backend: str | None) -> Pool:
        """The pool to run ``program`` on. Backends never started are judged on their static
        claims, a floor: the chosen one, and any ranked ahead of it that the claims reject,
        are started and probed first, and routing decides again on what their workers found
        (a software adapter, say, is demoted below the reference)."""
        while True:
            try:
                chosen: str | None = self.router.route(program, backend).backend
            except NoCapableBackendError:
                if backend is not None or not self._unprobed_ahead(None):
                    raise
                chosen = None
            unprobed = [] if backend is not None else self._unprobed_ahead(chosen)
            if chosen is not None and chosen not in self._pools:
                unprobed.append(chosen)
            if chosen is not None and not unprobed:
                return self._pool(chosen)
            for name in unprobed:
                try:
                    self.probe(name)  # its hello invalidates routing
                except PoolFailedError:
                    if self._closed or backend is not None:
                        raise  # a named backend's failure is the caller's answer
                    # it never started: routing skips the failed pool now; decide again

    def _unprobed_ahead(self, chosen: str | None) -> list[str]:
        """Backends ranked ahead of ``chosen`` (all, for None) whose workers never started."""
        ahead = []
        for reg in self.registry.backends():
            if reg.id == chosen:
                break
            if reg.id not in self._pools:
                ahead.append(reg.id)
        return ahead

    # -- dispatch --------------------------------------------------------------------------

    def _dispatch_request(self, program: Program, inputs: Sequence[Any],
                          config: DispatchConfig) -> Request:
        bound = abi.bind_inputs(program.check(), inputs)
        meta = {"program": program.to_wire(), "config": config.to_dict(), "label": config.label}
        return Request(Op.DISPATCH, meta, bound, timeout=config.timeout, retries=config.retries)

    def dispatch(self, program: Program, inputs: Sequence[Any], backend: str | None = None,
                 config: DispatchConfig | None = None) -> Outputs:
        """Outputs of one dispatch, in ABI order, from the routed (or named) backend."""
        config = config or DispatchConfig()
        request = self._dispatch_request(program, inputs, config)
        _, _, (meta, arrays) = self._routed_call(program, backend,
                                                 lambda pool: request.renewed())
        return _outputs(meta, arrays)

    def dispatch_on(self, backend: str, program: Program, inputs: Sequence[Any],
                    config: DispatchConfig | None = None) -> Outputs:
        """Send ``program`` straight to ``backend``'s worker, skipping routing's capability
        check: how a conformance kit sees that a backend itself refuses what it did not
        claim. Everything else (ABI binding, supervision, timeouts) is as ``dispatch``."""
        config = config or DispatchConfig()
        request = self._dispatch_request(program, inputs, config)
        return _outputs(*self._pool(backend).call(request))

    def dispatch_async(self, program: Program, inputs: Sequence[Any], backend: str | None = None,
                       config: DispatchConfig | None = None) -> PendingResult:
        """Start a dispatch; the returned handle has ``is_ready()`` and ``result(timeout)``."""
        config = config or DispatchConfig()
        request = self._dispatch_request(program, inputs, config)
        return PendingResult(self._routed_pool(program, backend).submit(request))

    def compile(self, program: Program, backend: str | None = None,
                config: DispatchConfig | None = None) -> CompiledPipeline:
        """Compile once in one worker; dispatch many times through the returned handle."""
        config = config or DispatchConfig()
        program = effective_program(program, config)
        config = config.replace(workgroup_override=None)
        meta = {"program": program.to_wire(), "config": config.to_dict()}
        pool, ran, (meta, _) = self._routed_call(program, backend, lambda pool: Request(
            Op.COMPILE, meta, [], timeout=pool.options.compile_timeout))
        slot, generation = ran.served_by
        pipeline_id = meta["pipeline"]

        def run(inputs: Sequence[Any], cfg: DispatchConfig) -> Outputs:
            bound = abi.bind_inputs(program, inputs)
            reply, arrays = pool.call(Request(
                Op.PIPELINE_DISPATCH, {"pipeline": pipeline_id, "config": cfg.to_dict(),
                                       "label": cfg.label},
                bound, timeout=cfg.timeout, slot=slot, generation=generation))
            return _outputs(reply, arrays)

        return CompiledPipeline(program, config, pool.backend, pool.registration.version,
                                generation, run, lambda g: pool.generation_of(slot) == g)

    # -- resident buffers ------------------------------------------------------------------

    def allocate_resident(self, byte_len: int, backend: str) -> ResidentBuffer:
        """Device memory of ``byte_len`` bytes in a worker of ``backend``."""
        pool = self._pool(backend)
        request = Request(Op.ALLOCATE, {"byte_len": int(byte_len)}, [])
        meta, _ = pool.call(request)
        slot, generation = request.served_by
        return ResidentBuffer(pool, slot, generation, meta["handle"], int(byte_len))

    def dispatch_resident(self, program: Program, buffers: Sequence[ResidentBuffer],
                          config: DispatchConfig | None = None) -> Timing:
        """Dispatch on resident buffers (one per non-workgroup buffer, declaration order);
        outputs are written into their buffers. All must live in the same worker."""
        config = config or DispatchConfig()
        if not buffers or len({(b.pool, b.slot, b.generation) for b in buffers}) != 1:
            raise InvalidInputError("resident buffers of one dispatch must all live in one "
                                    "worker (same backend, worker and generation)",
                                    "Allocate them on the same backend, one after another.")
        first = buffers[0]
        meta, _ = first._call(Op.DISPATCH_RESIDENT, {
            "program": program.check().to_wire(), "config": config.to_dict(),
            "handles": [b.handle for b in buffers], "label": config.label},
            timeout=config.timeout)
        return Timing(meta["wall_ns"], meta.get("device_ns"), config.label)

    # -- lifecycle -------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """Every registered backend's pool: workers with pid, generation, state, restarts
        and in-flight requests; plus plugins that failed to load."""
        with self._lock:
            pools = dict(self._pools)
        return {
            "closed": self._closed,
            "pools": {reg.id: (pools[reg.id].status() if reg.id in pools
                               else {"backend": reg.id, "state": "not started", "workers": []})
                      for reg in self.registry.backends()},
            "broken_plugins": [{"name": b.name, "error": b.error} for b in self.registry.broken],
        }

    def close(self) -> None:
        """Stop every worker and remove the run directory; safe to call twice, and a no-op
        in a forked child (the workers and the run directory belong to the parent)."""
        if os.getpid() != self._owner_pid:
            return
        with self._lock:
            if self._closed:
                return
            self._closed = True
            pools = list(self._pools.values())
        for pool in pools:
            pool.close()
        self._rundir.remove()
        atexit.unregister(self.close)
