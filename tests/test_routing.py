"""Routing: the first capable backend by precedence wins, an explicit id overrides it,
software adapters sit below the reference, every rejection is explained exactly, and
decisions are cached until ``invalidate()``."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from vyre_core import deprecations, ir
from vyre_core.contract.types import Capabilities
from vyre_core.deprecations import VyreDeprecationWarning
from vyre_core.errors import (
    InvalidConfigError,
    InvalidInputError,
    NoCapableBackendError,
    PluginLoadError,
    VyreError,
)
from vyre_core.ir.requirements import ALL_OPS
from vyre_core.registry import BackendRegistration, Registry
from vyre_core.routing import (
    Candidate,
    Explanation,
    Explanations,
    Rejection,
    RouteDecision,
    Router,
    rank,
    rejection_reasons,
)
from vyre_core.routing.rank import claim_reasons
from vyre_core.sequence import SequenceBuilder

pytestmark = pytest.mark.fast  # the fast tier: pure, no process (make test-fast)

# -- helpers ------------------------------------------------------------------------------


def caps(**kw) -> Capabilities:
    base = dict(max_workgroup_size=(256, 256, 64), max_invocations_per_workgroup=256,
                max_workgroup_memory_bytes=16384)
    return Capabilities(**{**base, **kw})


def reg(backend_id: str, precedence: int, claims: Capabilities | None = None,
        is_reference: bool = False) -> BackendRegistration:
    return BackendRegistration(
        id=backend_id, version="1", distribution=None, precedence=precedence,
        claims=claims or caps(), is_reference=is_reference, entry_point=backend_id,
        plugin=object())


def router(*pairs: BackendRegistration, skip=None) -> Router:
    return Router(lambda: [(r, r.claims) for r in pairs], skip=skip)


GPU = reg("gpu", 10, caps())
REFERENCE = reg("reference", 100, caps(supports_f64=True, supports_f16=True,
                                       max_workgroup_size=(1024, 1024, 64),
                                       max_invocations_per_workgroup=1024,
                                       max_workgroup_memory_bytes=65536), is_reference=True)


def f32_program(workgroup=(64,), count: int = 1024) -> ir.Program:
    k = ir.Kernel(workgroup=workgroup)
    x = k.read("x", ir.f32)
    out = k.output("out", ir.f32, count)
    i = k.let("i", ir.global_id(0))
    out[i] = x[i] * 2.0
    return k.build()


def f64_program() -> ir.Program:
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", ir.f64)
    out = k.output("out", ir.f64, 256)
    i = k.let("i", ir.global_id(0))
    out[i] = x[i] + 1.0
    return k.build()


def atomic_barrier_program(tile: int = 0) -> ir.Program:
    k = ir.Kernel(workgroup=(64,))
    counter = k.read_write("counter", ir.u32, 1)
    if tile:
        t = k.workgroup_buffer("tile", ir.u32, tile)
        t[ir.local_id(0)] = 1
    k.barrier()
    counter.atomic_add(0, 1)
    return k.build()


def loop_program(end: int | None) -> ir.Program:
    k = ir.Kernel(workgroup=(64,))
    x = k.read("x", ir.u32)
    out = k.output("out", ir.u32, 64)
    with k.loop("j", 0, x.len if end is None else end) as j:
        out[j] = x[j]
    return k.build()


# -- rejection_reasons --------------------------------------------------------------------


def test_capable_backend_has_no_reasons():
    assert rejection_reasons(f32_program().requirements(), caps()) == []


def test_f64_and_f16_are_capability_gated():
    assert rejection_reasons(f64_program().requirements(), caps()) == [
        "needs f64 (supports_f64 is false)"]
    assert rejection_reasons(f64_program().requirements(), caps(supports_f64=True)) == []
    k = ir.Kernel()
    out = k.output("out", ir.f16, 4)
    out[ir.global_id(0)] = ir.f16(1.0)
    req = k.build().requirements()
    assert rejection_reasons(req, caps()) == ["needs f16 (supports_f16 is false)"]
    assert rejection_reasons(req, caps(supports_f16=True)) == []


def test_workgroup_axes_and_invocations_are_checked_separately():
    req = f32_program(workgroup=(2, 512)).requirements()
    assert rejection_reasons(req, caps()) == [
        "workgroup axis y is 512, the limit is 256",
        "workgroup (2, 512, 1) has 1024 invocations, the limit is 256"]
    req = f32_program(workgroup=(4, 4, 128)).requirements()
    assert rejection_reasons(req, caps(max_invocations_per_workgroup=4096)) == [
        "workgroup axis z is 128, the limit is 64"]


def test_a_backend_that_names_no_ops_is_not_routed_ops_newer_than_its_contract():
    """A plugin written before stride loops, while loops or subgroups existed keeps the
    default claim, and is never handed a program it would misread (a loop whose step it
    ignores)."""
    k = ir.Kernel(workgroup=(8,), subgroup_size=8)
    out = k.output("out", ir.u32, count=8)
    acc = k.let("acc", ir.u32(0))
    with k.loop("i", 0, 10, step=3) as i:
        k.assign(acc, acc + i)
    out[ir.global_id(0)] = k.subgroup("add", acc)
    req = k.build().requirements()
    reasons = rejection_reasons(req, caps(supports_subgroup_ops=True,
                                          subgroup_size_range=(8, 8)))
    assert reasons == ["uses ops not supported: stmt.loop_step, subgroup.add"]
    assert rejection_reasons(req, caps(supported_ops=ALL_OPS, supports_subgroup_ops=True,
                                       subgroup_size_range=(8, 8))) == []
    assert rejection_reasons(req, caps(supported_ops=ALL_OPS, supports_subgroup_ops=True,
                                       subgroup_size_range=(32, 32))) == [
        "needs subgroups of 8 invocations (this backend runs 32)"]


def test_a_program_is_weighed_with_the_math_library_written_out():
    """``exp2`` on f32 (and f64) reaches a backend as the library's IR (tables, bitcasts):
    a backend that names ``unop.exp2`` but not the ops the library is made of is not
    routed it."""
    def of(dtype: ir.DType) -> ir.Program:
        k = ir.Kernel(workgroup=(8,))
        x, out = k.read("x", dtype), k.output("out", dtype, 8)
        i = k.let("i", ir.global_id())
        out[i] = ir.exp2(x[i])
        return k.build()

    only = caps(supported_ops=ir.DEFAULT_OPS | {"unop.exp2"}, supports_f64=True)
    for dtype in (ir.f32, ir.f64):
        [reason] = claim_reasons(of(dtype), only)
        assert reason.startswith("uses ops not supported: ") and "expr.table" in reason
    assert claim_reasons(of(ir.f32), caps(supported_ops=ALL_OPS)) == []


def test_atomics_and_barriers_are_ops():
    req = atomic_barrier_program().requirements()
    assert {"atomics", "barriers"} <= req.features
    no_sync = caps(supported_ops=ALL_OPS - {"atomic.add", "stmt.barrier", "atomic.max"})
    assert rejection_reasons(req, no_sync) == [
        "uses ops not supported: atomic.add, stmt.barrier"]


def test_workgroup_memory_against_its_limit():
    req = atomic_barrier_program(tile=8192).requirements()   # 8192 u32 = 32768 bytes
    assert req.workgroup_memory_bytes == 32768
    assert rejection_reasons(req, caps()) == [
        "workgroup memory is 32768 bytes, the limit is 16384"]
    assert rejection_reasons(req, caps(max_workgroup_memory_bytes=32768)) == []
    small = atomic_barrier_program(tile=64).requirements()
    assert rejection_reasons(small, caps(max_workgroup_memory_bytes=0)) == [
        "workgroup memory is 256 bytes, the limit is 0 (the backend has no workgroup memory)"]
    assert rejection_reasons(f32_program().requirements(), caps(max_workgroup_memory_bytes=0)) \
        == []


def test_storage_buffer_limit_only_when_reported():
    req = f32_program(count=1024).requirements()            # 4096 bytes
    assert rejection_reasons(req, caps(max_storage_buffer_bytes=0)) == []
    assert rejection_reasons(req, caps(max_storage_buffer_bytes=4096)) == []
    assert rejection_reasons(req, caps(max_storage_buffer_bytes=4000)) == [
        "buffer 'out' is 4096 bytes, the limit is 4000"]


def test_a_loop_past_the_claimed_trip_limit_is_refused():
    limited = caps(max_loop_trip=64)
    assert rejection_reasons(loop_program(32).requirements(), limited) == []
    assert rejection_reasons(loop_program(64).requirements(), limited) == []
    assert rejection_reasons(loop_program(100).requirements(), limited) == [
        "loops run 100 iterations, more than the 64 this adapter allows"]
    # a bound known only at run time is guarded by the backend itself
    assert rejection_reasons(loop_program(None).requirements(), limited) == []
    assert rejection_reasons(loop_program(None).requirements(), caps()) == []
    assert rejection_reasons(loop_program(100).requirements(), caps()) == []  # no limit


def test_a_trip_limit_claimed_in_extra_as_vyre_0_1_did_still_routes_with_a_warning(
        monkeypatch):
    """docs/contract.md of vyre 0.1 put the loop trip limit among the device facts: the
    parent reads it as the field, naming the backend in a warning, until 1.0.0 refuses
    it; the worker sends it on as it came (its warning would reach no one)."""
    monkeypatch.setattr(deprecations, "_warned", {})
    old = {"max_workgroup_size": [256, 256, 64], "max_workgroup_memory_bytes": 16384,
           "extra": {"max_loop_trip": 64, "device": "old"}}
    in_worker = Capabilities.of(dict(old))  # (no user: nothing moved, nothing said)
    assert in_worker.max_loop_trip is None and in_worker.extra["max_loop_trip"] == 64
    with pytest.warns(VyreDeprecationWarning, match=r"^backend 'old' uses claim "
                      r"\"extra\['max_loop_trip'\]\".* Fix: Claim it as the field"):
        limited = Capabilities.from_dict(in_worker.to_dict(), "backend 'old'")
    assert (limited.max_loop_trip, limited.extra) == (64, {"device": "old"})
    assert rejection_reasons(loop_program(100).requirements(), limited) == [
        "loops run 100 iterations, more than the 64 this adapter allows"]
    both = Capabilities.from_claims({**old, "max_loop_trip": 10}, "backend 'old'")
    assert both.max_loop_trip == 10  # (the field, where claimed, wins)
    ignored = Capabilities.from_claims({"extra": {"max_loop_trip": True}}, "backend 'old'")
    assert ignored.max_loop_trip is None and ignored.extra == {}  # (not a count: ignored)
    monkeypatch.setattr(deprecations, "__version__", "1.0.0")
    with pytest.raises(InvalidConfigError, match=r"removed in vyre 1\.0\.0") as refused:
        Capabilities.from_dict(in_worker.to_dict(), "backend 'old'")
    assert "Claim it as the field" in refused.value.fix


@pytest.mark.parametrize("bad", [True, -1, 65535.0, "65535"])
def test_a_trip_limit_that_is_no_count_is_refused_where_it_is_read(bad):
    with pytest.raises(InvalidConfigError, match=r"max_loop_trip is claimed as .*, not a "
                       r"count") as refused:
        Capabilities.from_claims({"max_loop_trip": bad})
    assert "an int of 0 or more" in refused.value.fix
    assert Capabilities.from_claims({"max_loop_trip": 0}).max_loop_trip == 0


def test_workers_with_unlike_trip_limits_combine_to_the_least_they_report():
    """Two workers of one device (on unlike nodes, say): the device runs what both can, so
    the smaller limit holds; a worker that reports none adds no limit."""
    both = Capabilities.common([caps(max_loop_trip=1000), caps(max_loop_trip=10),
                                caps()])
    assert both.max_loop_trip == 10
    assert rejection_reasons(loop_program(100).requirements(), both) == [
        "loops run 100 iterations, more than the 10 this adapter allows"]
    assert Capabilities.common([caps(), caps()]).max_loop_trip is None


def test_every_reason_is_listed_in_order():
    req = f64_program().requirements()
    bad = caps(supported_ops=ALL_OPS - {"binop.add"}, max_workgroup_size=(32, 1, 1),
               max_invocations_per_workgroup=32, max_storage_buffer_bytes=1024)
    assert rejection_reasons(req, bad) == [
        "uses ops not supported: binop.add",
        "needs f64 (supports_f64 is false)",
        "workgroup axis x is 64, the limit is 32",
        "workgroup (64, 1, 1) has 64 invocations, the limit is 32",
        "buffer 'out' is 2048 bytes, the limit is 1024",
    ]


# -- route ---------------------------------------------------------------------------------


def test_first_capable_by_precedence():
    assert router(REFERENCE, GPU).route(f32_program()) == RouteDecision(
        "gpu", "first capable backend by precedence (rank 10)")


def test_f64_program_routes_past_a_backend_without_f64():
    assert router(GPU, REFERENCE).route(f64_program()) == RouteDecision(
        "reference", "first capable backend by precedence (rank 100)")


def test_workgroup_over_the_limit_skips_the_backend():
    assert router(GPU, REFERENCE).route(f32_program(workgroup=(2, 512))).backend == "reference"


def test_equal_precedence_orders_by_id():
    b = reg("b", 10)
    a = reg("a", 10)
    assert router(b, a).route(f32_program()).backend == "a"
    assert [e.backend for e in router(b, REFERENCE, a).explain(f32_program())] == [
        "a", "b", "reference"]


def test_explicit_backend_overrides_precedence():
    assert router(GPU, REFERENCE).route(f32_program(), backend="reference") == RouteDecision(
        "reference", "requested explicitly")


def test_explicit_incapable_backend_raises_with_its_reasons():
    prog = f64_program()
    with pytest.raises(NoCapableBackendError) as info:
        router(GPU, REFERENCE).route(prog, backend="gpu")
    err = info.value
    assert err.cause == (f"backend 'gpu' was requested but cannot run program "
                         f"{prog.fingerprint()[:12]}:\n"
                         "  - gpu: needs f64 (supports_f64 is false)")
    assert err.details == {"rejections": {"gpu": ["needs f64 (supports_f64 is false)"]}}
    assert err.fix == ("reference can run all of it. Omit the backend to let routing pick a "
                       "capable one, or change the program to avoid the reasons above.")


def test_unknown_explicit_backend_lists_registered_ids():
    with pytest.raises(PluginLoadError) as info:
        router(REFERENCE, GPU).route(f32_program(), backend="cuda")
    assert info.value.cause == "no backend 'cuda' is registered (registered: gpu, reference)"
    assert "\nFix: Request one of the registered ids" in str(info.value)


def test_no_capable_backend_lists_every_backend():
    other = reg("other", 20, caps(max_workgroup_size=(32, 1, 1),
                                  max_invocations_per_workgroup=32))
    prog = f64_program()
    with pytest.raises(NoCapableBackendError) as info:
        router(other, GPU).route(prog)
    err = info.value
    assert str(err) == (
        f"[E1401] no backend can run program {prog.fingerprint()[:12]} (2 rejected):\n"
        "  - gpu: needs f64 (supports_f64 is false)\n"
        "  - other: needs f64 (supports_f64 is false); workgroup axis x is 64, the limit is 32; "
        "workgroup (64, 1, 1) has 64 invocations, the limit is 32\n"
        "Fix: Install a backend with the missing capabilities, or change the program to "
        "avoid them (see the reasons above).")
    assert err.details == {"rejections": {
        "gpu": ["needs f64 (supports_f64 is false)"],
        "other": ["needs f64 (supports_f64 is false)", "workgroup axis x is 64, the limit is 32",
                  "workgroup (64, 1, 1) has 64 invocations, the limit is 32"],
    }}
    again = VyreError.from_dict(err.to_dict())   # crosses a process boundary intact
    assert isinstance(again, NoCapableBackendError) and again.details == err.details


def test_no_backends_at_all():
    with pytest.raises(NoCapableBackendError) as info:
        router().route(f32_program())
    assert info.value.cause.endswith(": no backends are registered")
    assert info.value.details == {"rejections": {}}


def test_skip_falls_over_to_the_next_capable_backend():
    r = router(GPU, REFERENCE, skip=lambda b, _, d: {"gpu": "pool failed"}.get(b))
    assert r.route(f32_program()).backend == "reference"
    assert [(e.backend, e.accepted, e.reasons) for e in r.explain(f64_program())] == [
        ("gpu", False, ("pool failed", "needs f64 (supports_f64 is false)")),
        ("reference", True, ()),
    ]
    with pytest.raises(NoCapableBackendError) as info:
        r.route(f32_program(), backend="gpu")
    assert info.value.details == {"rejections": {"gpu": ["pool failed"]}}


def test_cached_decision_is_not_returned_for_a_newly_skipped_backend():
    failed: set[str] = set()
    r = router(GPU, REFERENCE, skip=lambda b, _, d: "pool failed" if b in failed else None)
    prog = f32_program()
    assert r.route(prog).backend == "gpu"
    failed.add("gpu")                      # no invalidate(): the safety net still holds
    assert r.route(prog).backend == "reference"


# -- software adapters ----------------------------------------------------------------------

SOFT = reg("lavapipe", 5, caps(extra={"software_adapter": True}))


def test_software_adapter_is_demoted_below_the_reference():
    r = router(SOFT, GPU, REFERENCE)
    assert r.route(f32_program()).backend == "gpu"
    assert r.route(f64_program()).backend == "reference"
    assert [(e.backend, e.demoted) for e in r.explain(f32_program())] == [
        ("gpu", False), ("reference", False), ("lavapipe", True)]


def test_software_adapter_runs_when_asked_or_when_nothing_else_can():
    assert router(SOFT, GPU, REFERENCE).route(f32_program(), backend="lavapipe") == \
        RouteDecision("lavapipe", "requested explicitly")
    small_ref = reg("ref", 100, caps(max_workgroup_size=(32, 1, 1),
                                     max_invocations_per_workgroup=32), is_reference=True)
    assert router(SOFT, small_ref).route(f32_program()) == RouteDecision(
        "lavapipe", "first capable backend in routing order (rank 5; demoted: software "
        "adapter)")


def test_a_choice_a_demotion_made_says_so_instead_of_by_precedence():
    """wgpu (rank 5) is capable, only demoted: the cpu backend (rank 50) did not win by
    precedence, and the reason says what moved it (it said "by precedence (rank 50)")."""
    wgpu = reg("wgpu", 5, caps(extra={"software_adapter": True}))
    r = router(wgpu, reg("cpu", 50), REFERENCE)
    assert r.route(f32_program()) == RouteDecision(
        "cpu", "first capable backend in routing order (rank 50; wgpu, rank 5, demoted: "
        "software adapter)")
    assert router(GPU, REFERENCE).route(f32_program()).reason == \
        "first capable backend by precedence (rank 10)"  # (no demotion: by precedence)


def test_software_adapter_without_a_reference_goes_last():
    r = router(SOFT, GPU, reg("remote", 500))
    assert [e.backend for e in r.explain(f32_program())] == ["gpu", "remote", "lavapipe"]


def test_software_adapter_already_below_the_reference_stays_in_place():
    late = reg("late-soft", 200, caps(extra={"software_adapter": True}))
    r = router(late, GPU, REFERENCE, reg("remote", 500))
    assert [(e.backend, e.demoted) for e in r.explain(f32_program())] == [
        ("gpu", False), ("reference", False), ("late-soft", False), ("remote", False)]


# -- explain ---------------------------------------------------------------------------------


def test_explain_lists_every_backend_and_marks_the_chosen_one():
    other = reg("other", 20, caps(supports_f64=True))
    expl = router(REFERENCE, other, GPU).explain(f64_program())
    assert expl == (
        Explanation("gpu", 10, False, ("needs f64 (supports_f64 is false)",), False),
        Explanation("other", 20, True, (), True),
        Explanation("reference", 100, True, (), False),
    )
    assert str(expl) == (
        "  gpu (rank 10): rejected\n"
        "    - needs f64 (supports_f64 is false)\n"
        "* other (rank 20): chosen\n"
        "  reference (rank 100): capable")


def test_explain_with_an_explicit_backend_and_with_nothing_capable():
    r = router(GPU, REFERENCE)
    assert [e.chosen for e in r.explain(f32_program(), backend="reference")] == [False, True]
    assert [e.chosen for e in router(GPU).explain(f64_program())] == [False]
    assert str(Explanations()) == "no backends are registered"


def test_format_explanation_is_deprecated_and_says_what_str_says(monkeypatch):
    from vyre_core import deprecations
    from vyre_core.routing import format_explanation

    monkeypatch.setattr(deprecations, "_warned", {})
    expl = router(GPU, REFERENCE).explain(f64_program())
    with pytest.warns(deprecations.VyreDeprecationWarning, match=r"call 'format_explanation'"
                      r".*Fix: print what Driver.explain answers"):
        assert format_explanation(expl) == str(expl) == str(Explanations(list(expl)))
    assert format_explanation([]) == "no backends are registered"  # (warned once)
    monkeypatch.setattr(deprecations, "__version__", "1.0.0")
    with pytest.raises(InvalidInputError, match=r"removed in vyre 1\.0\.0, and this is vyre "
                                                 r"1\.0\.0") as caught:
        format_explanation(expl)
    assert "print what Driver.explain answers" in caught.value.fix


def test_what_the_driver_answers_is_exported_by_vyre_core():
    import vyre_core
    from vyre_core.registry import BackendRegistration
    from vyre_core.routing import RouteDecision
    from vyre_core.tuning.candidates import Candidate
    from vyre_core.tuning.tuner import Measured, TuneResult

    assert (vyre_core.Explanation, vyre_core.Explanations, vyre_core.RouteDecision,
            vyre_core.TuneResult, vyre_core.Measured, vyre_core.TuneCandidate,
            vyre_core.BackendRegistration) == (Explanation, Explanations, RouteDecision,
                                               TuneResult, Measured, Candidate,
                                               BackendRegistration)


def test_demoted_adapter_is_shown_as_such():
    text = str(router(SOFT, REFERENCE).explain(f32_program()))
    assert text == ("* reference (rank 100): chosen\n"
                    "  lavapipe (rank 5, demoted: software adapter): capable")


# -- caching -------------------------------------------------------------------------------


@pytest.fixture
def counted(monkeypatch):
    calls = []
    real = rank.rejection_reasons

    def counting(req, c):
        calls.append(c)
        return real(req, c)

    monkeypatch.setattr(rank, "rejection_reasons", counting)
    return calls


def test_second_route_is_served_from_the_cache(counted):
    r = router(GPU, REFERENCE)
    prog = f64_program()
    first = r.route(prog)
    assert len(counted) == 2
    assert r.route(prog) is first
    assert r.route(f64_program()) is first          # same fingerprint, new Program object
    assert len(counted) == 2
    r.invalidate()
    assert r.version == 1
    assert r.route(prog) == first
    assert len(counted) == 4


def test_cache_key_includes_the_override(counted):
    r = router(GPU, REFERENCE)
    prog = f32_program()
    assert r.route(prog).backend == "gpu"
    assert r.route(prog, backend="reference").backend == "reference"
    assert len(counted) == 2
    r.route(prog)
    r.route(prog, backend="reference")
    assert len(counted) == 2


def test_invalidate_picks_up_new_capabilities():
    current = {"gpu": caps()}
    r = Router(lambda: [(GPU, current["gpu"]), (REFERENCE, REFERENCE.claims)])
    prog = f64_program()
    assert r.route(prog).backend == "reference"
    current["gpu"] = caps(supports_f64=True)        # e.g. re-probed by its worker
    assert r.route(prog).backend == "reference"     # still cached
    r.invalidate()
    assert r.route(prog).backend == "gpu"


def test_failures_are_not_cached(counted):
    r = router(GPU)
    for _ in range(2):
        with pytest.raises(NoCapableBackendError):
            r.route(f64_program())
    assert len(counted) == 2


def test_cache_is_bounded_lru(counted):
    r = Router(lambda: [(GPU, GPU.claims)], cache_size=2)
    a, b, c = (f32_program(count=n) for n in (1, 2, 3))
    r.route(a)
    r.route(b)
    r.route(a)              # a is now most recent
    r.route(c)              # evicts b
    assert len(counted) == 3
    r.route(a)
    assert len(counted) == 3
    r.route(b)
    assert len(counted) == 4
    with pytest.raises(ValueError):
        Router(lambda: [], cache_size=0)


def test_routing_is_thread_safe():
    r = Router(lambda: [(GPU, GPU.claims), (REFERENCE, REFERENCE.claims)], cache_size=8)
    progs = [f32_program(count=n + 1) for n in range(32)] + [f64_program()]
    errors: list[BaseException] = []

    def work():
        try:
            for _ in range(20):
                for p in progs:
                    assert r.route(p).backend == ("reference" if p is progs[-1] else "gpu")
                r.invalidate()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_from_registry_uses_static_claims():
    registry = Registry()
    registry.add(REFERENCE)
    registry.add(GPU)
    r = Router.from_registry(registry)
    assert r.route(f64_program()).backend == "reference"
    assert r.route(f32_program()).backend == "gpu"


def test_rejection_is_a_plain_record():
    assert Rejection("gpu", ("x",)) == Rejection("gpu", ("x",))


def test_a_sequence_routes_as_a_whole_with_reasons_per_step():
    """Every step must run on the chosen backend; a rejection says which steps need what."""
    def wide(x: int) -> ir.Program:
        k = ir.Kernel(workgroup=(x,))
        out = k.output("out", ir.u32, 4)
        out[0] = ir.u32(1)
        return k.build()

    b = SequenceBuilder()
    b.transient("out", ir.u32, 4)
    b.step(wide(64), grid=1)
    b.step(wide(512), grid=1)
    b.step(wide(512), grid=1)
    seq = b.build(returns=["out"])
    r = router(GPU, REFERENCE)  # the GPU takes 256 invocations, the reference 1024
    assert r.route(seq).backend == "reference"
    with pytest.raises(NoCapableBackendError) as err:
        r.route(seq, "gpu")
    assert "cannot run sequence " in err.value.cause
    assert err.value.details["rejections"] == {"gpu": [
        "steps 1, 2: workgroup axis x is 512, the limit is 256",
        "steps 1, 2: workgroup (512, 1, 1) has 512 invocations, the limit is 256"]}
    assert [(e.backend, e.chosen) for e in r.explain(seq)] == [("gpu", False),
                                                                ("reference", True)]


@pytest.mark.parametrize("change", [
    {"features": frozenset({"subgroup_ops"})},
    {"features": frozenset({"bf16", "f64"})},
    {"ops": frozenset({"binop.add", "indirect_dispatch"})},
], ids=["subgroup_ops", "bf16", "indirect_dispatch"])
def test_a_requirement_routing_does_not_know_is_refused_with_the_known_ones(change):
    """Fail closed: a requirement with no routing rule would pass every backend unchecked."""
    req = dataclasses.replace(f32_program().requirements(), **change)
    unknown = sorted((change.get("ops", frozenset()) - ALL_OPS)
                     | (change.get("features", frozenset()) - {"f64"}))
    with pytest.raises(InvalidInputError) as info:
        rejection_reasons(req, caps())
    assert info.value.details["unknown"] == unknown
    assert "atomics, barriers, workgroup_memory, f16, f64" in info.value.fix
    with pytest.raises(InvalidInputError):
        rejection_reasons(req, caps(supports_f64=True, supports_f16=True))


# -- per-device capabilities (a pool with one worker set per device) ------------------------


def test_routing_keeps_a_program_to_the_devices_that_can_run_it():
    f64 = caps(supports_f64=True)
    r = Router(lambda: [Candidate(GPU, caps(), 0), Candidate(GPU, f64, 1),
                        Candidate(GPU, f64, 2), (REFERENCE, REFERENCE.claims)])
    assert r.route(f64_program()).devices == (1, 2)
    assert r.route(f64_program(), backend="gpu").devices == (1, 2)
    assert r.route(f32_program()).devices == (0, 1, 2)
    assert r.route(f32_program(), backend="reference").devices is None
    text = str(r.explain(f64_program()))
    assert "gpu device 0 (rank 10): rejected" in text
    assert "gpu device 1 (rank 10): chosen" in text


def test_unlike_workers_of_one_backend_route_a_program_any_of_them_can_run():
    """Workers of one backend on unlike nodes: the program goes to the backend when any
    of them can run it, and ``capable`` names the probes that can (None: all can)."""
    f64 = caps(supports_f64=True)
    r = Router(lambda: [Candidate(GPU, caps(), None), Candidate(GPU, f64, None),
                        (REFERENCE, REFERENCE.claims)])
    assert r.route(f64_program()).backend == "gpu"
    variants = {None: (caps(), f64)}
    assert r.capable(f64_program(), variants) == frozenset({f64})
    assert r.capable(f32_program(), variants) is None
    assert r.capable(f64_program(), {0: (caps(),), 1: (f64,)}, frozenset({0})) == frozenset()


def test_a_software_device_is_demoted_while_the_backends_hardware_device_keeps_its_place():
    soft = caps(extra={"software_adapter": True})
    r = Router(lambda: [Candidate(GPU, soft, 0), Candidate(GPU, caps(), 1),
                        Candidate(REFERENCE, REFERENCE.claims)])
    decision = r.route(f32_program())
    assert (decision.backend, decision.devices) == ("gpu", (1,))
    only_soft = Router(lambda: [Candidate(GPU, soft, 0), Candidate(REFERENCE, REFERENCE.claims)])
    assert only_soft.route(f32_program()).backend == "reference"
    assert only_soft.route(f32_program(), backend="gpu").devices == (0,)


def test_a_backend_none_of_whose_devices_can_run_a_program_names_each_device():
    r = Router(lambda: [Candidate(GPU, caps(), 0), Candidate(GPU, caps(), 1)])
    with pytest.raises(NoCapableBackendError) as err:
        r.route(f64_program(), backend="gpu")
    assert "device 0: " in str(err.value) and "device 1: " in str(err.value)
    with pytest.raises(NoCapableBackendError) as err:
        r.route(f64_program())
    assert len(err.value.details["rejections"]["gpu"]) == 2
