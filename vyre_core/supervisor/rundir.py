"""The private run directory of one driver, ``<base>/<pid>-<start>-<token>`` (mode 0700),
holding its ipc sockets (worker output goes to the supervisor, never to disk). A new
driver removes the run directories of drivers whose process is gone (killed with
SIGKILL, say), so stale sockets never pile up.

A live driver holds an ``flock`` on its directory for as long as it lives; the kernel
drops it when the process dies, however it dies. That is what "live" means here, in
every PID namespace: a pid and start time only identify a process in the namespace
that reads them (a driver in a container looks dead from the host). The pid test is
kept beside the lock for directories made before the lock existed.

Whoever can write in the base can redirect a driver's workers to their own sockets, so a
base is used only if it is a real directory owned by this user that nobody else may
enter. This module never chmods or chowns anything and never follows a symlink: an unsafe
base is left as it is, and refused (when the user named it) or replaced by a private
temp directory."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import re
import secrets
import shutil
import stat
import tempfile
import threading
import time
import weakref
from collections.abc import Mapping
from pathlib import Path

import psutil

from vyre_core.errors import InvalidConfigError, SystemResourceError, system_resource_error

ENV = "VYRE_RUNTIME_DIR"
_MAX_SOCKET_PATH = 107  # sizeof(sockaddr_un.sun_path) - 1 on Linux
# <pid>-<start>-<token>; with a leading dot while it is being made (locked, then renamed)
_RUN_DIR_NAME = re.compile(r"(\.?)(\d+)-([0-9A-Za-z]+)-([0-9a-f]+)")
_UNFINISHED_GRACE = 60.0  # seconds an unlocked, unfinished directory is left to its maker
_logger = logging.getLogger("vyre.supervisor")


def _unsafe(st: os.stat_result) -> str | None:
    if stat.S_ISLNK(st.st_mode):
        return "is a symlink"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    if st.st_uid != os.getuid():
        return f"is owned by uid {st.st_uid}, not {os.getuid()}"
    if st.st_mode & 0o077:
        return f"has mode {stat.S_IMODE(st.st_mode):04o}, which lets other users in"
    return None


def unsafe_reason(path: Path) -> str | None:
    """Why ``path`` (as it is, symlinks not followed) may not hold run directories, or
    None when it may: it must be a directory of this user that nobody else may enter."""
    return _unsafe(os.lstat(path))


def _xdg_base(env: Mapping[str, str]) -> Path | None:
    """``$XDG_RUNTIME_DIR/vyre`` when that directory is this user's own with mode 0700
    (per-user, cleared at logout: better than the shared temp dir), else None."""
    xdg = env.get("XDG_RUNTIME_DIR")
    if not xdg or not os.path.isabs(xdg):
        return None
    try:
        st = os.lstat(xdg)
    except OSError:
        return None
    if _unsafe(st) is None and stat.S_IMODE(st.st_mode) == 0o700:
        return Path(xdg) / "vyre"
    return None


def choose_base(env: Mapping[str, str] = os.environ) -> tuple[Path, bool]:
    """The base to use and whether the user named it with VYRE_RUNTIME_DIR (an unsafe
    named base is refused; any other is replaced by a private temp directory)."""
    if root := env.get(ENV):
        return Path(root) / f"vyre-{os.getuid()}", True
    xdg = _xdg_base(env)
    return (xdg, False) if xdg else (Path(tempfile.gettempdir()) / f"vyre-{os.getuid()}", False)


def _open_base() -> tuple[Path, str | None, bool]:
    """The chosen base, created (mode 0700) unless it exists, and checked as it is:
    (path, why it is unsafe or None, whether the user named it)."""
    path, explicit = choose_base()
    try:
        if explicit:  # the user's own folder, created as before (a file there: ENOTDIR below)
            with contextlib.suppress(FileExistsError):
                os.makedirs(path.parent, 0o700)
        with contextlib.suppress(FileExistsError):  # checked below, whoever made it
            os.mkdir(path, 0o700)
        return path, unsafe_reason(path), explicit
    except OSError as exc:
        raise system_resource_error(exc, f"creating the run directory base {path}") from exc


def _unsafe_base_error(path: Path, reason: str) -> SystemResourceError:
    return SystemResourceError(
        f"the run directory base {path} {reason}; whoever can write there could redirect "
        "vyre's workers to their own sockets, so it is not used",
        f"Remove {path} (vyre creates it again with mode 0700; it never changes an existing "
        f"directory's owner or mode), or point {ENV} at a directory only you can write.",
        path=str(path), reason=reason)


def base_dir() -> Path:
    """This user's base for run directories, created if missing (what ``vyre doctor``
    inspects). Raises SystemResourceError when it cannot be created or is unsafe."""
    path, reason, _ = _open_base()
    if reason:
        raise _unsafe_base_error(path, reason)
    return path


def _started(pid: int) -> str | None:
    """A process's start time as a short stamp (None when it does not exist)."""
    try:
        return _base36(int(psutil.Process(pid).create_time() * 100))
    except psutil.Error:
        return None


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while n:
        n, r = divmod(n, 36)
        out = digits[r] + out
    return out or "0"


