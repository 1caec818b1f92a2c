"""`python -m kbdebug.render`: write kbdebug/render/templates/compiled.json (the report templates as jinja2 compiles
them) after editing a template or the environment they are rendered in."""

import json
import sys

from kbdebug.core.templating import compiled_templates
from kbdebug.render.environment import COMPILED, _env


def main() -> int:
    env = _env()
    data = compiled_templates(env, sorted(env.list_templates(extensions=["j2"])))
    COMPILED.write_text(json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {COMPILED}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
