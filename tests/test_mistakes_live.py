"""The user's mistake behind the failing op, raised live by CPU torch (issue #35): a one-hot built from label
values past the class count, flattened Dice operands whose sizes differ by the class count, a U-Net skip
connection of an odd-sized input, a config read the code does not find. Each is named by its cause, with
the op kept as evidence, through `diagnose(exc)` and through `explain` of the same traceback."""

from __future__ import annotations

import argparse
from collections.abc import Callable

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from live_errors import guide, read, root  # noqa: E402

from kbdebug import diagnose_text  # noqa: E402


def _both(fn: Callable[[], object]) -> tuple[str, str]:
    """The root rule read live and the one read from the printed traceback of the same error."""
    return root(fn).rule, read(fn).rule


def label_onehot(inputs: torch.Tensor, num_segments: int, on_value: float = 1.0) -> torch.Tensor:
    b, h, w = inputs.shape
    outputs = torch.zeros(b, num_segments, h, w)
    return outputs.scatter_(1, inputs.unsqueeze(1), on_value)


def test_a_one_hot_helper_fed_intensities_is_a_label_value_past_the_class_count() -> None:
    mask = torch.zeros(2, 4, 4, dtype=torch.long)
    mask[0, 1, 1] = 550  # a mask image's intensity, not a class index
    inc = root(lambda: label_onehot(mask, 8))
    assert inc.rule == "channel_onehot_mismatch"
    assert inc.facts["index"] == 550 and inc.facts["size"] == 8
    text = " ".join(guide(inc).split())
    assert "a label holds 550 where only 8 classes exist (`0..7`)" in text
    assert "(550 looks like an intensity, not a class)" in text
    assert "check_class_targets(inputs, num_classes=8)" in text
    assert _both(lambda: label_onehot(mask, 8)) == ("channel_onehot_mismatch", "channel_onehot_mismatch")


def test_flattened_dice_operands_whose_sizes_differ_by_the_class_count() -> None:
    probs, masks = torch.rand(2, 4, 64, 64), torch.rand(2, 1, 64, 64)

    def dice() -> torch.Tensor:
        return (probs.view(-1) * masks.view(-1)).sum()

    inc = root(dice)
    assert inc.rule == "channel_onehot_mismatch"
    assert inc.facts["flattened_classes"] == 4
    text = guide(inc)
    assert "4 times the other's elements (32768 vs 8192)" in " ".join(text.split())
    assert ".shape, masks.shape)" in text and "`masks[:, :1]`" in text
    assert _both(dice) == ("channel_onehot_mismatch", "channel_onehot_mismatch")


def test_a_broadcast_of_two_large_sizes_outside_any_loss_stays_a_broadcast() -> None:
    a, b = torch.rand(2, 8192), torch.rand(2, 4096)
    inc = root(lambda: a + b)
    assert inc.rule == "broadcast_shape_mismatch"


def test_a_unet_skip_connection_is_a_concat_mismatch_read_alike_from_the_traceback() -> None:
    def unet() -> torch.Tensor:
        x = torch.rand(1, 3, 75, 75)
        up = F.interpolate(F.max_pool2d(x, 2), scale_factor=2)
        return torch.cat([x, up], dim=1)

    assert _both(unet) == ("concat_size_mismatch", "concat_size_mismatch")


def test_a_key_missing_from_a_config_dict_is_a_config_error_naming_the_key() -> None:
    cfg = {"training": {"batch_size": 8}}
    inc = root(lambda: cfg["training"]["n_workers"])
    assert inc.rule == "config_error"
    assert inc.facts["config_key"] == "n_workers" and inc.facts["retry"] == "no"
    assert '.get("n_workers", <default>)' in guide(inc)


def test_a_key_missing_from_a_data_sample_is_not_a_config_error() -> None:
    sample = {"img": torch.zeros(3)}
    inc = root(lambda: sample["image"])
    assert inc.rule != "config_error"


def test_an_argument_the_parser_never_defined_is_a_config_error() -> None:
    args = argparse.Namespace(lr=0.1)
    inc = root(lambda: args.warmup_epochs)
    assert inc.rule == "config_error"
    assert inc.facts["config_key"] == "warmup_epochs"
    assert 'parser.add_argument("--warmup-epochs", ...)' in guide(inc)


