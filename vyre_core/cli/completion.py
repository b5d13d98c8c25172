"""``vyre completion SHELL``: the shell completion script of the ``vyre`` command (bash,
zsh, tcsh, fish), written by shtab from the same argparse parser the command runs with,
so it can never list a sub-command or an option the command does not have."""

from __future__ import annotations

import argparse

#: Arguments whose value is a path: the script completes file (or folder) names there.
FILE_METAVARS = {"TARGET", "FILE", "FILE.npz", "FILE.vyir"}
DIR_METAVARS = {"PATH"}


def script(shell: str) -> str:
    """The completion script of ``vyre`` for ``shell``."""
    import shtab  # (here: every other command starts without it)

    from vyre_core.cli.app import parser

    top = parser()
    for sub in _subparsers(top):
        for action in sub._actions:
            metavar = action.metavar or (action.dest.upper() if not action.option_strings
                                         else None)
            if metavar in FILE_METAVARS:
                action.complete = shtab.FILE  # type: ignore[attr-defined]
            elif metavar in DIR_METAVARS:
                action.complete = shtab.DIRECTORY  # type: ignore[attr-defined]
    return shtab.complete(top, shell=shell)


def _subparsers(top: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [a for a in top._actions if isinstance(a, argparse._SubParsersAction)]
    return [p for action in found for p in action.choices.values()]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("completion", help="print the shell completion script of vyre")
    p.add_argument("shell", metavar="SHELL", choices=("bash", "zsh", "tcsh", "fish"),
                   help="bash, zsh, tcsh or fish")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print(script(args.shell), end="")
    return 0
