"""A plain Python error of an ML script, raised live, gets an `other` page that names the failing object, the
key/index/attribute/name that failed and its value (the dict's keys, the list's length, the call that returned
None), as friendly-traceback does (benchmarks/plain_errors_vs_friendly.py compares the two on these errors)."""

from __future__ import annotations

from pathlib import Path

import pytest
from plain_live_errors import CASES, Case, names_all

from kbdebug import diagnose

# A KeyError on a config dict is the configuration's (rule-ids.md: config_error); its page names the same values.
RULES = {"config_key": "config_error"}


def _page(case: Case) -> tuple[str, dict]:
    with pytest.raises(Exception) as info:
        case.fn()
    inc = diagnose(info.value).incidents[0]
    assert inc.rule == RULES.get(case.name, "other")
    return " ".join(str(inc.guide.get(k, "")) for k in ("what", "why", "confirm", "fix")), inc.facts


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_the_page_names_the_failing_object_member_and_value(case: Case) -> None:
    text, _ = _page(case)
    assert names_all(text, case.names) == [True, True, True], text


def _case(name: str) -> Case:
    return next(c for c in CASES if c.name == name)


def test_a_config_key_names_the_dict_and_its_keys() -> None:
    _, facts = _page(_case("config_key"))
    assert facts["missing_key"] == "'n_workers'" and facts["looked_up_in"] == 'cfg["training"]'
    assert facts["available_keys"] == ["'batch_size'", "'lr'", "'epochs'"] and facts["key_count"] == 3


def test_an_index_past_a_datasets_list_names_its_length_and_the_index() -> None:
    _, facts = _page(_case("dataset_len_index"))
    assert (facts["sequence_name"], facts["sequence_length"], facts["index_value"]) == ("self.labels", 3, 3)


def test_a_none_names_the_call_that_returned_it() -> None:
    text, facts = _page(_case("none_attribute"))
    assert facts["none_from"] == "load_image(path)" and facts["attribute_of"] == "img"
    assert "`load_image(path)`, which returned None" in text


def test_a_workers_reraised_error_explains_the_inner_one() -> None:
    pytest.importorskip("torch")
    text, facts = _page(_case("worker_key"))
    assert facts["error_message"] == "Caught KeyError in DataLoader worker process 0."
    assert (facts["inner_error_type"], facts["inner_error_message"]) == ("KeyError", "'image'")
    assert facts["inner_code"] == 'sample["image"]' and facts["missing_key"] == "'image'"
    assert "the error itself is `KeyError: 'image'`" in text


def test_a_call_is_never_made_to_read_a_value() -> None:
    calls: list[int] = []

    def files() -> list[str]:
        calls.append(1)
        return []

    with pytest.raises(IndexError) as info:
        files()[0]
    calls.clear()
    facts = diagnose(info.value).incidents[0].facts
    assert calls == [] and facts["sequence_name"] == "files()" and facts["sequence_from_call"] is True


def test_a_sample_the_dataset_returned_as_none_is_named_as_that() -> None:
    """default_collate's TypeError names the batch, never the sample: the page says a sample is None and how to
    find it in the Dataset, live and from the printed traceback (a worker's included)."""
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    from kbdebug import diagnose_text

    class Images(torch.utils.data.Dataset):  # type: ignore[misc,type-arg]
        def __len__(self) -> int:
            return 4

        def __getitem__(self, i: int) -> object:
            return None if i == 2 else torch.zeros(3)  # an unreadable image, read as None

    for workers in (0, 1):
        with pytest.raises((TypeError, AttributeError)) as info:  # a worker's collate meets the None in another call
            list(DataLoader(Images(), batch_size=4, num_workers=workers))
        inc = diagnose(info.value).incidents[0]
        text = " ".join(str(inc.guide.get(k, "")) for k in ("what", "why", "confirm", "fix"))
        assert inc.rule == "other" and inc.facts["none_in_batch"] is True, inc.facts
        assert "A sample of the batch is None" in text and "dataset[i] is None" in text
        if not workers:  # torch.stack names the element; a worker's collate sizes the batch first and does not
            assert inc.facts["none_element"] == 2 and "(element 2" in text
    printed = diagnose_text((Path(__file__).parent / "cases" / "plain" / "collate_none_sample.log").read_text()).incidents[0]
    assert printed.rule == "other" and printed.facts["none_element"] == 3
