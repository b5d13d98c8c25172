"""Backend discovery through the entry-point group ``vyre.backends``.

Discovery is side-effect free: it imports each plugin's (small) entry module, calls its
pure identity hooks and nothing else; no device is opened, no thread or process started.
A broken plugin is recorded with its traceback in ``Registry.broken`` and skipped.
``VYRE_LOAD_PLUGINS`` (comma-separated entry-point names) selects plugins; empty = none.
"""

from __future__ import annotations

import difflib
import os
import threading
import traceback
from dataclasses import dataclass, field, replace
from importlib import metadata

from vyre_core.contract.manager import LoadedBackend
from vyre_core.contract.types import Capabilities, op_names
from vyre_core.errors import PluginLoadError, VyreError
from vyre_core.ir.requirements import ALL_OPS

ENTRY_POINT_GROUP = "vyre.backends"
SELECT_ENV = "VYRE_LOAD_PLUGINS"


@dataclass(frozen=True)
class BackendRegistration:
    """What the parent knows of a backend without starting it."""

    id: str
    version: str
    distribution: str | None   # the pip distribution that provides it
    precedence: int            # routing rank: lower first
    claims: Capabilities       # static claims; probed capabilities replace them per worker
    is_reference: bool         # the oracle other backends are compared with
    entry_point: str           # "name = module:attr" it was loaded from
    plugin: object = field(repr=False, compare=False)

    @property
    def sort_key(self) -> tuple[int, str]:
        return (self.precedence, self.id)


@dataclass(frozen=True)
class BrokenPlugin:
    """A plugin that failed to load, and why."""

    name: str
    distribution: str | None
    error: str
    traceback: str


@dataclass(frozen=True)
class DisabledPlugin:
    """An installed plugin left out by ``VYRE_LOAD_PLUGINS``; never imported."""

    name: str
    distribution: str | None
    entry_point: str


def register_plugin(plugin: object, *, name: str | None = None, distribution: str | None = None,
                    entry_point: str = "") -> BackendRegistration:
    """A registration for ``plugin``, read from its identity hooks only. An entry point
    (``entry_point`` given) must be named after the backend's id: VYRE_LOAD_PLUGINS selects
    by that name, and every other place (routing, ``backend=``) by the id."""
    loaded = LoadedBackend(plugin, name)
    backend_id = loaded.call("vyre_backend_id")
    if not isinstance(backend_id, str) or not backend_id:
        raise PluginLoadError(f"plugin {loaded.name!r} returned backend id {backend_id!r}",
                              "Return a non-empty string from vyre_backend_id.")
    if entry_point and name is not None and name != backend_id:
        raise PluginLoadError(
            f"entry point {name!r} provides backend {backend_id!r}: the two names differ",
            f"Name the entry point after the backend in the plugin's pyproject.toml "
            f"({backend_id} = {entry_point.partition(' = ')[2]}), and reinstall it.")
    try:
        claims = Capabilities.from_claims(loaded.call("vyre_backend_claims"),
                                          f"plugin {loaded.name!r}")
    except VyreError as exc:
        raise PluginLoadError(f"plugin {loaded.name!r} makes bad claims: {exc.cause}",
                              exc.fix) from None
    ops = claims.supported_ops & ALL_OPS  # (a newer vyre's ops cannot be in its programs)
    if loaded.implements("vyre_supported_ops"):  # (contract 1's query, deprecated)
        ops &= _supported_ops(loaded)
    claims = replace(claims, supported_ops=ops)
    return BackendRegistration(
        id=backend_id, version=str(loaded.call("vyre_backend_version")),
        distribution=distribution, precedence=int(loaded.call("vyre_backend_precedence")),
        claims=claims, is_reference=bool(loaded.call("vyre_is_reference_oracle")),
        entry_point=entry_point or loaded.name, plugin=plugin)


def _supported_ops(loaded: LoadedBackend) -> frozenset[str]:
    """The ops the plugin says it executes through contract 1's query (a pure hook, like
    its claims): routing must not send a program with any other op to it before a worker
    has probed it."""
    answer = loaded.call("vyre_supported_ops")
    try:
        return op_names(answer)
    except VyreError as exc:
        raise PluginLoadError(f"plugin {loaded.name!r} returned {answer!r:.200} from "
                              "vyre_supported_ops", exc.fix) from None


