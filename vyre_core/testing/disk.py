"""A small real filesystem to fill: a tmpfs of a few hundred KiB mounted for one test, so
that "the disk is full" is the kernel's own ENOSPC and not a patched function. Mounting
needs root (or CAP_SYS_ADMIN); elsewhere ``SmallDisk`` says why it cannot, and the pytest
fixture skips with that reason."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType


class DiskUnavailable(RuntimeError):
    """This process may not mount a filesystem here (why is the message)."""


class SmallDisk:
    """A tmpfs of ``size_kib`` KiB and ``inodes`` inodes, mode 0700, at a short path of
    its own (ipc socket paths must stay under 108 bytes); ``fill()`` uses up its space and
    inodes, ``free()`` gives them back; leaving the ``with`` unmounts and removes it."""

    def __init__(self, size_kib: int = 256, inodes: int = 64) -> None:
        self.size_kib = size_kib
        self.inodes = inodes
        self.path = Path()
        self._fillers: list[Path] = []

    def __enter__(self) -> SmallDisk:
        if os.geteuid() != 0:
            raise DiskUnavailable("mounting a small filesystem to fill needs root")
        if shutil.which("mount") is None:
            raise DiskUnavailable("there is no mount command")
        self.path = Path(tempfile.mkdtemp(prefix="vyre-disk-"))
        try:
            proc = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={self.size_kib}k,nr_inodes="
                 f"{self.inodes},mode=0700", "tmpfs", str(self.path)], capture_output=True,
                text=True, timeout=30)
        except BaseException:
            self.path.rmdir()
            raise
        if proc.returncode:
            self.path.rmdir()
            raise DiskUnavailable(f"mount refused: {proc.stderr.strip() or proc.returncode}")
        return self

    def fill(self) -> None:
        """Use up every byte and inode left: the next file or write gets ENOSPC."""
        block = b"\0" * 4096
        while True:
            path = self.path / f".filler-{len(self._fillers)}"
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except OSError as exc:
                if exc.errno == errno.ENOSPC:
                    return  # (no inode left: no byte can be taken either)
                raise
            self._fillers.append(path)
            try:
                while True:
                    os.write(fd, block)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
            finally:
                os.close(fd)

    def free(self) -> None:
        """Remove what ``fill`` wrote."""
        for path in self._fillers:
            path.unlink(missing_ok=True)
        self._fillers.clear()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._fillers.clear()
        proc = subprocess.run(["umount", "--lazy", str(self.path)], capture_output=True,
                              text=True, timeout=30)
        if proc.returncode:
            raise RuntimeError(f"could not unmount the small disk at {self.path}: "
                               f"{proc.stderr.strip()}; unmount it by hand (umount -l)")
        self.path.rmdir()
