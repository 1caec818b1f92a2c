"""The crash service's API and pages in process (FastAPI's TestClient), against SQLite and, when one is
reachable (KBDEBUG_TEST_POSTGRES, set by .ci/run), a real PostgreSQL."""

from __future__ import annotations

import json
import re
import time
from datetime import timedelta, timezone
from html import unescape
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("sqlalchemy")
from conftest import ROOT, run_cli
from fastapi.testclient import TestClient
from serverkit import EXAMPLE, HOSTILE, HOSTILE_VALUE, INDEX, OOM, Receiver, fresh_db, multirank

from kbdebug.diagnosis import Diagnosis
from kbdebug.server import db, store
from kbdebug.server.app import Settings, create_app
from kbdebug.server.prepared import prepare


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return fresh_db(request.param, tmp_path)


def client(url: str, **settings: object) -> TestClient:
    """An in-process client on a loopback Host that says it is a client (X-Kbdebug-Client), as kbdebug's own does."""
    return TestClient(create_app(Settings(db=url, **settings)), base_url="http://localhost", headers={"X-Kbdebug-Client": "test"})  # type: ignore[arg-type]


def test_diagnose_returns_what_explain_prints_and_stores_it(db_url: str) -> None:
    expected = json.loads(run_cli("explain", "--format", "json", "examples/segmentation_crash.log").stdout)
    c = client(db_url)
    r = c.post("/v1/diagnose", params={"source": "examples/segmentation_crash.log", "job": "seg-7"}, content=EXAMPLE)
    assert r.status_code == 201
    assert r.json() == expected
    assert re.fullmatch(r"/v1/reports/[\w-]{16}", r.headers["location"])
    assert c.get(r.headers["location"]).json() == expected
    assert c.get("/v1/health").json()["reports"] == 1


def test_a_post_answers_and_stores_what_its_worker_encoded(db_url: str) -> None:
    """The worker encodes the diagnosis as it is stored and as the post's answer; the server writes the one as
    it is (not encoded twice) and sends the other, byte for byte what the stored report's JSON is."""
    c = client(db_url)
    r = c.post("/v1/diagnose", content=INDEX)
    assert r.status_code == 201 and r.headers["content-type"] == "application/json"
    assert r.content == c.get(r.headers["location"]).content
    engine = db.make_engine(db_url)
    prepared = prepare(Diagnosis(source="rank3.log", notes=["a note"]))
    saved = store.save(engine, prepared, store.Meta(job="j"), 1)
    found = store.report(engine, saved.ref)
    assert found is not None and found[0].model_dump(mode="json") == json.loads(prepared.data)
    assert found[0].source == "rank3.log" and found[0].notes == ["a note"]
    engine.dispose()


def test_multipart_upload_is_the_same_log(db_url: str) -> None:
    c = client(db_url)
    raw = c.post("/v1/diagnose", content=INDEX, headers={"content-type": "text/plain"}).json()
    upload = c.post("/v1/diagnose", files={"file": ("rank3.log", INDEX, "text/plain")}).json()
    assert upload["source"] == "rank3.log"
    assert upload["incidents"][0]["signature"] == raw["incidents"][0]["signature"]
    assert upload["incidents"][0]["rule"] == "index_out_of_bounds"
    empty = c.post("/v1/diagnose", files={"note": (None, "no log here")})  # a multipart form without a file
    assert empty.status_code == 422 and "holds no file" in empty.json()["detail"]
    assert c.get("/v1/health").json()["reports"] == 2


def test_crashes_group_by_root_signature_each_diagnosis_once(db_url: str) -> None:
    c = client(db_url)
    for i in range(3):
        c.post("/v1/diagnose", params={"job": f"train-{i % 2}", "host": f"node{i}", "rank": str(i)}, content=INDEX)
    c.post("/v1/diagnose", params={"job": "big", "host": "node9"}, content=multirank())  # 1 root, 2 consequences folded
    c.post("/v1/diagnose", params={"job": "oom-job", "host": "node1"}, content=OOM)
    c.post("/v1/diagnose", content=b"all fine, nothing crashed\n")  # nothing recognised: stored, in no group
    crashes = c.get("/v1/crashes").json()["crashes"]
    by_rule = {g["rule"]: g for g in crashes}
    assert sorted((g["rule"], g["count"]) for g in crashes) == [("cuda_oom", 1), ("index_out_of_bounds", 1), ("index_out_of_bounds", 3)]
    assert sum(g["count"] for g in crashes) == 5  # the multi-rank job counts once, not once per rank or consequence
    assert crashes[0]["rule"] == "cuda_oom"  # most recently seen first
    idx = next(g for g in crashes if g["count"] == 3)
    assert sorted(idx["jobs"]) == ["train-0", "train-1"] and sorted(idx["hosts"]) == ["node0", "node1", "node2"]
    assert idx["retry"] == "no" and idx["new"] is True and idx["status"] == "open" and idx["signature_version"] == 1
    assert c.get(f"/v1/reports/{idx['example']['report']}").json()["incidents"][0]["signature"] == idx["signature"]
    assert idx["title"] == "advanced-indexing index out of bounds"
    assert by_rule["cuda_oom"]["retry"] == "smaller"
    assert idx["first_seen"] <= idx["last_seen"]
    assert c.get("/v1/health").json()["reports"] == 6


