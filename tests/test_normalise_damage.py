"""The damage real pastes suffer, one family per test (own fixtures, modelled on the messages' real shapes): a
condition hard-wrapped before its comparison, a message wrapped on the space between two words, an OOM or NCCL
line alone among training output, an error line printed right under a warning, a user's note after THC's location.
Each keeps what the undamaged text says: its rule, its facts and its signature."""

from __future__ import annotations

from kbdebug.api import diagnose_text
from kbdebug.normalise import lines_of
from kbdebug.parse.regions import parse_text


def texts(text: str) -> list[str]:
    return [ln.text for ln in lines_of(text)]


def wrap(text: str, width: int) -> str:
    return "".join(ln[k : k + width] + "\n" for ln in text.splitlines() for k in range(0, max(len(ln), 1), width))


def root_of(text: str) -> tuple[str, str]:
    root = diagnose_text(text).root
    assert root is not None
    return root.rule, root.signature


# a scatter/gather kernel's assert, its directory padded so that the condition's `>=` starts row 3 at 80 columns
ASSERT = (
    "/opt/src/{pad}/aten/src/ATen/native/cuda/ScatterGatherKernel.cu:144: block: [2,0,0], thread: [{thread},0,0] "
    'Assertion `idx_dim >= 0 && idx_dim < index_size && "index out of bounds"` failed.'
)
PAD = "p" * (160 - ASSERT.format(pad="", thread=10).index(">="))


def test_a_condition_wrapped_before_its_comparison_is_rejoined() -> None:
    """At 80 columns the cut may fall right before a condition's `>=`: the row that starts with it is the
    assertion's rest, neither a mail quote nor a record of its own."""
    flood = "".join(ASSERT.format(pad=PAD, thread=t) + "\n" for t in range(10, 16))
    wrapped = wrap(flood, 80)
    assert any(row.startswith(">= 0 && idx_dim") for row in wrapped.splitlines())
    assert texts(wrapped) == flood.splitlines()
    assert root_of(wrapped) == root_of(flood)
    root = diagnose_text(wrapped).root
    assert root is not None and root.facts["assertion"] == 'idx_dim >= 0 && idx_dim < index_size && "index out of bounds"'


def test_one_assert_wrapped_before_its_comparison_is_rejoined() -> None:
    """One assert alone (no second row of its width to share it): a row that starts with a comparison
    operator still continues the row above."""
    line = "/src/cuda/Loss.cu:240: block: [0,0,0], thread: [5,0,0] Assertion `t >= 0 && t < n_classes` failed."
    line = line.replace("/src/", "/src/" + "q" * (79 - line.index(">= 0")) + "/")
    assert line.index(">=") == 80
    text = line + "\nRuntimeError: CUDA error: device-side assert triggered\n"
    assert texts(wrap(text, 80))[0] == line
    assert root_of(wrap(text, 80)) == root_of(text)


def test_a_comparison_at_the_start_of_a_quoted_line_is_kept() -> None:
    """`> ` is a mail quote; `>=` never is: a quoted wrapped condition keeps both its quote stripped and its `>=`."""
    assert texts("> x = 1\n>= 0 && t < n` failed.\n") == ["x = 1", ">= 0 && t < n` failed."]


def test_a_message_wrapped_on_the_space_between_two_words_is_rejoined() -> None:
    """A single line over 80 columns cut at a space: the space starts the next row, or ends the row above."""
    before = "RuntimeError: \"nll_loss_forward_reduce_cuda_kernel_2d_index\" not implemented for 'Half'\n"
    after = "NotImplementedError: \"nll_loss2d_forward_out_cuda_template\" not implemented for 'Long'\n"
    assert wrap(before, 80).splitlines()[1] == " 'Half'"
    assert wrap(after, 80).splitlines()[0].endswith("for ")
    for text in (before, after):
        assert texts(wrap(text, 80)) == [text.strip()]
        assert root_of(wrap(text, 80)) == root_of(text)


