"""How a rule lies on disk: a folder of its own, or, for a quick user rule, one TOML file.

A bundled rule is a folder named after its id:

    knowledge/<id>/rule.toml                what it matches, what it is a consequence of, `retry`, checks, references
    knowledge/<id>/guide.md                 its guide: Markdown with jinja2 over the incident's facts, one `##`
                                            section each for What it means / Why it happens / How to confirm / How to fix
    knowledge/<id>/examples/positive/*.log  log snippets that must be diagnosed as the rule
    knowledge/<id>/examples/negative/*.log  ... and that must not (near misses)

A guide is written with real newlines: a line break inside a paragraph is a space, as Markdown reads
it, and a blank line ends a paragraph. What stands before the first section is shared by all four:
decide a case once there (`{% set wanted = ... %}`) instead of writing the same branches in each.

A single `<name>.toml` holding `[guide]` and `[examples]` tables is the same rule in one file (handy
for a user's own rule); both forms are read by `rule_data`.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from kbdebug import _regex_cache
from kbdebug.kb.watch import Watch

RULE_FILE = "rule.toml"
GUIDE_FILE = "guide.md"
EXAMPLES_DIR = "examples"
# The guide's sections: its model's field, and the heading the user reads.
GUIDE_SECTIONS = (("what", "What it means"), ("why", "Why it happens"), ("confirm", "How to confirm"), ("fix", "How to fix"))
_HEADING = _regex_cache.compile(r"^##[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)


class LayoutError(ValueError):
    """A rule folder that cannot be read as one: the file and what is wrong with it."""


def rule_paths(directory: Path) -> list[Path]:
    """The rules in a directory: each folder's `rule.toml` and each single-file `*.toml`, by name."""
    found = [Path(rule) for rule, _ in _rule_files(str(directory), os.stat(directory).st_mtime_ns) if os.path.isfile(rule)]
    return sorted(found, key=lambda p: (p.parent.name if p.name == RULE_FILE else p.stem, str(p)))


def rule_stamps(directory: Path, watch: bool = False) -> list[tuple[str, int, int]]:
    """(file, size, time of change) of every file the rules in `directory` are read from (`rule_paths`, and a
    folder's guide; a missing guide as -1, -1): what a loaded knowledge base is kept by. A process that
    diagnoses log after log asks for it each time, so it costs a stat per file: which files there are is read
    again only when the directory's own time of change says an entry was added, removed or renamed.

    `watch` (the bundled rules: on this machine's disk, never a network share whose edits another machine makes):
    once asked WATCH_FROM times, the folders are watched (kbdebug.kb.watch) and the files are stat'ed again
    only when the watch cannot say that nothing in them changed since."""
    key = str(directory)
    asked = _ASKED[key] = _ASKED.get(key, 0) + 1
    if not watch or asked < WATCH_FROM or key in _UNWATCHABLE:
        return _stamps(key, None)
    kept = _WATCHED.get(key)
    if kept is not None and kept[0].quiet():
        return kept[1]
    if kept is not None:
        kept[0].close()
    started = Watch()
    started.add(key)  # before the folder is listed: an entry added from now on is an event
    out = _stamps(key, started)
    _WATCHED[key] = (started, out)
    return out


WATCH_FROM = 3  # a run that diagnoses one log asks twice (its diagnosis, its exit status): it sets up no watch
_ASKED: dict[str, int] = {}
_WATCHED: dict[str, tuple[Watch, list[tuple[str, int, int]]]] = {}
_UNWATCHABLE: set[str] = set()  # directories holding a linked rule file: stat'ed on every ask


def _stamps(directory: str, watch: Watch | None) -> list[tuple[str, int, int]]:
    out: list[tuple[str, int, int]] = []
    listed = _rule_files(directory, os.stat(directory).st_mtime_ns)
    if watch is not None and watch.fd >= 0:  # (no inotify here: nothing to watch, nothing to check)
        for rule, guide in listed:  # each rule folder, before its files are stat'ed: a write from now on is an event
            if guide is not None:
                watch.add(os.path.dirname(rule))
            if any(os.path.islink(f) for f in (rule, guide) if f is not None):
                watch.close()  # a link's target is elsewhere: a write there is no event here
                _UNWATCHABLE.add(directory)
                break
    for rule, guide in listed:
        try:
            st = os.stat(rule)
        except OSError:
            continue  # a folder without a rule.toml is no rule
        out.append((rule, st.st_size, st.st_mtime_ns))
        if guide is not None:
            try:
                st = os.stat(guide)
                out.append((guide, st.st_size, st.st_mtime_ns))
            except OSError:
                out.append((guide, -1, -1))
    return out


