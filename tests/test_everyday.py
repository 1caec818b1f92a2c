"""The everyday PyTorch errors (rule-ids.md, "everyday PyTorch errors") raised live on CPU torch:
`diagnose(exc)` names the cause, reads its values off the message, and the advice names the user's
own variables from the failing line."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

from live_errors import guide, root  # noqa: E402

from kbdebug import diagnose  # noqa: E402
from kbdebug.diagnosis import Incident  # noqa: E402


# -- dtypes ---------------------------------------------------------------------------------------------
def numpy_batch_into_linear() -> None:
    model = nn.Linear(4, 2)
    batch = torch.from_numpy(np.random.rand(3, 4))
    model(batch)


def double_images_into_conv() -> None:
    conv = nn.Conv2d(3, 4, 3)
    images = torch.rand(1, 3, 8, 8, dtype=torch.float64)
    conv(images)


def double_matmul() -> None:
    feats = torch.rand(3, 4, dtype=torch.float64)
    proj = torch.rand(4, 2)
    feats @ proj


def float_ids_into_embedding() -> None:
    emb = nn.Embedding(10, 4)
    token_ids = torch.rand(3) * 9
    emb(token_ids)


def float_added_in_place_to_long() -> None:
    counts = torch.zeros(3, dtype=torch.long)
    counts += torch.rand(3)


def test_numpy_float64_batch_into_linear_is_a_dtype_mismatch_naming_batch() -> None:
    inc = root(numpy_batch_into_linear)
    assert inc.rule == "dtype_mismatch"
    assert (inc.facts["dtype_found"], inc.facts["dtype_wanted"]) == ("float64", "float32")
    assert inc.facts["odd_operand"] == "mat1" and inc.facts["cast_tensor"] == "batch"
    assert "`batch = batch.float()`" in inc.guide["fix"]
    assert "numpy" in inc.guide["why"] and "in_features" not in guide(inc)
    assert inc.facts["retry"] == "no"


def test_double_input_to_conv_names_the_input_and_its_bias() -> None:
    inc = root(double_images_into_conv)
    assert inc.rule == "dtype_mismatch"
    assert inc.facts["odd_operand"] == "input"
    assert "`images = images.float()`" in inc.guide["fix"]


def test_plain_matmul_of_two_dtypes_converts_the_float64_operand() -> None:
    inc = root(double_matmul)
    assert inc.rule == "dtype_mismatch"
    assert inc.facts["cast_tensor"] == "feats"
    assert "`feats = feats.float()`" in inc.guide["fix"]


def test_float_ids_into_embedding_want_an_integer_dtype() -> None:
    inc = root(float_ids_into_embedding)
    assert inc.rule == "dtype_mismatch"
    assert (inc.facts["dtype_found"], inc.facts["dtype_wanted"]) == ("float32", "int64")
    assert "`token_ids = token_ids.long()`" in inc.guide["fix"]


def test_float_result_into_a_long_tensor_is_told_to_compute_out_of_place() -> None:
    inc = root(float_added_in_place_to_long)
    assert inc.rule == "dtype_mismatch"
    assert inc.facts["cast_tensor"] == "counts"
    assert "out of place" in inc.guide["fix"] and "`counts` float32" in inc.guide["fix"]


def test_a_loss_target_of_the_wrong_index_dtype_stays_target_shape_mismatch() -> None:
    def float_target() -> None:
        logits, labels = torch.randn(4, 3), torch.ones(4)
        F.cross_entropy(logits, labels)

    assert root(float_target).rule == "target_shape_mismatch"


# -- views ----------------------------------------------------------------------------------------------
def test_view_to_a_shape_of_another_size_names_the_tensor_and_counts() -> None:
    def hardcoded_view() -> None:
        feats = torch.rand(8, 3, 1024)
        feats.view(8, 3, 2048)

    inc = root(hardcoded_view)
    assert inc.rule == "reshape_size_mismatch"
    assert (inc.facts["numel"], inc.facts["view_shape"], inc.facts["view_numel"]) == (24576, [8, 3, 2048], 49152)
    assert inc.facts["viewed_tensor"] == "feats" and inc.facts["viewed_shape"] == [8, 3, 1024]
    assert "`feats` ([8, 3, 1024]) holds 24576 elements" in inc.guide["what"]
    assert "`feats.view(feats.size(0), -1)`" in inc.guide["fix"]


def test_view_with_an_inferred_dim_that_cannot_divide() -> None:
    def inferred() -> None:
        hidden = torch.rand(8, 3, 1024)
        hidden.reshape(-1, 3, 2047)

    inc = root(inferred)
    assert inc.rule == "reshape_size_mismatch"
    assert inc.facts["view_infers"] is True
    assert "multiply to 6141, which does not divide 24576" in inc.guide["what"]


def test_view_of_a_transposed_tensor_says_reshape_on_the_users_variable() -> None:
    def view_transposed() -> None:
        x = torch.rand(4, 8, 16)
        xt = x.transpose(1, 2)
        xt.view(4, -1)

    inc = root(view_transposed)
    assert inc.rule == "view_not_contiguous"
    assert inc.facts["view_tensor"] == "xt"
    assert "`xt.reshape(...)`" in inc.guide["fix"] and "`xt.contiguous().view(...)`" in inc.guide["fix"]


# -- autograd -------------------------------------------------------------------------------------------
def test_inplace_relu_after_use_reports_the_tensor_its_version_and_the_write() -> None:
    def inplace_after_use() -> None:
        w = torch.rand(4, 8, requires_grad=True)
        h = torch.sigmoid(w * 2)
        out = (h * h).sum()
        h.relu_()
        out.backward()

    inc = root(inplace_after_use)
    assert inc.rule == "inplace_modified"
    assert inc.facts["tensor_shape"] == [4, 8]
    assert (inc.facts["version"], inc.facts["expected_version"], inc.facts["inplace_writes"]) == (1, 0, 1)
    assert inc.facts["last_op"] == "relu"  # its grad_fn: the in-place relu_ wrote it last
    assert inc.facts["inplace_candidates"][0]["code"] == "h.relu_()"
    assert "`h.relu_()`" in inc.guide["fix"]


def test_backward_twice_names_the_loss_and_leads_with_detach_not_retain_graph() -> None:
    def twice() -> None:
        w = torch.rand(4, requires_grad=True)
        loss = (w.exp() * 2).sum()
        loss.backward()
        loss.backward()

    inc = root(twice)
    assert inc.rule == "backward_twice"
    assert inc.facts["backward_tensor"] == "loss"
    assert inc.guide["fix"].startswith("Cut the graph") and "`running_loss += loss.item()`" in inc.guide["fix"]
    assert "hides a leak" in inc.guide["fix"]


def test_loss_computed_under_no_grad_names_the_loss() -> None:
    def under_no_grad() -> None:
        model = nn.Linear(4, 1)
        x = torch.rand(3, 4)
        with torch.no_grad():
            loss = model(x).pow(2).mean()
        loss.backward()

    inc = root(under_no_grad)
    assert inc.rule == "no_grad_fn"
    assert inc.facts["backward_tensor"] == "loss"
    assert inc.guide["what"].startswith("`loss` does not require grad")
    assert "torch.no_grad()" in inc.guide["why"] and "`loss.requires_grad = True` silences" in inc.guide["fix"]


# -- collate --------------------------------------------------------------------------------------------
class VaryingImages(torch.utils.data.Dataset):  # type: ignore[misc]
    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int):  # type: ignore[no-untyped-def]
        return torch.rand(3, 32 + i, 32)


def test_dataloader_of_varying_sizes_is_collate_not_a_channel_mismatch() -> None:
    def load() -> None:
        loader = torch.utils.data.DataLoader(VaryingImages(), batch_size=2)
        next(iter(loader))

    inc = root(load)
    assert inc.rule == "collate_size_mismatch"
    assert inc.facts["shapes"] == [[3, 32, 32], [3, 33, 32]]
    assert (inc.facts["entry_a"], inc.facts["entry_b"]) == (0, 1)
    assert "entry 0 is [3, 32, 32] and entry 1 is [3, 33, 32] (they differ in dim 1)" in inc.guide["what"]
    assert "transforms.Resize" in inc.guide["fix"] and "one-hot" not in guide(inc)


# -- advice that fits the case (#26, #30) ---------------------------------------------------------------
def test_dice_on_an_index_label_is_told_to_one_hot_with_the_class_count_never_to_slice() -> None:
    def dice() -> None:
        logits = torch.randn(4, 5, 32, 32)
        label = torch.randint(0, 5, (4, 32, 32))
        probs = logits.softmax(1)
        (probs * label).sum()

    inc = root(dice)
    assert inc.rule == "channel_onehot_mismatch"
    assert "`label` holds class indices `[4, 32, 32]`" in inc.guide["what"]
    assert "the batch against the 5 classes" in inc.guide["what"]
    assert "`label_1h = F.one_hot(label.long(), 5).permute(0, 3, 1, 2).float()`" in inc.guide["fix"]
    assert "slice" not in guide(inc) and "num_classes=5`:" not in guide(inc)


def test_the_final_error_of_a_chain_is_the_root_and_its_signature() -> None:
    def worker_died() -> None:
        try:
            raise EOFError("Ran out of input")
        except EOFError:
            raise RuntimeError("DataLoader worker (pid 4242) is killed by signal: Segmentation fault. ") from None

    def chained() -> None:
        try:
            raise EOFError("Ran out of input")
        except EOFError:
            raise RuntimeError("DataLoader worker (pid 4242) is killed by signal: Segmentation fault. ")  # noqa: B904

    for fn in (chained, worker_died):
        inc = root(fn)
        assert inc.facts["error_message"].startswith("DataLoader worker (pid 4242) is killed by signal")
        assert "EOFError" not in (inc.signature_key or "")


def test_a_warning_before_an_unrelated_traceback_is_never_the_root() -> None:
    from kbdebug.api import diagnose_text

    log = (
        "/usr/lib/python3.11/site-packages/torch/nn/modules/loss.py:535: UserWarning: Using a target size "
        "(torch.Size([4, 5])) that is different to the input size (torch.Size([4, 3])). This will likely lead to "
        "incorrect results due to broadcasting. Please ensure they have the same size.\n"
        "  return F.mse_loss(input, target, reduction=self.reduction)\n"
        "Traceback (most recent call last):\n"
        '  File "reg.py", line 12, in <module>\n'
        "    loss = criterion(pred, target)\n"
        '  File "/usr/lib/python3.11/site-packages/torch/nn/functional.py", line 3338, in mse_loss\n'
        "    expanded_input, expanded_target = torch.broadcast_tensors(input, target)\n"
        "RuntimeError: The size of tensor a (3) must match the size of tensor b (5) at non-singleton dimension 1\n"
    )
    incidents = diagnose_text(log).incidents
    inc = incidents[0]
    assert inc.facts["error_type"] == "RuntimeError"
    assert inc.rule == "broadcast_shape_mismatch"
    assert "`nn.Linear(..., 5)`" in inc.guide["fix"] and "one-hot" not in guide(inc)
    warned = incidents[1]  # the warning stays, after the error, described as a warning with no empty code span
    assert warned.guide["what"].startswith("The loss warned that its target differs in size")
    assert "``" not in guide(warned) and "cross_entropy" not in warned.guide["fix"]


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_mse_between_a_3_wide_head_and_a_5_wide_target_is_regression_advice() -> None:
    def regression() -> None:
        pred, target = torch.rand(4, 3), torch.rand(4, 5)
        F.mse_loss(pred, target)

    inc = root(regression)
    assert inc.rule == "broadcast_shape_mismatch"
    assert inc.guide["what"].startswith("A regression loss got a prediction and a target of different widths (3 vs 5")
    assert "segmentation" not in guide(inc).lower() and "one-hot" not in guide(inc)


def test_cat_advice_names_the_cat_dim_as_the_one_that_may_differ() -> None:
    def cat() -> None:
        a, b = torch.rand(2, 3), torch.rand(2, 4)
        torch.cat([a, b], dim=0)

    inc = root(cat)
    assert inc.rule == "concat_size_mismatch"
    assert "along dim 0, and every other dim must be equal" in inc.guide["what"]
    assert "has size 4 where 3 was expected" in inc.guide["what"]
    assert inc.guide["fix"].startswith("Make every dim but 0 agree")
    assert "U-Net" not in guide(inc) and "Broadcasting" not in inc.guide["why"]


def test_unet_skip_connection_of_an_odd_input_is_named_with_the_downsampling_factor() -> None:
    def unet() -> None:
        x = torch.rand(1, 3, 75, 75)
        down = F.max_pool2d(x, 2)  # 37 x 37
        up = F.interpolate(down, scale_factor=2)  # 74 x 74
        torch.cat([x, up], dim=1)

    inc = root(unet)
    assert inc.rule == "concat_size_mismatch"
    assert inc.facts["size_a"] == 75 and inc.facts["size_b"] == 74 and inc.facts["retry"] == "no"
    assert "skip connection" in inc.guide["why"] and "not divisible" in inc.guide["why"]
    assert "F.pad(x, (0, (-w) % 32, 0, (-h) % 32))" in inc.guide["fix"]


def test_plain_embedding_gets_no_hugging_face_advice() -> None:
    def lookup() -> None:
        emb = nn.Embedding(10, 4)
        token_ids = torch.tensor([1, 2, 12])
        emb(token_ids)

    inc = root(lookup)
    assert inc.rule == "embedding_index_oob"
    assert "resize_token_embeddings" not in guide(inc) and "get_input_embeddings" not in guide(inc)
    assert "(`nn.Embedding(13, dim)`)" in inc.guide["fix"]


def test_hugging_face_advice_where_transformers_is_in_the_frames() -> None:
    from kbdebug.api import diagnose_text

    log = (
        "Traceback (most recent call last):\n"
        '  File "finetune.py", line 40, in <module>\n'
        "    out = model(input_ids)\n"
        '  File "/opt/venv/lib/python3.11/site-packages/transformers/models/bert/modeling_bert.py", line 210, in forward\n'
        "    inputs_embeds = self.word_embeddings(input_ids)\n"
        "IndexError: index out of range in self\n"
    )
    inc = diagnose_text(log).incidents[0]
    assert inc.rule == "embedding_index_oob"
    assert "model.resize_token_embeddings(len(tokenizer))" in inc.guide["fix"]


def test_bce_channel_clash_names_the_lines_tensors_and_cites_no_monai_page() -> None:
    def bce() -> None:
        logits = torch.randn(4, 1, 8, 8)
        target = torch.rand(4, 3, 8, 8)
        F.binary_cross_entropy_with_logits(logits, target)

    inc = root(bce)
    assert inc.rule == "channel_onehot_mismatch"
    assert "`kbdebug.describe(target)`, `kbdebug.describe(logits)`" in inc.guide["confirm"]
    assert not [url for url in inc.references if "monai" in url]
    assert "to_onehot_y" not in guide(inc) and "AsDiscrete" not in guide(inc)


def test_a_log_names_the_label_and_logits_of_its_failing_line() -> None:
    from kbdebug.api import diagnose_text

    log = (
        "Traceback (most recent call last):\n"
        '  File "seg.py", line 77, in <module>\n'
        "    loss = F.cross_entropy(logits, label)\n"
        "RuntimeError: only batches of spatial targets supported (3D tensors) but got targets of size: : [4, 1, 256, 256]\n"
    )
    inc = diagnose_text(log).incidents[0]
    assert inc.rule == "target_shape_mismatch"
    assert (inc.facts["label_name"], inc.facts["pred_name"]) == ("label", "logits")
    assert "`label = label.squeeze(1).long()`" in inc.guide["fix"] and "`kbdebug.describe(logits)`" in inc.guide["confirm"]


def test_inferred_from_only_on_inferred_causes() -> None:
    from kbdebug.api import diagnose_text

    templated = diagnose_text("ValueError: Expected input batch_size (32) to match target batch_size (16).\n").incidents[0]
    assert templated.confidence >= 0.8 and "inferred_from" not in templated.facts
    inferred = diagnose_text("RuntimeError: something about mat1 and mat2 shapes cannot be multipl\n").incidents[0]
    assert inferred.confidence < 0.8 and inferred.facts["inferred_from"]


# -- guard() ---------------------------------------------------------------------------------------------
def _guarded(fn) -> BaseException:  # type: ignore[no-untyped-def]
    from kbdebug import KbdebugError, guard

    with pytest.raises(KbdebugError) as info, guard():
        fn()
    return info.value


def test_guard_error_carries_the_fix_and_its_traceback_ends_outside_kbdebug() -> None:
    from pathlib import Path

    import kbdebug

    logits, mask = torch.randn(2, 3, 4, 4), torch.randint(0, 3, (2, 4, 4))
    mask[0, 0, 0] = 255
    exc = _guarded(lambda: F.cross_entropy(logits, mask))
    assert "fix: if 255 marks pixels/tokens to skip, pass ignore_index=255 to the loss" in str(exc)
    assert exc.facts["fix_hint"].startswith("if 255 marks")  # type: ignore[attr-defined]
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    package = str(Path(kbdebug.__file__).parent)
    assert tb is not None and not tb.tb_frame.f_code.co_filename.startswith(package)


def test_guard_names_labels_past_the_class_count() -> None:
    logits, labels = torch.randn(4, 3), torch.tensor([0, 5, 7, 1])
    exc = _guarded(lambda: F.cross_entropy(logits, labels))
    assert "labels reach 7: the model needs num_classes >= 8" in str(exc)


def test_guard_raises_its_own_error_for_a_label_that_kept_its_channel_dim() -> None:
    logits, mask = torch.randn(2, 3, 4, 4), torch.randint(0, 3, (2, 1, 4, 4))
    crit = nn.CrossEntropyLoss()
    exc = _guarded(lambda: crit(logits, mask))
    assert exc.rule == "target_shape_mismatch"  # type: ignore[attr-defined]
    assert "target.squeeze(1).long()" in str(exc)
    inc = diagnose(exc).incidents[0]
    assert inc.rule == "target_shape_mismatch" and "`[B, 1, H, W]` label becomes" in inc.guide["fix"]


def test_guard_under_python_c_names_the_line_not_a_question_mark() -> None:
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = "import torch, kbdebug\nwith kbdebug.guard():\n    torch.nn.functional.cross_entropy(torch.randn(2, 3), torch.tensor([0, 7]))\n"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert "at <string>:3" in res.stderr and "at ?" not in res.stderr


# -- the verifier and the checks (#30) --------------------------------------------------------------------
def test_verify_with_no_arguments_finds_a_label_named_masks() -> None:
    def seg() -> None:
        logits = torch.randn(2, 5, 4, 4)
        masks = torch.randint(0, 5, (2, 4, 4))
        masks[0, 0, 0] = 7
        F.cross_entropy(logits, masks)

    with pytest.raises(Exception) as info:
        seg()
    diag = diagnose(info.value).verify()
    check = next(c for c in diag.incidents[0].verification if c["name"] == "class_targets")
    assert check["passed"] is False and "7 (x1)" in check["finding"]


GLOBAL_SCORES = torch.randn(3, 4)
GLOBAL_LABELS = torch.tensor([0, 9, 1])


def test_verify_reads_module_globals_used_inside_a_function() -> None:
    def uses_globals() -> None:
        F.cross_entropy(GLOBAL_SCORES, GLOBAL_LABELS)

    with pytest.raises(Exception) as info:
        uses_globals()
    diag = diagnose(info.value).verify()
    check = next(c for c in diag.incidents[0].verification if c["name"] == "class_targets")
    assert check["passed"] is False and "9 (x1)" in check["finding"]


class Encoder(nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 4)

    def forward(self, input_ids):  # type: ignore[no-untyped-def]
        return self.embed(input_ids)


def test_verify_finds_self_embed_inside_forward() -> None:
    model = Encoder()
    with pytest.raises(Exception) as info:
        model(torch.tensor([[1, 12, 3]]))
    diag = diagnose(info.value).verify()
    check = next(c for c in diag.incidents[0].verification if c["name"] == "embedding_ids")
    assert check["passed"] is False and "12" in check["finding"]


def test_verify_on_a_bce_crash_does_not_ask_for_long_targets_and_fails_the_crashed_layout() -> None:
    def bce() -> None:
        logits = torch.randn(4, 1, 8, 8)
        target = torch.rand(4, 3, 8, 8)
        F.binary_cross_entropy_with_logits(logits, target)

    with pytest.raises(Exception) as info:
        bce()
    checks = {c["name"]: c for c in diagnose(info.value).verify().incidents[0].verification}
    assert checks["class_targets"]["passed"] is None and ".long()" not in (checks["class_targets"]["fix"] or "")
    assert checks["segmentation_layout"]["passed"] is False
    assert "target [4, 3, 8, 8], input [4, 1, 8, 8]" in checks["segmentation_layout"]["finding"]


def test_two_ignore_like_labels_get_one_ignore_index_not_two() -> None:
    from kbdebug.verify import check_class_targets

    res = check_class_targets(torch.tensor([0, 1, -1, 255, 2]), num_classes=3)
    assert res.passed is False
    assert "remap the others onto one (target[target == -1] = 255) and pass ignore_index=255" in res.fix
    assert "ignore_index=-1" not in res.fix


def test_soft_label_float_targets_are_never_told_to_become_long() -> None:
    from kbdebug.verify import check_class_targets, check_target_dtype

    soft, scores = torch.tensor([0.2, 0.7, 0.1]), torch.randn(1, 3)
    for res in (check_class_targets(soft, logits=scores), check_target_dtype(soft, input=scores)):
        assert res.passed is False and ".long() would" in res.fix and "[1, 3]" in res.fix


def test_nll_guide_asserts_the_class_range_leaving_the_ignore_value_out() -> None:
    def ignore_pixels() -> None:
        logits = torch.randn(2, 3, 4, 4)
        target = torch.randint(0, 3, (2, 4, 4))
        target[0, 0, 0] = 255
        F.cross_entropy(logits, target)

    inc = root(ignore_pixels)
    assert inc.rule == "nll_target_out_of_range"
    assert "ignore_index=255" in inc.guide["fix"]
    assert "`assert ((target < 3) | (target == 255)).all()`" in inc.guide["fix"]
    assert ".max() < 3" not in inc.guide["fix"]


def test_one_healthy_batch_does_not_halve_a_kernel_assert_diagnosis() -> None:
    from kbdebug.api import diagnose_text

    log = (
        "/pt/aten/src/ATen/native/cuda/Loss.cu:242: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: "
        "[5,0,0] Assertion `t >= 0 && t < n_classes` failed.\n"
    )
    diag = diagnose_text(log)
    before = diag.incidents[0].confidence
    diag.verify(target=torch.tensor([0, 1, 2]), logits=torch.randn(3, 3))
    assert diag.incidents[0].confidence == before >= 0.9
    assert any("another batch" in note for note in diag.notes)


# -- advice that misleads (#30) ---------------------------------------------------------------------------
def _explain(log: str) -> Incident:
    from kbdebug.api import diagnose_text

    return diagnose_text(log).incidents[0]


def test_multinomial_advice_leads_with_the_source_not_nan_to_num() -> None:
    inc = _explain(
        "Traceback (most recent call last):\n"
        '  File "sample.py", line 9, in <module>\n'
        "    tok = torch.multinomial(probs, 1)\n"
        "RuntimeError: probability tensor contains either `inf`, `nan` or element < 0\n"
    )
    assert inc.rule == "invalid_probability"
    assert inc.guide["fix"].startswith("Find where the probabilities stop being valid")
    assert "only hides a model that is already broken" in inc.guide["fix"]


def test_index_advice_leads_with_where_the_index_is_made() -> None:
    inc = _explain(
        "/pt/aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [6,0,0], thread: [33,0,0] "
        'Assertion `-sizes[i] <= index && index < sizes[i] && "index out of bounds"` failed.\n'
    )
    assert inc.rule == "index_out_of_bounds"
    assert inc.guide["fix"].startswith("Find where the index is produced")
    assert "silently loses data" in inc.guide["fix"]


OOM_LOG = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.64 GiB "
    "of which 1.19 GiB is free. Including non-PyTorch memory, this process has 22.43 GiB memory in use. Of the "
    "allocated memory 21.80 GiB is allocated by PyTorch, and {rbu} is reserved by PyTorch but unallocated.\n"
)


def test_oom_offers_expandable_segments_only_for_a_large_reserved_share() -> None:
    small = _explain(OOM_LOG.format(rbu="312.00 MiB"))
    assert small.facts["fragmented"] is False
    assert small.guide["fix"].startswith("Lower the batch size")
    assert "Fragmentation is not it here (312.00 MiB reserved but unallocated)" in small.guide["fix"]
    assert "`running_loss += loss.item()`, not `running_loss += loss`" in small.guide["fix"]
    large = _explain(OOM_LOG.format(rbu="6.20 GiB"))
    assert large.facts["fragmented"] is True
    assert large.guide["fix"].startswith("6.20 GiB is reserved but unallocated, more than the request: fragmentation")


def test_a_plain_matmul_is_not_told_about_linear_layers() -> None:
    def matmul() -> None:
        a, b = torch.rand(3, 4), torch.rand(5, 2)
        a @ b

    inc = root(matmul)
    assert inc.rule == "matmul_shape_mismatch"
    assert "in_features" not in guide(inc) and "audit(model)" not in guide(inc)
    assert "`b.T`" in inc.guide["fix"]


def test_device_mismatch_names_the_argument_the_message_names() -> None:
    inc = _explain(
        "Traceback (most recent call last):\n"
        '  File "train.py", line 40, in <module>\n'
        "    loss = criterion(out, target)\n"
        "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu! "
        "(when checking argument for argument target in method wrapper_CUDA_nll_loss2d_forward)\n"
    )
    assert inc.rule == "device_mismatch" and inc.facts["argument"] == "target"
    assert inc.guide["fix"].startswith("The tensor passed as `target` (to `wrapper_CUDA_nll_loss2d_forward`)")
    assert '`target = target.to("cuda:0")`' in inc.guide["fix"]


def test_a_5d_input_to_conv2d_is_a_rank_problem_in_what_and_why() -> None:
    def conv5d() -> None:
        conv = nn.Conv2d(3, 4, 3)
        volume = torch.rand(2, 3, 4, 8, 8)
        conv(volume)

    inc = root(conv5d)
    assert inc.rule == "conv_channel_mismatch"
    assert "wrong rank" in inc.guide["what"]
    assert "in_channels" not in inc.guide["why"] and "this input has 5 dims" in inc.guide["why"]


def test_sanitizer_advice_asks_for_lineinfo_only_without_a_source_line() -> None:
    with_line = _explain(
        "========= Invalid __global__ write of size 4 bytes\n"
        "=========     at fill(float *, int)+0x90 in kern.cu:42\n"
        "=========     by thread (5,0,0) in block (2,0,0)\n"
        "=========     Address 0x7f0000001000 is out of bounds\n"
    )
    assert with_line.rule == "sanitizer_memcheck"
    assert "-lineinfo" not in with_line.guide["confirm"] and "`kern.cu:42`" in with_line.guide["confirm"]
    without = _explain(
        "========= Invalid __global__ write of size 4 bytes\n"
        "=========     at fill(float *, int)+0x90\n"
        "=========     by thread (5,0,0) in block (2,0,0)\n"
        "=========     Address 0x7f0000001000 is out of bounds\n"
    )
    assert "-lineinfo" in without.guide["confirm"]


def test_no_grad_fn_rules_out_frozen_parameters_when_the_model_trains() -> None:
    def under_no_grad() -> None:
        model = nn.Linear(4, 1)
        with torch.no_grad():
            loss = model(torch.rand(3, 4)).mean()
        loss.backward()

    inc = root(under_no_grad)
    assert "`model` (2 of 2 parameter tensors train) has trainable parameters" in inc.guide["why"]
    assert "requires_grad_(True)" not in inc.guide["fix"]


def test_no_grad_fn_with_every_parameter_frozen_says_unfreeze() -> None:
    def frozen() -> None:
        model = nn.Linear(4, 1)
        model.requires_grad_(False)
        loss = model(torch.rand(3, 4)).mean()
        loss.backward()

    inc = root(frozen)
    assert "Every parameter of `model` has `requires_grad=False`" in inc.guide["why"]
    assert inc.guide["fix"].startswith("Unfreeze the parameters you mean to train")


def test_an_inplace_layer_in_the_model_is_named_for_an_inplace_error() -> None:
    class Net(nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(8, 8)
            self.act = nn.ReLU(inplace=True)

        def forward(self, x):  # type: ignore[no-untyped-def]
            return self.act(torch.sigmoid(self.fc(x)))

    def train_step() -> None:
        model = Net()
        out = model(torch.rand(4, 8)).sum()
        out.backward()

    inc = root(train_step)
    assert inc.rule == "inplace_modified" and inc.facts["inplace_layers"] == ["model.act (ReLU)"]
    assert inc.guide["fix"].startswith("Build `model.act (ReLU)` with `inplace=False`")
    assert "`sigmoid` produced it or wrote it last" in inc.guide["what"]


def test_collate_of_lists_of_different_lengths() -> None:
    from torch.utils.data import default_collate

    inc = root(lambda: default_collate([[1, 2], [1, 2, 3]]))
    assert inc.rule == "collate_size_mismatch" and inc.confidence >= 0.9 and "inferred_from" not in inc.facts
    assert "pad_sequence" in inc.guide["fix"]


@pytest.mark.parametrize(
    "message",
    [
        "Input type (torch.cuda.HalfTensor) and weight type (torch.cuda.FloatTensor) should be the same",
        "Expected tensor for argument #1 'input' to have the same type as tensor for argument #2 'weight'; but type "
        "torch.cuda.HalfTensor does not equal torch.cuda.FloatTensor (while checking arguments for cudnn_batch_norm)",
    ],
    ids=["input-weight", "cudnn-arguments"],
)
def test_a_layers_check_of_tensor_types_names_the_half_input_and_converts_it(message: str) -> None:
    from kbdebug.api import diagnose_text

    inc = diagnose_text(
        f'Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n    out = model(x)\nRuntimeError: {message}\n'
    ).root
    assert inc is not None and inc.rule == "dtype_mismatch"
    assert (inc.facts["dtype_found"], inc.facts["dtype_wanted"], inc.facts["odd_operand"]) == ("float16", "float32", "input")
    assert "x.float()" in inc.guide["fix"]
