"""What a team does with what is stored: mark a group resolved or ignored, delete a report or a group,
keep reports only so long (retention), and prove the database takes writes (health)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Engine, delete, func, select, update
from sqlalchemy.orm import Session

from kbdebug.server.db import Report, SchemaVersion, Signature, utcnow

SETTABLE = ("open", "resolved", "ignored")  # `regressed` is set by a post, never by hand


def _count(result: Any) -> int:
    """Rows an UPDATE or DELETE touched."""
    return int(getattr(result, "rowcount", 0) or 0)


def set_status(engine: Engine, signature: str, status: str) -> bool:
    """Mark a group; False when the signature was never seen."""
    with Session(engine) as session, session.begin():
        done = session.execute(update(Signature).where(Signature.signature == signature).values(status=status, status_at=utcnow()))
        return _count(done) == 1


def delete_report(engine: Engine, ref: str) -> bool:
    """Delete one report; its group goes with its last report."""
    with Session(engine) as session, session.begin():
        sig = session.scalar(select(Report.signature).where(Report.ref == ref))
        if sig is None:
            return False
        session.execute(delete(Report).where(Report.ref == ref))
        _forget_empty(session, {sig})
        return True


def delete_group(engine: Engine, signature: str) -> int:
    """Delete every report of a group and the group itself; returns how many reports went."""
    with Session(engine) as session, session.begin():
        gone = _count(session.execute(delete(Report).where(Report.signature == signature)))
        known = _count(session.execute(delete(Signature).where(Signature.signature == signature)))
        return int(gone) if gone or known else -1


def purge(engine: Engine, before: datetime) -> int:
    """Delete the reports received before `before`, and the groups left without one (retention)."""
    with Session(engine) as session, session.begin():
        sigs = set(session.scalars(select(Report.signature).where(Report.received_at < before).distinct()))
        gone = _count(session.execute(delete(Report).where(Report.received_at < before)))
        _forget_empty(session, sigs)
        return int(gone)


def _forget_empty(session: Session, sigs: set[str]) -> None:
    sigs.discard("")
    for sig in sigs:
        if not session.scalar(select(func.count()).select_from(Report).where(Report.signature == sig)):
            session.execute(delete(Signature).where(Signature.signature == sig))


def check_write(engine: Engine) -> None:
    """A write that changes nothing, committed: raises what a post would meet (a read-only file, a full
    disk, a held lock, a database that is down)."""
    with Session(engine) as session, session.begin():
        session.execute(update(SchemaVersion).where(SchemaVersion.id == 1).values(version=SchemaVersion.version))
