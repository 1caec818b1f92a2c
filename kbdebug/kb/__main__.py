"""`python -m kbdebug.kb`: write knowledge/rules.json (the bundled rules as read from their files) after editing a rule."""

import json
import sys

from kbdebug._resources import data_dir
from kbdebug.kb.shipped import FILE, snapshot


def main() -> int:
    path = data_dir("knowledge") / FILE
    path.write_text(json.dumps(snapshot(), indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
