"""vyre's one exception family.

Every error has a stable numeric code (append-only: a code is never reused or
renumbered), a cause, and a ``Fix:`` line telling the user what to do. Three groups say
what a caller can do: ``CallerError`` (its own mistake: retrying cannot help),
``BackendFaultError`` (a backend or its worker failed: retrying may help) and
``UnavailableError`` (nothing can run it now). Errors are plain data so they cross a
process boundary as a dict and are raised again on the other side as the same class with
the same fields. ``as_vyre_error`` is the one place where foreign exceptions are mapped
into the family.
"""

from __future__ import annotations

import concurrent.futures
import difflib
import errno
import traceback
from collections.abc import Iterable
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
        """Plain-data form for crossing a process boundary: details become plain types
        (numpy scalars as Python numbers, anything else unknown as its repr), so the
        error always encodes."""
        return {"type": type(self).__name__, "code": self.code, "cause": str(self.cause),
                "fix": str(self.fix), "details": plain_data(self.details)}

    @staticmethod
    def from_dict(data: Any) -> VyreError:
        """Rebuild the error of :meth:`to_dict`, as its own class when the code is known.
        Total: whatever arrives (a peer may be buggy or hostile) gives a VyreError."""
        if not isinstance(data, dict):
            return ProtocolError(f"an error arrived as {type(data).__name__}, not a map: "
                                 f"{_short_repr(data)}")
        try:
            cls = _CATALOG.get(int(data.get("code", 0)), VyreError)
        except (TypeError, ValueError, OverflowError):
            cls = VyreError
        cause = data.get("cause", "")
        fix = data.get("fix")
        raw = data.get("details")
        details: dict[str, Any] = {}
        if isinstance(raw, dict):
            for key, value in raw.items():
                if isinstance(key, str) and key.isidentifier() and key not in ("cause", "fix"):
                    details[key] = value
                else:
                    details.setdefault("unreadable_details", []).append(
                        [_short_repr(key), _short_repr(value)])
        elif raw is not None:
            details["unreadable_details"] = _short_repr(raw)
        try:
            return cls(cause if isinstance(cause, str) else _short_repr(cause),
                       fix if isinstance(fix, str) else None, **details)
        except Exception as exc:  # a class whose details are malformed: keep the text
            return VyreError(f"{cause!s:.2000} (its details could not be read: {exc})")


def _rebuild(data: dict[str, Any]) -> VyreError:
    return VyreError.from_dict(data)


