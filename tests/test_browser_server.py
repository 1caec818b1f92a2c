"""The crash service's pages as a person sees them in headless Chromium: the dashboard and a group page,
log values shown as text (never run), readable at 800 px. Run by scripts/browser-check.sh; skipped without
Chromium or the server extra."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
from serverkit import EXAMPLE, HOSTILE, INDEX, OOM, get, post, serve
from test_browser import Texts, chromium

pytestmark = pytest.mark.browser


def page(url: str, tmp_path: Path, name: str) -> tuple[Texts, str]:
    dom = chromium("--virtual-time-budget=2000", "--dump-dom", url, profile=tmp_path / f"dom-{name}").stdout.decode()
    parsed = Texts()
    parsed.feed(dom)
    return parsed, " ".join(" ".join(parsed.text).split())


def screenshot(url: str, tmp_path: Path, name: str) -> Path:
    shots = Path(os.environ.get("KBDEBUG_SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    shot = shots / f"server-{name}.png"
    chromium("--window-size=800,1400", f"--screenshot={shot}", url, profile=tmp_path / f"shot-{name}")
    assert int.from_bytes(shot.read_bytes()[16:20], "big") == 800  # PNG IHDR width
    assert shot.stat().st_size > 10_000
    return shot


def test_dashboard_and_group_page_in_a_browser(tmp_path: Path) -> None:
    with serve(f"sqlite:///{tmp_path / 'c.db'}") as server:
        for i in range(3):
            post(server.url, EXAMPLE, job=f"seg-train-{i}", host=f"gpu-node-{i}", rank=str(i))
        post(server.url, OOM, job="llm-pretrain", host="gpu-node-7", rank="0")
        post(server.url, INDEX, job="embed", host="cpu-3")
        post(server.url, HOSTILE, job="<b>hostile</b>", host="<img src=x onerror=alert(1)>")
        dash, text = page(server.url + "/", tmp_path, "dash")
        assert dash.title.startswith("kbdebug crashes")  # (Texts also collects the plot bars' <title>s)
        assert "Crash groups" in text and "class target out of range in cross-entropy / NLL loss" in text
        assert text.count("NEW") == 4  # four groups, all first seen just now
        assert "6 occurrences per day" in text
        assert "svg" in dash.tags and "rect" in dash.tags
        assert "<b>hostile</b>" in text and "script" not in dash.tags and "img" not in dash.tags and "b" not in dash.tags
        screenshot(server.url + "/", tmp_path, "dashboard")

        sig = next(g["signature"] for g in get(server.url + "/v1/crashes")["crashes"] if g["rule"] == "nll_target_out_of_range")
        group, text = page(f"{server.url}/crashes/{sig}", tmp_path, "group")
        assert group.title.startswith("class target out of range")
        for heading in ("What it means", "How to fix", "Evidence", "Occurrences"):
            assert heading in text
        assert "NLLLoss2d.cu:103" in text and "code" in group.tags  # the evidence, and the guide's Markdown rendered
        for i in range(3):
            assert f"seg-train-{i} gpu-node-{i} {i}" in text  # each occurrence's job, host and rank
        screenshot(f"{server.url}/crashes/{sig}", tmp_path, "group")

        bad = next(g["signature"] for g in get(server.url + "/v1/crashes")["crashes"] if g["rule"] == "channel_onehot_mismatch")
        hostile, text = page(f"{server.url}/crashes/{bad}", tmp_path, "hostile")
        assert "pwned" not in hostile.title and "script" not in hostile.tags and "img" not in hostile.tags
        assert "<script>document.title='pwned'</script>" in text
