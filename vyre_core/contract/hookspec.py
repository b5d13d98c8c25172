"""The frozen backend contract. This file *is* the contract: a backend author reads it
and knows every hook, when it is called, what it takes and returns, and its default.

A backend is a plugin object (usually a module) with ``VYRE_CONTRACT = 1`` and hook
implementations marked with ``vyre_core.contract.hookimpl``. Only ``vyre_backend_id``
and ``vyre_dispatch`` are required; every other hook has the conservative default named
in its docstring (implemented in ``defaults.py``), and a backend's own implementation
always wins over it. Every hook is first-result: exactly one implementation answers.

Frozen means: hooks are never removed and their arguments never change within contract
major version 1 (``contract.json`` is the committed snapshot, checked by the test suite).
A new hook may be added only together with its default.

Where hooks run: identity hooks (id, version, precedence, claims, reference oracle) are
pure and may be called in the parent to register the backend; every other hook runs only
inside the backend's worker process, where the device lives.

Arguments: ``program`` is a validated ``vyre_core.ir.Program`` whose workgroup already
includes any override and whose specialization constants are already literals;
``inputs`` is one 1-D numpy array per input buffer, of the buffer's storage dtype and
bound length (docs/semantics.md, "Input/output ABI"); ``config`` is a
``vyre_core.DispatchConfig`` whose ``grid_override`` is always set to the grid to launch.
Outputs are one 1-D array (or bytes) per output buffer, in ABI order.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pluggy

from vyre_core.contract.types import (
    CacheSnapshot,
    Capabilities,
    NativePipeline,
    PendingDispatch,
    SequenceRun,
    TimedDispatch,
)

PROJECT = "vyre"
CONTRACT_MAJOR = 1

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

# -- Identity (pure; may run in the parent) ------------------------------------------------


@hookspec(firstresult=True)
def vyre_backend_id() -> str:
    """Stable, unique id of the backend (``"wgpu"``, ``"reference"``). REQUIRED."""


@hookspec(firstresult=True)
def vyre_backend_version() -> str:
    """Implementation version, for reports and pipeline cache keys.
    Default: ``"unspecified"``."""


@hookspec(firstresult=True)
def vyre_backend_precedence() -> int:
    """Routing rank: lower is tried first among capable backends. Default: ``1000``."""


@hookspec(firstresult=True)
def vyre_backend_claims() -> dict[str, Any]:
    """Static capability claims used for routing before the worker has probed the device:
    a dict of ``Capabilities`` field names to values. Must not touch a device.
    Default: ``{}`` (the conservative floor)."""


@hookspec(firstresult=True)
def vyre_is_reference_oracle() -> bool:
    """Whether this backend is the reference every other one is compared with.
    Default: ``False``."""


@hookspec(firstresult=True)
def vyre_supported_ops() -> frozenset[str]:
    """Operation ids (``vyre_core.ir.ALL_OPS`` vocabulary) this backend executes; the
    ops the IR gained after this contract froze (``ir.NEWER_OPS``) only when named here.
    Default: ``ir.DEFAULT_OPS``, every op but the newer ones. Deprecated since vyre
    0.1.0, removed in 1.0.0: the ``supported_ops`` of ``vyre_backend_claims`` and of
    ``vyre_capabilities``."""


@hookspec(firstresult=True)
def vyre_lowers_math_library(version: str) -> bool:
    """Whether this backend computes the operations of the math library of ``version``
    (``vyre_core.mathlib``) itself, giving the bytes the library's functions give on
    every input; otherwise the worker host writes those functions out into each program
    before the backend sees it. Default: ``False``."""


# -- Dispatch -------------------------------------------------------------------------------


@hookspec(firstresult=True)
def vyre_dispatch(program: Any, inputs: list[np.ndarray], config: Any) -> list[np.ndarray]:
    """Run one dispatch and return its outputs. ``inputs`` are owned: the backend may
    modify them. Results must equal the reference byte for byte (floats within
    ``config.ulp_budget``). Raise a ``vyre_core.errors.VyreError`` on failure. REQUIRED."""


@hookspec(firstresult=True)
def vyre_dispatch_borrowed(program: Any, inputs: list[np.ndarray],
                           config: Any) -> list[np.ndarray]:
    """Like ``vyre_dispatch`` but ``inputs`` are read-only views of the caller's memory;
    the framework always enters through this hook.
    Default: copy the inputs once and call ``vyre_dispatch``."""


@hookspec(firstresult=True)
def vyre_dispatch_timed(program: Any, inputs: list[np.ndarray], config: Any) -> TimedDispatch:
    """A borrowed dispatch that also reports its wall time and, where the device can
    measure it, device time. Called when ``config.profile`` is true.
    Default: wall time around ``vyre_dispatch_borrowed``; ``device_ns`` None."""


@hookspec(firstresult=True)
def vyre_dispatch_into(program: Any, inputs: list[np.ndarray], config: Any,
                       outputs: list[np.ndarray]) -> None:
    """A borrowed dispatch writing into caller-owned, preallocated ``outputs`` (one
    writable array per output buffer, of the right dtype and length).
    Default: ``vyre_dispatch_borrowed`` then copy into ``outputs``."""


@hookspec(firstresult=True)
def vyre_compile(program: Any, config: Any) -> NativePipeline | None:
    """Compile once for many dispatches. Return an object with
    ``dispatch(inputs, config) -> outputs`` identical to ``vyre_dispatch``, or None.
    Default: ``None`` (the framework wraps a passthrough pipeline over ``vyre_dispatch``)."""


@hookspec(firstresult=True)
def vyre_pipeline_cache_snapshot() -> CacheSnapshot | None:
    """Real pipeline-cache hit/miss counters. Default: ``None`` (no cache to report)."""


@hookspec(firstresult=True)
def vyre_dispatch_async(program: Any, inputs: list[np.ndarray], config: Any) -> PendingDispatch:
    """Start a dispatch and return a handle with ``is_ready()`` and ``result(timeout)``.
    Default: run ``vyre_dispatch_borrowed`` now and return an already-ready handle."""


@hookspec(firstresult=True)
def vyre_dispatch_sequence(sequence: Any, inputs: dict[str, np.ndarray],
                           resident: dict[str, int], config: Any) -> SequenceRun:
    """Run a ``vyre_core.sequence.Sequence`` (checked, every step within this backend's
    limits) as one unit: ``inputs`` maps each input buffer's name to a read-only array,
    ``resident`` each resident buffer's name to its handle (written back in place).
    Results must equal running the steps one by one (docs/sequences.md).
    Default: run each step through ``vyre_dispatch_borrowed`` over arrays in the worker,
    resident buffers downloaded first and the written ones uploaded at the end."""


# -- Resident buffers -----------------------------------------------------------------------


@hookspec(firstresult=True)
def vyre_allocate_resident(byte_len: int) -> int:
    """Allocate a device-resident buffer; return an integer handle meaningful only to
    this backend. Default: raise ``UnsupportedFeatureError``."""


@hookspec(firstresult=True)
def vyre_upload_resident(handle: int, data: bytes) -> None:
    """Write ``data`` (exactly the allocated length) into a resident buffer.
    Default: raise ``UnsupportedFeatureError``."""


@hookspec(firstresult=True)
def vyre_download_resident(handle: int) -> bytes:
    """Read a resident buffer back. Default: raise ``UnsupportedFeatureError``."""


@hookspec(firstresult=True)
def vyre_free_resident(handle: int) -> None:
    """Release a resident buffer. Default: raise ``UnsupportedFeatureError``."""


@hookspec(firstresult=True)
def vyre_dispatch_resident(program: Any, handles: list[int], config: Any) -> TimedDispatch:
    """Dispatch with resident buffers: one handle per non-workgroup buffer in declaration
    order; output and read_write buffers are written back into their handles (the
    returned ``outputs`` may be empty). Default: raise ``UnsupportedFeatureError``."""


# -- Capabilities (run in the worker; report honestly) ----------------------------------------
# True is a promise that the lowering emits the feature and the device has it.


@hookspec(firstresult=True)
def vyre_capabilities() -> Capabilities:
    """Everything the backend can do on its device, as one ``Capabilities`` record (or a
    dict of its fields), device facts such as the adapter name in its ``extra``: asked
    once per worker generation, so a probe of the device belongs here. Default: the record
    built from the per-capability queries below and ``vyre_device_profile``, which contract
    1 had in its place (each deprecated since vyre 0.1.0, removed in 1.0.0)."""


# The per-capability queries of contract 1 (deprecated since vyre 0.1.0, removed in 1.0.0).
# Each one's default answers from the backend's ``vyre_capabilities`` where it implements
# that hook, so old callers and new backends agree.


@hookspec(firstresult=True)
def vyre_supports_subgroup_ops() -> bool:
    """Subgroup operations (``ir.SubgroupOp``) run, over subgroups of the sizes
    ``vyre_subgroup_size_range`` gives, formed as docs/semantics.md says. Default:
    ``False``. Deprecated since vyre 0.1.0, removed in 1.0.0: part of
    ``vyre_capabilities``."""


@hookspec(firstresult=True)
def vyre_supports_f16() -> bool:
    """f16 is computed in half precision (not emulated in f32). Default: ``False``.
    Deprecated since vyre 0.1.0, removed in 1.0.0: part of ``vyre_capabilities``."""


@hookspec(firstresult=True)
def vyre_supports_bf16() -> bool:
    """bfloat16 is lowered natively. Default: ``False``. Deprecated since vyre 0.1.0,
    removed in 1.0.0: part of ``vyre_capabilities``."""


@hookspec(firstresult=True)
def vyre_supports_f64() -> bool:
    """f64 is computed in double precision. Default: ``False``. Deprecated since vyre
    0.1.0, removed in 1.0.0: part of ``vyre_capabilities``."""


@hookspec(firstresult=True)
def vyre_supports_tensor_cores() -> bool:
    """Matrix-engine intrinsics are emitted. Default: ``False``. Deprecated since vyre
    0.1.0, removed in 1.0.0: part of ``vyre_capabilities``."""


@hookspec(firstresult=True)
def vyre_supports_async_compute() -> bool:
    """A real asynchronous queue overlaps copies and compute. Default: ``False``.
    Deprecated since vyre 0.1.0, removed in 1.0.0: part of ``vyre_capabilities``."""


@hookspec(firstresult=True)
def vyre_supports_indirect_dispatch() -> bool:
    """Indirect launch records can be executed. Default: ``False``. Deprecated since
    vyre 0.1.0, removed in 1.0.0: part of ``vyre_capabilities``."""


@hookspec(firstresult=True)
def vyre_supports_grid_sync() -> bool:
    """A whole-grid barrier exists inside one dispatch. Default: ``False``. Deprecated
    since vyre 0.1.0, removed in 1.0.0: part of ``vyre_capabilities``."""


@hookspec(firstresult=True)
def vyre_is_distributed() -> bool:
    """The backend spans more than one device or node. Default: ``False``. Deprecated
    since vyre 0.1.0, removed in 1.0.0: part of ``vyre_capabilities``."""


@hookspec(firstresult=True)
def vyre_max_workgroup_size() -> tuple[int, int, int]:
    """Largest workgroup per axis. Default: ``(1, 1, 1)``. Deprecated since vyre 0.1.0,
    removed in 1.0.0: part of ``vyre_capabilities``."""


@hookspec(firstresult=True)
def vyre_max_workgroups_per_dimension() -> int:
    """Most workgroups along one grid axis. Default: ``1``. Deprecated since vyre 0.1.0,
    removed in 1.0.0: part of ``vyre_capabilities``."""


@hookspec(firstresult=True)
def vyre_max_invocations_per_workgroup() -> int:
    """Most invocations in one workgroup. Default: the product of
    ``vyre_max_workgroup_size``. Deprecated since vyre 0.1.0, removed in 1.0.0: part of
    ``vyre_capabilities``."""


@hookspec(firstresult=True)
def vyre_subgroup_size() -> int | None:
    """Native subgroup width when known. Default: ``None``. Deprecated since vyre 0.1.0,
    removed in 1.0.0 (contract 2): ``subgroup_size_range`` in ``vyre_capabilities``."""


@hookspec(firstresult=True)
def vyre_subgroup_size_range() -> tuple[int, int] | None:
    """The smallest and largest subgroup size a program may declare and be run with
    exactly: ``(n, n)`` for a device that always forms subgroups of ``n``, a range for a
    backend that forms whatever size the program says. A device that picks a size per
    pipeline promises none. Default: ``(n, n)`` when the backend still implements the
    deprecated ``vyre_subgroup_size`` and it returns ``n``, else ``None``. Deprecated
    since vyre 0.1.0, removed in 1.0.0: part of ``vyre_capabilities``."""


@hookspec(firstresult=True)
def vyre_max_storage_buffer_bytes() -> int:
    """Largest storage buffer in bytes; 0 means "not reported", not "unlimited".
    Default: ``0``. Deprecated since vyre 0.1.0, removed in 1.0.0: part of
    ``vyre_capabilities``."""


@hookspec(firstresult=True)
def vyre_max_workgroup_memory_bytes() -> int:
    """Workgroup memory available to one workgroup, in bytes. Default: ``0``. Deprecated
    since vyre 0.1.0, removed in 1.0.0: part of ``vyre_capabilities``."""


@hookspec(firstresult=True)
def vyre_device_profile() -> dict[str, Any]:
    """Every capability in one dict (``Capabilities`` fields plus backend facts such as
    the adapter name). Default: ``vyre_capabilities`` as a dict, its ``extra`` spread in,
    with ``"backend"``. Deprecated since vyre 0.1.0, removed in 1.0.0: part of
    ``vyre_capabilities``."""


# -- Devices (worker only; before vyre_prepare) ------------------------------------------


@hookspec(firstresult=True)
def vyre_devices() -> list[Any]:
    """The devices this backend can run on, in a stable order, as ``DeviceInfo`` values
    (or dicts of their fields). Called in the worker before ``vyre_prepare`` and must not
    open any device: a pool asks it to place one worker per device.
    Default: one device, id 0, named after the backend."""


@hookspec(firstresult=True)
def vyre_select_device(device_id: int) -> None:
    """Called once in the worker, before ``vyre_prepare``, when its pool pins it to the
    device ``device_id`` (one of ``vyre_devices``): every later hook uses that device
    only, and ``vyre_prepare`` opens no other. Default: accept 0, refuse any other id
    with ``UnsupportedFeatureError``."""


# -- Lifecycle ---------------------------------------------------------------------------------


@hookspec(firstresult=True)
def vyre_prepare() -> None:
    """Called once in the worker before the first request: acquire the device, warm
    caches. Default: no-op."""


@hookspec(firstresult=True)
def vyre_flush() -> None:
    """Drain queued work and wait for it. Default: no-op."""


@hookspec(firstresult=True)
def vyre_shutdown() -> None:
    """Release device resources; the backend is not used afterwards. Default: no-op."""


@hookspec(firstresult=True)
def vyre_device_lost() -> bool:
    """Whether the device was lost since the last successful dispatch. Default: ``False``."""


@hookspec(firstresult=True)
def vyre_try_recover() -> None:
    """Re-acquire a lost device and invalidate every compiled pipeline and resident buffer
    made before the loss; raise if that is impossible.
    Default: raise ``UnsupportedFeatureError`` (recovery is opt-in)."""