def test_an_80_column_row_of_its_own_before_a_capitalised_line_is_no_wrap() -> None:
    """A row that ends after a space is joined only to what continues a sentence or an expression: a
    capitalised line after it is a line of its own, and so is a valgrind line after a row that ends a word."""
    row = "Epoch 12 finished: loss 0.3121 val_loss 0.2950 best 0.2810 lr 1.0e-04 grad 0.81 "
    assert len(row) == 80
    assert texts(row + "\nSaving checkpoint to ckpt/last.pt\n") == [row, "Saving checkpoint to ckpt/last.pt"]
    whole = row[:-1] + "1"
    assert texts(whole + "\n==4242== Invalid read of size 4\n") == [whole, "==4242== Invalid read of size 4"]


NOISE = (
    "Epoch 7:  63%|██████▎   | 630/1000 [03:12<01:53,  3.27it/s, loss=0.2210]\n"
    "INFO:trainer:step 6300 lr 2.0e-04 grad_norm 0.91\n"
    "/opt/venv/lib/python3.11/site-packages/torch/utils/checkpoint.py:91: UserWarning: None of the inputs have "
    "requires_grad=True. Gradients will be None\n"
    "eval: accuracy 0.8812\n"
)


def in_noise(text: str) -> str:
    return NOISE * 400 + text + NOISE.splitlines()[0] + "\n" + "INFO:trainer:step 6301 lr 2.0e-04 grad_norm 0.90\n" * 15


def test_an_oom_message_pasted_from_its_figures_on_is_read_among_noise() -> None:
    """torch 1.x's figures without `CUDA out of memory.` before them: read as the OOM they are, wherever they are."""
    bare = "Tried to allocate 512.00 MiB (GPU 2; 10.76 GiB total capacity; 9.10 GiB already allocated; 301.56 MiB free; 9.31 GiB reserved in total by PyTorch)\n"
    for text in (bare, in_noise(bare)):
        root = diagnose_text(text).root
        assert root is not None and root.rule == "cuda_oom"
        assert (root.facts["tried_to_allocate"], root.facts["total_capacity"], root.facts["gpu_index"]) == ("512.00 MiB", "10.76 GiB", 2)
    assert root_of(in_noise(bare)) == root_of(bare)
    sentences = "Tried to allocate 1.50 GiB. GPU 0 has a total capacity of 15.77 GiB of which 912.38 MiB is free.\n"
    assert root_of(in_noise(sentences)) == root_of(sentences) and root_of(sentences)[0] == "cuda_oom"


def test_tried_to_allocate_without_the_figures_is_no_oom_record() -> None:
    """The request alone (a host allocator's, a sentence of prose) is no OOM message of the GPU's."""
    assert [r for r in parse_text("Tried to allocate 512 bytes for the string table, retrying\n") if r.kind == "oom"] == []


def test_a_watchdog_timeout_quoted_without_its_period_is_read_among_noise() -> None:
    """A page that quoted the watchdog's line dropped its final period: still the collective timeout, with its figures."""
    line = (
        "[E ProcessGroupNCCL.cpp:475] [Rank 6] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=88, "
        "OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600193 milliseconds before timing out\n"
    )
    for text in (line, in_noise(line)):
        root = diagnose_text(text).root
        assert root is not None and root.rule == "nccl_error"
        assert (root.facts["rank"], root.facts["op_type"], root.facts["seq_num"]) == (6, "ALLREDUCE", 88)
    assert root_of(in_noise(line)) == root_of(line) == root_of(line.replace("timing out\n", "timing out.\n"))


WARNING = (
    "/opt/venv/lib/python3.11/site-packages/torch/utils/data/dataloader.py:617: UserWarning: This DataLoader will "
    "create 16 worker processes in total. Our suggested max number of worker in current system is 8.\n"
)


