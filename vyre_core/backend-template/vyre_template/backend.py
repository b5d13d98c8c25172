"""The template backend: every hook a real vyre backend needs, around a stand-in device.

Copy the distribution, rename it, and replace the part marked THE DEVICE below; the hooks
around it can stay as they are. The stand-in is vyre's reference interpreter, so every
result is the oracle's by construction. Its capabilities are deliberately fewer than the
interpreter's (no f16, no f64, WebGPU-sized workgroups and workgroup memory) to show the
honesty rules at work: what is not claimed is routed elsewhere, and refused here when it
arrives anyway.

Where the code runs: discovery (in the parent) imports only this module and calls the
identity hooks, so the module imports nothing heavy and opens nothing. Every other hook
runs in the backend's own worker process, where ``vyre_prepare`` opens the device.
"""

from __future__ import annotations

import threading
from importlib.metadata import version
from typing import Any

import numpy as np

from vyre_core.config import DispatchConfig
from vyre_core.contract import Capabilities, hookimpl
from vyre_core.errors import UnsupportedFeatureError
from vyre_core.ir import Program
from vyre_core.limits import NO_GRID_LIMIT
from vyre_core.routing import rejection_reasons

VYRE_CONTRACT = 1
BACKEND_ID = "template"  # must equal the entry-point name in pyproject.toml
DISTRIBUTION = "vyre-template-backend"

#: What routing may assume before a worker has opened the device. Never claim more than
#: every device you support reports: the worker's probe replaces these figures, and a
#: program routed here on a claim the probe withdraws costs a second routing decision.
CLAIMS: dict[str, Any] = {
    "supports_f16": False,
    "supports_f64": False,
    "max_workgroup_size": (256, 256, 64),
    "max_invocations_per_workgroup": 256,
    "max_workgroups_per_dimension": NO_GRID_LIMIT,  # no per-axis limit (docs/semantics.md)
    "max_storage_buffer_bytes": 1 << 28,
    "max_workgroup_memory_bytes": 16384,
    # "supported_ops" left out: every op but those the IR gained after the contract froze
    # (ir.NEWER_OPS: stride and while loops, break and continue, subgroups, the bit and
    # rounding ops, tan, tanh, exp2, log2, pow, atan2, bitcast, table, the 8-, 16- and
    # 64-bit integers). Name the ops here once your device runs them.
}


# == THE DEVICE: replace this part with your own ==========================================
# These three functions are all that touches hardware. They run only in the worker
# process, called by the hooks below; import your device library inside them, never at
# the top of the module.

def _device_open() -> dict[str, Any]:
    """Open the device (keep its handle in a module global of your own) and return what
    it reports, as ``vyre_core.contract.Capabilities`` field names. Called once per
    worker, by ``vyre_prepare``; raising here fails the worker's start with your message.

    TEMPLATE: there is no device to open. The stand-in reports ``CLAIMS``: what the
    template chooses to promise, less than the interpreter could do."""
    return {**CLAIMS, "extra": {"device": "reference interpreter (template stand-in)"}}


def _device_run(program: Program, inputs: list[np.ndarray],
                grid: tuple[int, int, int]) -> list[np.ndarray]:
    """Run ``program`` over ``grid`` workgroups and return one 1-D array per output
    buffer, in ABI order. ``inputs`` are bound and sized already (one read-only 1-D array
    per input buffer, of its storage dtype); launch limits were checked against the
    device's report. Results must equal the reference byte for byte (floats within the
    dispatch's ULP budget).

    TEMPLATE: the stand-in device is the reference interpreter, imported here so that
    discovery never loads it. Replace the body with your lowering, upload, launch and
    read-back."""
    from vyre_reference.interpreter import execute

    return execute(program, inputs, grid)


def _device_close() -> None:
    """Release the device; the worker is about to exit. TEMPLATE: nothing to release."""


# == end of the device part ================================================================

_lock = threading.Lock()
_caps: Capabilities | None = None  # the open device's report; None while it is closed


def _capabilities() -> Capabilities:
    """The device's report, opening the device on first use (``vyre_prepare`` normally
    has). ``vyre_capabilities`` answers from it, so the worker reports what it probed."""
    global _caps
    with _lock:
        if _caps is None:
            _caps = Capabilities.from_claims(_device_open())
        return _caps


def _refuse_unclaimed(program: Program) -> None:
    """Raise ``UnsupportedFeatureError`` when ``program`` needs anything the device did not
    report. Routing never sends such a program here, but a caller can (``dispatch_on``,
    the conformance kit): running it anyway would be a lie. Routing's own check decides,
    so this backend and the router can never disagree."""
    reasons = rejection_reasons(program.requirements(), _capabilities())
    if reasons:
        raise UnsupportedFeatureError(
            f"backend {BACKEND_ID!r} does not run program {program.fingerprint()[:12]}: "
            f"{'; '.join(reasons)}",
            f"Let routing choose a backend (do not name {BACKEND_ID!r}), or keep the "
            f"program within what {BACKEND_ID!r} reports (`vyre backends --probe --json`).")


# -- identity: pure, called in the parent at discovery ------------------------------------

@hookimpl
def vyre_backend_id() -> str:
    return BACKEND_ID


@hookimpl
def vyre_backend_version() -> str:
    return version(DISTRIBUTION)  # one source of truth: pyproject.toml


@hookimpl
def vyre_backend_precedence() -> int:
    # after wgpu (100), before the cpu engine (500) and the reference (900); equal to no
    # bundled backend's (a tie is broken by id). Below 100 to be tried before wgpu.
    return 300


@hookimpl
def vyre_backend_claims() -> dict[str, Any]:
    return dict(CLAIMS)


# -- dispatch: in the worker --------------------------------------------------------------

@hookimpl
def vyre_dispatch(program: Program, inputs: list[np.ndarray],
                  config: DispatchConfig) -> list[np.ndarray]:
    _refuse_unclaimed(program)
    return _device_run(program, inputs, config.grid_override)


@hookimpl
def vyre_dispatch_borrowed(program: Program, inputs: list[np.ndarray],
                           config: DispatchConfig) -> list[np.ndarray]:
    # The framework enters here with read-only views; the device only reads its inputs,
    # so the default's defensive copy is skipped.
    return vyre_dispatch(program, inputs, config)


@hookimpl
def vyre_compile(program: Program, config: DispatchConfig) -> None:
    """Refuse at compile, where the Driver treats a refusal as a late routing rejection and
    sends the program to the next capable backend. Returning None lets the framework wrap
    ``vyre_dispatch`` in a pipeline; a device that compiles kernels returns an object
    with ``dispatch(inputs, config)`` holding the compiled kernel instead."""
    _refuse_unclaimed(program)


# -- capabilities: in the worker, answered from the device's report ----------------------

@hookimpl
def vyre_capabilities() -> Capabilities:
    """The whole record, as the open device reported it. A field left out keeps the
    contract's conservative floor (no subgroups, no bf16, ...); facts beyond the fields
    (the device's name) go in ``extra`` and reach `vyre backends --probe`."""
    return _capabilities()


# -- lifecycle: in the worker -------------------------------------------------------------

@hookimpl
def vyre_prepare() -> None:
    _capabilities()  # open the device before the first request, so a failure shows at start


@hookimpl
def vyre_shutdown() -> None:
    global _caps
    with _lock:
        if _caps is not None:
            _device_close()
            _caps = None
