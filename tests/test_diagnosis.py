"""Rules, root-cause ordering and facts, on fixtures written for these tests."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kbdebug.api import diagnose_text
from kbdebug.authoring.lint import lint_directory as lint
from kbdebug.kb import RuleFileError, load_kb
from kbdebug.kb.loader import load_rule
from kbdebug.render.words import fix_text

ROOT = Path(__file__).resolve().parent.parent
TB = 'Traceback (most recent call last):\n  File "/home/u/train.py", line 42, in <module>\n    loss = crit(out, y)\n'

RULE_FIXTURES = {
    "index_out_of_bounds": '/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:93: operator(): block: [3,0,0], thread: [5,0,0] Assertion `-sizes[i] <= index && index < sizes[i] && "index out of bounds"` failed.\n',
    "scatter_gather_index_oob": '../aten/src/ATen/native/cuda/ScatterGatherKernel.cu:365: operator(): block: [1,0,0], thread: [2,0,0] Assertion `idx_dim >= 0 && idx_dim < index_size && "index out of bounds"` failed.\n',
    "embedding_index_oob": "/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1553: indexSelectLargeIndex: block: [9,0,0], thread: [0,0,0] Assertion `srcIndex < srcSelectDimSize` failed.\n",
    "nll_target_out_of_range": TB + "IndexError: Target 14 is out of bounds.\n",
    "bce_input_out_of_range": TB + "RuntimeError: all elements of input should be between 0 and 1\n",
    "invalid_probability": "../aten/src/ATen/native/cuda/MultinomialKernel.cu:112: binarySearchForMultinomial: block: [1,0,0], thread: [0,0,0] Assertion `cumdist[size - 1] > static_cast<scalar_t>(0)` failed.\n",
    "other_device_assert": "/x/aten/src/ATen/native/cuda/MaxUnpooling.cu:47: max_unpooling2d_forward_kernel: block: [0,0,0], thread: [1,0,0] Assertion `maxind >= 0 && maxind < outputImageSize` failed.\n",
    "async_error_unlocalized": TB
    + "RuntimeError: CUDA error: device-side assert triggered\nCUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n",
    "channel_onehot_mismatch": TB
    + "AssertionError: ground truth has different shape (torch.Size([4, 1, 96, 96, 96])) from input (torch.Size([4, 14, 96, 96, 96]))\n",
    "broadcast_shape_mismatch": TB.replace("loss = crit(out, y)", "h = feats + pos_emb")
    + "RuntimeError: The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1\n",
    "matmul_shape_mismatch": TB + "RuntimeError: mat1 and mat2 shapes cannot be multiplied (64x512 and 256x10)\n",
    "conv_channel_mismatch": TB
    + "RuntimeError: Given groups=1, weight of size [64, 3, 7, 7], expected input[1, 1, 224, 224] to have 3 channels, but got 1 channels instead\n",
    "batch_size_mismatch": TB + "ValueError: Expected input batch_size (32) to match target batch_size (64).\n",
    "target_shape_mismatch": TB
    + "RuntimeError: only batches of spatial targets supported (3D tensors) but got targets of size: : [4, 1, 96, 96]\n",
    "cuda_oom": TB
    + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.65 GiB of which 1.02 GiB is free.\n",
    "illegal_memory_access": TB + "RuntimeError: CUDA error: an illegal memory access was encountered\n",
    "misaligned_address": TB + "RuntimeError: CUDA error: misaligned address\n",
    "launch_failure": TB + "RuntimeError: CUDA error: invalid configuration argument\n",
    "cublas_failure": TB + "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate(handle)`\n",
    "cudnn_failure": TB + "RuntimeError: cuDNN error: CUDNN_STATUS_MAPPING_ERROR\n",
    "no_kernel_image": TB + "torch.AcceleratorError: CUDA error: no kernel image is available for execution on the device\n",
    "device_mismatch": TB
    + "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!\n",
    "invalid_device": TB + "RuntimeError: CUDA error: invalid device ordinal\n",
    "driver_error": TB + "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU\n",
    "nccl_error": "[rank1]:[E ProcessGroupNCCL.cpp:563] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=BROADCAST, Timeout(ms)=600000) ran for 600213 milliseconds before timing out.\n",
    "deterministic_unsupported": TB
    + "RuntimeError: scatter_add_cuda_kernel does not have a deterministic implementation, but you set 'torch.use_deterministic_algorithms(True)'.\n",
    "nan_inf_detected": TB + "RuntimeError: Function 'LogSoftmaxBackward0' returned nan values in its 0th output.\n",
    "sanitizer_memcheck": "========= Invalid __global__ write of size 4 bytes\n=========     at k(int*)+0x70 in a.cu:12\n=========     by thread (3,0,0) in block (1,0,0)\n=========     Address 0x7f00 is out of bounds\n",
    "sanitizer_racecheck": "========= Error: Race reported between Write access at k()+0x90 in r.cu:41\n=========     and Read access at k()+0x100 in r.cu:51 [508 hazards]\n",
    "sanitizer_initcheck": "========= Uninitialized __global__ memory read of size 4 bytes\n=========     at v(int *)+0x70 in m.cu:41\n=========     by thread (31,0,0) in block (1,0,0)\n",
    "sanitizer_synccheck": "========= Barrier error detected. Divergent thread(s) in warp\n=========     at D(int *, int)+0xf0 in divergence.cu:79\n=========     by thread (37,0,0) in block (0,0,0)\n",
    "other": TB + "KeyError: 'image'\n",
    "dtype_mismatch": TB + "RuntimeError: mat1 and mat2 must have the same dtype, but got Double and Float\n",
    "reshape_size_mismatch": TB + "RuntimeError: shape '[8, 3, 2048]' is invalid for input of size 24576\n",
    "view_not_contiguous": TB
    + "RuntimeError: view size is not compatible with input tensor's size and stride (at least one dimension spans "
    "across two contiguous subspaces). Use .reshape(...) instead.\n",
    "inplace_modified": TB
    + "RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation: "
    "[torch.FloatTensor [4, 8]], which is output 0 of ReluBackward0, is at version 2; expected version 1 instead.\n",
    "backward_twice": TB + "RuntimeError: Trying to backward through the graph a second time (or directly access saved "
    "tensors after they have already been freed).\n",
    "no_grad_fn": TB + "RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn\n",
    "concat_size_mismatch": TB + "RuntimeError: Sizes of tensors must match except in dimension 1. Expected size 25 but got size 24 "
    "for tensor number 1 in the list.\n",
    "config_error": TB + "KeyError: 'Non-existent config key: SOLVER.BASE_LRR'\n",
    "collate_size_mismatch": TB + "RuntimeError: stack expects each tensor to be equal size, but got [3, 224, 224] at "
    "entry 0 and [3, 200, 300] at entry 1\n",
    "host_oom": TB + "RuntimeError: DefaultCPUAllocator: can't allocate memory: you tried to allocate 68719476736 bytes.\n",
    "oom_killed": "[Mon May  6 11:02:17 2024] Out of memory: Killed process 48211 (python) total-vm:98123456kB\n",
    "dataloader_shm_exhausted": TB + "RuntimeError: DataLoader worker (pid 2213) is killed by signal: Bus error.\n",
    "dataloader_worker_crashed": TB + "RuntimeError: DataLoader worker (pid(s) 2213) exited unexpectedly\n",
    "native_crash": "step 12 loss 4.1\nSegmentation fault (core dumped)\n",
    "import_failure": TB + "ModuleNotFoundError: No module named 'apex'\n",
    "checkpoint_unreadable": TB + "RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory\n",
    "state_dict_mismatch": TB + 'RuntimeError: Error(s) in loading state_dict for Net:\n\tMissing key(s) in state_dict: "fc.weight".\n',
    "disk_full": TB + "OSError: [Errno 28] No space left on device\n",
    "file_not_found": TB + "FileNotFoundError: [Errno 2] No such file or directory: 'data/train.csv'\n",
    "permission_denied": TB + "PermissionError: [Errno 13] Permission denied: '/ckpt/last.pt'\n",
    "zero_division": TB + "ZeroDivisionError: division by zero\n",
    "job_terminated": "slurmstepd: error: *** JOB 42 ON n1 CANCELLED AT 2024-05-06T11:02:17 DUE TO TIME LIMIT ***\n",
    "gpu_hardware_fault": "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python, GPU has fallen off the bus.\n",
}


def rule_ids() -> set[str]:
    text = (ROOT.parent / "shared" / "rule-ids.md").read_text() if (ROOT.parent / "shared").is_dir() else ""
    return set(re.findall(r"^\| ([a-z_]+) \| ", text.split("## JSON")[0], re.M)) - {"rule"}


def test_knowledge_base_covers_every_rule_id() -> None:
    ids = rule_ids() or set(RULE_FIXTURES)
    assert {r.id for r in load_kb().rules} == ids == set(RULE_FIXTURES)


@pytest.mark.parametrize(("rule", "log"), sorted(RULE_FIXTURES.items()))
def test_rule_matches_its_fixture(rule: str, log: str) -> None:
    diag = diagnose_text(log)
    assert diag.root is not None and diag.root.rule == rule
    guide = diag.root.guide
    assert set(guide) == {"what", "why", "confirm", "fix"} and all(len(v) > 20 for v in guide.values())
    assert "template error" not in fix_text(diag.root)


def test_facts_from_an_assert_and_its_async_error() -> None:
    log = RULE_FIXTURES["scatter_gather_index_oob"] * 3 + RULE_FIXTURES["async_error_unlocalized"]
    diag = diagnose_text(log)
    assert [i.rule for i in diag.incidents] == ["scatter_gather_index_oob"]
    f = diag.root.facts
    assert (f["kernel_file"], f["kernel_line"], f["first_block"], f["first_thread"]) == (
        "ScatterGatherKernel.cu",
        365,
        [1, 0, 0],
        [2, 0, 0],
    )
    assert f["error_type"] == "RuntimeError" and f["innermost_user_frame"] == "/home/u/train.py:42"
    assert diag.root.consequences[0].rule == "async_error_unlocalized"
    assert "ScatterGatherKernel.cu:365" in diag.root.guide["what"]


def test_async_error_after_the_traceback_still_folds_into_the_assert() -> None:
    log = RULE_FIXTURES["async_error_unlocalized"] + RULE_FIXTURES["embedding_index_oob"]
    assert [i.rule for i in diagnose_text(log).incidents] == ["embedding_index_oob"]


def test_sticky_cublas_error_after_an_assert_is_a_consequence() -> None:
    log = RULE_FIXTURES["nll_target_out_of_range"].split(TB)[0] + RULE_FIXTURES["embedding_index_oob"] + RULE_FIXTURES["cublas_failure"]
    diag = diagnose_text(log)
    assert diag.root.rule == "embedding_index_oob"
    assert "cublas_failure" in [c.rule for c in diag.root.consequences]


def test_first_sanitizer_report_outranks_the_launch_failure() -> None:
    log = RULE_FIXTURES["sanitizer_memcheck"] + (
        '========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" on CUDA API call to cudaStreamSynchronize.\n'
        "RuntimeError: CUDA error: unspecified launch failure\n"
    )
    diag = diagnose_text(log)
    assert [i.rule for i in diag.incidents] == ["sanitizer_memcheck"]
    assert diag.root.facts["kernel_file"] == "a.cu" and diag.root.facts["first_thread"] == [3, 0, 0]


def test_failing_rank_is_root_and_nccl_timeouts_are_consequences() -> None:
    log = (
        RULE_FIXTURES["nccl_error"].replace("Rank 1", "Rank 0").replace("rank1", "rank0")
        + "[rank3]: "
        + RULE_FIXTURES["cuda_oom"].replace("\n", "\n[rank3]: ").rstrip("[rank3]: ")
        + "\n"
        + RULE_FIXTURES["nccl_error"]
    )
    diag = diagnose_text(log)
    assert diag.root.rule == "cuda_oom" and diag.root.facts["rank"] == 3
    assert {c.rule for c in diag.root.consequences} == {"nccl_error"}


def test_illegal_memory_access_is_root_over_cudnn_fallout() -> None:
    log = (
        "cuDNN error: CUDNN_STATUS_INTERNAL_ERROR\nterminate called after throwing an instance of 'c10::Error'\n"
        "  what():  CUDA error: an illegal memory access was encountered (insert_events at /x/c10/cuda/CUDACachingAllocator.cpp:771)\n"
    )
    diag = diagnose_text(log)
    assert diag.root.rule == "illegal_memory_access" and diag.root.facts["error_type"] == "c10::Error"


def test_confidence_reflects_evidence() -> None:
    alone = diagnose_text(RULE_FIXTURES["async_error_unlocalized"]).root.confidence
    assert diagnose_text(RULE_FIXTURES["scatter_gather_index_oob"]).root.confidence > alone
    assert diagnose_text(RULE_FIXTURES["other"]).root.confidence < 0.5


def test_no_error_gives_no_incident() -> None:
    assert diagnose_text("Epoch 1 loss=0.3\nall good\nUserWarning: something minor\n").incidents == []


def test_broken_user_rule_file_is_skipped_and_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bad.toml").write_text(
        'id = "x"\ntitle = "title"\n[[match]]\nkind = "nonsense"\n[guide]\nwhat="0123456789a"\nwhy="0123456789a"\nconfirm="0123456789a"\nfix="0123456789a"\n'
    )
    kb = load_kb([tmp_path])
    assert kb.get("x") is None and kb.get("nll_target_out_of_range") is not None
    assert len(kb.skipped) == 1 and re.search(r"bad\.toml: match\[0\]\.kind: input should be", kb.skipped[0])
    (tmp_path / "bad.toml").write_text("id = [")
    assert "not valid TOML" in load_kb([tmp_path]).skipped[0]
    assert "rule skipped" in capsys.readouterr().err
    with pytest.raises(RuleFileError, match="bad.toml: not valid TOML"):
        load_rule(tmp_path / "bad.toml")
    assert lint(tmp_path) and lint(ROOT / "knowledge") == []


def test_user_rule_directory_adds_and_overrides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "mine.toml").write_text(
        'id = "batch_key_missing"\ntitle = "a batch lacks a key"\npriority = 60\n'
        '[[match]]\nkind = "exception"\nfields = { exc_type = "KeyError", message = "image|label" }\n'
        '[guide]\nwhat = "the batch has no {{ error_message }}"\nwhy = "the dataset returns other keys"\nconfirm = "print batch.keys()"\nfix = "rename the key"\n'
    )
    log = TB + "KeyError: 'image'\n"
    assert diagnose_text(log).root.rule == "other"
    assert diagnose_text(log, kb_dirs=[tmp_path]).root.rule == "batch_key_missing"
    monkeypatch.setenv("KBDEBUG_KNOWLEDGE", str(tmp_path))
    assert diagnose_text(log).root.rule == "batch_key_missing"


def test_edited_rule_is_seen_at_once_through_the_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KBDEBUG_CACHE_DIR", str(tmp_path / "cache"))
    rules = tmp_path / "rules"
    rules.mkdir()
    rule = (
        'id = "batch_key_missing"\ntitle = "TITLE"\npriority = 60\n[[match]]\nkind = "exception"\n'
        'fields = { exc_type = "KeyError" }\n[guide]\nwhat = "WHAT {{ error_type }}"\nwhy = "other keys"\n'
        'confirm = "print batch.keys()"\nfix = "rename the key"\n'
    )
    (rules / "mine.toml").write_text(rule)
    log = TB + "KeyError: 'image'\n"
    first = diagnose_text(log, kb_dirs=[rules]).root
    assert (first.title, first.guide["what"]) == ("TITLE", "WHAT KeyError")
    assert list((tmp_path / "cache").glob("knowledge-*.pickle"))
    (rules / "mine.toml").write_text(rule.replace("TITLE", "NEW TITLE").replace("WHAT {{", "NEW WHAT {{"))
    second = diagnose_text(log, kb_dirs=[rules]).root
    assert (second.title, second.guide["what"]) == ("NEW TITLE", "NEW WHAT KeyError")
    monkeypatch.setenv("KBDEBUG_NO_CACHE", "1")
    assert diagnose_text(log, kb_dirs=[rules]).root.title == "NEW TITLE"


# One line per message wording (old and new PyTorch, FakeTensor, MONAI...): the rule it names
# inside an ordinary traceback.
MESSAGE_RULES = [
    (
        "RuntimeError: Attempting to broadcast a dimension of length 3 at -1! Mismatching argument at index 1 had torch.Size([2, 3]); but expected shape should be broadcastable to [2, 4]",
        "broadcast_shape_mismatch",
    ),
    (
        "RuntimeError: Unhandled FakeTensor Device Propagation for aten.mm.default, found two different devices cuda:0, cpu",
        "device_mismatch",
    ),
    ("RuntimeError: input and target batch or spatial sizes don't match: target [2, 4, 4], input [2, 14, 5, 5]", "target_shape_mismatch"),
    ("ValueError: Expected input batch_size (4) to match target batch_size (3).", "batch_size_mismatch"),
    ("RuntimeError: size mismatch (got input: [4, 10], target: [5])", "batch_size_mismatch"),
    (
        "UserWarning: Found GPU0 Tesla K80 which is of cuda capability 3.7.\n    PyTorch no longer supports this GPU because it is too old.\n    The minimum cuda capability supported by this library is 5.0.",
        "no_kernel_image",
    ),
    (
        "UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 804: forward compatibility was attempted on non supported HW (Triggered internally at ../c10/cuda/CUDAFunctions.cpp:109.)",
        "driver_error",
    ),
    (
        "RuntimeError: Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could this error message be improved?  If so, please report an enhancement request to PyTorch.)",
        "invalid_probability",
    ),
    ("RuntimeError: num_classes should be positive", "channel_onehot_mismatch"),
    ("RuntimeError: Class values must be non-negative.", "channel_onehot_mismatch"),
    ("RuntimeError: GET was unable to find an engine to execute this computation", "cudnn_failure"),
    ("RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`", "cuda_oom"),
    ("RuntimeError: cuDNN error: CUDNN_STATUS_MAPPING_ERROR", "cudnn_failure"),
    (
        "RuntimeError: NCCL communicator was aborted on rank 3.  Original reason for failure was: [Rank 3] Watchdog caught collective operation timeout",
        "nccl_error",
    ),
    (
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:219, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.14.3\nncclUnhandledCudaError: Call to CUDA function failed.",
        "nccl_error",
    ),
    ("RuntimeError: \"nll_loss_forward_reduce_cuda_kernel_2d_index\" not implemented for 'Int'", "target_shape_mismatch"),
    ("RuntimeError: CUDA error: an illegal instruction was encountered", "launch_failure"),
    ("RuntimeError: CUDA error: invalid configuration argument", "launch_failure"),
    ("RuntimeError: CUDA error: out of memory", "cuda_oom"),
    (
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 7.79 GiB total capacity; 6.52 GiB already allocated; 9.50 MiB free; 6.63 GiB reserved in total by PyTorch)",
        "cuda_oom",
    ),
    ("RuntimeError: CUDA driver error: out of memory", "cuda_oom"),
    ("RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable", "invalid_device"),
    (
        "RuntimeError: Expected all tensors to be on the same device, but got mat2 is on cpu, different from other tensors on cuda:0 (when checking argument in method wrapper_CUDA_mm)",
        "device_mismatch",
    ),
    (
        "RuntimeError: Input type (torch.cuda.FloatTensor) and weight type (torch.FloatTensor) should be the same or input should be a MKLDNN tensor and weight is a dense tensor",
        "device_mismatch",
    ),
    ("RuntimeError: Input type (CUDAFloatType) and weight type (CPUFloatType) should be the same", "device_mismatch"),
    (
        "RuntimeError: Expected object of device type cuda but got device type cpu for argument #1 'self' in call to _th_index_select",
        "device_mismatch",
    ),
    ("RuntimeError: CUDA error: unknown error", "other"),
    ("RuntimeError: cuDNN error: CUDNN_STATUS_EXECUTION_FAILED", "cudnn_failure"),
    (
        "RuntimeError: CUDA error: CUBLAS_STATUS_INVALID_VALUE when calling `cublasSgemmStridedBatched( handle, opa, opb, m, n, k, &alpha, a, lda, stridea, b, ldb, strideb, &beta, c, ldc, stridec, num_batches)`",
        "cublas_failure",
    ),
    (
        "RuntimeError: Deterministic behavior was enabled with either `torch.use_deterministic_algorithms(True)` or `at::Context::setDeterministicAlgorithms(true)`, but this operation is not deterministic because it uses CuBLAS and you have CUDA >= 10.2.",
        "deterministic_unsupported",
    ),
    (
        "RuntimeError: adaptive_avg_pool2d_backward_cuda does not have a deterministic implementation, but you set 'torch.use_deterministic_algorithms(True)'.",
        "deterministic_unsupported",
    ),
    ("RuntimeError: Function 'MulBackward0' returned nan values in its 0th output.", "nan_inf_detected"),
    ("RuntimeError: CUDA error: the launch timed out and was terminated", "launch_failure"),
    ("RuntimeError: CUDA error: operation not supported", "other"),
    ("RuntimeError: Given input size: (64x1x1). Calculated output size: (64x0x0). Output size is too small", "other"),
    ("RuntimeError: shape '[-1, 400]' is invalid for input of size 1024", "reshape_size_mismatch"),
    ("RuntimeError: mat1 dim 1 must match mat2 dim 0", "matmul_shape_mismatch"),
    (
        "RuntimeError: size mismatch, m1: [64 x 1024], m2: [512 x 10] at /pytorch/aten/src/THC/generic/THCTensorMathBlas.cu:290",
        "matmul_shape_mismatch",
    ),
    (
        "RuntimeError: Expected 4-dimensional input for 4-dimensional weight [64, 3, 7, 7], but got 3-dimensional input of size [3, 224, 224] instead",
        "conv_channel_mismatch",
    ),
    (
        "RuntimeError: Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: [2, 1, 3, 32, 32]",
        "conv_channel_mismatch",
    ),
    ("ValueError: Expected input batch_size (8) to match target batch_size (16).", "batch_size_mismatch"),
    (
        "RuntimeError: The expanded size of the tensor (3) must match the existing size (4) at non-singleton dimension 1.  Target sizes: [2, 3].  Tensor sizes: [2, 4]",
        "broadcast_shape_mismatch",
    ),
    (
        "RuntimeError: stack expects each tensor to be equal size, but got [3, 224, 224] at entry 0 and [1, 224, 224] at entry 5",
        "collate_size_mismatch",
    ),
    (
        "RuntimeError: Sizes of tensors must match except in dimension 1. Expected size 32 but got size 31 for tensor number 1 in the list.",
        "concat_size_mismatch",
    ),
]


@pytest.mark.parametrize(("text", "rule"), MESSAGE_RULES, ids=[r + ":" + t.split(":", 1)[-1][:40] for t, r in MESSAGE_RULES])
def test_message_wordings_name_their_rule(text: str, rule: str) -> None:
    log = 'Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n    f()\n' + text + "\n"
    diag = diagnose_text(log)
    assert diag.root is not None and diag.root.rule == rule
    assert "{{" not in fix_text(diag.root) and "None" not in diag.root.guide["what"]


# Whole log excerpts of the shapes real reports have: DataLoader re-raises, Windows paths, HIP,
# C++ terminate blocks, ANSI colour inside tqdm lines, rank prefixes, Triton asserts...
WHOLE_LOGS = [
    (
        """---------------------------------------------------------------------------
