"""`python -m kbdebug.kb`: write knowledge/rules.json (the bundled rules as read from their files) after editing a rule."""

import json
import sys

from kbdebug._resources import data_dir
from kbdebug.kb.shipped import FILE, snapshot


def main() -> int:
    path = data_dir("knowledge") / FILE
    try:
        current = snapshot()
    except (OSError, ValueError) as exc:  # a rule file that is not valid TOML or UTF-8: said on one line, rules.json kept
        print(f"kbdebug.kb: {exc}; knowledge/{FILE} not written (`kbdebug rules lint knowledge` lists every problem)", file=sys.stderr)
        return 1
    path.write_text(json.dumps(current, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
