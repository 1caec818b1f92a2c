"""grammars/<format>/derived.json: the grammars' readings shipped with them, so a run with no cache loads only the
grammars of the formats its log holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from lark.exceptions import LarkError

from kbdebug import diagnose_text
from kbdebug._resources import data_dir
from kbdebug.parse import derive, grammar, packaged, parser_cache, sources

ROOT = Path(__file__).resolve().parent.parent
TB_TARGET = 'Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n    loss = F.cross_entropy(out, y)\nIndexError: Target 255 is out of bounds.\n'


def test_the_shipped_readings_are_what_the_grammars_say_now() -> None:
    fresh = derive.packaged_readings()
    assert {p.parent.name for p in fresh} == {p.parent.name for p in data_dir("grammars").glob("*/*.lark")}
    for path, readings in fresh.items():
        shipped = json.loads(path.read_text(encoding="utf-8"))
        assert shipped == json.loads(json.dumps(readings)), f"{path} is stale: run `python -m kbdebug.parse` and commit it"


def test_a_reading_derived_from_other_text_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    name = "traceback"
    grammar_hash, code_hash = packaged.grammar_hash(name), packaged.READINGS
    assert packaged.reading(name, "line_start", grammar_hash, code_hash) == derive._line_start(derive.parser(name))
    assert packaged.reading(name, "line_start", "edited-grammar", code_hash) is None
    assert packaged.reading(name, "line_start", grammar_hash, "edited-code") is None
    texts = packaged.reading(name, "texts", grammar_hash, code_hash)
    assert texts is not None and texts["header"] == frozenset({"Traceback (most recent call last)"})


BUILT = r"""
import sys
import kbdebug.parse.grammar as g
built = []
cached = g.cached
g.cached = lambda name, *args: (built.append(name), cached(name, *args))[1]
from kbdebug.cli.app import main
sys.argv = ["kbdebug", "explain", "--format", "json", sys.argv[1]]
try:
    main()
except SystemExit:
    pass
