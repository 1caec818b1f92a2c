"""Every fact an incident may carry, declared once: its name, its type, what it means and who produces it.

A fact is a value the diagnosis read (a kernel's file, the failing line's tensors, the class count) that a
guide quotes and the JSON carries under `facts`. `Facts` (kbdebug/core/facts/declared.py) is the one
declaration: a TypedDict, so mypy checks each producer's names and types, and `validate_facts` checks them at
run time (tests/test_facts_typed.py runs it over every rule example and the dev corpus). Everything else
derives from it, here:

- a record kind's facts (`kbdebug.records.Record.declared_facts`) are the names whose producers name that kind;
- the context, live and guard vocabularies that `rules lint` checks a guide's variables against
  (kbdebug.authoring.facts) are the names those producers make;
- which producer wins when two set the same fact is `PRECEDENCE`, applied by one function, `merge`.

A rule's own facts (its `facts` templates and its patterns' named groups) are declared in its rule.toml and
are strings; they are not listed here.
"""

from collections.abc import Iterable, Mapping
from functools import cache
from types import UnionType
from typing import TYPE_CHECKING, Any, Final, Literal, Union, get_args, get_origin, get_type_hints, is_typeddict

from kbdebug.core.facts.fact import Fact, Number, Producer, Scalar, Shape

if TYPE_CHECKING:
    from kbdebug.core.facts.declared import Facts, InplaceWrite, ModuleCounts, TensorInfo
else:
    # At run time facts are plain dicts: the declarations (kbdebug.core.facts.declared) are built only when
    # facts are checked or a vocabulary is asked for (`declarations`), not by every diagnosis.
    Facts = InplaceWrite = ModuleCounts = TensorInfo = dict

__all__ = [
    "PRECEDENCE",
    "Fact",
    "Facts",
    "InplaceWrite",
    "ModuleCounts",
    "Number",
    "Producer",
    "Scalar",
    "Shape",
    "TensorInfo",
    "declarations",
    "declared_by",
    "merge",
    "validate_facts",
]


# When two producers set one fact, the first of these that set it wins: what the live frames saw (the exception
# as raised, its user frame) beats what guard() and the printed text said; a record's value beats what the
# caller knows and what the context derives. A rule's own facts come last (kbdebug.diagnoser.guides).
PRECEDENCE: Final[tuple[str, ...]] = ("live", "guard", "records", "match", "caller", "context")


@cache
def declarations() -> dict[str, tuple[Any, Fact]]:
    """Each fact's name -> its type and its declaration."""
    from kbdebug.core.facts.declared import Facts as declared

    out: dict[str, tuple[Any, Fact]] = {}
    for name, hint in get_type_hints(declared, include_extras=True).items():
        base, *meta = get_args(hint)
        fact = next(m for m in meta if isinstance(m, Fact))
        out[name] = (base, fact)
    return out


@cache
def declared_by(*producers: str) -> frozenset[str]:
    """The facts any of `producers` makes (a record kind also makes those every record makes: `records`).
    Kept once asked: each of a rule's matches asks it when the rule is validated."""
    wanted = set(producers)
    if wanted & set(get_args(Producer)) - {"live", "match", "caller", "context", "guard", "kbdebug"}:
        wanted.add("records")
    return frozenset(name for name, (_, fact) in declarations().items() if wanted & set(fact.by))


def merge(fragments: Mapping[str, Mapping[str, Any]], base: Mapping[str, Any] | None = None) -> Facts:
    """One incident's facts from what each producer says (`fragments`, keyed by producer): where two say the
    same fact, the first of `PRECEDENCE` wins; `base` (facts already settled) beats them all."""
    out: dict[str, Any] = dict(base or {})
    for producer in PRECEDENCE:
        for key, value in (fragments.get(producer) or {}).items():
            out.setdefault(key, value)
    return out  # type: ignore[return-value]  # every producer writes declared names (validate_facts)


def _fits(value: Any, tp: Any) -> bool:
    """Whether a value is of a declared type (the subset of typing the declarations use)."""
    origin = get_origin(tp)
    if tp is Any:
        return True
    if tp is type(None):
        return value is None
    if origin is Literal:
        return value in get_args(tp)
    if origin in (UnionType, Union):
        return any(_fits(value, t) for t in get_args(tp))
    if origin is list:
        (inner,) = get_args(tp)
        return isinstance(value, list) and all(_fits(v, inner) for v in value)
    if origin is dict:
        key, inner = get_args(tp)
        return isinstance(value, dict) and all(_fits(k, key) and _fits(v, inner) for k, v in value.items())
    if is_typeddict(tp):
        hints = get_type_hints(tp)
        return isinstance(value, dict) and all(k in hints and _fits(v, hints[k]) for k, v in value.items())
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, tp)


def validate_facts(facts: Mapping[str, Any], own: Iterable[str] = ()) -> list[str]:
    """What is wrong with a set of facts: an undeclared name (a rule's `own` facts are strings it declares
    itself) or a value of the wrong type, one sentence each; empty when they hold."""
    decl = declarations()
    own = set(own)
    problems: list[str] = []
    for name, value in facts.items():
        if name in decl:
            if not _fits(value, decl[name][0]):
                problems.append(f"{name}: {value!r} is not {decl[name][0]}")
        elif name not in own:
            problems.append(f"{name}: not a declared fact")
        elif not isinstance(value, str):
            problems.append(f"{name}: a rule's own fact is a string, not {value!r}")
    return problems