def test_filters_and_one_group(db_url: str) -> None:
    c = client(db_url)
    c.post("/v1/diagnose", params={"job": "a"}, content=INDEX)
    c.post("/v1/diagnose", params={"job": "b", "host": "gpu7", "rank": "5", "command": "python train.py"}, content=OOM)
    assert [g["rule"] for g in c.get("/v1/crashes", params={"rule": "cuda_oom"}).json()["crashes"]] == ["cuda_oom"]
    assert [g["rule"] for g in c.get("/v1/crashes", params={"job": "a"}).json()["crashes"]] == ["index_out_of_bounds"]
    assert len(c.get("/v1/crashes", params={"since": "1h"}).json()["crashes"]) == 2
    assert c.get("/v1/crashes", params={"since": "2999-01-01"}).json() == {"crashes": []}
    later = (store.utcnow() + timedelta(minutes=30)).astimezone(timezone(timedelta(hours=-5)))  # UTC+30 min, said in UTC-5
    assert c.get("/v1/crashes", params={"since": later.isoformat()}).json() == {"crashes": []}
    assert c.get("/v1/crashes", params={"since": "yesterday-ish"}).status_code == 422
    sig = c.get("/v1/crashes", params={"rule": "cuda_oom"}).json()["crashes"][0]["signature"]
    group = c.get(f"/v1/crashes/{sig}").json()
    assert group["count"] == 1 and group["diagnosis"]["incidents"][0]["rule"] == "cuda_oom"
    assert [(o["job"], o["host"], o["rank"], o["command"]) for o in group["occurrences"]] == [("b", "gpu7", 5, "python train.py")]
    assert c.get("/v1/crashes/000000000000").status_code == 404


def test_report_as_html_by_accept_or_format(db_url: str) -> None:
    c = client(db_url)
    at = c.post("/v1/diagnose", params={"source": "examples/segmentation_crash.log"}, content=EXAMPLE).headers["location"]
    for r in (c.get(at, headers={"accept": "text/html"}), c.get(at, params={"format": "html"})):
        assert r.headers["content-type"].startswith("text/html")
        assert r.text == run_cli("explain", "--format", "html", "examples/segmentation_crash.log").stdout.decode()  # rendered when asked
    assert c.get(at).json()["incidents"][0]["rule"] == "nll_target_out_of_range"
    assert c.get("/v1/reports/99").status_code == 404


def test_rules_and_openapi(db_url: str) -> None:
    c = client(db_url)
    rules = {r["id"]: r for r in c.get("/v1/rules").json()["rules"]}
    assert rules["cuda_oom"]["retry"] == "smaller" and "nll_target_out_of_range" in rules
    paths = c.get("/openapi.json").json()["paths"]
    assert {"/v1/diagnose", "/v1/crashes", "/v1/crashes/{signature}", "/v1/reports/{report}", "/v1/rules", "/v1/health"} <= set(paths)


def test_oversize_upload_is_413_with_a_clear_message(db_url: str) -> None:
    c = client(db_url, max_upload=1000)
    r = c.post("/v1/diagnose", content=b"x" * 1001)
    assert r.status_code == 413
    assert "at most 1000 bytes" in r.json()["detail"]

    def chunks():  # no Content-Length: the streamed body is counted
        for _ in range(20):
            yield b"y" * 100

    r = c.post("/v1/diagnose", content=chunks())
    assert r.status_code == 413 and "at most 1000 bytes" in r.json()["detail"]
    assert c.post("/v1/diagnose", content=INDEX).status_code == 201
    assert c.get("/v1/health").json()["reports"] == 1


def test_token_guards_writes(db_url: str) -> None:
    c = client(db_url, token="s3cret")
    assert c.post("/v1/diagnose", content=INDEX).status_code == 401
    assert c.post("/v1/diagnose", content=INDEX, headers={"authorization": "Bearer wrong"}).status_code == 401
    assert c.post("/v1/diagnose", content=INDEX, headers={"authorization": "Bearer s3cret"}).status_code == 201
    assert c.get("/v1/health").json()["reports"] == 1


def test_pages_escape_every_log_value(db_url: str) -> None:
    c = client(db_url)
    c.post("/v1/diagnose", params={"job": "<b>job</b>", "host": '"><script>alert(1)</script>'}, content=HOSTILE)
    dash = c.get("/")
    assert dash.headers["content-security-policy"].startswith("default-src 'none'")
    sig = c.get("/v1/crashes").json()["crashes"][0]["signature"]
    page = c.get(f"/crashes/{sig}").text
    for html in (dash.text, page):
        assert "<script>" not in html and "<b>job</b>" not in html and "<img" not in html
        assert "&lt;b&gt;job&lt;/b&gt;" in html
    assert HOSTILE_VALUE in unescape(page)  # shown as text, whole
    ref = c.get("/v1/crashes").json()["crashes"][0]["example"]["report"]
    assert "<script" not in c.get(f"/v1/reports/{ref}", params={"format": "html"}).text