print("BUILT", " ".join(sorted(built)), file=sys.stderr)
"""


def test_without_a_cache_only_the_grammars_of_the_logs_formats_are_loaded(tmp_path: Path) -> None:
    log = tmp_path / "crash.log"
    log.write_text(
        "/pytorch/aten/src/ATen/native/cuda/NLLLoss2d.cu:103: nll_loss2d_forward_kernel: block: [17,0,0], thread: [96,0,0] Assertion `t >= 0 && t < n_classes` failed.\n"
        "Traceback (most recent call last):\n"
        '  File "/home/user/train.py", line 151, in main\n'
        "    running_loss += loss.item()\n"
        "RuntimeError: CUDA error: device-side assert triggered\n",
        encoding="utf-8",
    )
    env = {**os.environ, "KBDEBUG_NO_CACHE": "1"}
    out = subprocess.run([sys.executable, "-c", BUILT, str(log)], capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    built = set(next(ln for ln in out.stderr.splitlines() if ln.startswith("BUILT")).split()[1:])
    assert '"rule": "nll_target_out_of_range"' in out.stdout
    # the three formats in the log; never sanitizer, NCCL, torchrun's table or OOM
    assert {name.removesuffix("-fast") for name in built} <= {"kernel_assert", "traceback", "cuda_error", "messages"}, built
    assert "traceback-fast" in built
    # every traceback and CUDA error line here is one their LALR readers read: their Earley parsers are not built
    # (not to tell a line's kind, nor to say that the CUDA error's own text is no CUDA error line)
    assert not {"traceback", "cuda_error"} & built, built


def test_a_damaged_file_costs_only_the_time_to_derive(monkeypatch: pytest.MonkeyPatch) -> None:
    name = "traceback"
    grammar_hash, code_hash = packaged.grammar_hash(name), packaged.READINGS
    good = packaged._shipped(name)
    damaged: list[object] = [
        [],
        {"code": code_hash, "grammars": []},
        {"code": code_hash, "grammars": {name: {"grammar": grammar_hash, "readings": {"anchors-start": "x", "texts": 3}}}},
        {"code": code_hash, "grammars": {name: {"grammar": grammar_hash, "readings": {"line_start": ["not", "a", "regex"]}}}},
    ]
    for data in damaged:
        monkeypatch.setattr(packaged, "_shipped", lambda _name, data=data: data)
        for what in ("anchors-start", "texts", "line_start"):
            assert packaged.reading(name, what, grammar_hash, code_hash) is None, (data, what)
    monkeypatch.setattr(packaged, "_shipped", lambda _name: good)
    assert packaged.reading(name, "anchors-start", grammar_hash, code_hash) is not None


def test_data_travel_in_a_wheel_and_not_beside_an_editable_install(tmp_path: Path) -> None:
    """#26: a static force-include made an editable install's `site-packages/kbdebug/` holding only grammars/
    and knowledge/, a second `kbdebug` that could shadow the checkout. hatch_build.py adds them to standard wheels."""
    build = pytest.importorskip("hatchling.build")
    pytest.importorskip("editables")
    import zipfile

    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        wheel = zipfile.ZipFile(tmp_path / "std" / build.build_wheel(str(tmp_path / "std")))
        editable = zipfile.ZipFile(tmp_path / "dev" / build.build_editable(str(tmp_path / "dev")))
    finally:
        os.chdir(cwd)
    names = set(wheel.namelist())
    assert {
        "kbdebug/knowledge/other/rule.toml",
        "kbdebug/knowledge/other/guide.md",
        "kbdebug/knowledge/_phrases.j2",
        "kbdebug/grammars/_common.lark",
        "kbdebug/grammars/traceback/traceback.lark",
        "kbdebug/grammars/traceback/derived.json",
        "kbdebug/grammars/kernel_assert/parsers.json",
        "kbdebug/knowledge/rules.json",
        "kbdebug/knowledge/guides.json",
        "kbdebug/knowledge/guides.code",
        "kbdebug/render/templates/compiled.json",
        "kbdebug/cli/app.py",
    } <= names
    assert not [n for n in editable.namelist() if n.startswith("kbdebug/")]


def test_editing_the_deriving_code_s_text_keeps_the_shipped_readings(tmp_path: Path) -> None:
    """The readings are keyed by the grammar's text and the readings' version, not by the code's text:
    a docstring edited in the deriving code neither hides the shipped file nor makes it stale."""
    import shutil

    for name in ("kbdebug", "grammars", "knowledge"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    derive_py = tmp_path / "kbdebug" / "parse" / "derive.py"
    derive_py.write_text(derive_py.read_text(encoding="utf-8").replace('"""', '"""Edited. ', 1), encoding="utf-8")
    check = (
        "import json\n"
        "from kbdebug.parse import derive, packaged\n"
        "for path, fresh in derive.packaged_readings().items():\n"
        "    assert json.loads(path.read_text(encoding='utf-8')) == json.loads(json.dumps(fresh)), 'stale'\n"
        "assert packaged.reading('traceback', 'line_start', packaged.grammar_hash('traceback'), packaged.READINGS) is not None\n"
        "print('ok')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "KBDEBUG_NO_CACHE": "1"}
    out = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert out.stdout.strip() == "ok", out.stderr[-2000:]


SHIPPED_TABLES = r"""
import json
from kbdebug.parse.grammar import shipped_tables
stale = [str(path) for path, tables in shipped_tables().items() if not path.is_file() or json.loads(path.read_text(encoding="utf-8")) != tables]
print("STALE", *stale)
"""


def test_the_shipped_lalr_tables_are_those_of_the_grammars_now() -> None:
    """Every LALR parser the code asks for is shipped in its format folder's parsers.json, built from the grammar's
    text as it is now (`python -m kbdebug.parse` writes them), and no folder ships tables nothing asks for."""
    env = {**os.environ, "KBDEBUG_NO_CACHE": "1"}
    out = subprocess.run([sys.executable, "-c", SHIPPED_TABLES], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("STALE")), None)
    assert line == "STALE", f"{out.stderr[-2000:]}{line}: run `python -m kbdebug.parse` and commit them"
    asked = subprocess.run(
        [
            sys.executable,
            "-c",
            SHIPPED_TABLES.replace('print("STALE", *stale)', "print('FILES', *sorted(str(p) for p in shipped_tables()))"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    files = next(ln for ln in asked.stdout.splitlines() if ln.startswith("FILES")).split()[1:]
    assert sorted(str(p) for p in data_dir("grammars").glob(f"*/{parser_cache.SHIPPED}")) == files
    assert str(data_dir("grammars") / "kernel_assert" / parser_cache.SHIPPED) in files


ASSERT_LINE = "/pytorch/aten/src/ATen/native/cuda/Loss.cu:103: k: block: [0,0,0], thread: [1,0,0] Assertion `t >= 0` failed."


def test_an_edited_grammar_is_built_not_read_from_the_shipped_tables() -> None:
    text, common = sources.source("kernel_assert"), sources.source(sources.COMMON)
    where = sources.folder("kernel_assert")
    assert parser_cache.shipped(where, "kernel_assert:start", parser_cache.table_key(text, common)) is not None
    edited = text.replace("/\\s*Assertion\\s*/", "/\\s*Assert1on\\s*/")
    assert edited != text
    assert parser_cache.shipped(where, "kernel_assert:start", parser_cache.table_key(edited, common)) is None
    assert grammar.lalr(text, "start", "kernel_assert").parse(ASSERT_LINE) is not None
    with pytest.raises(LarkError):  # the edit is what the parser reads: the shipped tables are not used
        grammar.lalr(edited, "start", "kernel_assert").parse(ASSERT_LINE)
    assert grammar.lalr(edited, "start", "kernel_assert").parse(ASSERT_LINE.replace("Assertion", "Assert1on")) is not None


def test_a_shipped_parser_reads_as_a_built_one_and_a_damaged_file_costs_only_the_build(monkeypatch: pytest.MonkeyPatch) -> None:
    text, common = sources.source("kernel_assert"), sources.source(sources.COMMON)
    where, key = sources.folder("kernel_assert"), parser_cache.table_key(text, common)
    shipped = parser_cache.shipped(where, "kernel_assert:start", key)
    assert shipped is not None and shipped.parse(ASSERT_LINE) == grammar._build_lalr(text, "start").parse(ASSERT_LINE)
    for damaged in (
        {"kernel_assert:start": {"key": key, "tables": {"data": 3}}},
        {"kernel_assert:start": []},
        {"kernel_assert:start": {"key": key}},
    ):
        monkeypatch.setattr(parser_cache, "shipped_file", lambda _folder, damaged=damaged: damaged)
        assert parser_cache.shipped(where, "kernel_assert:start", key) is None
        assert grammar.lalr(text, "start", "kernel_assert").parse(ASSERT_LINE) is not None


def test_the_shipped_report_templates_are_what_jinja_makes_of_them_now() -> None:
    """kbdebug/render/templates/compiled.json holds the Python jinja2 generates for each report template (`python -m
    kbdebug.render` writes it), so that a run with no cache does not compile them; a test fails while it is stale."""
    from kbdebug.core.templating import compiled_templates
    from kbdebug.render.environment import COMPILED, _env

    env = _env()
    fresh = compiled_templates(env, sorted(env.list_templates(extensions=["j2"])))
    assert json.loads(COMPILED.read_text(encoding="utf-8")) == fresh, "run `python -m kbdebug.render` and commit compiled.json"


def test_the_shipped_guide_fragments_are_what_jinja_makes_of_the_bundled_rules_now() -> None:
    """knowledge/guides.json holds the Python jinja2 generates for every bundled rule's guide sections, derived
    facts and commands and for the phrases (`python -m kbdebug.render` writes it); a test fails while it is stale."""
    from kbdebug.diagnoser.guides import COMPILED_GUIDES, COMPILED_GUIDES_CODE
    from kbdebug.render.__main__ import compiled_guides

    index, code = compiled_guides()
    stale = "knowledge/guides.json or guides.code is stale: run `python -m kbdebug.render` and commit them"
    assert json.loads((data_dir("knowledge") / COMPILED_GUIDES).read_text(encoding="utf-8")) == index, stale
    assert (data_dir("knowledge") / COMPILED_GUIDES_CODE).read_bytes() == code, stale


def test_a_run_with_no_cache_renders_guides_from_the_shipped_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no cache of the user's, a guide fragment's code is the shipped Python (jinja2 does not compile it), and
    it renders as the template does."""
    import jinja2

    from kbdebug.diagnoser import guides

    compiled: list[str] = []
    real = jinja2.Environment.compile

    def counting(self: jinja2.Environment, source: str, *args: object, **kwargs: object) -> object:
        compiled.append(source)
        return real(self, source, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setenv("KBDEBUG_NO_CACHE", "1")
    monkeypatch.setattr(jinja2.Environment, "compile", counting)
    guides._fragment_env.cache_clear()
    guides._template.cache_clear()
    try:
        diag = diagnose_text(TB_TARGET)
        assert diag.root is not None and "255" in str(diag.root.guide["fix"])
        assert compiled == []
    finally:
        guides._fragment_env.cache_clear()
        guides._template.cache_clear()


def test_an_indexed_shipped_file_is_read_where_its_index_points_and_a_damaged_one_costs_only_the_compile(tmp_path: Path) -> None:
    import jinja2

    from kbdebug.core.templating import ShippedTemplates, indexed_templates

    for name, text in (("a.j2", "{{ x }} first"), ("b.j2", "{{ x }} second")):
        (tmp_path / name).write_text(text, encoding="utf-8")
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(tmp_path)), optimized=False)
    index, code = indexed_templates(env, ["a.j2", "b.j2"], "t.code", "<test>")
    assert len(json.dumps(index)) < 600 and code.count(b"second") == 1  # the index holds no code
    (tmp_path / "t.json").write_text(json.dumps(index), encoding="utf-8")
    (tmp_path / "t.code").write_bytes(code.replace(b"second", b"shippd"))  # same length: the offsets hold
    env.bytecode_cache = ShippedTemplates(None, tmp_path / "t.json", env)
    assert env.get_template("b.j2").render(x=1) == "1 shippd"  # the shipped code is what runs
    (tmp_path / "t.code").write_bytes(code[:10])  # cut short: each template is compiled from its text
    damaged = jinja2.Environment(loader=jinja2.FileSystemLoader(str(tmp_path)), optimized=False)
    damaged.bytecode_cache = ShippedTemplates(None, tmp_path / "t.json", damaged)
    assert damaged.get_template("b.j2").render(x=1) == "1 second"


