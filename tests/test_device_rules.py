"""Devices, on the pure rules (no process): one worker set per device, requests kept to the
devices routing allows, work spread over devices and sent where its program already is,
spares promoted only onto their own device, capabilities kept per device (routing over
them: tests/test_routing.py). Under real workers: tests/faults/test_devices.py."""

from __future__ import annotations

import pytest
from supervision_harness import CAPS, Shell, body_of

from vyre_core import Transport, ir
from vyre_core.contract.types import Capabilities, DeviceInfo
from vyre_core.errors import (
    InvalidConfigError,
    InvalidInputError,
    NoCapableBackendError,
    SystemResourceError,
)
from vyre_core.routing import rejection_reasons
from vyre_core.supervisor.options import PoolOptions
from vyre_core.supervisor.rules.actions import Spawn
from vyre_core.supervisor.rules.requests import Call, Request

pytestmark = pytest.mark.fast


def test_each_device_gets_its_workers_and_spares_are_spread_over_the_devices():
    shell = Shell(auto_start=False, devices=(0, 2), workers=2, standby=3)
    assert [w.device for w in shell.machine.workers] == [0, 0, 2, 2, 0, 2, 0]
    assert shell.machine.serving == 4
    shell.submit()
    assert [s.index for s in shell.spawns] == list(range(7))
    assert all(isinstance(s, Spawn) for s in shell.spawns)


def test_all_devices_are_the_ones_the_pool_found_and_none_leaves_workers_unpinned():
    shell = Shell(auto_start=False, devices="all", resolved=(1, 3))
    assert [w.device for w in shell.machine.workers] == [1, 3]
    assert [w.device for w in Shell(auto_start=False).machine.workers] == [None]


def test_a_request_runs_only_on_the_devices_routing_allowed_and_waits_without_blocking():
    shell = Shell(devices=(0, 1))
    busy = shell.submit()  # takes one worker
    first = shell.sent_to(busy.tracking.worker)
    other = 1 - busy.tracking.worker
    for_busy_device = shell.submit(devices={shell.worker(busy.tracking.worker).device})
    anywhere = shell.submit()
    assert for_busy_device.tracking.state == "queued"  # waits for its device ...
    assert shell.sent_to(other) == [anywhere]  # ... without holding up the one behind it
    shell.reply(busy.tracking.worker)
    assert shell.sent_to(busy.tracking.worker) == [*first, for_busy_device]


def test_work_goes_to_the_worker_that_holds_its_program_else_to_the_lowest_idle_one():
    shell = Shell(devices=(0, 1, 2))
    alone = shell.submit()
    shell.reply(alone.tracking.worker)
    assert alone.tracking.worker == 0  # one at a time: it stays together on the first worker
    spread = [shell.submit() for _ in range(3)]  # together: over every device
    assert [r.tracking.worker for r in spread] == [0, 1, 2]
    for r in spread:
        shell.reply(r.tracking.worker)
    compiled = shell.submit(fp="abc", devices={2})
    shell.reply(2)
    assert not shell.sends[-1].holds_program
    again = shell.submit(fp="abc")  # worker 0 is idle too, but the program is on 2
    assert again.tracking.worker == 2 and shell.sends[-1].holds_program
    shell.reply(2)
    assert compiled.tracking.worker == 2
    assert shell.machine.holds_everywhere(again) is False  # (workers 0 and 1 do not)


def test_a_spare_is_promoted_only_onto_a_slot_of_its_own_device():
    shell = Shell(devices=(0, 1), standby=1)  # the spare (slot 2) is on device 0
    shell.reply(shell.submit().tracking.worker)
    assert shell.worker(2).state == "spare" and shell.worker(2).device == 0
    shell.die(1)  # device 1's worker: no spare of its own, so a fresh process
    assert shell.worker(2).state == "spare"
    assert [s.index for s in shell.spawns[-1:]] == [1]
    spare_pid = shell.worker(2).pid
    shell.die(0)  # device 0's worker: the spare serves at once
    assert shell.worker(0).pid == spare_pid


def test_a_hello_from_another_device_is_refused_and_the_worker_stopped():
    shell = Shell(auto_hello=False, devices=(0, 1))
    shell.submit()
    shell.hello(1, device=0)
    assert shell.worker(1).state == "killing"
    assert "device 0, not 1" in shell.worker(1).hello_error
    assert 1 not in shell.machine.device_capabilities


