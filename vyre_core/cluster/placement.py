"""Where a Ray pool's actors go: anywhere Ray likes while every node has the backend, else
the node with the fewest of the pool's workers among those that have it (learnt from
actors that failed to load it: the nodes lacking the backend), why no node ever can, and
which starting actors Ray has not placed for want of room. A room of its own because it
reads the cluster (Ray's control store, per-node resources), which the calls' path never
does; ``RayPool`` mixes it in (``cluster/ray_pool.py``)."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import TYPE_CHECKING, Any

from vyre_core.cluster.connect import RayCluster
from vyre_core.errors import NoCapableBackendError, SystemResourceError, VyreError
from vyre_core.supervisor.options import PoolOptions
from vyre_core.supervisor.rules.machine import PoolMachine


class Placement:
    """The placement of a Ray pool's actors (see the module docstring). ``RayPool`` sets
    the state declared here; ``_carry`` and ``_deliver`` are its own."""

    backend: str
    options: PoolOptions
    _cluster: RayCluster
    _ray: Any
    _machine: PoolMachine
    _lock: threading.RLock
    _actors: dict[int, Any]
    _node: dict[int, str]
    _target: dict[int, str]
    _lacking: dict[str, tuple[list[str], str]]
    _placing: dict[int, int]

    if TYPE_CHECKING:
        def _carry(self, actions: list[Any], own: object | None = None) -> Any: ...

        def _deliver(self) -> None: ...

    def _place(self) -> VyreError | str | None:
        """Where the next worker may go: None (anywhere: Ray places it), a node (the one
        with fewest of our workers, once some nodes are known to lack the backend), or
        why no node of the cluster can ever take it (one only busy now is Ray's to wait
        for)."""
        need = self.options.gpus_per_worker
        nodes = [n for n in self._cluster.nodes() if n["alive"]]
        fits = [n for n in nodes
                if n["resources"].get("CPU", 0) >= 1 and n["resources"].get("GPU", 0) >= need]
        having = [n for n in fits if n["node"] not in self._lacking]
        if having:
            if not self._lacking:
                return None
            free = self._free_per_node()
            ours = list({**self._node, **self._target}.values())  # (started ones too)
            return min(having, key=lambda n: (not self._room(free.get(n["node"], {})),
                                              ours.count(n["node"])))["node"]
        if not fits:
            listed = "; ".join(f"{n['address']}: {n['resources'].get('CPU', 0):g} CPU, "
                               f"{n['resources'].get('GPU', 0):g} GPU" for n in nodes)
            return NoCapableBackendError(
                f"no node of the Ray cluster {self._cluster.spec} has 1 CPU and {need:g} "
                f"GPU(s) for a worker of {self.backend!r} (nodes: {listed or 'none'})",
                "Add a node with the CPUs and GPUs a worker needs (ray start --address ...), "
                "or lower PoolOptions(gpus_per_worker=...) (0 for a CPU backend).",
                rejections={self.backend: [f"no node has 1 CPU and {need:g} GPU"]},
                nodes=nodes)
        listed = "; ".join(
            f"{n['address']} ({n['node'][:8]}): has "
            f"{', '.join(self._lacking[n['node']][0]) or 'no backend'}"
            f"; {self._lacking[n['node']][1]}" for n in fits)
        return NoCapableBackendError(
            f"backend {self.backend!r} is on no node of the Ray cluster "
            f"{self._cluster.spec} that can take its workers: {listed}",
            f"Install the distribution of {self.backend!r} in the Python of the cluster's "
            "nodes (the same version as here), or add a node that has it; then create a new "
            "Driver.", rejections={self.backend: ["installed on no node"]},
            nodes=[{**n, "backends": self._lacking[n["node"]][0]} for n in fits])

    def _unsure_of_place(self, now: float) -> list[tuple[int, int, Any]]:
        """(Locked.) The starting workers whose start deadline is near: each is asked
        once whether Ray has placed it at all (an actor no node can take now waits for
        one for ever; that is no fault of the backend's)."""
        margin = min(1.0, self.options.timeouts.startup / 2)
        found = []
        for w in self._machine.workers:
            if w.state == "starting" and now >= w.startup_deadline - margin \
                    and self._placing.get(w.index) != w.generation and w.index in self._actors:
                self._placing[w.index] = w.generation
                found.append((w.index, w.generation, self._actors[w.index]))
        return found

    def _check_placed(self, unsure: list[tuple[int, int, Any]]) -> None:
        """(Outside the lock: Ray's control store answers.) Tell the rules of each worker
        that Ray has not placed because no node it may go to has room for it."""
        from ray._private import state  # (the actor table: no public API has it)

        try:
            everywhere = {k: v for k, v in self._ray.available_resources().items()
                          if k in ("CPU", "GPU")}
            total = {k: v for k, v in self._ray.cluster_resources().items()
                     if k in ("CPU", "GPU")}
        except Exception:  # (the control store did not answer: the start deadline judges)
            return
        per_node = self._free_per_node()
        unplaced = []
        for index, generation, actor in unsure:
            target = self._target.get(index)
            free = everywhere if target is None else per_node.get(target, everywhere)
            if self._room(free):
                continue  # (room enough: a slow start is the start deadline's to judge)
            with contextlib.suppress(Exception):  # (no process yet: not placed anywhere)
                info = state.actors(actor_id=actor._actor_id.hex())
                if info.get("State") in ("PENDING_CREATION", "DEPENDENCIES_UNREADY") \
                        and not info.get("Pid"):
                    unplaced.append((index, generation, target, free))
        if not unplaced:
            return
        need = "1 CPU" + (f" and {self.options.gpus_per_worker:g} GPU(s)"
                          if self.options.gpus_per_worker else "")
        with self._lock:
            for index, generation, target, free in unplaced:
                where = (f"node {target[:8]} (the one of the cluster {self._cluster.spec} "
                         "with the backend)" if target is not None else
                         f"no node of the Ray cluster {self._cluster.spec}")
                error = SystemResourceError(
                    f"Ray could not place a worker of {self.backend!r} as its start deadline "
                    f"neared: {where} has {need} free (free: "
                    f"{', '.join(f'{free.get(k, 0):g} {k}' for k in total) or 'nothing'}; "
                    "in all: "
                    f"{', '.join(f'{v:g} {k}' for k, v in total.items()) or 'nothing'})",
                    "Free resources on the cluster (other actors and tasks hold them), add a "
                    "node (ray start --address ...), or ask for fewer workers "
                    "(PoolOptions(workers=...)); the pool tries again by itself.")
                self._machine.unplaced(index, generation, error, time.monotonic())
            self._carry(self._machine.take_actions())
        self._deliver()

    def _room(self, free: dict[str, float]) -> bool:
        """Whether ``free`` resources take one more worker."""
        return free.get("CPU", 0.0) >= 1 and free.get("GPU", 0.0) >= self.options.gpus_per_worker

    def _free_per_node(self) -> dict[str, dict[str, float]]:
        """What each node has free now ({} when Ray cannot say)."""
        from ray._private import state

        try:
            return dict(state.available_resources_per_node())
        except Exception:
            return {}
