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
import importlib.util
import logging
import os
import re
import secrets
import shutil
import signal
import socket
import sys
import tempfile
import threading
from dataclasses import dataclass
from typing import Any

from vyre_core.contract.types import Capabilities, DeviceInfo, device_list
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
                    "RAY_NUM_REDIS_GET_RETRIES": "2"}
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


@dataclass
class _Connection:
    """This process's one connection to Ray (Ray has one per process): the cluster it is
    to, how many Drivers use it, and what vyre must undo when the last lets go."""

    spec: ClusterSpec
    pid: int
    users: int = 0
    owned: bool = False             # ray.init was vyre's: ray.shutdown is too
    temp_dir: str | None = None     # a private instance's session files
    token_env: tuple[str, ...] = ()  # the environment variables vyre set for its token


_connection: _Connection | None = None
_connecting = threading.Lock()


class RayCluster:
    """One Driver's use of this process's Ray connection: made (a private instance
    started, or a cluster joined) by the first Driver, shared by the next ones for the same
    cluster, and let go of by the last one's ``close`` (a private instance stops then)."""

    def __init__(self, spec: ClusterSpec) -> None:
        global _connection
        self.spec = spec
        self._closed = False
        with _connecting:
            known = _connection
            if known is not None and known.pid != os.getpid():
                known = _connection = None  # (a forked parent's: not this process's)
            self.ray = _import_ray(bounded=spec.address not in (None, "auto"))
            if known is not None:
                if known.spec != spec:
                    raise InvalidConfigError(
                        f"this process already runs Drivers on the Ray cluster {known.spec}; "
                        f"cluster={str(spec)!r} was asked for",
                        "Run every Driver of a process on one cluster, or close the others "
                        "first.")
            elif self.ray.is_initialized():  # the program called ray.init itself
                known = _Connection(spec, os.getpid())
            else:
                known = _Connection(spec, os.getpid(), owned=True)
                self._connect(known)
            known.users += 1
            _connection = self._connection = known
        with contextlib.suppress(Exception):  # (only a log line)
            _log.info("on Ray cluster %s (%d node(s))", spec, len(self.nodes()))

    def check_usable(self) -> None:
        """Raise unless this process may use the connection: a forked child may not (it is
        its parent's, and Ray is not fork-safe), nor may a Driver that let go of it."""
        if self._connection.pid != os.getpid():
            raise ClusterUnavailableError(
                "this Driver's Ray connection belongs to the process it was made in (a "
                "forked child cannot use it)", "Make the Driver in the child, after the "
                "fork, or use the 'spawn' start method of multiprocessing.",
                cluster=str(self.spec))
        if self._closed:
            raise ClusterUnavailableError(f"this Driver let go of the Ray cluster {self.spec}",
                                          "Create a new vyre Driver.", cluster=str(self.spec))

    def _connect(self, connection: _Connection) -> None:
        if self.spec.address not in (None, "auto"):
            _check_answers(self.spec.address)
        previous = signal.getsignal(signal.SIGTERM) if _main_thread() else None
        try:
            if self.spec.address is None:
                connection.temp_dir = tempfile.mkdtemp(prefix="vyre-ray-")  # (short paths)
                connection.token_env = _private_token()
                self.ray.init(address="local", include_dashboard=False, log_to_driver=False,
                              configure_logging=False, _temp_dir=connection.temp_dir,
                              _system_config={"enable_worker_prestart": False,
                                              "prestart_worker_first_driver": False,
                                              "enable_metrics_collection": False})
            else:
                self.ray.init(address=self.spec.address, log_to_driver=False,
                              configure_logging=False)
        except Exception as exc:  # ConnectionError, ValueError (ray[client] missing) ...
            _remove(connection)
            raise ClusterUnavailableError(
                f"cannot reach the Ray cluster {self.spec}: {type(exc).__name__}: {exc}",
                _fix_for(self.spec), cluster=str(self.spec)) from None
        finally:  # ray.init replaces SIGTERM's handler with sys.exit: the host's stays
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)

    def nodes(self) -> list[dict[str, Any]]:
        """The cluster's nodes: id, address, alive, and what each offers (CPU, GPU, ...)."""
        return [{"node": n["NodeID"], "address": n.get("NodeManagerAddress"),
                 "alive": bool(n.get("Alive")),
                 "resources": {k: v for k, v in n.get("Resources", {}).items()
                               if not k.startswith("node:")}}
                for n in self.ray.nodes()]

    def list_devices(self, backend: str, entry_point: str, timeout: float) -> list[DeviceInfo]:
        """``backend``'s devices as a node of the cluster lists them (a Ray task there,
        placed and set up as a worker is)."""
        from vyre_workers.ray_actor import backend_devices

        return device_list(self._task(backend_devices, backend, entry_point, timeout,
                                      f"listing the devices of backend {backend!r}",
                                      "Name the device ids in PoolOptions(devices=[...])."))

    def probe_apart(self, backend: str, entry_point: str, timeout: float) -> Capabilities:
        """What a worker of ``backend`` would probe, asked of a Ray task on a node of the
        cluster: it holds a CPU only while it runs (an actor would hold one for good)."""
        from vyre_workers.ray_actor import backend_capabilities

        return Capabilities.from_dict(self._task(
            backend_capabilities, backend, entry_point, timeout, f"probing backend "
            f"{backend!r}", "Raise PoolOptions(timeouts=Timeouts(startup=...)), or name the "
            "backend (backend=...) to start its pool instead."), f"backend {backend!r}")

    def _task(self, function: Any, backend: str, entry_point: str, timeout: float,
              during: str, slow_fix: str) -> Any:
        """``function(backend, entry_point)`` run as a Ray task, placed and set up as a
        worker is; its answer within ``timeout`` seconds, else a VyreError saying why not."""
        options: dict[str, Any] = {"num_cpus": 1, "max_retries": 0}
        if self.worker_env():
            options["runtime_env"] = {"env_vars": self.worker_env()}
        ref = self.ray.remote(**options)(function).remote(backend, entry_point)
        try:
            return self.ray.get(ref, timeout=timeout)
        except self.ray.exceptions.GetTimeoutError:
            self.ray.cancel(ref, force=True)
            raise PoolFailedError(f"{during} on the cluster took over {timeout:g} s",
                                  slow_fix, backend=backend) from None
        except VyreError:
            raise
        except Exception as exc:  # (the task's own error, as Ray wraps it)
            cause = getattr(exc, "cause", None) or exc
            raise as_vyre_error(cause, during) from None

    def worker_env(self) -> dict[str, str]:
        """What a worker actor's environment gets from this process: its ``VYRE_`` settings
        (as a local worker inherits them), not the cluster's own choice."""
        return {k: v for k, v in os.environ.items() if k.startswith("VYRE_") and k != ENV}

    def close(self) -> None:
        """This Driver lets go; the last one disconnects (stopping the instance vyre
        started). Idempotent; nothing in a forked child (the connection is the parent's)."""
        global _connection
        if self._closed or self._connection.pid != os.getpid():
            self._closed = True
            return
        self._closed = True
        with _connecting:
            connection = self._connection
            connection.users -= 1
            if connection.users > 0:
                return
            if _connection is connection:
                _connection = None
            if connection.owned:
                with contextlib.suppress(Exception):
                    self.ray.shutdown()
            _remove(connection)


