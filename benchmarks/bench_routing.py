"""Routing figures: routing a program whose decision is cached, against a plain dict
lookup of the same key, and routing with a cold cache, against the capability checks alone."""

from __future__ import annotations

from vyre_benchmarks.harness import Result, compare
from vyre_core import ir
from vyre_core.contract.types import Capabilities
from vyre_core.registry import BackendRegistration
from vyre_core.routing import Router, rejection_reasons

REQUIRES = ()  # stand-in registrations: no backend is started or imported


def _registration(backend_id: str, precedence: int, caps: Capabilities,
                  is_reference: bool = False) -> BackendRegistration:
    return BackendRegistration(id=backend_id, version="1", distribution=None,
                               precedence=precedence, claims=caps, is_reference=is_reference,
                               entry_point=backend_id, plugin=object())


def _candidates() -> list[tuple[BackendRegistration, Capabilities]]:
    """Three backends; the first lacks f64, so the program below goes to the second."""
    common = dict(max_workgroup_size=(1024, 1024, 64), max_invocations_per_workgroup=1024,
                  max_workgroup_memory_bytes=49152, max_storage_buffer_bytes=1 << 31)
    regs = [
        _registration("gpu", 10, Capabilities(**common)),
        _registration("gpu-f64", 20, Capabilities(supports_f64=True, **common)),
        _registration("reference", 100, Capabilities(supports_f64=True, supports_f16=True,
                                                     **common), is_reference=True),
    ]
    return [(r, r.claims) for r in regs]


def _program() -> ir.Program:
    k = ir.Kernel(workgroup=(256,))
    x = k.read("x", ir.f64)
    out = k.output("out", ir.f64, 1 << 20)
    i = k.let("i", ir.global_id(0))
    with k.if_(i < x.len):
        out[i] = ir.fma(x[i], 2.0, 1.0)
    return k.build()


def warm_route() -> Result:
    candidates = _candidates()
    router = Router(lambda: candidates)
    prog = _program()
    decision = router.route(prog)
    table = {(prog.fingerprint(), None, router.version): decision}

    def lookup():
        return table[(prog.fingerprint(), None, router.version)]

    return compare("route, cached decision (3 backends)", lambda: router.route(prog),
                   "dict lookup of the same key", lookup, repeat=7, number=20000, unit="us")


def cold_route() -> Result:
    candidates = _candidates()
    router = Router(lambda: candidates)
    prog = _program()
    req = prog.requirements()

    def cold():
        router.invalidate()
        return router.route(prog)

    def checks_only():
        return [rejection_reasons(req, caps) for _, caps in candidates[:2]]

    return compare("route, cold cache (invalidate each call)", cold,
                   "rejection_reasons for the 2 checked", checks_only, repeat=7, number=5000,
                   unit="us")


BENCHMARKS = [warm_route, cold_route]
