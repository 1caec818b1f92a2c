"""Send a crash to a kbdebug crash service (`--report URL`, `install(report=URL)`, see kbdebug/server/).

The job comes first: a post gets at most TIMEOUT seconds in all (connecting, sending, the answer's headers
and body), so a server that is down, slow or refusing costs the job two seconds at worst and one line on
stderr, for one log or for a directory of them (the first failure of the server skips the rest). Nothing
the server answers can raise or change the job's exit status: the answer is read and checked inside the
guard, redirects are not followed (the token would go to another address), and what the server says is
printed without its control characters. Only the standard library (urllib) is used; kbdebug/server/webhook.py
sends its notices with the same bounded request.
"""

from __future__ import annotations

import email.message
import getpass
import json
import os
import re
import socket
import sys
import threading
import time
import unicodedata
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable
from typing import Any, NamedTuple, TextIO

from kbdebug._version import __version__
from kbdebug.normalise import Region

TIMEOUT = 2.0  # a post's whole time, answer included
BATCH_LIMIT = 60.0  # a server that answers, slowly, each of many logs: the rest are skipped after this
ANSWER_LIMIT = 8 << 20  # a diagnosis is far smaller; a larger answer is not one
CLIENT = f"kbdebug/{__version__}"  # sent as X-Kbdebug-Client: a header a cross-site form cannot set
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


