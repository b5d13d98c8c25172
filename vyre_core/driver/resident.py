"""A resident buffer's handle. Device memory that stays in one worker outlives the call
that made it and belongs to that worker's generation, not to routing: its handle talks
to its own worker directly and refuses use once that worker has restarted, whichever
driver call it is passed to.

``ResidentLaunch``: a launch some of whose arrays are resident buffers: the kernel as the
one step of a sequence that the worker holding the buffers runs. A sequence already
binds resident buffers, inputs and constants in one request, so the kernel's scalars and
its hidden ``launch`` uniform (constants of the sequence, as ``SequenceBuilder.step``
makes them) reach that worker with no new protocol and no new backend hook. Resident
buffers are read and written in place; numpy arrays are the sequence's inputs, and those
the kernel writes come back as its returns, filled into the caller's arrays as a plain
launch fills them (``Written``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from vyre_core.boundary.messages import Allocate, Body, Download, Free, Upload
from vyre_core.config import DispatchConfig
from vyre_core.deadline import Deadline
from vyre_core.driver.call_forms import verb
from vyre_core.errors import (
    CallerError,
    InvalidConfigError,
    InvalidInputError,
    InvalidSequenceError,
    NoCapableBackendError,
    PipelineInvalidatedError,
)
from vyre_core.ir.dtypes import DType
from vyre_core.kernels.annotations import ArrayType
from vyre_core.kernels.kernel import KernelFunction, Written, axes_of, scalar_argument
from vyre_core.kernels.signature import check_count, parameter_type
from vyre_core.sequence import Sequence as StepSequence
from vyre_core.sequence import SequenceBuilder
from vyre_core.supervisor.rules.requests import Call, Request
from vyre_core.supervisor.shell import PoolHandle

if TYPE_CHECKING:
    from vyre_core.ir import Program
    from vyre_core.pools import Pools
    from vyre_core.routing import RoutingPolicy

Reply = tuple[Body, list[Any]]


class ResidentBuffer:
    """Device memory that stays in one worker between dispatches. It belongs to the
    worker generation that allocated it: after that worker restarts, using it raises
    PipelineInvalidatedError. Each method takes ``timeout`` (seconds, default None: no
    deadline, the call waits only while a live worker runs it)."""

    def __init__(self, pool: PoolHandle, slot: int, generation: int, handle: int,
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

    def _call(self, message: Body, arrays: Sequence[Any] = (),
              timeout: float | None = None, deadline: Deadline | None = None) -> Reply:
        """One request to the buffer's worker, within ``deadline`` (made by the caller's
        call), else ``timeout`` seconds from now."""
        self.refuse_if_stale()
        return self.pool.call(Request(Call(
            message, list(arrays), deadline=deadline or Deadline.after(timeout),
            slot=self.slot, generation=self.generation)))

    @verb("timeout")
    def upload(self, data: Any, *, timeout: float | None = None) -> None:
        self._call(Upload(self.handle), [data], timeout)

    @verb("timeout")
    def download(self, *, timeout: float | None = None) -> bytes:
        return self._call(Download(self.handle), (), timeout)[1][0].tobytes()

    @verb("timeout")
    def free(self, *, timeout: float | None = None) -> None:
        if self.valid:
            self._call(Free(self.handle), (), timeout)




def allocate(pools: Pools, byte_len: int, backend: str | None, timeout: float | None,
             near: ResidentBuffer | None) -> ResidentBuffer:
    """``Driver.allocate_resident``: ``byte_len`` bytes in a worker of ``backend``, or in
    the worker that holds ``near``."""
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
        allocated, _ = near._call(Allocate(int(byte_len)), (), timeout)
        return ResidentBuffer(near.pool, near.slot, near.generation, allocated.handle,
                              int(byte_len))
    if backend is None:
        raise InvalidInputError("allocate_resident needs backend= or near=",
                                "Name the backend, e.g. backend='wgpu'.")
    pool = pools.open(backend)
    request = Request(Call(Allocate(int(byte_len)), [], deadline=Deadline.after(timeout)))
    allocated, _ = pool.call(request)
    slot, generation = request.tracking.served_by
    return ResidentBuffer(pool, slot, generation, allocated.handle, int(byte_len))


def _check_device(routing: RoutingPolicy, work: Program | StepSequence,
                  buffer: ResidentBuffer, deadline: Deadline) -> None:
    """Refuse work for resident buffers whose device cannot run it (a pool with one
    worker set per device: capabilities differ per device)."""
    pool = buffer.pool
    if not pool.pinned:
        return
    device = pool.device_of(buffer.slot)
    devices = routing.route(work, pool.backend, deadline).devices
    if devices is not None and device not in devices:
        raise NoCapableBackendError(
            f"the resident buffers live on device {device} of {pool.backend!r}, which "
            f"cannot run {type(work).__name__.lower()} {work.fingerprint()[:12]} (its "
            f"devices that can: {', '.join(map(str, devices))})",
            "Allocate the buffers with allocate_resident(near=...) next to a buffer on a "
            "capable device, or run the work without resident buffers.",
            rejections={pool.backend: [f"device {device} cannot run it"]})

Worker = tuple[PoolHandle, int, int]  # (pool, slot, generation): one worker generation


def one_worker(buffers: Sequence[ResidentBuffer], names: Sequence[str],
               worker: Worker | None = None,
               error: type[CallerError] = InvalidInputError) -> Worker:
    """The worker all of ``buffers`` (called ``names``) live in, and ``worker`` too when
    given (a compiled sequence's): the resident buffers of one call must share one worker,
    which runs the call (a dispatch on resident buffers, a launch, a sequence). ``error``:
    the class a refusal raises (a sequence's: ``InvalidSequenceError``, as its other
    refusals)."""
    places = {(b.pool, b.slot, b.generation) for b in buffers}
    if worker is not None:
        places.add(worker)
    if len(places) == 1:
        return places.pop()
    where = [f"{name!r} in {b.pool.backend!r} worker {b.slot} generation {b.generation}"
             for name, b in zip(names, buffers, strict=True)]
    if worker is not None:
        where.append(f"the compiled sequence in {worker[0].backend!r} worker {worker[1]} "
                     f"generation {worker[2]}")
    raise error(
        f"resident buffers must share one worker: {'; '.join(where) or 'none was given'}",
        "Allocate them in one worker: drv.allocate_resident(nbytes, near=first_buffer) "
        "(a compiled sequence's: near a buffer of the worker it was compiled in).")

#: DispatchConfig fields that shape one dispatch's grid: a resident launch's grid is its
#: ``dim`` over the kernel's workgroup, as a sequence step's is.
_PER_DISPATCH = ("workgroup_override", "grid_override", "dispatch_elements", "dim")


class ResidentLaunch(Written):
    """One launch on resident buffers: ``sequence`` (the kernel as its one step),
    ``inputs`` (the numpy arrays, in parameter order), ``resident`` (parameter name ->
    buffer), ``config`` (the sequence's), and the numpy arrays the kernel writes
    (``Written``: its returns, in parameter order)."""

    def __init__(self, kernel: KernelFunction, dim: Any, args: Sequence[Any],
                 resident: Mapping[int, ResidentBuffer], shapes: Any,
                 config: DispatchConfig) -> None:
        params = kernel.params
        check_count(params, args)
        axes = axes_of(dim)
        shapes = _checked_shapes(shapes, params.names, resident)
        types = tuple(_resident_type(name, declared, resident[p]) if p in resident
                      else parameter_type(name, declared, value)
                      for p, (name, declared, value) in
                      enumerate(zip(params.names, params.declared, args, strict=True)))
        one_worker(list(resident.values()), [params.names[p] for p in resident])
        _each_once(params.names, resident)
        written = kernel.compiled_for(types, axes).written
        mine = [p for p in written if p not in resident]
        super().__init__([args[p] for p in mine], [params.names[p] for p in mine])
        self.config, constants = _split(config)
        self.sequence = _sequence(kernel, dim, args, types, resident, shapes,
                                  [params.names[p] for p in mine], constants)
        self.inputs = [args[p].reshape(-1) if isinstance(t, ArrayType) else
                       scalar_argument(name, args[p], t)
                       for p, (name, t) in enumerate(zip(params.names, types, strict=True))
                       if p not in resident and _is_input(params.declared[p], t)]
        self.resident = {params.names[p]: buf for p, buf in resident.items()}


def _is_input(declared: Any, t: ArrayType | DType) -> bool:
    """Whether a numpy argument travels as an input of the sequence: an array, or a
    scalar whose parameter is annotated."""
    return isinstance(t, ArrayType) or isinstance(declared, DType)


def _resident_type(name: str, declared: Any, buf: ResidentBuffer) -> ArrayType:
    """A resident buffer's parameter must be an annotated array (a buffer has bytes, no
    dtype), whose elements fill it exactly."""
    if not isinstance(declared, ArrayType):
        wants = f"a {declared.value} number" if isinstance(declared, DType) else \
            "an array whose dtype it does not say"
        raise InvalidInputError(
            f"argument {name!r} is a ResidentBuffer, and the kernel wants {wants}",
            f"Pass a number for {name!r}." if isinstance(declared, DType) else
            f"Annotate the parameter: {name}: vyre.Array[f32] (a resident buffer holds "
            "bytes; the annotation says their dtype), or pass a numpy array.")
    size = declared.dtype.storage_bytes
    if buf.byte_len == 0 or buf.byte_len % size:
        raise InvalidInputError(
            f"argument {name!r} is a resident buffer of {buf.byte_len} bytes, not a whole, "
            f"non-zero number of {declared.dtype.value} elements ({size} bytes each)",
            f"Allocate it with n * {size} bytes: drv.allocate_resident(n * {size}, ...).")
    return declared


def _checked_shapes(shapes: Any, names: Sequence[str],
                    resident: Mapping[int, ResidentBuffer]) -> dict[str, Any]:
    """``shapes=``: the extents of shaped resident parameters only (a numpy array has its
    own); the kernel step checks each against its parameter and buffer."""
    if shapes is None:
        return {}
    own = {names[p] for p in resident}
    if not isinstance(shapes, Mapping) or not all(isinstance(k, str) for k in shapes):
        raise InvalidInputError(f"shapes= is a {type(shapes).__name__}, not a dict of "
                                "parameter names", "Pass shapes={'img': (rows, cols)} for "
                                "each shaped parameter bound to a resident buffer.")
    for name in shapes:
        if name in names and name not in own:
            raise InvalidInputError(f"shapes= names {name!r}, which is not given a "
                                    "resident buffer (a numpy array has its own shape)",
                                    f"Leave {name!r} out of shapes=.")
    return dict(shapes)


def _each_once(names: Sequence[str], resident: Mapping[int, ResidentBuffer]) -> None:
    """Each of a launch's resident buffers bound to one parameter only."""
    seen: dict[int, str] = {}
    for p, buf in resident.items():
        other = seen.setdefault(buf.handle, names[p])
        if other != names[p]:
            raise InvalidInputError(f"one ResidentBuffer is passed as both {other!r} and "
                                    f"{names[p]!r}", "Pass a distinct buffer for each "
                                    "parameter (a kernel that reads one and writes the "
                                    "other would see either).")


def _split(config: DispatchConfig) -> tuple[DispatchConfig, dict[str, Any]]:
    """The sequence's config and the kernel's constants (its step's): a resident launch
    runs ``dim`` over the kernel's workgroup, so a grid chosen in ``config`` is refused."""
    if config.tuned:
        raise InvalidConfigError("tuned=True has no tuned choice to apply in a launch on "
                                 "resident buffers", "Leave tuned out.")
    chosen = [f for f in _PER_DISPATCH if getattr(config, f) is not None]
    if config.fixpoint_iterations != 1:
        chosen.append("fixpoint_iterations")
    if chosen:
        raise InvalidConfigError(
            f"a launch on resident buffers runs dim= over the kernel's workgroup; its "
            f"config sets {', '.join(chosen)}",
            "Leave them out: pass dim=, and name the workgroup with "
            "@vyre.kernel(workgroup=(...))." )
    constants = dict(config.constants)
    return (config.replace(constants=()) if constants else config), constants


def _sequence(kernel: KernelFunction, dim: Any, args: Sequence[Any],
              types: tuple[ArrayType | DType, ...], resident: Mapping[int, ResidentBuffer],
              shapes: dict[str, Any], returns: list[str],
              constants: dict[str, Any]) -> StepSequence:
    """The launch as a one-step sequence: resident buffers, then numpy arrays and
    annotated scalars as its inputs (a new value is no new sequence), an unannotated
    scalar as a number (a constant: a step types a parameter bound to a buffer as an
    array unless annotated)."""
    b = SequenceBuilder()
    bind: dict[str, Any] = {}
    for p, (name, t) in enumerate(zip(kernel.params.names, types, strict=True)):
        if p in resident:
            b.resident(name, t.dtype, resident[p].byte_len // t.dtype.storage_bytes)
        elif isinstance(t, ArrayType):
            b.input(name, t.dtype, int(np.size(args[p])))
            if t.ndim > 1:
                shapes[name] = tuple(args[p].shape)
        elif _is_input(kernel.params.declared[p], t):
            b.input(name, t, 1)
        else:
            bind[name] = args[p]
    try:
        b.step(kernel, bind, dim=dim, shapes=shapes, constants=constants or None)
        return b.build(returns=returns)
    except InvalidSequenceError as exc:  # (a shape or scalar of this launch's arguments)
        raise InvalidInputError(exc.cause, exc.fix) from None
