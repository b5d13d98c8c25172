"""Routing's probes without processes: the probe cache's rules (where it lives, what its
identity holds, what a file must be to be used, a corrupt file ignored with a warning and
written anew) and the routing policy's (a backend it may pass over is probed apart, never
started; a failed probe is passed over for its cooldown), over a stand-in for the pools."""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, field

import pytest

from vyre_core import ir, probe_cache
from vyre_core.contract.types import Capabilities
from vyre_core.deadline import NO_DEADLINE, Deadline
from vyre_core.errors import DispatchTimeoutError, PoolFailedError
from vyre_core.probe_cache import ProbeCache
from vyre_core.registry import BackendRegistration, Registry
from vyre_core.routing import RoutingPolicy
from vyre_core.testing import PATIENCE, wait_for

pytestmark = pytest.mark.fast


def caps(**extra) -> Capabilities:
    return Capabilities(max_workgroup_size=(256, 256, 64), max_invocations_per_workgroup=256,
                        max_workgroup_memory_bytes=16384, extra=extra)


def reg(backend: str, precedence: int, *, reference: bool = False,
        distribution: str | None = "vyre-x") -> BackendRegistration:
    return BackendRegistration(id=backend, version="1", distribution=distribution,
                               precedence=precedence, claims=caps(), is_reference=reference,
                               entry_point=f"{backend} = vyre_{backend}.backend",
                               plugin=object())


SOFT = caps(software_adapter=True)

# -- where, and what a file must be -------------------------------------------------------------


def test_the_cache_lives_in_the_users_cache_unless_told_otherwise(tmp_path):
    assert probe_cache.directory({"XDG_CACHE_HOME": str(tmp_path)}) == \
        tmp_path / "vyre" / "probes"
    assert probe_cache.directory({"VYRE_PROBE_CACHE": str(tmp_path / "p")}) == tmp_path / "p"
    assert probe_cache.directory({"VYRE_PROBE_CACHE": "off"}) is None
    assert probe_cache.directory({"VYRE_PROBE_CACHE": " OFF "}) is None


def test_an_entry_is_used_only_for_its_own_identity_and_while_young():
    facts = {"backend": ["wgpu", "1"], "env": [["VK_ICD_FILENAMES", "a.json"]]}
    data = json.loads(json.dumps(probe_cache.entry(facts, SOFT, 1000.0)))
    assert probe_cache.read_entry(data, facts, 1001.0).identity == SOFT.identity
    other = {**facts, "env": [["VK_ICD_FILENAMES", "b.json"]]}  # (another adapter chosen)
    assert probe_cache.read_entry(data, other, 1001.0) is None
    assert probe_cache.read_entry(data, facts, 1000.0 + probe_cache.MAX_AGE) is None
    assert probe_cache.read_entry(data, facts, 999.0) is None  # (written in the future)
    assert probe_cache.read_entry({**data, "format": 0}, facts, 1001.0) is None
    for corrupt in ([], {"format": 1}, {**data, "capabilities": {"supported_ops": 3}}):
        with pytest.raises(ValueError):
            probe_cache.read_entry(corrupt, facts, 1001.0)
    assert probe_cache.key_of("wgpu", facts) != probe_cache.key_of("wgpu", other)


def test_the_identity_holds_what_selects_an_adapter_and_not_the_caches_own_setting():
    wgpu = reg("wgpu", 100)
    base = probe_cache.identity_facts(wgpu, {"HOME": "/h"})
    assert probe_cache.identity_facts(wgpu, {"HOME": "/elsewhere"}) == base
    for where in ("VYRE_PROBE_CACHE", "VYRE_RUNTIME_DIR", "VYRE_TUNING_CACHE",
                  "VYRE_CPU_CACHE_DIR"):  # (where files go: vyre doctor sets one)
        assert probe_cache.identity_facts(wgpu, {"HOME": "/h", where: "/x"}) == base, where
    for name in ("VK_ICD_FILENAMES", "WGPU_ADAPTER_NAME", "CUDA_VISIBLE_DEVICES",
                 "VYRE_FAULTS", "VYRE_CPU_THREADS", "VYRE_LOAD_PLUGINS",
                 "MESA_LOADER_DRIVER_OVERRIDE"):
        assert probe_cache.identity_facts(wgpu, {name: "1"}) != base, name
    assert probe_cache.identity_facts(reg("wgpu", 100, distribution="vyre-y"), {}) != \
        probe_cache.identity_facts(wgpu, {})


