"""Print a diagnosis where crashes happen: uncaught exceptions, threads, IPython cells."""

from __future__ import annotations

import os
import sys
import threading
from types import TracebackType
from typing import Any, TextIO

from kbdebug.core.term import use_color

_previous: dict[str, Any] = {}


def report(exc: BaseException, stream: TextIO | None = None, compact: bool | None = None) -> bool:
    """Write the diagnosis of `exc` to `stream` (stderr); True if a known cause was found. Then, after
    `install(report=URL)`, send it to the crash service: the local diagnosis is out first, whatever the server does.
    """
    try:
        return _write(exc, stream or sys.stderr, compact)
    finally:
        if _previous.get("report"):
            _send(exc, _previous["report"], stream or sys.stderr)


def _write(exc: BaseException, stream: TextIO, compact: bool | None) -> bool:
    """The diagnosis of `exc` on `stream`.

    `compact` (default: what `install` was given, else KBDEBUG_COMPACT=1) writes two lines instead
    of the guide, for loops and threads that fail many times. Never raises: a failure inside kbdebug
    must not hide the user's own traceback.
    """
    if compact is None:
        compact = _previous.get("compact", os.environ.get("KBDEBUG_COMPACT", "") not in ("", "0"))
    try:
        from kbdebug.api import diagnose

        diag = diagnose(exc)
        from kbdebug.kb import load_kb

        if not diag.incidents or load_kb().tagged(diag.incidents[0].rule, "fallback"):
            return False
        if compact:
            from kbdebug.render.compact import compact as compact_text

            stream.write(compact_text([diag], hint=" (full guide: kbdebug.install(compact=False))"))
        else:
            # the traceback is just above: the guide follows it without printing its lines again
            stream.write("\n" + diag.render("text", color=use_color(stream), evidence=False))
        stream.flush()
        return True
    except Exception as err:
        try:
            stream.write(f"kbdebug: could not diagnose this exception ({type(err).__name__}: {err})\n")
        except Exception:
            pass
        return False


def _send(exc: BaseException, url: str, stream: TextIO) -> None:
    """`install(report=URL)`: the traceback (and what fd 2 showed, when captured) to the crash service.
    Never raises: reporting is a courtesy to the team, the user's own traceback and guide come first."""
    import traceback

    try:
        from kbdebug.runtime.fdtee import active_text
        from kbdebug.runtime.reporting import job_metadata, post

        tb = "".join(traceback.format_exception(exc))
        captured = active_text() or ""
        last = tb.rstrip().rsplit("\n", 1)[-1]
        log = captured if last and last in captured else captured + tb
        post(url, log.encode("utf-8", "surrogatepass"), job_metadata(" ".join(sys.argv)), stream=stream)
    except Exception as err:
        try:
            stream.write(f"kbdebug: could not report to {url}: {type(err).__name__}: {err}\n")
        except Exception:
            pass


def _excepthook(et: type[BaseException], ev: BaseException, tb: TracebackType | None) -> None:
    _previous.get("sys", sys.__excepthook__)(et, ev, tb)
    if not issubclass(et, KeyboardInterrupt):
        report(ev)


def _thread_hook(args: threading.ExceptHookArgs) -> None:
    _previous.get("threading", threading.__excepthook__)(args)
    if args.exc_value is not None and not issubclass(args.exc_type, SystemExit):
        report(args.exc_value)


def install(*, capture: bool = False, compact: bool | None = None, report: str | None = None) -> None:
    """Diagnose uncaught exceptions, after the normal traceback, in the main thread and in threads.

    With `capture=True` fd 2 is teed for the rest of the process (see `kbdebug.capture`) so the
    GPU's assertion lines reach the diagnosis too. `compact=True` prints two lines per failure
    (rule, the wrong value, the user's line) instead of the guide: for workers that fail in a loop.
    `report=URL` also sends each failure to a kbdebug crash service (`kbdebug serve`), best effort:
    at most two seconds, one line on stderr when the server cannot take it.
    """
    if compact is not None:
        _previous["compact"] = compact
    if report is not None:
        _previous["report"] = report
    if sys.excepthook is not _excepthook:
        _previous["sys"] = sys.excepthook
        sys.excepthook = _excepthook
    if threading.excepthook is not _thread_hook:
        _previous["threading"] = threading.excepthook
        threading.excepthook = _thread_hook
    if capture and "capture" not in _previous:
        from kbdebug.runtime.fdtee import capture as _capture

        _previous["capture"] = _capture().__enter__()


def uninstall() -> None:
    """Put back the hooks `install()` replaced and stop its capture."""
    if sys.excepthook is _excepthook:
        sys.excepthook = _previous.pop("sys", sys.__excepthook__)
    if threading.excepthook is _thread_hook:
        threading.excepthook = _previous.pop("threading", threading.__excepthook__)
    cap = _previous.pop("capture", None)
    if cap is not None:
        cap.close()
    _previous.pop("compact", None)
    _previous.pop("report", None)


# -- IPython: `%load_ext kbdebug` ---------------------------------------------------------------
def _ipython_handler(shell: Any, etype: type[BaseException], evalue: BaseException, tb: TracebackType, tb_offset: int | None = None) -> Any:
    shell.showtraceback((etype, evalue, tb), tb_offset=tb_offset)
    report(evalue, sys.stdout)  # a notebook shows stdout in the cell's output
    return None


def load_ipython_extension(ipython: Any) -> None:
    """Diagnose every exception a cell raises. fd 2 is teed as well: in Jupyter the GPU's assertion
    lines go to the server's terminal, never into the cell, so this is the only way to see them."""
    ipython.set_custom_exc((Exception,), _ipython_handler)
    if "ipython_capture" not in _previous and not os.environ.get("KBDEBUG_NO_CAPTURE"):
        from kbdebug.runtime.fdtee import capture as _capture

        _previous["ipython_capture"] = _capture().__enter__()


def unload_ipython_extension(ipython: Any) -> None:
    ipython.set_custom_exc((), None)
    cap = _previous.pop("ipython_capture", None)
    if cap is not None:
        cap.close()
