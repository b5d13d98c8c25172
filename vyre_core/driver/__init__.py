"""The Driver and the handles it gives out, in rooms:

- ``driver.py``: ``Driver``, the one object callers use (its contract is that module's
  docstring): construction and the verbs, each a few lines over the rooms below;
- ``calls.py``: what each verb checks and builds before any work is sent, and the
  synchronous calls that send it (dispatch, sequences, ``dispatch_resident``);
- ``call_forms.py``: how a verb is called: its one shape, the refusal of a keyword it
  does not take, and vyre 0.1's forms, kept (warned) until 1.0.0;
- ``compiled.py``: the handles ``compile`` makes (of a program, and of a sequence);
- ``pending.py``: ``PendingResult``, a call in flight, and ``Background``, the
  asynchronous routing of ``dispatch_async`` and ``launch_async``;
- ``resident.py``: ``ResidentBuffer``, device memory that stays in one worker,
  ``ResidentLaunch``, a launch on such buffers, and ``one_worker``, the check that the
  buffers of one call share a worker;
- ``awaiting.py``: ``await`` on a call's handle, woken through the awaiting loop;
- ``owned.py``: what a Driver owns and ``close()`` stops, held apart from the Driver; its
  construction, fork and exit hooks, ``status``, ``metrics``, the context manager and the
  arrays in shared memory.

``from vyre_core.driver import Driver, PendingResult, ResidentBuffer`` is the public
path; a private helper is imported from the room that holds it.
"""

from vyre_core.driver.driver import Driver
from vyre_core.driver.pending import PendingResult
from vyre_core.driver.resident import Reply, ResidentBuffer

__all__ = ["Driver", "PendingResult", "Reply", "ResidentBuffer"]