RuntimeError                              Traceback (most recent call last)
Cell In[7], line 3
      1 model.train()
      2 for x, y in loader:
----> 3     loss = crit(model(x.cuda()), y.cuda())
      4     loss.backward()

File /opt/conda/lib/python3.10/site-packages/torch/nn/modules/module.py:1501, in Module._call_impl(self, *args, **kwargs)
   1497 # If we don't have any hooks, we want to skip the rest of the logic in
-> 1501     return forward_call(*args, **kwargs)

RuntimeError: CUDA error: device-side assert triggered
""",
        "async_error_unlocalized",
        "Cell In[7], line 3",
    ),
    (
        """Traceback (most recent call last):
  File "train.py", line 40, in <module>
    for batch in loader:
  File "/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py", line 1345, in _next_data
    return self._process_data(data)
RuntimeError: Caught RuntimeError in DataLoader worker process 0.
Original Traceback (most recent call last):
  File "/usr/lib/python3/dist-packages/torch/utils/data/_utils/worker.py", line 308, in _worker_loop
    data = fetcher.fetch(index)
  File "/home/u/proj/dataset.py", line 52, in __getitem__
    return torch.stack(imgs)
RuntimeError: stack expects each tensor to be equal size, but got [3, 224, 224] at entry 0 and [1, 224, 224] at entry 5
""",
        "collate_size_mismatch",
        "/home/u/proj/dataset.py:52",
    ),
    (
        """../aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [0,0,0], thread: [64,0,0] Assertion `-sizes[i] <= index && index < sizes[i] && "index out of bounds"` failed.