def test_argparse_refusing_the_command_line_is_a_config_error() -> None:
    parser = argparse.ArgumentParser(prog="train.py")
    parser.add_argument("--epochs", type=int, default=1)
    inc = root(lambda: parser.parse_args(["-f", "/root/.local/share/jupyter/runtime/kernel-1.json"]))
    assert inc.rule == "config_error"
    assert "parser.parse_args(args=[])" in guide(inc)


def _ctc(blank: int = 0, batch_first: bool = False, input_length: int = 10, target_length: int = 4) -> torch.Tensor:
    log_probs = torch.randn(10, 2, 5).log_softmax(2)  # [T, N, C]: 4 characters and the blank
    targets = torch.tensor([[1, 2, 3, 3], [1, 2, 3, 4]])
    if batch_first:
        log_probs = log_probs.transpose(0, 1)
    lengths = torch.tensor([input_length, 10]), torch.tensor([target_length, 4])
    return F.ctc_loss(log_probs, targets, *lengths, blank=blank)


def test_a_ctc_blank_past_the_classes_is_a_label_out_of_range_with_the_ctc_fix() -> None:
    inc = root(lambda: _ctc(blank=5))
    assert inc.rule == "nll_target_out_of_range"
    text = " ".join(guide(inc).split())
    assert "`len(vocab) + 1` outputs (`num_classes = vocab + 1`)" in text and "nn.CTCLoss(blank=0)" in text
    assert _both(lambda: _ctc(blank=5)) == ("nll_target_out_of_range", "nll_target_out_of_range")


@pytest.mark.parametrize(
    ("case", "says"),
    [
        ({"input_length": 12}, "lengths measured on the input audio or features"),
        ({"target_length": 6}, "fewer label positions than `target_lengths` says"),
        ({"batch_first": True}, "batch-first `[N, T, C]`"),
    ],
)
def test_ctc_lengths_that_do_not_fit_are_a_target_shape_problem(case: dict[str, int], says: str) -> None:
    inc = root(lambda: _ctc(**case))
    assert inc.rule == "target_shape_mismatch"
    assert says in " ".join(guide(inc).split())
    assert _both(lambda: _ctc(**case)) == ("target_shape_mismatch", "target_shape_mismatch")


def _check_valid_column_key(key: str, columns: list[str]) -> None:
    """Hugging Face datasets' own check (datasets/formatting/formatting.py), raised as a Dataset's `ds["label"]` does."""
    if key not in columns:
        raise KeyError(f"Column {key} not in the dataset. Current columns in the dataset: {columns}")


def test_a_datasets_column_missing_is_other_naming_the_column_and_those_the_dataset_holds() -> None:
    def read() -> None:
        _check_valid_column_key("label", ["text", "labels"])

    inc = root(read)
    assert inc.rule == "other"
    assert inc.facts["dataset_column"] == "label"
    text = " ".join(guide(inc).split())
    assert "The dataset has no column `label`: its columns are ['text', 'labels']." in text
    assert 'ds.rename_column("old", "new")' in text
    assert _both(read) == ("other", "other")


def test_negative_labels_one_hot_encoded_are_labels_outside_the_class_range() -> None:
    """`F.one_hot` of labels holding an ignore value (-100): its own range check, whose wording was in no anchor."""
    labels = torch.tensor([[-100, 0, 2], [1, 2, 0]])
    live, printed = _both(lambda: F.one_hot(labels, num_classes=3))
    assert (live, printed) == ("channel_onehot_mismatch", "channel_onehot_mismatch")
    text = guide(root(lambda: F.one_hot(labels, num_classes=3)))
    assert "a label holds a negative value" in text and "ignore_index=-100" in text
    assert "clamp(min=0), 3)" in text  # the fix keeps the user's class count


