"""Wordings nobody wrote a rule for (issue 27): old torch (TH/THC/THNN), libraries' own messages,
launcher and wrapper formats, cut-off pastes, and causes that show only in the numbers.

Every fixture is written for this test (none comes from the corpus): each is one family of inputs,
worded as its source prints it, and names the rule and the facts a reader would give it.
"""

from __future__ import annotations

import pytest

from kbdebug.api import diagnose_text
from kbdebug.core.shapes import flattened_classes, relation

TB = 'Traceback (most recent call last):\n  File "/home/u/proj/train.py", line 40, in <module>\n    {code}\n'


def root(text: str) -> tuple[str | None, dict]:
    diag = diagnose_text(text)
    return (diag.root.rule, diag.root.facts) if diag.root else (None, {})


# -- libraries' and old torch's own messages -------------------------------------------------------
LIBRARY_MESSAGES = {
    # THNN / THCUNN pointwise losses (torch <= 0.4) print sizes as `[a x b]`
    "THCUNN loss, rank": (
        TB.format(code="loss = F.mse_loss(score, mos)") + "RuntimeError: input and target shapes do not match: input [16], "
        "target [16 x 1] at /opt/conda/aten/src/THCUNN/generic/MSECriterion.cu:15\n",
        "target_shape_mismatch",
    ),
    "THCUNN loss, channel": (
        TB.format(code="loss = F.l1_loss(pred, mask)") + "RuntimeError: input and target shapes do not match: input "
        "[4 x 3 x 64 x 64], target [4 x 1 x 64 x 64] at /pytorch/aten/src/THCUNN/generic/AbsCriterion.cu:15\n",
        "channel_onehot_mismatch",
    ),
    # MONAI's metrics: older ones print no shapes (the label was not one-hot), newer ones print both
    "MONAI metric, no shapes": (
        TB.format(code="dice = compute_meandice(y_pred, y)") + "ValueError: y_pred and y should have same shapes.\n",
        "channel_onehot_mismatch",
    ),
    "MONAI metric, spatial": (
        TB.format(code="metric(y_pred=outputs, y=labels)")
        + "ValueError: y_pred and y should have same shapes, got torch.Size([1, 3, 96, 96, 64]) and torch.Size([1, 3, 96, 96, 60]).\n",
        "target_shape_mismatch",
    ),
    # torchmetrics' _check_same_shape on a flattened prediction: the same elements, other dims
    "torchmetrics, flattened": (
        TB.format(code="iou.update(preds, target)")
        + "RuntimeError: Predictions and targets are expected to have the same shape, but got torch.Size([2048, 5]) and torch.Size([32, 64, 5]).\n",
        "target_shape_mismatch",
    ),
    # pytorch-ignite's ConfusionMatrix, as a bare line (no exception type), y printed first
    "ignite, bare line": (
        "y_pred must have shape (batch_size, num_categories, ...) and y must have shape of (batch_size, ...), "
        "but given torch.Size([16, 1]) vs torch.Size([16, 1]).\n",
        "target_shape_mismatch",
    ),
    # TH's index_select / embedding lookup (torch <= 1.4), cut before `rows.`
    "TH embedding lookup": (
        TB.format(code="pos = self.pos_embedding(positions)")
        + "RuntimeError: index out of range: Tried to access index 512 out of table with 511\n",
        "embedding_index_oob",
    ),
    # smp's soft_dice_score: a bare assert on the two sizes in a Dice loss, which compares a one-hot label with
    # per-class probabilities: a label not one-hot to the prediction's channels (smp's mode given the other layout)
    "bare AssertionError on a shape compare": (
        '  File "/home/u/proj/losses.py", line 12, in dice\n    assert pred.size() == target.size()\nAssertionError\n',
        "channel_onehot_mismatch",
    ),
    # the same assert outside a Dice-type loss or metric says only that the target's shape is wrong
    "bare AssertionError on a shape compare, no Dice": (
        '  File "/home/u/proj/losses.py", line 12, in regress\n    assert pred.size() == target.size()\nAssertionError\n',
        "target_shape_mismatch",
    ),
}


