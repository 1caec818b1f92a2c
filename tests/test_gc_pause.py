"""`diagnose(exc)` builds long-lived objects (on a first call: the pipeline's modules, the knowledge base, a
parser) without automatic collections, and leaves the collector as it found it (kbdebug._gc)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from kbdebug import diagnose
from kbdebug._gc import paused


@pytest.fixture
def collections() -> Iterator[list[int]]:
    """The generations of the automatic collections that run while the test does."""
    seen: list[int] = []

    def note(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            seen.append(info["generation"])

    gc.callbacks.append(note)
    try:
        yield seen
    finally:
        gc.callbacks.remove(note)
        gc.enable()


def _error() -> ValueError:
    try:
        int("seven")
    except ValueError as exc:
        return exc
    raise AssertionError("int('seven') raised nothing")


def test_no_collection_runs_while_a_diagnosis_builds(collections: list[int]) -> None:
    gc.enable()
    thresholds = gc.get_threshold()
    gc.collect()
    collections.clear()  # that one was ours
    gc.set_threshold(20)  # a warm process's diagnosis keeps fewer than the default 700 objects: any count would do
    try:
        diag = diagnose(_error())
        kept = gc.get_count()[0]
    finally:
        gc.set_threshold(*thresholds)
    assert diag.root is not None and diag.root.rule == "other"
    assert collections == []
    assert kept > 20, "the diagnosis allocated too little for this test to show the pause"
    assert gc.isenabled()


def test_a_users_disabled_collector_stays_disabled(collections: list[int]) -> None:
    gc.disable()
    diagnose(_error())
    assert not gc.isenabled()


def test_paused_restores_the_collector_when_the_body_raises() -> None:
    gc.enable()
    with pytest.raises(KeyError), paused():
        assert not gc.isenabled()
        raise KeyError("x")
    assert gc.isenabled()
