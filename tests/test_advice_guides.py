"""Every rule's guide, rendered on a fixture of its own, quotes the fixture's values and leaves no
placeholder unfilled (empty backticks, "at :.", "None", a bare "{{")."""

from __future__ import annotations

import re

import pytest

from kbdebug.api import diagnose_text
from kbdebug.kb import load_kb

TB = 'Traceback (most recent call last):\n  File "/srv/exp/seg_train.py", line 217, in <module>\n    loss = criterion(pred, mask)\n'
WHERE = ["/srv/exp/seg_train.py:217", "loss = criterion(pred, mask)"]

# rule -> (log, values the guide must quote). The guides of the shape rules owned by the report work
# (channel_onehot_mismatch, target_shape_mismatch, broadcast_shape_mismatch, batch_size_mismatch) only
# get the placeholder check here.
CASES: dict[str, tuple[str, list[str]]] = {
    "nll_target_out_of_range": (TB + "IndexError: Target 255 is out of bounds.\n", ["255", "ignore_index=255", *WHERE]),
    "bce_input_out_of_range": (
        TB + "RuntimeError: all elements of target should be between 0 and 1\n",
        ["in its target", "(target > 0).float()", *WHERE],
    ),
    "embedding_index_oob": (
        "/pt/aten/src/ATen/native/cuda/Indexing.cu:1289: indexSelectLargeIndex: block: [17,0,0], "
        "thread: [64,0,0] Assertion `srcIndex < srcSelectDimSize` failed.\n",
        ["Indexing.cu:1289", "block [17, 0, 0]", "thread [64, 0, 0]", "srcIndex < srcSelectDimSize"],
    ),
    "index_out_of_bounds": (
        "/pt/aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [6,0,0], thread: [33,0,0] "
        'Assertion `-sizes[i] <= index && index < sizes[i] && "index out of bounds"` failed.\n',
        ["IndexKernel.cu:92", "block [6, 0, 0]", "thread [33, 0, 0]"],
    ),
    "scatter_gather_index_oob": (
        TB.replace("loss = criterion(pred, mask)", "picked = logp.gather(1, mask)")
        + "RuntimeError: index 37 is out of bounds for dimension 1 with size 21\n",
        ["index 37", "size 21", "at least 38", "[0, 21)", "picked = logp.gather(1, mask)"],
    ),
    "invalid_probability": (
        "../aten/src/ATen/native/cuda/MultinomialKernel.cu:118: binarySearchForMultinomial: block: [2,0,0], "
        "thread: [7,0,0] Assertion `cumdist[size - 1] > static_cast<scalar_t>(0)` failed.\n",
        ["MultinomialKernel.cu:118", "binarySearchForMultinomial", "block [2, 0, 0]"],
    ),
    "other_device_assert": (
        "/x/aten/src/ATen/native/cuda/MaxUnpooling.cu:61: max_unpooling3d_forward_kernel: block: [4,0,0], "
        "thread: [9,0,0] Assertion `maxind >= 0 && maxind < outputImageSize` failed.\n",
        ["MaxUnpooling.cu:61", "max_unpooling3d_forward_kernel", "maxind >= 0 && maxind < outputImageSize"],
    ),
    "async_error_unlocalized": (
        TB + "RuntimeError: CUDA error: device-side assert triggered\n",
        ["kbdebug run --rerun -- python /srv/exp/seg_train.py", *WHERE],
    ),
    "conv_channel_mismatch": (
        TB + "RuntimeError: Given groups=1, weight of size [32, 3, 5, 5], expected input[8, 1, 128, 128] "
        "to have 3 channels, but got 1 channels instead\n",
        ["[32, 3, 5, 5]", "[8, 1, 128, 128]", "x.repeat(1, 3, 1, 1)", "in_channels=1", *WHERE],
    ),
    "matmul_shape_mismatch": (
        TB + "RuntimeError: mat1 and mat2 shapes cannot be multiplied (16x2048 and 1024x7)\n",
        ["16x2048", "1024x7", "`in_features` to 2048 (it is 1024)", *WHERE],
    ),
    "cuda_oom": (
        TB + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 1 has a total capacity of "
        "39.39 GiB of which 2.25 GiB is free.\n",
        ["GPU 1", "3.50 GiB", "39.39 GiB", "2.25 GiB", *WHERE],
    ),
    "cublas_failure": (
        TB + "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasSgemm( handle, opa, "
        "opb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc)`\n",
        ["CUBLAS_STATUS_EXECUTION_FAILED", "cublasSgemm", "EXECUTION_FAILED is usually fallout", *WHERE],
    ),
    "cudnn_failure": (
        TB + "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_SUPPORTED. This error may appear if you passed in a non-contiguous input.\n",
        ["CUDNN_STATUS_NOT_SUPPORTED", "NOT_SUPPORTED comes from unusual shapes", *WHERE],
    ),
    "no_kernel_image": (TB + "torch.AcceleratorError: CUDA error: no kernel image is available for execution on the device\n", WHERE),
    "device_mismatch": (
        TB + "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:3 and cpu!\n",
        ["cuda:3 and cpu", "Move everything to cuda:3", *WHERE],
    ),
    "invalid_device": (TB + "RuntimeError: CUDA error: invalid device ordinal\n", ["invalid device ordinal", *WHERE]),
    "driver_error": (
        TB + "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU\n",
        ["Found no NVIDIA driver", *WHERE],
    ),
    "launch_failure": (
        TB + "RuntimeError: CUDA error: too many resources requested for launch\n",
        ["too many resources requested for launch", "the launch itself was impossible", *WHERE],
    ),
    "illegal_memory_access": (
        TB + "RuntimeError: CUDA error: an illegal memory access was encountered\n",
        ["compute-sanitizer --tool memcheck python /srv/exp/seg_train.py", *WHERE],
    ),
    "misaligned_address": (TB + "RuntimeError: CUDA error: misaligned address\n", WHERE),
    "nccl_error": (
        "[rank3]:[E ProcessGroupNCCL.cpp:563] [Rank 3] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=118, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800427 milliseconds before timing out.\n",
        ["ALLREDUCE", "SeqNum 118", "1800000 ms", "1800427 ms", "rank 3"],
    ),
    "deterministic_unsupported": (
        TB + "RuntimeError: upsample_bilinear2d_backward_out_cuda does not have a deterministic "
        "implementation, but you set 'torch.use_deterministic_algorithms(True)'.\n",
        ["upsample_bilinear2d_backward_out_cuda", *WHERE],
    ),
    "nan_inf_detected": (TB + "RuntimeError: Function 'DivBackward0' returned nan values in its 1th output.\n", ["DivBackward0", *WHERE]),
    "sanitizer_memcheck": (
        "========= Invalid __global__ read of size 8 bytes\n=========     at gather_rows(float*)+0x1b0 in rows.cu:88\n"
        "=========     by thread (12,0,0) in block (5,0,0)\n=========     Address 0x7f3a00 is out of bounds\n",
        ["read of 8 bytes", "gather_rows(float*)", "rows.cu:88", "thread [12, 0, 0]", "0x7f3a00"],
    ),
    "sanitizer_racecheck": (
        "========= Error: Race reported between Write access at reduce_k()+0x2a0 in red.cu:133\n"
        "=========     and Read access at reduce_k()+0x300 in red.cu:140 [96 hazards]\n",
        ["reduce_k()", "red.cu:133", "96 hazards"],
    ),
    "sanitizer_initcheck": (
        "========= Uninitialized __global__ memory read of size 2 bytes\n"
        "=========     at fill_half(short *)+0x40 in h.cu:19\n=========     by thread (3,0,0) in block (2,0,0)\n",
        ["fill_half(short *)", "thread [3, 0, 0]", "block [2, 0, 0]"],
    ),
    "sanitizer_synccheck": (
        "========= Barrier error detected. Divergent thread(s) in warp\n"
        "=========     at tile_sum(int *, int)+0x110 in tiles.cu:52\n=========     by thread (9,0,0) in block (1,0,0)\n",
        ["tile_sum(int *, int)", "tiles.cu:52", "thread [9, 0, 0]"],
    ),
    "other": (
        TB + "KeyError: 'label_path'\n",
        ["KeyError: 'label_path'", "The key `'label_path'` is missing", "add `'label_path'` where it is built", *WHERE],
    ),
    "concat_size_mismatch": (
        TB.replace("loss = criterion(pred, mask)", "x = torch.cat([skip, up], dim=1)")
        + "RuntimeError: Sizes of tensors must match except in dimension 1. Expected size 25 but got size 24 for tensor number 1 in the list.\n",
        ["25", "24", "x = torch.cat([skip, up], dim=1)"],
    ),
    "config_error": (
        TB.replace("loss = criterion(pred, mask)", 'workers = cfg["training"]["n_workers"]') + "KeyError: 'n_workers'\n",
        ["n_workers", "/srv/exp/seg_train.py:217"],
    ),
    "channel_onehot_mismatch": (
        TB + "AssertionError: ground truth has different shape (torch.Size([2, 1, 64, 64])) from input (torch.Size([2, 9, 64, 64]))\n",
        [],
    ),
    "target_shape_mismatch": (
        TB + "RuntimeError: only batches of spatial targets supported (3D tensors) but got targets of size: : [6, 1, 80, 80]\n",
        [],
    ),
    "broadcast_shape_mismatch": (
        TB + "RuntimeError: The size of tensor a (19) must match the size of tensor b (23) at non-singleton dimension 2\n",
        [],
    ),
    "batch_size_mismatch": (TB + "ValueError: Expected input batch_size (48) to match target batch_size (12).\n", []),
    "dtype_mismatch": (
        TB.replace("loss = criterion(pred, mask)", "out = model(batch)")
        + "RuntimeError: mat1 and mat2 must have the same dtype, but got Double and Float\n",
        ["float64 where it needs float32", "`mat1` is float64", "`x = x.float()`", "numpy", "out = model(batch)"],
    ),
    "reshape_size_mismatch": (
        TB.replace("loss = criterion(pred, mask)", "x = feats.view(8, 3, 2048)")
        + "RuntimeError: shape '[8, 3, 2048]' is invalid for input of size 24576\n",
        ["`feats` holds 24576 elements", "[8, 3, 2048]", "holds 49152", "`feats.view(feats.size(0), -1)`"],
    ),
    "view_not_contiguous": (
        TB.replace("loss = criterion(pred, mask)", "flat = xt.view(4, -1)")
        + "RuntimeError: view size is not compatible with input tensor's size and stride (at least one dimension "
        "spans across two contiguous subspaces). Use .reshape(...) instead.\n",
        ["`xt.reshape(...)`", "`xt.contiguous().view(...)`", "flat = xt.view(4, -1)"],
    ),
    "inplace_modified": (
        TB.replace("loss = criterion(pred, mask)", "loss.backward()")
        + "RuntimeError: one of the variables needed for gradient computation has been modified by an inplace "
        "operation: [torch.FloatTensor [4, 8]], which is output 0 of ReluBackward0, is at version 2; expected "
        "version 1 instead.\n",
        ["shape [4, 8]", "ReluBackward0", "`relu` produced it or wrote it last", "version 2, backward expected 1", "what `relu` returned"],
    ),
    "backward_twice": (
        TB.replace("loss = criterion(pred, mask)", "loss.backward()")
        + "RuntimeError: Trying to backward through the graph a second time (or directly access saved tensors after "
        "they have already been freed).\n",
        ["`loss.backward()`", "`hidden = hidden.detach()`", "`running_loss += loss.item()`", "retain_graph=True"],
    ),
    "no_grad_fn": (
        TB.replace("loss = criterion(pred, mask)", "total.backward()")
        + "RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn\n",
        ["`total` does not require grad", "torch.no_grad()", "`total.requires_grad = True` silences"],
    ),
    "collate_size_mismatch": (
        TB.replace("loss = criterion(pred, mask)", "for images, labels in loader:")
        + "RuntimeError: stack expects each tensor to be equal size, but got [3, 224, 224] at entry 0 and "
        "[3, 200, 300] at entry 1\n",
        ["entry 0 is [3, 224, 224] and entry 1 is [3, 200, 300]", "(they differ in dims 1 and 2)", "transforms.Resize"],
    ),
    # the job, not the kernel
    "host_oom": (
        TB + "numpy.core._exceptions._ArrayMemoryError: Unable to allocate 37.3 GiB for an array with shape (1222000, 4096)\n",
        ["one request for 37.3 GiB", "shape or unit bug", *WHERE],
    ),
    "oom_killed": (
        "[Mon May  6 11:02:17 2024] Out of memory: Killed process 48211 (python) total-vm:98123456kB\n",
        ["process python (pid 48211)", "by the kernel's OOM killer", "SIGKILL", "num_workers"],
    ),
    "dataloader_shm_exhausted": (
        TB
        + "RuntimeError: DataLoader worker (pid 2213) is killed by signal: Bus error. It is possible that dataloader's workers are out of shared memory.\n",
        ["DataLoader worker (pid 2213) died of SIGBUS", "--shm-size", "/dev/shm"],
    ),
    "dataloader_worker_crashed": (
        TB + "RuntimeError: DataLoader worker (pid(s) 2213, 2214) exited unexpectedly\n",
        ["DataLoader worker(s) 2213, 2214 exited unexpectedly", "num_workers=0", "/srv/exp/seg_train.py:217"],
    ),
    "native_crash": (
        "step 12 loss 4.1\n./run.sh: line 3: 4242 Segmentation fault      (core dumped) python seg_train.py\n",
        ["with SIGSEGV (exit 139)", "PYTHONFAULTHANDLER=1"],
    ),
    "import_failure": (
        TB.replace("loss = criterion(pred, mask)", "import apex") + "ModuleNotFoundError: No module named 'apex'\n",
        ["Python cannot import `apex`", 'python -c "import apex"', "import apex"],
    ),
    "checkpoint_unreadable": (
        TB + "RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory\n",
        ["truncated or corrupt", "failed finding central directory", *WHERE],
    ),
    "state_dict_mismatch": (
        TB + "RuntimeError: Error(s) in loading state_dict for SegNet:\n\tsize mismatch for head.weight: copying a param with shape "
        "torch.Size([21, 64, 1, 1]) from checkpoint, the shape in current model is torch.Size([9, 64, 1, 1]).\n",
        ["`SegNet`", "`head.weight` is [21, 64, 1, 1] in the checkpoint and [9, 64, 1, 1] in the model", 'state.pop("head.weight")'],
    ),
    "disk_full": (
        TB + "OSError: [Errno 28] No space left on device: '/scratch/run7/ckpt_12.pt'\n",
        ["`/scratch/run7/ckpt_12.pt`", "the disk is full", "df -h /scratch/run7/ckpt_12.pt"],
    ),
    "file_not_found": (
        TB + "FileNotFoundError: [Errno 2] No such file or directory: 'data/masks/0042.png'\n",
        ["`data/masks/0042.png` does not exist", "is relative", "ls -l data/masks/0042.png", *WHERE],
    ),
    "permission_denied": (
        TB + "PermissionError: [Errno 13] Permission denied: '/ckpt/last.pt'\n",
        ["The job may not open `/ckpt/last.pt`", "ls -ld /ckpt/last.pt", *WHERE],
    ),
    "zero_division": (
        TB.replace("loss = criterion(pred, mask)", "dice = inter / len(val_loader)") + "ZeroDivisionError: division by zero\n",
        ["(`division by zero`)", "dice = inter / len(val_loader)", "drop_last"],
    ),
    "job_terminated": (
        "slurmstepd: error: *** JOB 7781234 ON gpu-node-07 CANCELLED AT 2024-05-06T11:02:17 DUE TO PREEMPTION ***\n",
        ["Slurm cancelled job 7781234 on gpu-node-07 due to preemption", "sacct -j 7781234", "--requeue"],
    ),
    "gpu_hardware_fault": (
        "[ 8812.22] NVRM: Xid (PCI:0000:3b:00): 79, pid=48211, name=python, GPU has fallen off the bus.\n",
        ["Xid 79 on the GPU at PCI:0000:3b:00", "fallen off the bus", "--exclude=NODE"],
    ),
}

