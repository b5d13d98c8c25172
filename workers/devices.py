"""``python -m vyre_workers.devices --backend ID --entry-point NAME [--capabilities]``:
print the backend's devices (or, with ``--capabilities``, what a worker of it probes on
its preferred device) as JSON and exit. A pool asked for ``devices="all"`` runs it to learn
how many workers to start, and routing to learn whether a backend it would not otherwise
start can run a program (``Pools.probe_apart``); the backend answers here, in a process of
its own that ends with the answer, so the parent never touches a device and no worker is
left behind."""

from __future__ import annotations

import argparse
import json
import os
import signal
from typing import Any

from vyre_core.errors import as_vyre_error
from vyre_workers.__main__ import die_with_parent
from vyre_workers.backend_host import load_backend, probed_capabilities


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the caller's Ctrl-C is the caller's
    parser = argparse.ArgumentParser(prog="python -m vyre_workers.devices")
    parser.add_argument("--backend", required=True)
    parser.add_argument("--entry-point", required=True)
    parser.add_argument("--parent-pid", type=int, required=True)
    parser.add_argument("--capabilities", action="store_true")
    args = parser.parse_args(argv)
    die_with_parent(args.parent_pid)
    asked = "probing" if args.capabilities else "listing the devices of"
    try:
        if args.capabilities:
            answer: dict[str, Any] = {"capabilities": probed_capabilities(args.backend,
                                                                          args.entry_point)}
        else:
            answer = {"devices": [d.to_dict() for d in
                                  load_backend(args.entry_point, args.backend, 0).devices()]}
    except BaseException as exc:  # said on stdout, as data: the parent reads that line
        error = as_vyre_error(exc, f"{asked} backend {args.backend!r}")
        answer = {"error": error.to_dict()}
    print("\n" + json.dumps(answer), flush=True)
    return 3 if "error" in answer else 0


if __name__ == "__main__":
    os._exit(main())  # (no exit handlers of the backend's libraries print after the answer)
