"""Send a crash to a kbdebug crash service (`--report URL`, `install(report=URL)`, see kbdebug/server/).

The job comes first: the post runs in a daemon thread given at most TIMEOUT seconds, so a server that is
down, slow or refusing costs the job two seconds at worst and one line on stderr; the job's exit status
and its local diagnosis (already printed) never depend on it. Only the standard library (urllib) is used.
"""

from __future__ import annotations

import getpass
import json
import os
import re
import socket
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable
from typing import Any, TextIO

from kbdebug.normalise import Region

TIMEOUT = 2.0
RAW_LIMIT = 4 << 20  # a log file up to this size is sent as it is; a larger one as the lines the scanner kept
# where the common schedulers and launchers name the job and the process's rank
_JOB_VARS = ("KBDEBUG_JOB", "SLURM_JOB_NAME", "SLURM_JOB_ID", "PBS_JOBNAME", "PBS_JOBID", "LSB_JOBNAME", "LSB_JOBID", "JOB_NAME", "JOB_ID")
_RANK_VARS = ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK")


# a stamp printed in this form is read back as a line's time when it leads the line (kbdebug.normalise)
_DATED = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?")


def regions_text(regions: Iterable[Region]) -> bytes:
    """The lines a diagnosis was made from, as a log again: rank prefixes and dated time stamps put back, a
    blank line between regions, so the server diagnoses the same records (the text of a large log without
    the bytes between). Stamps without a year (glog, journald) are left off: which rank failed first is then
    said by the local diagnosis only."""
    out: list[str] = []
    for region in regions:
        if out:
            out.append("")
        for ln in region.lines:
            stamp = f"{ln.time.text} " if ln.time is not None and _DATED.fullmatch(ln.time.text) else ""
            out.append(f"[rank{ln.rank}]: {stamp}{ln.text}" if ln.rank is not None else stamp + ln.text)
    return ("\n".join(out) + "\n").encode("utf-8", "surrogatepass")


def path_log(path: str, regions: list[Region] | None = None) -> bytes:
    """What to send for a log: the file when it is small, else the lines the scanner kept of it (`regions`,
    when the caller has them: standard input, or a file already scanned)."""
    if path != "-" and os.path.getsize(path) <= RAW_LIMIT:
        with open(path, "rb") as fh:
            return fh.read()
    if regions is not None:
        return regions_text(regions)
    from kbdebug.parse.needles import needles
    from kbdebug.scan import scan_path

    return regions_text(scan_path(path, needles))


def job_metadata(command: str = "", *, rank: bool = True) -> dict[str, str]:
    """What the service shows beside each occurrence: job, host, rank, user, command, tags (KBDEBUG_TAGS).
    `rank=False` for a log file read later: the shell's RANK is not the rank that wrote it."""
    env = os.environ
    meta = {
        "job": next((env[v] for v in _JOB_VARS if env.get(v)), ""),
        "host": socket.gethostname(),
        "rank": next((env[v] for v in _RANK_VARS if env.get(v, "").isdigit()), "") if rank else "",
        "command": command,
        "tags": env.get("KBDEBUG_TAGS", ""),
    }
    try:
        meta["user"] = getpass.getuser()
    except Exception:  # no user name in a container without /etc/passwd entry
        pass
    return {k: v for k, v in meta.items() if v}


def endpoint(url: str) -> str:
    """`http://host:8000` (the server) or its full `/v1/diagnose` address."""
    url = url.rstrip("/")
    return url if url.endswith("/v1/diagnose") else url + "/v1/diagnose"


def _post(url: str, log: bytes, meta: dict[str, str], timeout: float) -> dict[str, Any]:
    query = urllib.parse.urlencode(meta)
    headers = {"Content-Type": "text/plain; charset=utf-8", "User-Agent": "kbdebug", "X-Kbdebug-Client": "kbdebug"}
    token = os.environ.get("KBDEBUG_REPORT_TOKEN")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(endpoint(url) + ("?" + query if query else ""), data=log, headers=headers, method="POST")
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read(1 << 24) or b"{}")


def _reason(exc: BaseException, timeout: float) -> str:
    if isinstance(exc, TimeoutError) or isinstance(getattr(exc, "reason", None), TimeoutError):
        return f"no answer within {timeout:g} s"
    if isinstance(exc, urllib.error.HTTPError):
        try:
            detail = json.loads(exc.read(4096) or b"{}").get("detail", "")
        except Exception:
            detail = ""
        return f"HTTP {exc.code}" + (f": {detail}" if isinstance(detail, str) and detail else "")
    if isinstance(exc, urllib.error.URLError):
        return str(exc.reason)
    return str(exc) or type(exc).__name__


def post(url: str, log: bytes, meta: dict[str, str] | None = None, *, timeout: float = TIMEOUT, stream: TextIO | None = None) -> bool:
    """Send one log; True when the server stored it. Never raises, never waits much longer than `timeout`:
    one line on `stream` (stderr) says what happened."""
    stream = stream or sys.stderr
    result: dict[str, Any] = {}

    def work() -> None:
        try:
            result["answer"] = _post(url, log, meta or {}, timeout)
        except BaseException as exc:  # the thread must end quietly, whatever the server did
            result["error"] = exc

    thread = threading.Thread(target=work, name="kbdebug-report", daemon=True)
    thread.start()
    thread.join(timeout + 0.5)  # urllib's timeout is per socket operation: a trickling server is cut off here
    if "answer" in result:
        incidents = result["answer"].get("incidents") or []
        where = f"{url.rstrip('/').removesuffix('/v1/diagnose')}/crashes/{incidents[0]['signature']}" if incidents else url
        _say(stream, f"kbdebug: reported to {where}")
        return True
    why = _reason(result["error"], timeout) if "error" in result else f"no answer within {timeout:g} s"
    _say(stream, f"kbdebug: could not report to {url}: {why} (the local diagnosis is unaffected)")
    return False


def _say(stream: TextIO, line: str) -> None:
    try:
        stream.write(line + "\n")
        stream.flush()
    except Exception:
        pass
