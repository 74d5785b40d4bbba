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
import warnings
from typing import Any

from ..dburl import driver_error, driver_url, mask_url
from ..errors import AnnetteError

__all__ = ["STUDY_ATTR", "HEARTBEAT_S", "open_storage", "open_study", "mask_url", "fail_stale"]

log = logging.getLogger(__name__)

#: study user attribute holding what the study searches (space, platform, budget); checked on reuse
STUDY_ATTR = "annette"
#: seconds between a running trial's heartbeats; a trial silent for `GRACE_S` is failed (its worker died)
HEARTBEAT_S = 10
GRACE_S = 60
#: what a study created before a meta key existed searched (``latency``: studies ranked by latency_ms)
_LEGACY = {"latency": "latency"}


def open_storage(storage: Any, heartbeat_interval: int | None = HEARTBEAT_S, grace_period: int | None = GRACE_S) -> Any:
    """None -> None (in memory); ``journal:PATH`` -> a journal-file storage; ``sqlite:///F`` -> an RDB storage
    with a generous lock timeout (several writer processes); other URLs and storage objects pass through.

    Running trials of an RDB storage heartbeat every ``heartbeat_interval`` s; one silent for
    ``grace_period`` s (its worker was killed) is failed by the next worker (`fail_stale`), so study counts
    stay right. ``postgresql://`` uses psycopg 3, or psycopg2 when only that is installed. Passwords in
    URLs never appear in messages (`mask_url`).
    """
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
        raise AnnetteError(f"storage {mask_url(s)!r}: give an Optuna storage URL (e.g. sqlite:///study.db) or "
                           "journal:PATH")
    url = driver_url(s)
    kw: dict[str, Any] = {"engine_kwargs": {"connect_args": {"timeout": 60}}} if url.startswith("sqlite:") else {}
    if heartbeat_interval:
        kw.update(heartbeat_interval=int(heartbeat_interval), grace_period=int(grace_period or 2 * heartbeat_interval))
    for attempt in range(6):
        try:
            with warnings.catch_warnings():  # heartbeat_interval is "experimental" in Optuna, stable in use
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return optuna.storages.RDBStorage(url, **kw)
        except ImportError as e:
            raise driver_error(url, e) from None
        except Exception as e:  # noqa: BLE001 - sqlalchemy errors: a bad URL, an unreachable database...
            text = str(e)
            if isinstance(e.__cause__, ImportError) or "No module named" in text:
                raise driver_error(url, e) from None
            # ...or several workers creating the schema of a new database at once: the others wait, retry
            racing = any(m in text for m in ("already exists", "UNIQUE constraint", "database is locked",
                                              "duplicate key"))
            if racing and attempt < 5:
                log.debug("storage %s: schema being created by another worker (%s); retrying", mask_url(s),
                          mask_url(text[:80]))
                time.sleep(0.2 * (attempt + 1))
                continue
            first = text.splitlines()[0] if text else ""
            raise AnnetteError(f"cannot open storage {mask_url(s)!r}: {type(e).__name__}: {mask_url(first)}") from None
    raise AssertionError("unreachable")


def fail_stale(study: Any) -> int:
    """Fail the study's trials whose worker stopped heartbeating (killed); returns how many. A no-op for
    storages without heartbeats (in memory, journal files)."""
    from optuna.exceptions import ExperimentalWarning
    from optuna.storages import fail_stale_trials
    from optuna.trial import TrialState
    before = {t.number for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))}
    if not before:
        return 0
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ExperimentalWarning)
            fail_stale_trials(study)
    except Exception as e:  # noqa: BLE001 - storages without heartbeat support
        log.debug("fail_stale: %s", e)
        return 0
    after = {t.number for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))}
    n = len(before - after)
    if n:
        log.warning("study %s: %d trial(s) of stopped workers marked failed", study.study_name, n)
    return n


def open_study(storage: Any, study_name: str | None, sampler: Any, meta: dict[str, Any], **direction: Any) -> Any:
    """Create or join the study ``study_name`` (default: from ``meta``'s space, platform and mode) in
    ``storage``; a joined study must search what ``meta`` says (`AnnetteError` naming the differences)."""
    import optuna
    if study_name is None:
        study_name = f"annette-{meta['space']}-{meta['platform']}-{meta['mode']}"
    study = optuna.create_study(storage=open_storage(storage), study_name=study_name, sampler=sampler,
                                load_if_exists=True, **direction)
    fail_stale(study)
    old = study.user_attrs.get(STUDY_ATTR)
    if old is None:
        study.set_user_attr(STUDY_ATTR, meta)
    elif any(old.get(k, _LEGACY.get(k)) != v for k, v in meta.items()):
        diff = ", ".join(f"{k} {old.get(k, _LEGACY.get(k))!r} (now {v!r})" for k, v in meta.items()
                         if old.get(k, _LEGACY.get(k)) != v)
        raise AnnetteError(f"study {study.study_name!r} already exists with {diff}; use another --study name")
    return study
