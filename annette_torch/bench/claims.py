"""Shared sweeps: the plan of a sweep, claims with leases, and the progress of every worker.

Any number of workers (processes, or machines each with its own board) run the same sweep on one store. A
worker claims a configuration with one atomic statement (an INSERT ... ON CONFLICT DO UPDATE that succeeds
only when the configuration is neither stored nor claimed under a live lease), renews the lease while it
measures (heartbeat), and storing the result (`Store.add`) ends the claim: no claim statement takes a stored
configuration (a failed one's claim is marked failed, for ``--retry-failed``). A worker that is killed
stops renewing: once its lease has expired, its configurations return to the pool and the next worker takes
them over. Leases are compared with the store's clock (the database server's for PostgreSQL).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from typing import Any, Sequence

from sqlalchemy import Float, Text, and_, bindparam, delete, exists, func, literal, or_, select, update

from . import schema as S
from .store import Store

__all__ = ["LEASE_S", "ClaimResult", "SuiteProgress", "WorkerProgress", "MachineProgress", "Progress",
           "default_worker", "this_machine", "add_plan", "claim", "renew", "release", "progress"]

#: default lease of a claim (seconds); a measuring worker renews it several times per lease
LEASE_S = 60.0


def this_machine() -> str:
    """The machine a worker runs on, as status shows it (the host name)."""
    return socket.gethostname() or "localhost"


def default_worker() -> str:
    """A worker's default name: ``<host>-<process id>``."""
    return f"{this_machine()}-{os.getpid()}"


@dataclass
class ClaimResult:
    """What a claim attempt got: ``claimed`` (now ours), ``stored`` (already stored: nothing to do) and
    ``busy`` (claimed by another worker under a live lease); ``taken_over``: those of ``claimed`` that another
    worker had claimed and stopped renewing (its lease had expired)."""

    claimed: list[str] = field(default_factory=list)
    stored: list[str] = field(default_factory=list)
    busy: list[str] = field(default_factory=list)
    taken_over: list[str] = field(default_factory=list)


def add_plan(store: Store, platform: str, suite: str, config_ids: Sequence[str]) -> None:
    """Record the configurations a sweep is started for (added to what other workers planned)."""
    if not config_ids:
        return
    with store.transaction() as c:
        c.execute(store.insert(S.plan).on_conflict_do_nothing(),
                  [{"platform": platform, "suite": suite, "config_id": cid} for cid in dict.fromkeys(config_ids)])


def _claim_statement(retry_failed: bool, again: bool, store: Store) -> Any:
    """The claim upsert, with bind parameters."""
    cl, cf = S.claims, S.configs
    p = {k: bindparam(k, type_=S.claims.c[k].type) for k in ("platform", "suite", "config_id", "worker",
                                                                 "machine", "run_id")}
    now, until = bindparam("now", type_=Float), bindparam("until", type_=Float)
    stored = select(literal(1)).where(cf.c.platform == p["platform"], cf.c.suite == p["suite"],
                                      cf.c.config_id == p["config_id"])
    if retry_failed:
        stored = stored.where(cf.c.status == "ok")
    row = select(p["platform"], p["suite"], p["config_id"], p["worker"], p["machine"], p["run_id"],
                 literal("claimed"), now, now, until).where(~exists(stored))
    ins = store.insert(cl).from_select(["platform", "suite", "config_id", "worker", "machine", "run_id", "state",
                                        "claimed", "heartbeat", "lease_until"], row)
    takeover = and_(cl.c.state == "claimed", cl.c.lease_until < now)
    if retry_failed:
        takeover = or_(takeover, cl.c.state == "failed")
    if again:
        takeover = or_(takeover, and_(cl.c.state == "claimed", cl.c.worker == p["worker"]))
    ins = ins.on_conflict_do_update(
        index_elements=["platform", "suite", "config_id"],
        set_={k: ins.excluded[k] for k in ("worker", "machine", "run_id", "state", "claimed", "heartbeat",
                                           "lease_until")},
        where=takeover)
    return ins.returning(cl.c.config_id)  # a row back: claimed (rowcount is not reliable for this statement)


def _holder_statement() -> Any:
    """The worker and state of a configuration's claim row, if any."""
    cl = S.claims
    return select(cl.c.worker, cl.c.state).where(cl.c.platform == bindparam("platform", type_=Text),
                                                 cl.c.suite == bindparam("suite", type_=Text),
                                                 cl.c.config_id == bindparam("config_id", type_=Text))


