"""The backend host: one backend plugin plus the conservative defaults, exposed as plain
typed Python methods. This is what a worker process runs; it holds no parent state.

Every dispatch goes through ``vyre_core.launch`` (config applied, limits checked,
outputs checked), and every failure of the plugin leaves here as a ``VyreError``.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Sequence
from importlib import metadata
from typing import Any

import numpy as np

from vyre_core import abi
from vyre_core.abi import BACKEND_BUG_FIX, check_outputs
from vyre_core.config import DispatchConfig
from vyre_core.contract.manager import LoadedBackend
from vyre_core.contract.types import (
    CacheSnapshot,
    Capabilities,
    DeviceInfo,
    NativePipeline,
    Outputs,
    PendingDispatch,
    ReadyPending,
    SequenceRun,
    TimedDispatch,
    Timing,
    device_list,
)
from vyre_core.errors import (
    DispatchError,
    InvalidConfigError,
    InvalidInputError,
    InvalidSequenceError,
    LaunchLimitError,
    PluginLoadError,
    VyreError,
    as_vyre_error,
)
from vyre_core.ir import Program
from vyre_core.ir.nodes import Access
from vyre_core.launch import (
    LaunchPlan,
    check_limits,
    effective_program,
    plan_grid,
    plan_launch,
    run_launch,
)
from vyre_core.mathlib.inline import expand
from vyre_core.mathlib.library import version as math_library_version
from vyre_core.pipeline import CompiledPipeline, pipeline_cache_key
from vyre_core.registry import ENTRY_POINT_GROUP
from vyre_core.sequence import Role
from vyre_core.sequence import Sequence as StepSequence

#: Launch plans a host keeps (the most recently used).
PLAN_CACHE = 256
#: Of those, the ones found by the identity of their program and config (emptied when
#: full; each entry holds both objects, so an id is never another object's).
RECENT_PLANS = 64


def _read_only(arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    views = []
    for a in arrays:
        view = a.view()
        view.flags.writeable = False
        views.append(view)
    return views


class BackendHost:
    """A loaded backend. ``generation`` is the supervisor's number for the worker it lives
    in (restarts, adoptions and recoveries advance it); only ``serve_as`` changes it."""

    def __init__(self, plugin: object, name: str | None = None, generation: int = 0) -> None:
        self.loaded = LoadedBackend(plugin, name)
        self.generation = generation
        self._id: str = self.loaded.call("vyre_backend_id")
        self._caps: Capabilities | None = None
        self._lowers_math: bool | None = None  # (asked once: the answer is static)
        self._runnable: OrderedDict[str, Program | StepSequence] = OrderedDict()
        self._devices: list[DeviceInfo] | None = None
        self.device: int | None = None  # the device it is pinned to (None: the default)
        self._prepared = False
        self._resident_bytes: dict[int, int] = {}
        self._plans: OrderedDict[tuple, tuple] = OrderedDict()  # _planned's
        # the same plans by the identity of their program and config objects (a worker
        # decodes a repeated one to the same objects), found without hashing either
        self._recent: dict[tuple[int, int], tuple] = {}
        self._fitting: OrderedDict[str, None] = OrderedDict()  # sequences within the limits

    def _call(self, hook: str, **kwargs: Any) -> Any:
        try:
            return self.loaded.call(hook, **kwargs)
        except Exception as exc:  # the plugin boundary: everything leaves as a VyreError
            raise as_vyre_error(exc, f"backend {self._id!r} {hook}") from exc

    # -- identity ------------------------------------------------------------------------

    def id(self) -> str:
        return self._id

    def version(self) -> str:
        return str(self._call("vyre_backend_version"))

    def precedence(self) -> int:
        return int(self._call("vyre_backend_precedence"))

    def is_reference_oracle(self) -> bool:
        return bool(self._call("vyre_is_reference_oracle"))

    def supported_ops(self) -> frozenset[str]:
        return self.capabilities().supported_ops

    def runnable(self, work: Program | StepSequence) -> Program | StepSequence:
        """``work`` as this backend is given it: the math library's functions written out
        into each program (``mathlib.inline``), unless the backend says it computes this
        version of the library itself. Every hook that takes a program is given it so;
        kept per fingerprint."""
        if self._lowers_math is None:
            self._lowers_math = bool(self._call("vyre_lowers_math_library",
                                                version=math_library_version()))
        if self._lowers_math:
            return work
        key = work.fingerprint()
        found = self._runnable.get(key)
        if found is None:
            found = expand(work) if isinstance(work, Program) else work.with_programs(expand)
            self._runnable[key] = found
            if len(self._runnable) > PLAN_CACHE:
                self._runnable.popitem(last=False)
        else:
            self._runnable.move_to_end(key)
        return found

    # -- devices -------------------------------------------------------------------------

    def devices(self) -> list[DeviceInfo]:
        """The backend's devices, listed once and without opening any."""
        if self._devices is None:
            self._devices = device_list(self._call("vyre_devices"))
        return self._devices

    def select_device(self, device_id: int) -> None:
        """Pin this host to ``device_id`` before it is prepared; refused when the backend
        does not list that device."""
        if self._prepared:
            raise InvalidInputError(f"backend {self._id!r} is prepared on device "
                                    f"{self.device}; it cannot move to {device_id}",
                                    "Select the device before the first request.")
        devices = self.devices()
        if device_id not in {d.id for d in devices}:
            listed = ", ".join(f"{d.id} ({d.name})" for d in devices)
            raise InvalidConfigError(
                f"backend {self._id!r} has no device {device_id!r}; its devices: {listed}",
                "Name one of these ids in PoolOptions(devices=...), or devices='all'; `vyre "
                "backends --probe` lists every backend's devices.")
        self._call("vyre_select_device", device_id=device_id)
        self.device = device_id

    # -- lifecycle -----------------------------------------------------------------------

    def prepare(self) -> None:
        """Acquire the device and warm up; idempotent."""
        if not self._prepared:
            self._call("vyre_prepare")
            self._prepared = True

    def __enter__(self) -> BackendHost:
        """Prepared, and shut down on leaving: a host in a test's or a benchmark's own
        process, outside any worker."""
        self.prepare()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def flush(self) -> None:
        self._call("vyre_flush")

    def shutdown(self) -> None:
        self._call("vyre_shutdown")
        self._prepared = False

    def device_lost(self) -> bool:
        return bool(self._call("vyre_device_lost"))

    def serve_as(self, generation: int) -> None:
        """From now on this host is ``generation``: handles made before are refused."""
        self.generation = generation

    def try_recover(self, generation: int | None = None) -> None:
        """Recover a lost device; every pipeline and resident buffer made before is gone,
        so the host serves as ``generation`` (the supervisor's number; without one, in
        process, the next) and the capabilities are probed again."""
        self._call("vyre_try_recover")
        self.serve_as(self.generation + 1 if generation is None else generation)
        self._caps = None
        self._plans.clear()  # planned against the old capabilities
        self._recent.clear()
        self._fitting.clear()

    # -- capabilities --------------------------------------------------------------------

    def capabilities(self) -> Capabilities:
        """The backend's whole record, asked once per generation."""
        if self._caps is None:
            self._caps = Capabilities.of(self._call("vyre_capabilities"))
        return self._caps

    def device_profile(self) -> dict[str, Any]:
        return dict(self._call("vyre_device_profile"))

    def pipeline_cache_snapshot(self) -> CacheSnapshot | None:
        return self._call("vyre_pipeline_cache_snapshot")

    # -- dispatch ------------------------------------------------------------------------

    def plan(self, program: Program, inputs: Sequence[Any],
             config: DispatchConfig | None = None) -> LaunchPlan:
        """The launch plan, planned once per (program, input shapes, config) in this
        generation: a repeated dispatch only binds its inputs."""
        return self._planned(program, inputs, config)[0]

    def _planned(self, program: Program, inputs: Sequence[Any], config: DispatchConfig | None
                 ) -> tuple[LaunchPlan, tuple[tuple[np.dtype, tuple[int]], ...]]:
        """``plan``'s plan, and the dtype and shape of each output array of its launch
        (what ``dispatch_into`` writes into), both kept per (program, input signature,
        config): a launch that repeats all three is bound by its ``abi.Binder``."""
        config = config or DispatchConfig()
        signature = abi.input_signature(inputs)
        recent = self._recent.get((id(program), id(config)))
        if recent is not None and recent[0] is program and recent[1] is config \
                and recent[2] == signature:  # (the worker's repeated program and config)
            cached = recent[3]
        else:
            key = None if signature is None else (program.fingerprint(), signature, config)
            cached = self._plans.get(key) if key is not None else None
            if cached is None:
                plan = plan_launch(self.runnable(program), inputs, config,  # (once a plan)
                                   self.capabilities(), self._id)
                out = tuple((b.dtype.storage_np, (plan.lengths[b.name],))
                            for b in plan.program.outputs)
                if key is not None:
                    self._plans[key] = (plan, abi.Binder(plan.program, inputs), out)
                    if len(self._plans) > PLAN_CACHE:
                        self._plans.popitem(last=False)
                return plan, out
            self._plans.move_to_end(key)
            if len(self._recent) >= RECENT_PLANS:
                self._recent.clear()
            self._recent[id(program), id(config)] = (program, config, signature, cached)
        planned, binder, out = cached
        return LaunchPlan(planned.program, binder.bind(inputs), planned.lengths, planned.grid,
                          planned.config), out

    def _run_hook(self, program: Program, inputs: list[np.ndarray],
                  config: DispatchConfig) -> list[Any] | TimedDispatch:
        hook = "vyre_dispatch_timed" if config.profile else "vyre_dispatch_borrowed"
        return self._call(hook, program=program, inputs=_read_only(inputs), config=config)

    def dispatch(self, program: Program, inputs: Sequence[Any],
                 config: DispatchConfig | None = None) -> Outputs:
        """Outputs of one dispatch in ABI order (``.timing`` set when profiling)."""
        return run_launch(self.plan(program, inputs, config), self._run_hook, self._id)

    def dispatch_into(self, program: Program, inputs: Sequence[Any],
                      outputs: Sequence[np.ndarray],
                      config: DispatchConfig | None = None) -> Timing | None:
        """Dispatch writing into caller-owned arrays (one per output, exact dtype/length);
        returns the timing when profiling."""
        plan, out = self._planned(program, inputs, config)
        if [(a.dtype, a.shape) for a in outputs] != list(out) \
                or not all(a.flags.writeable for a in outputs):
            for b, a in zip(plan.program.outputs, outputs, strict=True):
                if a.dtype != b.dtype.storage_np or a.shape != (plan.lengths[b.name],) \
                        or not a.flags.writeable:
                    raise DispatchError(
                        f"output array for {b.name!r} is {a.dtype}{a.shape}, needs a "
                        f"writable {b.dtype.storage_np}({plan.lengths[b.name]},)",
                        "Preallocate each output with np.empty(length, dtype).")
        if plan.config.fixpoint_iterations == 1 and not plan.config.profile:
            self._call("vyre_dispatch_into", program=plan.program,
                       inputs=_read_only(plan.inputs), config=plan.config, outputs=list(outputs))
            return None
        result = run_launch(plan, self._run_hook, self._id)
        for target, found in zip(outputs, result, strict=True):
            np.copyto(target, found)
        return result.timing

    def dispatch_async(self, program: Program, inputs: Sequence[Any],
                       config: DispatchConfig | None = None) -> PendingDispatch:
        """Start a dispatch; a fixpoint or profiled dispatch runs to completion first."""
        plan = self.plan(program, inputs, config)
        if plan.config.fixpoint_iterations > 1 or plan.config.profile:
            return ReadyPending(run_launch(plan, self._run_hook, self._id))
        pending = self._call("vyre_dispatch_async", program=plan.program,
                             inputs=_read_only(plan.inputs), config=plan.config)
        return _CheckedPending(pending, plan, self._id)

    def compile(self, program: Program, config: DispatchConfig | None = None) -> CompiledPipeline:
        """Compile once: the backend's native pipeline, or a passthrough over dispatch."""
        config = config or DispatchConfig()
        source = self.runnable(program)
        program = effective_program(source, config)
        compile_config = config.replace(workgroup_override=None, constants=())
        native = self._call("vyre_compile", program=program, config=compile_config)
        if native is not None and not isinstance(native, NativePipeline):
            raise DispatchError(f"backend {self._id!r} vyre_compile returned "
                                f"{type(native).__name__}, which has no dispatch method",
                                "Return an object with dispatch(inputs, config), or None.")

        def runner(program_: Program, inputs: list[np.ndarray], cfg: DispatchConfig):
            if native is None:
                return self._run_hook(program_, inputs, cfg)
            try:
                return native.dispatch(_read_only(inputs), cfg)
            except Exception as exc:
                raise as_vyre_error(exc, f"backend {self._id!r} pipeline dispatch") from exc

        # the last launch's (config, input signature, plan, binder)
        last: list[Any] = [(None, None, None, None)]

        def run(inputs: Sequence[Any], cfg: DispatchConfig) -> Outputs:
            """A launch planned once per config and input signature (a caller's launches
            mostly repeat both, and the worker decodes a repeated config to the same
            object): a repeated one is only bound (``abi.Binder``)."""
            signature = abi.input_signature(inputs)
            seen, seen_signature, planned, binder = last[0]  # (one read: threads share it)
            if cfg is seen and signature == seen_signature and signature is not None:
                plan = LaunchPlan(planned.program, binder.bind(inputs), planned.lengths,
                                  planned.grid, planned.config)
            else:
                plan = plan_launch(program, inputs, cfg.replace(workgroup_override=None),
                                   self.capabilities(), self._id)
                if signature is not None:
                    last[0] = (cfg, signature, plan, abi.Binder(plan.program, inputs))
            return run_launch(plan, runner, self._id)

        key = pipeline_cache_key(program, compile_config, self._id, self.version())
        return CompiledPipeline(program, compile_config, self._id, key, self.generation, run,
                                lambda g: g == self.generation, source=source)

    # -- resident buffers ----------------------------------------------------------------

    def allocate_resident(self, byte_len: int) -> int:
        handle = int(self._call("vyre_allocate_resident", byte_len=int(byte_len)))
        self._resident_bytes[handle] = int(byte_len)
        return handle

    def upload_resident(self, handle: int, data: bytes) -> None:
        self._call("vyre_upload_resident", handle=handle, data=bytes(data))

    def download_resident(self, handle: int) -> bytes:
        return bytes(self._call("vyre_download_resident", handle=handle))

    def free_resident(self, handle: int) -> None:
        self._call("vyre_free_resident", handle=handle)
        self._resident_bytes.pop(handle, None)

    def dispatch_resident(self, program: Program, handles: Sequence[int],
                          config: DispatchConfig | None = None) -> TimedDispatch:
        """Dispatch on resident buffers (one handle per non-workgroup buffer, declaration
        order), planned like any launch from the sizes the buffers were allocated with."""
        config = config or DispatchConfig()
        if not self.loaded.implements("vyre_dispatch_resident"):
            return self._call("vyre_dispatch_resident", program=program, handles=list(handles),
                              config=config)  # the default: UnsupportedFeatureError
        program = effective_program(self.runnable(program), config)
        bound = [b for b in program.buffers if b.access is not Access.WORKGROUP]
        if len(handles) != len(bound):
            raise InvalidInputError(f"{len(handles)} resident handles for {len(bound)} buffers",
                                    "Pass one handle per non-workgroup buffer, in declaration "
                                    "order.")
        lengths = {}
        for b, handle in zip(bound, handles, strict=True):
            if handle not in self._resident_bytes:
                raise InvalidInputError(f"resident handle {handle} for {b.name!r} was not "
                                        "allocated by this host",
                                        "Allocate it with allocate_resident first.")
            lengths[b.name] = b.count if b.count is not None else \
                self._resident_bytes[handle] // b.dtype.storage_bytes
        _, config = plan_grid(program, lengths, config, self.capabilities(), self._id)
        return self._call("vyre_dispatch_resident", program=program, handles=list(handles),
                          config=config)


    # -- sequences -----------------------------------------------------------------------

    def check_sequence(self, sequence: StepSequence) -> None:
        """Refuse a sequence a step of which exceeds this backend's limits (once per
        sequence and generation), naming the step."""
        key = sequence.fingerprint()
        if key in self._fitting:
            self._fitting.move_to_end(key)
            return
        caps = self.capabilities()
        for n, step in sequence.steps():
            try:
                check_limits(step.program, step.grid, sequence.lengths(step), caps, self._id)
            except LaunchLimitError as exc:
                raise LaunchLimitError(f"step {n}: {exc.cause}", exc.fix) from None
        self._fitting[key] = None
        if len(self._fitting) > PLAN_CACHE:
            self._fitting.popitem(last=False)

    def compile_sequence(self, sequence: StepSequence,
                         config: DispatchConfig | None = None) -> None:
        """Check the sequence here and compile each of its programs once (a backend that
        compiles keeps them in its own cache), with the config its runs will use."""
        sequence = self.runnable(sequence)
        self.check_sequence(sequence)
        for program, _ in sequence.programs():
            self._call("vyre_compile", program=program, config=config or DispatchConfig())

    def dispatch_sequence(self, sequence: StepSequence, inputs: Sequence[Any],
                          resident: dict[str, int],
                          config: DispatchConfig | None = None) -> SequenceRun:
        """Run ``sequence`` (inputs in declaration order, resident handles by buffer
        name) and check what the backend returns."""
        config = config or DispatchConfig()
        sequence = self.runnable(sequence)
        self.check_sequence(sequence)
        bound = sequence.bind_inputs(inputs)
        declared = sequence.of_role(Role.RESIDENT)
        if set(resident) != {b.name for b in declared}:
            raise InvalidSequenceError(f"resident handles for {sorted(resident)}; the sequence's "
                                       f"resident buffers are {[b.name for b in declared]}",
                                       "Pass one handle per resident buffer.")
        if len(set(resident.values())) != len(resident):
            raise InvalidSequenceError("one resident buffer is bound to two names",
                                       "Bind a distinct resident buffer to each name.")
        for b in declared:
            handle = resident[b.name]
            held = self._resident_bytes.get(handle) if isinstance(handle, int) else None
            if held is None:
                raise InvalidSequenceError(f"resident buffer {b.name!r} is bound to handle "
                                           f"{handle!r}, which this worker does not hold",
                                           "Pass a ResidentBuffer of the worker that runs it.")
            if held != b.nbytes:
                raise InvalidSequenceError(
                    f"resident buffer {b.name!r} holds {held} bytes; the sequence declares "
                    f"{b.count} {b.dtype.value} elements ({b.nbytes} bytes)",
                    f"Allocate it with {b.nbytes} bytes.")
        named = dict(zip((b.name for b in sequence.of_role(Role.INPUT)), _read_only(bound),
                         strict=True))
        run = self._call("vyre_dispatch_sequence", sequence=sequence, inputs=named,
                         resident=dict(resident), config=config)
        if not isinstance(run, SequenceRun):
            raise DispatchError(f"backend {self._id!r} vyre_dispatch_sequence returned "
                                f"{type(run).__name__}, not a SequenceRun", BACKEND_BUG_FIX)
        shapes = sequence.return_shapes()
        outputs = list(run.outputs)
        if len(outputs) != len(shapes) or any(
                not isinstance(o, np.ndarray) or o.dtype != dtype or o.size != count
                for o, (dtype, count) in zip(outputs, shapes, strict=False)):
            raise DispatchError(f"backend {self._id!r} returned sequence outputs that do not "
                                f"match its returns {list(sequence.returns)}", BACKEND_BUG_FIX)
        return SequenceRun([o.reshape(-1) for o in outputs], list(run.loops), run.timing)


