"""The worker's spin on its lane after a reply (``server.Spinning``): kept on a quiet
machine, stopped for a while once a yield shows another process had the core (there a
yield costs a time slice, where a sleeper is woken ahead of the competing process)."""

from __future__ import annotations

import pytest

from vyre_core.spinning import CONTENDED, SPIN_BACKOFF, Spinning


@pytest.mark.fast
def test_a_worker_spins_after_each_reply_while_yields_come_back_at_once():
    spinning = Spinning(0.0002)
    assert not spinning.on(0.0)  # (nothing answered yet: it sleeps)
    spinning.start(10.0)
    assert spinning.on(10.0001)
    spinning.yielded(10.0001, 10.0001 + CONTENDED / 10)
    assert spinning.on(10.00015)
    assert not spinning.on(10.0002)


@pytest.mark.fast
def test_a_slow_yield_stops_the_spinning_for_the_backoff():
    spinning = Spinning(0.0002)
    spinning.start(10.0)
    spinning.yielded(10.0, 10.003)  # (a competing process ran for a slice)
    assert not spinning.on(10.003)
    spinning.start(10.004)          # (the next reply, within the backoff: no spin)
    assert not spinning.on(10.004)
    spinning.start(10.003 + SPIN_BACKOFF)
    assert spinning.on(10.003 + SPIN_BACKOFF)


@pytest.mark.fast
def test_no_spin_configured_never_spins():
    spinning = Spinning(0.0)
    spinning.start(1.0)
    assert not spinning.on(1.0)
