"""Where the local pool was: it is now the package ``supervisor/local/`` (``Pool`` in
``local/pool.py``). This module re-exports the names other modules and tests import from
here, until they import them from their rooms (docs/design-41.md, step 20)."""

from vyre_core.supervisor.local.pool import Pool
from vyre_core.supervisor.options import PoolOptions
from vyre_core.supervisor.rules.requests import Request

__all__ = ["Pool", "PoolOptions", "Request"]
