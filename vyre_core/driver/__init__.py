"""The Driver and the handles it gives out, in rooms:

- ``driver.py``: ``Driver``, the one object callers use (its contract is that module's
  docstring);
- ``calls.py``: what each verb checks and builds before any work is sent;
- ``pending.py``: ``PendingResult``, a call in flight;
- ``resident.py``: ``ResidentBuffer``, device memory that stays in one worker;
- ``owned.py``: what a Driver owns and ``close()`` stops, held apart from the Driver.

``from vyre_core.driver import Driver, PendingResult, ResidentBuffer`` is the public
path; a private helper is imported from the room that holds it.
"""

from vyre_core.driver.driver import Driver
from vyre_core.driver.pending import PendingResult
from vyre_core.driver.resident import Reply, ResidentBuffer

__all__ = ["Driver", "PendingResult", "Reply", "ResidentBuffer"]
