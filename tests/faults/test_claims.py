"""A claim a backend makes the way an older vyre told it to, through a real worker: the
parent reads it, warns naming the backend (the worker's own output reaches no one), and
routes by it. The rules behind it: tests/test_routing.py."""

from __future__ import annotations

import logging
import warnings

import numpy as np

from vyre_core import deprecations, ir
from vyre_core.deprecations import VyreDeprecationWarning

from .support import driver


def copy_loop(trips: int) -> ir.Program:
    k = ir.Kernel(workgroup=(1,))
    x = k.read("x", ir.u32)
    out = k.output("out", ir.u32, trips)
    with k.loop("j", 0, trips) as j:
        out[j] = x[j] + ir.u32(1)
    return k.build()


def test_a_loop_trip_limit_in_extra_is_told_in_the_parent_and_routed_by(monkeypatch, caplog):
    """Told as a record on the vyre.deprecation logger, naming the backend: the pool's
    rules read the hello, where a Python warning made an error (as this suite makes
    them) would have failed the worker instead of telling anyone."""
    monkeypatch.setenv("VYRE_FAULTS", "loop_trip_in_extra:64")
    monkeypatch.setattr(deprecations, "_warned", {})
    caplog.set_level(logging.WARNING, "vyre.deprecation")
    x = np.arange(100, dtype=np.uint32)
    with driver() as drv:
        with warnings.catch_warnings():
            warnings.simplefilter("error", VyreDeprecationWarning)
            out, = drv.dispatch(copy_loop(64), [x[:64]], backend="faults")
        assert [r.getMessage().split(", deprecated")[0] for r in caplog.records] == [
            "backend 'faults' uses claim \"extra['max_loop_trip']\""]
        assert out.tobytes() == (x[:64] + 1).tobytes()
        caps = drv.pools.open("faults").capabilities
        assert caps.max_loop_trip == 64 and "max_loop_trip" not in caps.extra
        faults, = [e for e in drv.explain(copy_loop(100), [x]) if e.backend == "faults"]
        assert not faults.accepted
        assert "loops run 100 iterations, more than the 64 this adapter allows" in \
            faults.reasons
