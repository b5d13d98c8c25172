"""Loading one backend plugin behind the contract: a pluggy manager holding the plugin
and the conservative defaults, with every check a plugin must pass at load time.

Used by the registry (identity hooks only, in the parent) and by the worker's backend
host (every hook). It never calls a device hook itself.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable
from typing import Any

import pluggy

from vyre_core import deprecations
from vyre_core.contract import hookspec
from vyre_core.contract.defaults import ConservativeDefaults
from vyre_core.contract.hookspec import CONTRACT_MAJOR, PROJECT
from vyre_core.errors import PluginLoadError

REQUIRED_HOOKS = ("vyre_backend_id", "vyre_dispatch")
HOOK_NAMES = tuple(sorted(n for n, f in vars(hookspec).items()
                          if n.startswith("vyre_") and inspect.isfunction(f)))


class VyrePluginManager(pluggy.PluginManager):
    """A pluggy manager that also treats unmarked ``vyre_*`` functions as hook
    implementations, so a typo'd or unknown hook name is reported, not ignored."""

    def __init__(self) -> None:
        super().__init__(PROJECT)
        self.add_hookspecs(hookspec)

    def parse_hookimpl_opts(self, plugin: object, name: str):
        opts = super().parse_hookimpl_opts(plugin, name)
        if opts is None and name.startswith("vyre_") and inspect.isroutine(
                getattr(plugin, name, None)):
            return {}
        return opts


class LoadedBackend:
    """One backend plugin plus the defaults; ``call`` runs the winning implementation."""

    def __init__(self, plugin: object, name: str | None = None) -> None:
        self.plugin = plugin
        self.name = name or getattr(plugin, "__name__", type(plugin).__name__)
        try:
            hash(plugin)
        except TypeError:
            raise PluginLoadError(f"plugin {self.name!r} is an unhashable "
                                  f"{type(plugin).__name__}",
                                  "Make the plugin a module or a class instance.") from None
        _check_contract_major(plugin, self.name)
        self.pm = VyrePluginManager()
        try:
            self.pm.register(plugin, self.name)
        except (pluggy.PluginValidationError, ValueError) as exc:
            raise PluginLoadError(f"plugin {self.name!r} has a bad hook: {exc}",
                                  "Match the hook's arguments to vyre_core/contract/hookspec.py "
                                  "(implementations may take a subset of them).") from None
        unknown = sorted(n for n, caller in vars(self.pm.hook).items()
                         if caller.spec is None and caller.get_hookimpls())
        if unknown:
            hints = [f"{name} -> {close[0]}" for name in unknown
                     if (close := difflib.get_close_matches(name, HOOK_NAMES, n=1))]
            raise PluginLoadError(
                f"plugin {self.name!r} implements unknown hooks {unknown}",
                (f"Did you mean {', '.join(hints)}? " if hints else "")
                + f"Rename each to a hook of contract {CONTRACT_MAJOR} "
                "(vyre_core/contract/hookspec.py lists them) or remove it.")
        missing = [h for h in REQUIRED_HOOKS if not getattr(self.pm.hook, h).get_hookimpls()]
        if missing:
            raise PluginLoadError(f"plugin {self.name!r} does not implement {missing}",
                                  "Every backend implements vyre_backend_id and vyre_dispatch.")
        for deprecation in deprecations.hooks_of(plugin):
            deprecations.enforce(deprecation, f"plugin {self.name!r}", PluginLoadError)
        self.defaults = ConservativeDefaults(self.call, self.implements)
        self.pm.register(self.defaults, "vyre-defaults")
        self._callers = {name: self._winner(name) for name in HOOK_NAMES}

    def _winner(self, hook: str) -> Callable[..., Any]:
        """What ``call`` runs for ``hook``: the backend's implementation, else the
        default's, called directly where it alone answers a firstresult hook (pluggy's
        dispatch would add only its cost, and a worker calls hooks on every launch)."""
        caller = getattr(self.pm.hook, hook)
        if self.implements(hook):
            caller = self.pm.subset_hook_caller(hook, remove_plugins=[self.defaults])
        impls = caller.get_hookimpls()
        if len(impls) != 1 or impls[0].hookwrapper or impls[0].wrapper \
                or not (caller.spec and caller.spec.opts.get("firstresult")):
            return caller
        function, names = impls[0].function, impls[0].argnames
        return lambda **kwargs: function(*[kwargs[name] for name in names])

    def implements(self, hook: str) -> bool:
        """Whether the backend itself (not the defaults) implements ``hook``."""
        impls = getattr(self.pm.hook, hook).get_hookimpls()
        return any(impl.plugin is self.plugin for impl in impls)

    def call(self, hook: str, **kwargs: Any) -> Any:
        return self._callers[hook](**kwargs)


def _check_contract_major(plugin: object, name: str) -> None:
    declared = getattr(plugin, "VYRE_CONTRACT", None)
    if declared is None:
        raise PluginLoadError(f"plugin {name!r} does not declare the contract it targets",
                              f"Add `VYRE_CONTRACT = {CONTRACT_MAJOR}` to the plugin module.")
    if declared != CONTRACT_MAJOR:
        raise PluginLoadError(
            f"plugin {name!r} targets contract {declared!r}; this vyre implements "
            f"contract {CONTRACT_MAJOR}",
            f"Install a version of the plugin built for contract {CONTRACT_MAJOR}, or a "
            f"vyre that implements contract {declared!r}.")
