"""Recognition by meaning: each way a paste damages a log, and each relation between two shapes.

Every fixture here is written for this test (none comes from the corpus); each names the rule a
reader would give it and, where it matters, the facts.
"""

from __future__ import annotations

import pytest

from kbdebug.api import diagnose_text
from kbdebug.core.shapes import relation, shapes_in

TB = 'Traceback (most recent call last):\n  File "/home/u/seg/train.py", line 88, in <module>\n    {code}\n'
OOM = (
    "CUDA out of memory. Tried to allocate 2.50 GiB. GPU 0 has a total capacity of 15.77 GiB of which 1.12 GiB is free. "
    "Of the allocated memory 12.01 GiB is allocated by PyTorch, and 1.30 GiB is reserved by PyTorch but unallocated."
)


def root(text: str) -> tuple[str | None, dict]:
    diag = diagnose_text(text)
    return (diag.root.rule, diag.root.facts) if diag.root else (None, {})


# -- damage kinds ---------------------------------------------------------------------------------
DAMAGED = {
    "bare OOM message": ("step 120 loss 0.41\n" + OOM + "\n", "cuda_oom"),
    "bare shape message after a traceback": (
        TB.format(code="loss = criterion(logits, target)") + "Expected input batch_size (16) to match target batch_size (8).\n",
        "batch_size_mismatch",
    ),
    "sentences on their own lines": ("torch.OutOfMemoryError: " + OOM.replace(". ", ".\n\n") + "\n", "cuda_oom"),
    "message wrapped mid-number": (
        "RuntimeError: CUDA out of memory. Tried to allocate 2.5\n0 GiB. GPU 0 has a total capacity of 15.77 GiB of which 1.12 GiB is free.\n",
        "cuda_oom",
    ),
    "traceback flattened onto one line": (
        'Traceback (most recent call last): File "run.py", line 12, in <module> main() File "run.py", line 9, in main '
        "y = model(x) RuntimeError: mat1 and mat2 shapes cannot be multiplied (32x1024 and 512x10)\n",
        "matmul_shape_mismatch",
    ),
    "message cut off after its distinctive words": (
        TB.format(code="loss = F.cross_entropy(out, y)") + "RuntimeError: 0D or 1D target tensor expected, multi-tar\n",
        "target_shape_mismatch",
    ),
    "full-width punctuation": (
        "RuntimeError：Given groups=1，weight of size [64， 3， 3， 3]，expected input[8， 1， 32， 32] to have 3 channels，"
        "but got 1 channels instead\n",
        "conv_channel_mismatch",
    ),
    "translated assert line": (
        "/opt/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:93：operator()：block：[3,0,0]，thread：[17,0,0] 断言 "
        '`-sizes[i] <= index && index < sizes[i] && "index out of bounds"` 失败。\n'
        "RuntimeError：CUDA 错误：触发了设备端断言\n",
        "index_out_of_bounds",
    ),
    "journald prefix": (
        "Mar 02 10:11:12 gpu01 trainer[8812]: RuntimeError: CUDA error: an illegal memory access was encountered\n",
        "illegal_memory_access",
    ),
    "worker prefix with a rank": (
        "(Worker rank=3 pid=4411) ERROR 05-02 10:11:12 [worker.py:201] torch.OutOfMemoryError: " + OOM + "\n",
        "cuda_oom",
    ),
    "python logging prefix": (
        "".join(
            f"2025-01-02 03:04:0{i},123 - ERROR - {ln}\n"
            for i, ln in enumerate((TB.format(code="emb = self.tok(ids)") + "IndexError: index out of range in self").splitlines())
        ),
        "embedding_index_oob",
    ),
    "notebook 'Error:' before the exception": (
        "Error:  ValueError: Expected input batch_size (4) to match target batch_size (2).\n",
        "batch_size_mismatch",
    ),
    "terminal pane border": (
        "".join(
            f"{ln:<100}x\n" for ln in (TB.format(code="y = x.cuda()") + "RuntimeError: CUDA error: unspecified launch failure").splitlines()
        ),
        "launch_failure",
    ),
    "message with no type and no traceback": (
        "  assert pred.size() == target.size(), \"'input' and 'target' must have the same shape\"\n"
        "'input' and 'target' must have the same shape\n",
        "target_shape_mismatch",
    ),
    "curly quotes from a chat or a word processor": (
        "========= Program hit CUDA_ERROR_INVALID_VALUE (error 1) due to \u201cinvalid argument\u201d on CUDA API call to "
        "cuMemcpyDtoH_v2.\n=========     Saved host backtrace up to driver entry point at error\n",
        "sanitizer_memcheck",
    ),
    "no-break spaces from a web page": (
        "/opt/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1231: indexSelectSmallIndex: block: [31,0,0], thread: [87,0,0]"
        " Assertion `srcIndex < srcSelectDimSize` failed.\n".replace(" ", "\u00a0"),
        "embedding_index_oob",
    ),
    "HTML entities from a page's source": (
        "/opt/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1231: indexSelectSmallIndex: block: [31,0,0], thread: [87,0,0]"
        " Assertion `srcIndex &lt; srcSelectDimSize` failed.\n",
        "embedding_index_oob",
    ),
    "zero-width spaces and a byte-order mark": (
        "\ufeff/opt/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1231: indexSelectSmallIndex: block: [31,0,0], thread: "
        "[87,0,0] Assertion `srcIndex <\u200b srcSelectDimSize` failed.\n",
        "embedding_index_oob",
    ),
}