class _CheckedPending:
    """A backend's pending dispatch whose result is checked like any other output."""

    def __init__(self, pending: PendingDispatch, plan: LaunchPlan, backend: str) -> None:
        self._pending = pending
        self._plan = plan
        self._backend = backend

    def is_ready(self) -> bool:
        return bool(self._pending.is_ready())

    def result(self, timeout: float | None = None) -> Outputs:
        try:
            outputs = self._pending.result(timeout)
        except Exception as exc:
            raise as_vyre_error(exc, f"backend {self._backend!r} async dispatch") from exc
        return Outputs(check_outputs(self._plan.program, outputs, self._plan.lengths,
                                     self._backend))


def load_backend(entry_point: str, backend: str, generation: int) -> BackendHost:
    """The backend of ``entry_point``, which must say it is ``backend``."""
    matches = metadata.entry_points(group=ENTRY_POINT_GROUP, name=entry_point)
    if not matches:
        raise PluginLoadError(f"no entry point {entry_point!r} in group {ENTRY_POINT_GROUP}",
                              "Install the backend's distribution in the worker's Python.")
    host = BackendHost(next(iter(matches)).load(), entry_point, generation)
    if host.id() != backend:
        raise PluginLoadError(f"entry point {entry_point!r} is backend {host.id()!r}, "
                              f"expected {backend!r}", "Reinstall the backend distribution.")
    return host


def probed_capabilities(backend: str, entry_point: str) -> dict[str, Any]:
    """What a worker of ``backend`` says in its hello: its preferred device prepared and
    probed, then released (``Capabilities.to_dict``)."""
    host = load_backend(entry_point, backend, 0)
    host.prepare()
    try:
        return host.capabilities().to_dict()
    finally:
        host.shutdown()


def listed_devices(host: BackendHost) -> list[dict]:
    """The backend's devices for the hello. A worker pinned to a device has listed them
    already (an error there fails its start); for an unpinned one the list is only shown,
    so a backend that cannot list its devices still starts, and says why on stderr."""
    try:
        return [d.to_dict() for d in host.devices()]
    except VyreError as exc:
        sys.stderr.write(f"vyre worker: backend {host.id()!r} could not list its devices: "
                         f"{exc}\n")
        return []
