"""What vyre has deprecated, and the one rule for each: warn once, then refuse.

Every entry names a hook, a ``DispatchConfig`` field, an IR op id, a public call, a flat
``PoolOptions`` field (kind ``option``, now in one of its groups) or a device fact a
backend claimed in ``Capabilities.extra`` that is a field now (kind ``claim``), the
vyre version that deprecated it, the version that removes it, and what to use instead (the
Fix). Until the removal version, using it warns once per process
(``VyreDeprecationWarning``, shown by default, and a log record); from that version on it
is refused with both versions named. Hooks are removed only with a new contract major
(the freeze rule of contract/hookspec.py), so a hook's removal version is the vyre that
ships that contract.

Checked where each kind enters: plugins when they load (``contract/manager.py``), configs
when they are made (``config.py``), programs when they are validated (``ir/validate.py``),
calls when they are made (the function itself), flat pool options when ``PoolOptions`` is
made or such a field is read (``supervisor/options.py``), claims when a ``Capabilities``
record is made (``contract/types.py``).
``vyre doctor`` lists the entries and the installed plugins that still use one.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import sys
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from packaging.version import Version

from vyre_core import __version__
from vyre_core.errors import VyreError

logger = logging.getLogger("vyre.deprecation")

Kind = Literal["hook", "config", "op", "option", "call", "claim"]


class VyreDeprecationWarning(FutureWarning):
    """A deprecated hook, config field or op is in use. A FutureWarning, so Python shows
    it by default: the person who must act runs the plugin or program, and may not be its
    author."""


@dataclass(frozen=True)
class Deprecation:
    kind: Kind
    name: str          # the hook, the config field, the op id ("unop.floor") or the call
    since: str         # the vyre version that deprecated it
    removed_in: str    # the vyre version that refuses it
    replacement: str   # what to do instead: the Fix

    def removed(self, version: str | None = None) -> bool:
        """Whether ``version`` (default: this vyre) no longer has it."""
        return Version(version or __version__) >= Version(self.removed_in)

    def describe(self, user: str) -> str:
        """``user`` (e.g. "plugin 'zed'") and what it uses, with both versions."""
        return (f"{user} uses {self.kind} {self.name!r}, deprecated since vyre {self.since} "
                f"and removed in vyre {self.removed_in}")

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "name": self.name, "since": self.since,
                "removed_in": self.removed_in, "fix": self.replacement}


#: The per-capability queries of contract 1, one ``Capabilities`` field each (``vyre_`` +
#: field), which ``vyre_capabilities`` replaces with the whole record: frozen at these
#: names (a new capability is a field and a claim, never a hook), removed in contract 2.
CAPABILITY_QUERIES = (
    "supported_ops", "supports_subgroup_ops", "supports_f16", "supports_bf16", "supports_f64",
    "supports_tensor_cores", "supports_async_compute", "supports_indirect_dispatch",
    "supports_grid_sync", "is_distributed", "max_workgroup_size",
    "max_workgroups_per_dimension", "max_invocations_per_workgroup", "subgroup_size",
    "subgroup_size_range", "max_storage_buffer_bytes", "max_workgroup_memory_bytes",
)
#: PoolOptions' groups (supervisor/options.py), each with the flat names of vyre 0.1 that
#: it took over: (group field, group class, {flat name: the group's field}).
OPTION_GROUPS: tuple[tuple[str, str, dict[str, str]], ...] = (
    ("restart", "RestartPolicy", {
        "max_restarts": "max_restarts", "restart_window": "window", "cooldown": "cooldown",
        "recycle_after": "recycle_after", "recycle_rss_bytes": "recycle_rss_bytes"}),
    ("timeouts", "Timeouts", {
        "startup_timeout": "startup", "compile_timeout": "compile",
        "heartbeat_interval": "heartbeat_interval", "heartbeat_timeout": "heartbeat",
        "kill_grace": "kill_grace", "cancel_grace": "cancel_grace"}),
    ("transport", "Transport", {
        "max_message_bytes": "max_message_bytes", "fork_server": "fork_server",
        "spin": "spin"}),
)
_WHOLE_RECORD = ("Implement vyre_capabilities instead: return the whole Capabilities "
                 "record, device facts in its extra (docs/contract.md, \"Capabilities\").")

#: Everything deprecated, oldest first. Append; delete an entry only together with the
#: thing itself, in its removal version.
DEPRECATIONS: tuple[Deprecation, ...] = (
    Deprecation("hook", "vyre_subgroup_size", "0.1.0", "1.0.0",
                "Implement vyre_capabilities instead, with subgroup_size_range in its "
                "record: the (smallest, largest) subgroup size a program may declare and "
                "run with exactly."),
    Deprecation("hook", "vyre_supported_ops", "0.1.0", "1.0.0",
                "Name the ops as supported_ops in the claims (vyre_backend_claims, read "
                "before any worker starts) and in the record of vyre_capabilities."),
    *(Deprecation("hook", f"vyre_{name}", "0.1.0", "1.0.0", _WHOLE_RECORD)
      for name in (*CAPABILITY_QUERIES, "device_profile")
      if name not in ("subgroup_size", "supported_ops")),
    Deprecation("call", "format_explanation", "0.1.0", "1.0.0",
                "print what Driver.explain answers, or take str() of it: its Explanations "
                "format themselves, one block per backend."),
    Deprecation("call", "Driver.dispatch_on", "0.1.0", "1.0.0",
                "Call vyre_core.testing.dispatch_on(driver, backend, program, inputs, "
                "config=..., dim=...): sending work past routing is a tool of tests."),
    Deprecation("call", "Driver.dispatch_sequence_on", "0.1.0", "1.0.0",
                "Call vyre_core.testing.dispatch_on(driver, backend, sequence, inputs, "
                "config=...): it takes a sequence too."),
    Deprecation("call", "positional backend and config", "0.1.0", "1.0.0",
                "Name them: every verb is (work, inputs, *, backend=None, config=None, ...), "
                "e.g. drv.dispatch(program, [x], backend='cpu'); a verb without a config "
                "takes timeout= by name (drv.probe('cpu', timeout=5))."),
    Deprecation("call", "timeout= beside config=", "0.1.0", "1.0.0",
                "Give config=DispatchConfig(timeout=...): a config's timeout bounds the "
                "whole call (routing, probing, starting pools, compiling)."),
    Deprecation("call", "Driver.launch(kernel, dim, args)", "0.1.0", "1.0.0",
                "Write drv.launch(kernel, args, dim=dim)."),
    Deprecation("call", "Driver.dispatch_sequence", "0.1.0", "1.0.0",
                "Call drv.dispatch(sequence, inputs, resident=..., backend=..., config=..., "
                "out=...): dispatch takes a sequence."),
    Deprecation("call", "Driver.compile_sequence", "0.1.0", "1.0.0",
                "Call drv.compile(sequence, backend=..., config=...): compile takes a "
                "sequence."),
    Deprecation("call", "Driver.dispatch_resident's Timing", "0.1.0", "1.0.0",
                "Read outputs.timing (wall_ns, device_ns, label): dispatch_resident returns "
                "Outputs, as every dispatch does."),
    *(Deprecation("option", flat, "0.1.0", "1.0.0",
                  f"Pass PoolOptions({group}={kind}({name}=...)) (or Driver({group}=...)), "
                  f"and read options.{group}.{name}.")
      for group, kind, names in OPTION_GROUPS for flat, name in names.items()),
    Deprecation("call", "Driver(shadow_every=)", "0.1.0", "1.0.0",
                "Pass Driver(shadow=ShadowOptions(every=N))."),
    Deprecation("call", "Driver(shadow_dir=)", "0.1.0", "1.0.0",
                "Pass Driver(shadow=ShadowOptions(every=N, dir=...))."),
    Deprecation("claim", "extra['max_loop_trip']", "0.1.0", "1.0.0",
                "Claim it as the field: Capabilities(max_loop_trip=N), or \"max_loop_trip\" "
                "among the claims, not in extra."),
)


def of_kind(kind: Kind, entries: Iterable[Deprecation] | None = None) -> dict[str, Deprecation]:
    """The deprecations of ``kind`` by name (``entries`` default: ``DEPRECATIONS``)."""
    return {d.name: d for d in (DEPRECATIONS if entries is None else entries) if d.kind == kind}


def hooks_of(plugin: object) -> list[Deprecation]:
    """The deprecated hooks ``plugin`` implements (marked or not: the manager takes any
    ``vyre_*`` function as an implementation)."""
    return [d for name, d in of_kind("hook").items()
            if inspect.isroutine(getattr(plugin, name, None))]


def enforce(deprecation: Deprecation, user: str, refused: type[VyreError], *,
            logged_only: bool = False) -> None:
    """Warn once that ``user`` uses ``deprecation``; raise ``refused`` from its removal
    version on. ``logged_only``: the log record alone, no Python warning (a pool's I/O
    thread, where a warning made an error would fail the pool's work, not the user's)."""
    if deprecation.removed():
        raise refused(f"{deprecation.describe(user)}, and this is vyre {__version__}",
                      deprecation.replacement)
    warn_once(deprecation, user, logged_only=logged_only)


#: (kind, name, user) already warned about in this process. No lock (a fork could
#: inherit one held): ``setdefault`` is the test-and-set.
_warned: dict[tuple[str, str, str], object] = {}


def warn_once(deprecation: Deprecation, user: str, *, logged_only: bool = False) -> None:
    """Warn (and log) that ``user`` uses ``deprecation``, the first time in this process;
    the warning names the first caller outside vyre (whichever public call led here)."""
    mine = object()
    if _warned.setdefault((deprecation.kind, deprecation.name, user), mine) is not mine:
        return
    message = f"{deprecation.describe(user)}. Fix: {deprecation.replacement}"
    logger.warning("%s", message)
    if not logged_only:
        warnings.warn(VyreDeprecationWarning(message), stacklevel=_outside_vyre())


#: Frames that are vyre's own, or made for it (dataclasses' generated methods).
_OWN = (str(Path(__file__).parent), dataclasses.__file__, "<string>")


def _outside_vyre() -> int:
    """The ``stacklevel`` of the first frame, from ``warn_once``'s caller up, that is not
    vyre's: the user's line that set the deprecated thing in motion."""
    level, frame = 2, sys._getframe(2)
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_OWN):
        level, frame = level + 1, frame.f_back
    return level