def test_index_select_of_a_plain_tensor_gets_index_select_advice_with_the_users_names() -> None:
    """`index out of range in self` is index_select's (nn.Embedding's lookup is one): on a plain tensor the guide
    speaks of that tensor and its dim, not of a vocabulary."""
    feats = torch.zeros(3, 2)
    keep = torch.tensor([0, 5])
    inc = root(lambda: feats.index_select(0, keep))
    assert inc.rule == "embedding_index_oob"
    text = guide(inc)
    assert "`index_select` was given an index past the end" in text
    assert "feats.size(0)" in text and "nn.Embedding(" not in text and "truncation=True" not in text


def test_numpy_of_a_cuda_tensor_is_a_device_placement_with_the_cpu_copy_as_its_fix() -> None:
    """`can't convert cuda:0 device type tensor to numpy` (no GPU here: the message as torch prints it): the tensor is
    on the GPU and numpy's side is host memory; the fix is the copy, not moving the model."""
    printed = (
        'Traceback (most recent call last):\n  File "eval.py", line 50, in <module>\n'
        "    acc = (pred == y).float().mean().numpy()\n"
        "TypeError: can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory first.\n"
    )
    inc = diagnose_text(printed).root
    assert inc is not None and inc.rule == "device_mismatch"
    text = guide(inc)
    assert "A tensor on cuda:0 was converted to a numpy" in text and "t.detach().cpu().numpy()" in text
    assert "model.to(device)" not in text


def _check_loss(loss: torch.Tensor) -> None:
    assert not torch.isnan(loss), "loss went NaN"


def test_the_scripts_own_nan_check_failing_is_non_finite_values() -> None:
    """A training script's own `assert not torch.isnan(loss)`: the cause is the NaN it found, not a plain assert."""
    live, printed = _both(lambda: _check_loss(torch.log(torch.tensor(-1.0))))
    assert (live, printed) == ("nan_inf_detected", "nan_inf_detected")


