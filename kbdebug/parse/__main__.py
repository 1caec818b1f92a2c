"""`python -m kbdebug.parse`: write each format folder's derived.json after editing a grammar or the code that reads them."""

import json
import sys

from kbdebug.parse.derive import packaged_readings


def main() -> int:
    """Write every format folder's derived.json from its grammars and the code that reads them now."""
    for path, data in sorted(packaged_readings().items()):
        path.write_text(json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
