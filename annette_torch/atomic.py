"""Atomic file writes: every output (platform files, CSVs, figures, job files) is written to a temporary file in
the target's folder and renamed over the target, so a write that fails or is killed half-way leaves the
previous file as it was -- never a truncated or empty one."""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from typing import IO, Any, Iterator

__all__ = ["atomic_write", "write_text"]


def _default_mode() -> int:
    """The permissions a plain ``open(path, "w")`` would give a new file (0o666 less the umask)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _fsync_folder(folder: str) -> None:
    """Make the rename itself durable (POSIX); a no-op where folders cannot be opened (Windows)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", *, encoding: str | None = "utf-8",
                 newline: str | None = None) -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path`` for writing; when the block ends without an exception it replaces
    ``path`` (same permissions as the file it replaces), otherwise it is removed and ``path`` is untouched.

    ``mode`` is ``"w"`` (text, ``encoding``, ``newline`` as for `open`) or ``"wb"``. A symbolic link is written
    through: the file it points to is replaced.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write: mode must be 'w' or 'wb', not {mode!r}")
    target = os.path.realpath(os.fspath(path))
    folder = os.path.dirname(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".tmp", dir=folder)
    try:
        binary = mode == "wb"
        with os.fdopen(fd, mode, encoding=None if binary else encoding, newline=None if binary else newline) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        try:
            perms = os.stat(target).st_mode & 0o7777
        except FileNotFoundError:
            perms = _default_mode()
        os.chmod(tmp, perms)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_folder(folder)


def write_text(path: str | os.PathLike, text: str, encoding: str = "utf-8") -> None:
    """Write ``text`` to ``path`` atomically (`atomic_write`)."""
    with atomic_write(path, "w", encoding=encoding, newline="") as f:
        f.write(text)
