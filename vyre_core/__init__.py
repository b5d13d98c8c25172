"""vyre: a compute IR written once, run on whichever backend can execute it.

vyre_core is the microkernel: the IR, the frozen contract, the registry, routing, the
supervisor and the client side of the wire protocol. It never imports a concrete backend.

Importing it is lazy (PEP 562): a name is imported on first use, so a worker process,
which needs only the protocol, the data plane and the contract, never loads the driver,
the supervisor or the IR builder.
"""

import importlib
import logging
import sys
from typing import Any

__version__ = "0.1.0"

if not sys.platform.startswith("linux"):  # (pidfd, prctl, /proc: the supervisor needs them)
    raise ImportError(
        f"vyre runs on Linux only (this is {sys.platform}): its supervisor watches workers "
        "through pidfds, ties them to their parent with prctl and reads /proc.\n"
        "Fix: run vyre on Linux (a container or WSL 2 on other systems).")

#: The public surface: every name here is documented in docs/architecture.md ("The
#: public surface"); everything else in vyre_core is private and free to change.
_MODULES = {"errors": "vyre_core.errors", "ir": "vyre_core.ir", "lib": "vyre_core.lib"}
_LAZY = {
    "DispatchConfig": "vyre_core.config", "Driver": "vyre_core.driver",
    "PendingResult": "vyre_core.driver", "ResidentBuffer": "vyre_core.driver",
    "PoolOptions": "vyre_core.supervisor.options",
    "RestartPolicy": "vyre_core.supervisor.options", "Timeouts": "vyre_core.supervisor.options",
    "Transport": "vyre_core.supervisor.options", "ShadowOptions": "vyre_core.shadow_sampler",
    "VyreError": "vyre_core.errors", "Example": "vyre_core.example",
    "Program": "vyre_core.ir.program", "Sequence": "vyre_core.sequence",
    "SequenceBuilder": "vyre_core.sequence",
    "CompiledPipeline": "vyre_core.pipeline", "CompiledSequence": "vyre_core.pipeline",
    "Capabilities": "vyre_core.contract.types", "LoopRun": "vyre_core.contract.types",
    "DeviceInfo": "vyre_core.contract.types",
    "Outputs": "vyre_core.contract.types", "Timing": "vyre_core.contract.types",
    "format_explanation": "vyre_core.routing", "ShadowCase": "vyre_core.shadow",
    "RouteDecision": "vyre_core.routing", "Explanation": "vyre_core.routing",
    "Explanations": "vyre_core.routing", "TuneResult": "vyre_core.tuning",
    "Measured": "vyre_core.tuning", "TuneCandidate": "vyre_core.tuning",
    "BackendRegistration": "vyre_core.registry",
    **{name: "vyre_core.kernels" for name in (
        "Array", "Constant", "KernelFunction", "atomic_add", "atomic_and",
        "atomic_compare_exchange", "atomic_exchange", "atomic_max", "atomic_min",
        "atomic_or", "atomic_sub", "atomic_xor", "barrier", "bitcast", "func", "global_id",
        "kernel",
        "local_id", "shared", "workgroup_id", "subgroup_add", "subgroup_and",
        "subgroup_ballot", "subgroup_broadcast", "subgroup_elect", "subgroup_exclusive_add",
        "subgroup_inclusive_add", "subgroup_max", "subgroup_min", "subgroup_or",
        "subgroup_shuffle", "subgroup_xor", "workgroup_sum", "workgroup_min",
        "workgroup_max", "workgroup_inclusive_sum", "workgroup_exclusive_sum")},
    **{name: "vyre_core.ir" for name in (
        "bool_", "f16", "f32", "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")},
}

# A library logs, the application decides where it goes (logging's own convention).
logging.getLogger("vyre").addHandler(logging.NullHandler())
__all__ = [
    # kernels written as Python functions (docs/kernels.md)
    "Array",
    "BackendRegistration",
    "Capabilities",
    "CompiledPipeline",
    "CompiledSequence",
    "Constant",
    "DeviceInfo",
    "DispatchConfig",
    "Driver",
    "Example",
    "Explanation",
    "Explanations",
    "KernelFunction",
    "LoopRun",
    "Measured",
    "Outputs",
    "PendingResult",
    "PoolOptions",
    "Program",
    "ResidentBuffer",
    "RestartPolicy",
    "RouteDecision",
    "Sequence",
    "SequenceBuilder",
    "ShadowCase",
    "ShadowOptions",
    "Timeouts",
    "Timing",
    "Transport",
    "TuneCandidate",
    "TuneResult",
    "VyreError",
    "__version__",
    "atomic_add",
    "atomic_and",
    "atomic_compare_exchange",
    "atomic_exchange",
    "atomic_max",
    "atomic_min",
    "atomic_or",
    "atomic_sub",
    "atomic_xor",
    "barrier",
    "bitcast",
    "bool_",
    "errors",
    "f16",
    "f32",
    "f64",
    "format_explanation",
    "func",
    "global_id",
    "i8",
    "i16",
    "i32",
    "i64",
    "ir",
    "kernel",
    "lib",
    "local_id",
    "shared",
    "subgroup_add",
    "subgroup_and",
    "subgroup_ballot",
    "subgroup_broadcast",
    "subgroup_elect",
    "subgroup_exclusive_add",
    "subgroup_inclusive_add",
    "subgroup_max",
    "subgroup_min",
    "subgroup_or",
    "subgroup_shuffle",
    "subgroup_xor",
    "u8",
    "u16",
    "u32",
    "u64",
    "workgroup_exclusive_sum",
    "workgroup_id",
    "workgroup_inclusive_sum",
    "workgroup_max",
    "workgroup_min",
    "workgroup_sum",
]


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        value = importlib.import_module(_MODULES[name])
    elif name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    else:
        raise AttributeError(f"module 'vyre_core' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
