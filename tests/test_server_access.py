"""Who may read and write (#38 items 2 and 6): with a token every read needs it too and report ids cannot be
counted; a write needs a header no cross-site form or no-cors fetch can send, and the Host must name this
service (DNS rebinding), on loopback too. SQLite and, when one is reachable, PostgreSQL."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient
from serverkit import INDEX, fresh_db

from kbdebug.server.app import Settings, create_app


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return fresh_db(request.param, tmp_path)


def bare(url: str, base: str = "http://localhost", **settings: object) -> TestClient:
    """A client that sends only what a browser's simple request would."""
    return TestClient(create_app(Settings(db=url, **settings)), base_url=base)  # type: ignore[arg-type]


def test_with_a_token_every_read_needs_it_and_ids_cannot_be_counted(db_url: str) -> None:
    c = bare(db_url, token="s3cret")
    bearer = {"authorization": "Bearer s3cret"}
    posted = c.post("/v1/diagnose", content=INDEX, headers=bearer)
    assert posted.status_code == 201
    at = posted.headers["location"]
    assert re.fullmatch(r"/v1/reports/[\w-]{16}", at)  # 96 random bits, not a row number
    sig = posted.json()["incidents"][0]["signature"]
    reads = ["/v1/crashes", f"/v1/crashes/{sig}", at, "/v1/rules", "/v1/unrecognised", "/", f"/crashes/{sig}"]
    for path in reads:
        r = c.get(path)
        assert r.status_code == 401, path
        assert r.headers["www-authenticate"].startswith("Basic")  # a browser asks for it itself
        assert c.get(path, headers={"authorization": "Bearer wrong"}).status_code == 401
        assert c.get(path, headers=bearer).status_code == 200, path
    assert c.get("/v1/crashes").json() == {"detail": c.get("/v1/crashes").json()["detail"]}  # a sentence, no data
    basic = "Basic " + base64.b64encode(b"anyone:s3cret").decode()
    assert c.get("/", headers={"authorization": basic}).status_code == 200  # the browser's prompt: the token as password
    assert c.get("/v1/reports/1", headers=bearer).status_code == 404
    assert c.get("/v1/health").status_code == 200  # liveness probes need no token


def test_a_write_needs_a_header_no_cross_site_page_can_send(db_url: str) -> None:
    c = bare(db_url)
    no_cors = c.post("/v1/diagnose", content=INDEX, headers={"content-type": "text/plain", "origin": "https://evil.example"})
    assert no_cors.status_code == 403 and "X-Kbdebug-Client" in no_cors.json()["detail"]
    form = c.post("/v1/diagnose", content=b"x=" + INDEX, headers={"content-type": "text/plain"})  # <form enctype=text/plain>
    assert form.status_code == 403
    urlencoded = c.post("/v1/diagnose", data={"log": INDEX.decode()})
    assert urlencoded.status_code == 403
    assert c.get("/v1/health").json()["reports"] == 0
    assert c.post("/v1/diagnose", content=INDEX, headers={"x-kbdebug-client": "curl"}).status_code == 201
    # kbdebug's own client sends it
    assert "X-Kbdebug-Client" in Path(__file__).resolve().parent.parent.joinpath("kbdebug/runtime/reporting.py").read_text()


def test_the_host_must_name_this_service_even_on_loopback(db_url: str) -> None:
    c = bare(db_url, base="http://attacker.example:8000")  # DNS rebinding: the attacker's name, our address
    for r in (c.get("/v1/crashes"), c.get("/"), c.post("/v1/diagnose", content=INDEX, headers={"x-kbdebug-client": "x"})):
        assert r.status_code == 421 and "attacker.example" in r.json()["detail"]
    assert c.get("/v1/health").status_code == 200  # a liveness probe comes by address
    for base in ("http://127.0.0.1:8000", "http://localhost", "http://[::1]:8000"):
        assert bare(db_url, base=base).get("/v1/crashes").status_code == 200, base
    named = bare(db_url, base="https://crashes.example", public_url="https://crashes.example/")
    assert named.get("/v1/crashes").status_code == 200
    allowed = bare(db_url, base="http://gpu-box:8000", allowed_hosts=("gpu-box",))
    assert allowed.get("/v1/crashes").status_code == 200
    assert bare(db_url, base="http://gpu-box:8000").get("/v1/crashes").status_code == 421


def test_the_group_page_form_is_a_same_origin_write(db_url: str) -> None:
    c = bare(db_url, base="http://127.0.0.1:8000")
    sig = c.post("/v1/diagnose", content=INDEX, headers={"x-kbdebug-client": "t"}).json()["incidents"][0]["signature"]
    assert 'action="/crashes/' in c.get(f"/crashes/{sig}").text
    cross = c.post(f"/crashes/{sig}/status", data={"status": "resolved"}, headers={"origin": "https://evil.example"})
    assert cross.status_code == 403
    own = c.post(f"/crashes/{sig}/status", data={"status": "resolved"}, headers={"origin": "http://127.0.0.1:8000"}, follow_redirects=False)
    assert own.status_code == 303 and own.headers["location"] == f"/crashes/{sig}"
    assert c.get("/v1/crashes").json()["crashes"][0]["status"] == "resolved"
