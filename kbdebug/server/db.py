"""The service's storage: SQLAlchemy 2 typed models, an engine per database URL, and ordered migrations.

Everything the service knows is in the database (no state in a worker's memory), so several workers and
several hosts can share one PostgreSQL. SQL is only ever built by SQLAlchemy, with bound parameters.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    DateTime,
    Engine,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    create_engine,
    event,
    inspect,
    select,
    text,
    update,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from kbdebug.diagnoser.signature import SIGNATURE_VERSION, signature, signature_key

log = logging.getLogger("kbdebug.server")


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_ref() -> str:
    """A report's public id: 96 random bits, so that no one reads the reports by counting."""
    return secrets.token_urlsafe(12)


class EncodedJSON(str):
    """A JSON column's value already encoded (kbdebug.server.prepared, in the worker that made it): written as
    it is, not encoded again."""


def _json_text(value: Any) -> str:
    """The engine's JSON encoder: what SQLAlchemy's would write (`json.dumps`), less the work already done."""
    return value if isinstance(value, EncodedJSON) else json.dumps(value)


class Base(DeclarativeBase):
    pass


class SchemaVersion(Base):
    """One row: the number of migrations applied to this database. Its presence also marks the tables as
    kbdebug's: a `reports` table without it belongs to another application and is never touched."""

    __tablename__ = "kbdebug_schema"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[int] = mapped_column(Integer)


class Report(Base):
    """One posted log and its diagnosis; `signature` is the root incident's ('' when nothing was recognised)."""

    __tablename__ = "reports"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    ref: Mapped[str | None] = mapped_column(String(32), nullable=True, unique=True)  # the id the API shows
    received_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)
    signature: Mapped[str] = mapped_column(String(32), default="")
    signature_version: Mapped[int] = mapped_column(Integer, default=0)
    rule: Mapped[str] = mapped_column(String(128), default="")
    title: Mapped[str] = mapped_column(String(512), default="")
    retry: Mapped[str] = mapped_column(String(32), default="")
    job: Mapped[str] = mapped_column(String(512), default="")
    host: Mapped[str] = mapped_column(String(512), default="")
    rank: Mapped[int | None] = mapped_column(Integer, nullable=True)
    command: Mapped[str] = mapped_column(Text, default="")
    user: Mapped[str] = mapped_column(String(256), default="")
    tags: Mapped[str] = mapped_column(String(1024), default="")
    source: Mapped[str] = mapped_column(String(1024), default="-")
    log_bytes: Mapped[int] = mapped_column(Integer, default=0)
    # The whole Diagnosis as data (schema v2 on; before, what `explain --format json` printed): the JSON
    # answer and the HTML report are both rendered from it when they are asked for.
    diagnosis: Mapped[dict[str, Any]] = mapped_column(JSON)
    html: Mapped[bytes] = mapped_column(LargeBinary, default=b"")  # rows before schema v2: their HTML, zlib

    __table_args__ = (Index("ix_reports_signature_received", "signature", "received_at"),)


class Signature(Base):
    """The first sighting of each root signature: its unique key decides, across workers, which post is new.
    `status` is the team's triage: open, resolved, ignored, or regressed (resolved, then seen again)."""

    __tablename__ = "signatures"
    signature: Mapped[str] = mapped_column(String(32), primary_key=True)
    rule: Mapped[str] = mapped_column(String(128))
    title: Mapped[str] = mapped_column(String(512))
    first_seen: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    first_report: Mapped[int] = mapped_column(Integer)
    key: Mapped[str] = mapped_column(Text, default="")  # the readable signature key: what tells two groups apart
    status: Mapped[str] = mapped_column(String(16), default="open")
    status_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


def _v1(conn: Any) -> None:
    """The first schema: reports, signatures. Later versions alter these tables in migrations of their own."""
    Base.metadata.create_all(conn, tables=[Base.metadata.tables[name] for name in ("reports", "signatures")])


_V2_COLUMNS = {
    "reports": (("ref", "VARCHAR(32)"), ("signature_version", "INTEGER NOT NULL DEFAULT 0")),
    "signatures": (("key", "TEXT NOT NULL DEFAULT ''"), ("status", "VARCHAR(16) NOT NULL DEFAULT 'open'"), ("status_at", "TIMESTAMP")),
}


def _v2(conn: Any) -> None:
    """Unguessable report ids, the signature version of each row, and triage. Columns a fresh v1 already
    created (from today's models) are not added twice."""
    for table, columns in _V2_COLUMNS.items():
        have = {c["name"] for c in inspect(conn).get_columns(table)}
        for name, ddl in columns:
            if name not in have:
                kind = "TIMESTAMP WITH TIME ZONE" if ddl == "TIMESTAMP" and conn.dialect.name == "postgresql" else ddl
                conn.execute(text(f'ALTER TABLE {table} ADD COLUMN "{name}" {kind}'))
    if "ix_reports_ref" not in {i["name"] for i in inspect(conn).get_indexes("reports")} and not any(
        c["column_names"] == ["ref"] for c in inspect(conn).get_unique_constraints("reports")
    ):
        conn.execute(text("CREATE UNIQUE INDEX ix_reports_ref ON reports (ref)"))
    for (rid,) in conn.execute(select(Report.id).where(Report.ref.is_(None))).all():
        conn.execute(update(Report).where(Report.id == rid).values(ref=new_ref()))