@pytest.mark.parametrize(("text", "rule"), DAMAGED.values(), ids=DAMAGED.keys())
def test_damaged_pastes_keep_their_rule(text: str, rule: str) -> None:
    assert root(text)[0] == rule


def test_inferred_cause_says_so() -> None:
    rule, facts = root(TB.format(code="loss = crit(p, y)") + "RuntimeError: Expected input batch_size (4) to match targ\n")
    assert rule == "batch_size_mismatch"
    assert facts["inferred_from"] == ["Expected input batch_size", "to match targ…"]
    assert diagnose_text("RuntimeError: Expected input batch_size (4) to ma\n").root.confidence < 0.8


def test_no_error_no_answer_and_unknown_error_is_other() -> None:
    assert root("epoch 1 loss 0.3\nepoch 2 loss 0.2\n")[0] is None
    assert root(TB.format(code="cfg = load(path)") + "KeyError: 'lr'\n")[0] == "other"


def test_wrapper_error_gives_way_to_the_named_cause() -> None:
    text = (
        "RuntimeError: The following operation failed in the TorchScript interpreter.\n"
        "RuntimeError: index_add_cuda_ does not have a deterministic implementation, but you set "
        "'torch.use_deterministic_algorithms(True)'.\n"
    )
    assert root(text)[0] == "deterministic_unsupported"


# -- shape relations --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("a", "b", "rel"),
    [
        ([4, 14, 96, 96, 96], [4, 1, 96, 96, 96], "channel"),
        ([8, 6, 128, 128], [8, 1, 128, 128], "channel"),
        ([8, 10], [8, 7], "class"),
        ([20, 152, 200], [20, 302, 400], "spatial"),
        ([2, 5, 64, 64], [2, 5, 32, 32], "spatial"),
        ([16, 3, 32, 32], [8, 3, 32, 32], "batch"),
        ([4, 10], [5], "batch"),
        ([4, 1, 96, 96], [4, 96, 96], "rank"),
        ([3, 4], [3, 4], "same"),
        ([2, 3, 4], [5, 6, 4], "mixed"),
    ],
)
def test_relation(a: list[int], b: list[int], rel: str) -> None:
    assert relation(a, b) == rel
    assert relation(b, a) == rel


def test_shapes_in_reads_every_printed_form() -> None:
    text = "got torch.Size([8, 1, 128, 128]) and [8, 6, 128, 128] vs (2, 3)"
    assert shapes_in(text) == [[8, 1, 128, 128], [8, 6, 128, 128], [2, 3]]