def _stored_statement(retry_failed: bool) -> Any:
    """Whether a configuration is stored (as measured, with ``retry_failed``)."""
    cf = S.configs
    q = select(cf.c.config_id).where(cf.c.platform == bindparam("platform", type_=Text),
                                     cf.c.suite == bindparam("suite", type_=Text),
                                     cf.c.config_id == bindparam("config_id", type_=Text))
    return q.where(cf.c.status == "ok") if retry_failed else q


def claim(store: Store, platform: str, suite: str, config_ids: Sequence[str], worker: str, machine: str,
          run_id: int | None = None, lease_s: float = LEASE_S, retry_failed: bool = False,
          again: bool = False) -> ClaimResult:
    """Claim each of ``config_ids`` for ``worker`` until the store's clock passes now + ``lease_s``.

    Per configuration, one statement: it inserts the claim unless the configuration is stored (as measured;
    with ``retry_failed`` a failed one may be claimed again), and takes over an existing claim only when its
    lease has expired (its worker died), it ended failed and ``retry_failed``, or (``again``) ``worker``
    holds it already (job folders written a second time by the same machine).
    """
    out = ClaimResult()
    if not config_ids:
        return out
    stmt = store.prepared(("claim", retry_failed, again), lambda: _claim_statement(retry_failed, again, store))
    stored = store.prepared(("claim.stored", retry_failed), lambda: _stored_statement(retry_failed))
    holder = store.prepared(("claim.holder",), _holder_statement)
    with store.raw_transaction() as tx:
        now = store.raw_clock(tx)
        args = {"platform": platform, "suite": suite, "worker": worker, "machine": machine, "run_id": run_id,
                "now": now, "until": now + lease_s}
        for cid in config_ids:
            key = {"platform": platform, "suite": suite, "config_id": cid}
            before = tx.first(holder, key)  # (in this transaction: the claim the upsert may replace)
            if tx.first(stmt, {**args, "config_id": cid}) is not None:
                out.claimed.append(cid)
                if before is not None and before[1] == "claimed" and before[0] != worker:
                    out.taken_over.append(cid)
            elif tx.first(stored, key) is not None:
                out.stored.append(cid)
            else:
                out.busy.append(cid)
    return out


def renew(store: Store, platform: str, suite: str, config_ids: Sequence[str], worker: str,
          lease_s: float = LEASE_S) -> int:
    """Extend ``worker``'s live claims on ``config_ids`` by ``lease_s`` from now (the heartbeat); returns how
    many it still holds (fewer: another worker took one over after the lease ran out)."""
    if not config_ids:
        return 0
    cl = S.claims
    with store.transaction() as c:
        now = store.clock(c)
        res = c.execute(update(cl).where(cl.c.platform == platform, cl.c.suite == suite,
                                         cl.c.config_id.in_(list(config_ids)), cl.c.worker == worker,
                                         cl.c.state == "claimed")
                        .values(heartbeat=now, lease_until=now + lease_s))
        return int(res.rowcount)


def release(store: Store, platform: str, suite: str, config_ids: Sequence[str], worker: str) -> None:
    """Give back ``worker``'s live claims on ``config_ids`` (not measured: interrupted), at once."""
    if not config_ids:
        return
    cl = S.claims
    with store.transaction() as c:
        c.execute(delete(cl).where(cl.c.platform == platform, cl.c.suite == suite,
                                   cl.c.config_id.in_(list(config_ids)), cl.c.worker == worker,
                                   cl.c.state == "claimed"))


@dataclass
class SuiteProgress:
    """One platform and suite: ``planned`` (None when no sweep recorded its plan), ``ok``, ``failed``,
    ``measuring`` (claimed under a live lease) and ``remaining`` (planned, not stored, not being measured)."""

    platform: str
    suite: str
    planned: int | None
    ok: int
    failed: int
    measuring: int
    remaining: int | None


@dataclass
class WorkerProgress:
    """One worker (and the machine it runs on): configurations stored, being measured, last activity."""

    worker: str
    machine: str
    ok: int = 0
    failed: int = 0
    measuring: int = 0
    last: float = 0.0


@dataclass
class MachineProgress:
    """One machine: how many workers ran there and their counts summed."""

    machine: str
    workers: int = 0
    ok: int = 0
    failed: int = 0
    measuring: int = 0
    last: float = 0.0


