"""Each grammar reads the lines of its folder's cases (`grammars/<format>/cases.toml`), one or more for every
alternative of its `start` rule; and what the readers make of whole excerpts."""

from __future__ import annotations

import contextlib
import pickle
import re
from pathlib import Path

import pytest
from grammar_cases import CASES
from lark import Lark, Tree
from lark.exceptions import LarkError

from kbdebug.parse.derive import templates
from kbdebug.parse.grammar import build, earley_fallback, fast_parser, first_alt, parser
from kbdebug.parse.lines import lalr_reading, parse
from kbdebug.parse.parser_cache import Literal, dumps, terminal
from kbdebug.parse.registry import formats
from kbdebug.parse.sources import directive, files, names, source

MESSAGES = {kind: line for g, kind, line in CASES if g == "messages"}


@pytest.mark.parametrize(("grammar", "alt", "line"), CASES)
def test_grammar_alternative(grammar: str, alt: str, line: str) -> None:
    tree = parse(grammar, line)
    assert tree is not None, line
    # the line kind is the alternative of `start`, or a rule under it (a sanitizer error under its check)
    assert alt in (first_alt(tree).data, first_alt(first_alt(tree)).data)


@pytest.mark.parametrize("grammar", names())
def test_every_line_kind_of_every_grammar_has_a_case(grammar: str) -> None:
    """A grammar's kinds are the alternatives of its `start` (a sanitizer error sits under its check's rule)."""
    seen: set[str] = set()
    for g, _, line in CASES:
        if g == grammar and (tree := parse(g, line)) is not None:
            seen |= {str(c.data) for c in tree.children if isinstance(c, Tree)} | {str(first_alt(first_alt(tree)).data)}
    assert templates(grammar) <= seen, f"{files()[grammar]}: no case in cases.toml for {sorted(templates(grammar) - seen)}"


def test_every_format_folder_has_its_reader_and_cases() -> None:
    folders = {p.parent.name for name, p in files().items() if name != "_common"}
    assert {f.name for f in formats()} == folders
    assert all((files()[f.grammars[0]].parent / "cases.toml").is_file() for f in formats())


@pytest.mark.parametrize("grammar", names())
def test_non_matching_text_gives_none(grammar: str) -> None:
    assert parse(grammar, "Epoch 3: 41%|####      | 412/1000 [02:11<03:07, loss=0.43]") is None


@pytest.mark.parametrize(("template", "text"), [(kind, line) for g, kind, line in CASES if g == "messages"])
def test_every_template_is_found_where_it_starts(template: str, text: str) -> None:
    """The anchors derived from messages.lark find each template's start, inside a longer line too: every case,
    so a template's every wording (each branch of a choice inside its text) has an anchor."""
    from kbdebug.parse.derive import anchors

    line = "RuntimeError: " + text
    found = [first_alt(tree).data for s in anchors("messages").starts(line) if (tree := parse("messages", line[s:]))]
    assert template in found[:1] or (found and found[0] == template), (template, found)


def test_oom_sentences_are_figures_not_rest() -> None:
    """Every sentence of the 2.x wording is read into its field, where REST could have taken them all."""
    from kbdebug.parse.regions import parse_text

    line = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity of 23.65 GiB "
        "of which 1.20 GiB is free. Process 77 has 3.00 GiB memory in use. Including non-PyTorch memory, this process has "
        "22.10 GiB memory in use. 10.00 GiB allowed; Of the allocated memory 20.10 GiB is allocated by PyTorch, with 1.00 GiB "
        "allocated in private pools (e.g., CUDA Graphs), and 1.50 GiB is reserved by PyTorch but unallocated. If reserved"
    )
    (oom,) = [r for r in parse_text(line) if r.kind == "oom"]
    assert oom.model_dump(include={"exc_type", "gpu_index", "total_capacity", "free", "process_memory_in_use", "allowed"}) == {
        "exc_type": "torch.OutOfMemoryError",
        "gpu_index": 1,
        "total_capacity": "23.65 GiB",
        "free": "1.20 GiB",
        "process_memory_in_use": "22.10 GiB",
        "allowed": "10.00 GiB",
    }
    assert (oom.allocated_by_pytorch, oom.private_pools, oom.reserved_but_unallocated) == ("20.10 GiB", "1.00 GiB", "1.50 GiB")