def test_an_error_line_right_under_a_warning_is_not_the_warnings_message() -> None:
    """A warning's message may go on for a line; a line that reads as an error of its own (an OOM) does not: the
    warning ends before it, and the crash signs as it does without the warning."""
    oom = "CUDA out of memory. Tried to allocate 3.00 GiB (GPU 1; 23.69 GiB total capacity; 19.20 GiB already allocated; 1.98 GiB free; 20.40 GiB reserved in total by PyTorch)\n"
    assert root_of(WARNING + oom) == root_of(oom) == root_of(in_noise(WARNING + oom))
    (warning,) = [r for r in parse_text(WARNING + oom) if r.kind == "exception"]
    assert warning.message.endswith("is 8.") and warning.last_line == 1


def test_a_warnings_second_line_is_still_its_message() -> None:
    """A warning whose message goes on for a line that is no error of its own keeps it."""
    second = "Please set num_workers to at most 8 to avoid slowness or freezes.\n"
    (warning,) = [r for r in parse_text(WARNING + second) if r.kind == "exception"]
    assert warning.message.endswith(second.strip())


def test_a_users_note_after_thcs_location_leaves_the_error_and_its_location() -> None:
    """THC's errors end at `at FILE:LINE`; a note the user typed after it (`# torch 1.4`) is not part of them."""
    cublas = "RuntimeError: cublas runtime error : an internal operation failed at /pytorch/aten/src/THC/THCBlas.cu:120"
    legacy = "RuntimeError: cuda runtime error (59) : device-side assert triggered at /pytorch/aten/src/THC/THCTensorMath.cu:26"
    for line, rule in ((cublas, "cublas_failure"), (legacy, "async_error_unlocalized")):
        for note in ("", "   # torch 1.4.0, only on the second GPU", "  <- since the driver update"):
            root = diagnose_text(line + note + "\n").root
            assert root is not None and root.rule == rule, note
            assert (root.facts["kernel_file"], root.facts["kernel_line"]) == (
                line.rsplit("/", 1)[1].split(":")[0],
                int(line.rsplit(":", 1)[1]),
            )


def test_an_exception_type_left_at_the_end_of_an_unindented_source_line_is_read_as_the_error() -> None:
    """Pasted without its code fence, the failing source line lost its indentation and the `IndexError: ` after it
    (a trailing space) ends that line, its message on the next one: the type is still the error's."""
    log = (
        "return F.cross_entropy(logits, labels, weight=self.class_weights, ignore_index=self.ignore) IndexError: \n"
        "Target 7 is out of bounds.\n"
    )
    root = diagnose_text(log).incidents[0]
    assert (root.rule, root.facts["error_type"], root.facts["target"]) == ("nll_target_out_of_range", "IndexError", 7)


def test_a_source_line_with_its_error_glued_on_is_read_as_the_two_lines_it_was() -> None:
    """Markdown made the newline between the failing source line and the error a space: the error is split off, so the
    source line is still the code that failed (it names the label, which decides the cause)."""
    log = "tp = torch.sum(targets * preds, dim=(2, 3)) RuntimeError: The size of tensor a (4) must match the size of tensor b (18) at non-singleton dimension 1\n"
    assert [ln.text for ln in lines_of(log)] == [
        "tp = torch.sum(targets * preds, dim=(2, 3))",
        "RuntimeError: The size of tensor a (4) must match the size of tensor b (18) at non-singleton dimension 1",
    ]
    assert diagnose_text(log).incidents[0].rule == diagnose_text(log.replace(") RuntimeError", ")\nRuntimeError")).incidents[0].rule
    assert [ln.text for ln in lines_of(log.replace(") RuntimeError", ")   RuntimeError"))] == [
        ln.text for ln in lines_of(log)
    ]  # any spaces
    for whole in (
        "RuntimeError: Caught ValueError in DataLoader worker process 0.",  # a type the message names, with no `: `
        "/opt/venv/lib/python3.10/site-packages/torch/nn/modules/loss.py:536: UserWarning: Using a target size",
        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1251, unhandled system error, NCCL version 2.19.3 ncclSystemError: System call failed",
        "NVRM: Xid (PCI:0000:3b:00): 13, pid=48211, name=python, Graphics Exception: ESR 0x50df30=0x102000e",  # a word, no type
    ):
        assert [ln.text for ln in lines_of(whole + "\n")] == [whole], whole


