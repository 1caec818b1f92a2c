"""The bundled rules' files are watched (kbdebug.kb.watch) instead of stat'ed on every `load_kb`: the stamps a
watched directory answers with are those of the files as they are, whatever was written, touched, added or
removed since the last time it was asked; where the watch cannot be sure (a linked file), every ask stats."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from test_rule_layout import GUIDE, make_rule

from kbdebug.kb import layout
from kbdebug.kb.layout import rule_stamps
from kbdebug.kb.watch import Watch

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's; elsewhere every ask stats")


def _asked(folder: Path) -> list[tuple[str, int, int]]:
    """The watched answer, checked against the files as a stat of each finds them."""
    watched = rule_stamps(folder, watch=True)
    assert watched == rule_stamps(folder)
    return watched


def test_a_watched_directory_sees_every_change_at_once(tmp_path: Path) -> None:
    rule = make_rule(tmp_path)
    guide = rule.parent / "guide.md"
    first = [_asked(tmp_path) for _ in range(layout.WATCH_FROM)][-1]  # the last of these starts the watch
    assert rule_stamps(tmp_path, watch=True) is first  # nothing changed: answered by the watch, no stat
    guide.write_text(GUIDE + "More.\n", encoding="utf-8")  # an edit of a file in a rule's folder
    edited = _asked(tmp_path)
    assert edited != first and rule_stamps(tmp_path, watch=True) is edited
    st = guide.stat()
    os.utime(guide, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # touched: same size, later time
    assert _asked(tmp_path) != edited
    (tmp_path / "more.toml").write_text('id = "more"\n', encoding="utf-8")  # a rule added beside it
    assert any(name.endswith("more.toml") for name, _, _ in _asked(tmp_path))
    guide.unlink()  # a folder's guide removed
    assert (str(guide), -1, -1) in _asked(tmp_path)


def test_a_watched_directory_sees_a_case_page_edited_added_or_removed(tmp_path: Path) -> None:
    rule = make_rule(tmp_path)
    cases = rule.parent / "cases"
    cases.mkdir()
    page = cases / "one.md"
    page.write_text("---\nwhen: x\n---\n## How to fix\n\nOne.\n", encoding="utf-8")
    first = [_asked(tmp_path) for _ in range(layout.WATCH_FROM)][-1]
    assert any(name == str(page) for name, _, _ in first) and rule_stamps(tmp_path, watch=True) is first
    page.write_text("---\nwhen: x\n---\n## How to fix\n\nOne, edited.\n", encoding="utf-8")  # an edit inside the cases folder
    edited = _asked(tmp_path)
    assert edited != first
    (cases / "two.md").write_text("---\nwhen: y\n---\n## How to fix\n\nTwo.\n", encoding="utf-8")  # a page added
    assert any(name.endswith("two.md") for name, _, _ in _asked(tmp_path))
    page.unlink()  # a page removed
    assert not any(name == str(page) for name, _, _ in _asked(tmp_path))


def test_a_linked_rule_file_is_stated_every_time(tmp_path: Path) -> None:
    rules, elsewhere = tmp_path / "rules", tmp_path / "elsewhere"
    rule = make_rule(rules)
    elsewhere.mkdir()
    (elsewhere / "guide.md").write_text(GUIDE, encoding="utf-8")
    (rule.parent / "guide.md").unlink()
    (rule.parent / "guide.md").symlink_to(elsewhere / "guide.md")
    before = [_asked(rules) for _ in range(layout.WATCH_FROM)][-1]  # the last of these would start a watch
    (elsewhere / "guide.md").write_text(GUIDE + "More.\n", encoding="utf-8")  # an edit with no event in the rules' folders
    assert _asked(rules) != before


def test_a_watch_made_by_another_process_is_never_quiet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    watch = Watch()
    watch.add(str(tmp_path))
    assert watch.quiet()
    monkeypatch.setattr(os, "getpid", lambda: watch.pid + 1)  # as in a child forked after it was made
    assert not watch.quiet()