def test_traceback_lines_become_frames_and_the_exception() -> None:
    """Each traceback line kind gives its fields by the grammar's names (plain, IPython and IPython 8 frames)."""
    from kbdebug.parse.regions import parse_text

    log = "\n".join(
        [
            "Traceback (most recent call last):",
            '  File "/home/u/train.py", line 12, in main',
            "    loss = criterion(out, y)",
            "File ~/nb/model.py:7, in forward(self, x)",
            "Cell In[3], line 5, in step(batch)",
            "ValueError: Expected input batch_size (4) to match target batch_size (8).",
        ]
    )
    (exc,) = [r for r in parse_text(log) if r.kind == "exception"]
    assert [(f.file, f.line, f.function) for f in exc.frames] == [
        ("/home/u/train.py", 12, "main"),
        ("~/nb/model.py", 7, "forward"),
        ("Cell In[3]", 5, "step"),
    ]
    assert exc.frames[0].code == "loss = criterion(out, y)"
    assert (exc.exc_type, exc.message) == ("ValueError", "Expected input batch_size (4) to match target batch_size (8).")


@pytest.mark.parametrize(
    ("line", "at_file", "at_line"),
    [
        (
            "RuntimeError: cuda runtime error (59) : device-side assert triggered at /pytorch/aten/src/THC/x.cu:265",
            "/pytorch/aten/src/THC/x.cu",
            265,
        ),
        ("RuntimeError: cuda runtime error (59) : device-side assert triggered at /pytorc", "/pytorc", None),
        ("RuntimeError: cuda runtime error (59) : device-side assert triggered", None, None),
    ],
)
def test_legacy_cuda_error_cut_anywhere_in_its_location(line: str, at_file: str | None, at_line: int | None) -> None:
    from kbdebug.parse.regions import parse_text

    (err,) = [r for r in parse_text(line) if r.kind == "cuda_error"]
    assert (err.error, err.code, err.at_file, err.at_line) == ("device-side assert triggered", 59, at_file, at_line)


@pytest.mark.parametrize(
    ("text", "function", "file", "line", "pc", "hazards"),
    [
        ("0x00000ae8 in d:\\x/k.cc:148:learn(float)", "learn(float)", "d:\\x/k.cc", 148, "0x00000ae8", None),
        ("0x000302c0 in _ZN4raft [4 hazards]", "_ZN4raft", None, None, "0x000302c0", 4),
        ("void f<T, (int)2>(T*, int)+0x1a0 in /x/k.cuh:118", "void f<T, (int)2>(T*, int)", "/x/k.cuh", 118, "+0x1a0", None),
        ("row_kernel(const uchar4 *, unsigned int *)+0x490", "row_kernel(const uchar4 *, unsigned int *)", None, None, "+0x490", None),
        ("kern:0x1a0 in k.cu:12", "kern", "k.cu", 12, "0x1a0", None),
        ("copy_tile in tile_copy.h:88", "copy_tile", "tile_copy.h", 88, None, None),
        ("void f<float>(float*, int) in /x/k.cu:12 [2 hazards]", "void f<float>(float*, int)", "/x/k.cu", 12, None, 2),
        (
            "/x/k.hpp:689:ns::g(Max const &, int*) (ns::g(Max const &, int*) : 0xff0)",
            "ns::g(Max const &, int*)",
            "/x/k.hpp",
            689,
            None,
            None,
        ),
        ("__cuda_sm70_warpsync (__cuda_sm70_warpsync : 0x30)", "__cuda_sm70_warpsync", None, None, "0x30", None),
        ("something the tools never printed", "something the tools never printed", None, None, None, None),
    ],
)
def test_sanitizer_locations_in_each_layout(
    text: str, function: str, file: str | None, line: int | None, pc: str | None, hazards: int | None
) -> None:
    from kbdebug.parse.readers.sanitizer import location

    frame, count = location(text)
    assert (frame.function, frame.file, frame.line, frame.module, count) == (function, file, line, pc, hazards)


