"""The one composition of the diagnose stage, for a log and for a live exception alike."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from kbdebug.diagnoser.context import add_context, keep_applicable
from kbdebug.diagnoser.guides import fill
from kbdebug.diagnoser.lines import keep_context
from kbdebug.diagnoser.match import diagnose_records
from kbdebug.diagnoser.signature import sign
from kbdebug.diagnosis import Diagnosis
from kbdebug.kb.loader import KnowledgeBase
from kbdebug.records import Record


def diagnose(
    records: list[Record],
    kb: KnowledgeBase,
    source: str,
    lines: Iterable[tuple[int, str]],
    *,
    origin: str = "log",
    facts: dict[str, Any] | None = None,
    live: Callable[[Diagnosis], None] | None = None,
) -> Diagnosis:
    """Match the records, keep the lines near them, and complete the incidents. `live` adds what a live
    exception's frames say, before the guides are filled: they quote those facts."""
    diag = diagnose_records(records, kb, source)
    keep_context(diag, lines)
    if live is not None:
        live(diag)
    return complete(diag, kb, origin, facts)


def complete(diag: Diagnosis, kb: KnowledgeBase, origin: str | None = None, facts: dict[str, Any] | None = None) -> Diagnosis:
    """Context facts, then the filled guides and the commands that help, then the crash's signature.

    `origin` says where the text came from ("log", "script", "run", "rerun"; see kbdebug.diagnoser.context),
    `facts` adds what the caller knows (the command's `script`); both decide which commands are offered.
    """
    add_context(diag, kb, origin, facts)
    fill(diag, kb)
    keep_applicable(diag)
    return sign(diag)