def test_capabilities_are_kept_per_device_and_routing_told_of_each_new_one():
    shell = Shell(auto_hello=False, devices=(0, 1))
    shell.submit()
    with_f64 = {**CAPS, "supports_f64": True}
    shell.hello(1, caps=with_f64, devices=[{"id": 0, "name": "a"}, {"id": 1, "name": "b"}])
    assert shell.machine.capabilities.supports_f64  # device 0 has not said: device 1's
    shell.hello(0)
    caps = shell.machine.device_capabilities
    assert caps[1].supports_f64 and not caps[0].supports_f64
    assert not shell.machine.capabilities.supports_f64  # the first slot's device now
    assert shell.routing_changes == 2
    assert shell.machine.device_list == [DeviceInfo(0, "a"), DeviceInfo(1, "b")]
    status = shell.machine.status(shell.now)
    assert [w["device"] for w in status["workers"]] == [0, 1]
    assert status["devices"][1] == {"id": 1, "name": "b", "vendor": "", "memory_bytes": None,
                                    "software": False}
    shell.die(1)  # a restart keeps what the device probed
    assert shell.machine.device_capabilities[1].supports_f64


@pytest.mark.parametrize("devices", [(), "some", (0, 0), (-1,), (True,), (1.5,),
                                     tuple(range(65))])
def test_bad_devices_are_refused_with_a_fix(devices):
    with pytest.raises(InvalidConfigError) as err:
        PoolOptions(devices=devices)
    assert "devices=" in str(err.value) and "vyre backends --probe" in str(err.value)
    assert err.value.fix.startswith("Use devices: ") and "workers" not in err.value.fix


def test_each_bad_option_gets_its_own_fix_and_only_the_bad_ones_are_named():
    with pytest.raises(InvalidConfigError) as err:
        PoolOptions(workers=0, threads=0, gpus_per_worker=-1)
    assert err.value.cause == "bad pool options: workers=0, gpus_per_worker=-1, threads=0"
    assert err.value.fix == ("Use workers: a whole number >= 1; gpus_per_worker: 0 to 64 "
                             "(fractions share a GPU); threads: None or a whole number from 1 "
                             "to 1024.")
    with pytest.raises(InvalidConfigError) as err:  # a group's own, when it is made
        Transport(spin=1, fork_server=None)
    assert err.value.cause == "bad transport: fork_server=None, spin=1"
    assert err.value.fix == ("Use Transport(fork_server=...): True or False; "
                             "Transport(spin=...): 0 to 0.01 seconds.")


def test_a_device_list_becomes_a_tuple():
    assert PoolOptions(devices=[2, 0]).devices == (2, 0)
    assert PoolOptions(devices="all").devices == "all"


def test_a_refused_start_fails_the_requests_only_that_device_could_serve():
    shell = Shell(auto_start=False, devices=(0, 1))
    for_one = shell.submit(devices={1})
    anywhere = shell.submit()
    shell.start(0, 1)  # device 0's worker starts; device 1's cannot
    refusal = SystemResourceError("starting worker 1 failed: EMFILE", "Raise ulimit -n.")
    shell.machine.spawn_failed(1, 1, refusal, shell.now)
    shell.run()
    assert isinstance(shell.result(for_one), SystemResourceError)
    assert anywhere.tracking.id not in shell.results or anywhere.tracking.worker == 0
    assert shell.sent_to(0)[0] is anywhere


def test_a_request_for_devices_the_pool_does_not_have_is_refused_at_once():
    shell = Shell(devices=(0, 1))
    req = shell.submit(devices={7})
    assert isinstance(shell.result(req), InvalidInputError)
    assert "device(s) [7]" in str(shell.result(req)) and "device(s) [0, 1]" \
        in str(shell.result(req))


def test_a_request_waiting_for_its_device_says_which_at_its_deadline():
    shell = Shell(devices=(0, 1))
    busy = shell.submit(devices={1})
    assert busy.tracking.worker == 1
    shell.receive(1)
    late = shell.submit(devices={1}, timeout=1.0)
    shell.advance(0.5)
    shell.beat(1)
    shell.advance(1.0)
    assert "on device(s) [1]" in str(shell.result(late))


def test_the_encoder_names_a_program_only_when_every_worker_it_may_reach_holds_it():
    shell = Shell(devices=(0, 1))
    first = shell.submit(fp="p", devices={1})
    shell.reply(1)
    assert shell.machine.holds_everywhere(first)  # (its only possible worker holds it)
    anywhere = shell.submit(fp="p")
    assert shell.machine.holds_everywhere(anywhere) is (anywhere.tracking.worker == 0)