def test_one_frame_with_its_source_line_glued_on_is_two_lines() -> None:
    """A paste of the last frame alone whose newlines became spaces: the frame, its source line (which names the dice
    loss's operands: the cause), the error; a frame whose own text runs on (`in__call__`, a lost space) stays whole."""
    log = (
        'File "/content/seg/losses/dice_loss.py", line 37, in forward num = torch.sum(torch.mul(predict, target), dim=1) '
        "+ self.smooth RuntimeError: The size of tensor a (6750208) must match the size of tensor b (65536) at non-singleton dimension 1\n"
    )
    assert [ln.text for ln in lines_of(log)][:2] == [
        'File "/content/seg/losses/dice_loss.py", line 37, in forward',
        "num = torch.sum(torch.mul(predict, target), dim=1) + self.smooth",
    ]
    assert diagnose_text(log).incidents[0].rule == "channel_onehot_mismatch"
    typo = '  File "/env/lib/python3.6/site-packages/torch/nn/modules/module.py", line 493, in__call__'
    faulthandler = '  File "/home/me/proj/model.py", line 88 in forward'  # Python's fatal-error dump: no comma before `in`
    for whole in (typo, faulthandler):
        assert [ln.text for ln in lines_of(whole + "\n")] == [whole]


def test_a_warning_s_location_before_its_type_is_no_source_line() -> None:
    """`file.py:536: UserWarning: ` ends its line too (Python prints the message on the next): it stays one warning."""
    log = (
        "/opt/venv/lib/python3.10/site-packages/torch/nn/modules/loss.py:536: UserWarning: \n"
        "Using a target size (torch.Size([8])) that is different to the input size (torch.Size([8, 1])). This will likely "
        "lead to incorrect results due to broadcasting. Please ensure they have the same size.\n"
        "  return F.mse_loss(input, target, reduction=self.reduction)\n"
    )
    (warning,) = [r for r in parse_text(log) if r.kind == "exception"]
    assert (warning.exc_type, warning.message[:22]) == ("UserWarning", "Using a target size (t")
    assert diagnose_text(log).incidents[0].facts["error_type"] == "UserWarning"


def test_no_line_that_glue_splits_is_passed_over_by_its_texts() -> None:
    """`_may_glue` asks for the texts `_GLUE` needs before running it: on every line of the rule examples, the
    fixtures here and the dev corpus (when present), a line `_GLUE` splits holds them."""
    from pathlib import Path

    from kbdebug.normalise.glue import _GLUE, _may_glue

    root = Path(__file__).resolve().parent.parent
    logs = [*root.glob("knowledge/*/examples/*/*.log"), *root.glob("tests/**/*.log"), *(root.parent / "shared/corpus/dev").glob("*.log")]
    split = 0
    for path in logs:
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            for seg in (line, line.strip()):
                if len(_GLUE.split(seg)) > 1:
                    split += 1
                    assert _may_glue(seg), (path.name, seg[:200])
    assert split > 10  # the fixtures hold glued lines: the check checked something
    joined = "epoch 3 done. RuntimeError: CUDA error: an illegal memory access was encountered"
    assert _may_glue(joined) and _GLUE.split(joined)[1].startswith("RuntimeError")
    glog = "optimizer step done W0302 11:40:02.118000 140021 api.py:858] Sending process 4410 closing signal SIGTERM"
    assert _may_glue(glog) and _GLUE.split(glog)[1].startswith("W0302")
    one_assert = "/src/k.cu:92: op: block: [3,0,0], thread: [36,0,0] Assertion `i < n` failed."
    assert not _may_glue(one_assert)
    assert _may_glue(one_assert + one_assert) and len(_GLUE.split(one_assert + one_assert)) == 2


