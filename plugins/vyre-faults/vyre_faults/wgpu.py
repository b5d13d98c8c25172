"""The wgpu backend, losing its device on request, for fault-injection tests.

Backend id ``faults-wgpu``. It is ``vyre_wgpu.backend`` itself (the same hook functions,
the same device, the same pipelines), except:

* its precedence is 6000 (``VYRE_FAULTS_WGPU_PRECEDENCE`` overrides it), after every
  real backend: routing never picks it unless it is named;
* per dispatch, ``DispatchConfig.label`` steers a device loss, on every hook the host
  calls (``vyre_dispatch``, ``vyre_dispatch_borrowed``, ``vyre_dispatch_timed`` and the
  compiled pipelines of ``vyre_compile``):

  - ``fault:destroy_device`` (a soft loss): the wgpu device is destroyed
    (``Device.lose()``), then the dispatch runs and fails on the lost device;
  - ``fault:destroy_then_submit`` (a hard loss): a command buffer is encoded, the device
    destroyed, and the command buffer submitted anyway with raw wgpu calls. wgpu-native
    treats that as fatal: it panics inside ``wgpuQueueSubmit``, the panic cannot unwind
    across the C boundary, and the process dies by SIGABRT (verified on Mesa lavapipe with
    wgpu 0.32). Should a wgpu version ever return from that submit instead, the process
    aborts by hand, saying so on stderr first.

Like ``vyre_wgpu.backend`` it imports no wgpu at module level: registration stays pure.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np

import vyre_wgpu.backend as wgpu_backend
from vyre_core.contract import TimedDispatch, hookimpl
from vyre_core.errors import InvalidConfigError
from vyre_core.testing.faults import parse_label

VYRE_CONTRACT = 1
BACKEND_ID = "faults-wgpu"
PRECEDENCE_ENV = "VYRE_FAULTS_WGPU_PRECEDENCE"
DEFAULT_PRECEDENCE = 6000

SOFT_LOSS = "destroy_device"
HARD_LOSS = "destroy_then_submit"


# -- the wgpu backend's hooks, verbatim (they carry their hookimpl markers) ---------------

vyre_backend_version = wgpu_backend.vyre_backend_version
vyre_backend_claims = wgpu_backend.vyre_backend_claims
vyre_pipeline_cache_snapshot = wgpu_backend.vyre_pipeline_cache_snapshot
vyre_capabilities = wgpu_backend.vyre_capabilities
vyre_prepare = wgpu_backend.vyre_prepare
vyre_flush = wgpu_backend.vyre_flush
vyre_shutdown = wgpu_backend.vyre_shutdown
vyre_device_lost = wgpu_backend.vyre_device_lost
vyre_try_recover = wgpu_backend.vyre_try_recover


# -- identity ------------------------------------------------------------------------------

@hookimpl
def vyre_backend_id() -> str:
    return BACKEND_ID


@hookimpl
def vyre_backend_precedence() -> int:
    return int(os.environ.get(PRECEDENCE_ENV, str(DEFAULT_PRECEDENCE)))


# -- faults --------------------------------------------------------------------------------

def destroy_device() -> None:
    """The soft loss: the wgpu device is destroyed under the backend."""
    wgpu_backend.device().lose()


def destroy_then_submit() -> None:
    """The hard loss: submit work to a destroyed device; wgpu-native aborts the process."""
    import wgpu  # only here, as in vyre_wgpu.adapter

    dev = wgpu_backend.device()
    usage = wgpu.BufferUsage
    src = dev.device.create_buffer(label="fault-src", size=16, usage=usage.COPY_SRC)
    dst = dev.device.create_buffer(label="fault-dst", size=16, usage=usage.COPY_DST)
    encoder = dev.device.create_command_encoder()
    encoder.copy_buffer_to_buffer(src, 0, dst, 0, 16)
    commands = encoder.finish()
    dev.lose()
    try:
        dev.queue.submit([commands])  # SIGABRT here: a panic in wgpuQueueSubmit
        outcome = "returned"
    except Exception as exc:
        outcome = f"raised {type(exc).__name__}: {exc}"
    print(f"vyre_faults_wgpu: submitting to a destroyed device {outcome} instead of "
          "aborting; aborting by hand", file=sys.stderr, flush=True)
    os.abort()


def _inject(config: Any) -> None:
    kind, _ = parse_label(getattr(config, "label", None)) or ("", "")
    if kind == SOFT_LOSS:
        destroy_device()
    elif kind == HARD_LOSS:
        destroy_then_submit()
    elif kind:
        raise InvalidConfigError(f"backend {BACKEND_ID!r} injects only {SOFT_LOSS} and "
                                 f"{HARD_LOSS}, not {kind!r}",
                                 "Name the backend 'faults' for every other fault.")


# -- dispatch: the wgpu backend's, after the fault ------------------------------------------

@hookimpl
def vyre_dispatch(program, inputs, config) -> list[np.ndarray]:
    _inject(config)
    return wgpu_backend.vyre_dispatch(program, inputs, config)


@hookimpl
def vyre_dispatch_borrowed(program, inputs, config) -> list[np.ndarray]:
    _inject(config)
    return wgpu_backend.vyre_dispatch_borrowed(program, inputs, config)


@hookimpl
def vyre_dispatch_timed(program, inputs, config) -> TimedDispatch:
    _inject(config)
    return wgpu_backend.vyre_dispatch_timed(program, inputs, config)


class FaultPipeline:
    """A compiled wgpu pipeline whose dispatch honours the fault labels too."""

    def __init__(self, pipeline: wgpu_backend.WgpuPipeline) -> None:
        self.pipeline = pipeline

    def dispatch(self, inputs: list[np.ndarray], config: Any) -> list[np.ndarray]:
        _inject(config)
        return self.pipeline.dispatch(inputs, config)


@hookimpl
def vyre_compile(program, config) -> FaultPipeline:
    return FaultPipeline(wgpu_backend.vyre_compile(program, config))
