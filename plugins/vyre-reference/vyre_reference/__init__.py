"""vyre's reference backend: a vectorised numpy interpreter of the IR, the oracle every
other backend is compared against byte for byte."""

from vyre_reference.interpreter import run

__all__ = ["run"]
__version__ = "0.1.0"
