"""Awaiting a call from asyncio: the event loop keeps running while a worker works.

A call's answer arrives on the pool's I/O thread, completing its ``Outcome``; the awaiting
coroutine is woken through its own loop's ``call_soon_threadsafe``, never by blocking the
loop. A cancelled await cancels the call (``PendingResult.cancel``: the worker is told),
and the handle stays bound to no loop: any loop may await it, any number of times.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TypeVar

from vyre_core.supervisor.outcome import Outcome

T = TypeVar("T")


async def answer(future: Outcome, result: Callable[[], T], cancel: Callable[[], object]) -> T:
    """``result()`` once ``future`` is done, awaited in the running loop (whichever loop
    awaits: the call is bound to none); ``cancel()`` when the awaiting task is cancelled."""
    loop = asyncio.get_running_loop()
    woken: asyncio.Future[None] = loop.create_future()

    def wake(_: Outcome) -> None:  # (the I/O thread, or here when already done)
        with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits
            loop.call_soon_threadsafe(_settle, woken)

    future.add_done_callback(wake)
    try:
        await woken
    except asyncio.CancelledError:
        cancel()
        raise
    return result()


def _settle(woken: asyncio.Future[None]) -> None:
    if not woken.done():
        woken.set_result(None)