SHAPES = {
    "BCE target with 3 channels vs 1-channel logits": (
        TB.format(code="loss = criterion(masks_pred, true_masks)")
        + "ValueError: Target size (torch.Size([2, 3, 256, 256])) must be the same as input size (torch.Size([2, 1, 256, 256]))\n",
        "channel_onehot_mismatch",
        {"input_channels": 1, "target_channels": 3, "shape_relation": "channel"},
    ),
    "MONAI label [B,1,...] vs logits [B,14,...]": (
        "AssertionError: ground truth has different shape (torch.Size([4, 1, 96, 96, 96])) from input (torch.Size([4, 14, 96, 96, 96]))\n",
        "channel_onehot_mismatch",
        {"input_shape": [4, 14, 96, 96, 96], "target_shape": [4, 1, 96, 96, 96]},
    ),
    "a metric's own wording naming prediction and label": (
        TB.format(code="score = metric(preds, target)")
        + "ValueError: Predictions and targets are expected to have the same shape, got torch.Size([8, 6, 128, 128]) "
        "and torch.Size([8, 1, 128, 128]).\n",
        "channel_onehot_mismatch",
        {"shape_relation": "channel"},
    ),
    "a user's assert on spatially different masks": (
        TB.format(code="assert pred_mask.shape == gt_mask.shape")
        + "AssertionError: torch.Size([4, 64, 64]) != torch.Size([4, 128, 128])\n",
        "target_shape_mismatch",
        {"shape_relation": "spatial"},
    ),
    "only the batch dim differs": (
        TB.format(code="loss = F.mse_loss(pred, target)")
        + "ValueError: Target size (torch.Size([16, 1])) must be the same as input size (torch.Size([12, 1]))\n",
        "batch_size_mismatch",
        {"shape_relation": "batch"},
    ),
    "broadcast at dim 1 inside a loss": (
        TB.format(code="loss = dice_loss(pred, label)")
        + "RuntimeError: The size of tensor a (14) must match the size of tensor b (13) at non-singleton dimension 1\n",
        "channel_onehot_mismatch",
        {},
    ),
    "broadcast at dim 1 elsewhere": (
        TB.format(code="h = feats + pos_emb")
        + "RuntimeError: The size of tensor a (14) must match the size of tensor b (13) at non-singleton dimension 1\n",
        "broadcast_shape_mismatch",
        {},
    ),
    "one-hot built with scatter_ from a label >= C": (
        TB.format(code="y_onehot.scatter_(1, labels, 1)") + "RuntimeError: index 21 is out of bounds for dimension 1 with size 19\n",
        "channel_onehot_mismatch",
        {},
    ),
    "plain gather out of bounds stays a gather": (
        TB.format(code="picked = scores.gather(1, idx)") + "RuntimeError: index 21 is out of bounds for dimension 1 with size 19\n",
        "scatter_gather_index_oob",
        {},
    ),
    "torch 1.x: float ids into an embedding want Long, and are no label": (
        TB.format(code="emb = self.embedding(tokens)")
        + "RuntimeError: Expected object of scalar type Long but got scalar type Float for argument #2 'indices' in call to _th_index_select\n",
        "dtype_mismatch",
        {"dtype_found": "float32", "dtype_wanted": "int64", "cast_call": ".long()"},
    ),
    "torch 1.x: a float label of NLL wants Long": (
        TB.format(code="loss = F.nll_loss(out, labels)")
        + "RuntimeError: Expected object of scalar type Long but got scalar type Float for argument #2 'target' in call to _thnn_nll_loss_forward\n",
        "target_shape_mismatch",
        {"dtype_found": "float32", "dtype_wanted": "int64"},
    ),
    "two images of a batch, not a prediction/label pair": (
        TB.format(code="return torch.stack(imgs)")
        + "RuntimeError: stack expects each tensor to be equal size, but got [3, 224, 224] at entry 0 and [1, 224, 224] at entry 5\n",
        "collate_size_mismatch",
        {},
    ),
}


