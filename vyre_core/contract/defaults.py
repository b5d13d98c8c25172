"""The conservative defaults of every hook, as a plugin of their own.

They answer only where a backend does not: ``LoadedBackend`` routes each hook to the
backend's implementation when it has one, whatever the order of registration. Defaults
that derive from other hooks (borrowed -> dispatch, invocations -> workgroup size) go
back through ``call`` so they see the backend's answers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any

import numpy as np

from vyre_core.abi import check_outputs
from vyre_core.contract.hookspec import hookimpl
from vyre_core.contract.types import (
    FACTS_NOW_FIELDS,
    Capabilities,
    DeviceInfo,
    ReadyPending,
    SequenceRun,
    TimedDispatch,
    Timing,
    is_count,
    wall_clock_ns,
)
from vyre_core.deprecations import CAPABILITY_QUERIES
from vyre_core.errors import UnsupportedFeatureError
from vyre_core.sequence.run import run_sequence, step_config

DEFAULT_PRECEDENCE = 1000
#: The conservative floor of every capability: what a backend that claims nothing has.
FLOOR = Capabilities()
_FIELDS = {f.name for f in fields(Capabilities)}


class ConservativeDefaults:
    """Hook implementations with exactly the contract's defaults."""

    def __init__(self, call: Callable[..., Any], implements: Callable[[str], bool]) -> None:
        self.call, self.implements = call, implements

    def _unsupported(self, what: str) -> UnsupportedFeatureError:
        backend = self.call("vyre_backend_id")
        return UnsupportedFeatureError(f"backend {backend!r} does not support {what}",
                                       f"Use a backend that supports {what}, or avoid it.")

    # identity
    @hookimpl(trylast=True)
    def vyre_backend_version(self) -> str:
        return "unspecified"

    @hookimpl(trylast=True)
    def vyre_backend_precedence(self) -> int:
        return DEFAULT_PRECEDENCE

    @hookimpl(trylast=True)
    def vyre_backend_claims(self) -> dict[str, Any]:
        return {}

    @hookimpl(trylast=True)
    def vyre_is_reference_oracle(self) -> bool:
        return False

    @hookimpl(trylast=True)
    def vyre_lowers_math_library(self, version: str) -> bool:
        return False

    # dispatch
    @hookimpl(trylast=True)
    def vyre_dispatch_borrowed(self, program, inputs, config) -> list[np.ndarray]:
        owned = [np.array(a, copy=True) for a in inputs]
        return self.call("vyre_dispatch", program=program, inputs=owned, config=config)

    @hookimpl(trylast=True)
    def vyre_dispatch_timed(self, program, inputs, config) -> TimedDispatch:
        start = wall_clock_ns()
        outputs = self.call("vyre_dispatch_borrowed", program=program, inputs=inputs,
                            config=config)
        return TimedDispatch(outputs, Timing(wall_clock_ns() - start, None, config.label))

    @hookimpl(trylast=True)
    def vyre_dispatch_into(self, program, inputs, config, outputs) -> None:
        results = self.call("vyre_dispatch_borrowed", program=program, inputs=inputs,
                            config=config)
        for target, result in zip(outputs, results, strict=True):
            np.copyto(target, np.frombuffer(result, dtype=target.dtype)
                      if isinstance(result, bytes) else result)

    @hookimpl(trylast=True)
    def vyre_dispatch_sequence(self, sequence, inputs, resident, config) -> SequenceRun:
        start = wall_clock_ns()
        held = {name: np.frombuffer(self.call("vyre_download_resident", handle=handle),
                                    dtype=sequence.buffer(name).dtype.storage_np)
                for name, handle in resident.items()}
        backend = self.call("vyre_backend_id")

        def run_step(step, step_inputs, _into):  # (the borrowed dispatch makes its own)
            outputs = self.call("vyre_dispatch_borrowed", program=step.program,
                                inputs=step_inputs, config=step_config(config, step.grid))
            return check_outputs(step.program, outputs, sequence.lengths(step), backend)

        outputs, loops = run_sequence(
            sequence, inputs, held, run_step, lambda name, array: self.call(
                "vyre_upload_resident", handle=resident[name], data=array.tobytes()))
        return SequenceRun(outputs, loops, Timing(wall_clock_ns() - start, None, config.label))

    @hookimpl(trylast=True)
    def vyre_compile(self, program, config) -> None:
        return None

    @hookimpl(trylast=True)
    def vyre_pipeline_cache_snapshot(self) -> None:
        return None

    @hookimpl(trylast=True)
    def vyre_dispatch_async(self, program, inputs, config) -> ReadyPending:
        return ReadyPending(self.call("vyre_dispatch_borrowed", program=program, inputs=inputs,
                                      config=config))

    # resident buffers
    @hookimpl(trylast=True)
    def vyre_allocate_resident(self, byte_len):
        raise self._unsupported("resident buffer allocation")

    @hookimpl(trylast=True)
    def vyre_upload_resident(self, handle, data):
        raise self._unsupported("resident buffer upload")

    @hookimpl(trylast=True)
    def vyre_download_resident(self, handle):
        raise self._unsupported("resident buffer download")

    @hookimpl(trylast=True)
    def vyre_free_resident(self, handle):
        raise self._unsupported("resident buffer free")

    @hookimpl(trylast=True)
    def vyre_dispatch_resident(self, program, handles, config):
        raise self._unsupported("resident dispatch")

    # capabilities
    @hookimpl(trylast=True)
    def vyre_capabilities(self) -> Capabilities:
        answers = {name: self.call(f"vyre_{name}") for name in CAPABILITY_QUERIES}
        facts = (self.call("vyre_device_profile")
                 if self.implements("vyre_device_profile") else {})
        # a profile fact that is a field now is its claim (one that is no count is
        # ignored, as vyre 0.1 ignored it); the others are the record's extra
        claimed = {k: v for k, v in facts.items() if k in _FIELDS and k != "extra"
                   and (k not in FACTS_NOW_FIELDS or is_count(v))}
        return Capabilities.from_claims({
            **claimed, **answers,
            "extra": {k: v for k, v in facts.items() if k not in _FIELDS}})

    @hookimpl(trylast=True)
    def vyre_device_profile(self) -> dict[str, Any]:
        record = Capabilities.of(self.call("vyre_capabilities"))
        return {"backend": self.call("vyre_backend_id"),
                **{k: v for k, v in record.to_dict().items() if k != "extra"},
                **record.extra}

    # the per-capability queries of contract 1: the backend's record where it answers
    # vyre_capabilities, else the conservative floor
    def _query(self, name: str, floor: Callable[[], Any] | None = None) -> Any:
        if self.implements("vyre_capabilities"):
            return getattr(Capabilities.of(self.call("vyre_capabilities")), name)
        return floor() if floor is not None else getattr(FLOOR, name)

    @hookimpl(trylast=True)
    def vyre_supported_ops(self) -> frozenset[str]:
        return self._query("supported_ops")

    @hookimpl(trylast=True)
    def vyre_supports_subgroup_ops(self) -> bool:
        return self._query("supports_subgroup_ops")

    @hookimpl(trylast=True)
    def vyre_supports_f16(self) -> bool:
        return self._query("supports_f16")

    @hookimpl(trylast=True)
    def vyre_supports_bf16(self) -> bool:
        return self._query("supports_bf16")

    @hookimpl(trylast=True)
    def vyre_supports_f64(self) -> bool:
        return self._query("supports_f64")

    @hookimpl(trylast=True)
    def vyre_supports_tensor_cores(self) -> bool:
        return self._query("supports_tensor_cores")

    @hookimpl(trylast=True)
    def vyre_supports_async_compute(self) -> bool:
        return self._query("supports_async_compute")

    @hookimpl(trylast=True)
    def vyre_supports_indirect_dispatch(self) -> bool:
        return self._query("supports_indirect_dispatch")

    @hookimpl(trylast=True)
    def vyre_supports_grid_sync(self) -> bool:
        return self._query("supports_grid_sync")

    @hookimpl(trylast=True)
    def vyre_is_distributed(self) -> bool:
        return self._query("is_distributed")

    @hookimpl(trylast=True)
    def vyre_max_workgroup_size(self) -> tuple[int, int, int]:
        return self._query("max_workgroup_size")

    @hookimpl(trylast=True)
    def vyre_max_workgroups_per_dimension(self) -> int:
        return self._query("max_workgroups_per_dimension")

    @hookimpl(trylast=True)
    def vyre_max_invocations_per_workgroup(self) -> int:
        def product() -> int:
            x, y, z = self.call("vyre_max_workgroup_size")
            return min(x * y * z, 2**32 - 1)
        return self._query("max_invocations_per_workgroup", product)

    @hookimpl(trylast=True)
    def vyre_subgroup_size(self) -> int | None:
        return self._query("subgroup_size")

    @hookimpl(trylast=True)
    def vyre_subgroup_size_range(self) -> tuple[int, int] | None:
        def from_width() -> tuple[int, int] | None:
            width = self.call("vyre_subgroup_size")
            return None if width is None else (width, width)
        return self._query("subgroup_size_range", from_width)

    @hookimpl(trylast=True)
    def vyre_max_storage_buffer_bytes(self) -> int:
        return self._query("max_storage_buffer_bytes")

    @hookimpl(trylast=True)
    def vyre_max_workgroup_memory_bytes(self) -> int:
        return self._query("max_workgroup_memory_bytes")

    # devices
    @hookimpl(trylast=True)
    def vyre_devices(self) -> list[DeviceInfo]:
        return [DeviceInfo(0, str(self.call("vyre_backend_id")))]

    @hookimpl(trylast=True)
    def vyre_select_device(self, device_id: int) -> None:
        if device_id != 0:
            raise UnsupportedFeatureError(
                f"backend {self.call('vyre_backend_id')!r} does not implement "
                f"vyre_select_device: it runs on its device 0 only, not on {device_id!r}",
                "Name device 0 in PoolOptions(devices=...), or leave devices unset (or, as "
                "the backend's author, implement vyre_select_device).")

    # lifecycle
    @hookimpl(trylast=True)
    def vyre_prepare(self) -> None:
        return None

    @hookimpl(trylast=True)
    def vyre_flush(self) -> None:
        return None

    @hookimpl(trylast=True)
    def vyre_shutdown(self) -> None:
        return None

    @hookimpl(trylast=True)
    def vyre_device_lost(self) -> bool:
        return False

    @hookimpl(trylast=True)
    def vyre_try_recover(self) -> None:
        raise self._unsupported("device recovery")

