"""vyre's one exception family.

Every error has a stable numeric code (append-only: a code is never reused or
renumbered), a cause, and a ``Fix:`` line telling the user what to do. Errors are
plain data so they can cross a process boundary as a dict and be raised again on
the other side as the same class.
"""

from __future__ import annotations

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

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form for crossing a process boundary."""
        return {"type": type(self).__name__, "code": self.code, "cause": self.cause,
                "fix": self.fix, "details": self.details}

    @staticmethod
    def from_dict(data: dict[str, Any]) -> VyreError:
        """Rebuild the error of :meth:`to_dict`, as its own class when it is known."""
        cls = _CATALOG.get(int(data.get("code", 0)), VyreError)
        return cls(str(data.get("cause", "")), data.get("fix"), **dict(data.get("details") or {}))


# -- Programs: bytes, structure, validation ------------------------------------------

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


# -- Dispatch inputs and capabilities ------------------------------------------------

class InvalidInputError(VyreError):
    """Dispatch inputs do not match the program's input ABI."""

    code = 1101
    default_fix = "Pass one numpy array (or bytes) per input buffer, in declaration order."


class UnsupportedFeatureError(VyreError):
    """The backend cannot do what was asked; nothing was run."""

    code = 1102
    default_fix = "Route the program to a backend that reports this capability."


_CATALOG: dict[int, type[VyreError]] = {
    cls.code: cls
    for cls in (VyreError, InvalidProgramError, ValidationError, InvalidInputError,
                UnsupportedFeatureError)
}


def catalog() -> dict[int, type[VyreError]]:
    """Every error class by its stable code."""
    return dict(_CATALOG)
