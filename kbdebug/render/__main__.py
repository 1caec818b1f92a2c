"""`python -m kbdebug.render`: write the Python jinja2 makes of the package's own templates, after editing one or
the environment it is rendered in: kbdebug/render/templates/compiled.json (the report templates) and
knowledge/guides.json and guides.code (the bundled rules' guide fragments and the phrases they call: an index, and the
Python it points into)."""

import json
import sys
from pathlib import Path
from typing import Any

from kbdebug._resources import data_dir
from kbdebug.core.templating import compiled_templates, indexed_templates
from kbdebug.diagnoser.guides import COMPILED_GUIDES, COMPILED_GUIDES_CODE, fragments, guide_environment
from kbdebug.kb.loader import bundled_rules
from kbdebug.render.environment import COMPILED, _env


def compiled_guides() -> tuple[dict[str, Any], bytes]:
    """The bundled rules' fragments as the guide stage compiles them (no rule folder of the user's): the index and
    the code file it points into."""
    return indexed_templates(guide_environment(), fragments(bundled_rules()), COMPILED_GUIDES_CODE, "<guide fragment>")


def _write(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path}")


def main() -> int:
    env = _env()
    _write(COMPILED, compiled_templates(env, sorted(env.list_templates(extensions=["j2"]))))
    index, code = compiled_guides()
    (data_dir("knowledge") / COMPILED_GUIDES_CODE).write_bytes(code)
    _write(data_dir("knowledge") / COMPILED_GUIDES, index)
    return 0


if __name__ == "__main__":
    sys.exit(main())
