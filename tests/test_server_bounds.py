"""Bounded work and honest failures (#38 items 3, 4 and 8): a page's size bounded by its range, a diagnosis by
a time budget in a pool of workers, and every failure a JSON sentence (503 with Retry-After when the
database cannot be used), the same on SQLite and PostgreSQL."""

from __future__ import annotations

import re
import socket
import threading
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient
from serverkit import INDEX, fresh_db
from sqlalchemy import event, text

from kbdebug.server import db
from kbdebug.server.app import Settings, create_app
from kbdebug.server.pages import MAX_BARS

HEADERS = {"X-Kbdebug-Client": "test"}


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return fresh_db(request.param, tmp_path)


def client(url: str, **settings: object) -> TestClient:
    return TestClient(create_app(Settings(db=url, **settings)), base_url="http://localhost", headers=HEADERS)  # type: ignore[arg-type]


def retry_loop(size: int) -> bytes:
    """A retry loop's log: the same short traceback over and over (the issue's 4 MiB request)."""
    one = b'Traceback (most recent call last):\n  File "train.py", line 10, in step\n    x = f()\nRuntimeError: boom\n'
    return one * (size // len(one))


def test_a_page_is_bounded_by_its_range(db_url: str) -> None:
    c = client(db_url)
    c.post("/v1/diagnose", content=INDEX)
    for since in ("0001-01-01", "99999999999999999999d", "1900-01-01T00:00:00+14:00"):
        page = c.get("/", params={"since": since})
        assert page.status_code == 200, since
        assert 0 < len(re.findall(r"<rect ", page.text)) <= MAX_BARS and len(page.text) < 100_000
        assert len(c.get("/v1/crashes", params={"since": since}).json()["crashes"]) == 1
    for bad in ("yesterday-ish", "0000-01-01", "9" * 400):
        r = c.get("/v1/crashes", params={"since": bad})
        assert r.status_code == 422 and isinstance(r.json()["detail"], str)


def test_a_log_over_the_time_budget_is_refused_and_the_pool_goes_on(db_url: str) -> None:
    slow = retry_loop(4 << 20)
    tight = client(db_url, diagnose_timeout=0.05, diagnose_workers=2)
    r = tight.post("/v1/diagnose", content=slow)
    assert r.status_code == 422 and "budget of 0.05 s" in r.json()["detail"] and "not stored" in r.json()["detail"]
    assert tight.get("/v1/health").json()["reports"] == 0
    c = client(db_url, diagnose_workers=2)  # the same pool: its worker was replaced
    answers: dict[str, int] = {}
    big = threading.Thread(target=lambda: answers.update(big=c.post("/v1/diagnose", content=slow).status_code))
    big.start()
    answers["small"] = c.post("/v1/diagnose", content=INDEX).status_code  # no global lock: another worker takes it
    big.join()
    assert answers["small"] == 201
    assert answers["big"] in (201, 422)  # diagnosed within the 10 s budget, or refused with a sentence


def test_metadata_is_stored_or_refused_the_same_on_every_database(db_url: str) -> None:
    c = client(db_url)
    for params, said in (
        ({"job": "j" * 513}, "job is 513 characters long; this server takes at most 512"),
        ({"user": "u" * 257}, "user is 257 characters long"),
        ({"rank": str(2**31)}, "rank: Input should be less than or equal to 2147483647"),
        ({"rank": "-1"}, "rank: Input should be greater than or equal to 0"),
        ({"rank": "three"}, "rank: Input should be a valid integer"),
        ({"host": "gpu\x00"}, "host holds a NUL character"),
        ({"tags": "a\x00b"}, "tags holds a NUL character"),
    ):
        r = c.post("/v1/diagnose", params=params, content=INDEX)
        assert r.status_code == 422 and said in r.json()["detail"], (params, r.json())
    ok = c.post("/v1/diagnose", params={"job": "j" * 512, "user": "u" * 256, "rank": str(2**31 - 1)}, content=INDEX)
    assert ok.status_code == 201
    occurrence = c.get(f"/v1/crashes/{ok.json()['incidents'][0]['signature']}").json()["occurrences"][0]
    assert (len(occurrence["job"]), len(occurrence["user"]), occurrence["rank"]) == (512, 256, 2**31 - 1)
    assert c.get("/v1/health").json()["reports"] == 1


def test_every_failure_is_a_sentence(db_url: str) -> None:
    c = client(db_url)
    for path in ("/v1/reports/9223372036854775808", "/v1/reports/-1", "/v1/crashes/nope", "/v1/nothing-here"):
        r = c.get(path)
        assert r.status_code == 404 and isinstance(r.json()["detail"], str), path
    assert c.put("/v1/crashes").json()["detail"] == "PUT is not allowed on /v1/crashes"
    assert c.get("/v1/crashes", params={"limit": "0"}).json() == {"detail": "limit: Input should be greater than or equal to 1 (got '0')"}
    page = c.get("/crashes/ffffffffffff", headers={"accept": "text/html,application/xhtml+xml"})
    assert page.status_code == 404 and page.headers["content-type"].startswith("text/html") and "no crash with signature" in page.text


def _read_only(engine: object, dialect: str) -> None:
    @event.listens_for(engine, "connect")
    def _deny(dbapi_conn: object, _record: object) -> None:
        cur = dbapi_conn.cursor()  # type: ignore[attr-defined]
        cur.execute("PRAGMA query_only = ON" if dialect == "sqlite" else "SET default_transaction_read_only = on")
        cur.close()
        dbapi_conn.commit()  # type: ignore[attr-defined]  # a SET in a transaction rolled back would be undone


def test_a_database_that_takes_no_write_is_503_and_health_says_so(db_url: str) -> None:
    c = client(db_url)
    engine = db.make_engine(db_url)
    _read_only(engine, engine.dialect.name)
    c.app.state.engine = engine  # type: ignore[attr-defined]
    for r in (c.post("/v1/diagnose", content=INDEX), c.get("/v1/health")):
        assert r.status_code == 503 and r.headers["retry-after"] == "30"
        assert r.json()["detail"].startswith("the database cannot be used just now")
    engine.dispose()


def test_a_database_that_is_down_or_hung_is_503_not_a_hang(tmp_path: Path) -> None:
    c = client(f"sqlite:///{tmp_path / 'c.db'}")
    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(8)  # accepts, never answers: a hung PostgreSQL
    try:
        for url in ("postgresql://kb@127.0.0.1:1/none", f"postgresql://kb@127.0.0.1:{hung.getsockname()[1]}/none"):
            c.app.state.engine = db.make_engine(url, timeout=1)  # type: ignore[attr-defined]
            for r in (c.post("/v1/diagnose", content=INDEX), c.get("/v1/health"), c.get("/v1/crashes")):
                assert r.status_code == 503 and "retry-after" in r.headers and "database" in r.json()["detail"], url
    finally:
        hung.close()


def test_another_applications_reports_table_is_never_used(db_url: str) -> None:
    engine = db.make_engine(db_url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE reports (id INTEGER PRIMARY KEY, body TEXT)"))
    try:
        with pytest.raises(RuntimeError, match=r"tables kbdebug did not create \(reports\): give kbdebug a database of its own"):
            create_app(Settings(db=db_url))
        with engine.connect() as conn:
            assert [c[1] for c in conn.execute(text("SELECT 0, body FROM reports"))] == []  # untouched
    finally:
        with engine.begin() as conn:
            conn.execute(text("DROP TABLE reports"))
        engine.dispose()


def test_a_held_lock_is_503_within_the_database_timeout(db_url: str) -> None:
    c = client(db_url, db_timeout=0.5)
    holder = db.make_engine(db_url)
    with holder.connect() as conn:
        if holder.dialect.name == "sqlite":
            conn.exec_driver_sql("BEGIN EXCLUSIVE")
        else:
            conn.execute(text("LOCK TABLE reports, kbdebug_schema IN ACCESS EXCLUSIVE MODE"))
        for r in (c.post("/v1/diagnose", content=INDEX), c.get("/v1/health")):
            assert r.status_code == 503 and r.headers["retry-after"] == "30", r.json()
        conn.rollback()
    assert c.post("/v1/diagnose", content=INDEX).status_code == 201
    holder.dispose()
