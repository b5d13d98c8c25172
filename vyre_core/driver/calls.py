"""What each verb of the Driver checks and builds before any work leaves the process: a
wrong program, config, ``out=`` array or resident buffer is refused here, with its Fix,
and the request a worker runs is made here; a reply comes back as ``Outputs``. Apart from
the Driver so that every verb shares one check and one wording for each refusal, and
the checks can be read (and tested) without a pool."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from vyre_core import abi, deprecations, shared_arrays
from vyre_core.boundary.messages import Dispatch, DispatchResident, Ran, RunSequence, SequenceRan
from vyre_core.config import DispatchConfig
from vyre_core.contract.types import LoopRun, Outputs, Timing
from vyre_core.deadline import Deadline
from vyre_core.driver.call_forms import ResidentOutputs
from vyre_core.driver.resident import (
    ResidentBuffer,
    ResidentLaunch,
    _check_device,
    one_worker,
)
from vyre_core.errors import (
    InvalidConfigError,
    InvalidInputError,
    InvalidSequenceError,
    LaunchLimitError,
)
from vyre_core.ir import Kernel, Program
from vyre_core.kernels.kernel import KernelFunction, LaunchPlan
from vyre_core.launch import Launch, PlannedLaunches, effective_program, launch_of
from vyre_core.sequence import Role, output_buffers
from vyre_core.sequence import Sequence as StepSequence
from vyre_core.shadow_sampler import Sample
from vyre_core.supervisor.outcome import Outcome
from vyre_core.supervisor.rules.requests import Call, Request
from vyre_core.supervisor.shell import PoolHandle

if TYPE_CHECKING:
    from vyre_core.routing import RoutingPolicy
    from vyre_core.shadow_sampler import ShadowSampler


def _outputs(ran: Ran | SequenceRan | None, arrays: list[Any]) -> Outputs:
    out = Outputs(arrays)
    if ran is not None and ran.wall_ns is not None:
        out.timing = Timing(ran.wall_ns, ran.device_ns, ran.label)
    return out


_DEFAULT_CONFIG = DispatchConfig()  # frozen: one shared instance, checked once


def _config(config: Any) -> DispatchConfig:
    if config is None:
        return _DEFAULT_CONFIG
    if not isinstance(config, DispatchConfig):
        raise InvalidConfigError(f"config must be a DispatchConfig, got "
                                 f"{type(config).__name__}",
                                 "Pass config=DispatchConfig(...) (e.g. "
                                 "DispatchConfig(timeout=5.0)), or leave it out.")
    return config


def _check_out(work: Program | StepSequence, shapes: list[tuple[np.dtype, int]],
               out: Any) -> None:
    """``out`` must hold one writable, C-contiguous array per output (a sequence's:
    per return), of its storage dtype and length: refused before any work otherwise."""
    names = [name for name, _ in output_buffers(work)]
    if not isinstance(out, list | tuple) or len(out) != len(shapes):
        got = len(out) if isinstance(out, list | tuple) else type(out).__name__
        raise InvalidInputError(f"out= needs {len(shapes)} array(s) (outputs {names}), got "
                                f"{got}", "Pass a list with one numpy array per output, "
                                "e.g. out=[np.empty(n, np.float32)].")
    for name, (dtype, count), target in zip(names, shapes, out, strict=True):
        fix = f"Pass np.empty({count}, dtype=np.{dtype.name}) for output {name!r}."
        if not isinstance(target, np.ndarray):
            raise InvalidInputError(f"out= array for {name!r} is a {type(target).__name__}, "
                                    "not a numpy array", fix)
        shared_arrays.check(target, f"out= array for {name!r}")
        problem = (f"has dtype {target.dtype}, not {dtype}" if target.dtype != dtype
                   else f"has {target.size} elements, not {count}" if target.size != count
                   else "is not C-contiguous" if not target.flags.c_contiguous
                   else "is read-only" if not target.flags.writeable else None)
        if problem is not None:
            raise InvalidInputError(f"out= array for {name!r} {problem}", fix)
    for i, first in enumerate(out):
        for j in range(i + 1, len(out)):
            if np.shares_memory(first, out[j]):
                raise InvalidInputError(
                    f"out= arrays for {names[i]!r} and {names[j]!r} share memory: one output "
                    "would overwrite the other", "Pass a separate array for each output.")


def _writing_into(request: Request, out: Sequence[np.ndarray], own: dict[int, int]) -> None:
    """``request`` writes its outputs into ``out`` (checked): a worker writes straight
    into those in shared memory (``Driver.empty``), so an input there that it could see
    change meanwhile is copied (``shared_arrays.unaliased``; ``own``: input index -> the
    output index of the same read_write buffer, updated in place)."""
    request.call.into = [target.reshape(-1) for target in out]
    request.call.arrays = shared_arrays.unaliased(request.call.arrays, request.call.into, own)


def _read_write(program: Program) -> dict[int, int]:
    """Input index -> output index of each read_write buffer of ``program``."""
    outputs = {b.name: j for j, b in enumerate(program.outputs)}
    return {i: outputs[b.name] for i, b in enumerate(program.inputs) if b.name in outputs}


def _unwritten(arrays: Sequence[Any], out: Sequence[np.ndarray] | None) -> list[Any]:
    """A call's inputs as they are before it runs (what the shadow replays): a copy of
    each one an ``out`` array may overwrite (an in-place launch), the others as they are
    (unchanged till the call returns)."""
    if out is None:
        return list(arrays)
    return [np.array(a, copy=True) if isinstance(a, np.ndarray)
            and any(np.may_share_memory(a, target) for target in out) else a
            for a in arrays]


def _kernel_plan(kernel: Any, dim: Any, args: Sequence[Any], shapes: Any = None,
                 config: Any = None) -> LaunchPlan | ResidentLaunch:
    """The plan of one launch: a dispatch, or (some arguments resident buffers) a
    one-step sequence in their worker."""
    if not isinstance(kernel, KernelFunction):
        raise InvalidInputError(f"launch() takes a @vyre.kernel function, got "
                                f"{type(kernel).__name__}",
                                "Decorate the function with @vyre.kernel, or run a Program "
                                "with Driver.dispatch.")
    resident = {p: a for p, a in enumerate(args) if isinstance(a, ResidentBuffer)} \
        if isinstance(args, list | tuple) else {}
    if resident:
        return ResidentLaunch(kernel, dim, args, resident, shapes, _config(config))
    if shapes is not None:
        raise InvalidInputError("shapes= gives the extents of resident buffers, and no "
                                "argument is one", "Leave shapes= out: a numpy array has "
                                "its own shape.")
    return kernel.plan(dim, args)


def _weighed(work: Program | StepSequence, config: DispatchConfig,
             inputs: Sequence[Any] | None = None) -> Program | Launch | StepSequence:
    """What routing weighs: a program's launch as ``config`` makes it (on ``inputs`` when
    given; the program as ``config`` runs it when the grid needs the inputs' lengths), a
    sequence as it is."""
    if isinstance(work, StepSequence):
        return work.check()
    work = _checked_program(work)
    bound = None if inputs is None else abi.bind_inputs(work.check(), inputs)
    return launch_of(work, config, bound)[0]


def _launch_config(config: Any, dim: Any) -> DispatchConfig:
    """The config of a call that takes ``dim=`` beside ``config``."""
    config = _config(config)
    return config if dim is None else config.with_dim(dim)


def _untuned(config: DispatchConfig, where: str) -> DispatchConfig:
    """Refuse ``tuned=True`` where no tuned choice applies (only ``dispatch`` and
    ``dispatch_async`` look one up), rather than run untuned without a word."""
    if config.tuned:
        raise InvalidConfigError(
            f"tuned=True has no tuned choice to apply in {where}",
            "Take Driver.tuned_config(program, inputs, backend=..., config=...) and pass that "
            "config instead, or dispatch with Driver.dispatch.")
    return config


def _sequence_config(config: Any) -> DispatchConfig:
    """The config of a whole sequence: launch shape belongs to its steps."""
    config = _untuned(_config(config), "a sequence")
    per_step = [name for name, value in (
        ("grid_override", config.grid_override),
        ("workgroup_override", config.workgroup_override),
        ("dispatch_elements", config.dispatch_elements),
        ("dim", config.dim)) if value is not None]
    if config.fixpoint_iterations != 1:
        per_step.append("fixpoint_iterations")
    if config.constants:
        per_step.append("constants")
    if per_step:
        raise InvalidConfigError(
            f"a sequence's config sets {', '.join(per_step)}, which belong to its steps",
            "Give each step its grid (SequenceBuilder.step(..., grid=...)) and constants "
            "(SequenceBuilder.step(..., constants=...)), apply workgroup sizes to the "
            "programs, and loop with SequenceBuilder.loop(...).")
    return config


def _sequence_request(sequence: StepSequence, inputs: Sequence[Any],
                      resident: Mapping[str, ResidentBuffer] | None,
                      config: DispatchConfig) -> Request:
    """The request that runs ``sequence``, checked before any work: inputs bound, the
    resident buffers exactly those declared, of one live worker and the declared sizes,
    and the returns within ``max_output_bytes``. Pinned to that worker when any."""
    _checked_sequence(sequence)
    bound = sequence.bind_inputs(inputs)
    handles, slot, generation = _resident_handles(sequence, resident or {})
    shapes = sequence.return_shapes()
    if config.max_output_bytes is not None:
        total = sum(dtype.itemsize * count for dtype, count in shapes)
        if total > config.max_output_bytes:
            raise LaunchLimitError(f"the sequence would return {total} bytes, over "
                                   f"max_output_bytes={config.max_output_bytes}",
                                   "Return fewer buffers, or raise max_output_bytes.")
    message = RunSequence(sequence.fingerprint(), sequence.to_wire(), config.to_wire(),
                          handles, config.label)
    return Request(Call(message, bound, deadline=Deadline.after(config.timeout),
                        retries=0 if handles else config.retries,
                        slot=slot, generation=generation, outputs=shapes))


def _checked_program(program: Any) -> Program:
    """``program`` when it is a Program; else a refusal saying what to pass instead."""
    if isinstance(program, Program):
        return program
    fix = {Kernel: "Pass kernel.build() (it validates the kernel and returns its Program).",
           StepSequence: "Run a sequence with Driver.dispatch(sequence, inputs).",
           str: "Pass the Program object itself, e.g. ir.Kernel(...).build(); vyre "
                "dispatches programs, not names."}.get(type(program))
    if isinstance(program, KernelFunction):
        name = program.fn.__name__
        fix = (f"Launch a @vyre.kernel: drv.launch({name}, dim=n, args=(...)); or pass "
               f"its Program, {name}.program(dim=n, args=(...)).")
    if fix is None and callable(program):
        fix = "Call it and pass the Program it returns."
    given = repr(program)[:60] if isinstance(program, str) else \
        f"{type(program).__name__} {getattr(program, '__qualname__', '')}".rstrip()
    raise InvalidInputError(f"expected a Program, got {given}",
                            fix or "Pass a Program: build one with ir.Kernel(...).build().")


def _checked_sequence(sequence: Any) -> StepSequence:
    if not isinstance(sequence, StepSequence):
        raise InvalidSequenceError(f"expected a Sequence, got {type(sequence).__name__}",
                                   "Build one with vyre_core.SequenceBuilder.")
    return sequence.check()


def _resident_handles(sequence: StepSequence, resident: Mapping[str, Any]
                      ) -> tuple[dict[str, int], int | None, int | None]:
    declared = {b.name: b for b in sequence.of_role(Role.RESIDENT)}
    if not isinstance(resident, Mapping) or set(resident) != set(declared):
        got = sorted(resident) if isinstance(resident, Mapping) else type(resident).__name__
        raise InvalidSequenceError(
            f"the sequence's resident buffers are {sorted(declared)}, resident= names {got}",
            "Pass resident={name: ResidentBuffer} for exactly its resident buffers.")
    for name, buf in resident.items():
        want = declared[name].nbytes
        if not isinstance(buf, ResidentBuffer):
            raise InvalidSequenceError(f"resident {name!r} is a {type(buf).__name__}, not a "
                                       "ResidentBuffer", "Pass Driver.allocate_resident(...).")
        if buf.byte_len != want:
            raise InvalidSequenceError(
                f"resident {name!r} holds {buf.byte_len} bytes, the sequence declares {want}",
                f"Allocate it with Driver.allocate_resident({want}, ...).")
        buf.refuse_if_stale(name)
    if not resident:
        return {}, None, None
    _, slot, generation = one_worker(list(resident.values()), list(resident),
                                     error=InvalidSequenceError)
    if len({buf.handle for buf in resident.values()}) < len(resident):
        raise InvalidSequenceError("one ResidentBuffer is bound to two resident names",
                                   "Bind a distinct ResidentBuffer to each name (a step that "
                                   "reads one and writes the other would see either).")
    return {name: buf.handle for name, buf in resident.items()}, slot, generation


def _resident_pool(resident: Mapping[str, ResidentBuffer]) -> PoolHandle:
    return next(iter(resident.values())).pool


def _sequence_outputs(ran: SequenceRan, arrays: list[Any]) -> Outputs:
    out = _outputs(ran, arrays)
    out.loops = [LoopRun(n, done) for n, done in ran.loops]
    return out


def _written_into(got: Outputs, out: Sequence[np.ndarray] | None) -> Outputs:
    """``got`` (a program's outputs or a sequence's returns), written into ``out``
    (checked) when given, which then holds them."""
    if out is None:
        return got
    for target, array in zip(out, got, strict=True):
        np.copyto(target.reshape(-1), array, casting="no")
    into = _outputs(None, list(out))
    into.loops, into.timing = got.loops, got.timing
    return into


def _planned(plans: PlannedLaunches, program: Program, inputs: Sequence[Any],
             config: DispatchConfig) -> tuple[Launch, Request]:
    """The request of one dispatch with its launch planned here, before any work: the
    grid (from dim, the config, or inference) checked against the index types and the
    inputs; routing weighs the launch, the worker gets its grid."""
    program = _checked_program(program).check()
    bound = abi.bind_inputs(program, inputs)
    launch, sent, outputs = plans.plan(program, config, bound)
    message = Dispatch(program.fingerprint(), program.to_wire(), sent, config.label)
    return launch, Request(Call(  # type: ignore[return-value]
        message, bound, deadline=Deadline.after(config.timeout),
        retries=config.retries, outputs=outputs))


def _dispatched(routing: RoutingPolicy, plans: PlannedLaunches, program: Program,
                inputs: Sequence[Any], backend: str | None, config: DispatchConfig,
                out: Sequence[np.ndarray] | None, shadow: ShadowSampler | None) -> Outputs:
    """``Driver.dispatch`` once its config is final; ``shadow`` (when sampling) is offered
    the call when its rule says so and a backend other than the reference served it."""
    launch, request = _planned(plans, program, inputs, config)
    if out is not None:
        _check_out(program, request.call.outputs, out)
        _writing_into(request, out, _read_write(program))
    bound = None if shadow is None else _unwritten(request.call.arrays, out)
    pool, _, (ran, arrays) = routing.call(
        launch, backend, lambda pool: request.renewed(), request.call.deadline)
    if out is not None:
        for target, array in zip(out, arrays, strict=True):
            np.copyto(target.reshape(-1), array, casting="no")
        arrays = list(out)  # the shared results go back to the pool now
    outputs = _outputs(ran, arrays)
    if bound is not None and not pool.registration.is_reference and shadow.rule.due():
        shadow.offer(Sample(program, [np.array(a, copy=True) for a in bound], config,
                            [np.array(a, copy=out is not None) for a in outputs],
                            pool.backend))
    return outputs


def _dispatch_resident(routing: RoutingPolicy, program: Program,
                       buffers: Sequence[ResidentBuffer], config: Any) -> ResidentOutputs:
    """``Driver.dispatch_resident``: ``program`` run by the worker holding ``buffers``."""
    config = _untuned(_config(config), "dispatch_resident")
    one_worker(buffers, [f"buffers[{i}]" for i in range(len(buffers))])
    first, deadline = buffers[0], Deadline.after(config.timeout)
    _check_device(routing, effective_program(_checked_program(program), config), first,
                  deadline)
    ran, _ = first._call(DispatchResident(
        program.check().fingerprint(), program.to_wire(), config.to_wire(),
        tuple(b.handle for b in buffers), config.label), deadline=deadline)
    outputs = ResidentOutputs()
    outputs.timing = Timing(ran.wall_ns, ran.device_ns, config.label)
    return outputs


def _resident_launch(routing: RoutingPolicy, plan: ResidentLaunch,
                     backend: str | None) -> Outcome:
    """``Driver.launch_async`` on resident buffers: its one-step sequence, submitted to
    the worker that holds them."""
    request = _sequence_request(plan.sequence, plan.inputs, plan.resident,
                                _sequence_config(plan.config))
    _check_out(plan.sequence, request.call.outputs, plan.out)
    _writing_into(request, plan.out, {})
    pool = _resident_sequence_pool(routing, plan.sequence, request, plan.resident, backend)
    return pool.submit(request)


def _run_sequence(routing: RoutingPolicy, sequence: StepSequence, request: Request,
                  resident: Mapping[str, ResidentBuffer] | None,
                  backend: str | None) -> Outputs:
    if request.call.slot is not None:  # resident buffers: their worker runs it
        pool = _resident_sequence_pool(routing, sequence, request, resident, backend)
        return _sequence_outputs(*pool.call(request))
    _, _, reply = routing.call(sequence, backend, lambda pool: request.renewed(),
                               request.call.deadline)
    return _sequence_outputs(*reply)


def _resident_sequence_pool(routing: RoutingPolicy, sequence: StepSequence, request: Request,
                            resident: Mapping[str, ResidentBuffer],
                            backend: str | None) -> PoolHandle:
    """The pool whose worker holds ``resident`` and runs ``sequence`` (``request``
    is pinned to it), once it is seen able to."""
    pool = _resident_pool(resident)
    if backend not in (None, pool.backend):
        raise InvalidSequenceError(
            f"backend={backend!r}, but the resident buffers live in "
            f"{pool.backend!r}", "Leave backend out, or allocate the buffers there.")
    # (capable, or every reason why not)
    routing.route(sequence, pool.backend, request.call.deadline)
    _check_device(routing, sequence, next(iter(resident.values())), request.call.deadline)
    return pool


def _no_dim(config: Any, dim: Any, verb: str = "dispatch") -> Any:
    """``config``, where a call that runs a sequence was given no ``dim``: a sequence's
    steps say their own grids."""
    if dim is not None:
        raise InvalidConfigError(f"{verb}(dim=...) of a sequence: its steps say their own "
                                 "grids", "Give dim= to each step (SequenceBuilder.step), not "
                                 "to the call.")
    return config


def _program_config(config: Any, dim: Any, resident: Any) -> DispatchConfig:
    """The config of a dispatch of a program (``dim`` applied), which takes no
    ``resident=``: that names a sequence's resident buffers."""
    if resident is not None:
        raise InvalidInputError(
            "dispatch(resident=...) of a program: resident= names a sequence's resident "
            "buffers", "Run a program on resident buffers with "
            "Driver.dispatch_resident(program, buffers), or launch a kernel with them among "
            "its args (Driver.launch).")
    return _launch_config(config, dim)


