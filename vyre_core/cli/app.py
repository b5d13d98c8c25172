"""``vyre``: argument parsing, and the one place errors become exit codes.

Exit codes: 0 ok; 1 a check failed (a divergence, a failing conformance case, a problem
found by ``doctor``); 2 the command could not do its job (bad input, unknown backend, a
vyre error), printed as one line and its ``Fix:`` — the traceback only with ``--debug``;
130 interrupted; 141 (128 + SIGPIPE, what a shell reports for a command killed by a closed
pipe) when whoever read stdout went away (``vyre top --json | head``): quietly, for every
command, here.
"""

from __future__ import annotations

import argparse
import importlib
import os
import select
import signal
import sys
from collections.abc import Sequence

from vyre_core import __version__
from vyre_core.cli.output import err_console, print_error
from vyre_core.errors import VyreError

#: Sub-command modules, in ``--help`` order; each has ``register(subparsers)``.
COMMANDS = ("backends", "run", "route", "tune", "conform", "doctor", "status", "top", "bench",
            "new_backend",
            "demo", "completion")

OK, CHECK_FAILED, ERROR = 0, 1, 2
STDOUT_CLOSED = 128 + signal.SIGPIPE


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="vyre", description="Run vyre programs on pluggable backends in supervised "
        "worker processes.")
    top.add_argument("--version", action="version", version=f"vyre {__version__}")
    top.add_argument("--debug", action="store_true",
                     help="show the full traceback of an error")
    sub = top.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(f"vyre_core.cli.{name}").register(sub)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    try:
        return _main(argv)
    except BrokenPipeError:
        if not stdout_closed():
            raise  # (a pipe of vyre's own: a bug, reported as any other)
        # The reader went away: nothing more can be said on stdout. It points at
        # /dev/null, so the interpreter's last flush of what is buffered fails no more.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return STDOUT_CLOSED


def _main(argv: Sequence[str] | None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.func(args))
    except Exception as exc:
        if isinstance(exc, BrokenPipeError) and stdout_closed():
            raise  # (main answers it, the same for every command)
        if args.debug:
            err_console.print_exception()
        if not isinstance(exc, VyreError):  # a bug: still one line and a Fix
            exc = VyreError(f"internal error: {type(exc).__name__}: {exc}",
                            "This is a bug in vyre: rerun with --debug and report the "
                            "traceback.")
        print_error(exc, getattr(args, "json", False))
        return ERROR
    except KeyboardInterrupt:
        err_console.print("interrupted")
        return 130


def stdout_closed() -> bool:
    """Whether nobody reads stdout any more: a pipe or socket whose reading end was closed
    (poll reports an error on its writing end), as opposed to a broken pipe of vyre's own."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (OSError, ValueError):  # (stdout closed or replaced by something without a fd)
        return False


if __name__ == "__main__":
    sys.exit(main())
