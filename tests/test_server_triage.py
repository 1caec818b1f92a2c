"""What a team lead needs (#38 item 9) and versioned signatures (#34): retention, delete by report and by
group, logs that are not stored as logs, unrecognised logs shown, groups told apart by site, job links and
sources, /docs offline, triage with regressions that fire the webhook once; a change of signature version
regroups stored reports at start-up. SQLite and, when one is reachable, PostgreSQL."""

from __future__ import annotations

import json
import logging
import re
import time
from datetime import timedelta
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient
from serverkit import INDEX, OOM, Receiver, fresh_db
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from kbdebug.server import db, store
from kbdebug.server.app import Settings, create_app

OTHER_SITE = INDEX.replace(b"/job/train.py", b"/job/eval.py").replace(b"in step", b"in score")  # same rule and title


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return fresh_db(request.param, tmp_path)


def client(url: str, **settings: object) -> TestClient:
    return TestClient(create_app(Settings(db=url, **settings)), base_url="http://localhost", headers={"X-Kbdebug-Client": "t"})  # type: ignore[arg-type]


def test_retention_and_delete_by_report_and_by_group(db_url: str) -> None:
    c = client(db_url)
    old = c.post("/v1/diagnose", content=OOM).headers["x-kbdebug-report"]
    refs = [c.post("/v1/diagnose", params={"job": f"j{i}"}, content=INDEX).headers["x-kbdebug-report"] for i in range(3)]
    engine = c.app.state.engine  # type: ignore[attr-defined]
    with Session(engine) as s, s.begin():
        s.execute(update(db.Report).where(db.Report.ref == old).values(received_at=db.utcnow() - timedelta(days=91)))
    kept = client(db_url, keep="90d")  # retention runs at start-up (and after posts, every few minutes)
    assert kept.get(f"/v1/reports/{old}").status_code == 404
    assert [g["rule"] for g in kept.get("/v1/crashes").json()["crashes"]] == ["index_out_of_bounds"]  # the emptied group went too
    assert kept.delete(f"/v1/reports/{refs[0]}").json() == {"deleted": 1}
    assert kept.get(f"/v1/reports/{refs[0]}").status_code == 404 and kept.delete(f"/v1/reports/{refs[0]}").status_code == 404
    sig = kept.get("/v1/crashes").json()["crashes"][0]["signature"]
    assert TestClient(kept.app, base_url="http://localhost").delete(f"/v1/crashes/{sig}").status_code == 403  # no client header
    assert kept.delete(f"/v1/crashes/{sig}").json() == {"deleted": 2}
    assert kept.get(f"/v1/crashes/{sig}").status_code == 404 and kept.get("/v1/health").json()["reports"] == 0
    with pytest.raises(ValueError, match="keep='soon'"):
        create_app(Settings(db=db_url, keep="soon"))


def test_what_is_not_a_log_is_not_stored_as_one(db_url: str) -> None:
    c = client(db_url)
    for body, headers, said in (
        (b"", {}, "the body is empty"),
        (b"  \n\n", {}, "the body is empty"),
        (b'{"log": "Traceback ..."}', {"content-type": "application/json"}, "not as JSON"),
        (b'{"incidents": []}', {"content-type": "text/plain"}, "is a JSON document, not a log"),
    ):
        r = c.post("/v1/diagnose", content=body, headers=headers)
        assert r.status_code == 400 and said in r.json()["detail"], body
    assert c.get("/v1/health").json()["reports"] == 0


def test_dashboard_shows_unrecognised_logs_sites_job_links_and_sources(db_url: str) -> None:
    c = client(db_url)
    c.post("/v1/diagnose", params={"job": "nightly 7", "source": "rank0.log"}, content=INDEX)
    c.post("/v1/diagnose", params={"job": "eval"}, content=OTHER_SITE)
    c.post("/v1/diagnose", params={"job": "quiet", "source": "fine.log"}, content=b"epoch 3 loss 0.12\nall done\n")
    html = c.get("/").text
    assert html.count('<tr class="group">') == 2 and html.count("advanced-indexing index out of bounds") == 2
    sites = re.findall(r'<span class="muted site"[^>]*>([^<]*)</span>', html)
    assert len(set(sites)) == 2 and any("train.py:step" in s for s in sites) and any("eval.py:score" in s for s in sites)
    assert '<a href="/?job=nightly%207">nightly 7</a>' in html
    assert html.count('<tr class="unrecognised">') == 1 and "fine.log" in html
    assert c.get("/v1/unrecognised").json()["count"] == 1
    sig = next(g["signature"] for g in c.get("/v1/crashes").json()["crashes"] if g["jobs"] == ["nightly 7"])
    page = c.get(f"/crashes/{sig}").text
    assert "<th>source</th>" in page and "<td>rank0.log</td>" in page and '<a href="/?job=nightly%207">' in page


