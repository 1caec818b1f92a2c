"""pytest plugin: append a kbdebug diagnosis to the report of a test that failed with a CUDA or
shape error. Registered through the `pytest11` entry point but inert unless `-p kbdebug` or
`--kbdebug` is given, so installing kbdebug never changes anyone's test output."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

_ACTIVE = pytest.StashKey[bool]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kbdebug")
    group.addoption(
        "--kbdebug", action="store_true", default=False, help="diagnose tests that fail with CUDA, shape or index errors (kbdebug)"
    )
    group.addoption(
        "--kbdebug-full",
        action="store_true",
        default=False,
        help="with --kbdebug: the full guide under each failing test, not the compact two lines",
    )


def pytest_configure(config: pytest.Config) -> None:
    plugins = getattr(config.known_args_namespace, "plugins", None) or []
    config.stash[_ACTIVE] = bool(config.getoption("kbdebug") or config.getoption("kbdebug_full")) or "kbdebug" in plugins


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Generator[None, Any, None]:
    outcome = yield
    if not item.config.stash.get(_ACTIVE, False) or call.excinfo is None:
        return
    report = outcome.get_result()
    if not report.failed or call.excinfo.errisinstance((pytest.skip.Exception, pytest.fail.Exception, KeyboardInterrupt)):
        return
    try:
        from kbdebug.api import diagnose

        captured = "\n".join(text for name, text in report.sections if name.startswith("Captured std"))
        diag = diagnose(call.excinfo.value, log=captured or None)
    except Exception as err:
        report.sections.append(("kbdebug", f"could not diagnose: {type(err).__name__}: {err}"))
        return
    from kbdebug.kb import load_kb

    if diag.incidents and not load_kb().tagged(diag.incidents[0].rule, "fallback"):
        # A test run shows many failures: two lines each unless the full guide is asked for.
        if item.config.getoption("kbdebug_full"):
            text = diag.render("text")
        else:
            from kbdebug.render.compact import compact

            text = compact([diag], hint=" (pytest --kbdebug-full for the guide)")
        report.sections.append((f"kbdebug diagnosis ({diag.incidents[0].rule})", text))