def _own_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return (entry.is_dir(follow_symlinks=False)
                and entry.stat(follow_symlinks=False).st_uid == os.getuid())
    except OSError:  # gone meanwhile (another driver cleaning up)
        return False


def _locked(path: Path) -> bool:
    """Whether a live driver holds the lock of the run directory ``path`` (False when it
    is gone or cannot be opened: nobody can be using it through this path)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:  # a filesystem without flock: the pid test alone decides
        return False
    finally:
        os.close(fd)  # (releases the lock this test took, if it took one)
    return False


def _alive(path: Path, pid: int, started: str, unfinished: bool) -> bool:
    """A run directory is live while its driver holds its lock, or (made before the lock
    existed, or right now, before its maker took the lock) while the process of that pid
    and start time runs here; an unfinished one is left to its maker for a while."""
    if _locked(path) or _started(pid) == started:
        return True
    if unfinished:
        with contextlib.suppress(OSError):
            return time.time() - os.lstat(path).st_mtime < _UNFINISHED_GRACE
    return False


def _run_dirs(base: Path) -> list[tuple[Path, int, bool]]:
    """(path, driver pid, whether that driver still runs) of each run directory under
    ``base``, alive meaning the same process, not a reuse of its pid. Only this user's
    real directories named ``<pid>-<start>-<token>`` count: symlinks and anything else
    are never followed nor touched."""
    found = []
    with os.scandir(base) as entries:
        for entry in entries:
            name = _RUN_DIR_NAME.fullmatch(entry.name)
            if name and _own_dir(entry):
                path, pid = Path(entry.path), int(name[2])
                found.append((path, pid, _alive(path, pid, name[3], bool(name[1]))))
    return found


def stale_dirs(base: Path) -> list[Path]:
    """Run directories under ``base`` whose driver process is gone."""
    return [path for path, _, alive in _run_dirs(base) if not alive]


def live_dirs(base: Path) -> list[tuple[Path, int]]:
    """(run directory, driver pid) of each driver under ``base`` that still runs (the
    pid as its own PID namespace numbers it)."""
    return [(path, pid) for path, pid, alive in _run_dirs(base)
            if alive and not path.name.startswith(".")]


def remove_stale(base: Path) -> list[Path]:
    """Remove the stale run directories under ``base`` (what every new driver does, and
    ``vyre doctor --clean``); returns those removed."""
    stale = stale_dirs(base)
    for path in stale:
        shutil.rmtree(path, ignore_errors=True)
    return stale


def _private_run_dir() -> Path:
    """A fresh, unique 0700 directory in the temp dir, used directly as the run directory
    when the shared base is unsafe."""
    try:
        return Path(tempfile.mkdtemp(prefix=f"vyre-{os.getuid()}-"))
    except OSError as exc:
        raise system_resource_error(
            exc, f"creating a private run directory in {tempfile.gettempdir()}") from exc


class RunDir:
    """One driver's run directory, created on construction. Every OS failure raises
    SystemResourceError (with a Fix), never a bare OSError."""

    def __init__(self) -> None:
        self._lock: int | None = None
        self._owner: int | None = None  # (None: a private temp directory, never locked)
        self._remaking = threading.Lock()  # (several pools' threads may find it gone)
        base, reason, explicit = _open_base()
        if reason and explicit:
            raise _unsafe_base_error(base, reason)
        if reason:
            self.path = _private_run_dir()
            _logger.warning("run directory base %s %s, so it is not used (vyre never changes "
                        "it); using the private %s instead. Remove it, or set %s.",
                        base, reason, self.path, ENV)
            return
        pid = os.getpid()
        try:
            remove_stale(base)
            for attempt in range(8):  # a short name keeps socket paths short; retry a clash
                name = f"{pid}-{_started(pid)}-{secrets.token_hex(2)}"
                try:
                    self._lock = _made_locked(base, name)
                    break
                except FileExistsError:
                    if attempt == 7:
                        raise
        except OSError as exc:
            raise system_resource_error(exc, f"creating a run directory in {base}") from exc
        self.path = base / name
        self._owner = pid
        _HELD.add(self)

    def endpoint(self, name: str, suffix: str = ".sock") -> str:
        path = f"{self.path / name}{suffix}"
        if len(path.encode()) > _MAX_SOCKET_PATH:
            raise InvalidConfigError(
                f"socket path {path!r} is longer than the {_MAX_SOCKET_PATH} bytes a unix "
                "socket allows", "Set VYRE_RUNTIME_DIR to a shorter directory, e.g. /tmp.")
        return f"ipc://{path}"

    def restore(self) -> bool:
        """Make the directory again, under the same name and locked as when first made,
        if it is gone (a temp cleaner, ``rm -rf``): every endpoint named in it stays the
        same, so sockets bound there can be bound again. True when it was remade. Raises
        SystemResourceError (with a Fix) when it cannot be, or when its base became unsafe."""
        with self._remaking:
            if os.path.lexists(self.path):
                return False
            base = self.path.parent
            try:
                os.makedirs(base, 0o700, exist_ok=True)
                if self._owner is None:  # the private temp directory: no lock, as made
                    os.mkdir(self.path, 0o700)
                else:
                    if (reason := unsafe_reason(base)) is not None:
                        raise _unsafe_base_error(base, reason)
                    lock = _made_locked(base, self.path.name)
                    self._let_go()  # (the old lock held a directory that is gone)
                    self._lock = lock
            except OSError as exc:
                raise system_resource_error(
                    exc, f"making the lost run directory {self.path} again") from exc
        _logger.warning("run directory %s was removed while the driver ran (a temp "
                        "cleaner?); it is made again", self.path)
        return True

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        self._let_go()

    def _let_go(self) -> None:
        """Close this process's descriptor of the lock (a forked child closes the one it
        inherited: the lock itself stays with every process that still holds it)."""
        fd, self._lock = self._lock, None
        if fd is not None:
            os.close(fd)


def _made_locked(base: Path, name: str) -> int:
    """Make the run directory ``base/name`` and return a descriptor holding its lock. It
    is made as ``.name``, locked, then renamed: no cleaner ever sees it unlocked under
    its final name."""
    making = base / f".{name}"
    os.mkdir(making, 0o700)  # (FileExistsError: another maker's; never removed here)
    try:
        fd = os.open(making, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        os.rmdir(making)
        raise
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:  # a filesystem without flock: the pid test alone decides
        _logger.debug("run directory %s: no lock (%s)", making, exc)
    try:
        if (base / name).exists():  # (rename would replace an empty directory)
            raise FileExistsError(errno.EEXIST, "exists", str(base / name))
        os.rename(making, base / name)
    except OSError as exc:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.rmdir(making)
        if exc.errno == errno.ENOTEMPTY:
            raise FileExistsError(errno.EEXIST, "exists", str(base / name)) from exc
        raise
    return fd


_HELD: weakref.WeakSet[RunDir] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for run_dir in list(_HELD):
        run_dir._let_go()


os.register_at_fork(after_in_child=_after_fork_in_child)
