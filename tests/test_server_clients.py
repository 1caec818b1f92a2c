"""The clients of the crash service: `explain --report`, `run --report`, `install(report=URL)`. A server that
is down, slow or refusing never changes the exit status, never hangs the job, never loses the local output."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest
from conftest import ROOT, run_cli
from serverkit import EXAMPLE, INDEX, Receiver, free_port, get, serve

ENV = {**os.environ, "PYTHONPATH": str(ROOT), "KBDEBUG_JOB": "nightly-7", "RANK": "3"}
EXAMPLE_PATH = "examples/segmentation_crash.log"
CRASH = "import torch\ndef step():\n    return torch.zeros(3)[torch.tensor([5])]\nstep()\n"


def cli(*args: str) -> tuple[subprocess.CompletedProcess, None]:
    """The CLI's result. What bounds a slow server is said by the client's own line ("no answer within 2 s":
    its deadline fired, not the server's 30 s); no test here times the run (a loaded machine is slow)."""
    return run_cli(*args, env=ENV), None


def down_url() -> str:
    return f"http://127.0.0.1:{free_port()}"  # nothing listens there


def test_explain_reports_without_changing_its_output() -> None:
    hook = Receiver()
    try:
        plain, _ = cli("explain", "--format", "json", EXAMPLE_PATH)
        reported, _ = cli("explain", "--format", "json", "--report", hook.url, EXAMPLE_PATH)
    finally:
        hook.close()
    assert reported.returncode == plain.returncode == 0
    assert reported.stdout == plain.stdout
    assert hook.bodies == [EXAMPLE]  # a small log is sent as it is
    path, query = hook.paths[0].split("?")
    meta = urllib.parse.parse_qs(query)
    assert path == "/v1/diagnose" and meta["job"] == ["nightly-7"] and meta["source"] == [EXAMPLE_PATH]
    assert meta["rank"] == ["3"]  # RANK, as for `run` (docs/server.md)


@pytest.mark.parametrize(
    "server, said",
    [
        ("down", "Connection refused"),
        ("slow", "no answer within 2 s"),
        ("refusing", "HTTP 401: refused by the test"),
    ],
)
def test_explain_to_a_server_that_cannot_take_it(server: str, said: str) -> None:
    hook = None if server == "down" else Receiver(status=401 if server == "refusing" else 200, delay=30 if server == "slow" else 0)
    url = down_url() if hook is None else hook.url
    try:
        plain, _ = cli("explain", EXAMPLE_PATH)
        r, _ = cli("explain", "--report", url, EXAMPLE_PATH)
    finally:
        if hook is not None:
            hook.close()
    assert r.returncode == 0 and r.stdout == plain.stdout
    lines = r.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"kbdebug: could not report to {url}: ") and said in lines[0]


def test_run_keeps_the_commands_exit_status_and_diagnosis(tmp_path: Path) -> None:
    script = tmp_path / "crash.py"
    script.write_text(CRASH)
    for url in (down_url(), None):
        hook = Receiver(delay=30) if url is None else None
        target = url or hook.url  # type: ignore[union-attr]
        try:
            r, _ = cli("run", "--report", target, "--", sys.executable, str(script))
        finally:
            if hook is not None:
                hook.close()
        err = r.stderr.decode()
        assert r.returncode == 1  # python's own status for an uncaught exception
        assert "advanced-indexing index out of bounds" in err  # the local diagnosis
        last = err.rstrip().splitlines()[-1]
        assert last.startswith(f"kbdebug: could not report to {target}: ")
        assert ("no answer within 2 s" in last) == (hook is not None)  # the client's deadline, not the server's 30 s


def test_run_and_explain_store_on_a_live_server(tmp_path: Path) -> None:
    script = tmp_path / "crash.py"
    script.write_text(CRASH)
    with serve(f"sqlite:///{tmp_path / 'c.db'}") as server:
        r, _ = cli("run", "--report", server.url, "--", sys.executable, str(script))
        assert r.returncode == 1
        (tmp_path / "a.log").write_bytes(INDEX)
        (tmp_path / "b.log").write_bytes(EXAMPLE)
        many, _ = cli("explain", "-q", "--report", server.url, str(tmp_path / "a.log"), str(tmp_path / "b.log"))
        assert many.returncode == 0
        crashes = get(server.url + "/v1/crashes")["crashes"]
        # the run's crash and a.log's are one cause at two user frames (crash.py:step, train.py:step): two signatures
        assert sorted((g["rule"], g["count"]) for g in crashes) == [
            ("index_out_of_bounds", 1),
            ("index_out_of_bounds", 1),
            ("nll_target_out_of_range", 1),
        ]
        assert sorted(g["example"]["source"] for g in crashes) == ["-", str(tmp_path / "a.log"), str(tmp_path / "b.log")]
        sig = next(g["signature"] for g in crashes if g["example"]["source"] == "-")
        assert f"kbdebug: reported to {server.url}/crashes/{sig}" in r.stderr.decode()
        group = get(f"{server.url}/v1/crashes/{sig}")
        run_occ = [o for o in group["occurrences"] if o["command"]]
        assert len(run_occ) == 1 and run_occ[0]["job"] == "nightly-7" and run_occ[0]["rank"] == 3
        assert str(script) in run_occ[0]["command"]