def test_a_probe_is_kept_read_back_and_a_plugin_registered_by_hand_is_not(tmp_path):
    cache = ProbeCache(tmp_path)
    wgpu = reg("wgpu", 100)
    assert cache.load(wgpu) is None
    cache.store(wgpu, SOFT)
    written, = tmp_path.glob("wgpu-*.json")
    assert ProbeCache(tmp_path).load(wgpu).identity == SOFT.identity  # (a new process)
    stamp = written.stat().st_mtime_ns
    cache.store(wgpu, SOFT)  # the same probe: the file is left as it is
    assert written.stat().st_mtime_ns == stamp
    hand = reg("mine", 5, distribution=None)
    cache.store(hand, SOFT)
    assert cache.load(hand) is None and not list(tmp_path.glob("mine-*"))
    ProbeCache(None).store(wgpu, SOFT)  # (off: nothing, no error)


def test_a_corrupt_file_is_ignored_with_a_warning_and_written_anew(tmp_path, caplog):
    cache = ProbeCache(tmp_path)
    wgpu = reg("wgpu", 100)
    cache.store(wgpu, SOFT)
    written, = tmp_path.glob("wgpu-*.json")
    for corrupt in ('{"format": 1, "capabilities": {"supported_o', "[]", "\x00\xff"):
        written.write_text(corrupt)
        with caplog.at_level(logging.WARNING, logger="vyre.routing"):
            assert ProbeCache(tmp_path).load(wgpu) is None
        assert f"ignoring the corrupt file {written}" in caplog.text
        caplog.clear()
        ProbeCache(tmp_path).store(wgpu, SOFT)
        assert ProbeCache(tmp_path).load(wgpu).identity == SOFT.identity


def test_a_cache_that_cannot_be_written_is_only_logged(tmp_path, caplog):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    with caplog.at_level(logging.WARNING, logger="vyre.routing"):
        ProbeCache(blocked).store(reg("wgpu", 100), SOFT)
    assert "probe cache: cannot write" in caplog.text and "VYRE_PROBE_CACHE" in caplog.text


# -- the policy: probed apart, never started ----------------------------------------------------


@dataclass
class StandInPool:
    backend: str
    probed: Capabilities
    pinned: bool = False
    varied: bool = False

    @property
    def device_capabilities(self) -> dict:
        return {None: self.probed}

    def unavailable(self) -> str | None:
        return None


@dataclass
class StandInPools:
    """What the policy asks of ``pools.Pools``; ``found``: each backend's probe
    (an exception: its probe fails)."""

    found: dict
    closed: bool = False
    pools: dict = field(default_factory=dict)
    apart: list = field(default_factory=list)

    def existing(self, backend):
        return self.pools.get(backend)

    def open(self, backend):
        return self.pools.setdefault(backend, StandInPool(backend, self.found[backend]))

    def probe(self, backend, deadline):
        return self.open(backend).probed

    def can_probe_apart(self, backend):
        return True

    def probe_apart(self, backend, deadline):
        self.apart.append(backend)
        if isinstance(self.found[backend], Exception):
            raise self.found[backend]
        return self.found[backend]

    def cooldown(self, backend):
        return 60.0


def registry(*regs: BackendRegistration) -> Registry:
    made = Registry()
    for r in regs:
        made.add(r)
    return made


def program() -> ir.Program:
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", ir.f32)
    out = k.output("out", ir.f32, count=64)
    i = k.let("i", ir.global_id(0))
    out[i] = x[i]
    return k.build()


BACKENDS = (reg("wgpu", 100), reg("cpu", 500), reg("reference", 900, reference=True))