def _short_repr(value: Any, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def plain_data(value: Any, depth: int = 0) -> Any:
    """``value`` as msgpack-friendly data: numpy scalars as Python numbers, tuples and sets
    as lists, map keys as strings, anything else unknown as its repr."""
    if isinstance(value, bool | int | float | str | bytes | type(None)):
        return value if not isinstance(value, int) or -2**63 <= value < 2**64 else str(value)
    if depth > 20:
        return _short_repr(value)
    if isinstance(value, dict):
        return {str(k): plain_data(v, depth + 1) for k, v in value.items()}
    if isinstance(value, set | frozenset):
        try:
            ordered = sorted(value)
        except TypeError:  # mixed types: any stable order will do
            ordered = sorted(value, key=repr)
        return [plain_data(v, depth + 1) for v in ordered]
    if isinstance(value, list | tuple):
        return [plain_data(v, depth + 1) for v in value]
    if hasattr(value, "dtype") and hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        return plain_data(value.item(), depth + 1)  # a numpy scalar
    return _short_repr(value, 2000)


# -- Groups: what a caller can do about an error ----------------------------------------

class CallerError(VyreError):
    """The caller's own mistake (program, inputs, config, stale handle): retrying cannot help."""


class BackendFaultError(VyreError):
    """A backend or its worker failed while serving a request: retrying may help."""


class UnavailableError(VyreError):
    """Nothing can run the request now (failed pool, no capable backend, no OS resources)."""


# -- Programs and inputs --------------------------------------------------------------

class InvalidProgramError(CallerError):
    """Program bytes or a program object are malformed (bad wire form, bad node)."""

    code = 1001
    default_fix = ("Build the program with vyre_core.ir and pass the bytes of "
                   "Program.to_wire() unchanged.")


class ValidationError(CallerError):
    """A program failed validation; ``findings`` holds every V### finding."""

    code = 1002
    default_fix = "Resolve each finding listed above; each carries its own Fix."

    def __init__(self, cause: str, fix: str | None = None, **details: Any) -> None:
        details.setdefault("findings", [])
        super().__init__(cause, fix, **details)

    @property
    def findings(self) -> list[dict[str, str]]:
        return self.details["findings"]


class InvalidSequenceError(CallerError):
    """A sequence is malformed (bindings, sizes, loops, read before write), or its run is."""

    code = 1003
    default_fix = "Build sequences with vyre_core.SequenceBuilder; see docs/sequences.md."


class KernelSyntaxError(CallerError):
    """A @vyre.kernel body uses Python the IR cannot express; names file, line and column."""

    code = 1004
    default_fix = "Write the kernel with the statements and types docs/kernels.md lists."


class InvalidInputError(CallerError):
    """Dispatch inputs do not match the program's input ABI."""

    code = 1101
    default_fix = "Pass one numpy array (or bytes) per input buffer, in declaration order."


class InvalidConfigError(CallerError):
    """A DispatchConfig field has a value that cannot mean anything."""

    code = 1103
    default_fix = "Construct DispatchConfig with the documented ranges (see docs/operations.md)."


# -- Backends and devices ---------------------------------------------------------------

class UnsupportedFeatureError(UnavailableError):
    """The backend cannot do what was asked; nothing was run."""

    code = 1102
    default_fix = "Route the program to a backend that reports this capability."


class LaunchLimitError(CallerError):
    """The launch exceeds a backend's limit (workgroup, grid, buffer size) or a u32 global id."""

    code = 1104
    default_fix = "Shrink the launch below the named limit, or route to a larger backend."


class DeviceOutOfMemoryError(BackendFaultError):
    """The device could not allocate the memory the dispatch needs."""

    code = 1201
    default_fix = "Use smaller buffers, free resident buffers, or route to a larger device."


class DeviceLostError(BackendFaultError):
    """The device was lost; ``details['generation']`` is the worker generation it was in."""

    code = 1202
    default_fix = "Dispatch again: the worker recovers or restarts with a new device."


class KernelCompileError(BackendFaultError):
    """The backend could not compile the program to native code."""

    code = 1203
    default_fix = "Report the program's wire bytes with this message to the backend's authors."


class DispatchError(BackendFaultError):
    """The backend failed while running a dispatch, or returned malformed outputs."""

    code = 1204
    default_fix = ("Run it with `vyre run --shadow` against the reference and report the "
                   "divergence to the backend's authors.")


# -- Process supervision ----------------------------------------------------------------

class DispatchTimeoutError(BackendFaultError):
    """The call passed its deadline (queued, starting or running; a running worker restarts)."""

    code = 1301
    default_fix = "Raise DispatchConfig.timeout, or split the work into smaller dispatches."


class WorkerCrashedError(BackendFaultError):
    """The worker process died while serving this request, on every allowed retry."""

    code = 1302
    default_fix = "The request crashes its backend; run it on the reference backend to check it."


class PoolFailedError(UnavailableError):
    """A backend's pool restarted too often and was marked failed."""

    code = 1303
    default_fix = ("Check `vyre doctor`; routing skips the backend until its cool-down "
                   "(RestartPolicy.cooldown) ends, then tries it again.")


class PipelineInvalidatedError(CallerError):
    """A compiled pipeline or resident buffer is from an earlier worker generation."""

    code = 1304
    default_fix = "Compile the program again (Driver.compile) and use the new handle."


class ProtocolError(BackendFaultError):
    """A message between the parent and a worker was malformed."""

    code = 1305
    default_fix = "Use matching versions of vyre in the parent and the workers."


class SystemResourceError(UnavailableError):
    """The operating system refused a resource vyre needs (disk, memory, descriptors, processes)."""

    code = 1306
    default_fix = ("Free the named resource (disk space, open files: `ulimit -n`, processes) "
                   "and call again; vyre keeps retrying on its own.")


class MessageLostError(BackendFaultError):
    """A request or its reply was lost between the parent and a worker."""

    code = 1307
    default_fix = ("Call again: each worker that lost it was replaced. If it recurs, read "
                   "the workers' output in `Driver.status()` and `vyre doctor`.")


class DispatchCancelledError(CallerError, concurrent.futures.CancelledError):
    """The call was cancelled: cancel(), or an exception (Ctrl-C) in the waiting thread."""

    code = 1308
    default_fix = ("Nothing to fix if the cancel was meant: call again for a result. What "
                   "a cancelled call wrote to resident buffers is unspecified.")


# -- Routing and plugins -----------------------------------------------------------------

class NoCapableBackendError(UnavailableError):
    """No registered backend can run the program; ``details['rejections']`` says why each."""

    code = 1401
    default_fix = ("Install a backend with the missing capabilities, or change the program "
                   "to avoid them (see the reasons above).")


class PluginLoadError(UnavailableError):
    """A backend plugin could not be loaded (import error, bad hooks, contract mismatch)."""

    code = 1402
    default_fix = "Fix or uninstall the plugin; `vyre doctor` shows its traceback."


class ClusterUnavailableError(UnavailableError):
    """The cluster for the workers cannot be used (Ray missing, or nothing answers there)."""

    code = 1403
    default_fix = ("Check the cluster (`ray status`), or run locally: leave cluster unset "
                   "(VYRE_CLUSTER unset or 'local').")


_CATALOG: dict[int, type[VyreError]] = {
    cls.code: cls
    for cls in (VyreError, InvalidProgramError, ValidationError, InvalidSequenceError,
                KernelSyntaxError,
                InvalidInputError, InvalidConfigError, UnsupportedFeatureError, LaunchLimitError,
                DeviceOutOfMemoryError, DeviceLostError, KernelCompileError, DispatchError,
                DispatchTimeoutError, WorkerCrashedError, PoolFailedError,
                PipelineInvalidatedError, ProtocolError, SystemResourceError, MessageLostError,
                DispatchCancelledError,
                NoCapableBackendError, PluginLoadError, ClusterUnavailableError)
}

#: The groups a caller catches by meaning; never raised themselves.
GROUPS: tuple[type[VyreError], ...] = (CallerError, BackendFaultError, UnavailableError)


def catalog() -> dict[int, type[VyreError]]:
    """Every error class by its stable code."""
    return dict(_CATALOG)


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``known`` to a mistyped ``name``, or
    nothing when none is close: how every message names what was probably meant."""
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


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


_OS_FIXES = {
    errno.ENOSPC: "Free disk space (or inodes) where vyre keeps its run directory "
                  "(VYRE_RUNTIME_DIR, else $XDG_RUNTIME_DIR or the temp dir), then call again.",
    errno.EDQUOT: "Free space within your disk quota, then call again.",
    errno.EMFILE: "Raise the open-file limit (`ulimit -n`) or close files this process "
                  "holds, then call again.",
    errno.ENFILE: "The whole system is out of file handles: close programs, then call again.",
    errno.EAGAIN: "The system refused a new process or thread (limits on processes or "
                  "memory): end some processes or raise `ulimit -u`, then call again.",
    errno.ENOMEM: "The system is out of memory: free some, then call again.",
    errno.EACCES: "Give this user access to the path named above, or point "
                  "VYRE_RUNTIME_DIR at a directory it owns.",
    errno.EPERM: "Give this user access to the path named above, or point "
                 "VYRE_RUNTIME_DIR at a directory it owns.",
    errno.EROFS: "Point VYRE_RUNTIME_DIR at a writable directory.",
    errno.ENOTDIR: "A file stands where vyre needs a directory (the path above): remove it, "
                   "or point VYRE_RUNTIME_DIR elsewhere.",
    errno.ENOENT: "A directory on the path above is missing: create it, or point "
                  "VYRE_RUNTIME_DIR at an existing one.",
    errno.EEXIST: "Something else already uses the path above: call again (vyre picks a new "
                  "name), or remove it.",
}


def system_resource_error(exc: OSError, during: str) -> SystemResourceError:
    """An OS refusal (ENOSPC, EMFILE, EAGAIN, ...) as a SystemResourceError whose Fix names
    the resource to free: the one place OS errors enter the family."""
    name = errno.errorcode.get(exc.errno or 0, "OSError")
    return SystemResourceError(f"{during} failed: {name}: {exc.strerror or exc}",
                               _OS_FIXES.get(exc.errno or 0), errno=name)