def _seg_loss(pred: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return ((pred - mask) ** 2).mean()


def _attend(scores: torch.Tensor, attn_mask: torch.Tensor) -> torch.Tensor:
    return scores.masked_fill(attn_mask == 0, -1e9)


def test_a_label_of_another_resolution_in_a_hand_written_loss_is_the_target_with_a_fix_that_runs() -> None:
    """Live, the failing line's tensors say what the bare broadcast cannot: `pred` and `mask` differ in their spatial
    dims. The label is resized to the prediction's, and the guide's expression runs on the user's tensors."""
    pred, mask = torch.zeros(2, 3, 64, 64), torch.ones(2, 3, 32, 32)
    inc = root(lambda: _seg_loss(pred, mask))
    assert inc.rule == "target_shape_mismatch" and inc.facts["shape_relation"] == "spatial"
    fix = str(inc.guide["fix"])
    expr = 'F.interpolate(mask.float(), size=pred.shape[2:], mode="nearest").to(mask.dtype)'
    assert expr in fix
    assert eval(expr, {"F": F, "mask": mask, "pred": pred}).shape == pred.shape  # the guide's own text


def test_an_attention_mask_with_another_head_count_is_no_label() -> None:
    """`scores.masked_fill(attn_mask == 0, ...)` with 3 heads against 8: dim 1 is the heads, and neither tensor is
    a label (attention scores are no metric's score)."""
    inc = root(lambda: _attend(torch.zeros(2, 8, 64, 64), torch.ones(2, 3, 64, 64)))
    assert inc.rule == "broadcast_shape_mismatch"


def test_batch_norm_over_a_batch_of_one_and_cuda_in_a_forked_worker_get_pages_that_say_so() -> None:
    """Known wordings with no rule of their own: the catch-all's page says what happened and what to change."""
    bn = torch.nn.BatchNorm1d(4).train()
    inc = root(lambda: bn(torch.randn(1, 4)))
    text = guide(inc)
    assert inc.rule == "other" and "a batch of one sample" in text and "drop_last=True" in text and "model.eval()" in text
    fork = (
        'Traceback (most recent call last):\n  File "dataset.py", line 40, in __getitem__\n    img = img.cuda()\n'
        "RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use "
        "the 'spawn' start method\n"
    )
    printed = diagnose_text(fork).root
    assert printed is not None and printed.rule == "other"
    text = guide(printed)
    assert "CUDA cannot be initialised again in a forked child" in text and 'multiprocessing_context="spawn"' in text


@pytest.mark.filterwarnings("ignore:Using a target size")
def test_class_indices_into_mse_are_told_to_use_cross_entropy_or_one_hot_and_the_fixes_run() -> None:
    """`F.mse_loss(pred, labels)` with `[B, C]` scores and `[B]` integer labels: the target's B values broadcast
    against the C columns. The mistake is the label's form, not a head of the wrong width (the 4 is the batch)."""
    pred = torch.randn(4, 10)
    labels = torch.tensor([0, 3, 9, 1])

    def step() -> object:
        return F.mse_loss(pred, labels)

    inc = root(step)
    text = " ".join(guide(inc).split())
    assert inc.rule == "broadcast_shape_mismatch"
    assert "a prediction of `[4, 10]` and a target of `[4]`" in text and "nn.Linear(..., 4)" not in text
    for expr in ("F.cross_entropy(pred, labels)", "F.mse_loss(pred, F.one_hot(labels, 10).float())"):
        assert f"`{expr}`" in text
        eval(expr, {"F": F, "pred": pred, "labels": labels})  # the guide's own text runs
    target = torch.rand(4)  # a float value per sample: the head is the wider side
    wide = " ".join(guide(root(lambda: F.mse_loss(pred, target))).split())
    assert "Give the head one output (`nn.Linear(..., 1)`) and compare `pred.squeeze(1)` with the target" in wide


def _ragged_rows() -> torch.Tensor:
    rows = [[101, 2023, 2003, 102], [101, 7592, 102]]  # token ids of two sentences, unpadded
    return torch.tensor(rows)


def test_the_users_own_torch_tensor_of_ragged_lists_gets_a_page_about_padding_those_lists() -> None:
    """`torch.tensor(rows)` of lists of unequal length, on the user's own line: not a tokenizer's or a collator's
    batch, so the page pads the user's lists (its fix runs as written) and names no Hugging Face collator."""
    live, printed = _both(_ragged_rows)
    assert live == printed == "collate_size_mismatch"
    inc = root(_ragged_rows)
    assert inc.title == "nested lists of different lengths given to torch.tensor"
    page = guide(inc)
    assert "DataCollator" not in page and "tokenize" not in page
    rows = [[101, 2023, 2003, 102], [101, 7592, 102]]
    n = max(len(r) for r in rows)
    padded = torch.tensor([r + [0] * (n - len(r)) for r in rows])  # the page's first fix, as written
    assert "torch.tensor([r + [0] * (n - len(r)) for r in rows])" in page and padded.shape == (2, 4)
    stacked = torch.nn.utils.rnn.pad_sequence([torch.tensor(r) for r in rows], batch_first=True)
    assert "pad_sequence([torch.tensor(r) for r in rows], batch_first=True)" in page and stacked.shape == (2, 4)


def test_a_part_missing_from_a_loaded_checkpoint_gets_a_page_about_the_files_layout(tmp_path: object) -> None:
    """`torch.load(path)["model"]` of a file saved as a bare state dict: the page names the checkpoint's layout (the
    saver's choice), prints the file's keys, and loads it into the user's module as it is (the fix runs)."""
    import pathlib

    path = str(pathlib.Path(str(tmp_path)) / "best.pt")
    net = torch.nn.Linear(3, 2)
    torch.save(net.state_dict(), path)

    def resume() -> None:
        net.load_state_dict(torch.load(path)["model"])

    inc = root(resume)
    assert inc.rule == "other" and inc.facts["looked_up_in"] == "torch.load(path)"
    page = guide(inc)
    assert "the code that saved it put there" in page
    assert 'print(list(torch.load(path, map_location="cpu").keys())[:10])' in page
    assert "net.load_state_dict(torch.load(path))" in page
    net.load_state_dict(torch.load(path))  # the fix, as written


class _TinyEncoder(torch.nn.Module):
    """Learned positions, as transformers' BERT-style embeddings hold them."""

    def __init__(self) -> None:
        super().__init__()
        self.word_embeddings = torch.nn.Embedding(100, 4)
        self.position_embeddings = torch.nn.Embedding(8, 4)  # max_position_embeddings = 8

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        position_ids = torch.arange(input_ids.size(1)).unsqueeze(0)
        return self.word_embeddings(input_ids) + self.position_embeddings(position_ids)


def test_a_sequence_past_the_position_table_is_told_to_truncate_not_to_resize_the_vocabulary() -> None:
    """The lookup that failed is the position table's: the sequence is too long, the token ids are fine; the page
    truncates at tokenization and says nothing of resize_token_embeddings."""
    encoder = _TinyEncoder()
    ids = torch.randint(0, 100, (1, 10))
    live, printed = _both(lambda: encoder(ids))
    assert live == printed == "embedding_index_oob"
    inc = root(lambda: encoder(ids))
    assert inc.title == "a sequence longer than the model's position table"
    page = guide(inc)
    assert "truncation=True, max_length=tokenizer.model_max_length" in page and "resize_token_embeddings" not in page
    encoder(ids[:, :8])  # truncated to the table, it runs


class _TinyViT(torch.nn.Module):
    """A vision transformer's learned positions: one row per patch of the image size it was built for."""

    def __init__(self, patches: int) -> None:
        super().__init__()
        self.position_embeddings = torch.nn.Parameter(torch.zeros(1, patches + 1, 4))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        embeddings = tokens + self.position_embeddings
        return embeddings


def test_an_image_with_more_patches_than_the_position_table_is_an_input_longer_than_the_model() -> None:
    """`tokens + self.position_embeddings` with more patches than the table (a larger image than the model's): the
    broadcast is the model's positions, so the page says the input is longer and resizes or interpolates; a clash of
    two other tensors keeps the plain broadcast page."""
    vit = _TinyViT(patches=4)
    tokens = torch.zeros(2, 10, 4)
    live, printed = _both(lambda: vit(tokens))
    assert live == printed == "broadcast_shape_mismatch"
    inc = root(lambda: vit(tokens))
    assert inc.title == "an input longer than the model's position table"
    page = guide(inc)
    assert "10 positions where its `position_embeddings` holds 5" in page and "interpolate_pos_encoding=True" in page
    vit(tokens[:, :5])  # as many tokens as the table has rows, it runs
    other = root(lambda: torch.zeros(2, 10, 4) + torch.zeros(1, 5, 4))
    assert other.rule == "broadcast_shape_mismatch" and other.title == "tensor sizes do not broadcast"


def test_integer_targets_for_a_binary_cross_entropy_are_the_targets_dtype_and_the_fix_runs() -> None:
    """`BCEWithLogitsLoss` given 0/1 labels kept as int64: torch says only that a float result cannot be cast to Long;
    the failing lines name the loss, so the cause is the target's dtype, and the page's fix runs as written."""
    logits = torch.randn(4, 3)
    target = torch.tensor([[0, 1, 0], [1, 0, 0], [0, 0, 1], [0, 1, 0]])
    criterion = torch.nn.BCEWithLogitsLoss()
    live, printed = _both(lambda: criterion(logits, target))
    assert live == printed == "target_shape_mismatch"
    fix = str(root(lambda: criterion(logits, target)).guide["fix"])
    assert "`target = target.float()`" in fix and "F.cross_entropy(logits, target.argmax(1))" in fix
    criterion(logits, target.float())
    F.cross_entropy(logits, target.argmax(1))
    # the same words outside a loss (an in-place sum into an integer tensor) stay a dtype clash
    total = torch.zeros(3, dtype=torch.long)
    assert _both(lambda: total.add_(torch.rand(3)))[0] == "dtype_mismatch"


def test_a_feature_width_clash_beside_the_position_table_is_no_input_length() -> None:
    """`x + self.pos_embedding` where the widths differ (dim 2), not the lengths: the plain broadcast page."""

    class WrongWidth(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.pos_embedding = torch.nn.Parameter(torch.zeros(1, 5, 8))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.pos_embedding

    inc = root(lambda: WrongWidth()(torch.zeros(2, 5, 4)))
    assert inc.rule == "broadcast_shape_mismatch" and inc.title == "tensor sizes do not broadcast"
    assert "position table" not in guide(inc)
