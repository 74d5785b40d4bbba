"""A throw-away PostgreSQL server for tests: the distribution's server binaries (``initdb``, ``pg_ctl``) run on a
free local port in a temporary folder, with password authentication; as root, as the ``postgres`` user the
package creates (initdb refuses root). `start` raises `Unavailable` with the reason when that cannot be done."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass

__all__ = ["Unavailable", "PgServer", "start", "find_bin"]

#: the password of the test server's user: tests check it never appears in any output
PASSWORD = "pw-Zq7-secret"


class Unavailable(Exception):
    """No PostgreSQL server can be started here (the message says why)."""


def find_bin(name: str) -> str | None:
    """``name`` (initdb, pg_ctl) on PATH or in Debian's /usr/lib/postgresql/<version>/bin (newest first)."""
    found = shutil.which(name)
    if found:
        return found
    cands = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
                   key=lambda p: [int(x) if x.isdigit() else 0 for x in p.split("/")[4].split(".")], reverse=True)
    return cands[0] if cands else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PgServer:
    """A running server: its URL (with the password) and how to stop it."""

    folder: str
    port: int
    pg_ctl: str
    prefix: list[str]

    @property
    def url(self) -> str:
        return f"postgresql://annette:{PASSWORD}@127.0.0.1:{self.port}/postgres"

    def stop(self) -> None:
        subprocess.run([*self.prefix, self.pg_ctl, "stop", "-D", os.path.join(self.folder, "data"), "-m", "immediate",
                        "-w"], capture_output=True, timeout=60)
        shutil.rmtree(self.folder, ignore_errors=True)


def start() -> PgServer:
    initdb, pg_ctl = find_bin("initdb"), find_bin("pg_ctl")
    if not initdb or not pg_ctl:
        raise Unavailable("no PostgreSQL server binaries (initdb, pg_ctl): apt-get install postgresql")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        raise Unavailable("psycopg 3 is not installed (pip install 'psycopg[binary]')") from None
    prefix: list[str] = []
    folder = tempfile.mkdtemp(prefix="annette-pg-")
    if os.geteuid() == 0:  # initdb refuses to run as root: run the server as the package's postgres user
        import pwd
        try:
            pw = pwd.getpwnam("postgres")
        except KeyError:
            shutil.rmtree(folder, ignore_errors=True)
            raise Unavailable("running as root and there is no 'postgres' user to run the server as") from None
        runuser = shutil.which("runuser")
        if not runuser:
            shutil.rmtree(folder, ignore_errors=True)
            raise Unavailable("running as root without runuser to start the server as 'postgres'")
        os.chown(folder, pw.pw_uid, pw.pw_gid)
        prefix = [runuser, "-u", "postgres", "--"]
    pwfile = os.path.join(folder, "pw")
    with open(pwfile, "w") as f:
        f.write(PASSWORD + "\n")
    if prefix:
        os.chown(pwfile, pw.pw_uid, pw.pw_gid)
    data = os.path.join(folder, "data")
    r = subprocess.run([*prefix, initdb, "-D", data, "-U", "annette", f"--pwfile={pwfile}", "-A", "scram-sha-256",
                        "-E", "UTF8", "--no-instructions"], capture_output=True, text=True, timeout=180)
    if r.returncode:
        shutil.rmtree(folder, ignore_errors=True)
        raise Unavailable(f"initdb failed: {(r.stderr or r.stdout).strip().splitlines()[-1:]}")
    for attempt in range(3):
        port = _free_port()
        opts = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50"
        r = subprocess.run([*prefix, pg_ctl, "start", "-D", data, "-w", "-t", "60", "-l",
                            os.path.join(folder, "log"), "-o", opts], capture_output=True, text=True, timeout=120)
        if r.returncode == 0:
            return PgServer(folder, port, pg_ctl, prefix)
    shutil.rmtree(folder, ignore_errors=True)
    raise Unavailable(f"pg_ctl start failed: {(r.stderr or r.stdout).strip().splitlines()[-1:]}")
