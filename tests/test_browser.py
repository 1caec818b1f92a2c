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


MEASURE = """<script>
window.addEventListener("load", () => {
  const out = {};
  const wide = (el) => el.scrollWidth > el.clientWidth + 1;
  out.decisive = document.querySelectorAll(".decisive").length;
  out.evidence_scrolls = [...document.querySelectorAll("pre.evidence")].some(wide);
  const mark = document.querySelector(".decisive mark");
  const pre = mark && mark.closest("pre");
  out.mark_visible = !!mark && mark.getBoundingClientRect().right <= pre.getBoundingClientRect().right + 1;
  out.facts_fit = [...document.querySelectorAll("table.facts")].every(t => t.getBoundingClientRect().right <= document.body.getBoundingClientRect().right + 1);
  out.page_scrolls = document.documentElement.scrollWidth > window.innerWidth;
  document.body.setAttribute("data-measured", JSON.stringify(out));
});
</script>"""


def test_decisive_line_and_facts_visible_at_800px(tmp_path: Path) -> None:
    """At 800 px: one decisive line (the root assert, not its consequence), its highlighted condition visible
    without a horizontal scrollbar, the facts table inside the page."""
    import json
    import re

    html = run_cli("explain", "-q", "--format", "html", "-", stdin=KINDS["device-assert"]).stdout.decode()
    assert html.count(' decisive"') == 1
    page = tmp_path / "measure.html"
    page.write_text(html.replace("</body>", MEASURE + "</body>"))
    dom = chromium(
        "--window-size=800,1600", "--virtual-time-budget=3000", "--dump-dom", page.as_uri(), profile=tmp_path / "p"
    ).stdout.decode()
    found = json.loads(re.search(r'data-measured="([^"]*)"', dom).group(1).replace("&quot;", '"'))
    assert found == {"decisive": 1, "evidence_scrolls": False, "mark_visible": True, "facts_fit": True, "page_scrolls": False}


def test_many_logs_make_one_document_in_a_browser(tmp_path: Path) -> None:
    for k, data in KINDS.items():
        (tmp_path / f"{k}.log").write_bytes(data)
    (tmp_path / "clean.log").write_text("epoch 1 loss 0.3\n")
    proc = run_cli("explain", "-f", "html", str(tmp_path))
    html = proc.stdout.decode()
    assert proc.returncode == 0 and html.count("<html") == 1 and html.count("</body>") == 1
    assert html.index('class="summary"') < html.index("</body>")
    page = tmp_path / "many.html"
    page.write_text(html)
    dom = chromium("--virtual-time-budget=2000", "--dump-dom", page.as_uri(), profile=tmp_path / "p").stdout.decode()
    body = dom[dom.index("<body") : dom.index("</body>")]
    assert body.count("Root cause") == 3 and "Summary: 4 logs, 3 distinct crashes" in body and "clean.log" in body
