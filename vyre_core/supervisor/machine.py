"""Kept for the move (issue 41, step 8): the rules of a pool now live in
``vyre_core.supervisor.rules``, one file per concern. This module re-exports the names other
modules and tests import from here, until those import the rules' files themselves (step
20); then it goes. Add nothing here."""

from vyre_core.supervisor.rules.actions import (
    Action,
    Log,
    Promote,
    Release,
    Resolve,
    RoutingChanged,
    Send,
    Signal,
    Spawn,
    Stop,
    describe_exit,
)
from vyre_core.supervisor.rules.constants import (
    MAX_RESENDS,
    OUTPUT_IN_ERRORS,
    POISON_KILLS,
    START_ERROR_CHARS,
    START_TRIES,
    TICK_EVERY,
    TRANSFER_FLOOR,
)
from vyre_core.supervisor.rules.machine import PoolMachine
from vyre_core.supervisor.rules.requests import Request
from vyre_core.supervisor.rules.slots import Failure, Worker

__all__ = [
    "MAX_RESENDS", "OUTPUT_IN_ERRORS", "POISON_KILLS", "START_ERROR_CHARS", "START_TRIES",
    "TICK_EVERY", "TRANSFER_FLOOR", "Action", "Failure", "Log", "PoolMachine", "Promote",
    "Release", "Request", "Resolve", "RoutingChanged", "Send", "Signal", "Spawn", "Stop",
    "Worker", "describe_exit",
]