Traceback (most recent call last):
  File "/content/run.py", line 10, in <module>
    print(out)
RuntimeError: CUDA error: device-side assert triggered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1.
Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.
""",
        "index_out_of_bounds",
        None,
    ),
    (
        """C:\\cb\\pytorch_1000000000000\\work\\aten\\src\\ATen\\native\\cuda\\Loss.cu:242: block: [0,0,0], thread: [1,0,0] Assertion `t >= 0 && t < n_classes` failed.
Traceback (most recent call last):
  File "C:\\Users\\me\\train.py", line 88, in <module>
    loss.backward()
RuntimeError: CUDA error: device-side assert triggered
""",
        "nll_target_out_of_range",
        "C:\\Users\\me\\train.py:88",
    ),
    (
        """RuntimeError: HIP error: invalid device function
HIP kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing AMD_SERIALIZE_KERNEL=3
""",
        "no_kernel_image",
        None,
    ),
    (
        """terminate called after throwing an instance of 'c10::Error'
  what():  CUDA error: an illegal memory access was encountered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
Exception raised from c10_cuda_check_implementation at ../c10/cuda/CUDAException.cpp:44 (most recent call first):
frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x57 (0x7f in /usr/lib/libc10.so)
""",
        "illegal_memory_access",
        None,
    ),
    (
        """/opt/conda/conda-bld/pytorch_1682343995026/work/aten/src/ATen/native/cuda/Indexing.cu:1146: indexSelectLargeIndex: block: [303,0,0], thread: [95,0,0] Assertion `srcIndex < srcSelectDimSize` failed.
