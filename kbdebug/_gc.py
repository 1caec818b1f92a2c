"""Collections paused while kbdebug builds what lives until exit, inside a user's process.

A first `diagnose(exc)` imports kbdebug's modules (their pydantic classes), unpickles the knowledge base and a
parser: tens of thousands of long-lived objects, which trigger some fifty young-generation collections (5 ms,
more in a process that holds a model) and free nothing. The CLI pauses collections for its whole run
(kbdebug.cli.explain.quiet_start); a library call pauses them only while it works, and leaves them as it found
them: enabled again only where they were enabled, so a user's `gc.disable()` stays theirs.
"""

from __future__ import annotations

import gc


class paused:  # used as `with paused():`, like contextlib's lower-case managers
    """`with paused():` no automatic collection inside; a cycle made there is collected later, as any other."""

    __slots__ = ("_was",)

    def __enter__(self) -> None:
        self._was = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self._was:
            gc.enable()