def _remove(connection: _Connection) -> None:
    if connection.temp_dir is not None:
        shutil.rmtree(connection.temp_dir, ignore_errors=True)
        connection.temp_dir = None
    if connection.token_env:
        for key in connection.token_env:
            os.environ.pop(key, None)
        connection.token_env = ()
        _reread_auth()


def _private_token() -> tuple[str, ...]:
    """A private instance authenticates with a token of its own, held in this process's
    environment (its Ray processes inherit it), unless the user configured Ray's
    authentication or this Ray has none (before 2.52): left to itself, Ray writes a token
    into ~/.ray/auth_token and leaves it there. Returns the variables set (removed when
    the instance stops)."""
    if any(k in os.environ for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")):
        return ()
    os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32))
    try:
        _reread_auth()
    except Exception:  # (no such settings in this Ray: it runs as it would by itself)
        for key in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN"):
            os.environ.pop(key, None)
        return ()
    return ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")


def _reread_auth() -> None:
    """Ray read its authentication settings at import: it reads them again (as its own
    ``ray.init`` does when it turns tokens on)."""
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def _import_ray(bounded: bool) -> Any:
    """Ray, imported here only. Ray never connects by itself (a call after the last
    Driver let go would start an instance of its own); ``bounded``: connecting to an
    address, whose waits Ray reads at import, is given up on within seconds."""
    os.environ.setdefault("RAY_ENABLE_AUTO_CONNECT", "0")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    tightened = [k for k in _BOUNDED_CONNECT if bounded and "ray" not in sys.modules
                 and k not in os.environ]
    os.environ.update({k: _BOUNDED_CONNECT[k] for k in tightened})
    try:
        import ray
    except ImportError as exc:
        raise ClusterUnavailableError(f"cluster runs on Ray, which is not installed ({exc})",
                                      _INSTALL_FIX) from None
    finally:  # (read at import: this process's children and later imports keep theirs)
        for key in tightened:
            os.environ.pop(key, None)
    return ray