def test_a_shipped_template_is_used_only_for_its_own_text_and_environment(tmp_path: Path) -> None:
    import jinja2

    from kbdebug.core.templating import ShippedTemplates, compiled_templates

    (tmp_path / "t.j2").write_text("{{ x }} shipped", encoding="utf-8")
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(tmp_path)), optimized=False)
    shipped = tmp_path / "compiled.json"
    data = compiled_templates(env, ["t.j2"])
    (entry,) = data["templates"].values()
    entry["python"] = entry["python"].replace("shipped", "from the shipped file")
    shipped.write_text(json.dumps(data), encoding="utf-8")
    env.bytecode_cache = ShippedTemplates(None, shipped, env)
    assert env.get_template("t.j2").render(x=1) == "1 from the shipped file"  # the shipped code is what runs
    (tmp_path / "t.j2").write_text("{{ x }} edited", encoding="utf-8")
    env.cache.clear()
    assert env.get_template("t.j2").render(x=1) == "1 edited"  # another text: compiled from the template
    other = jinja2.Environment(loader=jinja2.FileSystemLoader(str(tmp_path)), optimized=False, trim_blocks=True)
    (tmp_path / "t.j2").write_text("{{ x }} shipped", encoding="utf-8")
    other.bytecode_cache = ShippedTemplates(None, shipped, other)
    assert other.get_template("t.j2").render(x=1) == "1 shipped"  # another environment: compiled from the template
    shipped.write_text("{not json", encoding="utf-8")
    damaged = jinja2.Environment(loader=jinja2.FileSystemLoader(str(tmp_path)), optimized=False)
    damaged.bytecode_cache = ShippedTemplates(None, shipped, damaged)
    assert damaged.get_template("t.j2").render(x=1) == "1 shipped"
