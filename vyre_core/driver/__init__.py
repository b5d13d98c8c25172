"""The Driver and the handles it gives out, in rooms:

- ``driver.py``: ``Driver``, the one object callers use (its contract is that module's
  docstring);
- ``calls.py``: what each verb checks and builds before any work is sent;
- ``pending.py``: ``PendingResult``, a call in flight;
- ``resident.py``: ``ResidentBuffer``, device memory that stays in one worker;
- ``owned.py``: what a Driver owns and ``close()`` stops, held apart from the Driver.

``from vyre_core.driver import Driver, PendingResult, ResidentBuffer`` is the public
path; the private names of the old ``driver.py`` are re-exported here until their
importers move (docs/design-41.md, step 20).
"""

from vyre_core.driver.calls import (  # noqa: F401
    _DEFAULT_CONFIG,
    _check_out,
    _checked_program,
    _checked_sequence,
    _config,
    _kernel_plan,
    _launch_config,
    _outputs,
    _read_write,
    _resident_handles,
    _resident_pool,
    _sequence_config,
    _sequence_into,
    _sequence_outputs,
    _sequence_request,
    _untuned,
    _unwritten,
    _weighed,
    _writing_into,
)
from vyre_core.driver.driver import (  # noqa: F401
    _DRIVERS,
    Driver,
    _after_fork_in_child,
    _Handle,
    _invalidate_routing,
    _keeping,
    _keywords_checked,
    _on_uncaught_exit,
)
from vyre_core.driver.owned import _close_if_alive, _options_for, _Owned  # noqa: F401
from vyre_core.driver.pending import PendingResult, _LaunchResult  # noqa: F401
from vyre_core.driver.resident import Reply, ResidentBuffer  # noqa: F401
