"""vyre: a compute IR written once, run on whichever backend can execute it.

vyre_core is the microkernel: the IR, the frozen contract, the registry, routing, the
supervisor and the client side of the wire protocol. It never imports a concrete backend.

Importing it is lazy (PEP 562): a name is imported on first use, so a worker process,
which needs only the protocol, the data plane and the contract, never loads the driver,
the supervisor or the IR builder.
"""

import importlib
import logging
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "errors": "vyre_core.errors", "ir": "vyre_core.ir",
    "DispatchConfig": "vyre_core.config", "Driver": "vyre_core.driver",
    "VyreError": "vyre_core.errors", "Example": "vyre_core.example",
    "Program": "vyre_core.ir.program", "Sequence": "vyre_core.sequence",
    "SequenceBuilder": "vyre_core.sequence",
}

# A library logs, the application decides where it goes (logging's own convention).
logging.getLogger("vyre").addHandler(logging.NullHandler())
__all__ = [
    "DispatchConfig", "Driver", "Example", "Program", "Sequence", "SequenceBuilder", "VyreError",
    "__version__", "errors", "ir",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'vyre_core' has no attribute {name!r}")
    found = importlib.import_module(module)
    value = found if module.endswith(f".{name}") else getattr(found, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
