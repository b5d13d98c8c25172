"""The ``vyre`` command writing into a pipe, as ``vyre top --json | head`` and
``vyre top > file`` use it: a reader that goes away ends any command quietly (exit 141, no
error, no traceback), and ``vyre top`` writes plain lines as it goes, not a screen."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from waiting import PATIENCE

from vyre_core.cli import top
from vyre_core.cli.app import STDOUT_CLOSED
from vyre_core.supervisor import rundir


def vyre(*args: str, base: Path) -> subprocess.Popen:
    env = {**os.environ, rundir.ENV: str(base)}
    env.pop("FORCE_COLOR", None)
    env.pop("FORCE_TERMINAL", None)  # (stdout is a pipe: nothing may pretend otherwise)
    return subprocess.Popen([sys.executable, "-m", "vyre_core.cli", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def read_lines(proc: subprocess.Popen, count: int, deadline: float) -> list[bytes]:
    """The first ``count`` lines the command writes, each by ``deadline`` (a command that
    holds its output back fails here instead of hanging)."""
    got, buffer = [], b""
    fd = proc.stdout.fileno()
    while len(got) < count:
        left = deadline - time.monotonic()
        assert left > 0, f"only {len(got)} of {count} lines in time: {got}"
        if select.select([fd], [], [], left)[0]:
            chunk = os.read(fd, 65536)
            assert chunk, f"stdout ended after {len(got)} lines: {got}"
            buffer += chunk
            *done, buffer = buffer.split(b"\n")
            got += done
    return got[:count]


def ended_quietly(proc: subprocess.Popen, codes: tuple[int, ...] = (STDOUT_CLOSED,)) -> None:
    proc.stdout.close()
    try:
        proc.wait(timeout=PATIENCE)
    finally:
        proc.kill()
    stderr = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.returncode in codes, stderr
    assert stderr == "", stderr  # (no "error [E1000] ... BrokenPipeError", no traceback)


@pytest.mark.processes
def test_a_reader_that_goes_away_ends_vyre_top_json_quietly(tmp_path: Path) -> None:
    """Issue 37: ``vyre top --json | head -c 1500`` printed an internal error and a chained
    traceback."""
    proc = vyre("top", "--json", "--interval", "0.1", base=tmp_path)
    first, = read_lines(proc, 1, time.monotonic() + PATIENCE)
    assert first.startswith(b'{"time": ')
    ended_quietly(proc)  # (it writes a frame every 0.1 s: the next one meets the closed pipe)


@pytest.mark.processes
@pytest.mark.parametrize("args", [("top", "--interval", "0.1"), ("status", "--json"),
                                  ("completion", "bash"), ("--help",)])
def test_every_command_ends_quietly_when_stdout_is_closed_before_it_writes(
        tmp_path: Path, args: tuple[str, ...]) -> None:
    proc = vyre(*args, base=tmp_path)
    # (closed at once: the interpreter is still starting; argparse's help swallows the
    # error itself and exits 0, which is the other quiet answer)
    ended_quietly(proc, (0,) if args == ("--help",) else (STDOUT_CLOSED,))


@pytest.mark.processes
def test_vyre_top_into_a_pipe_writes_a_plain_frame_each_interval(tmp_path: Path) -> None:
    """Issue 37: ``vyre top`` into a pipe or a file printed nothing while it ran."""
    proc = vyre("top", "--interval", "0.1", base=tmp_path)
    try:
        lines = read_lines(proc, 2, time.monotonic() + PATIENCE)
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    for line in lines:  # (two frames, one line each: no driver runs under this base)
        assert line.startswith(b"vyre top ") and b"no running vyre driver" in line, line
        assert b"\x1b" not in line  # (no cursor movement, no colour)


@pytest.mark.fast
def test_a_frame_as_plain_lines_names_every_cell() -> None:
    frame = {"time": time.mktime((2026, 1, 2, 3, 4, 5, 0, 0, -1)), "drivers": [{
        "pid": 9, "run_dir": "/r/9-a", "pools": [{
            "backend": "cpu", "state": "running", "failure": None, "queued": 2,
            "restarts": {"crashed": 1},
            "workers": [{"index": 0, "pid": 11, "generation": 2, "state": "busy",
                         "in_flight": 1, "served": 7, "restarts": 1, "silent_for": 0.25,
                         "spare": False}],
            "ops": [{"op": "dispatch", "calls": 8, "per_s": 2.5, "errors": 1,
                     "p50": 0.1, "p90": 0.1, "p99": 2e-4}]}]}]}
    assert top.lines(frame, "/base") == [
        "vyre top 03:04:05: 1 driver(s)",
        "driver pid 9: cpu running, 2 queued, 1 crashed",
        "  worker cpu 0: pid 11, gen 2, state busy, running 1, served 7, restarts 1, "
        "silent 0.2 s",
        "  calls cpu dispatch: calls 8, per s 2.5, errors 1, p50 100 ms, p90 100 ms, "
        "p99 200 us"]
    assert top.lines({"time": frame["time"], "drivers": []}, "/base") == [
        "vyre top 03:04:05: no running vyre driver of this user (looked in /base); "
        "waiting for one"]
