"""Tee file descriptor 2 so that a diagnosis sees what the GPU printed.

A kernel's `Assertion ... failed.` lines are written by the CUDA runtime straight to fd 2,
never into the Python exception, so replacing `sys.stderr` would miss them. `capture()`
points fd 2 at a pipe, and a thread copies everything to the original stderr (file, pipe or
TTY) while keeping a bounded copy: the first `head` bytes and the last `tail` bytes.
"""

from __future__ import annotations

import os
import sys
import threading
from collections import deque
from types import TracebackType

_ACTIVE: list[Capture] = []


class _Bounded:
    """Keep the first `head` and the last `tail` bytes of a stream, and count what was dropped."""

    def __init__(self, head: int, tail: int) -> None:
        self.head_cap, self.tail_cap = head, tail
        self.head = bytearray()
        self.tail: deque[bytes] = deque()
        self.tail_size = 0
        self.dropped = 0
        self.lock = threading.Lock()

    def add(self, data: bytes) -> None:
        with self.lock:
            room = self.head_cap - len(self.head)
            if room > 0:
                self.head += data[:room]
                data = data[room:]
            if not data:
                return
            self.tail.append(data)
            self.tail_size += len(data)
            while self.tail_size - len(self.tail[0]) >= self.tail_cap:
                old = self.tail.popleft()
                self.tail_size -= len(old)
                self.dropped += len(old)

    def getvalue(self) -> bytes:
        with self.lock:
            tail = b"".join(self.tail)
            if self.tail_size > self.tail_cap:  # trim to the cap at a line start
                cut = tail.find(b"\n", self.tail_size - self.tail_cap)
                tail = tail[cut + 1 :] if cut >= 0 else tail[-self.tail_cap :]
            if self.dropped or len(tail) < self.tail_size:
                return bytes(self.head) + b"\n[... kbdebug: output elided ...]\n" + tail
            return bytes(self.head) + tail


def write_all(fd: int, data: bytes) -> bool:
    """Write everything, retrying short writes; False when the fd went away (a closed pipe): the
    caller keeps draining its source and stops echoing."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except InterruptedError:
            continue
        except OSError:
            return False
    return True


class Capture:
    """Context manager; use `kbdebug.capture()`. `text()` is what fd 2 received so far."""

    def __init__(self, fd: int = 2, head: int = 256 * 1024, tail: int = 4 * 1024 * 1024, echo: bool = True) -> None:
        self.fd = fd
        self.echo = echo
        self.buffer = _Bounded(head, tail)
        self._saved: int | None = None
        self._through: int | None = None
        self._read: int | None = None
        self._thread: threading.Thread | None = None
        self._marker = b"\x00kbdebug-sync-%d\x00" % id(self)
        self._synced = threading.Condition()
        self._sent = self._seen = 0

    def __enter__(self) -> Capture:
        _flush_python_streams()
        read, write = os.pipe()
        saved = os.dup(self.fd)
        through = os.dup(self.fd)
        try:
            os.dup2(write, self.fd)
        except BaseException:
            for fd in (read, write, saved, through):
                os.close(fd)
            raise
        os.close(write)
        self._saved, self._through, self._read = saved, through, read
        self._thread = threading.Thread(target=self._pump, name="kbdebug-capture", daemon=True)
        self._thread.start()
        _ACTIVE.append(self)
        return self

    def _pump(self) -> None:
        assert self._read is not None and self._through is not None
        read, through = self._read, self._through
        carry = b""
        try:
            while True:
                try:
                    data = os.read(read, 1 << 16)
                except InterruptedError:
                    continue
                if not data:
                    break
                data, carry = self._strip_markers(carry + data)
                if data:
                    self.buffer.add(data)
                    if self.echo:
                        write_all(through, data)
            if carry:
                self.buffer.add(carry)
                if self.echo:
                    write_all(through, carry)
        finally:
            with self._synced:
                self._seen = self._sent
                self._synced.notify_all()
            os.close(read)
            os.close(through)

    def _strip_markers(self, data: bytes) -> tuple[bytes, bytes]:
        """Remove sync markers; hold back a tail that may be the start of one split across reads."""
        marker = self._marker
        count = data.count(marker)
        if count:
            data = data.replace(marker, b"")
            with self._synced:
                self._seen += count
                self._synced.notify_all()
        for k in range(min(len(marker) - 1, len(data)), 0, -1):
            if data.endswith(marker[:k]):
                return data[:-k], data[-k:]
        return data, b""

    def sync(self, timeout: float = 2.0) -> None:
        """Wait until everything written to fd 2 before this call has reached the buffer."""
        if self._saved is None or self._thread is None or not self._thread.is_alive():
            return
        _flush_python_streams()
        with self._synced:
            self._sent += 1
            want = self._sent
        write_all(self.fd, self._marker)
        with self._synced:
            self._synced.wait_for(lambda: self._seen >= want, timeout)

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self, timeout: float = 2.0) -> None:
        """Restore fd 2 (always, even on KeyboardInterrupt) and wait for the copy to drain."""
        if self._saved is None:
            return
        try:
            _flush_python_streams()
        finally:
            os.dup2(self._saved, self.fd)
            os.close(self._saved)
            self._saved = None
            if self in _ACTIVE:
                _ACTIVE.remove(self)
        # A child process still holding the pipe keeps the thread alive; it goes on echoing as a daemon.
        if self._thread is not None:
            self._thread.join(timeout)

    def bytes(self) -> bytes:
        self.sync()
        return self.buffer.getvalue()

    def text(self) -> str:
        return self.bytes().decode("utf-8", errors="replace")


def _flush_python_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass


def capture(*, head: int = 256 * 1024, tail: int = 4 * 1024 * 1024, echo: bool = True) -> Capture:
    """Tee fd 2 into a bounded buffer while still writing it through; `diagnose()` inside reads it."""
    return Capture(2, head=head, tail=tail, echo=echo)


def active_text() -> str | None:
    """What the innermost active capture has seen, or None outside any capture."""
    return _ACTIVE[-1].text() if _ACTIVE else None
