"""The service's storage: SQLAlchemy 2 typed models, an engine per database URL, and ordered migrations.

Everything the service knows is in the database (no state in a worker's memory), so several workers and
several hosts can share one PostgreSQL. SQL is only ever built by SQLAlchemy, with bound parameters.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, DateTime, Engine, Index, Integer, LargeBinary, String, Text, create_engine, event, select, text
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    pass


class SchemaVersion(Base):
    """One row: the number of migrations applied to this database."""

    __tablename__ = "kbdebug_schema"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[int] = mapped_column(Integer)


class Report(Base):
    """One posted log and its diagnosis; `signature` is the root incident's ('' when nothing was recognised)."""

    __tablename__ = "reports"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    received_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)
    signature: Mapped[str] = mapped_column(String(32), default="")
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
    diagnosis: Mapped[dict[str, Any]] = mapped_column(JSON)  # exactly what `explain --format json` prints
    html: Mapped[bytes] = mapped_column(LargeBinary)  # the HTML report, zlib-compressed, rendered when posted

    __table_args__ = (Index("ix_reports_signature_received", "signature", "received_at"),)


class Signature(Base):
    """The first sighting of each root signature: its unique key decides, across workers, which post is new."""

    __tablename__ = "signatures"
    signature: Mapped[str] = mapped_column(String(32), primary_key=True)
    rule: Mapped[str] = mapped_column(String(128))
    title: Mapped[str] = mapped_column(String(512))
    first_seen: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    first_report: Mapped[int] = mapped_column(Integer)


def _v1(conn: Any) -> None:
    """The first schema: reports, signatures. Later versions alter these tables in migrations of their own."""
    Base.metadata.create_all(conn, tables=[Base.metadata.tables[name] for name in ("reports", "signatures")])


# Applied in order; the database records how many ran. Append, never edit or reorder.
MIGRATIONS: list[Callable[[Any], None]] = [_v1]
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


def make_engine(url: str) -> Engine:
    url = normalise_url(url)
    if url.startswith("sqlite"):
        path = url.split(":///", 1)[1] if ":///" in url else ""
        if path and path != ":memory:":
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        # several writers (workers, threads) wait for each other instead of failing with "database is locked"
        engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")  # readers never block the writer
            cur.execute("PRAGMA synchronous=NORMAL")  # durable across a killed process (WAL), fast
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=8, max_overflow=8)


def migrate(engine: Engine) -> int:
    """Apply the migrations this database has not had yet; returns the schema version. Safe to run from
    several processes at once on PostgreSQL (an advisory lock serialises them); `kbdebug serve` runs it once,
    before its workers start."""
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": 0x6B6264})
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
    return SCHEMA_VERSION
