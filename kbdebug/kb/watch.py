"""Whether nothing in some folders has changed since a moment: Linux's inotify, asked in one poll that does not wait.

A process that diagnoses log after log asks `load_kb` each time whether a rule file was edited; a stat per file
answered it, a hundred stats a log (the largest single cost of diagnosing a small log). A watch on the folders
answers it with one poll: the kernel queues an event when a file in a watched folder is written, touched, created,
removed or renamed, before the call that did it returns. A watch answers "quiet" only when it is sure: no inotify
here (not Linux), a folder it could not watch, another process than the one that made it (a fork shares the
queue), or any event at all (an overflowed queue included) answer "may have changed", and the caller stats the files.
"""

from __future__ import annotations

import os
import select
import sys
import threading
from functools import cache
from typing import Any

# inotify(7): a file in the folder written, its metadata (time of change) set, written and closed, moved out or in,
# created, removed; the folder itself removed or moved
_EVENTS = 0x2 | 0x4 | 0x8 | 0x40 | 0x80 | 0x100 | 0x200 | 0x400 | 0x800
_NONBLOCK_CLOEXEC = 0o4000 | 0o2000000  # IN_NONBLOCK | IN_CLOEXEC (O_NONBLOCK | O_CLOEXEC on Linux)


@cache
def _libc() -> Any:
    """The C library's inotify calls, or None where there are none (ctypes is loaded only here: a short run never asks)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.inotify_init1.argtypes, libc.inotify_add_watch.argtypes = [ctypes.c_int], [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        return libc
    except (OSError, AttributeError):
        return None


class Watch:
    """A watch on folders (each folder's own entries: the files in it), started before they are read."""

    def __init__(self) -> None:
        libc = _libc()
        self.pid = os.getpid()
        self.fd: int = libc.inotify_init1(_NONBLOCK_CLOEXEC) if libc is not None else -1
        self.lock = threading.Lock()  # one thread sees an event and spends the watch before another may ask
        self.events: Any = None  # whether an event is queued, asked without reading it (or raising)
        if self.fd >= 0:
            self.events = select.poll()  # (Linux's, as inotify is)
            self.events.register(self.fd, select.POLLIN)

    def add(self, folder: str) -> None:
        """Watch `folder` too; a folder that cannot be watched spends the watch (it can no longer say quiet)."""
        if self.fd >= 0 and _libc().inotify_add_watch(self.fd, os.fsencode(folder), _EVENTS) < 0:
            self.close()

    def quiet(self) -> bool:
        """True only when nothing happened in the folders since they were watched; the first event spends the watch."""
        with self.lock:
            if self.fd < 0 or self.pid != os.getpid():
                return False
            if not self.events.poll(0):
                return True
            self.close()
            return False

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # in a forked child, its own copy: the parent's watch goes on
        self.fd = -1
