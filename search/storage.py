"""Where a study lives: Optuna storages from a URL or ``journal:PATH``, and creating or joining a study.

In memory by default; any Optuna storage URL (``sqlite:///study.db``, ``postgresql://...``) or ``journal:PATH``
(an append-only journal file, safe for several processes on one machine or a shared file system). A study is
opened with ``load_if_exists=True``, so several processes or machines running the same search with the same
study name share one study; what it searches is recorded in its ``STUDY_ATTR`` user attribute and checked
when it is joined.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from ..errors import AnnetteError

__all__ = ["STUDY_ATTR", "open_storage", "open_study"]

log = logging.getLogger(__name__)

#: study user attribute holding what the study searches (space, platform, budget); checked on reuse
STUDY_ATTR = "annette"


def open_storage(storage: Any) -> Any:
    """None -> None (in memory); ``journal:PATH`` -> a journal-file storage; ``sqlite:///F`` -> an RDB storage
    with a generous lock timeout (several writer processes); other URLs and storage objects pass through."""
    if storage is None or not isinstance(storage, (str, os.PathLike)):
        return storage
    import optuna
    s = os.fspath(storage)
    if s.startswith("journal:"):
        path = s[len("journal:"):]
        if not path:
            raise AnnetteError("journal storage needs a file: journal:PATH")
        from optuna.storages import JournalStorage
        try:
            from optuna.storages.journal import JournalFileBackend
        except ImportError:  # optuna < 4
            from optuna.storages import JournalFileStorage as JournalFileBackend  # type: ignore[no-redef]
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise AnnetteError(f"journal storage {path!r}: folder {parent} does not exist")
        return JournalStorage(JournalFileBackend(path))
    if "://" not in s:
        raise AnnetteError(f"storage {s!r}: give an Optuna storage URL (e.g. sqlite:///study.db) or journal:PATH")
    kw = {"engine_kwargs": {"connect_args": {"timeout": 60}}} if s.startswith("sqlite:") else {}
    for attempt in range(6):
        try:
            return optuna.storages.RDBStorage(s, **kw)
        except ImportError as e:
            raise AnnetteError(f"storage {s!r}: {e}") from None
        except Exception as e:  # noqa: BLE001 - sqlalchemy errors: a bad URL, an unreachable database...
            text = str(e)
            # ...or several workers creating the schema of a new database at once: the others wait, retry
            racing = any(m in text for m in ("already exists", "UNIQUE constraint", "database is locked",
                                              "duplicate key"))
            if racing and attempt < 5:
                log.debug("storage %s: schema being created by another worker (%s); retrying", s, text[:80])
                time.sleep(0.2 * (attempt + 1))
                continue
            raise AnnetteError(f"cannot open storage {s!r}: {type(e).__name__}: {text.splitlines()[0]}") from None
    raise AssertionError("unreachable")


def open_study(storage: Any, study_name: str | None, sampler: Any, meta: dict[str, Any], **direction: Any) -> Any:
    """Create or join the study ``study_name`` (default: from ``meta``'s space, platform and mode) in
    ``storage``; a joined study must search what ``meta`` says (`AnnetteError` naming the differences)."""
    import optuna
    if study_name is None:
        study_name = f"annette-{meta['space']}-{meta['platform']}-{meta['mode']}"
    study = optuna.create_study(storage=open_storage(storage), study_name=study_name, sampler=sampler,
                                load_if_exists=True, **direction)
    old = study.user_attrs.get(STUDY_ATTR)
    if old is None:
        study.set_user_attr(STUDY_ATTR, meta)
    elif any(old.get(k) != v for k, v in meta.items()):
        diff = ", ".join(f"{k} {old.get(k)!r} (now {v!r})" for k, v in meta.items() if old.get(k) != v)
        raise AnnetteError(f"study {study.study_name!r} already exists with {diff}; use another --study name")
    return study
