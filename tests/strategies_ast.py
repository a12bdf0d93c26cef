"""Hypothesis strategies for the front end: random ASTs in the parser's normal form, and query text.

Every AST drawn here is one the parser could have produced, so ``parse_unchecked(format(ast)) == ast``
must hold for all of them (tests/test_format.py). In particular: concatenations never directly
contain concatenations (nor alternations alternations), quantifier texts match their bounds,
literals are non-negative (``-1`` parses as ``Unary('-', 1)``), ``COUNT`` always has an argument.

    identifiers()        unquoted names (never keywords) and quoted names (any text)
    literals()           integer, decimal, string, boolean, null, timestamp and date literals
    intervals()          INTERVAL literals, with ranges such as HOUR TO MINUTE
    expressions()        random expression trees using every expression node
    patterns()           random row patterns: all quantifiers, both greedinesses, alternation,
                         grouping, anchors, exclusion, PERMUTE, empty pattern, absence
    statements()         whole statements with every clause optional
    corpus_queries()     the conformance corpus queries (list of (id, query, case))
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from cep.grammar import ast as A
from cep.grammar.checks import SCALAR_FUNCTIONS
from cep.grammar.errors import Span
from tests.conformance import load_cases

S = Span()


def _keywords() -> frozenset[str]:
    """Every keyword of cep.lark (a word that may lex as a keyword is never drawn as a plain name)."""
    text = (Path(A.__file__).with_name("cep.lark")).read_text(encoding="utf-8")
    return frozenset(re.findall(r'^_?[A-Z_]+: "([A-Z_]+)"i', text, re.MULTILINE))


KEYWORDS = _keywords()
_SPECIAL_CALLS = {"PREV", "NEXT", "FIRST", "LAST", "CLASSIFIER", "MATCH_NUMBER", "MATCH_STATUS", "PROCTIME"}

# ------------------------------------------------------------------------------------------ names

_plain_names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True).filter(lambda n: n.upper() not in KEYWORDS)
_quoted_names = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=8)


@functools.cache  # building a strategy is costly: build each once
def identifiers(quoted: bool | None = None) -> Any:
    plain = _plain_names.map(lambda n: A.Identifier(S, n))
    quoted_ids = _quoted_names.map(lambda n: A.Identifier(S, n, quoted=True))
    if quoted is None:
        return st.one_of(plain, plain, quoted_ids)
    return quoted_ids if quoted else plain


@functools.cache
def alias_names() -> Any:
    """Names after AS: any identifier, and also keywords (`AS match`, `AS partition`)."""
    return st.one_of(identifiers(), st.sampled_from(sorted(KEYWORDS)).map(lambda k: A.Identifier(S, k.lower())))


VARIABLES = tuple(A.Identifier(S, n) for n in ("A", "B", "C", "Last", "down")) + (A.Identifier(S, "!", quoted=True),)
variables = st.sampled_from(VARIABLES)

# --------------------------------------------------------------------------------------- literals


def _decimal_texts() -> Any:
    return st.one_of(
        st.builds(lambda a, b: f"{a}.{b}", st.integers(0, 999), st.integers(0, 999)),
        st.builds(lambda a, e: f"{a}e{e}", st.integers(0, 99), st.integers(-5, 5)),
        st.builds(lambda b: f".{b}", st.integers(0, 99)),
    )


@functools.cache
def literals() -> Any:
    timestamps = st.datetimes(datetime.datetime(1970, 1, 1), datetime.datetime(2100, 1, 1)).map(
        lambda d: d.isoformat(sep=" ")
    )
    return st.one_of(
        st.integers(0, 10**12).map(lambda i: A.Literal(S, "integer", i, str(i))),
        _decimal_texts().map(lambda t: A.Literal(S, "decimal", float(t) if "e" in t else Decimal(t), t)),
        st.text(max_size=10).map(lambda s: A.Literal(S, "string", s, s)),
        st.booleans().map(lambda b: A.Literal(S, "boolean", b, "TRUE" if b else "FALSE")),
        st.just(A.Literal(S, "null", None, "NULL")),
        timestamps.map(lambda t: A.Literal(S, "timestamp", datetime.datetime.fromisoformat(t), t)),
        st.dates().map(lambda d: A.Literal(S, "date", d, d.isoformat())),
    )


@functools.cache
def intervals() -> Any:
    single = st.builds(
        lambda n, unit, neg: A.IntervalLiteral(S, str(n), unit, neg),
        st.integers(0, 1000),
        st.sampled_from(["MILLISECOND", "SECOND", "MINUTE", "HOUR", "DAY"]),
        st.booleans(),
    )
    ranged = st.builds(
        lambda h, m: A.IntervalLiteral(S, f"{h}:{m:02d}", "HOUR TO MINUTE"), st.integers(0, 48), st.integers(0, 59)
    )
    return st.one_of(single, ranged)


# ------------------------------------------------------------------------------------ expressions


@functools.cache
def columns(qualifiers=variables) -> Any:
    return st.builds(lambda q, c: A.ColumnRef(S, q, c), st.one_of(st.none(), qualifiers), identifiers())


@functools.cache
def expressions(max_leaves: int = 12) -> Any:
    leaves = st.one_of(
        literals(),
        literals(),
        columns(),
        columns(),
        intervals(),
        st.just(A.MatchNumber(S)),
        st.just(A.MatchStatus(S)),
        st.just(A.ProcTime(S)),
        st.builds(A.Classifier, st.just(S), st.one_of(st.none(), variables)),
    )
    return st.recursive(leaves, _compound, max_leaves=max_leaves)


def _compound(children: Any) -> Any:  # called once by st.recursive
    lists = st.lists(children, min_size=1, max_size=3).map(tuple)
    semantics = st.sampled_from([None, "RUNNING", "FINAL"])
    aggregate_names = st.sampled_from(["SUM", "AVG", "MIN", "MAX", "ARRAY_AGG", "MAX_BY", "BOOL_OR", "COUNT"])
    return st.one_of(
        st.builds(A.Unary, st.just(S), st.sampled_from(["NOT", "-", "+"]), children),
        st.builds(
            A.Binary,
            st.just(S),
            st.sampled_from(["OR", "AND", "=", "<>", "<", "<=", ">", ">=", "+", "-", "*", "/", "%", "||"]),
            children,
            children,
        ),
        st.builds(A.IsNull, st.just(S), children, st.booleans()),
        st.builds(A.Between, st.just(S), children, children, children, st.booleans()),
        st.builds(A.InList, st.just(S), children, lists, st.booleans()),
        st.builds(A.Like, st.just(S), children, children, st.one_of(st.none(), children), st.booleans()),
        st.builds(
            A.Case,
            st.just(S),
            st.one_of(st.none(), children),
            st.lists(st.builds(A.WhenClause, st.just(S), children, children), min_size=1, max_size=2).map(tuple),
            st.one_of(st.none(), children),
        ),
        st.builds(
            A.Cast,
            st.just(S),
            children,
            st.builds(
                A.TypeName,
                st.just(S),
                st.sampled_from(["INTEGER", "DOUBLE", "VARCHAR", "DECIMAL", "TIMESTAMP", "DATE"]),
                st.lists(st.integers(0, 40), max_size=2).map(tuple),
            ),
        ),
        st.builds(A.ArrayLiteral, st.just(S), st.lists(children, max_size=3).map(tuple)),
        st.builds(A.FunctionCall, st.just(S), st.sampled_from(sorted(SCALAR_FUNCTIONS)), lists, semantics),
        st.builds(A.Aggregate, st.just(S), aggregate_names, lists, st.booleans(), semantics),
        st.builds(
            lambda q, s: A.Aggregate(S, "COUNT", (A.Star(S, q),), semantics=s),
            st.one_of(st.none(), variables),
            semantics,
        ),
        st.builds(
            A.Navigation,
            st.just(S),
            st.sampled_from(["PREV", "NEXT", "FIRST", "LAST"]),
            children,
            st.one_of(st.none(), st.integers(0, 5).map(lambda i: A.Literal(S, "integer", i, str(i)))),
            semantics,
        ),
    )


# --------------------------------------------------------------------------------------- patterns


def _quantifiers() -> Any:
    """(min, max, text) exactly as the parser produces them."""
    bounds = st.integers(0, 20)
    return st.one_of(
        st.sampled_from([(0, None, "*"), (1, None, "+"), (0, 1, "?"), (0, None, "{,}")]),
        bounds.map(lambda n: (n, n, f"{{{n}}}")),
        bounds.map(lambda n: (n, None, f"{{{n},}}")),
        bounds.map(lambda m: (0, m, f"{{,{m}}}")),
        st.tuples(bounds, bounds).map(lambda p: (min(p), max(p), f"{{{min(p)},{max(p)}}}")),
    )


def _concat(items: list) -> A.Pattern:
    flat = []
    for item in items:
        flat.extend(item.items if isinstance(item, A.Concat) else [item])
    return A.Concat(S, tuple(flat))


def _alternation(branches: list) -> A.Pattern:
    flat = []
    for branch in branches:
        flat.extend(branch.alternatives if isinstance(branch, A.Alternation) else [branch])
    return A.Alternation(S, tuple(flat))


@functools.cache
def patterns(max_leaves: int = 10) -> Any:
    leaves = st.one_of(
        variables.map(lambda v: A.PatternVar(S, v)),
        variables.map(lambda v: A.PatternVar(S, v)),
        st.just(A.Empty(S)),
        st.sampled_from([A.Anchor(S, "start"), A.Anchor(S, "end")]),
        variables.map(lambda v: A.Absence(S, v)),
    )

    def compound(children: Any) -> Any:
        return st.one_of(
            st.lists(children, min_size=2, max_size=4).map(_concat),
            st.lists(children, min_size=2, max_size=3).map(_alternation),
            st.builds(lambda t, q, g: A.Quantified(S, t, q[0], q[1], g, q[2]), children, _quantifiers(), st.booleans()),
            children.map(lambda p: A.Exclusion(S, p)),
            st.lists(children, min_size=1, max_size=3).map(lambda items: A.Permute(S, tuple(items))),
        )

    return st.recursive(leaves, compound, max_leaves=max_leaves)


# ------------------------------------------------------------------------------------- statements


def _sort_keys(expr_strategy: Any) -> Any:
    return st.builds(A.SortKey, st.just(S), expr_strategy, st.booleans(), st.sampled_from([None, True, False]))


def _rows_per_match() -> Any:
    return st.one_of(
        st.just(A.RowsPerMatch(S)),
        st.just(A.RowsPerMatch(S, "ONE", explicit=True)),
        st.just(A.RowsPerMatch(S, "ONE", show_timeout=True, explicit=True)),
        st.builds(lambda e: A.RowsPerMatch(S, "ALL_SHOW_EMPTY", explicit=e), st.booleans()),
        st.sampled_from([A.RowsPerMatch(S, "ALL_OMIT_EMPTY"), A.RowsPerMatch(S, "ALL_WITH_UNMATCHED")]),
    )


def _skips() -> Any:
    return st.one_of(
        st.none(),
        st.sampled_from([A.SkipTo(S, "PAST_LAST_ROW"), A.SkipTo(S, "TO_NEXT_ROW")]),
        st.builds(lambda m, v: A.SkipTo(S, m, v), st.sampled_from(["TO_FIRST", "TO_LAST"]), variables),
        # `SKIP TO Last` reads as SKIP TO LAST <next word>: the plain form cannot name FIRST/LAST/NEXT.
        variables.filter(lambda v: v.key not in ("FIRST", "LAST", "NEXT")).map(
            lambda v: A.SkipTo(S, "TO_LAST", v, plain=True)
        ),
    )


@functools.cache
def match_recognizes() -> Any:
    small = expressions(max_leaves=4)
    return st.builds(
        A.MatchRecognize,
        st.just(S),
        partition_by=st.lists(columns(st.none()), max_size=2).map(tuple),
        order_by=st.lists(_sort_keys(st.one_of(columns(st.none()), st.just(A.ProcTime(S)))), max_size=2).map(tuple),
        measures=st.lists(st.builds(A.Measure, st.just(S), small, alias_names()), max_size=3).map(tuple),
        rows_per_match=_rows_per_match(),
        after_match=_skips(),
        pattern=patterns(),
        within=st.one_of(st.none(), intervals()),
        subsets=st.lists(
            st.builds(A.Subset, st.just(S), identifiers(), st.lists(variables, min_size=1, max_size=3).map(tuple)),
            max_size=2,
        ).map(tuple),
        defines=st.lists(st.builds(A.Define, st.just(S), variables, small), max_size=3).map(tuple),
    ).flatmap(
        lambda match: st.sampled_from([(False, False), (True, False), (False, True)]).map(
            lambda seek: dataclasses.replace(match, seek=seek[0], explicit_initial=seek[1])
        )
    )


_ALIAS = A.Identifier(S, "alias_placeholder")  # replaced by the statement's alias once it is drawn
_OUTER = st.one_of(columns(st.just(_ALIAS)), columns(st.none()), literals())
_SELECT_ITEMS = st.lists(
    st.one_of(
        st.just(A.SelectItem(S, A.Star(S))),
        st.builds(A.SelectItem, st.just(S), _OUTER, st.one_of(st.none(), alias_names())),
    ),
    min_size=1,
    max_size=3,
).map(tuple)
_RELATIONS = st.one_of(
    st.lists(_plain_names, min_size=1, max_size=3).map(lambda parts: A.Relation(S, ".".join(parts))),
    # A path is read as written, so one the parser can give never ends in a backslash nor has one before a quote
    # (the string token would read the quote as escaped).
    st.text(min_size=1, max_size=12)
    .filter(lambda p: not p.endswith("\\") and "\\'" not in p)
    .map(lambda p: A.Relation(S, p, is_path=True)),
)


def _with_alias(statement: A.Statement) -> A.Statement:
    def fix(expr):
        if isinstance(expr, A.ColumnRef) and expr.qualifier is _ALIAS:
            return dataclasses.replace(expr, qualifier=statement.alias)
        return expr

    return dataclasses.replace(
        statement,
        select=tuple(dataclasses.replace(item, expr=fix(item.expr)) for item in statement.select),
        order_by=tuple(dataclasses.replace(key, expr=fix(key.expr)) for key in statement.order_by),
    )


def statements() -> Any:
    """Whole statements; outer columns are qualified by the statement's alias (or not at all)."""
    return _STATEMENTS


_STATEMENTS = st.builds(
    A.Statement,
    st.just(S),
    select=_SELECT_ITEMS,
    relation=_RELATIONS,
    match=match_recognizes(),
    alias=st.one_of(st.none(), identifiers()),  # a keyword alias could not qualify columns
    where=st.one_of(st.none(), expressions(max_leaves=4)),
    order_by=st.lists(_sort_keys(_OUTER), max_size=2).map(tuple),
    limit=st.one_of(st.none(), st.integers(0, 10**6)),
).map(_with_alias)


# ----------------------------------------------------------------------------------------- corpus


def corpus_queries() -> list[tuple[str, str, dict]]:
    """(id, query, whole case) for every case of the conformance corpus (tests/conformance_corpus/)."""
    cases = load_cases()
    return [(case["id"], case["query"], case) for case in cases]


def uses_subquery(query: str) -> bool:
    """Cases whose query has a subquery or a CTE (not supported: they must fail with E0107)."""
    return bool(re.search(r"\(\s*SELECT\b|^\s*WITH\b", query, re.IGNORECASE))
