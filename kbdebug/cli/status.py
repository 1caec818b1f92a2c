"""`kbdebug explain`'s exit status: one contract, written down here and in README's "Exit status".

Reading logs (files, directories, globs, or standard input with `-q`) the status says what was found:
    0  a named cause (a rule other than the catch-all) in at least one log
    3  only the catch-all `other`: something failed, kbdebug has no rule for it
    1  nothing recognised
    2  usage or input error (one line on stderr)

Passing a run through (`python train.py 2>&1 | kbdebug explain -`, standard input without `-q`), kbdebug is
a filter in the run's pipeline and the pipeline's status is kbdebug's, so there the status gates the run
the way CI reads it: a crash fails, a clean log passes:
    0  nothing recognised: the log shows no failure (stderr says so)
    1  a named cause
    3  only the catch-all `other`
    2  usage or input error
Only 0 and 1 trade places; 2 and 3 mean the same everywhere. `-q` (nothing passed through) reads standard
input as a saved log, with the first table's statuses.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kbdebug.diagnosis import Diagnosis
    from kbdebug.kb.loader import KnowledgeBase

NAMED, NOTHING, USAGE, CATCH_ALL = 0, 1, 2, 3


def found(diags: Sequence[Diagnosis], kb: KnowledgeBase) -> int:
    """NAMED, CATCH_ALL or NOTHING: the best any of the logs reached."""
    roots = [d.root for d in diags if d.root is not None]
    if not roots:
        return NOTHING
    return CATCH_ALL if all(kb.tagged(r.rule, "fallback") for r in roots) else NAMED


def exit_status(diags: Sequence[Diagnosis], kb: KnowledgeBase, passed_through: bool) -> int:
    status = found(diags, kb)
    if passed_through and status in (NAMED, NOTHING):
        return NOTHING if status == NAMED else NAMED  # a crash fails the pipeline, a clean run passes it
    return status


STDIN_NOTHING = (
    "kbdebug: nothing recognised in standard input. If the program's traceback went to the terminal instead, "
    "pass its stderr into the pipe too: `python train.py 2>&1 | kbdebug explain -`"
)
