"""How a Driver verb is called. Each verb has one shape, ``(work, inputs, *, backend=None,
config=None, ...)``, and ``config.timeout`` bounds the whole call; a keyword the verb does
not take is refused with the verb's shape. The forms of vyre 0.1 (``backend`` and
``config`` given by position, ``launch(kernel, dim, args)``, ``timeout=`` beside a config,
``dispatch_sequence``, ``compile_sequence``, ``dispatch_resident``'s ``Timing``) keep
working until 1.0.0, each warning once (``deprecations.py``). What an old call meant is
worked out here, once, so that each verb stays a few lines."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from vyre_core import deprecations
from vyre_core.config import DispatchConfig
from vyre_core.contract.types import Outputs
from vyre_core.errors import InvalidConfigError

#: An old form's rewrite: (positionals, keywords) -> the same call in today's shape, or
#: None where the call is not of that form.
Rewrite = Callable[[tuple[Any, ...], dict[str, Any]], tuple[tuple[Any, ...], dict[str, Any]] | None]


#: The deprecations of a form every verb had, not one verb's (``deprecations.py``)
POSITIONAL = "positional backend and config"
TIMEOUT = "timeout= beside config="


def _warn(name: str, verb: str) -> None:
    deprecations.enforce(deprecations.of_kind("call")[name], verb, InvalidConfigError)


def verb(*by_position: str, old_form: Rewrite | None = None,
         timeout_in_config: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A verb (of the Driver, or of a handle it gives out), called as it is written, or in
    an old form (warned, then rewritten):
    ``by_position``: the keywords it once took by position after its own positionals, in
    that order; ``old_form``: a rewrite of a call of another old shape; with
    ``timeout_in_config``, ``timeout=`` is taken as ``config.timeout``."""
    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        params = list(inspect.signature(fn).parameters.values())[1:]  # (self)
        own = sum(p.kind is p.POSITIONAL_OR_KEYWORD for p in params)
        known = frozenset(p.name for p in params)
        name = fn.__qualname__  # ("Driver.dispatch", "ResidentBuffer.upload")
        words = [p.name for p in params[:own]] + ["*"] + [f"{p.name}=..." for p in params[own:]]
        shape = f"{name}({', '.join(words)})"
        timeout_keyword = "timeout" if timeout_in_config else None

        @functools.wraps(fn)
        def called(self: Any, *args: Any, **kwargs: Any) -> Any:
            # (every dispatch passes here: the call as written costs three tests)
            if old_form is not None:
                rewritten = old_form(args, kwargs)
                if rewritten is not None:
                    args, kwargs = rewritten
            if len(args) > own or timeout_keyword in kwargs or not known.issuperset(kwargs):
                if len(args) > own:
                    args, kwargs = _by_name(name, args, kwargs, own, by_position)
                if timeout_keyword in kwargs:
                    kwargs = _timeout_in_config(name, kwargs)
                unknown = kwargs.keys() - known
                if unknown:
                    raise _unknown(name, unknown, shape, "dim" in known)
            return fn(self, *args, **kwargs)
        return called
    return wrap


