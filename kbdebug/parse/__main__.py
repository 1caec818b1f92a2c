"""`python -m kbdebug.parse`: write each format folder's derived.json and parsers.json after editing a grammar or the
code that reads them."""

import json
import os
import sys

from kbdebug.parse.derive import packaged_readings
from kbdebug.parse.grammar import shipped_tables


def main() -> int:
    """Write every format folder's derived.json and parsers.json from its grammars and the code that reads them now."""
    os.environ["KBDEBUG_NO_CACHE"] = "1"  # every parser read from the grammars themselves
    for path, data in sorted(packaged_readings().items()):
        path.write_text(json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {path}")
    for path, tables in sorted(shipped_tables().items()):
        path.write_text(json.dumps(tables, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