@pytest.mark.parametrize("name", sorted(LIBRARY_MESSAGES))
def test_library_message(name: str) -> None:
    text, rule = LIBRARY_MESSAGES[name]
    assert root(text)[0] == rule


def test_ignite_names_the_label_first() -> None:
    _, facts = root(
        "ValueError: y_pred must have shape (batch_size, num_classes (currently set to 4), ...) and y must have shape of "
        "(batch_size, ...), but given torch.Size([8, 1, 32, 32]) vs torch.Size([8, 4, 32, 32]).\n"
    )
    assert facts["target_shape"] == [8, 1, 32, 32] and facts["input_shape"] == [8, 4, 32, 32]


# -- device assertions by their condition, not their kernel file -----------------------------------
ASSERT = (
    "{path}: {fn}: block: [12,0,0], thread: [5,0,0] Assertion `{cond}` failed.\n"
    + TB.format(code="loss.backward()")
    + ("RuntimeError: CUDA error: device-side assert triggered\n")
)
ASSERTS = {
    "NLL kernel, index overflow": (
        "../aten/src/ATen/native/cuda/NLLLoss2d.cu:107",
        "nll_loss2d_forward_kernel",
        "input_index >= 0",
        "other_device_assert",
    ),
    "NLL kernel, target range": (
        "../aten/src/ATen/native/cuda/NLLLoss2d.cu:103",
        "nll_loss2d_forward_kernel",
        "t >= 0 && t < n_classes",
        "nll_target_out_of_range",
    ),
    "BCE target check": (
        "/pytorch/aten/src/ATen/native/cuda/Loss.cu:95",
        "operator()",
        "target_val >= zero && target_val <= one",
        "other_device_assert",
    ),
    "BCE input check": (
        "/pytorch/aten/src/ATen/native/cuda/Loss.cu:94",
        "operator()",
        "input_val >= zero && input_val <= one",
        "bce_input_out_of_range",
    ),
    "THCUNN BCE input check": (
        "/opt/conda/torch/lib/THCUNN/BCECriterion.cu:30",
        "bce_functor",
        "input >= 0. && input <= 1.",
        "bce_input_out_of_range",
    ),
    "EmbeddingBag offsets": (
        "/pytorch/aten/src/ATen/native/cuda/EmbeddingBag.cu:57",
        "EmbeddingBag_updateOutputKernel",
        "end >= begin",
        "other_device_assert",
    ),
    "retyped case": (
        "/pytorch/aten/src/ATen/native/cuda/Loss.cu:94",
        "operator()",
        "Input_val >= Zero && input_val <= One",
        "bce_input_out_of_range",
    ),
}


@pytest.mark.parametrize("name", sorted(ASSERTS))
def test_device_assert_by_condition(name: str) -> None:
    path, fn, cond, rule = ASSERTS[name]
    assert root(ASSERT.format(path=path, fn=fn, cond=cond))[0] == rule


# -- cut-off pastes, wrappers and launchers ---------------------------------------------------------
def test_cut_off_raise_literal_is_the_error() -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "C:\\work\\tcn\\run.py", line 63, in <module>\n    model.cuda()\n'
        '  File "C:\\py311\\lib\\site-packages\\torch\\nn\\modules\\module.py", line 578, in _apply\n    module._apply(fn)\n'
        "  [Previous line repeated 2 more times]\n"
        '  File "C:\\py311\\lib\\site-packages\\torch\\cuda\\__init__.py", line 210, in _lazy_init\n'
        '    raise AssertionError("Torch not compiled with CUDA en\n'
    )
    rule, facts = root(text)
    assert rule == "driver_error"
    assert facts["error_type"] == "AssertionError"
    assert facts["innermost_user_frame"] == "C:\\work\\tcn\\run.py:63"


ASSERT_FRAME = (
    "Traceback (most recent call last):\n"
    '  File "/home/ana/seg/train.py", line 57, in <module>\n    loss = criterion(logits, masks)\n'
    '  File "/home/ana/seg/losses.py", line 23, in forward\n'
    "    assert probs.shape == onehot.shape, {literal}\n"
)


