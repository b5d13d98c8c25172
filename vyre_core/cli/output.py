"""How the command talks to people and to scripts: rich tables and progress on a
terminal, plain JSON on stdout with ``--json``, errors as one line plus their Fix."""

from __future__ import annotations

import errno
import json
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Column, Table
from rich.text import Text

from vyre_core.errors import VyreError


class _Console(Console):
    def on_broken_pipe(self) -> None:
        """rich's own answer is ``SystemExit(1)``; the error goes on to ``cli.app.main``,
        which answers a closed stdout the same way for every command."""
        self.quiet = True
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))


#: Human output; ``highlight=False`` so numbers in messages keep the colour they are given,
#: ``markup=False`` so text from plugins, devices and errors is printed as it is (an
#: import error may read ``[cuda]``): styles come from ``styled`` and ``ok``.
console = _Console(highlight=False, markup=False)
#: Errors and progress go to stderr, so ``--json`` output on stdout stays parseable.
err_console = _Console(stderr=True, highlight=False, markup=False)


def print_json(data: Any) -> None:
    """``data`` as indented JSON on stdout (numpy scalars and paths become plain values)."""
    sys.stdout.write(json.dumps(data, indent=2, default=_plain) + "\n")
    sys.stdout.flush()


def _plain(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


def print_table(columns: Sequence[str | Column], rows: Sequence[Sequence[Any]],
                title: str | None = None) -> None:
    """A rich table of ``rows`` (a column by its heading, or a ``Column`` with its own
    width and overflow). A cell is printed as it is, never read as markup (a plugin's error
    may hold ``[cuda]``); style a cell with ``styled``."""
    table = Table(*columns, title=title, title_justify="left", header_style="bold")
    for row in rows:
        table.add_row(*(cell if isinstance(cell, Text) else Text(str(cell)) for cell in row))
    console.print(table)


def styled(*parts: str | tuple[str, str] | Text) -> Text:
    """A table cell or line from plain strings and ``(text, style)`` pairs: styles
    without markup, so nothing a plugin or a device says is taken for it."""
    return Text.assemble(*parts)


def print_error(exc: VyreError, as_json: bool) -> None:
    """The error's cause on one line and its Fix on the next (stderr), then the end of
    a worker's output when the error carries it; as JSON on stdout too when the caller
    asked for JSON."""
    err_console.print(styled(("error", "bold red"), f" [E{exc.code}] {_one_line(exc.cause)}"),
                      soft_wrap=True)
    err_console.print(styled(("Fix:", "bold"), f" {exc.fix}"), soft_wrap=True)
    print_output_tail(exc.details.get("stderr"), "The worker's output")
    if as_json:
        print_json({"error": exc.to_dict()})


#: How much of a worker's output (its traceback, say) a person is shown.
OUTPUT_LINES = 12


def print_output_tail(output: Any, heading: str, to: Console = err_console) -> None:
    """The last OUTPUT_LINES lines of a worker's ``output`` under ``heading``, dimmed and
    printed as they are; nothing when there is none."""
    if not isinstance(output, str) or not output.strip():
        return
    lines = output.strip().splitlines()
    to.print(styled((f"{heading}, its last {min(len(lines), OUTPUT_LINES)} lines:", "dim")))
    for line in lines[-OUTPUT_LINES:]:
        to.print(styled(("  " + line, "dim")), soft_wrap=True)


def _one_line(text: str) -> str:
    """A multi-line cause (a list under a heading) joined into one line."""
    joined = ""
    for line in (ln.strip(" -") for ln in text.splitlines() if ln.strip()):
        joined += line if not joined else (" " if joined.endswith(":") else "; ") + line
    return joined


@contextmanager
def progress(description: str, total: int, enabled: bool = True,
             live: bool = True) -> Iterator[Any]:
    """A transient progress bar on stderr; ``advance()`` it once per finished item.
    Hidden when stderr is not a terminal or ``enabled`` is false. ``live=False`` redraws
    only on ``advance`` (no refresh thread competing for the GIL: benchmarks)."""
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), console=err_console, transient=True,
                   disable=not enabled, auto_refresh=live)
    with bar:
        task = bar.add_task(description, total=total)

        class _Advance:
            def advance(self, label: str | None = None) -> None:
                bar.update(task, advance=1, refresh=not live,
                           description=description if label is None else f"{description}: {label}")

        yield _Advance()


def ok(flag: bool, yes: str = "ok", no: str = "FAIL") -> Text:
    """A coloured verdict."""
    return Text(yes, style="green") if flag else Text(no, style="bold red")