@pytest.mark.parametrize(
    ("code", "pasted", "message"),
    [
        (
            "assert input.size() == target.size(), \"'input' and 'target' must have the same shape\"",
            "AssertionError: 'input' and 'target' must have t",
            "'input' and 'target' must have the same shape",
        ),
        (
            'raise ValueError("labels should have a channel with length equal to one.")',
            "ValueError: labels should have a chan",
            "labels should have a channel with length equal to one.",
        ),
        # values in the message (an f-string, a format) cannot be completed: kept as pasted
        ('assert a.shape == b.shape, f"{a.shape} != {b.shape}"', "AssertionError: torch.Size([2, 3]) != to", "torch.Size([2, 3]) != to"),
        (
            'raise ValueError("Target size ({}) must be".format(t))',
            "ValueError: Target size (torch.Size([1, 3",
            "Target size (torch.Size([1, 3",
        ),
    ],
)
def test_a_message_cut_off_is_completed_from_the_literal_on_its_raising_line(code: str, pasted: str, message: str) -> None:
    from kbdebug.parse.regions import parse_text

    log = f'Traceback (most recent call last):\n  File "/x/m.py", line 9, in f\n    {code}\n{pasted}\n'
    (exc,) = [r for r in parse_text(log) if r.kind == "exception"]
    assert exc.message == message


def test_a_paste_that_lost_its_newlines_is_read_as_the_lines_it_was() -> None:
    """`terminate called ...` and `what():` always start a line of their own: found mid-line, the line was glued."""
    from kbdebug.parse.regions import parse_text

    glued = (
        "[E ProcessGroupNCCL.cpp:460] To avoid data inconsistency, we are taking the entire process down. "
        "terminate called after throwing an instance of 'std::runtime_error' what(): NCCL error: unhandled system error, "
        "NCCL version 2.18.1 Exception raised from checkForNCCLErrors at ../torch/csrc/ProcessGroupNCCL.cpp:1275 (most recent call first):"
    )
    records = parse_text(glued)
    (cpp,) = [r for r in records if r.kind == "cpp_exception"]
    assert (cpp.exc_type, cpp.what, cpp.raised_from, cpp.raised_line) == (
        "std::runtime_error",
        "NCCL error: unhandled system error, NCCL version 2.18.1",
        "checkForNCCLErrors",
        1275,
    )
    assert [r.event for r in records if r.kind == "nccl"] == ["aborted", "failure"]
    # a CUDA error inside an exception's own line is not a glue point
    (exc,) = [r for r in parse_text("RuntimeError: CUDA error: device-side assert triggered") if r.kind == "exception"]
    assert exc.message == "CUDA error: device-side assert triggered"


EARLEY = [g for g in names() if "lalr" not in (directive(source(g), "parser") or [])]


@pytest.mark.parametrize("grammar", EARLEY)
def test_a_parser_read_back_from_the_cache_parses_as_the_one_just_built(grammar: str) -> None:
    """Earley parsers are pickled with their terminals as text (plain text found by startswith, regexes
    compiled on first use): read back, they must give every example line the same tree."""
    built = build(source(grammar))
    read_back = pickle.loads(dumps(built))
    lines = [line for g, _, line in CASES if g == grammar]
    lines.append("Epoch 3: 41%|####      | 412/1000 [02:11<03:07, loss=0.43]")  # and fail alike
    assert len(lines) > 1
    _assert_read_alike(built, read_back, lines)


def _assert_read_alike(kept: Lark, read_back: Lark, lines: list[str]) -> None:
    """Each line gives the same tree from both parsers, or fails in both."""
    for line in lines:
        assert _tree(read_back, line) == _tree(kept, line), line