def _sequence_requested(sequence: StepSequence, inputs: Sequence[Any],
                        resident: Mapping[str, ResidentBuffer] | None, config: Any
                        ) -> tuple[StepSequence, Request]:
    """The sequence as a call runs it (fused where its config says so) and the request
    that runs it, both checked before any work."""
    config = _sequence_config(config)
    if config.fuse:
        sequence = _checked_sequence(sequence).fused()
    return sequence, _sequence_request(sequence, inputs, resident, config)


def _dispatched_sequence(routing: RoutingPolicy, sequence: StepSequence, inputs: Sequence[Any],
                         resident: Mapping[str, ResidentBuffer] | None, backend: str | None,
                         config: Any, out: Sequence[np.ndarray] | None) -> Outputs:
    """``Driver.dispatch`` of a sequence: the request built and checked, run by the routed
    backend (or the worker holding ``resident``), its returns written into ``out``."""
    sequence, request = _sequence_requested(sequence, inputs, resident, config)
    if out is not None:
        _check_out(sequence, request.call.outputs, out)
        _writing_into(request, out, {})
    return _written_into(_run_sequence(routing, sequence, request, resident, backend), out)


def dispatched_on(driver: Any, backend: str, work: Program | StepSequence,
                  inputs: Sequence[Any], config: DispatchConfig | None,
                  dim: int | Sequence[int] | None, deprecated: str | None = None) -> Outputs:
    """``vyre_core.testing.dispatch_on``: ``work`` (a program or a sequence) straight to
    ``backend``'s pool of ``driver`` (a Driver), no routing. ``deprecated``: the old
    Driver method it was called as, which warns."""
    if deprecated is not None:
        deprecations.enforce(deprecations.of_kind("call")[deprecated], "this program",
                             InvalidInputError)
    pool = driver.pools.open(backend)
    if not isinstance(work, StepSequence):
        config = _untuned(_launch_config(config, dim), "dispatch_on")
        _, request = _planned(driver._plans, work, inputs, config)
        return _outputs(*pool.call(request))
    _, request = _sequence_requested(work, inputs, None, _no_dim(config, dim, "dispatch_on"))
    return _sequence_outputs(*pool.call(request))