def test_a_backend_routing_demotes_is_probed_apart_and_never_started():
    pools = StandInPools({"wgpu": SOFT, "cpu": caps(), "reference": caps()})
    policy = RoutingPolicy(registry(*BACKENDS), pools)
    chosen = policy.pool_for(program(), None, NO_DEADLINE)
    assert chosen.backend == "cpu" and set(pools.pools) == {"cpu"}
    assert pools.apart == ["wgpu", "cpu"]  # (cpu too: ahead of the reference, demotable)
    assert "demoted: software adapter" in policy.router.route(program()).reason
    assert policy.pool_for(program(), None, NO_DEADLINE) is chosen
    assert pools.apart == ["wgpu", "cpu"]


def test_the_reference_chosen_on_its_claims_is_started_without_a_probe_apart():
    """Claims are a floor a probe keeps; only a demotion could turn routing away, and the
    reference is never demoted."""
    pools = StandInPools({"reference": caps()})
    policy = RoutingPolicy(registry(BACKENDS[2]), pools)
    assert policy.pool_for(program(), None, NO_DEADLINE).backend == "reference"
    assert pools.apart == []


def test_a_backend_whose_claims_say_it_is_no_software_adapter_is_started_without_one():
    """The cpu backend runs on the host: no probe can demote it, so it is started once
    wgpu, ahead of it, was probed apart."""
    host = BackendRegistration(**{**BACKENDS[1].__dict__,
                                  "claims": caps(software_adapter=False)})
    pools = StandInPools({"wgpu": SOFT, "cpu": caps(), "reference": caps()})
    policy = RoutingPolicy(registry(BACKENDS[0], host, BACKENDS[2]), pools)
    assert policy.pool_for(program(), None, NO_DEADLINE).backend == "cpu"
    assert pools.apart == ["wgpu"]


def test_a_backend_whose_probe_fails_is_passed_over_for_its_cooldown():
    failed = PoolFailedError("probing backend 'wgpu' took over 60 s", "Raise it.",
                             backend="wgpu")
    pools = StandInPools({"wgpu": failed, "cpu": caps(), "reference": caps()})
    policy = RoutingPolicy(registry(*BACKENDS), pools)
    assert policy.pool_for(program(), None, NO_DEADLINE).backend == "cpu"
    wgpu, = [e for e in policy.explain(program(), NO_DEADLINE) if e.backend == "wgpu"]
    assert wgpu.reasons[0] == "it could not be probed: probing backend 'wgpu' took over 60 s"
    policy.pool_for(program(), None, NO_DEADLINE)
    assert pools.apart.count("wgpu") == 1  # (not again within the cooldown)


def test_a_named_backend_is_started_not_probed_apart():
    pools = StandInPools({"wgpu": SOFT, "cpu": caps(), "reference": caps()})
    policy = RoutingPolicy(registry(*BACKENDS), pools)
    assert policy.pool_for(program(), "wgpu", NO_DEADLINE).backend == "wgpu"
    assert pools.apart == []


def test_a_call_waiting_for_another_threads_probe_keeps_its_own_deadline():
    release = threading.Event()

    class Slow(StandInPools):
        def probe_apart(self, backend, deadline):
            release.wait(PATIENCE)
            return super().probe_apart(backend, deadline)

    pools = Slow({"wgpu": SOFT, "cpu": caps(), "reference": caps()})
    policy = RoutingPolicy(registry(*BACKENDS), pools)
    first = threading.Thread(target=policy.pool_for, args=(program(), None, NO_DEADLINE))
    first.start()
    try:
        assert wait_for(lambda: policy._probing.get("wgpu") is not None
                        and policy._probing["wgpu"].locked(), PATIENCE)
        started = time.monotonic()
        with pytest.raises(DispatchTimeoutError) as caught:
            policy.pool_for(program(), None, Deadline.after(0.2))
        assert time.monotonic() - started < PATIENCE
        assert "while routing probed backend 'wgpu'" in caught.value.cause
    finally:
        release.set()
        first.join(PATIENCE)
    assert pools.apart == ["wgpu", "cpu"]
