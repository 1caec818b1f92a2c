#!/usr/bin/env bash
# The HTML report in a real browser: the tests marked `browser` drive headless Chromium (Debian's
# `chromium` package: apt-get install chromium) over reports of each kind, assert on the rendered page and
# keep a screenshot of each in docs/screenshots/, and the same for the crash service's dashboard and group page. Without Chromium it says so and exits 0.
set -uo pipefail
cd "$(dirname "$0")/.."
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
    echo "browser-check: no chromium on PATH (apt-get install chromium); nothing to run"
    exit 0
fi
KBDEBUG_SCREENSHOTS="${KBDEBUG_SCREENSHOTS:-docs/screenshots}" python -m pytest -q -m browser tests/test_browser.py tests/test_browser_server.py "$@"
