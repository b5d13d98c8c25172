"""The fault kit's pool options: ``TIGHT`` (faults noticed and acted on within seconds) and
``options_over``, which changes some fields of a ``PoolOptions`` and keeps the rest, also
inside its groups (``restart``, ``timeouts``, ``transport``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from vyre_core import deprecations
from vyre_core.errors import InvalidConfigError
from vyre_core.supervisor.options import FLAT, GROUPS, PoolOptions, RestartPolicy, Timeouts

#: Pool options of ``vyre_driver``: faults are noticed and acted on within seconds.
TIGHT = PoolOptions(restart=RestartPolicy(max_restarts=3, window=30.0),
                    timeouts=Timeouts(kill_grace=0.5, heartbeat=5.0))


def options_over(base: PoolOptions, **changes: Any) -> PoolOptions:
    """``base`` with ``changes``: PoolOptions fields; a group given as a mapping changes
    only the fields it names (``restart={"max_restarts": 1}`` keeps ``base``'s window and
    cooldown), a group given whole replaces ``base``'s. A deprecated flat name
    (``max_restarts=1``) is taken as its group's field, with its warning."""
    for name in sorted(changes.keys() & FLAT):
        deprecations.enforce(deprecations.of_kind("option")[name], "this program",
                             InvalidConfigError)
        group, inner = FLAT[name]
        merged = changes.get(group, {})
        if not isinstance(merged, Mapping):
            raise InvalidConfigError(f"{name}= and {group}= given together",
                                     f"Name it in the group only: {group}={{{inner!r}: ...}}.")
        changes[group] = {**merged, inner: changes.pop(name)}
    for group in GROUPS.keys() & changes.keys():
        if isinstance(changes[group], Mapping):
            changes[group] = dataclasses.replace(getattr(base, group), **changes[group])
    return dataclasses.replace(base, **changes)