# Applied in order; the database records how many ran. Append, never edit or reorder.
MIGRATIONS: list[Callable[[Any], None]] = [_v1, _v2]
SCHEMA_VERSION = len(MIGRATIONS)


def default_url() -> str:
    """An SQLite file in the user's data directory: embedded, nothing to set up."""
    home = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return "sqlite:///" + os.path.join(home, "kbdebug", "crashes.db")


def normalise_url(url: str) -> str:
    """`postgresql://` means psycopg 3 (the driver the extra installs), not SQLAlchemy's default psycopg2."""
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def make_engine(url: str, timeout: float = 5.0) -> Engine:
    """An engine whose every wait is bounded by `timeout`: connecting, a statement, a lock, the pool."""
    url = normalise_url(url)
    if url.startswith("sqlite"):
        path = url.split(":///", 1)[1] if ":///" in url else ""
        if path and path != ":memory:":
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        busy = max(timeout * 2, 1.0)  # several writers (workers, threads) wait for each other, this long
        engine = create_engine(url, connect_args={"timeout": busy, "check_same_thread": False}, json_serializer=_json_text)

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")  # readers never block the writer
            cur.execute("PRAGMA synchronous=NORMAL")  # durable across a killed process (WAL), fast
            cur.execute(f"PRAGMA busy_timeout={int(busy * 1000)}")
            cur.close()

        return engine
    ms = int(timeout * 1000)
    args: dict[str, Any] = {}
    if url.startswith("postgresql"):
        args = {"connect_timeout": max(int(timeout), 1), "options": f"-c statement_timeout={ms * 6} -c lock_timeout={ms}"}
    return create_engine(
        url, pool_pre_ping=True, pool_size=8, max_overflow=8, pool_timeout=timeout, connect_args=args, json_serializer=_json_text
    )


def migrate(engine: Engine) -> int:
    """Apply the migrations this database has not had yet, then regroup rows signed by another signature
    version; returns the schema version. Safe to run from several processes at once on PostgreSQL (an
    advisory lock serialises them); `kbdebug serve` runs it once, before its workers start."""
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": 0x6B6264})
        tables = set(inspect(conn).get_table_names())
        if "kbdebug_schema" not in tables and tables & {"reports", "signatures"}:
            taken = ", ".join(sorted(tables & {"reports", "signatures"}))
            raise RuntimeError(f"the database already has tables kbdebug did not create ({taken}): give kbdebug a database of its own")
        Base.metadata.create_all(conn, tables=[Base.metadata.tables["kbdebug_schema"]])
        with Session(bind=conn) as session:
            row = session.scalars(select(SchemaVersion)).first()
            done = row.version if row is not None else 0
            if done > SCHEMA_VERSION:
                raise RuntimeError(f"the database's schema is version {done}, newer than this kbdebug's {SCHEMA_VERSION}")
            for step in MIGRATIONS[done:]:
                step(conn)
            if row is None:
                session.add(SchemaVersion(id=1, version=SCHEMA_VERSION))
            else:
                row.version = SCHEMA_VERSION
            session.flush()
            moved = regroup(session)
    if moved:
        log.warning(
            "kbdebug: %d stored report(s) were signed by another signature version: regrouped under version %d", moved, SIGNATURE_VERSION
        )
    return SCHEMA_VERSION


def regroup(session: Session, batch: int = 500) -> int:
    """Sign again, from its stored facts, every report signed by another signature version, and rebuild
    the first sightings of the signatures that changed (a signature new to the table starts open, first
    seen at its earliest report). Returns how many reports were signed again."""
    moved, changed = 0, set()
    while True:
        rows = session.scalars(select(Report).where(Report.signature_version != SIGNATURE_VERSION).order_by(Report.id).limit(batch)).all()
        if not rows:
            break
        for r in rows:
            incidents = [dict(inc) for inc in (r.diagnosis or {}).get("incidents") or []]
            for inc in incidents:
                inc["signature_key"] = signature_key(str(inc.get("rule") or ""), inc.get("facts") or {})
                inc["signature"] = signature(inc["signature_key"])
            new = incidents[0]["signature"] if incidents else ""
            if new != r.signature:
                changed.update({r.signature, new})
            r.diagnosis = {**(r.diagnosis or {}), "incidents": incidents}
            r.signature, r.signature_version = new, SIGNATURE_VERSION
            moved += 1
        session.flush()
    changed.discard("")
    for sig in changed:
        old = session.get(Signature, sig)
        first = session.scalars(select(Report).where(Report.signature == sig).order_by(Report.received_at, Report.id).limit(1)).first()
        if first is None:
            if old is not None:
                session.delete(old)
            continue
        key = ((first.diagnosis.get("incidents") or [{}])[0]).get("signature_key") or ""
        if old is None:
            session.add(
                Signature(signature=sig, rule=first.rule, title=first.title, first_seen=first.received_at, first_report=first.id, key=key)
            )
        else:
            old.first_seen, old.first_report, old.key = first.received_at, first.id, key
    session.flush()
    return moved