@pytest.mark.parametrize(
    ("literal", "after", "error_type", "message"),
    [
        # the exception line pasted without its `AssertionError: `: the assert's own message, so its type
        (
            "'probabilities and one-hot targets differ in shape'",
            "probabilities and one-hot targets differ in shape\n",
            "AssertionError",
            "probabilities and one-hot targets differ in shape",
        ),
        # cut off at the assert: the literal is the error it was about to print
        ('"probabilities and one-hot targets differ in shape"', "", "AssertionError", "probabilities and one-hot targets differ in shape"),
        # an f-string's text is not the message: the line after it stays a message of unknown type
        (
            'f"Probabilities of shape {probs.shape} differ"',
            "Probabilities of shape (2, 4) differ\n",
            None,
            "Probabilities of shape (2, 4) differ",
        ),
    ],
)
def test_an_assert_with_a_literal_message_raises_an_assertion_error(literal: str, after: str, error_type: str | None, message: str) -> None:
    from kbdebug.parse.regions import parse_text

    (exc,) = [r for r in parse_text(ASSERT_FRAME.format(literal=literal) + after) if r.kind == "exception"]
    assert (exc.exc_type or None, exc.message, exc.frames[-1].function) == (error_type, message, "forward")


ELASTIC = """torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-02-01_10:00:00
  host      : node7
  rank      : 0 (local_rank: 0)
  exitcode  : {code} (pid: 4242)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""


def test_torchrun_exit_1_without_its_error_is_not_nccl() -> None:
    rule, facts = root(ELASTIC.format(code=1))
    assert rule == "other"
    assert facts["error_type"] == "torch.distributed.elastic.multiprocessing.errors.ChildFailedError"
    assert facts["host"] == "node7"


def test_torchrun_names_the_child_error_when_it_was_printed() -> None:
    text = TB.format(code="x = torch.zeros(3).cuda(7)") + "RuntimeError: CUDA error: invalid device ordinal\n" + ELASTIC.format(code=1)
    assert root(text)[0] == "invalid_device"


def test_wrapper_stream_prefix_is_taken_off() -> None:
    text = "".join(
        "stderr: " + line + "\n"
        for line in (TB.format(code="loss = F.nll_loss(out, y)") + "IndexError: Target 7 is out of bounds.").splitlines()
    )
    rule, facts = root(text)
    assert rule == "nll_target_out_of_range" and facts["innermost_user_frame"] == "/home/u/proj/train.py:40"


# -- compute-sanitizer / cuda-memcheck --------------------------------------------------------------
def test_leak_summary_alone_is_a_leak_check() -> None:
    rule, facts = root("========= LEAK SUMMARY: 4194304 bytes leaked in 4 allocations\n========= ERROR SUMMARY: 4 errors\n")
    assert rule == "sanitizer_memcheck" and facts["check"] == "leakcheck"


def test_no_leak_is_no_finding() -> None:
    assert root("========= LEAK SUMMARY: 0 bytes leaked in 0 allocations\n========= ERROR SUMMARY: 0 errors\n")[0] is None


API_ERROR = (
    '========= Program hit cudaErrorIllegalAddress (error 700) due to "an illegal memory access was encountered" on CUDA API call to cudaMemcpyAsync.\n'
    "=========     Saved host backtrace up to driver entry point at error\n"
)


@pytest.mark.parametrize(
    ("frame", "tool"),
    [
        ("=========     Host Frame:/usr/lib/x86_64-linux-gnu/libcuda.so.1 (cuLaunchKernel + 0x2fe) [0x282a4e]\n", "cuda-memcheck"),
        ("=========     Host Frame: [0x2774ec]\n=========                in /usr/lib/x86_64-linux-gnu/libcuda.so.1\n", "compute-sanitizer"),
        ("=========     Host Frame:cudaMemcpyAsync [0x6a578]\n=========                in /usr/lib/libcudart.so.12\n", "compute-sanitizer"),
        ("=========         Host Frame: run_step in step.cu:88 [0x5521] in libstep.so\n", "compute-sanitizer"),
    ],
)
def test_host_frame_layout_names_the_tool(frame: str, tool: str) -> None:
    rule, facts = root(API_ERROR + frame)
    assert rule == "sanitizer_memcheck" and facts["tool"] == tool


# -- the cause in the numbers ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("a", "b", "rel"),
    [
        ([4, 5], [20], "rank"),  # flattened: the same elements, a batch clash only in words
        ([18432, 2], [384, 48, 2], "rank"),
        ([6750208], [65536], "channel"),  # 103 classes of 256 x 256 against one label channel
        ([60], [10], "batch"),  # a whole multiple, but a batch of samples, not of pixels
        ([4, 10], [5], "batch"),
    ],
)
def test_relation_over_products(a: list[int], b: list[int], rel: str) -> None:
    assert relation(a, b) == rel and relation(b, a) == rel


def test_flattened_classes() -> None:
    assert flattened_classes(6750208, 65536) == 103
    assert flattened_classes(65536, 6750208) == 103
    assert flattened_classes(1216, 1280) is None and flattened_classes(60, 10) is None


def test_flattened_logits_are_a_channel_mismatch() -> None:
    text = TB.format(code="loss = criterion(out.view(-1, 1), mask.view(-1))") + (
        "ValueError: Expected input batch_size (6750208) to match target batch_size (65536).\n"
    )
    assert root(text)[0] == "channel_onehot_mismatch"


def test_batch_sizes_of_samples_stay_a_batch_mismatch() -> None:
    text = TB.format(code="loss = criterion(out, y)") + "ValueError: Expected input batch_size (60) to match target batch_size (10).\n"
    assert root(text)[0] == "batch_size_mismatch"


@pytest.mark.parametrize(
    ("code", "rule"),
    [
        ("tp = torch.sum(targets * preds, dim=(2, 3))", "channel_onehot_mismatch"),
        ("intersection = (gt * pr).sum()", "channel_onehot_mismatch"),
        # the channel was indexed away on the way in: dim 1 is a spatial dim now
        ("loss = dice(y_prob[:, 1, ...], label == 1)", "broadcast_shape_mismatch"),
        ("h = q * k", "broadcast_shape_mismatch"),
    ],
)
def test_dim1_clash_of_label_and_prediction(code: str, rule: str) -> None:
    text = (
        TB.format(code=code) + "RuntimeError: The size of tensor a (4) must match the size of tensor b (18) at non-singleton dimension 1\n"
    )
    assert root(text)[0] == rule


# -- live errors (CPU torch) -----------------------------------------------------------------------
def _live(fn) -> str:  # type: ignore[no-untyped-def]
    try:
        fn()
    except Exception as exc:  # the error's own text is the fixture
        return f"{type(exc).__name__}: {exc}"
    raise AssertionError("no error raised")


def test_live_one_hot_scatter_with_a_view_index() -> None:
    torch = pytest.importorskip("torch")
    label = torch.full((2, 8, 8), 5)

    def one_hot() -> None:
        torch.zeros(2, 3, 8, 8).scatter_(1, label.view(2, 1, 8, 8), 1)

    text = TB.format(code="onehot = torch.zeros(n, c, h, w).scatter_(1, label.view(n, 1, h, w), 1)") + _live(one_hot) + "\n"
    assert root(text)[0] == "channel_onehot_mismatch"


def test_live_flattened_target_is_a_rank_mismatch() -> None:
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    message = _live(lambda: F.binary_cross_entropy_with_logits(torch.zeros(4, 5), torch.zeros(20)))
    rule, facts = root(TB.format(code="loss = F.binary_cross_entropy_with_logits(logits, target)") + message + "\n")
    assert rule == "target_shape_mismatch" and facts["shape_relation"] == "rank"


# -- IDE, launcher and Markdown formats ------------------------------------------------------------
def test_vscode_exception_popup() -> None:
    text = (
        "Exception has occurred: RuntimeError\n"
        "cuDNN error: CUDNN_STATUS_NOT_SUPPORTED. This error may appear if you passed in a non-contiguous input.\n"
        '  File "/home/u/proj/net.py", line 31, in forward\n    x = self.conv1(x)\n'
    )
    rule, facts = root(text)
    assert rule == "cudnn_failure" and facts["error_type"] == "RuntimeError"
    assert facts["innermost_user_frame"] == "/home/u/proj/net.py:31"


def test_bare_cudnn_status_of_old_torch() -> None:
    rule, facts = root(TB.format(code="y = self.conv(x)") + "RuntimeError: CUDNN_STATUS_MAPPING_ERROR\n")
    assert rule == "cudnn_failure" and facts["cudnn_status"] == "CUDNN_STATUS_MAPPING_ERROR"


def test_multi_node_host_prefix_is_taken_off() -> None:
    text = "".join(
        "gpu-node-12: " + line + "\n"
        for line in (
            TB.format(code="dist.all_reduce(t)")
            + "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:825, unhandled system error, NCCL version 2.9.9"
        ).splitlines()
    )
    rule, facts = root(text)
    assert rule == "nccl_error" and facts["error_type"] == "RuntimeError"


def test_inline_code_backticks_around_the_error_line() -> None:
    rule, facts = root(
        "`RuntimeError: The NVIDIA driver on your system is too old (found version 10020). Please update your GPU driver.`\n"
    )
    assert rule == "driver_error" and facts["error_type"] == "RuntimeError"


def test_oom_wrapped_mid_figure_keeps_every_figure() -> None:
    text = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 64.00 MiB (GPU 1; 23.69\n"
        "GiB total capacity; 21.90 GiB already allocated; 31.06 MiB free; 22.35 GiB\n"
        "reserved in total by PyTorch)\n"
    )
    rule, facts = root(text)
    assert rule == "cuda_oom"
    assert (facts["total_capacity"], facts["gpu_index"], facts["free"]) == ("23.69 GiB", 1, "31.06 MiB")


def test_cut_off_chained_traceback_locates_an_error_pasted_from_mid_stack() -> None:
    text = (
        '  File "/opt/py/lib/python3.11/site-packages/torch/nn/functional.py", line 2905, in layer_norm\n'
        "    return torch.layer_norm(\n"
        "torch.AcceleratorError: CUDA error: out of memory\n\n"
        "During handling of the above exception, another exception occurred:\n\n"
        "Traceback (most recent call last):\n"
        '  File "/home/u/app/run.py", line 88, in handler\n    generate(task)\n'
        '  File "/home/u/app/run.py", line 51, in generate\n    offload.unload_all()\n'
        '  File "/opt/py/lib/python3.11/site-packages/offl/core.py", line 20, in unload_all\n'
    )
    rule, facts = root(text)
    assert rule == "cuda_oom" and facts["innermost_user_frame"] == "/home/u/app/run.py:51"


@pytest.mark.parametrize("sep", ["\n", " "])
def test_paste_that_began_mid_file_name(sep: str) -> None:
    line = '{f}:93: operator(): block: [7,0,0], thread: [{t},0,0] Assertion `idx_dim >= 0 && idx_dim < index_size && "index out of bounds"` failed.'
    flood = [line.format(f="atterGatherKernel.cu", t=1)] + [
        line.format(f="/src/aten/native/cuda/ScatterGatherKernel.cu", t=t) for t in range(2, 6)
    ]
    rule, facts = root(sep.join(flood) + "\n")
    assert rule == "scatter_gather_index_oob" and facts["kernel_file"] == "ScatterGatherKernel.cu"


# -- old torch's and cuBLAS's own wordings, retyping damage ----------------------------------------
@pytest.mark.parametrize(
    ("text", "rule", "status"),
    [
        (
            "RuntimeError: cublas runtime error : an invalid numeric value was used as an argument at /opt/aten/src/THC/THCBlas.cu:120\n",
            "cublas_failure",
            "CUBLAS_STATUS_INVALID_VALUE",
        ),
        (
            "RuntimeError: cublas runtime error : the GPU program failed to execute at /opt/aten/src/THC/THCBlas.cu:411\n",
            "cublas_failure",
            "CUBLAS_STATUS_EXECUTION_FAILED",
        ),
        (
            "RuntimeError: cublas runtime error : resource allocation failed at /opt/aten/src/THC/THCGeneral.cpp:250\n",
            "cuda_oom",
            "CUBLAS_STATUS_ALLOC_FAILED",
        ),
        (" ** On entry to DgemmStridedBatched parameter number 9 had an illegal value\n", "cublas_failure", "CUBLAS_STATUS_INVALID_VALUE"),
    ],
)
def test_cublas_in_its_own_words(text: str, rule: str, status: str) -> None:
    got, facts = root(text)
    assert got == rule and facts["cublas_status"] == status


@pytest.mark.parametrize(
    ("text", "rule", "error_type"),
    [
        (
            TB.format(code="loss = criterion(out, y)") + "RuntimeError: expected scaLar type Long but found FLoat\n",
            "target_shape_mismatch",
            "RuntimeError",
        ),
        ("...RuntimeError: CUDA error: an illegal memory access was encountered\n", "illegal_memory_access", "RuntimeError"),
        (
            TB.format(code="loss = F.nll_loss(out, y) IndexError:").rstrip("\n") + "\nTarget 7 is out of bounds.\n",
            "nll_target_out_of_range",
            "IndexError",
        ),
        (
            "[rank1]: RuntimeError: NCCL Error 2: unhandled system error (run with NCCL_DEBUG=INFO for details)\n",
            "nccl_error",
            "RuntimeError",
        ),
        (
            TB.format(code="r.copy_(src)")
            + "RuntimeError: inconsistent tensor size, expected tensor [6] and src [8] to have the same number of elements\n",
            "broadcast_shape_mismatch",
            "RuntimeError",
        ),
    ],
)
def test_retyped_and_wrapped_wordings(text: str, rule: str, error_type: str) -> None:
    got, facts = root(text)
    assert got == rule and facts["error_type"] == error_type


# -- which frame is the user's ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("path", "library"),
    [
        ("/home/u/src/MONAI/monai/networks/utils.py", True),  # a library installed from its source checkout
        ("C:\\src\\transformers\\src\\transformers\\trainer.py", True),
        ("~/app/__run__/app#link-tree/triton/compiler.py", True),  # a zipapp's link tree
        ("/opt/py/lib/python3.10/site-packages/accelerate/accelerator.py", True),
        ("~/app/__run__/app#link-tree/scripts/me/triton/bench.py", False),  # the user's own folder of that name
        ("/home/u/numpy_tricks/run.py", False),
        ("/home/u/proj/models/unet.py", False),
    ],
)
def test_library_by_package_layout(path: str, library: bool) -> None:
    from kbdebug.core.frames import is_library_path

    assert is_library_path(path) is library


def test_user_frame_skips_a_library_source_checkout() -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "/home/u/seg/train.py", line 77, in <module>\n    out = sliding_window_inference(img, roi, 4, model)\n'
        '  File "/home/u/src/MONAI/monai/inferers/utils.py", line 210, in sliding_window_inference\n    seg = predictor(win)\n'
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    assert root(text)[1]["innermost_user_frame"] == "/home/u/seg/train.py:77"


def test_paste_that_began_inside_a_frame_path() -> None:
    text = (
        'crf/layers.py", line 61, in forward\n'
        "    out = (self.w - self.b) * unary\n"
        "RuntimeError: The size of tensor a (256) must match the size of tensor b (21) at non-singleton dimension 1\n"
    )
    rule, facts = root(text)
    assert rule == "broadcast_shape_mismatch" and facts["innermost_user_frame"] == "crf/layers.py:61"


def test_application_logger_reformats_the_exception() -> None:
    text = (
        "11/02 09:14:05 [ERROR] runner - <class 'RuntimeError'> at engine.py:233 - CUDA error: an illegal memory access was encountered\n"
        "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n"
    )
    rule, facts = root(text)
    assert rule == "illegal_memory_access"
    assert (facts["error_type"], facts["innermost_user_frame"]) == ("RuntimeError", "engine.py:233")


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("RuntimeError: index out of range: Tried to access index 512 out of ta\n", "embedding_index_oob"),
        ("RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unava\n", "invalid_device"),
    ],
)
def test_old_wordings_cut_off_by_the_paste(text: str, rule: str) -> None:
    assert root(text)[0] == rule