""",
        "embedding_index_oob",
        None,
    ),
    (
        """  0%|          | 0/100 [00:00<?, ?it/s]\x1b[31m/pytorch/aten/src/ATen/native/cuda/ScatterGatherKernel.cu:365: operator(): block: [0,0,0], thread: [0,0,0] Assertion `idx_dim >= 0 && idx_dim < index_size && "index out of bounds"` failed.\x1b[0m
""",
        "scatter_gather_index_oob",
        None,
    ),
    (
        """[rank3]: Traceback (most recent call last):
[rank3]:   File "/workspace/train.py", line 210, in <module>
[rank3]:     loss = model(batch)
[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 79.15 GiB of which 1.02 GiB is free.
""",
        "cuda_oom",
        "/workspace/train.py:210",
    ),
    (
        """Traceback (most recent call last):
  File "seg.py", line 12, in <module>
    loss = loss_fn(pred, label)
  File "/usr/local/lib/python3.10/site-packages/monai/losses/dice.py", line 160, in forward
    raise AssertionError(f"ground truth has different shape ({target.shape}) from input ({input.shape})")
AssertionError: ground truth has different shape (torch.Size([2, 1, 96, 96, 96])) from input (torch.Size([2, 14, 96, 96, 96]))
""",
        "channel_onehot_mismatch",
        "seg.py:12",
    ),
    (
        """RuntimeError: CUDA error: device-side assert triggered
Device-side assertions were explicitly omitted for this error check; the error probably arose while initializing the DSA handlers.
""",
        "async_error_unlocalized",
        None,
    ),
    (
        """/usr/local/lib/python3.8/dist-packages/torch/cuda/__init__.py:146: UserWarning:
NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch installation.
The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90.
If you want to use the NVIDIA GeForce RTX 5090 GPU with PyTorch, please check the instructions at https://pytorch.org/get-started/locally/
  warnings.warn(incompatible_device_warn.format(device_name, capability, " ".join(arch_list), device_name))
Traceback (most recent call last):
  File "x.py", line 3, in <module>
    torch.zeros(1).cuda() + 1
RuntimeError: CUDA error: no kernel image is available for execution on the device
""",
        "no_kernel_image",
        None,
    ),
    (
        """Traceback (most recent call last):
  File "t.py", line 9, in <module>
    x = emb(ids)
IndexError: index out of range in self
""",
        "embedding_index_oob",
        "t.py:9",
    ),
    (
        """unknown:0: unknown: block: [0,0,0], thread: [0,0,0] Assertion `index out of bounds: 0 <= tmp4 < 50257` failed.
""",
        "index_out_of_bounds",
        None,
    ),
    (
        """/pytorch/aten/src/ATen/native/cuda/Loss.cu:115: operator(): block: [0,0,0], thread: [3,0,0] Assertion `input_val >= zero && input_val <= one` failed.
""",
        "bce_input_out_of_range",
        None,
    ),
    (
        """/pytorch/aten/src/ATen/native/cuda/MultinomialKernel.cu:112: binarySearchForMultinomial: block: [0,0,0], thread: [1,0,0] Assertion `cumdist[size - 1] > static_cast<scalar_t>(0)` failed.
""",
        "invalid_probability",
        None,
    ),
    (
        """/pytorch/aten/src/ATen/native/cuda/SortingKernel.cu:60: operator(): block: [0,0,0], thread: [0,0,0] Assertion `k >= 1 && k <= slice_size` failed.
""",
        "other_device_assert",
        None,
    ),
]


@pytest.mark.parametrize(("text", "rule", "frame"), WHOLE_LOGS, ids=[f"{r}-{i}" for i, (_, r, _) in enumerate(WHOLE_LOGS)])
def test_whole_log_excerpts(text: str, rule: str, frame: str | None) -> None:
    root = diagnose_text(text).root
    assert root is not None and root.rule == rule
    if frame is not None:
        assert root.facts["innermost_user_frame"] == frame
