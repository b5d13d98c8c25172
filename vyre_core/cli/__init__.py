"""The ``vyre`` command: one sub-command per module, sharing ``output`` and ``targets``."""

from vyre_core.cli.app import main

__all__ = ["main"]
