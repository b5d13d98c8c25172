"""How the command talks to people and to scripts: rich tables and progress on a
terminal, plain JSON on stdout with ``--json``, errors as one line plus their Fix."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from vyre_core.errors import VyreError

#: Human output; ``highlight=False`` so numbers in messages keep the colour they are given.
console = Console(highlight=False)
#: Errors and progress go to stderr, so ``--json`` output on stdout stays parseable.
err_console = Console(stderr=True, highlight=False)


def print_json(data: Any) -> None:
    """``data`` as indented JSON on stdout (numpy scalars and paths become plain values)."""
    sys.stdout.write(json.dumps(data, indent=2, default=_plain) + "\n")
    sys.stdout.flush()


def _plain(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


def print_table(columns: Sequence[str], rows: Sequence[Sequence[Any]],
                title: str | None = None) -> None:
    """A rich table of ``rows``; cells may carry rich markup (``[green]ok[/]``)."""
    table = Table(*columns, title=title, title_justify="left", header_style="bold")
    for row in rows:
        table.add_row(*(str(cell) for cell in row))
    console.print(table)


def print_error(exc: VyreError, as_json: bool) -> None:
    """The error's cause on one line and its Fix on the next (stderr); as JSON on stdout
    too when the caller asked for JSON."""
    err_console.print(f"[bold red]error[/] [E{exc.code}] {_one_line(exc.cause)}",
                      markup=True, soft_wrap=True)
    err_console.print(f"[bold]Fix:[/] {exc.fix}", soft_wrap=True)
    if as_json:
        print_json({"error": exc.to_dict()})


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


def ok(flag: bool, yes: str = "ok", no: str = "FAIL") -> str:
    """A coloured verdict cell."""
    return f"[green]{yes}[/]" if flag else f"[bold red]{no}[/]"
