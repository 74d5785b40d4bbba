"""Database URLs shared by the measurement store and the search's Optuna storages: passwords masked in every
message, the driver a URL needs (psycopg 3, or psycopg2 when only that is installed), and the one-line error
naming the package to install when it is missing."""

from __future__ import annotations

import importlib.util
import logging
import os
import re
from typing import Any

from .errors import AnnetteError

__all__ = ["mask_url", "is_url", "driver_url", "driver_error"]

log = logging.getLogger(__name__)

_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^:/@\s]*):(?P<pw>[^@\s]*)@")


def mask_url(text: Any) -> str:
    """``text`` with the password of every database URL in it replaced by ``***``
    (``postgresql://user:secret@host/db`` -> ``postgresql://user:***@host/db``)."""
    return _PASSWORD.sub(lambda m: f"{m.group('head')}:***@", str(text))


def is_url(target: str | os.PathLike) -> bool:
    """Whether ``target`` is a database URL (``scheme://...``) rather than a file path."""
    return re.match(r"^[A-Za-z][A-Za-z0-9+.\-]*://", os.fspath(target)) is not None


def _has_module(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def driver_url(url: str) -> str:
    """``url`` with the PostgreSQL driver named explicitly: ``postgresql+psycopg://`` (psycopg 3) when it is
    installed or neither is, ``postgresql+psycopg2://`` when only psycopg2 is. (SQLAlchemy's own default for
    a bare ``postgresql://`` is psycopg2 before 2.1 and psycopg 3 from 2.1 on.) ``postgres://``, the libpq
    spelling, is accepted too; URLs that name a driver are left as they are."""
    m = re.match(r"postgres(ql)?://", url, re.I)
    if not m:
        return url
    driver = "psycopg2" if not _has_module("psycopg") and _has_module("psycopg2") else "psycopg"
    return f"postgresql+{driver}://" + url.split("://", 1)[1]


def driver_error(url: str, e: BaseException, what: str = "storage") -> AnnetteError:
    """One line naming the package a database URL's driver needs (``what``: how the message names the URL)."""
    low = url.lower()
    if low.startswith("postgresql+psycopg2") or "psycopg2" in str(e):
        pkg = "psycopg2-binary (pip install psycopg2-binary), or use postgresql:// with psycopg 3"
    elif low.startswith("postgres"):
        pkg = ("psycopg 3 (pip install 'psycopg[binary]' or 'annette-torch[postgres]'), or write "
               "postgresql+psycopg2:// to use psycopg2")
    elif low.startswith("mysql"):
        pkg = "a MySQL driver (pip install pymysql, then mysql+pymysql://...)"
    else:
        pkg = "the database driver SQLAlchemy names"
    log.debug("%s %s: %s", what, mask_url(url), mask_url(e))
    return AnnetteError(f"{what} {mask_url(url)}: its database driver is not installed; install {pkg}")
