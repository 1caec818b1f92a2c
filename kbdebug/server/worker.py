"""Diagnosis with a budget: each log is diagnosed in a worker process of a small pool, and a log that takes
longer than its time budget is refused and its worker replaced, so that no log, however it is made, holds
the service: other posts go on in the other workers, and reads never wait for a diagnosis.

A worker is `python -m kbdebug.server.worker`: it reads pickled (log, source) jobs on stdin and writes the
diagnosis, prepared to be stored and sent (kbdebug.server.prepared), or the error's sentence, pickled, on
stdout. It exits when its parent goes (stdin closes), and its address space is capped (MEMORY), so a log
that would need more memory fails alone.
"""

from __future__ import annotations

import atexit
import io
import os
import pickle
import queue
import select
import struct
import subprocess
import sys
import threading
import time
from typing import IO, Any

from kbdebug.diagnosis import Diagnosis
from kbdebug.server.prepared import Prepared, prepare

MEMORY = 3 << 30  # a worker's address space, bytes
_HEAD = struct.Struct("!Q")
WARM_UP = b'Traceback (most recent call last):\n  File "a.py", line 1, in f\nRuntimeError: CUDA error: device-side assert triggered\n'


class Refused(Exception):
    """A log the pool did not diagnose: `status` 422 (over its budget) or 503 (every worker busy)."""

    def __init__(self, status: int, detail: str, retry_after: int | None = None) -> None:
        super().__init__(detail)
        self.status, self.detail, self.retry_after = status, detail, retry_after


def _write(out: IO[bytes], obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(_HEAD.pack(len(data)) + data)
    out.flush()


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    chunks, left = [], n
    while left:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                raise TimeoutError
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


class _Worker:
    def __init__(self) -> None:
        env = {**os.environ, "KBDEBUG_WORKER_MEMORY": str(MEMORY)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kbdebug.server.worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, close_fds=True
        )

    def ready(self, timeout: float = 120.0) -> None:
        """Wait for the worker's first frame: its imports and warm-up are not charged to a log's budget."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        (size,) = _HEAD.unpack(_read_exact(fd, _HEAD.size, time.monotonic() + timeout))
        _read_exact(fd, size, time.monotonic() + timeout)

    def run(self, body: bytes, source: str, timeout: float) -> Prepared:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        _write(self.proc.stdin, (body, source))
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        (size,) = _HEAD.unpack(_read_exact(fd, _HEAD.size, deadline))
        ok, value = pickle.loads(_read_exact(fd, size, deadline + 5))  # the answer is being written: take it whole
        if not ok:
            raise Refused(422, f"this log could not be diagnosed: {value}")
        return value  # type: ignore[no-any-return]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


class Pool:
    """`size` worker processes, started when first needed; a post takes an idle one or waits for one."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._idle: queue.Queue[_Worker | None] = queue.Queue()
        for _ in range(size):
            self._idle.put(None)  # a slot: its worker is started on first use
        self._all: set[_Worker] = set()
        self._lock = threading.Lock()
        atexit.register(self.close)

    def diagnose(self, body: bytes, source: str, timeout: float, wait: float) -> Prepared:
        """The diagnosis of `body`, or Refused: over `timeout` seconds of diagnosis, or no worker free in `wait`."""
        try:
            worker = self._idle.get(timeout=wait)
        except queue.Empty:
            raise Refused(503, f"every diagnosis worker is busy (waited {wait:g} s): try again shortly", retry_after=5) from None
        keep = False
        try:
            if worker is None or worker.proc.poll() is not None:
                worker = self._start()
            result = worker.run(body, source, timeout)
            keep = True
            return result
        except Refused:
            keep = True  # the worker answered: it stays
            raise
        except TimeoutError:
            raise Refused(422, f"diagnosing this log took longer than this server's budget of {timeout:g} s; it was not stored") from None
        except (EOFError, OSError, pickle.UnpicklingError) as exc:
            raise Refused(
                422, f"the diagnosis worker stopped on this log ({type(exc).__name__}; memory budget {MEMORY >> 30} GiB); it was not stored"
            ) from None
        finally:
            if not keep and worker is not None:
                self._stop(worker)
                worker = None
            self._idle.put(worker)

    def _start(self) -> _Worker:
        worker = _Worker()
        try:
            worker.ready()
        except (TimeoutError, EOFError, OSError):
            worker.stop()
            raise
        with self._lock:
            self._all.add(worker)
        return worker

    def _stop(self, worker: _Worker) -> None:
        worker.stop()
        with self._lock:
            self._all.discard(worker)

    def close(self) -> None:
        with self._lock:
            workers, self._all = list(self._all), set()
        for w in workers:
            w.stop()


_pools: dict[int, Pool] = {}
_pools_lock = threading.Lock()


def pool(size: int) -> Pool:
    """This process's pool of `size` workers (0: one per CPU, at most 4), shared by every app it builds."""
    size = size or max(1, min(4, os.cpu_count() or 1))
    with _pools_lock:
        if size not in _pools:
            _pools[size] = Pool(size)
        return _pools[size]


def _diagnose(body: bytes, source: str) -> Diagnosis:
    from kbdebug.api import diagnose_regions
    from kbdebug.parse.needles import needles
    from kbdebug.scan import scan_stream

    return diagnose_regions(scan_stream(io.BytesIO(body), needles), source=source)


def main() -> None:
    """The worker's loop: one job at a time until stdin closes."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the server stops its workers itself
    try:
        import resource

        limit = int(os.environ.get("KBDEBUG_WORKER_MEMORY") or MEMORY)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):  # no such limit on this system: the time budget still holds
        pass
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing the pipeline prints may corrupt the answers
    _diagnose(WARM_UP, "-")  # imports and the commonest grammars, before the first log's clock starts
    _write(out, (True, "ready"))
    while True:
        head = inp.read(_HEAD.size)
        if len(head) < _HEAD.size:
            return
        body, source = pickle.loads(inp.read(_HEAD.unpack(head)[0]))
        try:
            answer: tuple[bool, Any] = (True, prepare(_diagnose(body, source)))
        except MemoryError:
            answer = (False, f"it needs more than this server's memory budget of {MEMORY >> 30} GiB")
        except Exception as exc:  # a bug on one log fails that post alone, with its reason
            answer = (False, f"{type(exc).__name__}: {exc}")
        _write(out, answer)


if __name__ == "__main__":
    main()