@pytest.mark.parametrize(("text", "rule", "facts"), SHAPES.values(), ids=SHAPES.keys())
def test_shape_relations_decide_the_rule(text: str, rule: str, facts: dict) -> None:
    got, got_facts = root(text)
    assert got == rule
    for key, val in facts.items():
        assert got_facts[key] == val


RICH_BOX = """\
╭─────────────────────────────── Traceback (most recent call last) ────────────────────────────────╮
│ /home/u/seg/train.py:31 in step                                                                  │
│                                                                                                  │
│   28 │   for x, y in loader:                                                                     │
│   30 │   │   logits = model(x)                                                                   │
│ ❱ 31 │   │   loss = criterion(logits, y)                                                         │
│   32 │   │   loss.backward()                                                                     │
│                                                                                                  │
│ /usr/lib/python3/site-packages/torch/nn/modules/loss.py:1174 in forward                          │
│                                                                                                  │
│ ❱ 1174 │   │   return F.cross_entropy(input, target, weight=self.weight,                         │
╰──────────────────────────────────────────────────────────────────────────────────────────────────╯
IndexError: Target 255 is out of bounds.
"""


def test_a_boxed_rich_traceback_is_read_frame_by_frame() -> None:
    """rich.traceback draws the traceback in a box, every line as wide as the box: its sides are decoration,
    not a wrap, and `path:LINE in func` with the `❱` line under it is a frame and its source line."""
    root = diagnose_text(RICH_BOX).root
    assert root is not None and root.rule == "nll_target_out_of_range"
    assert root.facts["innermost_user_frame"] == "/home/u/seg/train.py:31"
    assert root.facts["user_code"] == "loss = criterion(logits, y)"
    assert root.facts["error_type"] == "IndexError"


PYTEST_FAILURE = """\
    def test_step():
        y = torch.tensor([1, 2, 255, 3])
>       loss = criterion(logits, y)

tests/test_train.py:31:
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _

>   return torch._C._nn.cross_entropy_loss(input, target, weight, _Reduction.get_enum(reduction), ignore_index)
E   IndexError: Target 255 is out of bounds.

/usr/lib/python3/site-packages/torch/nn/functional.py:3029: IndexError
"""


def test_pytests_margin_is_taken_off_the_error_it_caught() -> None:
    root = diagnose_text(PYTEST_FAILURE).root
    assert root is not None and root.rule == "nll_target_out_of_range"
    assert (root.facts["error_type"], root.facts["error_message"]) == ("IndexError", "Target 255 is out of bounds.")


def test_a_message_pasted_without_its_type_under_the_failing_line_is_that_line_s_error() -> None:
    """Only the failing source line and the message (no traceback, no `RuntimeError: `): the message is read as
    the error of that line, so the names on it (a label times a prediction in a loss) decide the cause."""
    from kbdebug.api import diagnose_text
    from kbdebug.parse.regions import parse_text

    log = "    inter = (labels * probs).sum(dim=(2, 3))\nThe size of tensor a (5) must match the size of tensor b (3) at non-singleton dimension 1\n"
    (exc,) = [r for r in parse_text(log) if r.kind == "exception"]
    assert (exc.exc_type, exc.frames[0].code) == ("", "inter = (labels * probs).sum(dim=(2, 3))")
    assert diagnose_text(log).incidents[0].rule == "channel_onehot_mismatch"
    # IPython's frames with their context lines, then the message without its type
    ipy = (
        "~/work/seg/losses.py in forward(self, logits, labels)\n"
        "     40         probs = logits.softmax(1)\n"
        "---> 41         inter = (labels * probs).sum(dim=(2, 3))\n"
        "     42         return 1 - 2 * inter / union\n"
        "\n"
        "The size of tensor a (5) must match the size of tensor b (3) at non-singleton dimension 1\n"
    )
    assert diagnose_text(ipy).incidents[0].rule == "channel_onehot_mismatch"