UNFILLED = re.compile(r"``|` `|\bat :|(?<!=)\bNone\b|\{\{|\{%|\s\(\s*\)|\s\[\s*\]|\bin block ,|\bfor dimension  ")


def test_every_rule_has_a_guide_case() -> None:
    assert {r.id for r in load_kb().rules} == set(CASES)


@pytest.mark.parametrize("rule", sorted(CASES))
def test_guide_quotes_the_incidents_values(rule: str) -> None:
    log, expected = CASES[rule]
    inc = diagnose_text(log).root
    assert inc is not None and inc.rule == rule
    text = "\n".join(inc.guide.values())
    missing = [value for value in expected if value not in text]
    assert not missing, f"{rule}: guide lacks {missing}:\n{text}"
    assert not UNFILLED.search(text), f"{rule}: unfilled placeholder {UNFILLED.search(text)!r} in:\n{text}"
    assert "template error" not in text


def test_nll_guide_follows_the_failing_lines_values() -> None:
    """diagnose(exc) knows C from the scores and the target range: 1-based labels are named as such."""
    torch = pytest.importorskip("torch")
    from kbdebug import diagnose

    scores, labels = torch.randn(1, 5, 2), torch.tensor([[1, 5]])
    try:
        torch.nn.functional.cross_entropy(scores, labels)
    except IndexError as exc:
        inc = diagnose(exc).root
    assert inc is not None and inc.facts["num_classes"] == 5
    assert "outside `[0, 5)`" in inc.guide["what"]
    assert "`labels` runs 1..5 for 5 classes: the labels look 1-based" in inc.guide["why"]
    assert inc.guide["fix"].startswith("Shift the labels: `labels - 1` (they run 1..5)")


