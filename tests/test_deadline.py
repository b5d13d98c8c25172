"""The one check of seconds a caller gives (``vyre_core.deadline``): what each place
allows is a parameter, the wording the same everywhere."""

from __future__ import annotations

import threading

import pytest

from vyre_core.config import DispatchConfig
from vyre_core.deadline import checked_seconds, seconds_wrong
from vyre_core.errors import InvalidConfigError
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
    with pytest.raises(InvalidConfigError, match="startup_timeout="):
        PoolOptions(startup_timeout=value)


def test_a_pool_period_is_bounded_and_spin_may_be_zero():
    PoolOptions(cooldown=MAX_SECONDS, spin=0)
    with pytest.raises(InvalidConfigError, match="cooldown="):
        PoolOptions(cooldown=MAX_SECONDS * 2)
    with pytest.raises(InvalidConfigError, match="spin="):
        PoolOptions(spin=NAN)
