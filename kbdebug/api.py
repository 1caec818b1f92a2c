"""Library entry points: a thin facade over scan -> parse -> diagnose (kbdebug.diagnoser.pipeline) for a
log, and kbdebug.runtime.live for a live exception. Nothing here imports torch."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kbdebug import diagnosis as core
from kbdebug._gc import paused
from kbdebug.core.facts import Facts
from kbdebug.core.frames import user_frame
from kbdebug.diagnoser import pipeline
from kbdebug.diagnosis import Incident, LiveEvidence
from kbdebug.kb import load_kb
from kbdebug.normalise import Region, iter_lines
from kbdebug.parse.needles import needles
from kbdebug.parse.regions import parse_regions
from kbdebug.records import Record
from kbdebug.scan import Scanner, scan_path, scan_text


def diagnose_regions(
    regions: list[Region],
    source: str = "-",
    kb_dirs: list[Path] | None = None,
    *,
    origin: str = "log",
    facts: Facts | None = None,
    extra_records: Sequence[Record] = (),
) -> Diagnosis:
    """`origin` says where the text came from ("log", "run", "rerun"; see kbdebug.diagnoser.context), `facts`
    adds what the caller knows (the command's `script`); both decide which commands are offered.
    `extra_records` are what the caller observed beside the text, read by the rules like the log's own
    (`kbdebug run` adds a ProcessExit for the signal that killed the child: a segfault prints nothing);
    their `first_line` places them in the log's order."""
    lines = ((ln.no, ln.text) for ln in iter_lines(regions))
    records = [*parse_regions(regions), *extra_records]
    return _public(pipeline.diagnose(records, load_kb(kb_dirs), source, lines, origin=origin, caller=facts))


def diagnose_text(text: str, *, source: str = "-", kb_dirs: list[Path] | None = None) -> Diagnosis:
    """Diagnose a log held in memory."""
    return diagnose_regions(scan_text(text, needles), source, kb_dirs)


def explain(path: str | Path, *, kb_dirs: list[Path] | None = None) -> Diagnosis:
    """Diagnose a log file of any size; it is streamed, never read whole."""
    return diagnose_regions(scan_path(path, needles), str(path), kb_dirs)


def diagnose(exc: BaseException, *, log: str | os.PathLike[str] | None = None, kb_dirs: list[Path] | None = None) -> Diagnosis:
    """Diagnose a live exception.

    `log` is extra output to read with it: text, or a path to a log file. Inside
    `kbdebug.capture()` what fd 2 received (the GPU's assertion lines) is read as well. The exception
    is read from the objects themselves (kbdebug.runtime.live): its type, message, chain and real frames.

    It never raises, whatever the exception (its `__str__` may raise, its chain may be cyclic, its frames may
    hold objects whose attributes raise): it runs in excepthooks and `except` blocks, where a second error
    would hide the user's. What kbdebug itself failed on is then the fact `kbdebug_failure` of an `other`.
    """
    try:
        with paused():  # the first call loads the knowledge base and a parser: long-lived objects (kbdebug._gc)
            return _diagnose(exc, log, kb_dirs)
    except Exception as failure:
        return _plain_diagnosis(exc, failure, kb_dirs)


def _plain_diagnosis(exc: BaseException, failure: Exception, kb_dirs: list[Path] | None) -> Diagnosis:
    """The error as the catch-all names it, with what kbdebug failed on; completed (guide, signature) where that works."""
    from kbdebug.runtime import live

    facts: Facts = {
        "error_type": live.type_name(type(exc)),
        "kbdebug_failure": f"{type(failure).__name__}: {live.safe_str(failure)[:200]}",
    }
    message = live.safe_str(exc).strip()
    if message:
        facts["error_message"] = message.splitlines()[0][:500]
    source = f"<{facts['error_type']}>"
    inc = Incident(rule="other", title="other", confidence=0.3, facts=facts)
    try:
        kb = load_kb(kb_dirs)
        rule = kb.get("other")
        if rule is not None:
            inc.title = rule.title
        return _public(pipeline.complete([inc], kb, source, "script"))
    except Exception:  # even the catch-all's guide failed: the error as read is still an answer
        return Diagnosis(source=source, incidents=[inc])


def _diagnose(exc: BaseException, log: str | os.PathLike[str] | None, kb_dirs: list[Path] | None) -> Diagnosis:
    from kbdebug.runtime import live  # a live exception's reading: a log's diagnosis never needs it

    guarded = _guard_diagnosis(exc, kb_dirs)
    if guarded is not None:
        return guarded
    from kbdebug.runtime.fdtee import active_text

    parts: list[str] = []
    if isinstance(log, os.PathLike):
        parts.append(Path(log).read_text(encoding="utf-8", errors="replace"))
    elif isinstance(log, str):
        parts.append(log)
    captured = active_text()
    if captured:
        parts.append(captured)
    regions = scan_text("\n".join(parts), needles) if parts else []
    text_lines = [(ln.no, ln.text) for ln in iter_lines(regions)]
    exception = live.read_exception(exc, first_line=max((no for no, _ in text_lines), default=0) + 1)
    records = [*parse_regions(regions), *exception.records]
    return _public(
        pipeline.diagnose(
            records,
            load_kb(kb_dirs),
            f"<{live.type_name(type(exc))}>",
            [*text_lines, *exception.lines],
            origin="script",
            caller=live.running_script(),
            live=exception.evidence,
        )
    )


def _guard_diagnosis(exc: BaseException, kb_dirs: list[Path] | None) -> Diagnosis | None:
    """A KbdebugError from `guard()` already knows its rule and facts."""
    from kbdebug.runtime import live

    for e in live.chain_of(exc):
        rule = getattr(e, "kbdebug_rule", None)
        if rule:
            facts: Facts = dict(getattr(e, "kbdebug_facts", {}) or {})  # type: ignore[assignment]  # guard() says declared facts
            cpu = live.cpu_only_run()
            if cpu:  # guard() checked the arguments on the CPU: no kernel ran, nothing to rerun blocking
                facts.setdefault("device", "cpu")
            kb = load_kb(kb_dirs)
            r = kb.get(rule)
            inc = Incident(
                rule=rule, title=r.title if r else rule, confidence=0.99, checks=list(r.checks) if r else [], device_evidence=not cpu
            )
            evidence = LiveEvidence(outer=live.read_site(e, live.user_site(e)))
            return _public(
                pipeline.complete([inc], kb, f"<{live.type_name(type(e))}>", "script", live.running_script(), evidence, guard=facts)
            )
    return None


class Diagnosis(core.Diagnosis):
    """A diagnosis, with its conveniences: `render()` in any format and `verify()` on the user's own tensors."""

    def render(self, fmt: str = "text", color: bool = False, *, facts: bool = False, evidence: bool = True) -> str:
        """The diagnosis as "text", "markdown", "json" or "html" (kbdebug.render). In text, `facts=True` adds the
        table of every fact read; `evidence=False` leaves out the log lines (shown just above, by an excepthook)."""
        from kbdebug.render import render

        return render([self], fmt, color=color, facts=facts, evidence=evidence)

    def verify(self, **tensors: Any) -> Diagnosis:
        """Run the checks each incident's rule names on the user's own tensors (needs torch).

        Tensors and settings captured from the failing line by `diagnose(exc)` are used for the roles not
        passed here, so `diag.verify()` alone checks what the failing call was given (kbdebug.verify.verify_diagnosis)."""
        from kbdebug.verify import verify_diagnosis

        verify_diagnosis(self, tensors)
        return self


def _public(diag: core.Diagnosis) -> Diagnosis:
    """The pipeline's result as the public Diagnosis, with its conveniences."""
    out = Diagnosis.model_construct(**{name: getattr(diag, name) for name in type(diag).model_fields})
    if diag.inputs:
        out.keep_inputs(diag.inputs)
    return out


__all__ = ["Diagnosis", "Scanner", "diagnose", "diagnose_regions", "diagnose_text", "explain", "user_frame"]