def _tree(parser: Lark, line: str) -> Tree | None:
    try:
        return parser.parse(line.strip())
    except LarkError:
        return None


def test_pickled_terminals_are_plain_text_or_compiled_on_first_use() -> None:
    plain = terminal(re.escape("is out of bounds"), re.UNICODE)
    assert isinstance(plain, Literal)
    found = plain.match("index 5 is out of bounds", 8)
    assert found is not None and (found.group(0), found.start(), found.end()) == ("is out of bounds", 8, 24)
    assert plain.match("index 5 is out of bounds", 7) is None
    rx = terminal(r"\d+(?:\.\d+)?", re.UNICODE)
    assert not isinstance(rx, Literal)
    m = rx.match("size 12.5 GiB", 5)
    assert m is not None and m.group(0) == "12.5"
    assert rx.groups == 0  # anything else asked of it is the compiled pattern's
    assert plain.match("index 5 is out of bounds", 8, 20) is None  # endpos, as re has it
    assert not isinstance(terminal(re.escape("Error"), re.UNICODE | re.IGNORECASE), Literal)


def test_a_warning_s_message_never_takes_a_line_that_only_starts_like_a_traceback_s() -> None:
    """c10's `Exception raised from F at FILE:LINE` starts with an exception's name but is no exception line: it
    belongs to the C++ block, not to the warning printed long before it."""
    from kbdebug.parse.regions import parse_text

    log = (
        "/x/torch/utils/data/dataloader.py:557: UserWarning: This DataLoader will create 8 worker processes in total.\n"
        "  warnings.warn(_create_warning_msg(\n"
        "terminate called after throwing an instance of 'c10::Error'\n"
        "  what():  CUDA error: an illegal memory access was encountered\n"
        "Exception raised from c10_cuda_check_implementation at ../c10/cuda/CUDAException.cpp:44 (most recent call first):\n"
    )
    records = parse_text(log)
    (warning,) = [r for r in records if r.kind == "exception"]
    assert "Exception raised" not in warning.message
    (cpp,) = [r for r in records if r.kind == "cpp_exception"]
    assert (cpp.raised_from, cpp.raised_line) == ("c10_cuda_check_implementation", 44)


def _example_lines() -> list[str]:
    """Every line of every rule example, as the grammars see it (normalised)."""
    from kbdebug._resources import data_dir
    from kbdebug.normalise import iter_lines
    from kbdebug.parse.needles import needles
    from kbdebug.scan import scan_text

    lines: set[str] = set()
    for path in sorted(data_dir("knowledge").glob("*/examples/*/*.log")):
        lines |= {ln.text.strip() for ln in iter_lines(scan_text(path.read_text(encoding="utf-8", errors="replace"), needles))}
    return sorted(lines - {""})


@pytest.mark.parametrize("grammar", [g for g in names() if fast_parser(g) is not None])
def test_lalr_first_reads_each_line_as_earley_does(grammar: str) -> None:
    """A grammar's `// lalr first:` kinds are read by an LALR parser before the Earley one: wherever the LALR
    parser reads a line (a case, a line of a rule example, or the rest of one from where an anchor says a
    template may start, as the readers feed them), its reading gives the fields the Earley parser's does."""
    from kbdebug.parse.derive import anchors
    from kbdebug.parse.fields import FieldTransformer

    (transformer,) = [t for t in FieldTransformer.__subclasses__() if t.grammar == grammar]
    fast, earley = fast_parser(grammar), parser(grammar)
    assert fast is not None
    read = 0
    whole = [text for g, _, text in CASES if g == grammar] + _example_lines()
    for line in dict.fromkeys(whole + [text[start:] for text in whole for start in anchors(grammar).starts(text)]):
        try:
            tree = Tree("start", lalr_reading(fast, line.strip()).children)
        except LarkError:
            continue
        read += 1
        assert first_alt(tree).data == first_alt(earley.parse(line.strip())).data, line
        assert transformer().transform(tree) == transformer().transform(earley.parse(line.strip())), line
    assert read  # the LALR parser reads some of them: the kinds it lists are its own


