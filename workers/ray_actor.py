"""A backend's worker as a Ray actor: the same host and request handlers as the process
worker (``__main__.py``), reached through Ray instead of a lane. Ray places it on a node
(requesting a GPU when the pool asks), carries its arrays through the object store, and
tells the parent when it dies; the parent's rules (``supervisor/rules/``) do the rest.

Two concurrency groups: requests run one at a time in ``work``; ``heartbeat`` answers in
``ctl`` while one runs, unless the request holds the GIL (then it is judged frozen, as a
process worker is)."""

from __future__ import annotations

import os
import threading
import traceback
from importlib import metadata
from typing import Any

import psutil

from vyre_core.boundary import codec
from vyre_core.boundary.messages import Adopt, Body, Hello, HelloFailed, Message
from vyre_core.errors import PluginLoadError, as_vyre_error
from vyre_core.registry import ENTRY_POINT_GROUP
from vyre_workers.backend_host import listed_devices, load_backend, probed_capabilities
from vyre_workers.handlers import Handlers


class RayWorker:
    """Made by ``vyre_core.cluster.ray_pool`` as ``ray.remote(...)(RayWorker)``; never
    imported by the parent's code paths otherwise."""

    def __init__(self, backend: str, entry_point: str, generation: int, device: int | None,
                 proof: bytes, max_message_bytes: int) -> None:
        self._proof = proof
        self._lock = threading.Lock()
        self._received = self._finished = self._reply_bytes = 0
        self._hello: Hello | HelloFailed
        # (as in every worker: backends and the fault-injection kit read it)
        os.environ["VYRE_WORKER"] = f"{backend}/ray/{generation}"
        import ray

        node = ray.get_runtime_context().get_node_id()
        installed = installed_backends()
        try:  # an error here is said in the hello: the actor itself stays up to say it
            if entry_point not in installed:  # the parent starts it on another node
                self._hello = HelloFailed(PluginLoadError(
                    f"no entry point {entry_point!r} in group {ENTRY_POINT_GROUP} on this "
                    "node", "Install the backend on the node.").to_dict(), proof,
                    pid=os.getpid(), node=node, missing=True, installed=tuple(installed))
                return
            host = load_backend(entry_point, backend, generation)
            if device is not None:
                host.select_device(device)
            devices = listed_devices(host)
            host.prepare()
            caps = host.capabilities()
        except BaseException as exc:
            self._hello = HelloFailed(
                as_vyre_error(exc, f"starting backend {backend!r}").to_dict(), proof,
                traceback.format_exc(), pid=os.getpid(), node=node)
            return
        self.handlers = Handlers(host, max_message_bytes)
        self._hello = Hello(os.getpid(), host.id(), host.version(), caps.to_dict(),
                            host.device, devices, proof, node=node)

    def hello(self) -> Hello | HelloFailed:
        return self._hello

    def heartbeat(self) -> tuple[int, int, int, int]:
        """(the last request received, the last answered, that answer's bytes (the parent
        allows them time to arrive), resident bytes)."""
        with self._lock:
            return (self._received, self._finished, self._reply_bytes,
                    psutil.Process().memory_info().rss)

    def handle(self, body: Body, request_id: int, arrays: list[Any]) -> Message:
        """The reply to a request (Ray carries the messages as they are, pickled)."""
        with self._lock:
            self._received = request_id
        msg = Message(body, request_id, 0, list(arrays))
        generation = self.handlers.host.generation
        if isinstance(body, Adopt):
            generation = body.generation  # answered as its new self
        reply = self.handlers.answer(msg, generation)
        if self.handlers.stopping:  # SHUTDOWN: release the device before the answer
            self.handlers.host.shutdown()
        reply.arrays = [codec.as_frame_array(a) for a in reply.arrays]
        with self._lock:
            self._finished, self._reply_bytes = request_id, sum(a.nbytes for a in reply.arrays)
        return reply


def installed_backends() -> list[str]:
    """The names of the backends installed in this node's Python (its entry points)."""
    return sorted({ep.name for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)})


def backend_devices(backend: str, entry_point: str) -> list[dict[str, Any]]:
    """(A Ray task.) The devices ``backend`` lists on the node this runs on."""
    return [d.to_dict() for d in load_backend(entry_point, backend, 0).devices()]


def backend_capabilities(backend: str, entry_point: str) -> dict[str, Any]:
    """(A Ray task.) What a worker of ``backend`` probes on the node this runs on."""
    return probed_capabilities(backend, entry_point)
