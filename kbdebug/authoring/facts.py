"""Which facts a rule's guide can use: those its matches can produce, read from the code that produces them.

A guide variable is filled from the incident's facts. Those come from
- the records the rule's matches name: each record model says its facts (`Record.facts()` in
  kbdebug/records/), including what it merges from helpers (`shape_facts`) and from the values its
  parser reads (`TorchMessage.values`, filled in kbdebug/parse/);
- the records of the causes folded into it (rules whose `consequence_of` names it, a group of it, or `*`);
- context every incident may carry: the traceback the matcher locates each incident with and that
  `diagnose(exc)` reads live (`PyException`), the context facts of kbdebug/advice.py, what `diagnose(exc)`
  and the matcher set on an incident, and what the renderer adds (`script`);
- for a rule with `guard_ops`, what `kbdebug.guard()` reports;
- the rule itself: its own `facts`, and the named groups of its patterns.

Nothing here lists a fact: the names are read (with `ast`, so the verifier's torch is never imported)
from the code that sets them, so the vocabulary cannot drift from what kbdebug produces.
"""

from __future__ import annotations

import ast
import re
import typing
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from kbdebug import records
from kbdebug._resources import data_dir
from kbdebug.records import PyException

_PACKAGE = Path(__file__).resolve().parent.parent
_IDENT = re.compile(r"^[a-z][a-z0-9_]*$")
# Where an incident's facts are set outside the records, and the name of the mapping each writes them to.
_CONTEXT_SOURCES = (("advice.py", "facts"), ("api.py", "facts"), ("kb/matcher.py", "facts"), ("render/__init__.py", "ctx"))
_GUARD_SOURCE = ("verify/guard_mode.py", "facts")
_PARSERS = "parse/*.py"
_GRAMMARS = data_dir("grammars")


@dataclass
class Vocabulary:
    """Fact names, and patterns for names computed from a value not known in advance (`f"{lib}_status"`)."""

    names: set[str] = field(default_factory=set)
    patterns: list[re.Pattern[str]] = field(default_factory=list)

    def __contains__(self, name: object) -> bool:
        return name in self.names or any(p.match(str(name)) for p in self.patterns)

    def add(self, other: Vocabulary) -> Vocabulary:
        self.names |= other.names
        self.patterns += other.patterns
        return self


@cache
def _tree(relative: str) -> ast.Module | None:
    try:
        return ast.parse((_PACKAGE / relative).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None


def _functions(tree: ast.Module | None) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)} if tree else {}


def _returns_dict(fn: ast.FunctionDef) -> bool:
    return fn.returns is not None and ast.unparse(fn.returns).startswith(("dict", "Dict"))


def _keys(node: ast.expr | None) -> Iterator[str]:
    """The fact names a key expression can evaluate to: its string constants (`"a" if x else "b"`)."""
    for sub in ast.walk(node) if node is not None else ():
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and _IDENT.match(sub.value):
            yield sub.value


def _named(node: ast.expr, mapping: str | None) -> bool:
    """Whether `node` is the mapping facts are written to (`facts`, `inc.facts`); any mapping when None."""
    if mapping is None:
        return True
    return (isinstance(node, ast.Name) and node.id == mapping) or (isinstance(node, ast.Attribute) and node.attr == mapping)


