"""Rendered reports: Markdown guides rendered, evidence lines shown, tensors as a table (DOM-level for HTML)."""

from __future__ import annotations

import re
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
    assert text.startswith("kbdebug: nll_target_out_of_range: ") and "`" not in text
    assert text.count("/home/user/seg/train.py:151") == 1  # the location once (#37)


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


SLURM = (
    "[rank0]: epoch 3 step 120 loss 0.412\n"
    "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.\n"
    "slurmstepd: error: *** JOB 48213 ON gpu-node-07 CANCELLED AT 2024-05-01T12:13:10 DUE TO PREEMPTION ***\n"
    "slurmstepd: error: *** STEP 48213.0 ON gpu-node-07 CANCELLED AT 2024-05-01T12:13:10 DUE TO PREEMPTION ***\n"
)


def test_evidence_shows_each_line_once_and_raw_is_the_logs_text() -> None:
    """#37: records that share lines (a message inside its traceback, Slurm's two preemption lines) showed
    them twice; `raw` turned Slurm's `***` into `*` (read as Markdown bold)."""
    from kbdebug.render.evidence import evidence

    diag = diagnose_text(SLURM)
    inc = diag.incidents[0]
    shown = [row.no for block in evidence(inc, diag.lines) for row in block if row.no is not None]
    assert shown == [1, 2, 3, 4]
    raws = [r.raw for r in inc.records]
    assert SLURM.splitlines()[2] in raws and all("***" in r for r in raws if "slurmstepd" in r)
    text = diag.render("text")
    assert text.count("DUE TO PREEMPTION ***") == 2  # lines 3 and 4, each once


def test_no_rule_example_shows_an_evidence_line_twice() -> None:
    from kbdebug.kb import load_kb
    from kbdebug.render.evidence import evidence

    for rule in load_kb().rules:
        for text in rule.examples.positive:
            diag = diagnose_text(text)
            for inc in diag.incidents:
                shown = [row.no for block in evidence(inc, diag.lines) for row in block if row.no is not None]
                assert len(shown) == len(set(shown)), (rule.id, shown)


def test_markdown_bold_is_still_read_as_bold() -> None:
    diag = diagnose_text("**RuntimeError: CUDA error: an illegal memory access was encountered**\n")
    assert diag.incidents[0].rule == "illegal_memory_access"


def test_notebook_frames_read_as_ipython_names_its_cells() -> None:
    """#37: `Cell In[3], line 2`, as IPython 8 prints it, not `<ipython-input-3-9f8e7d6c5b4a>:2`."""
    log = (
        "Traceback (most recent call last):\n"
        '  File "<ipython-input-3-9f8e7d6c5b4a>", line 2, in <module>\n'
        "    loss = F.cross_entropy(logits, y)\n"
        "IndexError: Target 10 is out of bounds.\n"
    )
    inc = diagnose_text(log).incidents[0]
    assert inc.facts["innermost_user_frame"] == "Cell In[3], line 2"
    assert "at `Cell In[3], line 2`" in inc.guide["what"] and "ipython-input" not in inc.guide["what"]
    assert inc.facts["origin"] == "notebook"


def test_a_live_notebook_frame_is_named_by_its_cell() -> None:
    torch = __import__("pytest").importorskip("torch")
    from kbdebug import diagnose

    code = compile(
        "logits = torch.randn(2, 3)\nloss = torch.nn.functional.cross_entropy(logits, torch.tensor([0, 7]))\n",
        "<ipython-input-1-0a1b2c3d>",
        "exec",
    )
    try:
        exec(code, {"torch": torch})
    except IndexError as exc:
        inc = diagnose(exc).incidents[0]
    assert inc.facts["innermost_user_frame"] == "Cell In[1], line 2"


def test_code_on_a_terminal_keeps_its_background() -> None:
    """#37: rich painted code spans bold cyan on black, a black box on a light terminal."""
    from kbdebug.render.markup import to_terminal

    text = to_terminal("Use `x.permute(0, 3, 1, 2)`:\n\n```python\nx = x.permute(0, 3, 1, 2)\n```\n", 80)
    params = [int(p) for sgr in re.findall(r"\x1b\[([0-9;]*)m", text) for p in sgr.split(";") if p]
    assert "\x1b[1;36mx.permute(0, 3, 1, 2)\x1b[0m" in text
    assert not [p for p in params if 40 <= p <= 49 or 100 <= p <= 107]  # no background colour at all
