"""guard(): for each op whose CUDA kernel asserts, a KbdebugError is raised before torch's own
error, at the calling line, with op, argument, value, position and rule."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import kbdebug  # noqa: E402
from kbdebug import KbdebugError, guard  # noqa: E402
from kbdebug.verify.guard_mode import DispatchGuard  # noqa: E402

# name, call (last line of the lambda is the failing call), rule, argument, bad value, position
CASES: list[tuple[str, Callable[[], object], str, str, object, list[int]]] = [
    (
        "nll_loss",
        lambda: F.nll_loss(torch.randn(4, 10).log_softmax(1), torch.tensor([1, 2, 14, 3])),
        "nll_target_out_of_range",
        "target",
        14,
        [2],
    ),
    (
        "cross_entropy",
        lambda: F.cross_entropy(torch.randn(4, 10), torch.tensor([1, 255, 3, 3])),
        "nll_target_out_of_range",
        "target",
        255,
        [1],
    ),
    (
        "cross_entropy_2d",
        lambda: F.cross_entropy(torch.randn(2, 3, 4, 4), torch.full((2, 4, 4), 3)),
        "nll_target_out_of_range",
        "target",
        3,
        [0, 0, 0],
    ),
    (
        "gather",
        lambda: torch.gather(torch.randn(3, 4), 1, torch.tensor([[0, 4], [1, 1], [2, 2]])),
        "scatter_gather_index_oob",
        "index",
        4,
        [0, 1],
    ),
    ("scatter", lambda: torch.zeros(3, 4).scatter(1, torch.tensor([[0], [9], [1]]), 1.0), "scatter_gather_index_oob", "index", 9, [1, 0]),
    (
        "scatter_",
        lambda: torch.zeros(3, 4).scatter_(0, torch.tensor([[3]]), torch.ones(1, 1)),
        "scatter_gather_index_oob",
        "index",
        3,
        [0, 0],
    ),
    (
        "scatter_add",
        lambda: torch.zeros(3, 4).scatter_add(1, torch.tensor([[-1]]), torch.ones(1, 1)),
        "scatter_gather_index_oob",
        "index",
        -1,
        [0, 0],
    ),
    (
        "scatter_reduce",
        lambda: torch.zeros(3, 4).scatter_reduce(1, torch.tensor([[4]]), torch.ones(1, 1), "amax"),
        "scatter_gather_index_oob",
        "index",
        4,
        [0, 0],
    ),
    ("index_select", lambda: torch.randn(5, 2).index_select(0, torch.tensor([1, 7])), "embedding_index_oob", "index", 7, [1]),
    ("embedding", lambda: torch.nn.Embedding(100, 8)(torch.tensor([[1, 2, 100]])), "embedding_index_oob", "indices", 100, [0, 2]),
    ("index", lambda: torch.randn(5)[torch.tensor([0, 5])], "index_out_of_bounds", "indices[0]", 5, [1]),
    (
        "index_put",
        lambda: torch.zeros(5).index_put_((torch.tensor([6]),), torch.ones(1), accumulate=True),
        "index_out_of_bounds",
        "indices[0]",
        6,
        [0],
    ),
    (
        "setitem",
        lambda: torch.zeros(4, 5).__setitem__((slice(None), torch.tensor([-6])), 1.0),
        "index_out_of_bounds",
        "indices[1]",
        -6,
        [0],
    ),
    (
        "take_along_dim",
        lambda: torch.take_along_dim(torch.randn(3, 4), torch.tensor([[10], [0], [1]]), dim=1),
        "scatter_gather_index_oob",
        "indices",
        10,
        [0, 0],
    ),
    ("one_hot", lambda: F.one_hot(torch.tensor([0, 5]), num_classes=3), "channel_onehot_mismatch", "input", 5, [1]),
    ("multinomial", lambda: torch.multinomial(torch.tensor([0.5, -0.1, 0.6]), 1), "invalid_probability", "input", -0.1, [1]),
    (
        "binary_cross_entropy",
        lambda: F.binary_cross_entropy(torch.tensor([0.5, 2.5]), torch.ones(2)),
        "bce_input_out_of_range",
        "input",
        2.5,
        [1],
    ),
    (
        "bce_target",
        lambda: F.binary_cross_entropy(torch.tensor([0.5, 0.5]), torch.tensor([0.0, 255.0])),
        "bce_input_out_of_range",
        "target",
        255,
        [1],
    ),
    ("bincount", lambda: torch.bincount(torch.tensor([2, -1])), "index_out_of_bounds", "input", -1, [1]),
]


def call_line(fn: Callable[[], object]) -> int:
    return inspect.getsourcelines(fn)[1]


@pytest.mark.parametrize(("name", "fn", "rule", "arg", "value", "pos"), CASES, ids=[c[0] for c in CASES])
def test_guard_raises_first_at_the_callers_line(
    name: str, fn: Callable[[], object], rule: str, arg: str, value: object, pos: list[int]
) -> None:
    with pytest.raises(KbdebugError) as info, guard():
        fn()
    err = info.value
    assert err.rule == rule
    assert err.facts["argument"] == arg
    assert err.facts["bad_value"] == pytest.approx(value)
    assert err.facts["position"] == pos
    assert err.facts["innermost_user_frame"] == f"{__file__}:{call_line(fn)}"
    assert f"[{rule}]" in str(err) and f"{__file__}:{call_line(fn)}" in str(err)
    # the guard fired before torch's own check: no torch error is chained to it
    assert err.__cause__ is None and err.__context__ is None
    diag = kbdebug.diagnose(err)
    assert diag.root.rule == rule and diag.root.facts["innermost_user_frame"] == err.facts["innermost_user_frame"]


def test_without_guard_torch_raises_its_own_error_or_nothing() -> None:
    for name, fn, *_ in CASES:
        if name == "take_along_dim":  # torch wraps silently on CPU: only the guard catches it
            fn()
            continue
        with pytest.raises((RuntimeError, IndexError, ValueError)) as info:
            fn()
        assert not isinstance(info.value, KbdebugError), name


def test_ignore_index_is_honoured() -> None:
    with guard():
        loss = F.cross_entropy(torch.randn(4, 10), torch.tensor([1, 255, 3, 255]), ignore_index=255)
    assert torch.isfinite(loss)


def test_good_calls_pass_through_with_equal_results() -> None:
    torch.manual_seed(0)
    x, idx = torch.randn(4, 6, requires_grad=True), torch.tensor([[0, 5], [1, 1], [2, 3], [5, 0]])
    plain = torch.gather(x, 1, idx).sum() + F.cross_entropy(x, torch.tensor([0, 1, 2, 5]))
    plain.backward()
    grad = x.grad.clone()
    x.grad = None
    with guard():
        guarded = torch.gather(x, 1, idx).sum() + F.cross_entropy(x, torch.tensor([0, 1, 2, 5]))
        guarded.backward()
    assert torch.equal(plain, guarded) and torch.equal(grad, x.grad)


def test_backward_of_nll_is_checked() -> None:
    logp = torch.randn(3, 4).log_softmax(1)
    target = torch.tensor([0, 9, 1])
    with pytest.raises(KbdebugError) as info:
        DispatchGuard.__torch_dispatch__(
            DispatchGuard(),
            torch.ops.aten.nll_loss_backward.default,
            (),
            (torch.tensor(1.0), logp, target, None, 1, -100, torch.tensor(3.0)),
            {},
        )
    assert info.value.facts["op"] == "nll_loss_backward" and info.value.facts["bad_value"] == 9


def test_reports_every_bad_value() -> None:
    with pytest.raises(KbdebugError) as info, guard():
        F.cross_entropy(torch.randn(6, 3), torch.tensor([0, 3, 255, 1, 3, -1]))
    facts = info.value.facts
    assert facts["bad_count"] == 4 and facts["bad_values"] == [-1, 3, 255]
    assert facts["positions"] == [[1], [2], [4], [5]]


@pytest.mark.parametrize("case", ["gather", "nll255", "embedding", "bce_logits"])
def test_gpu_child_script_runs_on_cpu(case: str) -> None:
    """The GPU checks' child script, dry-run on the CPU: same rules, guard at the op's line."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    child = Path(__file__).resolve().parent / "gpu_child.py"
    env = {**os.environ, "KBDEBUG_TEST_DEVICE": "cpu", "PYTHONPATH": str(child.parent.parent)}
    rules = {
        "gather": "scatter_gather_index_oob",
        "nll255": "nll_target_out_of_range",
        "embedding": "embedding_index_oob",
        "bce_logits": "bce_input_out_of_range",
    }
    op_line = next(no for no, text in enumerate(child.read_text().splitlines(), 1) if f"# OP-LINE {case}" in text)
    guarded = subprocess.run([sys.executable, str(child), case, "guard"], capture_output=True, text=True, env=env, timeout=120)
    out = json.loads(guarded.stdout.strip().splitlines()[-1])
    assert out["rule"] == rules[case] and out["facts"]["innermost_user_frame"] == f"{child}:{op_line}"
    diagnosed = subprocess.run([sys.executable, str(child), case, "diagnose"], capture_output=True, text=True, env=env, timeout=120)
    root = json.loads(diagnosed.stdout.strip().splitlines()[-1])["incidents"][0]
    assert root["rule"] == rules[case]
    assert root["facts"]["innermost_user_frame"] == f"{child}:{op_line}"


