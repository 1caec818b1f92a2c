"""The HTML report as a browser shows it (headless Chromium): guides rendered, evidence shown, nothing from
the log executed, readable at 800 px. Run by scripts/browser-check.sh; skipped without Chromium."""

from __future__ import annotations

import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest import ROOT, run_cli

pytestmark = pytest.mark.browser
EXAMPLE = ROOT / "examples" / "segmentation_crash.log"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]

HOSTILE = (
    b'Traceback (most recent call last):\n  File "seg.py", line 12, in <module>\n    loss = loss_fn(pred, label)\n'
    b"AssertionError: ground truth has different shape (torch.Size([2, 1, 96, 96])) from input (torch.Size([2, 14, 96, 96]))"
    b" <img src=x onerror=\"document.title='pwned'\"><script>document.title='pwned'</script>\n"
)
KINDS = {
    "device-assert": EXAMPLE.read_bytes(),
    "shape": HOSTILE,
    "oom": (
        b'Traceback (most recent call last):\n  File "train.py", line 88, in step\n    out = model(x)\n'
        b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.65 GiB "
        b"of which 1.02 GiB is free.\n"
    ),
}


def chromium(*args: str, profile: Path) -> subprocess.CompletedProcess:
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, timeout=120)


class Texts(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append(tag)
        self._in_title = tag == "title"

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._in_title:
            self.title += data


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_report_in_a_browser(kind: str, tmp_path: Path) -> None:
    page = tmp_path / f"{kind}.html"
    page.write_bytes(run_cli("explain", "-q", "--format", "html", "-", stdin=KINDS[kind]).stdout)
    dom = chromium("--virtual-time-budget=2000", "--dump-dom", page.as_uri(), profile=tmp_path / "p1").stdout.decode()
    parsed = Texts()
    parsed.feed(dom)
    text = "".join(parsed.text)
    assert "What it means" in text and "How to fix" in text
    assert "code" in parsed.tags  # the guide's Markdown became <code>, not literal backticks
    guide = text[text.index("What it means") : text.index("How to fix") + 400]
    assert "`" not in guide
    assert "Evidence" in text and any(ch.isdigit() for ch in text[text.index("Evidence") :][:200])  # numbered lines
    # the log's <img onerror> and <script> stayed text: no such element, and the title was never changed
    assert "img" not in parsed.tags and parsed.tags.count("script") == 0 and "pwned" not in parsed.title
    shots = Path(os.environ.get("KBDEBUG_SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    shot = shots / f"report-{kind}.png"
    chromium("--window-size=800,1600", f"--screenshot={shot}", page.as_uri(), profile=tmp_path / "p2")
    assert shot.stat().st_size > 10_000
    head = shot.read_bytes()[16:24]  # PNG IHDR: width and height, big-endian
    assert int.from_bytes(head[:4], "big") == 800


def test_page_fits_800_pixels() -> None:
    """No horizontal scrolling at 800 px: the stylesheet caps the width and lets code and tables scroll inside."""
    html = run_cli("explain", "-q", "--format", "html", "-", stdin=KINDS["device-assert"]).stdout.decode()
    style = html[html.index("<style>") : html.index("</style>")]
    assert "max-width" in style and "overflow" in style
