"""The one dispatcher of the rules' actions (``supervisor/shell.py``): every kind of
action the rules answer with has its case in the ``Carrier``, each shell implements every
method the ``Shell`` protocol names (the Ray shell's ``stop`` and ``release`` on purpose
do nothing), and a failed action is the shell's to answer while the rest go on."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import logging
import textwrap
import threading
import typing
from types import SimpleNamespace
from typing import Any

import pytest

from vyre_core.cluster.place import RayPlace
from vyre_core.cluster.ray_pool import RayPool
from vyre_core.supervisor.local.place import LocalPlace
from vyre_core.supervisor.local.pool import Pool
from vyre_core.supervisor.rules.actions import (
    Action,
    Log,
    Release,
    Resolve,
    RoutingChanged,
    Send,
    Stop,
)
from vyre_core.supervisor.shell import Carrier, Place, PoolHandle, Shell

pytestmark = pytest.mark.fast

KINDS = typing.get_args(Action)


def _protocol_methods() -> list[str]:
    return [name for name, member in vars(Shell).items()
            if inspect.isfunction(member) and not name.startswith("_")]


def _request(waker: object = None) -> SimpleNamespace:
    """A request as far as the Carrier reads it: its caller's future, the waker of its
    transfer, its label."""
    return SimpleNamespace(call=SimpleNamespace(future=None), label="a test request",
                           transfer=SimpleNamespace(waker=waker))


def _one_of(kind: type) -> Any:
    """An action of ``kind`` with stand-in fields."""
    values = {"request": _request(), "level": logging.DEBUG, "text": "noted",
              "identity": b"w", "kill": True, "value": ("meta", [])}
    return kind(**{f.name: values.get(f.name, 0) for f in dataclasses.fields(kind)})


class Recording:
    """A shell that notes each call; ``fail``: the kinds it raises on."""

    backend = "test"

    def __init__(self, fail: tuple[type, ...] = (), ticket: object = None) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.failed: list[tuple[Any, Exception]] = []
        self._fail = fail
        self._ticket = ticket

    def _note(self, name: str, action: Any) -> None:
        if isinstance(action, self._fail):
            raise RuntimeError(f"{name} failed")
        self.calls.append((name, action))

    def spawn(self, action): self._note("spawn", action)
    def stop(self, action): self._note("stop", action)
    def signal(self, action): self._note("signal", action)
    def promote(self, action): self._note("promote", action)
    def release(self, request): self._note("release", request)

    def send(self, action):
        self._note("send", action)
        return self._ticket

    def reply_of(self, request, value):
        self.calls.append(("reply_of", request))
        return value

    def action_failed(self, action, exc):
        self.failed.append((action, exc))


class Machine:
    """The rules, as far as the Carrier reads them."""

    def __init__(self, more: list[list[Any]] = ()) -> None:
        self.answers: list[tuple[Any, Any]] = []
        self._more = list(more)

    def answered(self, request, value, now):
        self.answers.append((request, value))

    def take_actions(self):
        return self._more.pop(0) if self._more else []


def _carrier(shell: Recording, machine: Machine | None = None) -> Carrier:
    return Carrier(shell, machine or Machine(), threading.Lock(), lambda: None, None)


def test_the_carrier_has_a_case_for_every_kind_of_action():
    source = textwrap.dedent(inspect.getsource(Carrier.carry))
    cases = {node.pattern.cls.id for node in ast.walk(ast.parse(source))
             if isinstance(node, ast.match_case) and isinstance(node.pattern, ast.MatchClass)}
    assert cases == {kind.__name__ for kind in KINDS}


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_each_kind_of_action_is_carried_out_and_none_falls_through(kind):
    shell = Recording()
    carrier = _carrier(shell)
    carrier.carry([_one_of(kind)])
    assert shell.failed == []
    if kind in (Log, RoutingChanged):
        assert shell.calls == []
        assert carrier.changed is (kind is RoutingChanged)
    elif kind is Resolve:  # (its worker is done with the request's memory: released)
        assert [name for name, _ in shell.calls] == ["reply_of", "release"]
    else:
        assert [name for name, _ in shell.calls] == [kind.__name__.lower()]


def test_an_unknown_action_is_the_shells_failure_not_silence():
    shell = Recording()
    _carrier(shell).carry(["not an action"])
    assert [type(exc) for _, exc in shell.failed] == [TypeError]


@pytest.mark.parametrize("shell", [Pool, RayPool], ids=lambda c: c.__name__)
def test_each_shell_implements_every_method_of_the_protocol(shell):
    missing = [name for name in _protocol_methods()
               if not callable(getattr(shell, name, None))]
    assert missing == []
    assert set(_protocol_methods()) == {"spawn", "send", "stop", "signal", "promote",
                                        "release", "reply_of", "action_failed"}


def _members(protocol: type) -> dict[str, Any]:
    """What ``protocol`` declares: its methods and properties, and its annotated fields."""
    declared = {name: member for name, member in vars(protocol).items()
                if not name.startswith("_") and (inspect.isfunction(member)
                                                 or isinstance(member, property))}
    return declared | dict.fromkeys(protocol.__annotations__)


@pytest.mark.parametrize(("protocol", "implementation"), [
    (PoolHandle, Pool), (PoolHandle, RayPool), (Place, LocalPlace), (Place, RayPlace)],
    ids=lambda c: c.__name__)
def test_each_pool_and_place_has_every_member_of_its_protocol_with_its_parameters(
        protocol, implementation):
    """No type checker runs here: the protocols the set of pools and routing read stay
    true by this (a method with another name or other parameters fails; more parameters,
    each with a default, are allowed)."""
    for name, member in _members(protocol).items():
        found = inspect.getattr_static(implementation, name, None)
        if member is None:  # (a field: a class attribute, or set by an __init__ of vyre's)
            sources = [inspect.getsource(base) for base in implementation.__mro__
                       if base.__module__.startswith("vyre_core")]
            assert found is not None or any(f"self.{name} =" in source
                                            for source in sources), \
                (implementation.__name__, name)
        elif isinstance(member, property):
            assert isinstance(found, property), (implementation.__name__, name)
        else:
            assert callable(found), (implementation.__name__, name)
            declared = list(inspect.signature(member).parameters)
            has = list(inspect.signature(found).parameters.values())
            assert [p.name for p in has[:len(declared)]] == declared, \
                (implementation.__name__, name)
            assert all(p.default is not p.empty for p in has[len(declared):]), \
                (implementation.__name__, name, "more parameters, without defaults")


def test_the_ray_shell_stop_does_nothing_on_purpose():
    """An actor cannot be stopped at a safe point: the rules kill one still running the
    call after cancel_grace. The stop is carried out as nothing, touching no state."""
    stranger = object()  # (no attribute at all: the stop reads none)
    assert RayPool.stop(stranger, Stop(0, 1)) is None
    assert RayPool.stop.__doc__


def test_a_failed_action_goes_to_the_shell_and_the_rest_are_carried_out():
    shell = Recording(fail=(Send,))
    carrier = _carrier(shell)
    send = _one_of(Send)
    carrier.carry([send, _one_of(Stop), _one_of(RoutingChanged)])
    assert [action for action, _ in shell.failed] == [send]
    assert [name for name, _ in shell.calls] == ["stop"]
    assert carrier.changed


def test_a_resolve_queues_the_answer_counts_it_and_deliver_completes_it():
    from vyre_core.supervisor.outcome import Outcome

    told = []
    machine = Machine()
    shell = Recording()
    carrier = Carrier(shell, machine, threading.Lock(), lambda: told.append("routing"), None)
    request = _request()
    request.call.future = future = Outcome()
    carrier.carry([Resolve(request, ({"ok": 1}, [])), RoutingChanged()])
    assert request.call.future is None and not future.done()
    assert machine.answers == [(request, ({"ok": 1}, []))]
    carrier.deliver()
    assert told == ["routing"]
    assert future.result() == ({"ok": 1}, [])


def test_a_call_answered_while_its_worker_still_runs_it_keeps_its_memory_till_a_release():
    """Its worker may still write the call's shared memory (a deadline passed, a cancel
    the worker has not reached): the answer goes out, the memory is released only by
    the Release the rules send once that worker exits or stops."""
    shell = Recording()
    request = _request()
    _carrier(shell).carry([Resolve(request, ({"ok": 1}, []), running=True)])
    assert [name for name, _ in shell.calls] == ["reply_of"]
    _carrier(shell).carry([Release(request)])
    assert shell.calls[-1] == ("release", request)


def test_a_release_that_fails_costs_the_memory_never_the_answer():
    """Giving memory back can fail (closing a segment: an OSError); the caller's answer is
    already queued and counted by then, and the failure is the shell's, as a Release."""
    from vyre_core.supervisor.outcome import Outcome

    class Failing(Recording):
        def release(self, request):
            raise OSError("closing the segment failed")

    shell, machine = Failing(), Machine()
    carrier = _carrier(shell, machine)
    request = _request()
    request.call.future = future = Outcome()
    carrier.carry([Resolve(request, ({"ok": 1}, []))])
    carrier.deliver()
    assert future.done() and future.result() == ({"ok": 1}, [])
    assert machine.answers == [(request, ({"ok": 1}, []))]
    (failed, exc), = shell.failed
    assert failed == Release(request) and isinstance(exc, OSError)


def test_carry_all_carries_what_the_rules_answer_next_and_returns_the_callers_ticket():
    own, ticket = object(), object()
    shell = Recording(ticket=ticket)
    mine = Send(0, 1, b"w", _request(waker=own))
    machine = Machine(more=[[mine], [_one_of(Stop)]])
    carrier = _carrier(shell, machine)
    assert carrier.carry_all([_one_of(Log)], own) is ticket
    assert [name for name, _ in shell.calls] == ["send", "stop"]