@lru_cache(maxsize=32)
def _rule_files(directory: str, mtime_ns: int) -> tuple[tuple[str, str | None], ...]:
    """(rule file, its guide or None) for every rule `directory` may hold, as it was listed at that time of
    change: each folder's rule.toml and guide.md, each single-file `*.toml` (names starting with a dot are
    not listed, as a glob does not)."""
    files: list[tuple[str, str | None]] = []
    with os.scandir(directory) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            if entry.name.startswith("."):
                continue
            if entry.is_dir():
                files.append((f"{entry.path}{os.sep}{RULE_FILE}", f"{entry.path}{os.sep}{GUIDE_FILE}"))
            elif entry.name.endswith(".toml") and entry.is_file():
                files.append((entry.path, None))
    return tuple(files)


def is_folder_rule(path: Path) -> bool:
    return path.name == RULE_FILE


def read_guide(text: str, where: Path) -> dict[str, str]:
    """The sections of a guide.md, each as one template (paragraphs kept, line breaks inside them spaces)."""
    titles = {title.lower(): key for key, title in GUIDE_SECTIONS}
    marks = list(_HEADING.finditer(text))
    shared = join_lines(text[: marks[0].start()] if marks else text)
    out: dict[str, str] = {}
    for i, mark in enumerate(marks):
        key = titles.get(mark.group(1).strip().lower())
        if key is None:
            known = ", ".join(f"'## {title}'" for _, title in GUIDE_SECTIONS)
            raise LayoutError(f"{where}: unknown section '## {mark.group(1).strip()}' (the sections are {known})")
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        body = join_lines(text[mark.end() : end])
        out[key] = f"{shared} {body}" if shared and body else body
    return out


def join_lines(text: str) -> str:
    """Markdown's reading of a paragraph's line breaks: a space; a blank line still ends the paragraph."""
    paragraphs = re.split(r"\n[ \t]*\n", text.strip())
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs if p.strip())


def read_examples(folder: Path) -> dict[str, list[str]]:
    """The example snippets of a rule folder, each file one snippet, in file-name order; a LayoutError names
    a file that cannot be read."""
    out: dict[str, list[str]] = {}
    for kind in ("positive", "negative"):
        files = sorted((folder / EXAMPLES_DIR / kind).glob("*.log"))
        try:
            out[kind] = [f.read_text(encoding="utf-8") for f in files]
        except OSError as exc:
            raise LayoutError(f"{exc.filename or folder}: cannot read: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise LayoutError(f"{folder / EXAMPLES_DIR / kind}: an example is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return out


def rule_data(path: Path, parsed: dict[str, Any]) -> dict[str, Any]:
    """A rule's whole data: the TOML's, with a folder's guide and examples joined in."""
    if not is_folder_rule(path):
        return parsed
    folder = path.parent
    for table, name in (("guide", GUIDE_FILE), ("examples", EXAMPLES_DIR)):
        if table in parsed:
            raise LayoutError(f"{path}: [{table}] belongs in {name} beside it, not in {RULE_FILE}")
    data = dict(parsed)
    guide = folder / GUIDE_FILE
    try:
        data["guide"] = read_guide(guide.read_text(encoding="utf-8"), guide)
    except OSError as exc:
        raise LayoutError(f"{exc.filename or guide}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise LayoutError(f"{folder}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return data


def read_rule_files(path: Path, raw: bytes) -> tuple[dict[str, Any], str | None]:
    """A rule's data read from its files (`rule_data`), and the problem found, if any, as the sentence a user reads:
    the loader's and the shipped snapshot's one reading of a rule file."""
    try:  # only when a rule file is read: a cached or shipped knowledge base never needs it
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: tomllib is the standard library's copy of tomli (3.11)
        import tomli as tomllib  # type: ignore[no-redef,import-not-found,unused-ignore]

    try:
        parsed = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return {}, f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})"
    except tomllib.TOMLDecodeError as exc:
        return {}, f"{path}: not valid TOML: {exc}"
    try:
        return rule_data(path, parsed), None
    except LayoutError as exc:
        return parsed, str(exc)
