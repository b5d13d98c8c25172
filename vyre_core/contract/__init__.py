"""The frozen backend contract: hookspec, conservative defaults, value types, loading."""

from vyre_core.contract.hookspec import CONTRACT_MAJOR, hookimpl
from vyre_core.contract.manager import HOOK_NAMES, REQUIRED_HOOKS, LoadedBackend
from vyre_core.contract.types import (
    CacheSnapshot,
    Capabilities,
    DeviceInfo,
    LoopRun,
    NativePipeline,
    Outputs,
    PendingDispatch,
    ReadyPending,
    SequenceRun,
    TimedDispatch,
    Timing,
)

__all__ = [
    "CONTRACT_MAJOR", "HOOK_NAMES", "REQUIRED_HOOKS", "CacheSnapshot", "Capabilities",
    "DeviceInfo", "LoadedBackend", "LoopRun", "NativePipeline", "Outputs", "PendingDispatch",
    "ReadyPending", "SequenceRun", "TimedDispatch", "Timing", "hookimpl",
]
