"""Atomic file writes: every output (platform files, CSVs, figures, job files) is written to a temporary file in
the target's folder and renamed over the target, so a write that fails or is killed half-way leaves the
previous file as it was -- never a truncated or empty one."""

from __future__ import annotations

import os
import secrets
import stat
from contextlib import contextmanager
from typing import IO, Any, Iterator

__all__ = ["atomic_write", "write_text"]


def _create_beside(target: str) -> tuple[int, str]:
    """A new, uniquely named file in ``target``'s folder, created with mode 0o666 so that the kernel applies
    the process umask, as a plain ``open(path, "w")`` would (never changing the umask: other threads)."""
    folder, base = os.path.split(target)
    while True:
        tmp = os.path.join(folder, f".{base}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_BINARY", 0), 0o666), tmp
        except FileExistsError:
            continue


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
    through: the file it points to is replaced. A device or a pipe (``/dev/null``, ``/dev/stdout``) is written
    in place: there is nothing to replace.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write: mode must be 'w' or 'wb', not {mode!r}")
    target = os.path.realpath(os.fspath(path))
    binary = mode == "wb"
    kwargs: dict[str, Any] = {} if binary else {"encoding": encoding, "newline": newline}
    try:
        special = not stat.S_ISREG(os.stat(target).st_mode)
    except FileNotFoundError:
        special = False
    if special:  # a device or a pipe (/dev/null, /dev/stdout): written in place, never replaced by a file
        with open(target, mode, **kwargs) as f:
            yield f
        return
    folder = os.path.dirname(target)
    fd, tmp = _create_beside(target)
    try:
        with os.fdopen(fd, mode, **kwargs) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        try:
            os.chmod(tmp, os.stat(target).st_mode & 0o7777)  # the permissions of the file it replaces
        except FileNotFoundError:
            pass  # a new file: 0o666 less the umask, from its creation
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
