"""Where a Driver's workers run: on this machine (worker processes, the default), or as
Ray actors on a Ray cluster. ``Driver(cluster=...)`` or ``VYRE_CLUSTER`` names it:

- ``"local"`` (or unset): worker processes here (``supervisor/``).
- ``"ray"``: a private Ray instance this Driver starts on this machine and stops at close.
- ``"auto"``: the Ray cluster already running on this machine (``ray start``), joined.
- ``"HOST:PORT"`` or ``"ray://HOST:PORT"``: the Ray cluster whose head answers there
  (``ray://`` through Ray Client, which needs ``ray[client]``).

Ray is optional: imported here only, when asked for, with its connection waits bounded
(the defaults would retry an address that does not answer for minutes)."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import signal
import socket
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any

from vyre_core.contract.types import DeviceInfo, device_list
from vyre_core.errors import (
    ClusterUnavailableError,
    InvalidConfigError,
    PoolFailedError,
    VyreError,
    as_vyre_error,
)

ENV = "VYRE_CLUSTER"
#: How long a cluster address may take to accept a connection before it counts as down.
CONNECT_WITHIN = 5.0
_INSTALL_FIX = ("Install Ray: pip install 'vyre[ray]' (or pip install ray), or run "
                "locally: leave cluster unset (VYRE_CLUSTER unset or 'local').")
#: Set before ``import ray`` (read once then): a head that does not answer is given up on
#: within seconds, not after twenty retries of forty seconds.
_BOUNDED_CONNECT = {"RAY_py_gcs_connect_timeout_s": "5",
                    "RAY_gcs_rpc_server_connect_timeout_s": "2",
                    "RAY_gcs_server_port_wait_time_s": "2",
                    "RAY_NUM_REDIS_GET_RETRIES": "2",
                    "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
_ADDRESS = re.compile(r"(?:ray://)?([A-Za-z0-9.\-]+|\[[0-9A-Fa-f:]+\]):(\d{1,5})")
_log = logging.getLogger("vyre.cluster")


@dataclass(frozen=True)
class ClusterSpec:
    """A parsed ``cluster`` value: ``kind`` local or ray; for ray, ``address`` None (a
    private instance), ``"auto"``, ``"HOST:PORT"`` or ``"ray://HOST:PORT"``."""

    kind: str
    address: str | None = None

    @property
    def local(self) -> bool:
        return self.kind == "local"

    def __str__(self) -> str:
        return "local" if self.local else (self.address or "ray")


def parse(value: str | None) -> ClusterSpec:
    """``value`` (else ``VYRE_CLUSTER``, else local) checked; InvalidConfigError with a Fix
    for anything else."""
    raw = os.environ.get(ENV, "") if value is None else value
    text = raw.strip() if isinstance(raw, str) else raw
    if text in ("", "local"):
        return ClusterSpec("local")
    if text == "ray":
        return ClusterSpec("ray")
    if text == "auto":
        return ClusterSpec("ray", "auto")
    match = _ADDRESS.fullmatch(text) if isinstance(text, str) else None
    if match is None or not 0 < int(match.group(2)) < 65536:
        source = "cluster" if value is not None else ENV
        raise InvalidConfigError(
            f"{source}={raw!r} is not a cluster vyre knows",
            "Use 'local' (the default), 'ray' (a private Ray instance here), 'auto' (the Ray "
            "cluster running here) or a head's address 'HOST:PORT' or 'ray://HOST:PORT'.")
    return ClusterSpec("ray", text)


class RayCluster:
    """A connection to Ray made by one Driver: started (``"ray"``) or joined, and let go
    of at ``close``: a Ray instance this Driver started is stopped with it."""

    def __init__(self, spec: ClusterSpec) -> None:
        self.spec = spec
        self.ray = _import_ray()
        self.owned = False
        self._closed = False
        self._temp_dir: str | None = None  # a private instance's session files
        if spec.address not in (None, "auto"):
            _check_answers(spec.address)
        previous = signal.getsignal(signal.SIGTERM) if _main_thread() else None
        started = time.monotonic()
        try:
            self._connect()
        finally:  # ray.init replaces SIGTERM's handler with sys.exit: the host's stays
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
        _log.info("joined Ray cluster %s in %.1f s (%d node(s))", spec,
                  time.monotonic() - started, len(self.nodes()))

    def _connect(self) -> None:
        ray = self.ray
        if ray.is_initialized():  # this process is connected already: use it, own nothing
            return
        try:
            if self.spec.address is None:
                self._temp_dir = tempfile.mkdtemp(prefix="vyre-ray-")  # (short: socket paths)
                ray.init(address="local", include_dashboard=False, log_to_driver=False,
                         configure_logging=False, _temp_dir=self._temp_dir, _system_config={
                             "enable_worker_prestart": False,
                             "prestart_worker_first_driver": False,
                             "enable_metrics_collection": False})
            else:
                ray.init(address=self.spec.address, log_to_driver=False,
                         configure_logging=False)
        except Exception as exc:  # ConnectionError, ValueError (ray[client] missing) ...
            self._remove_temp_dir()
            raise ClusterUnavailableError(
                f"cannot reach the Ray cluster {self.spec}: {type(exc).__name__}: {exc}",
                _fix_for(self.spec), cluster=str(self.spec)) from None
        self.owned = True

    def nodes(self) -> list[dict[str, Any]]:
        """The cluster's nodes: id, address, alive, and what each offers (CPU, GPU, ...)."""
        return [{"node": n["NodeID"], "address": n.get("NodeManagerAddress"),
                 "alive": bool(n.get("Alive")),
                 "resources": {k: v for k, v in n.get("Resources", {}).items()
                               if not k.startswith("node:")}}
                for n in self.ray.nodes()]

    def list_devices(self, backend: str, entry_point: str, timeout: float) -> list[DeviceInfo]:
        """``backend``'s devices as a node of the cluster lists them (a Ray task there)."""
        from vyre_workers.ray_actor import backend_devices

        task = self.ray.remote(num_cpus=0, max_retries=0)(backend_devices)
        ref = task.remote(backend, entry_point)
        try:
            return device_list(self.ray.get(ref, timeout=timeout))
        except self.ray.exceptions.GetTimeoutError:
            self.ray.cancel(ref, force=True)
            raise PoolFailedError(f"listing the devices of backend {backend!r} on the cluster "
                                  f"took over {timeout:g} s", "Name the device ids in "
                                  "PoolOptions(devices=[...]).", backend=backend) from None
        except VyreError:
            raise
        except Exception as exc:  # (the task's own error, as Ray wraps it)
            cause = getattr(exc, "cause", None) or exc
            raise as_vyre_error(cause, f"listing the devices of {backend!r}") from None

    def close(self) -> None:
        """Disconnect (stopping the instance this Driver started); idempotent."""
        if self._closed:
            return
        self._closed = True
        if self.owned:
            with contextlib.suppress(Exception):
                self.ray.shutdown()
        self._remove_temp_dir()

    def _remove_temp_dir(self) -> None:
        if self._temp_dir is not None:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
            self._temp_dir = None

    def worker_env(self) -> dict[str, str]:
        """What a worker actor's environment gets from this process: its ``VYRE_`` settings
        (as a local worker inherits them), not the cluster's own choice."""
        return {k: v for k, v in os.environ.items() if k.startswith("VYRE_") and k != ENV}