def test_docs_work_offline_and_document_every_answer(db_url: str) -> None:
    c = client(db_url)
    page = c.get("/docs")
    assert page.status_code == 200 and "<script" not in page.text and not re.search(r'(src|href)="https?:', page.text)
    schema = c.get("/openapi.json").json()
    for path, methods in schema["paths"].items():
        assert f"{path}</code>" in page.text
        for method, op in methods.items():
            ok = next(r for code, r in op["responses"].items() if code.startswith("2"))
            assert ok.get("content"), (method, path)  # every answer has its schema
    assert {"Group", "GroupDetail", "Health", "Problem", "Triage"} <= set(schema["components"]["schemas"])


def test_triage_and_a_regression_fires_the_webhook_once(db_url: str) -> None:
    hook = Receiver()
    try:
        c = client(db_url, webhook=hook.url, public_url="https://crashes.example")
        sig = c.post("/v1/diagnose", content=INDEX).json()["incidents"][0]["signature"]
        assert c.patch(f"/v1/crashes/{sig}", json={"status": "resolved"}).json() == {"status": "resolved"}
        assert c.get(f"/v1/crashes/{sig}").json()["status"] == "resolved"
        assert c.patch(f"/v1/crashes/{sig}", json={"status": "regressed"}).status_code == 422  # set by a post only
        assert c.patch("/v1/crashes/000000000000", json={"status": "ignored"}).status_code == 404
        for _ in range(3):
            c.post("/v1/diagnose", content=INDEX)
        assert c.get(f"/v1/crashes/{sig}").json()["status"] == "regressed"
        assert [g["signature"] for g in c.get("/v1/crashes", params={"status": "regressed"}).json()["crashes"]] == [sig]
        deadline = time.monotonic() + 10
        while len(hook.bodies) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        events = [json.loads(b)["event"] for b in hook.bodies]
        assert events == ["new_signature", "regressed"]
        assert json.loads(hook.bodies[1])["text"].startswith("Regressed (was resolved): advanced-indexing")
        c.patch(f"/v1/crashes/{sig}", json={"status": "ignored"})
        c.post("/v1/diagnose", content=INDEX)
        assert c.get(f"/v1/crashes/{sig}").json()["status"] == "ignored"
        assert sig not in c.get("/").text and "IGNORED" in c.get("/", params={"status": "ignored"}).text  # hidden unless asked for
    finally:
        hook.close()


def test_a_new_signature_version_regroups_stored_reports(
    db_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    c = client(db_url)
    c.post("/v1/diagnose", content=INDEX)
    c.post("/v1/diagnose", content=OTHER_SITE)
    c.post("/v1/diagnose", content=OOM)
    assert len(c.get("/v1/crashes").json()["crashes"]) == 3
    monkeypatch.setattr(db, "SIGNATURE_VERSION", 2)
    monkeypatch.setattr(store, "SIGNATURE_VERSION", 2)
    monkeypatch.setattr(db, "signature_key", lambda rule, facts: f"{rule} only")  # version 2 groups by rule
    with caplog.at_level(logging.WARNING, logger="kbdebug.server"):
        again = client(db_url)
    assert "3 stored report(s) were signed by another signature version: regrouped under version 2" in caplog.text
    crashes = again.get("/v1/crashes").json()["crashes"]
    assert sorted((g["rule"], g["count"], g["signature_version"]) for g in crashes) == [("cuda_oom", 1, 2), ("index_out_of_bounds", 2, 2)]
    index = next(g for g in crashes if g["rule"] == "index_out_of_bounds")
    assert index["key"] == "index_out_of_bounds only"
    assert again.get(f"/v1/reports/{index['example']['report']}").json()["incidents"][0]["signature"] == index["signature"]
    with Session(again.app.state.engine) as s:  # type: ignore[attr-defined]
        assert set(s.scalars(select(db.Report.signature_version))) == {2}
        assert len(s.scalars(select(db.Signature)).all()) == 2  # the old groups' first sightings are gone
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="kbdebug.server"):
        client(db_url)
    assert "regrouped" not in caplog.text  # once
