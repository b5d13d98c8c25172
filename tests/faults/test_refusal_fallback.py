"""A backend that refuses a program at compile (an op it cannot lower for one dtype, say)
is a routing rejection found late: the Driver remembers it and routes again."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from vyre_core import DispatchConfig, Driver, Timeouts, ir
from vyre_core.errors import NoCapableBackendError
from vyre_reference import run as reference_run


def doubling_program() -> ir.Program:
    k = ir.Kernel(workgroup=(8,))
    x = k.read("x", ir.u32)
    out = k.output("out", ir.u32, count=16)
    i = k.let("i", ir.global_id(0))
    out[i] = x[i] * 2
    return k.build()


@pytest.mark.timeout(120)
def test_a_refused_program_falls_over_to_the_next_capable_backend(monkeypatch, caplog):
    monkeypatch.setenv("VYRE_FAULTS_PRECEDENCE", "1")  # faults routes first
    caplog.set_level(logging.DEBUG, logger="vyre.routing")
    program, data = doubling_program(), [np.arange(16, dtype=np.uint32)]
    refuse = DispatchConfig(label="fault:unsupported")
    with Driver(timeouts=Timeouts(kill_grace=0.5)) as drv:
        out, = drv.dispatch(program, data, config=refuse)
        assert out.tobytes() == reference_run(program, data)[0].tobytes()
        fp = program.fingerprint()[:12]
        routing = [(r.levelname, r.getMessage()) for r in caplog.records
                   if r.name == "vyre.routing"]
        assert ("INFO", f"program {fp}: 'faults' refused it (vyre_faults: this program is "
                "refused (injected)); routing passes it over for this program and falls "
                "over") in routing, routing
        assert any(level == "DEBUG" and text.startswith(f"program {fp} -> ")
                   and "faults" not in text for level, text in routing), routing
        faults = drv.status()["pools"]["faults"]
        assert faults["state"] == "running" and faults["restarts"] == 0
        served = faults["workers"][0]["served"]
        # the refusal is remembered for this program: faults is not asked again
        out, = drv.dispatch(program, data, config=refuse)
        assert out.tobytes() == reference_run(program, data)[0].tobytes()
        assert drv.status()["pools"]["faults"]["workers"][0]["served"] == served
        # other programs still go to faults first
        assert drv.route(ir.Program(program.buffers, (4,), program.body)).backend == "faults"
        # naming the refusing backend gives its refusal, as routing remembered it
        with pytest.raises(NoCapableBackendError, match="faults: it refused this program at "
                           r"compile: vyre_faults: this program is refused \(injected\)"):
            drv.dispatch(program, data, backend="faults", config=refuse)