class Registry:
    """Registered backends in precedence order, plus the plugins that failed to load."""

    def __init__(self) -> None:
        self._backends: dict[str, BackendRegistration] = {}
        self.broken: list[BrokenPlugin] = []
        self.disabled: list[DisabledPlugin] = []  # installed, not selected by VYRE_LOAD_PLUGINS
        self.not_installed: list[str] = []  # selected by VYRE_LOAD_PLUGINS, not installed
        self._lock = threading.Lock()

    @classmethod
    def discover(cls, select: str | None = None) -> Registry:
        """Load every plugin of the entry-point group (or those named in ``select`` /
        ``VYRE_LOAD_PLUGINS``)."""
        registry = cls()
        selected = os.environ.get(SELECT_ENV) if select is None else select
        names = None if selected is None else {n.strip() for n in selected.split(",") if n.strip()}
        installed = sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name)
        registry.not_installed = sorted((names or set()) - {ep.name for ep in installed})
        for ep in installed:
            dist = ep.dist.name if ep.dist is not None else None
            if names is not None and ep.name not in names:
                registry.disabled.append(DisabledPlugin(ep.name, dist, f"{ep.name} = {ep.value}"))
                continue
            try:
                plugin = ep.load()
                registry.add(register_plugin(plugin, name=ep.name, distribution=dist,
                                             entry_point=f"{ep.name} = {ep.value}"))
            except Exception as exc:  # a broken plugin never breaks the host
                registry.broken.append(BrokenPlugin(
                    ep.name, dist, str(exc) if isinstance(exc, VyreError)
                    else f"{type(exc).__name__}: {exc}", traceback.format_exc()))
        return registry

    def check_selection(self) -> None:
        """Refuse a ``VYRE_LOAD_PLUGINS`` that names plugins that are not installed (a typo
        would otherwise leave them out in silence, and routing would only say that no
        backend can run the program)."""
        if not self.not_installed:
            return
        installed = sorted({r.entry_point.partition(" = ")[0] for r in self.backends()}
                           | {p.name for p in self.broken} | {p.name for p in self.disabled})
        hints = [(name, close[0]) for name in self.not_installed
                 if (close := difflib.get_close_matches(name, installed, n=1))]
        hint = "" if not hints else f" (did you mean {hints[0][1]!r}?)" if len(
            self.not_installed) == 1 else " (did you mean " + ", ".join(
            f"{close!r} for {name!r}" for name, close in hints) + "?)"
        raise PluginLoadError(
            f"{SELECT_ENV} names plugins that are not installed: "
            f"{', '.join(map(repr, self.not_installed))}{hint}",
            f"Name installed plugins in {SELECT_ENV} (installed: "
            f"{', '.join(installed) or 'none'}), or install the missing ones with pip.")

    def add(self, registration: BackendRegistration) -> None:
        """Register a backend; a second backend with the same id is refused."""
        with self._lock:
            existing = self._backends.get(registration.id)
            if existing is not None:
                raise PluginLoadError(
                    f"backend id {registration.id!r} is registered twice "
                    f"({existing.entry_point} and {registration.entry_point})",
                    "Uninstall one of the two distributions, or select one with "
                    f"{SELECT_ENV}.")
            self._backends[registration.id] = registration

    def get(self, backend_id: str) -> BackendRegistration:
        try:
            return self._backends[backend_id]
        except KeyError:
            raise PluginLoadError(
                f"no backend {backend_id!r} is registered "
                f"(registered: {', '.join(self.ids()) or 'none'})",
                "Install the backend's distribution with pip, or pick a registered id.") from None

    def backends(self) -> list[BackendRegistration]:
        """Every registration, ascending precedence then id; part of the public API."""
        return sorted(self._backends.values(), key=lambda r: r.sort_key)

    def ids(self) -> list[str]:
        return [r.id for r in self.backends()]

    def reference(self) -> BackendRegistration | None:
        return next((r for r in self.backends() if r.is_reference), None)
