"""``await`` on a call's handle, from asyncio code: the answer is ``result()``'s, the event
loop keeps running meanwhile, cancelling the awaiting task cancels the call, and the
Driver is an async context manager (issue 37, item 3)."""

from __future__ import annotations

import asyncio
import random
import threading

import numpy as np
import pytest
from waiting import PATIENCE, wait_running, workers

import vyre_core as vyre
from vyre_core import Driver, f32, i32, u32
from vyre_core.config import DispatchConfig
from vyre_core.errors import DispatchCancelledError, DispatchTimeoutError, InvalidInputError
from vyre_core.registry import Registry

pytestmark = pytest.mark.processes

N = 256


@vyre.kernel
def scale(a: f32, x: vyre.Array[f32], out: vyre.Array[f32]):
    i = vyre.global_id(0)
    if i < len(x):
        out[i] = a * x[i]


@vyre.kernel
def spin(rounds: u32, out: vyre.Array[u32]):
    """Runs ``rounds`` loop iterations: long enough, at 2**30, to be cancelled mid-loop."""
    i = vyre.global_id(0)
    acc = u32(0)
    for _ in range(i32(rounds)):
        acc += u32(1)
    if i < len(out):
        out[i] = acc


LONG = 2**30


@pytest.fixture(scope="module")
def drv():
    with Driver(Registry.discover("reference")) as driver:
        yield driver


def data(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).random(N, dtype=np.float32)


def test_await_gives_the_same_bytes_as_result(drv) -> None:
    x = data(1)

    async def main() -> bytes:
        out = np.zeros_like(x)
        awaited = await drv.launch_async(scale, dim=N, args=(3.0, x, out))
        assert np.shares_memory(awaited[0], out)  # the caller's array, filled in place
        return out.tobytes()

    assert asyncio.run(main()) == (np.float32(3.0) * x).tobytes()


def test_an_awaited_failure_raises_what_result_raises(drv) -> None:
    pending = drv.launch_async(spin, dim=1, args=(LONG, np.zeros(1, np.uint32)),
                               config=DispatchConfig(timeout=0.5))

    async def main() -> None:
        await pending

    with pytest.raises(DispatchTimeoutError):
        asyncio.run(main())
    with pytest.raises(DispatchTimeoutError):
        pending.result(0)


def test_a_hundred_concurrent_awaits_each_get_their_own_answer(drv) -> None:
    async def one(seed: int) -> tuple[bytes, bytes]:
        x, out = data(seed), np.zeros(N, np.float32)
        await drv.launch_async(scale, dim=N, args=(float(seed), x, out))
        return out.tobytes(), (np.float32(seed) * x).tobytes()

    async def main() -> list[tuple[bytes, bytes]]:
        return await asyncio.gather(*(one(seed) for seed in range(100)))

    for got, want in asyncio.run(main()):
        assert got == want


def test_a_handle_is_awaited_in_whichever_loop_awaits_it(drv) -> None:
    """Made in one thread's loop, awaited in another thread's loop, and awaited twice: a
    handle is bound to no loop, and a second await gives the same answer."""
    x = data(3)

    async def make():
        return drv.launch_async(scale, dim=N, args=(2.0, x, np.zeros(N, np.float32)))

    pending = asyncio.run(make())
    answers: list[bytes] = []

    def elsewhere() -> None:
        async def twice() -> None:
            answers.append((await pending)[0].tobytes())
            answers.append((await pending)[0].tobytes())
        asyncio.run(twice())

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join(PATIENCE)
    assert answers == [(np.float32(2.0) * x).tobytes()] * 2


def test_the_loop_keeps_ticking_while_a_call_runs_and_a_cancelled_task_cancels_it(drv) -> None:
    """While a worker runs a long kernel, the loop runs other tasks; cancelling the task
    that awaits the call cancels the call: the next call answers at once."""
    out = np.zeros(1, np.uint32)

    async def main() -> int:
        task = asyncio.ensure_future(drv.launch_async(
            spin, dim=1, args=(LONG, out), config=DispatchConfig(timeout=PATIENCE)))
        ticks = 0
        while not any(w["running"] for w in workers(drv, "reference")):
            await asyncio.sleep(0.005)
        for _ in range(50):  # (50 turns of the loop while the call runs)
            await asyncio.sleep(0)
            ticks += 1
        assert not task.done()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return ticks

    assert asyncio.run(main()) == 50
    x = data(4)
    got = drv.launch(scale, dim=N, args=(5.0, x, np.zeros(N, np.float32)),
                     config=DispatchConfig(timeout=5.0))
    assert got[0].tobytes() == (np.float32(5.0) * x).tobytes()


def test_random_cancellations_among_a_hundred_awaits_lose_and_duplicate_nothing(drv) -> None:
    """Each task either answers with its own bytes or is cancelled; afterwards no worker
    is left busy and a call answers."""
    rng = random.Random(7)

    async def one(seed: int) -> tuple[int, bytes, bytes]:
        x, out = data(seed), np.zeros(N, np.float32)
        await drv.launch_async(scale, dim=N, args=(float(seed), x, out))
        return seed, out.tobytes(), (np.float32(seed) * x).tobytes()

    async def main() -> tuple[int, int]:
        tasks = [asyncio.ensure_future(one(seed)) for seed in range(100)]
        for _ in range(rng.randrange(3)):
            await asyncio.sleep(0)
        doomed = rng.sample(tasks, 30)
        for task in doomed:
            task.cancel()
        done = await asyncio.gather(*tasks, return_exceptions=True)
        answered = cancelled = 0
        for outcome in done:
            if isinstance(outcome, asyncio.CancelledError):
                cancelled += 1
            else:
                _, got, want = outcome
                assert got == want
                answered += 1
        return answered, cancelled

    answered, cancelled = asyncio.run(main())
    assert answered + cancelled == 100 and answered >= 70
    wait_running_none(drv)
    x = data(5)
    got = drv.launch(scale, dim=N, args=(1.0, x, np.zeros(N, np.float32)))
    assert got[0].tobytes() == x.tobytes()


def wait_running_none(drv: Driver) -> None:
    from waiting import wait_for

    wait_for(lambda: not any(w["running"] for w in workers(drv, "reference")), PATIENCE,
             "no worker of the reference running a request")


def test_a_cancelled_await_makes_result_raise_cancelled(drv) -> None:
    out = np.zeros(1, np.uint32)
    pending = drv.launch_async(spin, dim=1, args=(LONG, out),
                               config=DispatchConfig(timeout=PATIENCE))
    wait_running(drv)

    async def main() -> None:
        task = asyncio.ensure_future(pending)
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    with pytest.raises(DispatchCancelledError):
        pending.result(PATIENCE)


def test_async_with_closes_the_driver_without_blocking_the_loop() -> None:
    x = data(6)

    async def main() -> tuple[bytes, int]:
        async with Driver(Registry.discover("reference")) as driver:
            got = await driver.launch_async(scale, dim=N, args=(4.0, x, np.zeros(N, np.float32)))
            pools = driver.pools
        return got[0].tobytes(), len([p for p in pools.all() if p.running])

    got, running = asyncio.run(main())
    assert got == (np.float32(4.0) * x).tobytes() and running == 0


def test_launch_async_refuses_bad_arguments_before_any_await(drv) -> None:
    with pytest.raises(InvalidInputError):
        drv.launch_async(scale, dim=N, args=(1.0, data(7)))
