"""Wordings no corpus log showed, raised live by CPU torch: each must reach its cause through the library's
own message template (grammars/messages) or the rule's match, with the values the guide quotes."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

from live_errors import guide, root  # noqa: E402

from kbdebug import diagnose_text  # noqa: E402


def test_gather_with_float_index_is_a_dtype_mismatch_telling_to_make_it_long() -> None:
    scores = torch.randn(3, 4)
    actions = torch.tensor([[0.0], [1.0], [2.0]])
    inc = root(lambda: scores.gather(1, actions))
    assert inc.rule == "dtype_mismatch"
    assert "idx.long()" in guide(inc)


def test_scatter_of_a_double_source_into_float_is_a_dtype_mismatch() -> None:
    out = torch.zeros(3, 4)
    inc = root(lambda: out.scatter_(1, torch.tensor([[0], [1], [2]]), torch.ones(3, 1, dtype=torch.float64)))
    assert inc.rule == "dtype_mismatch"


def test_unflatten_to_sizes_that_do_not_multiply_up_names_the_dim_and_its_size() -> None:
    q = torch.randn(2, 15)
    inc = root(lambda: q.unflatten(1, (4, 4)))
    assert inc.rule == "reshape_size_mismatch"
    assert "split dim 1, of size 15, into [4, 4], which multiply to 16" in " ".join(guide(inc).split())


def test_optimizer_state_of_other_parameter_groups_is_a_state_dict_mismatch() -> None:
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    saved = torch.optim.SGD([{"params": [model.weight]}, {"params": [model.bias]}], lr=0.1).state_dict()
    inc = root(lambda: optimizer.load_state_dict(saved))
    assert inc.rule == "state_dict_mismatch"
    assert inc.facts["optimizer_groups"] == "has a different number of parameter groups"
    assert "optimizer" in str(inc.guide["fix"])


def test_clip_grad_norm_of_non_finite_gradients_is_nan_inf_with_the_norm_type() -> None:
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    (w * float("inf")).sum().backward()
    inc = root(lambda: torch.nn.utils.clip_grad_norm_([w], 1.0, error_if_nonfinite=True))
    assert inc.rule == "nan_inf_detected"
    assert inc.facts["norm_type"] == 2.0
    assert "clip gradients" not in guide(inc)  # it already clips: that advice is ruled out


def test_integer_one_hot_target_of_the_prediction_shape_is_a_target_dtype_problem() -> None:
    logits = torch.randn(4, 5)
    target = nn.functional.one_hot(torch.tensor([0, 1, 2, 3]), 5)
    inc = root(lambda: F.cross_entropy(logits, target))
    assert inc.rule == "target_shape_mismatch"
    assert "target.argmax(1)" in guide(inc)


def test_empty_checkpoint_read_by_torch_load_is_unreadable(tmp_path: Path) -> None:
    path = tmp_path / "last.pt"
    path.write_bytes(b"")
    inc = root(lambda: torch.load(path))
    assert inc.rule == "checkpoint_unreadable"


def test_torch_save_file_read_by_pickle_load_says_to_use_torch_load(tmp_path: Path) -> None:
    path = tmp_path / "model.pt"
    torch.save({"w": torch.ones(2)}, path)

    def read() -> object:
        with path.open("rb") as fh:
            return pickle.load(fh)

    inc = root(read)
    assert inc.rule == "checkpoint_unreadable"
    assert "instead of `pickle.load`" in str(inc.guide["fix"])


@pytest.mark.parametrize(
    ("line", "rule", "retry"),
    [
        ("=>> PBS: job killed: mem 67108864kb exceeded limit 62914560kb", "oom_killed", "smaller"),
        ("=>> PBS: job killed: walltime 43215 exceeded limit 43200", "job_terminated", "smaller"),
        ("TERM_MEMLIMIT: job killed after reaching LSF memory usage limit.", "oom_killed", "smaller"),
        ("TERM_OWNER: job killed by owner.", "job_terminated", "yes"),
        ("Message: The node was low on resource: memory. Threshold quantity: 100Mi", "oom_killed", "smaller"),
        ("Message: The node was low on resource: ephemeral-storage.", "disk_full", "smaller"),
        ("Job has gone over cgroup memory limit of 32768 megabytes.", "oom_killed", "smaller"),
        ("2025-06-02 03:11:58 WARNING Instance was preempted.", "job_terminated", "yes"),
        ("[rank: 0] Received SIGTERM: 15", "job_terminated", "yes"),
        ("[8123.4] python[401]: segfault at 0 ip 00007f3a2c1b5e10 sp 00007ffd7c2b1a20 error 4 in libc.so.6", "native_crash", "no"),
    ],
)
def test_how_other_schedulers_and_the_kernel_say_a_job_died(line: str, rule: str, retry: str) -> None:
    diag = diagnose_text(f"step 100 loss 0.52\nstep 110 loss 0.51\n{line}\n")
    assert diag.incidents, line
    assert (diag.incidents[0].rule, diag.incidents[0].facts["retry"]) == (rule, retry)


def test_a_job_that_may_be_preempted_is_not_said_to_be() -> None:
    diag = diagnose_text("# resume from the last checkpoint if the instance is preempted\nstep 100 loss 0.5\n")
    assert [i.rule for i in diag.incidents] == []


def test_rays_out_of_memory_error_is_host_memory_not_the_gpu() -> None:
    log = (
        "Traceback (most recent call last):\n"
        '  File "/home/u/sweep.py", line 7, in <module>\n'
        "    ray.get(futures)\n"
        "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\n"
    )
    assert diagnose_text(log).incidents[0].rule == "oom_killed"


def test_a_bare_exception_line_is_read_as_an_exception() -> None:
    log = (
        "Traceback (most recent call last):\n"
        '  File "/code/pretrain.py", line 402, in <module>\n'
        "    engine.step()\n"
        "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.\n"
    )
    inc = diagnose_text(log).incidents[0]
    assert (inc.rule, inc.facts["error_type"]) == ("nan_inf_detected", "Exception")


def test_torch_save_into_a_missing_folder_is_file_not_found_with_a_makedirs_fix(tmp_path: Path) -> None:
    ckpt_dir = tmp_path / "runs" / "exp7"
    inc = root(lambda: torch.save({"w": torch.zeros(1)}, str(ckpt_dir / "epoch1.pt")))
    assert inc.rule == "file_not_found" and inc.facts["path"] == str(ckpt_dir)
    assert inc.title == "the folder a checkpoint is saved into does not exist"
    assert f'os.makedirs("{ckpt_dir}", exist_ok=True)' in guide(inc)
    # a file missing for reading keeps the reading advice
    missing = root(lambda: torch.load(str(ckpt_dir / "epoch1.pt")))
    assert missing.rule == "file_not_found" and "makedirs" not in guide(missing)


def test_the_users_own_stack_of_clips_gets_stack_advice_not_the_dataloaders() -> None:
    def load_clip(frames: list) -> object:
        return torch.stack(frames, dim=0)

    inc = root(lambda: load_clip([torch.zeros(3, 36, 64)] * 2 + [torch.zeros(3, 36, 48)]))
    assert inc.rule == "collate_size_mismatch" and inc.title == "tensors given to torch.stack differ in shape"
    text = " ".join(guide(inc).split())
    assert "entry 0 is [3, 36, 64] and entry 2 is [3, 36, 48] (they differ in dim 2)" in text
    assert "Bring them to one shape before the stack" in text
    assert "collate_fn" not in text and "batch_size=1" not in text and "dataset[" not in text
    # the same message from default_collate keeps the DataLoader's title and advice
    from torch.utils.data import DataLoader

    loader = DataLoader([torch.zeros(3, 8), torch.zeros(3, 9)], batch_size=2)
    batch = root(lambda: next(iter(loader)))
    assert batch.rule == "collate_size_mismatch" and batch.title == "samples of one batch have different sizes (DataLoader collate)"
    assert "batch_size=1" in guide(batch)


def test_a_conv_input_of_the_wrong_rank_says_which_dims_the_conv_takes_and_what_is_missing() -> None:
    conv = nn.Conv2d(3, 8, 3)
    image = torch.randn(3, 32)
    inc = root(lambda: conv(image))
    assert inc.rule == "conv_channel_mismatch" and inc.title == "a convolution's input has the wrong number of dims"
    text = " ".join(guide(inc).split())
    assert "`conv2d` takes `[B, C, H, W]` (4 dims), or `[C, H, W]` without the batch (3): this input has 2 dims" in text
    assert "It has fewer dims than the conv takes" in text and "`x.unsqueeze(1)`" in text
    clip = torch.randn(2, 4, 3, 16, 16)  # frames on a dim of their own
    more = " ".join(guide(root(lambda: conv(clip))).split())
    assert "It has more dims than the conv takes" in more and "`x.flatten(0, 1)`" in more and "`nn.Conv3d`" in more