def test_a_devices_capabilities_are_what_all_its_workers_can_do():
    """On a cluster the workers of one device may run on unlike nodes: routing must not
    count on what only some of them can do (f64 here), and learns more once the weaker
    one is gone."""
    shell = Shell(auto_hello=False, workers=2)
    shell.submit()
    with_f64 = {**CAPS, "supports_f64": True, "max_workgroup_size": [64, 1, 1]}
    shell.hello(1, caps={**CAPS, "max_workgroup_size": [32, 1, 1],
                         "max_invocations_per_workgroup": 32})
    shell.hello(0, caps=with_f64)  # (the latest probe, yet not what worker 1 can do)
    caps = shell.machine.capabilities
    assert not caps.supports_f64 and caps.max_workgroup_size == (32, 1, 1)
    shell.die(1)
    shell.hello(1, caps=with_f64)  # its replacement lands where f64 is
    assert shell.machine.capabilities.supports_f64


def test_unlike_workers_of_one_device_are_told_apart_and_work_goes_where_it_can_run():
    """Workers on unlike nodes: routing sees each distinct probe, and a request routing
    limited to the f64 workers runs on one of them, never on the idle one without f64."""
    shell = Shell(auto_hello=False, workers=2)
    plain, f64 = CAPS, {**CAPS, "supports_f64": True}
    req = shell.submit(label="any")
    shell.hello(0, caps=plain)
    shell.reply(0, req)  # (worker 0: idle again, and the lowest)
    shell.hello(1, caps=f64)
    weak, strong = (Capabilities.from_dict(c) for c in (plain, f64))
    assert shell.machine.varied and shell.machine.device_variants == {None: (weak, strong)}
    req_f64 = Request(Call(body_of(req.call.op, "f64 only"), [],
                           capable=frozenset({strong.identity})))
    shell.machine.submit(req_f64, shell.now)
    shell.run()
    assert shell.sent_to(1) == [req_f64] and shell.sent_to(0) == [req]
    assert req_f64.renewed().call.capable == frozenset({strong.identity})


def test_a_request_whose_capable_workers_are_gone_fails_instead_of_waiting_for_ever():
    """The only f64 worker dies and its replacement lands where there is no f64: the
    request limited to f64 workers fails at once, with a Fix, instead of waiting."""
    shell = Shell(auto_hello=False, workers=2, restart={"max_restarts": 5})
    plain, f64 = CAPS, {**CAPS, "supports_f64": True}
    busy = shell.submit()
    shell.hello(0, caps=plain)  # (it takes ``busy``)
    shell.hello(1, caps=f64)
    strong = Capabilities.from_dict(f64)
    first = Request(Call(body_of(busy.call.op, "f64 a"), [], capable=frozenset({strong.identity})))
    second = Request(Call(body_of(busy.call.op, "f64 b"), [], capable=frozenset({strong.identity})))
    for r in (first, second):
        shell.machine.submit(r, shell.now)
    shell.run()
    assert shell.sent_to(1) == [first]
    shell.die(1)  # (first is retried: it waits in the queue with second)
    assert second.tracking.id not in shell.results
    shell.hello(1, caps=plain)
    for r in (first, second):
        error = shell.result(r)
        assert isinstance(error, NoCapableBackendError), error
        assert "that can run it remains" in error.cause and "Call again" in error.fix
    assert not shell.machine.varied


def test_probes_unlike_only_in_adapter_facts_are_unlike_and_spares_are_not_counted():
    """Routing reads adapter facts (a software adapter): workers differing only there are
    two variants; a spare serves nothing, so is none."""
    shell = Shell(auto_hello=False, workers=2, standby=1)
    shell.submit()
    shell.hello(0, caps={**CAPS, "extra": {"adapter": "llvmpipe", "software_adapter": True}})
    shell.hello(1, caps={**CAPS, "extra": {"adapter": "llvmpipe"}})
    assert shell.machine.varied and len(shell.machine.device_variants[None]) == 2
    shell.hello(2, caps={**CAPS, "supports_f64": True})  # the spare
    assert not any(c.supports_f64 for c in shell.machine.device_variants[None])


def test_workers_with_unlike_loop_trip_limits_are_two_variants_and_the_device_the_least():
    shell = Shell(auto_hello=False, workers=2)
    shell.submit()
    shell.hello(0, caps={**CAPS, "max_loop_trip": 10})
    shell.hello(1, caps={**CAPS, "max_loop_trip": 1000})
    assert shell.machine.varied and len(shell.machine.device_variants[None]) == 2
    assert shell.machine.device_capabilities[None].max_loop_trip == 10