class _Harvest(ast.NodeVisitor):
    """The keys written to a mapping in a body of code: `m["k"] = ...`, `m = {"k": ...}`, `m.update(k=...)`,
    `m.setdefault("k", ...)`, `m |= {...}`; calls to dict-returning functions of the same module merged in
    are read too, and so are f-string keys (`f"{self.library}_status"`, expanded over a Literal field)."""

    def __init__(self, mapping: str | None, functions: dict[str, ast.FunctionDef], literals: dict[str, tuple[str, ...]]) -> None:
        self.mapping, self.functions, self.literals = mapping, functions, literals
        self.found = Vocabulary()
        self.followed: set[str] = set()
        self.spread: set[str] = set()  # dict-valued fields merged whole (`dict(self.values)`)

    def key(self, node: ast.expr) -> None:
        if isinstance(node, ast.JoinedStr):
            self.fstring(node)
        else:
            self.found.names.update(_keys(node))

    def fstring(self, node: ast.JoinedStr) -> None:
        parts: list[list[str]] = [[]]
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts = [p + [re.escape(str(value.value))] for p in parts]
            else:
                inner = value.value if isinstance(value, ast.FormattedValue) else value
                attr = inner.attr if isinstance(inner, ast.Attribute) else None
                choices = self.literals.get(attr or "")
                parts = [p + [re.escape(c)] for p in parts for c in choices] if choices else [p + [r"\w+"] for p in parts]
        for p in parts:
            pattern = "".join(p)
            if r"\w+" in pattern:
                self.found.patterns.append(re.compile(f"^{pattern}$"))
            else:
                self.found.names.add(pattern.replace("\\", ""))

    def merge(self, node: ast.expr | None) -> None:
        """A value merged into the mapping whole: a dict literal, `a | b`, a call of a dict-returning function
        of the module (read in turn), `self._fields("a", "b")` (fields under their own names), `dict(self.values)`."""
        if isinstance(node, ast.Dict):
            self.dict_keys(node)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            self.merge(node.left)
            self.merge(node.right)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "dict" and node.args and isinstance(node.args[0], ast.Attribute):
                self.spread.add(node.args[0].attr)
            target = self.functions.get(node.func.id)
            if target is not None and _returns_dict(target) and node.func.id not in self.followed:
                self.followed.add(node.func.id)
                inner = _Harvest(None, self.functions, self.literals)
                for stmt in target.body:
                    inner.visit(stmt)
                self.found.add(inner.found)
                self.spread |= inner.spread
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
            target = self.functions.get(node.func.attr)
            if node.func.value.id == "self" and target is not None and _returns_dict(target):
                for arg in node.args:
                    self.key(arg)

    def dict_keys(self, node: ast.Dict) -> None:
        for k, v in zip(node.keys, node.values, strict=True):
            if k is not None:
                self.key(k)
            elif self.mapping is None:
                self.merge(v)  # `{**shape_facts(...)}`

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.ctx, ast.Store) and _named(node.value, self.mapping):
            self.key(node.slice)
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        if any(_named(t, self.mapping) for t in node.targets):
            self.merge(node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if _named(node.target, self.mapping):
            self.merge(node.value)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.op, ast.BitOr) and _named(node.target, self.mapping):
            self.merge(node.value)
        self.generic_visit(node)

    def visit_Return(self, node: ast.Return) -> None:
        if self.mapping is None:
            self.merge(node.value)
        self.generic_visit(node)

    def visit_Dict(self, node: ast.Dict) -> None:
        if self.mapping is None:
            self.dict_keys(node)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and _named(func.value, self.mapping):
            if func.attr == "update":
                self.found.names.update(kw.arg for kw in node.keywords if kw.arg)
                for arg in node.args:
                    self.merge(arg)
            elif func.attr == "setdefault" and node.args:
                self.key(node.args[0])
        target = self.functions.get(func.id) if isinstance(func, ast.Name) and self.mapping else None
        if target is not None:  # passed on to a function of the module as its `facts` parameter
            params = [a.arg for a in target.args.args]
            if self.mapping in params and params.index(self.mapping) < len(node.args):
                self.merge(node.args[params.index(self.mapping)])
            for kw in node.keywords:
                if kw.arg == self.mapping:
                    self.merge(kw.value)
                elif kw.arg and target.args.kwarg is not None and target.args.kwarg.arg == self.mapping:
                    self.found.names.add(kw.arg)  # `_range(..., num_classes=c)` into `**facts`
        self.generic_visit(node)


def _harvest(body: Iterable[ast.AST], mapping: str | None, functions: dict[str, ast.FunctionDef], literals=None) -> _Harvest:
    h = _Harvest(mapping, functions, literals or {})
    for node in body:
        h.visit(node)
    return h


def _literal_fields(model: type) -> dict[str, tuple[str, ...]]:
    """A model's fields that hold one of a few strings (`library: Literal["cublas", "cudnn"]`)."""
    out = {}
    for name, info in getattr(model, "model_fields", {}).items():
        if typing.get_origin(info.annotation) is typing.Literal:
            out[name] = tuple(str(a) for a in typing.get_args(info.annotation))
    return out


def _record_models() -> list[type[records.Record]]:
    found: list[type[records.Record]] = []
    todo = [records.Record]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo += cls.__subclasses__()
    return found


@cache
def _reader_keys(model_name: str) -> frozenset[str]:
    """The keys a record's readers can put in its dict-valued field (`TorchMessage.values`): every key the
    modules of kbdebug/parse/ that build the record write to a mapping, and the field rules of the grammars
    they read (see `_grammar_fields`)."""
    names: set[str] = set()
    for path in sorted(_PACKAGE.glob(_PARSERS)):
        tree = _tree(str(path.relative_to(_PACKAGE)))
        builds = tree is not None and any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == model_name for n in ast.walk(tree)
        )
        if tree is None or not builds:
            continue
        names |= _harvest([tree], None, {}).found.names
        grammars = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        for grammar in sorted(grammars & {g.stem for g in _GRAMMARS.glob("*.lark")}):
            names |= _grammar_fields((_GRAMMARS / f"{grammar}.lark").read_text(encoding="utf-8"), tree)
    return frozenset(names)


