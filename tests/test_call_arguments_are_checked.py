"""Every argument a caller can get wrong is refused with a VyreError and a Fix before
anything runs: timeouts (NaN, negative, infinite where a bound is needed, not a number),
configs, inputs, byte counts, pool options. Found by a hostile pass: a NaN timeout was
accepted and then stalled every other caller's deadline (NaN never compares <= now);
others surfaced as raw OverflowError, TypeError, AttributeError or UnicodeEncodeError."""

from __future__ import annotations

import weakref

import numpy as np
import pytest

from vyre_core import DispatchConfig, Driver, ir
from vyre_core.boundary.messages import Ran
from vyre_core.driver import PendingResult
from vyre_core.errors import (
    DispatchTimeoutError,
    InvalidConfigError,
    InvalidInputError,
    VyreError,
)
from vyre_core.registry import Registry
from vyre_core.supervisor.options import RestartPolicy, Timeouts
from vyre_core.supervisor.outcome import Outcome

pytestmark = pytest.mark.fast  # the fast tier: no process is started here

BAD_TIMEOUTS = [float("nan"), -1.0, 0, "1", True, [1.0]]


@pytest.fixture
def drv(monkeypatch, tmp_path):
    monkeypatch.setenv("VYRE_RUNTIME_DIR", str(tmp_path))
    with Driver(Registry.discover()) as driver:  # lazy: nothing starts unless used
        yield driver
        assert driver.status()["pools"]["reference"]["state"] == "not started"


def program() -> ir.Program:
    k = ir.Kernel(workgroup=(4,))
    x = k.read("x", ir.u32)
    out = k.output("out", ir.u32, count=4)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        out[i] = x[i]
    return k.build()


def refused(error_type: type[VyreError], call) -> VyreError:
    with pytest.raises(error_type) as info:
        call()
    assert "Fix:" in str(info.value)
    return info.value


@pytest.mark.parametrize("timeout", BAD_TIMEOUTS, ids=repr)
def test_every_method_timeout_is_checked(drv, timeout) -> None:
    """The verbs without a config take ``timeout=``; the others' bound is their config's
    (checked when made, below)."""
    calls = [lambda: drv.allocate_resident(16, backend="reference", timeout=timeout),
             lambda: drv.probe("reference", timeout=timeout),
             lambda: drv.devices("reference", timeout=timeout)]
    for call in calls:
        refused(InvalidConfigError, call)
    with pytest.raises(InvalidConfigError):
        DispatchConfig(timeout=timeout)


def test_close_timeout_is_checked_before_anything_closes(drv) -> None:
    refused(InvalidConfigError, lambda: drv.close(timeout=float("nan")))
    assert drv.status()["closed"] is False
    drv.close(timeout=0)


@pytest.mark.parametrize("timeout", [float("nan"), -0.5, "3"], ids=repr)
def test_result_timeout_is_checked(timeout) -> None:
    future = Outcome()
    future.set_result((Ran(), [np.zeros(1, np.uint32)]))
    refused(InvalidConfigError, lambda: PendingResult(future).result(timeout))


@pytest.mark.parametrize("timeout", [float("inf"), 1e300, 0])
def test_result_accepts_unbounded_and_zero_timeouts(timeout) -> None:
    future = Outcome()
    future.set_result((Ran(), [np.zeros(1, np.uint32)]))
    assert PendingResult(future).result(timeout)[0].tolist() == [0]
    pending = PendingResult(Outcome())  # (not answered: the wait itself takes the timeout)
    if timeout == 0:
        refused(DispatchTimeoutError, lambda: pending.result(timeout))


def test_a_handle_filled_into_out_keeps_the_callers_arrays_and_lets_go_of_the_reply() -> None:
    """``out`` is taken as the call made it (the caller's list may change after), and once
    written the reply goes: a kept handle holds no segment of the pool's."""
    reply = np.arange(4, dtype=np.uint32)
    gone = weakref.ref(reply)
    future = Outcome()
    out = [np.zeros(4, np.uint32)]
    checked = out[0]
    pending = PendingResult(future, out)
    out[0] = np.ones(4, np.uint32)  # (after the call: not what was checked)
    future.set_result((Ran(), [reply]))
    del reply, future  # (the handle's now: as a call's outcome is)
    got = pending.result(0)
    assert got[0] is checked and checked.tolist() == [0, 1, 2, 3] and out[0].tolist() == [1] * 4
    assert gone() is None and pending.result()[0] is checked and pending.is_ready()


def test_a_launch_handle_fills_the_callers_arrays_once_and_lets_go_of_the_reply() -> None:
    """As a dispatch's handle: its plan's arrays written once (then those the dispatch
    could not write in place, ``fill``), under one lock, the reply let go of after."""
    from vyre_core.driver.pending import _LaunchResult

    class Plan:
        def __init__(self) -> None:
            self.out, self.filled = [np.zeros(4, np.uint32)], 0

        def fill(self) -> None:
            self.filled += 1

    plan, reply = Plan(), np.arange(4, dtype=np.uint32)
    gone = weakref.ref(reply)
    future = Outcome()
    pending = _LaunchResult(future, plan)
    future.set_result((Ran(), [reply]))
    del reply, future
    assert pending.result(0)[0] is plan.out[0] and plan.out[0].tolist() == [0, 1, 2, 3]
    assert pending.result()[0] is plan.out[0] and plan.filled == 1 and gone() is None


def test_a_completed_outcome_lets_go_of_its_callbacks_and_what_they_hold() -> None:
    """A callback's closure (the routing of a call: its request, its reply) goes once it
    has run, not at the next garbage collection: it and the outcome made a cycle."""
    held = Outcome()
    marker = Outcome()  # (anything a callback holds)
    gone = weakref.ref(marker)
    seen: list[Outcome] = []
    held.add_done_callback(lambda done, m=marker: seen.append(m) and done)
    del marker
    held.set_result(1)
    seen.clear()
    assert gone() is None
    later = Outcome()
    gone_later = weakref.ref(later)
    held.add_done_callback(lambda done, m=later: seen.append(done))  # (after: at once,
    del later                                                        # kept by nobody)
    assert seen == [held] and gone_later() is None


def test_configs_inputs_and_byte_counts_are_checked(drv) -> None:
    data = [np.arange(4, dtype=np.uint32)]
    refused(InvalidConfigError, lambda: drv.dispatch(program(), data, config={"timeout": 1}))
    refused(InvalidInputError, lambda: drv.dispatch(program(), 5))
    refused(InvalidInputError, lambda: drv.dispatch_async(program(), "abc"))
    for byte_len in ("8", 2**64, -1, 1.5, True):
        refused(InvalidInputError, lambda b=byte_len: drv.allocate_resident(b, backend="reference"))
    refused(InvalidConfigError, lambda: DispatchConfig(ulp_budget=2**70))
    refused(InvalidConfigError, lambda: DispatchConfig(label="\udcff"))


@pytest.mark.parametrize(("group", "field"), [
    (Timeouts, "kill_grace"), (Timeouts, "heartbeat"), (Timeouts, "startup"),
    (RestartPolicy, "cooldown"), (RestartPolicy, "window"), (Timeouts, "compile")])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), 1e300, 0, -1])
def test_pool_option_times_are_finite_and_positive(group, field, value) -> None:
    refused(InvalidConfigError, lambda: group(**{field: value}))