def _by_name(verb: str, args: tuple[Any, ...], kwargs: dict[str, Any], own: int,
             by_position: tuple[str, ...]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The call with what it gave by position past ``own`` moved to ``by_position``'s
    names, warned."""
    _warn(POSITIONAL, verb)
    return _mapped(verb, args, kwargs, own, by_position)


def _mapped(verb: str, args: tuple[Any, ...], kwargs: dict[str, Any], own: int,
            by_position: tuple[str, ...]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    extra = args[own:]
    if len(extra) > len(by_position):
        raise InvalidConfigError(
            f"{verb}() takes {own} arguments by position, and {len(args)} were given",
            f"Name the rest: {verb}(..., {', '.join(f'{n}=...' for n in by_position)}).")
    names = by_position[:len(extra)]
    twice = [n for n in names if n in kwargs]
    if twice:
        raise InvalidConfigError(f"{verb}() got {', '.join(twice)} twice (by position "
                                 "and by name)", f"Name each once: {', '.join(twice)}=...")
    return args[:own], {**kwargs, **dict(zip(names, extra, strict=True))}


def _timeout_in_config(verb: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``timeout=`` beside ``config``: the config's timeout (a call's one bound)."""
    kwargs = dict(kwargs)
    timeout = kwargs.pop("timeout")
    _warn(TIMEOUT, verb)
    if timeout is None:
        return kwargs
    config = kwargs.get("config")
    if not isinstance(config, DispatchConfig | None):  # (the verb refuses it, with its Fix)
        return kwargs
    config = config or DispatchConfig()
    if config.timeout is not None and config.timeout != timeout:
        raise InvalidConfigError(
            f"{verb}() got timeout={timeout!r} and config.timeout={config.timeout!r}",
            "Give one: config=DispatchConfig(timeout=...) bounds the whole call.")
    return {**kwargs, "config": config.replace(timeout=timeout)}


def _unknown(verb: str, unknown: set[str], shape: str, takes_dim: bool
             ) -> InvalidConfigError:
    names = ", ".join(f"{name}=" for name in sorted(unknown))
    fix = f"Call it as {shape}."
    if takes_dim:
        fix = ("Say how many invocations run with dim= (e.g. dim=len(x), or dim=(64, 32): "
               "dim[i] is the extent of global_id(i)), or count workgroups with "
               f"config=DispatchConfig(grid_override=(4,)). {fix}")
    return InvalidConfigError(f"{verb.rpartition('.')[2]}() got an unknown keyword argument "
                              f"{names}", fix)


def launch_dim_first(args: tuple[Any, ...], kwargs: dict[str, Any]
                     ) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    """``launch(kernel, dim, args, ...)``, vyre 0.1's order: ``dim`` by name now."""
    if len(args) >= 3 or (len(args) == 2 and "args" in kwargs and "dim" not in kwargs):
        _warn("Driver.launch(kernel, dim, args)", "Driver.launch")
        if "dim" in kwargs:
            raise InvalidConfigError("launch() got dim twice (by position and by name)",
                                     "Write drv.launch(kernel, args, dim=dim).")
        rest = dict(kwargs)
        kernel_args = args[2] if len(args) >= 3 else rest.pop("args")
        return (args[0], kernel_args, *args[3:]), {**rest, "dim": args[1]}
    return None


def route_backend_second(args: tuple[Any, ...], kwargs: dict[str, Any]
                         ) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    """``route(program, backend, timeout, config)``, vyre 0.1's order."""
    if len(args) > 2 or (len(args) == 2 and isinstance(args[1], str)):
        return _by_name("Driver.route", args, kwargs, 1, ("backend", "timeout", "config"))
    return None


def explain_timeout_second(args: tuple[Any, ...], kwargs: dict[str, Any]
                           ) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    """``explain(program, timeout, config)``, vyre 0.1's order."""
    if len(args) > 2 or (len(args) == 2 and isinstance(args[1], int | float)
                         and not isinstance(args[1], bool)):
        return _by_name("Driver.explain", args, kwargs, 1, ("timeout", "config"))
    return None


def alias(old: str, new: Callable[..., Any], own: int, by_position: tuple[str, ...]
          ) -> Callable[..., Any]:
    """``Driver.<old>``, kept until 1.0.0 as ``new`` (a verb: which takes a sequence too,
    and ``own`` positionals), its old positionals past those named ``by_position``."""
    @functools.wraps(new)
    def called(self: Any, *args: Any, **kwargs: Any) -> Any:
        _warn(f"Driver.{old}", f"Driver.{old}")
        if len(args) > own:
            args, kwargs = _mapped(f"Driver.{old}", args, kwargs, own, by_position)
        return new(self, *args, **kwargs)
    called.__name__ = called.__qualname__ = old
    called.__doc__ = f"Deprecated (until 1.0.0): ``{new.__name__}``, which takes a sequence."
    return called


class ResidentOutputs(Outputs):
    """What ``dispatch_resident`` returns: no arrays (its outputs are in the buffers), its
    ``timing``; read as vyre 0.1's ``Timing`` (``wall_ns``, ``device_ns``, ``label``)
    until 1.0.0, with a warning."""

    def _timing(self, field: str) -> Any:
        _warn("Driver.dispatch_resident's Timing", "Driver.dispatch_resident")
        return getattr(self.timing, field)

    wall_ns = property(lambda self: self._timing("wall_ns"))
    device_ns = property(lambda self: self._timing("device_ns"))
    label = property(lambda self: self._timing("label"))