def test_guard_errors_fill_the_guides_with_the_bad_value() -> None:
    torch = pytest.importorskip("torch")
    import kbdebug

    emb, ids = torch.nn.Embedding(30, 4), torch.tensor([[2, 41, 7]])
    try:
        with kbdebug.guard():
            emb(ids)
    except kbdebug.KbdebugError as exc:
        inc = kbdebug.diagnose(exc).root
    assert inc is not None and inc.rule == "embedding_index_oob"
    assert inc.guide["fix"].startswith("Id 41 needs at least 42 rows and the table has 30")
    scores, target = torch.randn(3, 6), torch.tensor([0, 255, 2])
    try:
        with kbdebug.guard():
            torch.nn.functional.cross_entropy(scores, target)
    except kbdebug.KbdebugError as exc:
        inc = kbdebug.diagnose(exc).root
    assert inc is not None and "outside `[0, 6)`" in inc.guide["what"]
    assert inc.guide["fix"].startswith("Pass the ignore value: `nn.CrossEntropyLoss(ignore_index=255)`")


def test_after_a_kernel_assert_the_users_line_is_where_it_surfaced() -> None:
    log = (
        "/pt/aten/src/ATen/native/cuda/Loss.cu:242: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [3,0,0] "
        "Assertion `t >= 0 && t < n_classes` failed.\n"
        + TB.replace("loss = criterion(pred, mask)", "total += loss.item()")
        + "RuntimeError: CUDA error: device-side assert triggered\n"
    )
    inc = diagnose_text(log).root
    assert inc is not None and inc.rule == "nll_target_out_of_range"
    assert (
        "it surfaced at `/srv/exp/seg_train.py:217` (`total += loss.item()`), a later synchronising call, not the failing op"
        in inc.guide["what"]
    )


