"""What the service reads and writes: a posted diagnosis, the crash groups (one per root signature), one
group with its occurrences, one report, and the occurrences over time. Queries only through SQLAlchemy.

A report is stored as the `Diagnosis` itself (its data, `model_dump`); the JSON answer and the HTML report
are rendered from it when they are asked for, never on a post."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

from pydantic import TypeAdapter
from sqlalchemy import Engine, Integer, bindparam, cast, func, insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session, load_only

from kbdebug.diagnoser.signature import SIGNATURE_VERSION
from kbdebug.diagnosis import Diagnosis
from kbdebug.records import AnyRecord
from kbdebug.render import json_object
from kbdebug.server.db import Report, Signature, new_ref, utcnow
from kbdebug.server.prepared import Prepared, prepare

NEW_FOR = timedelta(hours=24)  # a group first seen this recently is marked new
LISTED = 20  # jobs and hosts named per group; the count says how many there are
STATUSES = ("open", "resolved", "ignored", "regressed")
_RECORDS: TypeAdapter[list[Any]] = TypeAdapter(list[AnyRecord])


@dataclass(frozen=True)
class Meta:
    """What the poster says about the job; all optional."""

    job: str = ""
    host: str = ""
    rank: int | None = None
    command: str = ""
    user: str = ""
    tags: str = ""
    source: str = "-"


@dataclass(frozen=True)
class Saved:
    ref: str
    new: bool  # its root signature was never seen before
    regressed: bool  # its group had been marked resolved


@dataclass(frozen=True)
class Filters:
    rule: str | None = None
    job: str | None = None
    since: datetime | None = None
    signature: str | None = None
    status: str | None = None
    hide_ignored: bool = False  # the dashboard's default: an ignored group is shown when asked for by status

    def where(self) -> list[Any]:
        conds: list[Any] = [Report.signature == self.signature] if self.signature else [Report.signature != ""]
        if self.rule:
            conds.append(Report.rule == self.rule)
        if self.job:
            conds.append(Report.job == self.job)
        if self.since is not None:
            conds.append(Report.received_at >= self.since)
        return conds


# what a group's example and an occurrence show: the stored diagnosis stays unread
_LISTED_COLUMNS = load_only(
    Report.ref,
    Report.received_at,
    Report.rule,
    Report.title,
    Report.job,
    Report.host,
    Report.rank,
    Report.source,
    Report.command,
    Report.user,
    Report.tags,
)


def aware(when: datetime) -> datetime:
    """SQLite hands back naive datetimes for what was stored as UTC."""
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def revive(data: dict[str, Any]) -> Diagnosis:
    """The `Diagnosis` a report was stored as (rows from before schema v2 hold its JSON: the same, less the
    evidence's context lines)."""
    diag = Diagnosis.model_validate(data)
    for inc in diag.incidents:
        inc.records = _RECORDS.validate_python(inc.records)
        for kind in {type(r) for r in inc.records}:
            kind.model_rebuild()  # a record kind's schema is built when first needed (records/base.py): dumping needs it
    return diag


def answer(diag: Diagnosis) -> dict[str, Any]:
    """What `kbdebug explain --format json` prints for it, as data."""
    return json_object(diag)


_ADD_REPORT = insert(Report).returning(Report.id)
_REGRESS = (
    update(Signature)
    .where(Signature.signature == bindparam("sig"), Signature.status == "resolved")
    .values(status="regressed", status_at=bindparam("now"))
)


@cache
def _add_signature(dialect: str) -> Any:
    """The insert of a group's first report that does nothing when the group is there (None: a database with
    no such upsert)."""
    ins = pg_insert if dialect == "postgresql" else sqlite_insert if dialect == "sqlite" else None
    return None if ins is None else ins(Signature).on_conflict_do_nothing(index_elements=["signature"]).returning(Signature.signature)


def save(engine: Engine, diag: Diagnosis | Prepared, meta: Meta, log_bytes: int) -> Saved:
    """Store one diagnosis (as a worker prepared it, or prepared here). Whether its signature is new is
    decided by the signatures table's unique key, and whether its group regressed by one conditional update,
    so that two workers never both say so. Three statements built once, run with this report's values on one
    connection: a post's own cost on the service's one event loop is mostly this, and building statements and
    an ORM session's bookkeeping were four fifths of it."""
    p = diag if isinstance(diag, Prepared) else prepare(diag)
    sig = p.signature
    now = utcnow()
    ref = new_ref()
    row = {
        "ref": ref,
        "received_at": now,
        "signature": sig,
        "signature_version": SIGNATURE_VERSION,
        "rule": p.rule,
        "title": p.title,
        "retry": p.retry,
        "job": meta.job,
        "host": meta.host,
        "rank": meta.rank,
        "command": meta.command,
        "user": meta.user,
        "tags": meta.tags,
        "source": meta.source,
        "log_bytes": log_bytes,
        "diagnosis": p.data,
        "html": b"",
    }
    with engine.begin() as conn:
        report_id = conn.execute(_ADD_REPORT, row).scalar_one()
        new = regressed = False
        if sig:
            values = {
                "signature": sig,
                "rule": p.rule,
                "title": p.title,
                "first_seen": now,
                "first_report": report_id,
                "key": p.signature_key,
                "status": "open",
            }
            upsert = _add_signature(engine.dialect.name)
            if upsert is not None:
                new = conn.execute(upsert, values).first() is not None
            elif conn.execute(select(Signature.signature).where(Signature.signature == sig)).first() is None:
                conn.execute(insert(Signature), values)  # another database: no upsert, best effort
                new = True
            if not new:
                regressed = int(getattr(conn.execute(_REGRESS, {"sig": sig, "now": now}), "rowcount", 0) or 0) == 1
        return Saved(ref, new, regressed)


def rules_seen(engine: Engine) -> list[str]:
    """The rules of every stored group, for the dashboard's filter."""
    with Session(engine) as session:
        return list(session.scalars(select(Report.rule).where(Report.signature != "").distinct().order_by(Report.rule)))


def count(engine: Engine) -> int:
    with Session(engine) as session:
        return int(session.scalar(select(func.count()).select_from(Report)) or 0)


def groups(engine: Engine, filters: Filters, limit: int = 500) -> list[dict[str, Any]]:
    """One row per root signature among the reports the filters keep, the most recently seen first."""
    conds = filters.where()
    with Session(engine) as session:
        query = (
            select(
                Report.signature,
                func.count(),
                func.min(Report.received_at),
                func.max(Report.received_at),
                func.max(Report.id),
                func.max(Report.retry),
            )
            .where(*conds)
            .group_by(Report.signature)
            .order_by(func.max(Report.received_at).desc())
            .limit(limit)
        )
        if filters.status:
            query = query.where(Report.signature.in_(select(Signature.signature).where(Signature.status == filters.status)))
        elif filters.hide_ignored:
            query = query.where(Report.signature.not_in(select(Signature.signature).where(Signature.status == "ignored")))
        rows = session.execute(query).all()
        sigs = [r[0] for r in rows]
        known = {s.signature: s for s in session.scalars(select(Signature).where(Signature.signature.in_(sigs)))} if sigs else {}
        jobs = _distinct(session, Report.job, sigs, conds)
        hosts = _distinct(session, Report.host, sigs, conds)
        examples = {r.id: r for r in session.scalars(select(Report).options(_LISTED_COLUMNS).where(Report.id.in_([r[4] for r in rows])))}
    now = utcnow()
    out = []
    for sig, n, first, last, example, retry in rows:
        seen = known.get(sig)
        first_seen = aware(seen.first_seen) if seen is not None else aware(first)
        ex = examples[example]
        out.append(
            {
                "signature": sig,
                "signature_version": SIGNATURE_VERSION,
                "key": seen.key if seen is not None else "",
                "rule": seen.rule if seen is not None else ex.rule,
                "title": seen.title if seen is not None else ex.title,
                "retry": retry or None,
                "count": n,
                "first_seen": first_seen.isoformat(),
                "last_seen": aware(last).isoformat(),
                "new": now - first_seen <= NEW_FOR,
                "status": seen.status if seen is not None else "open",
                "jobs": jobs.get(sig, []),
                "hosts": hosts.get(sig, []),
                "example": _example(ex),
            }
        )
    return out


def _distinct(session: Session, column: Any, sigs: list[str], conds: list[Any]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    if not sigs:
        return found
    rows = session.execute(
        select(Report.signature, column).where(Report.signature.in_(sigs), column != "", *conds).group_by(Report.signature, column)
    )
    for sig, value in rows:
        names = found.setdefault(sig, [])
        if len(names) < LISTED:
            names.append(value)
    return found


def _example(r: Report) -> dict[str, Any]:
    return {
        "report": r.ref,
        "received_at": aware(r.received_at).isoformat(),
        "job": r.job,
        "host": r.host,
        "rank": r.rank,
        "source": r.source,
    }


def occurrence(r: Report) -> dict[str, Any]:
    return {**_example(r), "rule": r.rule, "title": r.title, "command": r.command, "user": r.user, "tags": r.tags}


def group(engine: Engine, signature: str, limit: int = 1000) -> dict[str, Any] | None:
    """The group of one signature: its summary, the latest diagnosis, and its occurrences newest first."""
    summary = group_summary(engine, signature)
    if summary is None:
        return None
    with Session(engine) as session:
        reports = list(
            session.scalars(
                select(Report)
                .options(_LISTED_COLUMNS)
                .where(Report.signature == signature)
                .order_by(Report.received_at.desc(), Report.id.desc())
                .limit(limit)
            )
        )
        latest = session.scalar(select(Report.diagnosis).where(Report.ref == summary["example"]["report"]))
    return {**summary, "diagnosis": answer(revive(latest or {})), "occurrences": [occurrence(r) for r in reports]}


def group_summary(engine: Engine, signature: str) -> dict[str, Any] | None:
    """The keys of /v1/crashes for one signature, over all its occurrences (None when it was never seen)."""
    found = groups(engine, Filters(signature=signature), limit=1)
    return found[0] if found else None


def report(engine: Engine, ref: str) -> tuple[Diagnosis, bytes] | None:
    """A stored diagnosis, and the HTML report stored with it before schema v2 (b"" since)."""
    with Session(engine) as session:
        r = session.scalars(select(Report).where(Report.ref == ref)).first()
        if r is None:
            return None
        return revive(r.diagnosis), r.html or b""


def unrecognised(engine: Engine, filters: Filters, limit: int = 50) -> tuple[int, list[dict[str, Any]]]:
    """Logs in which nothing was recognised (no signature): how many, and the newest of them."""
    conds = [Report.signature == "", *Filters(None, filters.job, filters.since).where()[1:]]
    with Session(engine) as session:
        n = int(session.scalar(select(func.count()).select_from(Report).where(*conds)) or 0)
        rows = session.scalars(select(Report).options(_LISTED_COLUMNS).where(*conds).order_by(Report.id.desc()).limit(limit))
        return n, [occurrence(r) for r in rows]


def earliest(engine: Engine) -> datetime | None:
    with Session(engine) as session:
        when = session.scalar(select(func.min(Report.received_at)))
        return aware(when) if when is not None else None


def timeline(engine: Engine, filters: Filters, start: datetime, step: timedelta, n: int) -> list[int]:
    """Occurrences in each of `n` buckets of `step` from `start` (the caller bounds `n`)."""
    counts = [0] * n
    since = max(filters.since, start) if filters.since is not None else start
    conds = Filters(filters.rule, filters.job, since).where()
    name = engine.dialect.name
    if name in ("postgresql", "sqlite"):  # counted in the database: one row per bucket, not one per report
        seconds = (
            func.extract("epoch", Report.received_at)
            if name == "postgresql"
            else (func.julianday(Report.received_at) - 2440587.5) * 86400.0
        )
        offset = (seconds - start.timestamp()) / step.total_seconds()
        bucket = func.floor(offset) if name == "postgresql" else cast(offset, Integer)  # SQLite's cast truncates: >= 0, so floor
        query = select(bucket, func.count()).where(*conds).group_by(bucket)
        with Session(engine) as session:
            for i, k in session.execute(query):
                if i is not None and 0 <= int(i) < n:
                    counts[int(i)] += int(k)
        return counts
    with Session(engine) as session:
        for (when,) in session.execute(select(Report.received_at).where(*conds)):
            i = int((aware(when) - start) / step)
            if 0 <= i < n:
                counts[i] += 1
    return counts
