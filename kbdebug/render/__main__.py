"""`python -m kbdebug.render`: write the Python jinja2 makes of the package's own templates, after editing one or
the environment it is rendered in: kbdebug/render/templates/compiled.json (the report templates) and
knowledge/guides.json (the bundled rules' guide fragments and the phrases they call)."""

import json
import os
import sys
from pathlib import Path
from typing import Any

from kbdebug._resources import data_dir
from kbdebug.core.templating import compiled_templates
from kbdebug.diagnoser.guides import COMPILED_GUIDES, fragments, guide_environment
from kbdebug.kb import load_kb
from kbdebug.render.environment import COMPILED, _env


def compiled_guides() -> dict[str, Any]:
    """The bundled rules' fragments as the guide stage compiles them (no rule folder of the user's)."""
    os.environ.pop("KBDEBUG_KNOWLEDGE", None)
    return compiled_templates(guide_environment(), fragments(load_kb().rules))


def _write(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path}")


def main() -> int:
    env = _env()
    _write(COMPILED, compiled_templates(env, sorted(env.list_templates(extensions=["j2"]))))
    _write(data_dir("knowledge") / COMPILED_GUIDES, compiled_guides())
    return 0


if __name__ == "__main__":
    sys.exit(main())