@pytest.mark.parametrize("grammar", [g for g in names() if not earley_fallback(g)])
def test_a_grammar_without_earley_fallback_reads_with_lalr_every_line_earley_reads(grammar: str) -> None:
    """`// earley fallback: none`: a line the LALR reader rejects never goes to Earley, so the LALR reader must read
    every line Earley reads: each case, each line of a rule example and of the dev corpus (when present), and the
    rest of each from where an anchor says a template may start, as the readers feed them."""
    from kbdebug.normalise import iter_lines
    from kbdebug.parse.derive import anchors
    from kbdebug.parse.needles import needles
    from kbdebug.scan import scan_text

    fast, earley = fast_parser(grammar), parser(grammar)
    assert fast is not None  # the claim is about the LALR reader of `// lalr first: start`
    corpus = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus" / "dev"
    lines = {
        ln.text.strip() for path in sorted(corpus.glob("*.log")) for ln in iter_lines(scan_text(path.read_text(errors="replace"), needles))
    }
    whole = [text for g, _, text in CASES if g == grammar] + _example_lines() + sorted(lines - {""})
    earley_read = 0
    for line in dict.fromkeys(whole + [text[start:] for text in whole for start in anchors(grammar).starts(text)]):
        line = line.strip()
        try:
            earley.parse(line)
        except LarkError:
            continue
        earley_read += 1
        lalr_reading(fast, line)  # raises where LALR rejects a line of the grammar
    assert earley_read


@pytest.mark.parametrize(
    ("text", "key", "expected"),
    [
        ("Expected all tensors to be on the same device, but found at least two devices, cuda:1 and cuda:0!", "device_b", "cuda:0"),
        (
            "Expected all tensors to be on the same device, but got index is on cpu, different from other tensors on cuda:0 "
            "(when checking argument in method wrapper_CUDA__index_select)",
            "device_b",
            "cuda:0",
        ),
        (
            "The current PyTorch install supports CUDA capabilities sm_37 sm_50 compute_37.",
            "supported_archs",
            ["sm_37", "sm_50", "compute_37"],
        ),
        (
            "Error detected in torch::autograd::CopySlices. Traceback of forward call that caused the error:",
            "backward_function",
            "torch::autograd::CopySlices",
        ),
        ("Error detected in MmBackward0.", "backward_function", "MmBackward0"),
    ],
)
def test_a_message_value_is_read_whole_by_both_parsers(text: str, key: str, expected: object) -> None:
    """A value ends where its token does, not where the rest of the line could begin: `cuda:0` is one device (not
    `cuda` and a REST of `:0`), a build's list of architectures is all of them, a node's name stops before the
    sentence's full stop. The LALR reader, where it reads the line, reads it as the Earley parser does."""
    from kbdebug.parse.lines import parse
    from kbdebug.parse.readers.messages import MessageTree

    fast = fast_parser("messages")
    assert fast is not None
    trees = [parser("messages").parse(text), parse("messages", text)]
    with contextlib.suppress(LarkError):  # `cuda:0!` ending the line: the LALR reader takes `!` for the argument form's
        trees.append(fast.parse(text))
    for tree in trees:
        assert tree is not None
        assert MessageTree().transform(tree)["values"][key] == expected


@pytest.mark.parametrize("grammar", [g for g in names() if fast_parser(g) is not None or "lalr" in (directive(source(g), "parser") or [])])
def test_an_lalr_parser_read_back_from_the_cache_parses_as_the_one_it_was(grammar: str) -> None:
    """LALR parsers are pickled whole (their actions, compared by identity, travel by name): read back, each gives
    every case line and rule example line the tree the parser it was written from gives, and fails alike."""
    from kbdebug.parse.parser_cache import loads

    kept = fast_parser(grammar) or parser(grammar)
    _assert_read_alike(kept, loads(dumps(kept), True), [line for g, _, line in CASES if g == grammar] + _example_lines()[:400])