def job_metadata(command: str = "") -> dict[str, str]:
    """What the service shows beside each occurrence: job, host, rank (RANK, SLURM_PROCID, ...), user,
    command, tags (KBDEBUG_TAGS); the same for `run`, `install()` and `explain`, as docs/server.md says."""
    env = os.environ
    meta = {
        "job": next((env[v] for v in _JOB_VARS if env.get(v)), ""),
        "host": socket.gethostname(),
        "rank": next((env[v] for v in _RANK_VARS if env.get(v, "").isdigit()), ""),
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


def http_url_problem(url: str) -> str | None:
    """Why `url` is no address to post to (None when it is http:// or https:// with a host): a `file:` or
    `ftp:` URL must not be opened with the job's log, nor a typo be taken for a relative path."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError as exc:
        return f"{printable(url)!r} is not a URL ({exc})"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{printable(url)!r} is not an http:// or https:// URL"
    return None


# ECMA-48: CSI (ESC [ or 0x9b ... final), OSC (ESC ] ... BEL or ST), any other ESC sequence
_ESCAPES = re.compile(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[ -/]*[0-~]")


def printable(text: str, limit: int = 300) -> str:
    """`text` safe to print on a terminal: escape sequences dropped, every other control or format character
    (bidirectional overrides included) shown as `?`, at most `limit` characters."""
    text = _ESCAPES.sub("", text)
    text = "".join("?" if unicodedata.category(c) in ("Cc", "Cf", "Cs", "Co") else c for c in text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Answer(NamedTuple):
    status: int
    headers: email.message.Message  # an HTTPError's are a plain Message
    body: bytes


class AnswerTooLarge(Exception):
    pass


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is an answer, not followed: following one would carry the token (and the log) elsewhere."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _tracking(handler: type[urllib.request.AbstractHTTPHandler], sockets: list[Any]) -> urllib.request.BaseHandler:
    """`handler` whose connections record their sockets, so a request past its deadline can be cut off."""

    class Tracked(handler):  # type: ignore[misc, valid-type]
        def do_open(self, http_class: Any, req: Any, **kwargs: Any) -> Any:
            class Recorded(http_class):  # type: ignore[misc, valid-type]
                def connect(self) -> None:
                    super().connect()
                    sockets.append(self.sock)

            return super().do_open(Recorded, req, **kwargs)

    return Tracked()


def request(req: urllib.request.Request, deadline: float, limit: int = ANSWER_LIMIT) -> Answer:
    """Send `req` and read its answer (any status) by `deadline` (time.monotonic()), whatever the peer does:
    a socket timeout alone would let a peer that sends a byte a second hold the caller for ever, so the
    exchange runs in a daemon thread and its sockets are shut down at the deadline. Redirects are answers.
    Raises TimeoutError past the deadline, AnswerTooLarge past `limit` bytes, OSError/ValueError otherwise."""
    sockets: list[Any] = []
    opener = urllib.request.build_opener(
        _NoRedirect(), _tracking(urllib.request.HTTPHandler, sockets), _tracking(urllib.request.HTTPSHandler, sockets)
    )
    result: dict[str, Any] = {}

    def read(resp: Any) -> bytes:
        chunks, size = [], 0
        while chunk := resp.read(1 << 16):
            size += len(chunk)
            if size > limit:
                raise AnswerTooLarge(size)
            chunks.append(chunk)
        return b"".join(chunks)

    def work() -> None:
        try:
            try:
                with opener.open(req, timeout=max(0.05, deadline - time.monotonic())) as resp:
                    result["answer"] = Answer(resp.status, resp.headers, read(resp))
            except urllib.error.HTTPError as exc:  # 3xx (not followed), 4xx, 5xx: an answer like any other
                with exc:
                    result["answer"] = Answer(exc.code, exc.headers, read(exc))
        except BaseException as exc:  # the thread ends quietly, whatever the peer did
            result["error"] = exc

    thread = threading.Thread(target=work, name="kbdebug-http", daemon=True)
    thread.start()
    thread.join(max(0.0, deadline - time.monotonic()))
    if thread.is_alive():
        for sock in list(sockets):
            try:
                sock.shutdown(socket.SHUT_RDWR)  # the reader returns; nothing is left holding the connection
            except OSError:
                pass
        thread.join(0.2)
        raise TimeoutError("no answer in time")
    if "error" in result:
        raise result["error"]
    answer: Answer = result["answer"]
    return answer


class Outcome(NamedTuple):
    stored: bool
    said: str  # where it was stored, or why it was not (one line's worth, printable)
    server_failed: bool  # the server, not this log, is the problem: the rest of a batch is skipped

    def line(self, url: str, more: int = 0) -> str:
        if self.stored:
            return f"kbdebug: reported to {self.said}"
        skipped = f" ({more} more log{'s' * (more != 1)} not sent)" if more else ""
        return f"kbdebug: could not report to {printable(url)}: {self.said}{skipped} (the local diagnosis is unaffected)"


_SIGNATURE = re.compile(r"[0-9a-f]{6,64}")
_PER_LOG = (400, 413, 415, 422)  # refused for this log (too large, unreadable): the next may still go


def _detail(body: bytes) -> str:
    try:
        detail = json.loads(body).get("detail", "")
    except Exception:
        return ""
    return printable(detail, 200) if isinstance(detail, str) else ""


def _stored_at(base: str, body: bytes) -> str | None:
    """The crash's page for a server's answer, `base` when nothing was recognised, None when the answer is
    not a kbdebug diagnosis (a JSON list, an incident without a signature, not JSON at all)."""
    try:
        answer = json.loads(body)
    except (ValueError, RecursionError):
        return None
    incidents = answer.get("incidents") if isinstance(answer, dict) else None
    if not isinstance(incidents, list):
        return None
    if not incidents:
        return base
    signature = incidents[0].get("signature") if isinstance(incidents[0], dict) else None
    return f"{base}/crashes/{signature}" if isinstance(signature, str) and _SIGNATURE.fullmatch(signature) else None


def attempt(url: str, log: bytes, meta: dict[str, str], timeout: float = TIMEOUT) -> Outcome:
    """One post, its answer read and judged within `timeout` seconds. Never raises."""
    try:
        problem = http_url_problem(url)
        if problem:
            return Outcome(False, problem, True)
        headers = {"Content-Type": "text/plain; charset=utf-8", "User-Agent": CLIENT, "X-Kbdebug-Client": CLIENT}
        token = os.environ.get("KBDEBUG_REPORT_TOKEN")
        if token:
            headers["Authorization"] = f"Bearer {token}"
        query = urllib.parse.urlencode(meta)
        req = urllib.request.Request(endpoint(url) + ("?" + query if query else ""), data=log, headers=headers, method="POST")
        answer = request(req, time.monotonic() + timeout)
        if 200 <= answer.status < 300:
            where = _stored_at(printable(url.rstrip("/").removesuffix("/v1/diagnose")), answer.body)
            if where is not None:
                return Outcome(True, where, False)
            return Outcome(False, f"HTTP {answer.status} but its answer is not a kbdebug diagnosis (is it `kbdebug serve`?)", True)
        if 300 <= answer.status < 400:
            to = printable(answer.headers.get("Location", "") or "", 200) or "another address"
            return Outcome(
                False, f"HTTP {answer.status}: it redirects to {to}; give --report that address (redirects are not followed)", True
            )
        detail = _detail(answer.body)
        return Outcome(False, f"HTTP {answer.status}" + (f": {detail}" if detail else ""), answer.status not in _PER_LOG)
    except TimeoutError:
        why = f"no answer within {timeout:g} s"
    except AnswerTooLarge:
        why = f"its answer is over {ANSWER_LIMIT >> 20} MiB, not a kbdebug diagnosis"
    except urllib.error.URLError as exc:
        reason = exc.reason
        why = f"no answer within {timeout:g} s" if isinstance(reason, TimeoutError) else printable(str(reason))
    except BaseException as exc:  # a reset connection, a broken answer, a URL urllib cannot open
        why = printable(str(exc) or type(exc).__name__)
    return Outcome(False, why, True)


def post(url: str, log: bytes, meta: dict[str, str] | None = None, *, timeout: float = TIMEOUT, stream: TextIO | None = None) -> bool:
    """Send one log; True when the server stored it. Never raises, never takes much longer than `timeout`:
    one line on `stream` (stderr) says what happened."""
    outcome = attempt(url, log, meta or {}, timeout)
    _say(stream or sys.stderr, outcome.line(url))
    return outcome.stored


def report_logs(url: str, logs: list[tuple[str, list[Region] | None]], *, timeout: float = TIMEOUT, stream: TextIO | None = None) -> int:
    """`explain --report`: each log (its path, and its regions when already scanned) with the job's
    metadata; returns how many were stored. A server that is down, slow or refusing is found on the first
    post and the rest are skipped, so a directory of logs costs `timeout` and one line, not one per log."""
    out = stream or sys.stderr
    meta, stored, started = job_metadata(), 0, time.monotonic()
    for i, (path, regions) in enumerate(logs):
        left = len(logs) - i - 1
        if time.monotonic() - started > BATCH_LIMIT:
            _say(out, f"kbdebug: stopped reporting to {printable(url)} after {BATCH_LIMIT:g} s: {left + 1} logs not sent")
            break
        try:
            log = path_log(path, regions)
        except OSError as exc:
            _say(out, f"kbdebug: could not report {printable(path)}: {exc.strerror or exc}")
            continue
        outcome = attempt(url, log, {**meta, "source": path}, timeout)
        if outcome.server_failed:
            _say(out, outcome.line(url, more=left))
            break
        _say(out, outcome.line(url))
        stored += outcome.stored
    return stored


def _say(stream: TextIO, line: str) -> None:
    try:
        stream.write(line + "\n")
        stream.flush()
    except Exception:
        pass