@pytest.mark.parametrize(
    ("message", "code"),
    [
        ("Input contains NaN.", "auc = roc_auc_score(y_val, probs)"),
        ("Input X contains infinity or a value too large for dtype('float64').", "X = scaler.fit_transform(df.values)"),
    ],
)
def test_scikit_learns_input_check_is_about_the_array_not_a_backward_pass(message: str, code: str) -> None:
    """scikit-learn's `Input contains NaN` found NaN or inf in an array it was given: missing values of the data, or
    the predictions of a diverged model; the page says how to count them and to drop or fill them, and gives no
    anomaly-mode or learning-rate advice as the first thing to do."""
    log = f'Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n    {code}\nValueError: {message}\n'
    root = diagnose_text(log).root
    assert root is not None and root.rule == "nan_inf_detected"
    what, confirm, fix = (str(root.guide[k]) for k in ("what", "confirm", "fix"))
    assert "scikit-learn function checked the array" in what and code in what
    assert "np.isnan(X).sum()" in confirm and "set_detect_anomaly" not in confirm
    assert fix.startswith("For data, replace inf by NaN") and "SimpleImputer" in fix


def test_a_model_half_on_the_gpu_given_to_ddp_is_told_to_move_the_whole_model_before_wrapping() -> None:
    """DistributedDataParallel's own check of the module it wraps (`parameters locate in {'cpu', 'cuda'}`) is a device
    mismatch of the model itself: the page lists the parameters left behind and moves the model before wrapping it."""
    log = (
        'Traceback (most recent call last):\n  File "train_ddp.py", line 71, in main\n    model = DDP(model, device_ids=[local_rank])\n'
        "RuntimeError: DistributedDataParallel's input module must be on the same type of devices, but input module parameters "
        "locate in {'cpu', 'cuda'}.\n"
    )
    root = diagnose_text(log).root
    assert root is not None and root.rule == "device_mismatch" and root.facts["module_devices"] == "{'cpu', 'cuda'}"
    assert root.title == "a model on two kinds of device given to DistributedDataParallel"
    assert 'p.device.type == "cpu"' in str(root.guide["confirm"])
    assert str(root.guide["fix"]).startswith("Move the whole model once every layer is built")


