"""Contract figures: one hook call through the plugin manager against calling the same
function directly, and a whole small dispatch through the backend host against calling
the reference interpreter directly."""

from __future__ import annotations

import numpy as np

from vyre_benchmarks.harness import Result, compare
from vyre_core.contract.manager import LoadedBackend
from vyre_examples.saxpy import inputs as saxpy_inputs
from vyre_examples.saxpy import program as saxpy
from vyre_workers.backend_host import BackendHost

REQUIRES = ("reference",)  # backend ids; the plugin modules are imported when a figure runs


def hook_call() -> Result:
    import vyre_reference.backend as reference_plugin

    loaded = LoadedBackend(reference_plugin)
    return compare("contract call (vyre_backend_id)",
                   lambda: loaded.call("vyre_backend_id"),
                   "direct function call", reference_plugin.vyre_backend_id,
                   repeat=7, number=20_000, unit="us")


def small_dispatch() -> Result:
    import vyre_reference.backend as reference_plugin
    from vyre_reference import run

    host = BackendHost(reference_plugin)
    prog = saxpy(256)
    data = saxpy_inputs(256)
    host.dispatch(prog, data)  # probe capabilities once
    return compare("host dispatch, saxpy x256 (plan + hooks + checks)",
                   lambda: host.dispatch(prog, data), "interpreter called directly",
                   lambda: run(prog, [np.asarray(a) for a in data]),
                   repeat=7, number=200, unit="us")


BENCHMARKS = [hook_call, small_dispatch]
