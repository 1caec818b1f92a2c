"""`python -m kbdebug.parse`: write grammars/derived.json after editing a grammar or the code that reads them."""

import json
import sys

from kbdebug._resources import data_dir
from kbdebug.parse.derive import packaged_readings
from kbdebug.parse.packaged import FILE


def main() -> int:
    """Write grammars/derived.json from the grammars and the code that reads them now."""
    path = data_dir("grammars") / FILE
    path.write_text(json.dumps(packaged_readings(), indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