def _import_ray() -> Any:
    for key, value in _BOUNDED_CONNECT.items():
        os.environ.setdefault(key, value)
    try:
        import ray
    except ImportError as exc:
        raise ClusterUnavailableError(f"cluster runs on Ray, which is not installed ({exc})",
                                      _INSTALL_FIX) from None
    return ray


def _check_answers(address: str) -> None:
    """A TCP connection to the head within CONNECT_WITHIN: Ray's own waits are long."""
    match = _ADDRESS.fullmatch(address)
    assert match is not None  # (parsed)
    host, port = match.group(1).strip("[]"), int(match.group(2))
    try:
        with socket.create_connection((host, port), timeout=CONNECT_WITHIN):
            pass
    except OSError as exc:
        raise ClusterUnavailableError(
            f"nothing answers at the Ray cluster address {address} ({exc.strerror or exc}, "
            f"within {CONNECT_WITHIN:g} s)", _fix_for(ClusterSpec("ray", address)),
            cluster=address) from None


def _fix_for(spec: ClusterSpec) -> str:
    if spec.address is None:
        return ("See the Ray error above; `ray start --head` by hand shows more, or run "
                "locally: leave cluster unset.")
    if spec.address == "auto":
        return ("Start the cluster first (`ray start --head`), or use cluster='ray' for a "
                "private instance, or leave cluster unset to run locally.")
    return (f"Check that a Ray head runs at {spec.address} (`ray status --address "
            f"{spec.address}`) and that this machine can reach it, or leave cluster unset "
            "to run locally.")


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()
