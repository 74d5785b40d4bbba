"""One measurement at a time per machine: workers whose hardware module times this machine's own CPU hold a
file lock around each measurement, so two sweeps on one machine never disturb each other's timings (the
operating system releases the lock of a killed worker). Whole-network measurements
(`validate.measure_latency`) hold it too, and ``annette calibrate`` while its parallel fit takes every core.
Workers take turns: one that finishes a measurement while another waits lets the other go first. Boards
measured through their own host (a hardware module that says it does not use this CPU) measure in parallel.
"""

from __future__ import annotations

import os
import tempfile
import time
from contextlib import contextmanager
from typing import Callable, Iterator

from ..errors import AnnetteError

__all__ = ["LOCK_NAME", "lock_path", "MachineLock"]

#: the lock file, in the system's temporary folder (or ``ANNETTE_LOCK_DIR``)
LOCK_NAME = "annette-measure.lock"

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: filelock, without the turn-taking
    fcntl = None  # type: ignore[assignment]


def lock_path() -> str:
    """Where this machine's measuring lock lives."""
    return os.path.join(os.environ.get("ANNETTE_LOCK_DIR") or tempfile.gettempdir(), LOCK_NAME)


def _open(path: str) -> int:
    """The lock file, opened read-only (flock needs no write access: any user may share it); created, readable
    and lockable by all, when it does not exist. A file another user created in a sticky folder such as
    /tmp is opened without ``O_CREAT``, which protected_regular would refuse."""
    try:
        return os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        pass
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except FileExistsError:  # another worker created it just now
        return os.open(path, os.O_RDONLY)
    try:
        os.fchmod(fd, 0o666)
    except OSError:
        pass
    return fd


def _open_lock(path: str) -> int:
    """`_open`, with a failure as one `AnnetteError` line naming the folder and ``ANNETTE_LOCK_DIR``."""
    try:
        return _open(path)
    except OSError as e:
        raise AnnetteError(f"cannot open this machine's measuring lock {path} ({e.strerror}); set ANNETTE_LOCK_DIR "
                           "to a folder every measuring user can write") from None


class MachineLock:
    """This machine's measuring lock; ``exclusive=False`` makes it a no-op (measurements elsewhere).

    ``hold(stop)`` is a context manager that waits for the lock, checking ``stop()`` every ``poll_s``
    seconds; it yields False without the lock when ``stop()`` says so. A waiting worker holds a shared lock
    on a second file (``<lock>.queue``), so the worker that releases the lock can see that someone waits and
    give them the next turn.
    """

    def __init__(self, exclusive: bool = True, poll_s: float = 1.0) -> None:
        self.exclusive, self.poll_s = exclusive, poll_s
        self._fds: tuple[int, int] | None = None
        self._filelock = None
        if exclusive and fcntl is not None:
            path = lock_path()
            main = _open_lock(path)
            try:
                self._fds = (main, _open_lock(path + ".queue"))
            except AnnetteError:
                os.close(main)
                raise
        elif exclusive:  # pragma: no cover
            from filelock import FileLock
            self._filelock = FileLock(lock_path(), mode=0o666)

    @contextmanager
    def hold(self, stop: Callable[[], bool] | None = None) -> Iterator[bool]:
        if not self.exclusive:
            yield True
            return
        if not self._acquire(stop):
            yield False
            return
        try:
            yield True
        finally:
            self._release()

    def _acquire(self, stop: Callable[[], bool] | None) -> bool:
        if self._fds is None:  # pragma: no cover - filelock fallback
            from filelock import Timeout
            while True:
                try:
                    self._filelock.acquire(timeout=self.poll_s)  # type: ignore[union-attr]
                    return True
                except Timeout:
                    if stop is not None and stop():
                        return False
        main, queue = self._fds
        fcntl.flock(queue, fcntl.LOCK_SH)  # "waiting": seen by the holder when it releases
        try:
            next_check = time.monotonic() + self.poll_s
            while True:
                try:
                    fcntl.flock(main, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return True
                except BlockingIOError:
                    pass
                if time.monotonic() >= next_check:
                    if stop is not None and stop():
                        return False
                    next_check = time.monotonic() + self.poll_s
                time.sleep(0.002)
        finally:
            fcntl.flock(queue, fcntl.LOCK_UN)

    def _release(self) -> None:
        if self._fds is None:  # pragma: no cover
            self._filelock.release()  # type: ignore[union-attr]
            return
        main, queue = self._fds
        fcntl.flock(main, fcntl.LOCK_UN)
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:  # someone waits: let them take the lock before this worker again
            try:
                fcntl.flock(queue, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                time.sleep(0.001)
                try:
                    fcntl.flock(main, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    return  # the waiting worker has it now
                fcntl.flock(main, fcntl.LOCK_UN)
                continue
            fcntl.flock(queue, fcntl.LOCK_UN)
            return

    def contended(self) -> bool:
        """Whether another worker waits for this machine's lock now."""
        if self._fds is None:
            return False
        queue = self._fds[1]
        try:
            fcntl.flock(queue, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(queue, fcntl.LOCK_UN)
        return False

    def close(self) -> None:
        if self._fds is not None:
            for fd in self._fds:
                os.close(fd)
            self._fds = None
