"""A call's deadline and the one check of seconds a caller gives (``vyre_core.deadline``):
what each place allows is a parameter, the wording the same everywhere; a deadline is
made once and read as the time left."""

from __future__ import annotations

import threading
import time

import pytest

from vyre_core import RestartPolicy, Timeouts, Transport
from vyre_core.config import DispatchConfig
from vyre_core.deadline import NO_DEADLINE, Deadline, checked_seconds, seconds_wrong
from vyre_core.errors import DispatchTimeoutError, InvalidConfigError
from vyre_core.supervisor.options import MAX_SECONDS, PoolOptions

pytestmark = pytest.mark.fast

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("value", [NAN, True, False, "3", None, [1], 1j])
def test_what_is_not_a_number_of_seconds_is_refused_everywhere(value):
    assert seconds_wrong(value, zero=True) == "is not a number of seconds"


def test_zero_infinity_and_a_most_are_each_places_choice():
    assert seconds_wrong(0) == "is not a number of seconds > 0"
    assert seconds_wrong(0, zero=True) is None
    assert seconds_wrong(-1e-9, zero=True) == "is not a number of seconds >= 0"
    assert seconds_wrong(INF) is None
    assert seconds_wrong(INF, infinite=False) == "is infinite: use None for no deadline"
    assert seconds_wrong(10, most=5) == "is more than 5 seconds"
    assert seconds_wrong(INF, most=5) == "is more than 5 seconds"
    assert seconds_wrong(5, most=5) is None and seconds_wrong(2.5) is None


def test_checked_seconds_gives_what_a_wait_takes():
    assert checked_seconds(None, "timeout") is None
    assert checked_seconds(INF, "timeout") is None  # (no deadline)
    assert checked_seconds(3, "timeout") == 3.0
    assert checked_seconds(1e300, "timeout") == threading.TIMEOUT_MAX
    assert checked_seconds(0, "timeout", zero=True) == 0.0
    with pytest.raises(InvalidConfigError) as caught:
        checked_seconds(NAN, "close timeout", zero=True)
    assert caught.value.cause == "close timeout=nan is not a number of seconds"
    assert caught.value.fix == "Pass e.g. close timeout=30.0, or None for no deadline."


@pytest.mark.parametrize("value", [0, -1, NAN, INF, True])
def test_a_dispatch_timeout_and_a_pool_period_refuse_the_same_values(value):
    with pytest.raises(InvalidConfigError, match="timeout="):
        DispatchConfig(timeout=value)
    with pytest.raises(InvalidConfigError, match="startup="):
        PoolOptions(timeouts=Timeouts(startup=value))


def test_a_pool_period_is_bounded_and_spin_may_be_zero():
    PoolOptions(restart=RestartPolicy(cooldown=MAX_SECONDS), transport=Transport(spin=0))
    with pytest.raises(InvalidConfigError, match="cooldown="):
        PoolOptions(restart=RestartPolicy(cooldown=MAX_SECONDS * 2))
    with pytest.raises(InvalidConfigError, match="spin="):
        PoolOptions(transport=Transport(spin=NAN))


def test_a_deadline_is_made_once_and_read_as_time_left():
    assert Deadline.after(None) is NO_DEADLINE and Deadline.after(INF) is NO_DEADLINE
    assert NO_DEADLINE.left() is None and not NO_DEADLINE.passed()
    assert NO_DEADLINE.bound(7.0) == 7.0
    before = time.monotonic()
    soon = Deadline.after(30)
    assert soon.seconds == 30.0 and before + 30 <= soon.at <= time.monotonic() + 30
    assert 0 < soon.left() <= 30 and soon.bound(5.0) == 5.0 and soon.bound(100) <= 30
    assert soon.left(now=soon.at + 1) == 0.0  # (never below 0)
    assert soon.passed(now=soon.at) and not soon.passed(now=soon.at - 1e-3)
    with pytest.raises(InvalidConfigError, match="timeout=nan"):
        Deadline.after(NAN)


def test_a_step_with_its_own_bound_takes_the_sooner_and_its_seconds():
    """A compile within the call's deadline: the caller's when it comes first (its
    seconds in the messages), else the compile's own."""
    call = Deadline.after(5)
    assert call.within(600) is call
    own = call.within(1)
    assert own.seconds == 1 and own.at < call.at
    unbounded = NO_DEADLINE.within(2)
    assert unbounded.seconds == 2 and unbounded.at is not None


def test_an_expired_deadline_says_while_what():
    error = Deadline.after(1).expired_error("routing probed backend 'wgpu'", "Wait longer.")
    assert isinstance(error, DispatchTimeoutError)
    assert error.cause == "the call's deadline passed while routing probed backend 'wgpu'"
    assert error.fix == "Wait longer."
