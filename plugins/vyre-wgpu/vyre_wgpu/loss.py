"""Device loss and the errors of wgpu: a loss is read from wgpu's error texts (wgpu-py
has no lost promise) or found by touching the device; every failure leaves as a VyreError."""

from __future__ import annotations

import re

from vyre_core.errors import (
    DeviceLostError,
    DeviceOutOfMemoryError,
    DispatchError,
    KernelCompileError,
    VyreError,
)
from vyre_wgpu.adapter import wgpu_module
from vyre_wgpu.state import DeviceState

_LOST = re.compile(r"device (?:is |was |has been )?(?:lost|destroyed)|lost device", re.I)
_RECOVERS = "Dispatch again: the worker recovers the device (try_recover) or restarts."


def summary(exc: BaseException) -> str:
    """The last non-empty line of a wgpu error (its own cause, without the call stack)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return lines[-1] if lines else type(exc).__name__


def fail(dev: DeviceState, exc: BaseException, during: str, *, compiling: bool = False,
         wgsl: str | None = None) -> VyreError:
    """``exc`` from wgpu as a VyreError; marks ``dev`` lost when the text says so."""
    if isinstance(exc, VyreError):
        return exc
    text = str(exc).strip()
    if dev.lost_reason is None and _LOST.search(text):
        dev.lost_reason = summary(exc)
    if dev.lost_reason is not None:
        return lost(dev, f"was lost during {during}")
    if type(exc).__name__ == "GPUOutOfMemoryError" or isinstance(exc, MemoryError):
        return DeviceOutOfMemoryError(f"backend 'wgpu': out of device memory during "
                                      f"{during}: {summary(exc)}")
    if compiling:
        details = {"wgsl": wgsl} if wgsl is not None else {}
        return KernelCompileError(
            f"backend 'wgpu': {during} failed: {type(exc).__name__}: {text}",
            "This is a bug in the vyre-wgpu lowering: report the program's wire bytes "
            "with this message. Meanwhile run the program on another backend "
            "(backend='reference').", **details)
    return DispatchError(f"backend 'wgpu': {during} failed: {type(exc).__name__}: {text}",
                         "Check it against the reference (`vyre run TARGET --backend wgpu "
                         "--shadow`) and report the program's wire bytes with this "
                         "message.")


def lost(dev: DeviceState, what: str) -> DeviceLostError:
    """The error for a call on a lost device (``what``: "is lost", "was lost during X")."""
    return DeviceLostError(f"backend 'wgpu': the device on {dev.name!r} {what} "
                           f"({dev.lost_reason})", _RECOVERS, generation=dev.generation)


def check_usable(dev: DeviceState) -> None:
    """(Under the device lock.) Refuse work on a closed or lost device."""
    if dev.closed:
        raise DispatchError("backend 'wgpu': the device was shut down",
                            "Prepare the backend again (vyre_prepare) before using it.")
    if dev.lost_reason is not None:
        raise lost(dev, "is lost")


def touch(dev: DeviceState) -> None:
    """(Under the device lock.) Find a loss nobody has hit yet: make and drop a 4-byte
    buffer; a failure that does not say "lost" counts as a loss too (it is unusable)."""
    if dev.closed or dev.lost_reason is not None:
        return
    try:
        buf = dev.device.create_buffer(label="alive", size=4,
                                       usage=wgpu_module().BufferUsage.COPY_DST)
        buf.destroy()
    except Exception as exc:
        fail(dev, exc, "a liveness check")
        if dev.lost_reason is None:
            dev.lost_reason = summary(exc)