_RULE = re.compile(r"^[?!]?([a-z][a-z0-9_]*)(?:\.\d+)?\s*:", re.M)


def _grammar_fields(source: str, reader: ast.Module) -> set[str]:
    """A grammar's rules that are values named after themselves (`size_a: INT`): every rule but `start`, the
    templates it lists, and the rules the reader's transformer turns into something else than fields (a
    method of that name returning a list or a shape rather than a mapping)."""
    defined = _RULE.findall(source)
    start = re.search(r"^start\s*:(.*?)(?=^[?!]?[a-z][a-z0-9_]*(?:\.\d+)?\s*:|\Z)", source, re.M | re.S)
    templates = set(re.findall(r"\b[a-z][a-z0-9_]*\b", start.group(1))) if start else set()
    built = {
        f.name
        for f in _functions(reader).values()
        if f.returns is not None and not ast.unparse(f.returns).startswith(("dict", "Dict", "Fields", "Mapping"))
    }
    return set(defined) - templates - built - {"start"}


@cache
def record_facts() -> dict[str, Vocabulary]:
    """Each record kind's facts, read from its model's `facts()` and those of the models it extends."""
    trees = [tree for name in ("records/base.py", "records/__init__.py", "records/job.py") if (tree := _tree(name)) is not None]
    tree = ast.Module(body=[node for t in trees for node in t.body], type_ignores=[])
    functions = _functions(tree)
    shapes = _functions(_tree("shapes.py"))  # helpers records merge in (`shape_facts`)
    classes = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)} if tree else {}
    out: dict[str, Vocabulary] = {}
    for model in _record_models():
        vocab = Vocabulary()
        for cls in model.__mro__:
            node = classes.get(cls.__name__)
            method = next((m for m in node.body if isinstance(m, ast.FunctionDef) and m.name == "facts"), None) if node else None
            if method is None:
                continue
            h = _harvest(method.body, None, {**shapes, **functions}, _literal_fields(model))
            vocab.add(h.found)
            if h.spread:  # `dict(self.values)`: whatever the readers put there
                vocab.names |= _reader_keys(model.__name__)
        kind = model.model_fields["kind"].default if "kind" in model.model_fields else None
        if isinstance(kind, str):
            out[kind] = vocab
    return out


@cache
def context_facts() -> Vocabulary:
    """Facts any incident may carry, whatever its rule: see the module's docstring."""
    vocab = Vocabulary()
    for relative, mapping in _CONTEXT_SOURCES:
        tree = _tree(relative)
        if tree is not None:
            vocab.add(_harvest([tree], mapping, _functions(tree)).found)
    traceback_kind = PyException.model_fields["kind"].default
    return vocab.add(record_facts().get(traceback_kind, Vocabulary()))


@cache
def guard_facts() -> Vocabulary:
    """What `kbdebug.guard()` reports with the error it raises (rules that name `guard_ops`)."""
    tree = _tree(_GUARD_SOURCE[0])
    return _harvest([tree], _GUARD_SOURCE[1], _functions(tree)).found if tree else Vocabulary()


def pattern_groups(data: dict[str, Any]) -> set[str]:
    """The named groups of a rule file's match patterns."""
    names: set[str] = set()
    matches = data.get("match")
    for m in matches if isinstance(matches, list) else []:
        for key in ("fields", "absent"):
            for pattern in (m.get(key) or {}).values() if isinstance(m, dict) and isinstance(m.get(key), dict) else ():
                try:
                    names |= set(re.compile(str(pattern)).groupindex)
                except re.error:
                    continue  # reported by the loader
    return names


def rule_vocabulary(data: dict[str, Any], folds_in: Iterable[str] = ()) -> Vocabulary:
    """The facts a rule file's guide may use: its matches' record kinds, the kinds of the causes folded
    into it (`folds_in`), the context, guard's facts when it names guard ops, its own facts and groups."""
    per_kind = record_facts()
    matches = data.get("match")
    kinds = {str(m.get("kind")) for m in matches if isinstance(m, dict)} if isinstance(matches, list) else set()
    vocab = Vocabulary().add(context_facts())
    for kind in kinds | set(folds_in):
        vocab.add(per_kind.get(kind, Vocabulary()))
    if data.get("guard_ops"):
        vocab.add(guard_facts())
    own = data.get("facts")
    vocab.names |= set(own if isinstance(own, dict) else ()) | pattern_groups(data)
    return vocab
