"""Rendered reports: Markdown guides rendered, evidence lines shown, tensors as a table (DOM-level for HTML)."""

from __future__ import annotations

from html.parser import HTMLParser

from kbdebug.api import diagnose_text

ASSERTS = "".join(
    f"/pytorch/aten/src/ATen/native/cuda/Loss.cu:242: nll_loss_forward_reduce_cuda_kernel_2d: block: [{b},0,0], thread: [{t},0,0] "
    "Assertion `t >= 0 && t < n_classes` failed.\n"
    for b in range(3, 9)
    for t in (1, 2)
)
LOG = "epoch 1\nstep 7 loss 0.3\n" + ASSERTS + "RuntimeError: CUDA error: device-side assert triggered\nafter\n"


class _Dom(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.text: dict[str, list[str]] = {}
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.stack.append(tag)
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        while self.stack and self.stack.pop() != tag:
            pass

    def handle_data(self, data):
        for tag in set(self.stack):
            self.text.setdefault(tag, []).append(data)


def test_evidence_lines_in_text_markdown_html() -> None:
    diag = diagnose_text(LOG)
    text = diag.render("text")
    assert ">     3  /pytorch/aten/src/ATen/native/cuda/Loss.cu:242" in text
    assert "      2  step 7 loss 0.3" in text
    assert "… 10 more assert lines, blocks [3..8]" in text
    md = diag.render("markdown")
    assert "▶     3  /pytorch" in md and "… 10 more assert lines, blocks [3..8]" in md
    dom = _Dom()
    dom.feed(diag.render("html"))
    assert "t >= 0 && t < n_classes" in "".join(dom.text["mark"])
    lines = [a.get("data-line") for tag, a in dom.tags if tag == "span" and "line" in (a.get("class") or "")]
    assert lines[:3] == ["1", "2", "3"]


def test_guides_render_markdown_in_every_format() -> None:
    diag = diagnose_text(LOG)
    assert any("`" in g for g in diag.root.guide.values())
    for fmt in ("text",):
        body = diag.render(fmt).split("Evidence")[0]
        assert "`" not in body
    dom = _Dom()
    dom.feed(diag.render("html"))
    guide_text = "".join(dom.text.get("div", []))
    assert "`" not in guide_text and dom.text.get("code")
    assert any(tag == "a" and a.get("href", "").startswith("https://") for tag, a in dom.tags)


def test_frame_tensors_table_marks_the_label() -> None:
    diag = diagnose_text("ValueError: Target size (torch.Size([1, 3, 8, 8])) must be the same as input size (torch.Size([1, 1, 8, 8]))\n")
    diag.root.facts["frame_tensors"] = {
        "logits": {"shape": [1, 1, 8, 8], "dtype": "float32", "device": "cpu", "min": -1.5, "max": 2},
        "mask": {"shape": [1, 3, 8, 8], "dtype": "float32", "device": "cpu", "min": 0, "max": 1},
    }
    text = diag.render("text")
    assert "! mask" in text and "  logits" in text and "{'shape'" not in text
    dom = _Dom()
    dom.feed(diag.render("html"))
    marked = [a for tag, a in dom.tags if tag == "tr" and a.get("class") == "offending"]
    assert len(marked) == 1
    assert "| ⚠ | `mask` | [1, 3, 8, 8]" in diag.render("markdown")


BACKTICK_LOG = (
    'Traceback (most recent call last):\n  File "train.py", line 12, in <module>\n    out = model(x)\n'
    "RuntimeError: Expected `input` to have 3 ``channels`` <got 4>\n"
)


def test_markdown_keeps_the_logs_backticks_copyable() -> None:
    """#30: the message is quoted in a code span fenced longer than its own backtick runs, not with look-alikes."""
    from markdown_it import MarkdownIt

    from kbdebug.api import diagnose_text

    diag = diagnose_text(BACKTICK_LOG)
    md = diag.render("markdown")
    assert "\u02cb" not in md and "&lt;" not in md
    spans = [
        t.content
        for tok in MarkdownIt("commonmark").parse(md)
        if tok.type == "inline"
        for t in tok.children or []
        if t.type == "code_inline"
    ]
    assert "RuntimeError: Expected `input` to have 3 ``channels`` <got 4>" in spans
    plain = diag.render("text")
    assert "Expected `input` to have 3 ``channels`` <got 4>" in plain


def test_compact_line_has_no_markdown() -> None:
    from conftest import ROOT

    from kbdebug.api import diagnose_text
    from kbdebug.render.compact import compact

    text = compact([diagnose_text((ROOT / "examples" / "segmentation_crash.log").read_text())])
    assert text.startswith("kbdebug: nll_target_out_of_range at /home/user/seg/train.py:151: ") and "`" not in text


def test_many_logs_markdown_summary_quotes_code_as_code(tmp_path) -> None:
    """#30: a `<` inside a code span of the summary is shown as `<`, not `&lt;`."""
    from kbdebug.render.summary import render_summary

    diag = diagnose_text(BACKTICK_LOG, source="a.log")
    md = render_summary([diag, diagnose_text("epoch 1\n", source="clean.log")], "markdown")
    assert "&lt;" not in md and "<got 4>" in md and "Nothing recognised in: `clean.log`" in md


def test_the_users_frame_stays_among_the_evidence_of_a_long_traceback() -> None:
    """#26: a traceback longer than the evidence shows is cut; the user's own frame and line are kept."""
    from kbdebug.render.evidence import evidence

    lib = "".join(
        f'  File "/usr/lib/python3.11/site-packages/torch/nn/modules/m{k}.py", line {k + 10}, in forward\n    return self.f{k}(x)\n'
        for k in range(12)
    )
    log = (
        'Traceback (most recent call last):\n  File "/home/me/run.py", line 3, in <module>\n    main()\n'
        '  File "/home/me/train.py", line 42, in main\n    out = model(batch)\n'
        + lib
        + "RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x10 and 12x5)\n"
    )
    diag = diagnose_text(log)
    root = diag.root
    assert root is not None and root.facts["innermost_user_frame"] == "/home/me/train.py:42"
    shown = [row.text for block in evidence(root, diag.lines) for row in block]
    assert '  File "/home/me/train.py", line 42, in main' in shown and "    out = model(batch)" in shown
    assert len(shown) < log.count("\n") // 2  # not the whole traceback: the user's frame among a few lines
