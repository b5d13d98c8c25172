"""vyre's one exception family.

Every error has a stable numeric code (append-only: a code is never reused or
renumbered), a cause, and a ``Fix:`` line telling the user what to do. Errors are
plain data so they cross a process boundary as a dict and are raised again on the other
side as the same class with the same fields. ``as_vyre_error`` is the one place where
foreign exceptions are mapped into the family.
"""

from __future__ import annotations

import traceback
from typing import Any, ClassVar


class VyreError(Exception):
    """Base of every error vyre raises on purpose."""

    code: ClassVar[int] = 1000
    default_fix: ClassVar[str] = "Report this as a bug in vyre with the full message."

    def __init__(self, cause: str, fix: str | None = None, **details: Any) -> None:
        self.cause = cause
        self.fix = fix or self.default_fix
        self.details = details
        super().__init__(str(self))

    def __str__(self) -> str:
        return f"[E{self.code}] {self.cause}\nFix: {self.fix}"

    def __reduce__(self):  # pickling (e.g. by pytest-xdist) keeps class and fields
        return (_rebuild, (self.to_dict(),))

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form for crossing a process boundary."""
        return {"type": type(self).__name__, "code": self.code, "cause": self.cause,
                "fix": self.fix, "details": self.details}

    @staticmethod
    def from_dict(data: dict[str, Any]) -> VyreError:
        """Rebuild the error of :meth:`to_dict`, as its own class when the code is known."""
        cls = _CATALOG.get(int(data.get("code", 0)), VyreError)
        return cls(str(data.get("cause", "")), data.get("fix"), **dict(data.get("details") or {}))


def _rebuild(data: dict[str, Any]) -> VyreError:
    return VyreError.from_dict(data)


# -- Programs and inputs --------------------------------------------------------------

class InvalidProgramError(VyreError):
    """Program bytes or a program object are malformed (bad wire form, bad node)."""

    code = 1001
    default_fix = ("Build the program with vyre_core.ir and pass the bytes of "
                   "Program.to_wire() unchanged.")


class ValidationError(VyreError):
    """A program failed validation; ``findings`` holds every V### finding."""

    code = 1002
    default_fix = "Resolve each finding listed above; each carries its own Fix."

    def __init__(self, cause: str, fix: str | None = None, **details: Any) -> None:
        details.setdefault("findings", [])
        super().__init__(cause, fix, **details)

    @property
    def findings(self) -> list[dict[str, str]]:
        return self.details["findings"]


class InvalidInputError(VyreError):
    """Dispatch inputs do not match the program's input ABI."""

    code = 1101
    default_fix = "Pass one numpy array (or bytes) per input buffer, in declaration order."


class InvalidConfigError(VyreError):
    """A DispatchConfig field has a value that cannot mean anything."""

    code = 1103
    default_fix = "Construct DispatchConfig with the documented ranges (see docs/operations.md)."


# -- Backends and devices ---------------------------------------------------------------

class UnsupportedFeatureError(VyreError):
    """The backend cannot do what was asked; nothing was run."""

    code = 1102
    default_fix = "Route the program to a backend that reports this capability."


class LaunchLimitError(VyreError):
    """The launch exceeds a limit of the chosen backend (workgroup, grid, buffer size)."""

    code = 1104
    default_fix = "Shrink the launch below the named limit, or route to a larger backend."


class DeviceOutOfMemoryError(VyreError):
    """The device could not allocate the memory the dispatch needs."""

    code = 1201
    default_fix = "Use smaller buffers, free resident buffers, or route to a larger device."


class DeviceLostError(VyreError):
    """The device was lost; ``details['generation']`` is the worker generation it was in."""

    code = 1202
    default_fix = "Dispatch again: the worker recovers or restarts with a new device."


class KernelCompileError(VyreError):
    """The backend could not compile the program to native code."""

    code = 1203
    default_fix = "Report the program's wire bytes with this message to the backend's authors."


class DispatchError(VyreError):
    """The backend failed while running a dispatch, or returned malformed outputs."""

    code = 1204
    default_fix = "Run it with shadow=True against the reference and report the divergence."


# -- Process supervision ----------------------------------------------------------------

class DispatchTimeoutError(VyreError):
    """The dispatch passed its deadline; its worker was killed and restarted."""

    code = 1301
    default_fix = "Raise DispatchConfig.timeout, or split the work into smaller dispatches."


class WorkerCrashedError(VyreError):
    """The worker process died while serving this request, on every allowed retry."""

    code = 1302
    default_fix = "The request crashes its backend; run it on the reference backend to check it."


class PoolFailedError(VyreError):
    """A backend's pool restarted too often and was marked failed."""

    code = 1303
    default_fix = ("Check `vyre doctor`; routing skips the backend until the driver "
                   "restarts.")


class PipelineInvalidatedError(VyreError):
    """A compiled pipeline or resident buffer is from an earlier worker generation."""

    code = 1304
    default_fix = "Compile the program again (Driver.compile) and use the new handle."


class ProtocolError(VyreError):
    """A message between the parent and a worker was malformed."""

    code = 1305
    default_fix = "Use matching versions of vyre in the parent and the workers."


# -- Routing and plugins -----------------------------------------------------------------

class NoCapableBackendError(VyreError):
    """No registered backend can run the program; ``details['rejections']`` says why each."""

    code = 1401
    default_fix = ("Install a backend with the missing capabilities, or change the program "
                   "to avoid them (see the reasons above).")


class PluginLoadError(VyreError):
    """A backend plugin could not be loaded (import error, bad hooks, contract mismatch)."""

    code = 1402
    default_fix = "Fix or uninstall the plugin; `vyre doctor` shows its traceback."


_CATALOG: dict[int, type[VyreError]] = {
    cls.code: cls
    for cls in (VyreError, InvalidProgramError, ValidationError, InvalidInputError,
                InvalidConfigError, UnsupportedFeatureError, LaunchLimitError,
                DeviceOutOfMemoryError, DeviceLostError, KernelCompileError, DispatchError,
                DispatchTimeoutError, WorkerCrashedError, PoolFailedError,
                PipelineInvalidatedError, ProtocolError, NoCapableBackendError, PluginLoadError)
}


def catalog() -> dict[int, type[VyreError]]:
    """Every error class by its stable code."""
    return dict(_CATALOG)


def as_vyre_error(exc: BaseException, during: str) -> VyreError:
    """``exc`` as a member of the family: kept if it is one, else wrapped as a
    DispatchError carrying the original type, message and traceback."""
    if isinstance(exc, VyreError):
        return exc
    if isinstance(exc, MemoryError):
        return DeviceOutOfMemoryError(f"out of memory during {during}")
    return DispatchError(
        f"{during} failed: {type(exc).__name__}: {exc}",
        "This is a bug in the backend; report it with the traceback in details.",
        traceback="".join(traceback.format_exception(exc)))
