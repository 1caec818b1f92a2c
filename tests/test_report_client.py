"""The crash service's client against a server that misbehaves (tests/hostile.py, loopback only): nothing it
answers raises, changes a job's exit status, reaches the terminal raw or receives the token at another
address; a directory of logs to a server that is down costs one post and one line."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest
from conftest import ROOT, run_cli
from hostile import Answer, canned, delayed, dribble, endless, peer, response, silent

from kbdebug.runtime import reporting

ENV = {**os.environ, "PYTHONPATH": str(ROOT), "KBDEBUG_JOB": "nightly-7", "RANK": "3"}
INDEX = (
    b"Traceback (most recent call last):\n"
    b'  File "/job/train.py", line 51, in step\n'
    b"    emb = table[ids]\n"
    b"IndexError: index 5 is out of bounds for dimension 0 with size 3\n"
)
GOOD = response(201, b'{"incidents": [{"signature": "3d8c070f95f9"}]}')

HOSTILE: dict[str, tuple[Answer, str]] = {
    "a JSON list": (canned(response(201, b"[1,2,3]")), "HTTP 201 but its answer is not a kbdebug diagnosis"),
    "an incident without a signature": (canned(response(201, b'{"incidents":[{}]}')), "is not a kbdebug diagnosis"),
    "a signature that is not one": (canned(response(201, b'{"incidents":[{"signature": "../../x"}]}')), "is not a kbdebug diagnosis"),
    "not JSON": (canned(response(201, b"<html>hello</html>")), "is not a kbdebug diagnosis"),
    "JSON nested past the recursion limit": (canned(response(201, b"[" * 100_000)), "is not a kbdebug diagnosis"),
    "a body that never ends": (endless, "its answer is over 8 MiB"),
    "a header byte every 0.5 s": (dribble(0.5), "no answer within 2 s"),
    "nothing at all": (silent, "no answer within 2 s"),
    "a 500 with a detail": (canned(response(500, b'{"detail": "database is down"}')), "HTTP 500: database is down"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_whatever_the_server_answers_is_one_line_and_no_exception(case: str) -> None:
    answer, said = HOSTILE[case]
    out = io.StringIO()
    with peer(answer) as (url, seen):
        stored = reporting.post(url, INDEX, {"job": "j"}, stream=out)
    assert stored is False and seen.count == 1
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"kbdebug: could not report to {url}: ") and said in lines[0]
    assert lines[0].endswith("(the local diagnosis is unaffected)")


def test_every_request_names_the_client_in_a_header_a_form_cannot_send() -> None:
    out = io.StringIO()
    with peer(canned(GOOD)) as (url, seen):
        assert reporting.post(url + "/", INDEX, {"job": "j", "rank": "3"}, stream=out)
    head = seen.heads[0]
    assert head[""].startswith("POST /v1/diagnose?job=j&rank=3 ")
    assert head["x-kbdebug-client"] == reporting.CLIENT == f"kbdebug/{reporting.__version__}"
    assert head["content-type"] == "text/plain; charset=utf-8" and seen.bodies == [INDEX]
    assert out.getvalue() == f"kbdebug: reported to {url}/crashes/3d8c070f95f9\n"


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_not_followed_so_the_token_stays_with_the_server_named(status: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KBDEBUG_REPORT_TOKEN", "team-t0ken")
    out = io.StringIO()
    with (
        peer(canned(GOOD)) as (elsewhere, taken),
        peer(canned(response(status, b"", {"Location": elsewhere + "/v1/diagnose"}))) as (url, seen),
    ):
        assert reporting.post(url, INDEX, stream=out) is False
    assert seen.count == 1 and seen.heads[0]["authorization"] == "Bearer team-t0ken"
    assert taken.count == 0  # another port is another origin: neither the token nor the log went there
    assert out.getvalue() == (
        f"kbdebug: could not report to {url}: HTTP {status}: it redirects to {elsewhere}/v1/diagnose; "
        "give --report that address (redirects are not followed) (the local diagnosis is unaffected)\n"
    )


def test_what_the_server_says_reaches_the_terminal_without_control_characters() -> None:
    detail = "\x1b]0;owned\x07\x1b[2J\x1b[31mbad token\x1b[0m\r\u202eevil\x00"
    raw = response(401, json.dumps({"detail": detail}).encode(), {"Location": "x"})
    out = io.StringIO()
    with peer(canned(raw)) as (url, _):
        reporting.post(url, INDEX, stream=out)
    line = out.getvalue()
    assert line == f"kbdebug: could not report to {url}: HTTP 401: bad token??evil? (the local diagnosis is unaffected)\n"
    assert reporting.printable("\x9b31mred\x1bc\ttab") == "red?tab"


@pytest.mark.parametrize("url", ["file:///etc/passwd", "not a url", "ftp://127.0.0.1/x", "http://127.0.0.1:port/"])
def test_only_http_addresses_are_posted_to(url: str) -> None:
    out = io.StringIO()
    assert reporting.post(url, INDEX, stream=out) is False
    line = out.getvalue().splitlines()
    assert len(line) == 1 and line[0].startswith(f"kbdebug: could not report to {url}: {url!r} is not ")


@pytest.mark.parametrize("case", ["a JSON list", "an incident without a signature"])
def test_run_keeps_the_jobs_exit_status_whatever_the_server_answers(case: str, tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    script.write_text("import sys\nsys.stderr.write(" + repr(INDEX.decode()) + ")\nsys.exit(3)\n")
    with peer(HOSTILE[case][0]) as (url, seen):
        r = run_cli("run", "--report", url, "--", sys.executable, str(script), env=ENV)
    err = r.stderr.decode()
    assert r.returncode == 3 and seen.count == 1
    assert "Traceback" not in err.split("IndexError: index 5")[-1]  # no traceback of kbdebug's own
    assert err.rstrip().splitlines()[-1].startswith(f"kbdebug: could not report to {url}: HTTP 201 but its answer is not")


def test_explain_of_a_directory_to_a_silent_server_posts_once_and_says_one_line(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    for i in range(21):
        (logs / f"job{i:02}.log").write_bytes(INDEX)
    with peer(silent) as (url, seen):
        r = run_cli("explain", "-q", "--report", url, str(logs), env=ENV)
        posts = seen.count
    assert r.returncode == 0 and posts == 1
    said = [ln for ln in r.stderr.decode().splitlines() if ln.startswith("kbdebug: ")]
    assert said == [f"kbdebug: could not report to {url}: no answer within 2 s (20 more logs not sent) (the local diagnosis is unaffected)"]


def test_explain_sends_every_log_to_a_server_that_answers_and_the_rank_from_rank(tmp_path: Path) -> None:
    for i in range(3):
        (tmp_path / f"job{i}.log").write_bytes(INDEX)
    with peer(canned(GOOD)) as (url, seen):
        r = run_cli("explain", "-q", "--report", url, str(tmp_path), env=ENV)
    assert r.returncode == 0 and seen.count == 3
    queries = [urllib.parse.parse_qs(h[""].split()[1].split("?")[1]) for h in seen.heads]
    assert {q["rank"][0] for q in queries} == {"3"} and {q["job"][0] for q in queries} == {"nightly-7"}
    assert sorted(q["source"][0] for q in queries) == [str(tmp_path / f"job{i}.log") for i in range(3)]
    assert r.stderr.decode().count(f"kbdebug: reported to {url}/crashes/3d8c070f95f9") == 3


def test_a_log_the_server_refuses_alone_does_not_stop_the_others(tmp_path: Path) -> None:
    too_large = canned(response(413, b'{"detail": "the log is too large"}'))
    with peer([too_large, canned(GOOD)]) as (url, seen):
        stored = reporting.report_logs(
            url,
            [(str(tmp_path / "gone.log"), None)] + [(str(ROOT / "examples" / "segmentation_crash.log"), None)] * 2,
            stream=(out := io.StringIO()),
        )
    assert stored == 1 and seen.count == 2
    assert out.getvalue().splitlines() == [
        f"kbdebug: could not report {tmp_path / 'gone.log'}: No such file or directory",
        f"kbdebug: could not report to {url}: HTTP 413: the log is too large (the local diagnosis is unaffected)",
        f"kbdebug: reported to {url}/crashes/3d8c070f95f9",
    ]


def test_install_report_survives_a_hostile_answer(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    with peer(canned(response(201, b'{"incidents": 5}'))) as (url, seen):
        script.write_text(
            f"import kbdebug\nkbdebug.install(report={url!r})\nimport sys\ndef f():\n    raise IndexError('index 5 is out of bounds for dimension 0 with size 3')\nf()\n"
        )
        r = subprocess.run([sys.executable, str(script)], capture_output=True, env=ENV, timeout=60)
    assert r.returncode == 1 and seen.count == 1
    assert r.stderr.decode().rstrip().splitlines()[-1].startswith(f"kbdebug: could not report to {url}: HTTP 201 but")


def test_a_server_that_answers_each_log_slowly_is_given_a_bounded_time_for_all(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reporting, "BATCH_LIMIT", 1.0)
    logs: list[tuple[str, list | None]] = [(str(ROOT / "examples" / "segmentation_crash.log"), None)] * 6
    out = io.StringIO()
    with peer(delayed(0.4, GOOD)) as (url, seen):
        stored = reporting.report_logs(url, logs, stream=out)
    lines = out.getvalue().splitlines()
    assert 1 <= stored == seen.count < 6
    assert lines[:-1] == [f"kbdebug: reported to {url}/crashes/3d8c070f95f9"] * stored
    assert lines[-1] == f"kbdebug: stopped reporting to {url} after 1 s: {6 - stored} logs not sent"