def test_gpu_child_audit_runs_on_cpu() -> None:
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    child = Path(__file__).resolve().parent / "gpu_child.py"
    env = {**os.environ, "KBDEBUG_TEST_DEVICE": "cpu", "PYTHONPATH": str(child.parent.parent)}
    res = subprocess.run([sys.executable, str(child), "embedding", "audit"], capture_output=True, text=True, env=env, timeout=120)
    assert json.loads(res.stdout.strip().splitlines()[-1]) == {"module": "0", "type": "Embedding"}


def test_every_guarded_op_names_exactly_one_rule() -> None:
    """guard() names its rule from the rules' own `guard_ops`, never from a rule id written in Python."""
    import re

    from kbdebug.kb import load_kb
    from kbdebug.verify import guard_mode

    source = Path(guard_mode.__file__).read_text()
    ops = set(re.findall(r'_(?:nll|dim_index|range|fail|unit)\(\s*\d*,?\s*\d*,?\s*\d*,?\s*"(\w+)"', source))
    ops |= set(re.findall(r'_advanced_index\("(\w+)"\)', source))
    assert {"nll_loss", "gather", "embedding", "index", "multinomial", "binary_cross_entropy", "one_hot"} <= ops
    claims = [op for rule in load_kb().rules for op in rule.guard_ops]
    assert sorted(claims) == sorted(set(claims)), "an op claimed by two rules"
    for op in ops:
        assert guard_mode.rule_for_op(op), f"no rule lists {op!r} in guard_ops"