def _example(rule: str, name: str) -> str:
    from kbdebug._resources import data_dir

    return (data_dir("knowledge") / rule / "examples" / "positive" / name).read_text(encoding="utf-8")


def test_transformers_own_loss_with_labels_of_another_length_is_told_to_shape_labels_like_input_ids() -> None:
    """A causal LM's loss inside transformers flattens logits and labels per token (16 vs 18 = 2 x 8 vs 2 x 9): the page
    names the labels' shape against input_ids and the collators that pad both, not a batch mix-up."""
    root = diagnose_text(_example("batch_size_mismatch", "causal_lm_labels_longer_than_input_ids.log")).root
    assert root is not None and root.rule == "batch_size_mismatch"
    assert "one row per token" in str(root.guide["why"]) and "(16 and 18)" in str(root.guide["why"])
    assert str(root.guide["fix"]).startswith("Give `labels` the shape of `input_ids`")


def test_a_sequence_past_a_transformers_models_positions_is_told_to_truncate_whatever_op_noticed_it() -> None:
    """BERT notices it expanding its token-type buffer (a broadcast), GPT-2 looking up `wpe` (an index error): both pages
    truncate at tokenization, and neither resizes the vocabulary."""
    for rule, name in (
        ("broadcast_shape_mismatch", "bert_sequence_past_its_token_type_buffer.log"),
        ("embedding_index_oob", "gpt2_sequence_past_wpe.log"),
    ):
        root = diagnose_text(_example(rule, name)).root
        assert root is not None and root.rule == rule
        fix = str(root.guide["fix"])
        assert "truncation=True, max_length=tokenizer.model_max_length" in fix and "resize_token_embeddings" not in fix
