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

A guide whose cause shows in many ways (the catch-all's: a message template each) keeps each way in a page of
its own, beside it:

    knowledge/<id>/cases/<name>.md          one case: a header `---` / `when: <test>` / `---` (a jinja2 test
                                            over the facts), then any of the four sections, for that case alone

The cases are tried in file-name order: the first whose test holds gives its Why it happens, How to confirm and
How to fix in place of the guide's own, and its What it means follows the guide's (which says what failed, where).
What stands before a case's first section is its own `{% set %}`s, set before the tests of every section it is in; the
guide's shared part is its cases' too.

A single `<name>.toml` holding `[guide]` and `[examples]` tables is the same rule in one file (handy
for a user's own rule); both forms are read by `rule_data`.
"""

from __future__ import annotations

import json
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple

from kbdebug import _regex_cache
from kbdebug.kb.watch import Watch

RULE_FILE = "rule.toml"
GUIDE_FILE = "guide.md"
CASES_DIR = "cases"
EXAMPLES_DIR = "examples"
# The guide's sections: its model's field, and the heading the user reads.
GUIDE_SECTIONS = (("what", "What it means"), ("why", "Why it happens"), ("confirm", "How to confirm"), ("fix", "How to fix"))
_HEADING = _regex_cache.compile(r"^##[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
_CALLED = _regex_cache.compile(r'\{\{ case\(("(?:[^"\\]|\\.)*")\) \}\}')
_CASE_HEADER = _regex_cache.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.S)


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
                if os.path.isdir(cases := os.path.join(os.path.dirname(rule), CASES_DIR)):
                    watch.add(cases)
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
            out += _case_stamps(os.path.dirname(rule))
    return out


def _case_stamps(folder: str) -> list[tuple[str, int, int]]:
    """A rule folder's cases folder (its time of change says a page was added, removed or renamed) and each page
    in it; nothing for a folder without one (one stat)."""
    cases = os.path.join(folder, CASES_DIR)
    try:
        st = os.stat(cases)
    except OSError:
        return []
    out = [(cases, st.st_size, st.st_mtime_ns)]
    with os.scandir(cases) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            if entry.name.endswith(".md") and not entry.name.startswith("."):
                st = entry.stat()
                out.append((entry.path, st.st_size, st.st_mtime_ns))
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


def read_guide(text: str, where: Path, cases: list[Case] | None = None) -> dict[str, Any]:
    """The sections of a guide.md, each as one template (paragraphs kept, line breaks inside them spaces), with
    its cases (`read_cases`) joined in: each section tries them in order before its own text, What it means after.
    A case's section is called by its key (`case("unpacking.fix")`), its text kept under `cases`: the guide
    environment compiles it only when a guide reaches it (kbdebug.diagnoser.guides), and a guide's code holds no
    case's text. A case's shared part (its `{% set %}`s) stands before the tests, as the guide's does: a name
    set inside one branch would be, to jinja2, a fact read from the incident in every other."""
    shared, sections = _split_guide(text, where)
    texts: dict[str, str] = {}
    for key, _ in GUIDE_SECTIONS:
        branches = [case for case in cases or () if case.sections.get(key)]
        if not branches:
            continue
        lead = " " if key == "what" else ""
        sets = "".join(case.shared for case in branches)
        tests = "".join(f"{{% {'elif' if i else 'if'} {c.when} %}}{lead}{_call(f'{c.name}.{key}')}" for i, c in enumerate(branches))
        texts.update({f"{c.name}.{key}": c.sections[key] for c in branches})
        own = sections.get(key, "")
        sections[key] = sets + (f"{own}{tests}{{% endif %}}" if key == "what" else f"{tests}{{% else %}}{own}{{% endif %}}")
    out: dict[str, Any] = {key: f"{shared} {body}" if shared and body else body for key, body in sections.items()}
    if texts:
        out["cases"] = texts
    return out


def _call(key: str) -> str:
    return f"{{{{ case({json.dumps(key)}) }}}}"


def inlined(section: str, cases: dict[str, str]) -> str:
    """A guide section with each case's text in the place of its call: the one template to read its facts from."""
    return _CALLED.sub(lambda m: cases.get(json.loads(m.group(1)), ""), section)


def _split_guide(text: str, where: Path) -> tuple[str, dict[str, str]]:
    """A guide's shared part (what stands before its first section) and its sections, as `read_guide` joins them."""
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
        out[key] = join_lines(text[mark.end() : end])
    return shared, out


class Case(NamedTuple):
    """One page of a guide's `cases` folder: its name, the test that selects it, its shared part, its sections."""

    name: str
    when: str
    shared: str
    sections: dict[str, str]


def read_cases(folder: Path) -> list[Case]:
    """The cases of a rule folder's guide (`cases/*.md`), in the order they are tried: their files' names."""
    out = []
    for path in case_files(folder):
        text = _read_text(path)
        head = _CASE_HEADER.match(text)
        lines = head.group(1).splitlines() if head else []
        fields = {k.strip(): v for k, v in (line.partition(":")[::2] for line in lines if line.strip())}
        when = " ".join(fields.pop("when", "").split())
        if head is None or not when or fields:
            raise LayoutError(f"{path}: a case starts with its test, on lines of their own: `---`, `when: <test>`, `---`")
        shared, sections = _split_guide(text[head.end() :], path)
        if not any(sections.values()):
            raise LayoutError(f"{path}: a case has at least one section ('## What it means', '## Why it happens', ...)")
        out.append(Case(path.stem, when, shared, sections))
    return out


def _read_text(path: Path) -> str:
    """A guide's or a case page's text; a LayoutError names the file that cannot be read or is not UTF-8."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise LayoutError(f"{exc.filename or path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise LayoutError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def case_files(folder: Path) -> list[Path]:
    """A rule folder's case pages, in the order they are tried (none when it has no `cases` folder)."""
    return sorted((folder / CASES_DIR).glob("*.md"))


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
    data["guide"] = read_guide(_read_text(guide), guide, read_cases(folder))
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
