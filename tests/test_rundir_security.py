"""The run directory is private: vyre never uses a base another user could write, never
chmods anything nor follows a symlink, and an OS refusal is a SystemResourceError with a
Fix. Real files, no mocks; chown and mount need root (skipped otherwise)."""

from __future__ import annotations

import errno
import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from vyre_core.errors import SystemResourceError
from vyre_core.supervisor import rundir

UID = os.getuid()
NOBODY = 65534
needs_root = pytest.mark.skipif(os.geteuid() != 0,
                                reason="chown to another user needs root")


@pytest.fixture
def tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temp dir standing in for /tmp, with no runtime variables set."""
    monkeypatch.delenv("VYRE_RUNTIME_DIR", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def make_dir(path: Path, mode: int, uid: int = UID) -> Path:
    path.mkdir()
    os.chmod(path, mode)  # the test sets the scene; vyre itself never chmods
    if uid != UID:
        os.chown(path, uid, -1)
    return path


def owner_and_mode(path: Path) -> tuple[int, int]:
    st = os.lstat(path)
    return st.st_uid, st.st_mode


def assert_private_fallback(run: rundir.RunDir, tmp: Path, unsafe: Path, why: str,
                            caplog: pytest.LogCaptureFixture) -> None:
    assert run.path.parent == tmp and run.path.name.startswith(f"vyre-{UID}-")
    assert rundir.unsafe_reason(run.path) is None
    warning, = (r for r in caplog.records if r.name == "vyre.supervisor")
    assert warning.levelno == logging.WARNING
    assert str(unsafe) in warning.getMessage() and why in warning.getMessage()
    run.remove()
    assert not run.path.exists()


# -- a base someone else prepared is never used -----------------------------------------

@needs_root
def test_another_users_base_is_not_used_nor_changed(tmp, caplog):
    foreign = make_dir(tmp / f"vyre-{UID}", 0o755, NOBODY)
    before = owner_and_mode(foreign)
    run = rundir.RunDir()
    assert owner_and_mode(foreign) == before and list(foreign.iterdir()) == []
    assert_private_fallback(run, tmp, foreign, f"owned by uid {NOBODY}, not {UID}", caplog)


@needs_root
def test_another_users_named_base_is_refused_with_a_fix(tmp, monkeypatch):
    monkeypatch.setenv("VYRE_RUNTIME_DIR", str(tmp))
    foreign = make_dir(tmp / f"vyre-{UID}", 0o700, NOBODY)
    with pytest.raises(SystemResourceError) as info:
        rundir.RunDir()
    assert f"{foreign} is owned by uid {NOBODY}, not {UID}" in str(info.value)
    assert "Fix: Remove" in str(info.value) and "VYRE_RUNTIME_DIR" in info.value.fix
    assert owner_and_mode(foreign)[0] == NOBODY and list(foreign.iterdir()) == []


def test_symlinked_base_is_not_followed(tmp, caplog):
    mine = make_dir(tmp / "mine", 0o755)
    link = tmp / f"vyre-{UID}"
    link.symlink_to(mine)
    run = rundir.RunDir()
    assert owner_and_mode(mine)[1] & 0o777 == 0o755 and list(mine.iterdir()) == []
    assert_private_fallback(run, tmp, link, "is a symlink", caplog)


def test_our_own_open_base_is_not_chmodded(tmp, caplog):
    base = make_dir(tmp / f"vyre-{UID}", 0o755)
    run = rundir.RunDir()
    assert owner_and_mode(base)[1] & 0o777 == 0o755 and list(base.iterdir()) == []
    assert_private_fallback(run, tmp, base, "has mode 0755, which lets other users in", caplog)


@pytest.mark.parametrize("scene, why", [("symlink", "is a symlink"),
                                         ("file", "is not a directory"),
                                         ("open", "has mode 0755")])
def test_unsafe_named_base_is_refused_with_a_fix(tmp, monkeypatch, scene, why):
    monkeypatch.setenv("VYRE_RUNTIME_DIR", str(tmp))
    base = tmp / f"vyre-{UID}"
    if scene == "symlink":
        base.symlink_to(make_dir(tmp / "mine", 0o700))
    elif scene == "file":
        base.write_text("")
    else:
        make_dir(base, 0o755)
    before = owner_and_mode(base)
    with pytest.raises(SystemResourceError, match=f"{base} {why}") as info:
        rundir.RunDir()
    assert "\nFix: " in str(info.value)
    assert owner_and_mode(base) == before
    assert not list(tmp.glob(f"vyre-{UID}-*"))  # nor a private directory instead


# -- which base ---------------------------------------------------------------------------

def test_xdg_runtime_dir_is_preferred_when_it_is_safe(tmp, monkeypatch):
    xdg = make_dir(tmp / "xdg", 0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(xdg))
    assert rundir.choose_base() == (xdg / "vyre", False)
    run = rundir.RunDir()
    assert run.path.parent == xdg / "vyre" and rundir.unsafe_reason(xdg / "vyre") is None
    run.remove()
    monkeypatch.setenv("VYRE_RUNTIME_DIR", str(tmp / "named"))  # named beats XDG
    assert rundir.choose_base() == (tmp / "named" / f"vyre-{UID}", True)


@pytest.mark.parametrize("scene", ["open", "symlink", "missing", "relative", "foreign"])
def test_unsafe_xdg_runtime_dir_is_ignored(tmp, monkeypatch, scene):
    xdg = tmp / "xdg"
    if scene == "open":
        make_dir(xdg, 0o755)
    elif scene == "symlink":
        xdg.symlink_to(make_dir(tmp / "mine", 0o700))
    elif scene == "relative":
        xdg = Path("xdg")
    elif scene == "foreign":
        if os.geteuid() != 0:
            pytest.skip("chown to another user needs root")
        make_dir(xdg, 0o700, NOBODY)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(xdg))
    assert rundir.choose_base() == (tmp / f"vyre-{UID}", False)


# -- OS refusals are SystemResourceErrors with a Fix -------------------------------------

def test_a_named_runtime_dir_that_is_a_file_is_a_system_resource_error(tmp, monkeypatch):
    (tmp / "file").write_text("")
    monkeypatch.setenv("VYRE_RUNTIME_DIR", str(tmp / "file"))
    with pytest.raises(SystemResourceError, match="ENOTDIR") as info:
        rundir.RunDir()
    assert "\nFix: " in str(info.value)


@pytest.fixture
def full_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A mounted 4-inode tmpfs; the test fills it (all but what it pre-creates)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    point = tmp_path / "tiny"
    point.mkdir()
    try:
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,nr_inodes=4", "tmpfs",
                               str(point)], capture_output=True, text=True, timeout=10)
    except FileNotFoundError:
        pytest.skip("no mount command")
    if proc.returncode:
        pytest.skip(f"mount is not permitted here, even as root: {proc.stderr.strip()}")
    try:
        yield point
    finally:
        subprocess.run(["umount", str(point)], check=True, timeout=10)


def fill_inodes(root: Path) -> None:
    for i in range(100):
        try:
            (root / f"filler{i}").touch()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
            return
    raise AssertionError("the tmpfs never ran out of inodes")


@pytest.mark.parametrize("where", ["base", "run dir"])
def test_out_of_inodes_is_a_system_resource_error(full_tmpfs, monkeypatch, where):
    monkeypatch.setenv("VYRE_RUNTIME_DIR", str(full_tmpfs))
    monkeypatch.setenv("VYRE_LOAD_PLUGINS", "")
    if where == "run dir":
        (full_tmpfs / f"vyre-{UID}").mkdir(0o700)
    fill_inodes(full_tmpfs)
    with pytest.raises(SystemResourceError, match="ENOSPC") as info:
        rundir.RunDir()
    assert "\nFix: Free disk space (or inodes)" in str(info.value)

    import vyre_core
    with pytest.raises(SystemResourceError, match="ENOSPC"):
        vyre_core.Driver()


# -- stale cleanup touches only this user's own run directories -------------------------

def own_base(tmp: Path) -> Path:
    return make_dir(tmp / f"vyre-{UID}", 0o700)


def test_stale_cleanup_ignores_symlinks_and_odd_names(tmp):
    base = own_base(tmp)
    pid = os.getpid()  # with another start stamp: a dead driver whose pid was reused
    stale = make_dir(base / f"{pid}-zz-beef", 0o700)
    live = make_dir(base / f"{pid}-{rundir._started(pid)}-aaaa", 0o700)
    victim = make_dir(tmp / "victim", 0o700)
    (victim / "keep").write_text("")
    (base / f"{pid}-zz-cafe").symlink_to(victim)
    odd = [make_dir(base / str(pid), 0o700), make_dir(base / "notes", 0o700)]
    (base / f"{pid}-zz-f00d").write_text("")

    assert rundir.stale_dirs(base) == [stale]
    assert rundir.remove_stale(base) == [stale]
    assert not stale.exists() and live.is_dir() and all(p.is_dir() for p in odd)
    assert (base / f"{pid}-zz-cafe").is_symlink() and (victim / "keep").exists()
    assert (base / f"{pid}-zz-f00d").is_file()


@needs_root
def test_stale_cleanup_ignores_other_users_dirs(tmp):
    base = own_base(tmp)
    foreign = make_dir(base / f"{os.getpid()}-zz-dead", 0o700, NOBODY)
    assert rundir.stale_dirs(base) == []
    assert rundir.remove_stale(base) == [] and foreign.is_dir()


def test_a_locked_run_dir_is_live_whatever_its_pid_says(tmp):
    """Liveness is the driver's lock first (it survives PID namespaces); a directory still
    being made (dot name) is left to its maker for a minute, then cleaned."""
    import fcntl

    base = own_base(tmp)
    locked = make_dir(base / f"{os.getpid()}-zz-beef", 0o700)  # a pid test says: dead
    fd = os.open(locked, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    young = make_dir(base / f".{os.getpid()}-zz-cafe", 0o700)
    old = make_dir(base / f".{os.getpid()}-zz-f00d", 0o700)
    os.utime(old, (0, 0))
    try:
        assert rundir.remove_stale(base) == [old]
        assert locked.is_dir() and young.is_dir()
        assert [p for p, _ in rundir.live_dirs(base)] == [locked]  # (not the unfinished)
    finally:
        os.close(fd)
    assert sorted(rundir.remove_stale(base)) == [locked]


# -- a run directory removed under a live driver (issue 38 row 2) --------------------------


def test_a_removed_run_dir_is_made_again_locked_under_its_name(tmp):
    run = rundir.RunDir()
    try:
        assert run.restore() is False  # there: nothing to do
        base = run.path.parent
        shutil.rmtree(base)  # a temp cleaner takes the base too
        assert run.restore() is True
        assert run.path.is_dir() and owner_and_mode(run.path)[1] & 0o777 == 0o700
        assert rundir.unsafe_reason(base) is None
        assert rundir._locked(run.path)  # locked again: no cleaner deems it stale
        assert run.path not in rundir.stale_dirs(base)
        assert [p for p, _ in rundir.live_dirs(base)] == [run.path]
    finally:
        run.remove()
    assert not run.path.exists()


def test_a_run_dir_that_cannot_be_made_again_is_a_system_resource_error(tmp):
    run = rundir.RunDir()
    try:
        base = run.path.parent
        shutil.rmtree(base)
        base.write_text("a file where the base was")
        with pytest.raises(SystemResourceError) as info:
            run.restore()
        assert str(run.path) in info.value.cause and info.value.fix
    finally:
        run.remove()
