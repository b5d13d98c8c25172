"""The limits the rules apply, each in one place: the rules read them, the shells tick by
``TICK_EVERY``, and the tests import them to probe each rule at its edge, so a copy anywhere
else would drift from what the rules do."""

from __future__ import annotations

#: A request that never reached a worker is sent again (to a fresh or another worker) at
#: most this many times.
MAX_RESENDS = 2
#: A request that killed this many workers is a poison request: it fails alone.
POISON_KILLS = 2
#: A pool none of whose workers has ever said hello fails once every serving worker has
#: failed this many starts in a row: the first may be chance (a signal, a short moment
#: without memory), a second for every worker is the backend itself (an import error, a
#: driver it cannot load). One device that cannot start is left to the restart intensity.
START_TRIES = 2
#: The longest start-up error a pool failure's first line quotes (the rest is in details).
START_ERROR_CHARS = 300
#: The end of a worker's output that an error carries (its traceback's last frames).
OUTPUT_IN_ERRORS = 4000
#: The shell ticks at least this often (seconds). A longer gap between ticks means this
#: process itself did not run (stopped with Ctrl-Z, starved): nobody could be heard then.
TICK_EVERY = 1.0
#: The slowest transfer rate (bytes/s) a message is allowed before it counts as lost: a
#: request or reply of N bytes gets N / TRANSFER_FLOOR seconds on top of the silence limit.
TRANSFER_FLOOR = 100e6
