"""vyre: a compute IR written once, run on whichever backend can execute it.

vyre_core is the microkernel (IR, ABI, errors; later the contract, registry, routing
and supervisor). It never imports a concrete backend.
"""

import logging

from vyre_core import errors, ir
from vyre_core.config import DispatchConfig
from vyre_core.driver import Driver
from vyre_core.errors import VyreError
from vyre_core.example import Example
from vyre_core.ir import Program

__version__ = "0.1.0"

# A library logs, the application decides where it goes (logging's own convention).
logging.getLogger("vyre").addHandler(logging.NullHandler())
__all__ = [
    "DispatchConfig", "Driver", "Example", "Program", "VyreError", "__version__", "errors", "ir",
]