def test_a_call_no_worker_can_run_is_answered_at_submit_and_a_recycled_one_is_waited_for():
    shell = Shell(auto_hello=False, workers=2, restart={"recycle_after": 1})
    plain, f64 = CAPS, {**CAPS, "supports_f64": True}
    first = shell.submit()
    shell.hello(0, caps=plain)
    shell.hello(1, caps=f64)
    strong = Capabilities.from_dict(f64).identity
    none = Request(Call(body_of(first.call.op, "nobody"), [], capable=frozenset()))
    shell.machine.submit(none, shell.now)
    shell.run()
    assert isinstance(shell.result(none), NoCapableBackendError)
    ran = Request(Call(body_of(first.call.op, "f64"), [], capable=frozenset({strong})))
    shell.machine.submit(ran, shell.now)
    shell.run()
    shell.reply(1, ran)  # (served once: recycled, so stopping for a while)
    assert shell.worker(1).state in ("stopping", "killing")
    waits = Request(Call(body_of(first.call.op, "f64 again"), [], capable=frozenset({strong})))
    shell.machine.submit(waits, shell.now)
    shell.run()
    assert waits.tracking.id not in shell.results  # its replacement may run it: it waits


def test_the_common_capabilities_of_unlike_workers():
    a = Capabilities(supports_f64=True, supports_f16=True, max_workgroup_size=(64, 8, 1),
                     max_invocations_per_workgroup=256, subgroup_size=32,
                     supported_ops=frozenset({"add", "mul"}),
                     extra={"device": "gpu", "software_adapter": False})
    b = Capabilities(supports_f16=True, max_workgroup_size=(32, 16, 1),
                     max_invocations_per_workgroup=128, subgroup_size=64,
                     supported_ops=frozenset({"add"}),
                     extra={"device": "gpu", "software_adapter": True})
    both = Capabilities.common([a, b])
    assert (both.supports_f64, both.supports_f16) == (False, True)
    assert both.max_workgroup_size == (32, 8, 1) and both.max_invocations_per_workgroup == 128
    assert both.subgroup_size is None and both.supported_ops == frozenset({"add"})
    assert both.extra == {"device": "gpu", "software_adapter": True}
    assert Capabilities.common([a]) is a


def test_a_record_built_directly_has_its_workgroups_invocations_as_claims_do():
    """Before, only claims derived invocations from the workgroup size: a backend that
    returned Capabilities(max_workgroup_size=(64, 1, 1)) had every workgroup of more than
    one invocation refused by routing."""
    direct = Capabilities(max_workgroup_size=(64, 2, 1))
    assert direct.max_invocations_per_workgroup == 128
    assert direct == Capabilities.from_claims({"max_workgroup_size": [64, 2, 1]})
    assert Capabilities(max_workgroup_size=(64, 2, 1),
                        max_invocations_per_workgroup=64).max_invocations_per_workgroup == 64
    assert Capabilities().max_invocations_per_workgroup == 1
    program = ir.Kernel(workgroup=(64,))
    program.output("out", ir.u32, 64)[ir.global_id(0)] = ir.u32(1)
    assert rejection_reasons(program.build().requirements(), direct) == []


def test_a_new_capability_is_one_field():
    """Reading a claim, the wire form and combining workers' answers follow each field's
    rule, so a capability added to the record (a feature and a limit here) needs no edit
    anywhere else in the contract: one field, and one claim in each backend with it."""
    from dataclasses import field, make_dataclass

    Wider = make_dataclass("Wider", [("supports_f32_atomics", bool, field(default=False)),
                                     ("max_push_bytes", int, field(default=0))],
                           bases=(Capabilities,), frozen=True)
    a = Wider.from_claims({"supports_f32_atomics": True, "max_push_bytes": 128,
                           "max_workgroup_size": [8, 8, 1]})
    b = Wider.from_claims({"max_push_bytes": 64})
    assert (a.supports_f32_atomics, a.max_push_bytes, a.max_workgroup_size) == (True, 128,
                                                                                 (8, 8, 1))
    assert Wider.from_dict(a.to_dict()) == a
    both = Wider.common([a, b])
    assert (both.supports_f32_atomics, both.max_push_bytes) == (False, 64)
    with pytest.raises(InvalidConfigError, match="unknown capability claims"):
        Capabilities.from_claims({"supports_f32_atomics": True})
