"""`python tests/snapshots`: write the rendered outputs the tests compare against (tests/test_renderings.py).

Run it after a change that is meant to change what users see, and read `git diff tests/snapshots/` before
committing: every changed line is a change in a guide, a fact, a signature or a retry verdict.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from kbdebug.api import explain  # noqa: E402
from kbdebug.render import render  # noqa: E402


def examples() -> list[Path]:
    """Every example log of every bundled rule, relative to the checkout."""
    return sorted(p.relative_to(ROOT) for p in (ROOT / "knowledge").glob("*/examples/*/*.log"))


def first_positives() -> dict[str, Path]:
    """The first positive example of each rule: its Markdown rendering is kept whole."""
    out: dict[str, Path] = {}
    for path in examples():
        if path.parts[-2] == "positive":
            out.setdefault(path.parts[1], path)
    return out


def verdicts(path: Path) -> list[list[object]]:
    """Each incident of an example's diagnosis as [rule, signature, retry, confidence]."""
    diag = json.loads(render([explain(ROOT / path)], "json"))
    return [[i["rule"], i["signature"], i["facts"].get("retry"), i["confidence"]] for i in diag["incidents"]]


def markdown(path: Path) -> str:
    return render([explain(path)], "markdown").replace(str(ROOT) + "/", "")


def main() -> int:
    import os

    os.chdir(ROOT)
    rows = [f"{json.dumps(str(p))}: {json.dumps(verdicts(p))}" for p in examples()]  # one example a line: a diff names it
    (HERE / "verdicts.json").write_text("{\n" + ",\n".join(rows) + "\n}\n", encoding="utf-8")
    for rule, path in first_positives().items():
        (HERE / f"{rule}.md").write_text(markdown(path), encoding="utf-8")
    print(f"wrote {HERE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