@dataclass
class Progress:
    """`progress`: per platform and suite, per worker, per machine; ``now`` by the store's clock."""

    suites: list[SuiteProgress]
    workers: list[WorkerProgress]
    now: float

    @property
    def machines(self) -> list[MachineProgress]:
        """The workers' counts summed per machine."""
        out: dict[str, MachineProgress] = {}
        for w in self.workers:
            m = out.setdefault(w.machine, MachineProgress(w.machine))
            m.workers += 1
            m.ok, m.failed, m.measuring = m.ok + w.ok, m.failed + w.failed, m.measuring + w.measuring
            m.last = max(m.last, w.last)
        return sorted(out.values(), key=lambda m: m.machine)


def progress(store: Store, platform: str | None = None) -> Progress:
    """Where every sweep of the store stands (optionally of one platform), and what each worker did."""
    cf, cl, pl, ru = S.configs, S.claims, S.plan, S.runs

    def only(t, q):
        return q.where(t.c.platform == platform) if platform else q

    with store.transaction(write=False) as c:
        now = store.clock(c)
        measured = exists(select(literal(1)).where(cf.c.platform == cl.c.platform, cf.c.suite == cl.c.suite,
                                                   cf.c.config_id == cl.c.config_id, cf.c.status == "ok"))
        live = and_(cl.c.state == "claimed", cl.c.lease_until >= now, ~measured)  # being measured now
        suites: dict[tuple[str, str], SuiteProgress] = {}

        def entry(p: str, s: str) -> SuiteProgress:
            return suites.setdefault((p, s), SuiteProgress(p, s, None, 0, 0, 0, None))

        for p, s, st, n in c.execute(only(cf, select(cf.c.platform, cf.c.suite, cf.c.status, func.count())
                                              .group_by(cf.c.platform, cf.c.suite, cf.c.status))):
            setattr(entry(p, s), "ok" if st == "ok" else "failed", int(n))
        for p, s, n in c.execute(only(cl, select(cl.c.platform, cl.c.suite, func.count()).where(live)
                                              .group_by(cl.c.platform, cl.c.suite))):
            entry(p, s).measuring = int(n)
        for p, s, n in c.execute(only(pl, select(pl.c.platform, pl.c.suite, func.count())
                                              .group_by(pl.c.platform, pl.c.suite))):
            e = entry(p, s)
            e.planned, e.remaining = int(n), 0
        stored = exists(select(literal(1)).where(cf.c.platform == pl.c.platform, cf.c.suite == pl.c.suite,
                                                 cf.c.config_id == pl.c.config_id))
        busy = exists(select(literal(1)).where(cl.c.platform == pl.c.platform, cl.c.suite == pl.c.suite,
                                               cl.c.config_id == pl.c.config_id, live))
        for p, s, n in c.execute(only(pl, select(pl.c.platform, pl.c.suite, func.count())
                                              .where(~stored, ~busy).group_by(pl.c.platform, pl.c.suite))):
            entry(p, s).remaining = int(n)

        workers: dict[tuple[str, str], WorkerProgress] = {}

        def who(w: str | None, m: str | None) -> WorkerProgress:
            k = (w or "-", m or "-")
            return workers.setdefault(k, WorkerProgress(*k))

        runs_q = only(ru, select(ru.c.worker, ru.c.machine, func.max(ru.c.started)).group_by(ru.c.worker, ru.c.machine))
        for w, m, last in c.execute(runs_q):
            e = who(w, m)
            e.last = max(e.last, float(last or 0))
        per = (select(ru.c.worker, ru.c.machine, cf.c.status, func.count(), func.max(cf.c.finished))
               .select_from(cf.join(ru, cf.c.run_id == ru.c.id)).group_by(ru.c.worker, ru.c.machine, cf.c.status))
        for w, m, st, n, last in c.execute(only(cf, per)):
            e = who(w, m)
            setattr(e, "ok" if st == "ok" else "failed", getattr(e, "ok" if st == "ok" else "failed") + int(n))
            e.last = max(e.last, float(last or 0))
        held = (select(cl.c.worker, cl.c.machine, func.count(), func.max(cl.c.heartbeat)).where(live)
                .group_by(cl.c.worker, cl.c.machine))
        for w, m, n, last in c.execute(only(cl, held)):
            e = who(w, m)
            e.measuring += int(n)
            e.last = max(e.last, float(last or 0))
    return Progress(sorted(suites.values(), key=lambda e: (e.platform, e.suite)),
                    sorted(workers.values(), key=lambda e: (e.machine, e.worker)), now)

