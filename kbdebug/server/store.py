"""What the service reads and writes: a posted diagnosis, the crash groups (one per root signature), one
group with its occurrences, one report, and the occurrences over time. Queries only through SQLAlchemy."""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Engine, func, insert, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session, load_only

from kbdebug.server.db import Report, Signature, utcnow

NEW_FOR = timedelta(hours=24)  # a group first seen this recently is marked new
LISTED = 20  # jobs and hosts named per group; the count says how many there are


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
class Filters:
    rule: str | None = None
    job: str | None = None
    since: datetime | None = None
    signature: str | None = None

    def where(self) -> list[Any]:
        conds: list[Any] = [Report.signature == self.signature] if self.signature else [Report.signature != ""]
        if self.rule:
            conds.append(Report.rule == self.rule)
        if self.job:
            conds.append(Report.job == self.job)
        if self.since is not None:
            conds.append(Report.received_at >= self.since)
        return conds


# what a group's example and an occurrence show: the stored diagnosis and HTML report stay unread
_LISTED_COLUMNS = load_only(
    Report.id,
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


def _aware(when: datetime) -> datetime:
    """SQLite hands back naive datetimes for what was stored as UTC."""
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def save(engine: Engine, diagnosis: dict[str, Any], html: str, meta: Meta, log_bytes: int) -> tuple[int, bool]:
    """Store one diagnosis; returns its report id and whether its root signature was never seen before
    (decided by the signatures table's unique key, so two workers never both call the same crash new)."""
    root = (diagnosis.get("incidents") or [None])[0] or {}
    sig = str(root.get("signature") or "")
    now = utcnow()
    with Session(engine) as session, session.begin():
        report = Report(
            received_at=now,
            signature=sig,
            rule=str(root.get("rule") or ""),
            title=str(root.get("title") or ""),
            retry=str((root.get("facts") or {}).get("retry") or ""),
            job=meta.job,
            host=meta.host,
            rank=meta.rank,
            command=meta.command,
            user=meta.user,
            tags=meta.tags,
            source=meta.source,
            log_bytes=log_bytes,
            diagnosis=diagnosis,
            html=zlib.compress(html.encode(), 6),
        )
        session.add(report)
        session.flush()
        new = False
        if sig:
            ins = pg_insert if engine.dialect.name == "postgresql" else sqlite_insert if engine.dialect.name == "sqlite" else None
            values = {"signature": sig, "rule": report.rule, "title": report.title, "first_seen": now, "first_report": report.id}
            if ins is not None:
                stmt = ins(Signature).values(**values).on_conflict_do_nothing(index_elements=["signature"]).returning(Signature.signature)
                new = session.execute(stmt).first() is not None
            elif session.get(Signature, sig) is None:  # another database: no upsert, best effort
                session.execute(insert(Signature).values(**values))
                new = True
        return report.id, new


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
        rows = session.execute(
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
        ).all()
        sigs = [r[0] for r in rows]
        known = {s.signature: s for s in session.scalars(select(Signature).where(Signature.signature.in_(sigs)))} if sigs else {}
        jobs = _distinct(session, Report.job, sigs, conds)
        hosts = _distinct(session, Report.host, sigs, conds)
        examples = {r.id: r for r in session.scalars(select(Report).options(_LISTED_COLUMNS).where(Report.id.in_([r[4] for r in rows])))}
    now = utcnow()
    out = []
    for sig, n, first, last, example, retry in rows:
        seen = known.get(sig)
        first_seen = _aware(seen.first_seen) if seen is not None else _aware(first)
        ex = examples[example]
        out.append(
            {
                "signature": sig,
                "rule": seen.rule if seen is not None else ex.rule,
                "title": seen.title if seen is not None else ex.title,
                "retry": retry or None,
                "count": n,
                "first_seen": first_seen.isoformat(),
                "last_seen": _aware(last).isoformat(),
                "new": now - first_seen <= NEW_FOR,
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
        "report": r.id,
        "received_at": _aware(r.received_at).isoformat(),
        "job": r.job,
        "host": r.host,
        "rank": r.rank,
        "source": r.source,
    }


def occurrence(r: Report) -> dict[str, Any]:
    return {**_example(r), "command": r.command, "user": r.user, "tags": r.tags}


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
        latest = session.scalar(select(Report.diagnosis).where(Report.id == summary["example"]["report"]))
    return {**summary, "diagnosis": latest, "occurrences": [occurrence(r) for r in reports]}


def group_summary(engine: Engine, signature: str) -> dict[str, Any] | None:
    """The keys of /v1/crashes for one signature, over all its occurrences (None when it was never seen)."""
    found = groups(engine, Filters(signature=signature), limit=1)
    return found[0] if found else None


def report(engine: Engine, report_id: int) -> tuple[dict[str, Any], str] | None:
    """A stored diagnosis (its JSON) and its HTML report."""
    with Session(engine) as session:
        r = session.get(Report, report_id)
        if r is None:
            return None
        return r.diagnosis, zlib.decompress(r.html).decode()


def timeline(engine: Engine, filters: Filters, window: timedelta) -> tuple[datetime, timedelta, list[int]]:
    """Occurrences per bucket over the last `window` (hours up to two days, then days): start, step, counts."""
    now = utcnow()
    step = timedelta(hours=1) if window <= timedelta(days=2) else timedelta(days=1)
    start = now - window
    start = (
        start.replace(minute=0, second=0, microsecond=0)
        if step < timedelta(days=1)
        else start.replace(hour=0, minute=0, second=0, microsecond=0)
    )
    n = int((now - start) / step) + 1
    counts = [0] * n
    since = max(filters.since, start) if filters.since is not None else start
    conds = Filters(filters.rule, filters.job, since).where()
    with Session(engine) as session:
        for (when,) in session.execute(select(Report.received_at).where(*conds)):
            i = int((_aware(when) - start) / step)
            if 0 <= i < n:
                counts[i] += 1
    return start, step, counts