def test_an_indented_log_line_then_an_ordinary_line_makes_no_error() -> None:
    from kbdebug.parse.regions import parse_text

    log = "Validation:\n    mIoU = 0.613, loss = 0.412\nSaving checkpoint to runs/exp3/last.pt\n"
    assert [r for r in parse_text(log) if r.kind == "exception" and r.exc_type == "" and r.first_line == 3] == []


def _after_frame(line: str) -> str:
    return f'Traceback (most recent call last):\n  File "prepare.py", line 14, in <module>\n    main(args)\n{line}\n'


@pytest.mark.parametrize(
    ("line", "exc_type", "message"),
    [
        ("zipfile.BadZipFile: File is not a zip file", "zipfile.BadZipFile", "File is not a zip file"),
        ("_queue.Empty", "_queue.Empty", ""),
        ("cv2.error: OpenCV(4.8.0) /io/opencv/modules/core/src/matrix.cpp:250: error: (-215:Assertion failed) s >= 0", "cv2.error", None),
        ("socket.timeout: timed out", "socket.timeout", "timed out"),
        ("socket.gaierror: [Errno -2] Name or service not known", "socket.gaierror", "[Errno -2] Name or service not known"),
        ("torch._dynamo.exc.Unsupported: call_function BuiltinVariable(print)", "torch._dynamo.exc.Unsupported", None),
        ("http.client.RemoteDisconnected: Remote end closed connection without response", "http.client.RemoteDisconnected", None),
    ],
)
def test_the_line_under_a_traceback_s_last_frame_is_its_exception_whatever_the_type_is_called(
    line: str, exc_type: str, message: str | None
) -> None:
    """Python prints `module.Type: message` under the last frame, and many types do not end in Error: a class
    of the standard library (`zipfile.BadZipFile`, `queue.Empty`) or an extension's lower-case one (`cv2.error`)."""
    root = diagnose_text(_after_frame(line)).root
    assert root is not None and root.rule == "other"
    assert root.facts["error_type"] == exc_type
    if message is not None:
        assert root.facts.get("error_message", "") == message


@pytest.mark.parametrize("line", ["model.fc.weight: torch.Size([10, 512])", "Epoch: 3", "loss.item: 0.25", "val.mean_abs_error: 0.12"])
def test_a_dotted_name_that_is_no_class_under_a_frame_is_no_exception_type(line: str) -> None:
    """A print from another process interleaved under a frame (a parameter's name and shape) names no exception."""
    from kbdebug.parse.regions import parse_text

    assert [r.exc_type for r in parse_text(_after_frame(line)) if r.kind == "exception" and r.exc_type] == []


def test_opencv_given_an_empty_image_names_the_read_that_returned_nothing() -> None:
    """`(-215:Assertion failed) !_src.empty() in function 'cvtColor'`: the image is empty, what cv2.imread returns
    for a path it cannot read; the page names the function and a check of the read that fails with the path."""
    log = _after_frame(
        "cv2.error: OpenCV(4.8.0) /io/opencv/modules/imgproc/src/color.cpp:182: error: (-215:Assertion failed) !_src.empty() in function 'cvtColor'"
    )
    root = diagnose_text(log).root
    assert root is not None and root.rule == "other"
    assert root.facts["cv_function"] == "cvtColor"
    page = " ".join(str(root.guide[k]) for k in ("what", "why", "fix"))
    assert "`cvtColor` was given an empty image" in page or "cvtColor was given an empty image" in page
    assert "if img is None: raise FileNotFoundError(path)" in page
    # another OpenCV assertion is not an empty image
    other = diagnose_text(
        _after_frame("cv2.error: OpenCV(4.8.0) color.cpp:182: error: (-215:Assertion failed) scn == 3 || scn == 4 in function 'cvtColor'")
    ).root
    assert other is not None and "cv_function" not in other.facts
    assert "empty image" not in str(other.guide["what"])