def test_dashboard_shows_groups_new_marks_plot_and_filters(db_url: str) -> None:
    c = client(db_url)
    for _ in range(2):
        c.post("/v1/diagnose", params={"job": "train"}, content=INDEX)
    c.post("/v1/diagnose", params={"job": "other"}, content=OOM)
    html = c.get("/").text
    assert html.count('<tr class="group">') == 2
    assert html.count('class="new"') == 2
    assert html.index("CUDA out of memory") < html.index("advanced-indexing index out of bounds")  # newest first
    bars = [float(h) for h in re.findall(r'<rect [^>]*height="([\d.]+)"', html)]
    assert len(bars) == 15 and bars[-1] == max(bars) > 0 and not any(bars[:-1])  # two weeks by day: all of it today
    hourly = [float(h) for h in re.findall(r'<rect [^>]*height="([\d.]+)"', c.get("/", params={"since": "24h"}).text)]
    assert len(hourly) in (25, 26) and hourly[-1] > 0
    assert "3 occurrences" in html
    filtered = c.get("/", params={"rule": "cuda_oom"}).text
    assert filtered.count('<tr class="group">') == 1 and "1 occurrence " in filtered
    assert c.get("/", params={"job": "nobody"}).text.count('<tr class="group">') == 0


def test_group_page_has_guide_evidence_and_every_occurrence(db_url: str) -> None:
    c = client(db_url)
    for rank in (1, 2):
        c.post("/v1/diagnose", params={"job": "seg", "host": f"gpu{rank}", "rank": str(rank)}, content=EXAMPLE)
    sig = c.get("/v1/crashes").json()["crashes"][0]["signature"]
    html = c.get(f"/crashes/{sig}").text
    assert "How to fix" in html and "<code>" in html  # the guide's Markdown rendered
    assert "NLLLoss2d.cu:103" in html  # the evidence line
    rows = re.findall(r'<tr><td>[^<]*</td><td><a href="/\?job=seg">seg</a></td><td>(gpu\d)</td><td class="num">(\d)</td>', html)
    assert rows == [("gpu2", "2"), ("gpu1", "1")]
    assert c.get("/crashes/ffffffffffff").status_code == 404


def test_webhook_once_per_new_signature(db_url: str) -> None:
    hook = Receiver()
    try:
        c = client(db_url, webhook=hook.url + "/hook", public_url="https://crashes.example")
        c.post("/v1/diagnose", params={"job": "j1", "host": "n1"}, content=INDEX)
        c.post("/v1/diagnose", params={"job": "j2"}, content=INDEX)
        c.post("/v1/diagnose", content=OOM)
        deadline = time.monotonic() + 10
        while len(hook.bodies) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        messages = [json.loads(b) for b in hook.bodies]
        assert [m["rule"] for m in messages] == ["index_out_of_bounds", "cuda_oom"]
        first = messages[0]
        assert first["event"] == "new_signature" and first["job"] == "j1" and first["host"] == "n1"
        assert first["url"] == f"https://crashes.example/crashes/{first['signature']}"
        assert first["text"].startswith("New crash: advanced-indexing index out of bounds") and first["url"] in first["text"]
    finally:
        hook.close()


def test_a_webhook_that_is_down_fails_nothing(db_url: str) -> None:
    c = client(db_url, webhook="http://127.0.0.1:9/hook")
    assert c.post("/v1/diagnose", content=INDEX).status_code == 201
    assert c.get("/v1/health").json()["reports"] == 1


def test_schema_is_versioned_and_migrations_run_once(db_url: str) -> None:
    engine = db.make_engine(db_url)
    assert db.migrate(engine) == db.SCHEMA_VERSION == 2
    assert db.migrate(engine) == 2  # again: nothing to do
    store.save(engine, Diagnosis(), store.Meta(), 1)
    assert db.migrate(engine) == 2 and store.count(engine) == 1
    from sqlalchemy import update
    from sqlalchemy.orm import Session

    with Session(engine) as s, s.begin():
        s.execute(update(db.SchemaVersion).values(version=99))
    with pytest.raises(RuntimeError, match="version 99, newer"):
        db.migrate(engine)
    engine.dispose()


def test_sqlite_runs_in_wal_mode(tmp_path: Path) -> None:
    engine = db.make_engine(f"sqlite:///{tmp_path / 'c.db'}")
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"


def test_timeline_buckets() -> None:
    from kbdebug.server.pages import plot

    start = store.utcnow().replace(minute=0, second=0, microsecond=0)
    p = plot(start, timedelta(hours=1), [0, 2, 4])
    assert [b["h"] for b in p["bars"]] == [0, 58.0, 116.0] and p["total"] == 6 and p["unit"] == "hour"


def test_core_never_imports_the_server() -> None:
    code = "import sys, kbdebug.cli.app, kbdebug.api, kbdebug.runtime.hooks, kbdebug.render; print(sorted(m for m in ('fastapi', 'sqlalchemy', 'uvicorn') if m in sys.modules))"
    out = run_cli("-V")  # the CLI still starts
    assert out.returncode == 0
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.stdout.strip() == "[]", r.stderr
