"""`python -m kbdebug.kb`: write knowledge/rules.json (the bundled rules as read from their files) after editing a rule."""

import json
import sys

from kbdebug._resources import data_dir
from kbdebug.kb.layout import rule_paths
from kbdebug.kb.loader import read_rule
from kbdebug.kb.shipped import FILE, snapshot


def main() -> int:
    path = data_dir("knowledge") / FILE
    try:
        current = snapshot()
        # the bundled rules are loaded without compiling their patterns (a start-up saving): a pattern RE2 cannot run
        # is refused here, where it is written, not in a user's explain
        problems = [p for rule_file in rule_paths(data_dir("knowledge")) for p in read_rule(rule_file)[1]]
    except (OSError, ValueError) as exc:  # a rule file that is not valid TOML or UTF-8: said on one line, rules.json kept
        problems = [str(exc)]
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        print(
            f"kbdebug.kb: {problems[0]}{more}; knowledge/{FILE} not written (`kbdebug rules lint knowledge` lists every problem)",
            file=sys.stderr,
        )
        return 1
    path.write_text(json.dumps(current, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