def test_code_that_names_an_exception_type_before_its_block_colon_is_no_error() -> None:
    """`except FileNotFoundError:` ends its line with a type and a colon like a wrapped exception line, but it is code
    (a question with its code pasted, or a traceback's context): no line is split there, and no error is read."""
    for indent in ("", "    "):
        log = f"try:\n{indent}    ckpt = torch.load(path)\n{indent}except FileNotFoundError:\n{indent}    ckpt = None\n"
        assert [r.exc_type for r in parse_text(log) if r.kind == "exception" and r.exc_type] == []
        assert diagnose_text(log).incidents == []


def test_a_bare_message_wrapped_and_followed_by_a_launchers_lines_is_read_from_its_first_line() -> None:
    """Pasted without its `ValueError: `, wrapped in two, then SLURM's lines: the bare-message reading reaches back to
    the line the message starts on (its template's text), and reads the wrapped message whole."""
    log = (
        "Expected input batch_size (64) to match\n"
        "target batch_size (32).\n"
        "srun: error: node17: task 0: Exited with exit code 1\n"
        "srun: error: node17: task 1: Exited with exit code 1\n"
        "srun: Terminating StepId=981273.0\n"
    )
    root = diagnose_text(log).root
    assert root is not None and root.rule == "batch_size_mismatch"
    assert (root.facts["input_batch"], root.facts["target_batch"]) == (64, 32)


def test_html_entities_are_unescaped_and_nothing_else_a_url_holds() -> None:
    """A log escaped for a web page is read as printed; `&param=` in a URL stays, though HTML5 would read `&para`."""
    assert texts("idx &lt; size &amp;&amp; &quot;ok&quot; &#39;cuda:0&#39; at https://h/x?a=1&param=2 &amp;\n") == [
        "idx < size && \"ok\" 'cuda:0' at https://h/x?a=1&param=2 &"
    ]


def test_typographic_quotes_and_spaces_fold_to_ascii() -> None:
    assert texts("No\u00a0module named \u2018timm\u2019 \u201cx\u201d\u200b\ufeff\n") == ["No module named 'timm' \"x\""]


IPYTHON_OLD = """---------------------------------------------------------------------------
RuntimeError                              Traceback (most recent call last)
~/work/seg/train.py in <module>
     40     for img, mask in loader:
     41         out = model(img.cuda())
---> 42         loss = dice_loss(out, mask.cuda())
     43         loss.backward()

~/work/seg/losses.py in dice_loss(pred, target)
     10 def dice_loss(pred, target):
     11     pred = pred.softmax(1)
---> 12     inter = (pred * target).sum((2, 3))
     13     return 1 - (2 * inter + 1) / (pred.sum((2, 3)) + target.sum((2, 3)) + 1)

RuntimeError: The size of tensor a (21) must match the size of tensor b (1) at non-singleton dimension 1
"""
IPYTHON_8 = """---------------------------------------------------------------------------
RuntimeError                              Traceback (most recent call last)
Cell In[12], line 7
      5 for img, mask in loader:
      6     out = model(img.cuda())
----> 7     loss = dice_loss(out, mask.cuda())

File ~/work/seg/losses.py:12, in dice_loss(pred, target)
     10 def dice_loss(pred, target):
     11     pred = pred.softmax(1)
---> 12     inter = (pred * target).sum((2, 3))

RuntimeError: The size of tensor a (21) must match the size of tensor b (1) at non-singleton dimension 1
"""


def test_an_ipython_traceback_flattened_into_one_paragraph_is_read_as_printed() -> None:
    """Markdown made the newlines of a notebook's traceback spaces: its frames and numbered context lines are split
    apart again, so the failing line (here the one that names the mask) still decides the rule."""
    for text in (IPYTHON_OLD, IPYTHON_8):
        flat = " ".join(line.strip() for line in text.splitlines() if line.strip()) + "\n"
        assert root_of(flat)[0] == root_of(text)[0] == "channel_onehot_mismatch"
        assert "---> 12     inter = (pred * target).sum((2, 3))" in texts(flat) or "--> 12     inter = (pred * target).sum((2, 3))" in [
            t.replace("---> ", "--> ") for t in texts(flat)
        ]