def test_install_report_sends_the_traceback_and_keeps_exit_status(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    hook = Receiver()
    try:
        for url in (hook.url, down_url()):
            script.write_text(f"import kbdebug\nkbdebug.install(report={url!r})\n" + CRASH)
            r = subprocess.run([sys.executable, str(script)], capture_output=True, env=ENV, timeout=120)
            err = r.stderr.decode()
            assert r.returncode == 1
            assert "IndexError: index 5 is out of bounds" in err and "advanced-indexing index out of bounds" in err
            if url == hook.url:
                assert b"IndexError: index 5 is out of bounds for dimension 0 with size 3" in hook.bodies[0]
                assert urllib.parse.parse_qs(hook.paths[0].split("?")[1])["rank"] == ["3"]
            else:
                assert err.rstrip().splitlines()[-1].startswith(f"kbdebug: could not report to {url}: ")
    finally:
        hook.close()


def test_the_lines_sent_for_a_large_log_diagnose_as_the_log() -> None:
    """`run --report` and a log over 4 MiB send the lines the scanner kept: ranks are put back, the root and its
    signature stay those of the whole log (other ranks' timeouts still fold under the causal rank)."""
    from serverkit import multirank

    from kbdebug.api import diagnose_regions, diagnose_text
    from kbdebug.parse.needles import needles
    from kbdebug.runtime.reporting import regions_text
    from kbdebug.scan import scan_text

    noise = "".join(f"[rank{i % 4}]:step {i} loss 0.{i % 97}\n" for i in range(200_000))  # > 1 MiB: scanned in regions
    text = noise + multirank().decode() + noise
    regions = scan_text(text, needles)
    whole = diagnose_regions(regions)
    sent = regions_text(regions)
    assert len(sent) < len(text) // 20
    again = diagnose_text(sent.decode())
    assert (
        (again.root.rule, again.root.signature) == (whole.root.rule, whole.root.signature) == ("index_out_of_bounds", whole.root.signature)
    )
    assert [c.ranks for c in again.root.consequences] == [c.ranks for c in whole.root.consequences]


def test_clients_send_the_token_a_server_asks_for(tmp_path: Path) -> None:
    with serve(f"sqlite:///{tmp_path / 'c.db'}", "--token", "team-t0ken") as server:
        without, _ = cli("explain", "--report", server.url, EXAMPLE_PATH)
        assert without.returncode == 0
        assert without.stderr.decode().splitlines() == [
            f"kbdebug: could not report to {server.url}: HTTP 401: this server takes reports only with its token "
            "(Authorization: Bearer TOKEN) (the local diagnosis is unaffected)"
        ]
        r = run_cli("explain", "--report", server.url, EXAMPLE_PATH, env={**ENV, "KBDEBUG_REPORT_TOKEN": "team-t0ken"})
        assert r.returncode == 0 and r.stderr.decode().startswith(f"kbdebug: reported to {server.url}/crashes/")
        assert get(server.url + "/v1/health")["reports"] == 1


@pytest.mark.parametrize("style", ["iso", "logging"])
def test_the_lines_sent_keep_dated_stamps_so_the_first_failure_is_named(style: str) -> None:
    from test_first_failure import STYLES, job

    from kbdebug.api import diagnose_regions, diagnose_text
    from kbdebug.parse.needles import needles
    from kbdebug.runtime.reporting import regions_text
    from kbdebug.scan import scan_text

    stamp, shown = STYLES[style]
    regions = scan_text(job(stamp, 5), needles)
    again = diagnose_text(regions_text(regions).decode())
    assert again.root.signature == diagnose_regions(regions).root.signature
    assert again.root.first_failure is not None and (again.root.first_failure.rank, again.root.first_failure.time) == (5, shown)
