"""fault_tolerance: a worker killed with SIGKILL mid-dispatch, and what the caller sees.

Every backend runs in a supervised worker process. This walk-through kills one for real
(``os.kill(pid, SIGKILL)``) while a dispatch is running in it and shows that:

1. the dispatch completes anyway, with the right result: a dispatch is pure work, so the
   supervisor sees the death (pidfd), starts a new worker (the next *generation*) and runs
   the request again there (``DispatchConfig.retries``, 1 by default);
2. the pool keeps running: the death counts toward its restart intensity (OTP style:
   more than ``restart.max_restarts`` deaths in ``restart.window`` fail the pool, and routing
   falls over to the next capable backend), one death is far from that;
3. a ``CompiledPipeline`` made in the dead worker is refused with
   ``PipelineInvalidatedError`` (its compiled state died with the process) instead of
   running on state that no longer exists; compiling again gives a working handle.

The kernel advances one linear congruential generator per invocation ``rounds`` times
(``s = s * 1664525 + 1013904223``, wrapping u32), a loop whose length is an input, so the
same program is quick for the checks and slow enough to be killed mid-run. numpy checks it
without iterating: ``rounds`` steps of an affine map compose into one affine map.

The walk-through runs on the reference backend where it is loaded, else on the backend
routing picks; the supervision is the same for every backend. The killed dispatch gets
as many rounds as keep that backend busy for a few tenths of a second (``slow_rounds``):
15,000 on the reference's interpreter, tens of millions compiled with numba.

Run it: ``python examples/fault_tolerance.py`` (the walk-through, also part of
``vyre demo``); ``vyre run fault_tolerance`` runs the kernel alone.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import vyre_core as vyre
from vyre_core import Driver, Example, i32, u32
from vyre_core.errors import PipelineInvalidatedError, VyreError

N = 1 << 16
MUL, INC = 1664525, 1013904223
QUICK = 64            # rounds of the checks: milliseconds
SLOW = 15000          # rounds of the dispatch that is killed, at least (``slow_rounds``)
BUSY = 0.2            # seconds that dispatch must keep a worker busy for the kill to land


@vyre.kernel(workgroup=(256,))
def lcg(seeds: vyre.Array[u32], rounds: i32, out: vyre.Array[u32]):
    i = vyre.global_id(0)
    if i < len(seeds):
        s = seeds[i]
        for _ in range(rounds):
            s = s * MUL + INC
        out[i] = s


def advanced(seeds: np.ndarray, rounds: int) -> np.ndarray:
    """``seeds`` after ``rounds`` LCG steps, by composing the affine map (square and
    multiply on ``x -> a*x + c`` modulo 2**32) instead of iterating."""
    a, c = 1, 0                      # the identity map
    step_a, step_c = MUL, INC
    while rounds:
        if rounds & 1:               # apply step after (a, c)
            a, c = (step_a * a) % 2**32, (step_a * c + step_c) % 2**32
        step_a, step_c = (step_a * step_a) % 2**32, (step_a * step_c + step_c) % 2**32
        rounds >>= 1
    return seeds * np.uint32(a) + np.uint32(c)   # uint32 arithmetic wraps like the kernel


def build(rounds: int = QUICK, seed: int = 0) -> Example:
    seeds = np.random.default_rng(seed).integers(0, 2**32, N, dtype=np.uint32)
    return Example.of_kernel(lcg, N, (seeds, rounds, np.zeros_like(seeds)),
                             expected=[advanced(seeds, rounds)])


# -- the walk-through -----------------------------------------------------------------------

def slow_rounds(driver: Driver, backend: str) -> int:
    """Rounds that keep a worker of ``backend`` busy for BUSY seconds: SLOW, ten times
    more until a dispatch takes that long (at most 2**31 - 1, an i32)."""
    rounds = SLOW
    while rounds < 2**31 - 1:
        start = time.monotonic()
        build(rounds).run(driver, backend)
        if time.monotonic() - start >= BUSY:
            break
        rounds = min(rounds * 10, 2**31 - 1)
    return rounds


def walkthrough(driver: Driver, backend: str | None = None) -> list[tuple[str, bool]]:
    """Kill a worker of ``backend`` (default: the reference) mid-dispatch and check what
    the caller sees. Returns every step as (what happened, as it should); stops at the
    first step that went wrong, so a failure names the step that broke."""
    steps: list[tuple[str, bool]] = []
    try:
        if backend is None:
            reference = driver.registry.reference()
            backend = (reference.id if reference is not None
                       else driver.route(build().program).backend)
        _walk(driver, backend, steps)
    except (VyreError, TimeoutError) as exc:
        steps.append((f"{type(exc).__name__}: {exc}", False))
    return steps


def _walk(driver: Driver, backend: str, steps: list[tuple[str, bool]]) -> None:
    def step(text: str, ok: bool) -> bool:
        steps.append((text, bool(ok)))
        return bool(ok)

    example = build()
    prog = example.program
    quick = list(example.inputs)
    matches = example.mismatch(example.run(driver, backend)) is None
    pipeline = driver.compile(prog, backend=backend, config=example.config)
    first = _worker(driver, backend, lambda w: w["state"] == "idle")
    if not step(f"dispatch on {backend!r} in worker pid {first['pid']} (generation "
                f"{first['generation']}) matches numpy; a pipeline compiled in generation "
                f"{pipeline.generation} too",
                matches and example.mismatch(pipeline.dispatch(quick)) is None):
        return

    rounds = slow_rounds(driver, backend)
    slow = build(rounds)
    restarts = driver.status()["pools"][backend]["restarts"]
    pending = driver.dispatch_async(prog, slow.inputs, backend=backend,
                                    config=slow.config.replace(label="killed mid-run", retries=1))
    busy = _worker(driver, backend, lambda w: w["state"] == "busy" and w["running"])
    in_flight = not pending.is_ready()
    os.kill(busy["pid"], signal.SIGKILL)
    if not step(f"SIGKILL sent to worker pid {busy['pid']} while the dispatch was in "
                "flight", in_flight):
        return

    outputs = pending.result(timeout=60)
    after = driver.status()["pools"][backend]
    worker = after["workers"][busy["index"]]
    if not step(f"the dispatch completed anyway and matches numpy: the supervisor re-ran it "
                f"in the restarted worker (pid {worker['pid']}, generation "
                f"{worker['generation']})",
                slow.mismatch(outputs) is None
                and worker["generation"] == busy["generation"] + 1
                and worker["pid"] != busy["pid"]):
        return
    limit = driver.options.restart.max_restarts
    if not step(f"the pool is {after['state']}; the death counts toward its restart "
                f"intensity (restarts: {restarts} -> {after['restarts']}, the pool fails past "
                f"{limit} in {driver.options.restart.window:g} s)",
                after["state"] == "running" and after["restarts"] == restarts + 1):
        return

    try:
        pipeline.dispatch(quick)
        refused = None
    except PipelineInvalidatedError as exc:
        refused = exc
    if not step(f"the pipeline compiled in generation {pipeline.generation} is refused: "
                + (f"PipelineInvalidatedError [E{refused.code}]" if refused
                   else "it ran (it should not)"), refused is not None):
        return
    fresh = driver.compile(prog, backend=backend, config=example.config)
    step(f"compiling again gives a pipeline in generation {fresh.generation} that matches "
         "numpy", fresh.valid and example.mismatch(fresh.dispatch(quick)) is None)


def _worker(driver: Driver, backend: str, wanted: Callable[[dict[str, Any]], Any],
            timeout: float = 30.0) -> dict[str, Any]:
    """The first worker of ``backend``'s pool for which ``wanted(worker)`` holds."""
    deadline = time.monotonic() + timeout
    while True:
        for worker in driver.status()["pools"][backend]["workers"]:
            if wanted(worker):
                return worker
        if time.monotonic() > deadline:
            raise TimeoutError(f"no worker of {backend!r} reached the expected state")
        time.sleep(0.002)


def main() -> int:
    """Run the walk-through in a fresh Driver and print its steps; 0 when all held."""
    from vyre_core.cli.output import ok, print_table

    with Driver() as driver:
        steps = walkthrough(driver)
    print_table(["step", "ok"], [[text, ok(flag)] for text, flag in steps],
                title="fault tolerance: SIGKILL mid-dispatch")
    return 0 if steps and all(flag for _, flag in steps) else 1


if __name__ == "__main__":
    sys.exit(main())
