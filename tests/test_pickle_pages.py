"""Objects pickle cannot name and scripts that start processes at import: a lambda given to DataLoader workers
started by spawn, a class defined inside a function saved whole with torch.save, a Pool started with no `__main__`
guard. Plain Python errors with no rule of their own: the catch-all's page says what was pickled or spawned, where
to look, and the change that fits the op (module-level functions, saving weights, the guard)."""

from __future__ import annotations

import io

import pytest

torch = pytest.importorskip("torch")

from live_errors import guide, root  # noqa: E402

from kbdebug import diagnose_text  # noqa: E402


def _spawned_workers_with_a_lambda() -> None:
    loader = torch.utils.data.DataLoader(
        [torch.zeros(2)] * 4, batch_size=2, num_workers=1, multiprocessing_context="spawn", collate_fn=lambda b: b
    )
    list(loader)


def _save_a_model_of_a_local_class() -> None:
    class Net(torch.nn.Module):
        pass

    torch.save(Net(), io.BytesIO())


@pytest.mark.filterwarnings("ignore:Got pickle error")
def test_a_lambda_for_spawned_workers_is_moved_to_module_level() -> None:
    inc = root(_spawned_workers_with_a_lambda)
    assert inc.rule == "other" and inc.facts["pickled_object"] == "_spawned_workers_with_a_lambda.<locals>.<lambda>"
    page = guide(inc)
    assert "a lambda has no name at module level" in page and "an object was asked for an attribute" not in page
    assert "Find where `<lambda>` is made: inside `_spawned_workers_with_a_lambda`" in page and "num_workers=0" in page
    assert "functools.partial(collate, pad_id=0)" in page


def test_a_model_saved_whole_is_told_to_save_its_weights() -> None:
    inc = root(_save_a_model_of_a_local_class)
    assert inc.facts["pickled_object"] == "_save_a_model_of_a_local_class.<locals>.Net"
    confirm, fix = str(inc.guide["confirm"]), str(inc.guide["fix"])
    assert fix.startswith("Save the weights, not the object: `torch.save(model.state_dict(), path)`")
    assert "saves a\nwhole object" in confirm or "saves a whole object" in confirm
    assert "num_workers" not in confirm + fix and "collate" not in confirm + fix
    buf = io.BytesIO()
    torch.save(torch.nn.Linear(2, 2).state_dict(), buf)  # the fix, as written, saves


def test_the_older_wording_and_a_pool_without_its_guard() -> None:
    old = 'Traceback (most recent call last):\n  File "train.py", line 40, in <module>\n    for batch in loader:\n_pickle.PicklingError: Can\'t pickle <function <lambda> at 0x7f3a2c1b5e50>: attribute lookup <lambda> on __main__ failed\n'
    inc = diagnose_text(old).root
    assert inc is not None and inc.rule == "other" and inc.facts["pickled_object"] == "<lambda>"
    spawned = (
        'Traceback (most recent call last):\n  File "<string>", line 1, in <module>\n'
        '  File "/usr/lib/python3.11/multiprocessing/spawn.py", line 140, in _check_not_importing_main\n'
        "    raise RuntimeError('''\nRuntimeError: \n"
        "        An attempt has been made to start a new process before the\n"
        "        current process has finished its bootstrapping phase.\n"
    )
    inc = diagnose_text(spawned).root
    assert inc is not None and inc.rule == "other"
    assert 'if __name__ == "__main__": main()' in str(inc.guide["fix"])
