"""Backend ``faults``: computes like the reference backend, except when told to fail.

* Per dispatch, ``DispatchConfig.label`` = ``"fault:<kind>[:<arg>]"`` (build it with
  ``vyre_core.testing.fault``); an unknown kind is refused, never ignored;
* at a worker's start, ``VYRE_FAULTS`` (``vyre_core.testing.startup_faults``);
* ``VYRE_FAULTS_PRECEDENCE`` sets its routing rank (default 5000: after the reference).

The kinds and what each does are ``DISPATCH_FAULTS`` and ``STARTUP_FAULTS`` of
``vyre_core.testing.faults``; this module is the one that obeys them.
"""

from __future__ import annotations

import ctypes
import os
import resource
import sys
import time
from dataclasses import replace

import numpy as np

import vyre_reference.backend as _reference
from vyre_core.contract import Capabilities, DeviceInfo, hookimpl
from vyre_core.errors import DispatchError, InvalidConfigError, UnsupportedFeatureError
from vyre_core.testing.faults import PRECEDENCE_ENV, active_startup_faults, parse_label
from vyre_reference import run
from vyre_reference.backend import CLAIMS

VYRE_CONTRACT = 1
_STARTUP = active_startup_faults()
_IN_WORKER = "VYRE_WORKER" in os.environ

if _IN_WORKER and "crash_import" in _STARTUP:
    raise ImportError("vyre_faults: injected crash at import (VYRE_FAULTS=crash_import)")

# The reference's resident buffers serve as this backend's own
vyre_allocate_resident = _reference.vyre_allocate_resident
vyre_upload_resident = _reference.vyre_upload_resident
vyre_download_resident = _reference.vyre_download_resident
vyre_free_resident = _reference.vyre_free_resident
vyre_dispatch_resident = _reference.vyre_dispatch_resident

_leaked: list[np.ndarray] = []
_device_lost = False
_selected: int | None = None


@hookimpl
def vyre_backend_id() -> str:
    return "faults"


@hookimpl
def vyre_backend_version() -> str:
    return "0.1.0"


@hookimpl
def vyre_backend_precedence() -> int:
    return int(os.environ.get(PRECEDENCE_ENV, "5000"))


@hookimpl
def vyre_backend_claims() -> dict:
    return dict(CLAIMS)


@hookimpl
def vyre_capabilities() -> Capabilities:
    """The reference's honest record, but f64 where a startup fault takes it away, and a
    loop trip limit claimed the 0.1 way where one asks for it."""
    record = _reference.vyre_capabilities()
    limit = next((int(item.partition(":")[2]) for item in _STARTUP
                  if item.startswith("loop_trip_in_extra:")), None)
    return replace(record, supports_f64="no_f64" not in _STARTUP and (
        _selected is None or f"no_f64_on:{_selected}" not in _STARTUP),
        extra=record.extra if limit is None else {**record.extra, "max_loop_trip": limit})


@hookimpl
def vyre_devices() -> list[DeviceInfo]:
    if "slow_devices" in _STARTUP and not _IN_WORKER:
        while True:
            time.sleep(1)
    count = next((int(item.partition(":")[2]) for item in _STARTUP
                  if item.startswith("devices:")), 1)
    return [DeviceInfo(i, f"fault device {i}", "vyre", 2**30, i % 2 == 1)
            for i in range(count)]


@hookimpl
def vyre_select_device(device_id: int) -> None:
    global _selected
    _selected = device_id


@hookimpl
def vyre_prepare() -> None:
    if "crash_prepare" in _STARTUP:
        raise RuntimeError("vyre_faults: injected failure in prepare (VYRE_FAULTS=crash_prepare)")
    if "exit_prepare" in _STARTUP:
        os._exit(5)
    if "hang_prepare" in _STARTUP:
        while True:
            time.sleep(1)
    for item in _STARTUP:
        if item.startswith("memory_limit:"):
            with open("/proc/self/statm") as statm:
                size = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
            limit = size + int(float(item.partition(":")[2]) * 2**20)
            resource.setrlimit(resource.RLIMIT_AS, (limit, resource.RLIM_INFINITY))


@hookimpl
def vyre_dispatch(program, inputs, config):
    global _device_lost
    kind, arg = parse_label(config.label) or ("", "")
    if kind == "exit":
        os._exit(17)
    elif kind == "segfault":
        ctypes.string_at(0)
    elif kind == "abort":
        os.abort()
    elif kind == "hang_python":
        while True:
            time.sleep(0.05)
    elif kind == "hang_native":
        ctypes.PyDLL(None).sleep(3600)  # a PyDLL call keeps the GIL: nothing else runs
    elif kind == "sleep":
        time.sleep(float(arg))
    elif kind == "leak":
        block = np.ones(int(float(arg) * 2**20), dtype=np.uint8)  # touched: really resident
        _leaked.append(block)
    elif kind == "device_lost":
        _device_lost = True
        raise RuntimeError("vyre_faults: the device is lost (injected)")
    elif kind == "unsupported_on" and _selected == int(arg):
        raise UnsupportedFeatureError(f"vyre_faults: refused on device {arg} (injected)",
                                      "Route it to another device.")
    elif kind == "unsupported":
        raise UnsupportedFeatureError("vyre_faults: this program is refused (injected)",
                                      "Route it to another backend.")
    elif kind == "malformed":
        return ["not an array"] * len(program.outputs)
    elif kind == "crash_once" and not os.path.exists(arg):
        open(arg, "w").close()
        os._exit(18)
    elif kind == "chatter":
        line = b"vyre_faults: chatter " + b"x" * 1000 + b"\n"
        for _ in range(int(float(arg) * 2**20) // len(line)):
            sys.stderr.buffer.write(line)
        sys.stderr.flush()
    elif kind == "device":
        time.sleep(float(arg or 0))
        return [np.full(b.count, 2**32 - 1 if _selected is None else _selected, np.uint32)
                for b in program.outputs]  # (a program whose outputs are sized u32)
    elif kind in ("destroy_device", "destroy_then_submit"):
        raise InvalidConfigError(f"backend 'faults' has no wgpu device to lose ({kind!r})",
                                 "Name the backend 'faults-wgpu' for this fault.")
    elif kind == "numpy_error":
        raise DispatchError("vyre_faults: an error with numpy details (injected)",
                            count=np.uint32(7), ratio=np.float32(0.5), flag=np.bool_(True),
                            where=object())
    return run(program, inputs, grid=config.grid_override)


@hookimpl
def vyre_device_lost() -> bool:
    return _device_lost


@hookimpl
def vyre_try_recover() -> None:
    global _device_lost
    if "no_recover" in _STARTUP:
        raise RuntimeError("vyre_faults: recovery refused (VYRE_FAULTS=no_recover)")
    _device_lost = False
