"""The memory budget's rules, without processes (``vyre_core/memory.py``,
``dataplane.surplus``) and the supervision rule for an OOM-killed worker."""

from __future__ import annotations

import signal

import pytest
from supervision_harness import Shell

from vyre_core.dataplane import surplus
from vyre_core.errors import SystemResourceError
from vyre_core.memory import RESERVE, MemoryFacts, Plan, cache_bound, plan

pytestmark = pytest.mark.fast

MiB = 1 << 20
GROUP = MemoryFacts(room=600 * MiB, limit=1024 * MiB)  # reserve: 128 MiB (a 1/8 of it)


def test_no_limit_known_shares_everything() -> None:
    assert plan(MemoryFacts(), 1 << 40, 0, held=False) is Plan.SHARE


@pytest.mark.parametrize("need,cached,held,expected", [
    (400, 0, False, Plan.SHARE),       # 600 - 128 = 472 MiB of headroom
    (472, 0, True, Plan.SHARE),
    (500, 0, False, Plan.REFUSE),      # an output: refused before it is made
    (500, 0, True, Plan.SOCKET),       # an input this process holds: it rides the lane
    (500, 64, False, Plan.RELEASE),    # the cached segments make room
    (500, 64, True, Plan.RELEASE),
])
def test_the_budget_decides_share_release_socket_refuse(need, cached, held, expected) -> None:
    assert plan(GROUP, need * MiB, cached * MiB, held) is expected


def test_the_tightest_of_the_cgroup_and_free_memory_counts() -> None:
    facts = MemoryFacts(room=600 * MiB, limit=1024 * MiB, available=200 * MiB)
    assert plan(facts, 100 * MiB, 0, held=False) is Plan.REFUSE  # 200 - 128 < 100
    small = MemoryFacts(available=200 * MiB)  # no cgroup: the reserve is RESERVE
    assert plan(small, 200 * MiB - RESERVE, 0, held=False) is Plan.SHARE


def test_an_output_must_fit_the_address_space() -> None:
    facts = MemoryFacts(address_space=128 * MiB)
    assert plan(facts, 256 * MiB, 0, held=False) is Plan.REFUSE
    assert plan(facts, 256 * MiB, 0, held=True) is Plan.SHARE  # written, never mapped


def test_cached_segments_stay_within_a_share_of_the_limit() -> None:
    bound = cache_bound(GROUP)
    assert bound == (1024 - 128) * MiB // 4
    assert cache_bound(MemoryFacts()) is None
    # the pattern: 160 MiB in and out freed just now (320 MiB kept before) is
    # over the bound of its 1 GiB group (224 MiB): the older one goes
    free = [(160 * MiB, 10.0), (160 * MiB, 10.0)]
    assert surplus(free, 10.5) == []
    assert surplus(free, 10.5, bound) == [0]


def test_a_request_whose_worker_the_oom_killer_took_fails_at_once_and_is_not_run_again():
    """Row 7: the shell's fact (SIGKILL, and the cgroup's oom_kill counter rose) makes
    the rules fail the request with SystemResourceError and a Fix, never resend it;
    a plain SIGKILL still runs it again."""
    for oom_killed in (True, False):
        shell = Shell(restart={"max_restarts": 10})
        req = shell.submit(retries=1)
        shell.receive(0)
        shell.alive.pop(0, None)
        shell.machine.exited(0, -signal.SIGKILL, "tail", shell.now, oom_killed=oom_killed)
        shell.run()
        if not oom_killed:
            assert req.tracking.id not in shell.results and shell.sent_to(0)[-1] is req
            continue
        error = shell.result(req)
        assert isinstance(error, SystemResourceError) and error.details["oom_killed"]
        assert "SIGKILL (the kernel's OOM killer" in error.cause
        assert "not run again" in error.cause and "memory" in error.fix
        assert shell.sent_to(0).count(req) == 1