def _check_answers(address: str) -> None:
    """A TCP connection to the head within CONNECT_WITHIN: Ray's own waits are long."""
    match = _ADDRESS.fullmatch(address)
    assert match is not None  # (parsed)
    host, port = match.group(1).strip("[]"), int(match.group(2))
    try:
        conn = socket.create_connection((host, port), timeout=CONNECT_WITHIN)
    except OSError as exc:
        raise ClusterUnavailableError(
            f"nothing answers at the Ray cluster address {address} ({exc.strerror or exc}, "
            f"within {CONNECT_WITHIN:g} s)", _fix_for(ClusterSpec("ray", address)),
            cluster=address) from None
    with conn:
        try:
            conn.sendall(_HTTP2_HELLO)
            answer = conn.recv(9)
        except OSError:  # (silent, or it hung up)
            answer = b""
    if len(answer) < 9 or answer[3] != _HTTP2_SETTINGS:  # a Ray head speaks gRPC: HTTP/2
        raise ClusterUnavailableError(
            f"something answers at {address}, but not a Ray head (it does not speak gRPC; "
            f"it said {answer[:16]!r})", "Name the Ray head's own port (`ray start --head "
            "--port`, 6379 by default; 10001 for ray://), not another service's. "
            + _fix_for(ClusterSpec("ray", address)), cluster=address)


#: The HTTP/2 connection preface and an empty SETTINGS frame: a gRPC server (a Ray head)
#: answers with a SETTINGS frame of its own (frame type 4, the header's fourth byte).
_HTTP2_HELLO = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
_HTTP2_SETTINGS = 4


def _fix_for(spec: ClusterSpec) -> str:
    if spec.address is None:
        return ("See the Ray error above; `ray start --head` by hand shows more, or run "
                "locally: leave cluster unset.")
    if spec.address == "auto":
        return ("Start the cluster first (`ray start --head`), or use cluster='ray' for a "
                "private instance, or leave cluster unset to run locally.")
    if spec.address.startswith("ray://") and importlib.util.find_spec("ray.util.client") \
            is not None and importlib.util.find_spec("grpc") is None:
        return ("Install Ray Client for ray:// addresses: pip install 'ray[client]', or name "
                "the head's GCS address HOST:PORT instead (from a node of the cluster).")
    return (f"Check that a Ray head runs at {spec.address} (`ray status --address "
            f"{spec.address}`) and that this machine can reach it, or leave cluster unset "
            "to run locally.")


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()
