"""The start of every script the fault tests run as a child Python process (a driver that
gets SIGKILLed, exits without close, or takes a Ctrl-C): the saxpy program and its
inputs, and small helpers to report JSON lines and wait with a deadline."""

from __future__ import annotations

import textwrap

PRELUDE = textwrap.dedent("""
    import json, os, signal, sys, threading, time
    import numpy as np
    import vyre_core
    from vyre_core import DispatchConfig, ir
    from vyre_examples.saxpy import program as saxpy

    # Ctrl-C raises KeyboardInterrupt here even if the test runner was started with SIGINT
    # ignored (a background job of a non-interactive shell), which children would inherit.
    signal.signal(signal.SIGINT, signal.default_int_handler)

    PROGRAM = saxpy(16, workgroup=16)
    INPUTS = [np.arange(16, dtype=np.float32), np.ones(16, dtype=np.float32),
              np.array([2.0], dtype=np.float32)]
    EXPECTED = (np.float32(2.0) * INPUTS[0] + INPUTS[1]).tobytes()

    def report(**fields):
        print(json.dumps(fields), flush=True)

    def workers(drv, backend):
        return drv.status()["pools"][backend]["workers"]

    def wait_until(condition, what, limit=30.0):
        deadline = time.monotonic() + limit
        while not condition():
            if time.monotonic() > deadline:
                raise SystemExit(f"timed out waiting for {what}")
            time.sleep(0.01)
""")
