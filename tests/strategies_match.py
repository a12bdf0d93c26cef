"""Hypothesis strategies for MATCH_RECOGNIZE queries and their input tables.

Used by the property tests that compare the engine (matcher/) with the plain backtracking
reference (tests/reference_matcher.py). Everything is built directly as ``grammar.ast`` values,
so no parser is needed; ``query_texts()`` additionally renders them to SQL when
``grammar.format.format_statement`` exists.

    patterns()           a pattern AST over variables A, B, C, X with every operator
    queries()            a whole Statement: pattern, DEFINE, MEASURES, rows per match, SKIP,
                         optional PARTITION BY part, ORDER BY id, SELECT *
    tables()             lists of row dicts with columns id (1..n, shuffled), value, part
    rows_for(stmt)       tables() (the columns every generated query reads)
    query_texts()        (when grammar.format exists) SQL text of queries()

The small constructors (``var``, ``cat``, ``alt``, ``quant``, ``col``, ``binop``, ``prev``, ...)
are also handy for writing ASTs by hand in tests.
"""

from __future__ import annotations

import functools
from decimal import Decimal
from typing import Any

from hypothesis import strategies as st

from cep.grammar import ast as A
from cep.grammar.errors import Span

S = Span()

VARIABLES = ("A", "B", "C", "X")


# ============================================================================ constructors


def ident(name: str, quoted: bool = False) -> A.Identifier:
    return A.Identifier(S, name, quoted)


# ------------------------------------------------------------------ patterns


def var(name: str, quoted: bool = False) -> A.PatternVar:
    return A.PatternVar(S, ident(name, quoted))


def cat(*items: Any) -> A.Concat:
    """Concatenation; a concatenation nested directly in another is flattened (as the parser does)."""
    flat: list[Any] = []
    for item in items:
        flat.extend(item.items if isinstance(item, A.Concat) else [item])
    return A.Concat(S, tuple(flat))


def alt(*alternatives: Any) -> A.Alternation:
    """Alternation; an alternation nested directly in another is flattened (as the parser does)."""
    flat: list[Any] = []
    for item in alternatives:
        flat.extend(item.alternatives if isinstance(item, A.Alternation) else [item])
    return A.Alternation(S, tuple(flat))


def quant_text(lo: int, hi: int | None) -> str:
    if (lo, hi) == (0, None):
        return "*"
    if (lo, hi) == (1, None):
        return "+"
    if (lo, hi) == (0, 1):
        return "?"
    if hi is None:
        return f"{{{lo},}}"
    if lo == hi:
        return f"{{{lo}}}"
    if lo == 0:
        return f"{{,{hi}}}"
    return f"{{{lo},{hi}}}"


def quant(term: Any, lo: int, hi: int | None, greedy: bool = True) -> A.Quantified:
    return A.Quantified(S, term, lo, hi, greedy, quant_text(lo, hi))


def star(term: Any, greedy: bool = True) -> A.Quantified:
    return quant(term, 0, None, greedy)


def plus(term: Any, greedy: bool = True) -> A.Quantified:
    return quant(term, 1, None, greedy)


def opt(term: Any, greedy: bool = True) -> A.Quantified:
    return quant(term, 0, 1, greedy)


def excl(p: Any) -> A.Exclusion:
    return A.Exclusion(S, p)


def perm(*items: Any) -> A.Permute:
    return A.Permute(S, tuple(items))


def empty() -> A.Empty:
    return A.Empty(S)


def anchor_start() -> A.Anchor:
    return A.Anchor(S, "start")


def anchor_end() -> A.Anchor:
    return A.Anchor(S, "end")


# ------------------------------------------------------------------ expressions


def lit(v: Any) -> A.Literal:
    if v is None:
        return A.Literal(S, "null", None, "NULL")
    if isinstance(v, bool):
        return A.Literal(S, "boolean", v, "TRUE" if v else "FALSE")
    if isinstance(v, int):
        return A.Literal(S, "integer", v, str(v))
    if isinstance(v, (float, Decimal)):
        d = Decimal(str(v))
        return A.Literal(S, "decimal", d, str(d))
    if isinstance(v, str):
        return A.Literal(S, "string", v, v)  # the parser keeps a string's text unquoted
    raise TypeError(v)


def col(name: str, qualifier: str | None = None) -> A.ColumnRef:
    return A.ColumnRef(S, ident(qualifier) if qualifier is not None else None, ident(name))


def binop(op: str, left: Any, right: Any) -> A.Binary:
    return A.Binary(S, op, left, right)


def and_(left: Any, right: Any) -> A.Binary:
    return binop("AND", left, right)


def or_(left: Any, right: Any) -> A.Binary:
    return binop("OR", left, right)


def not_(e: Any) -> A.Unary:
    return A.Unary(S, "NOT", e)


def is_null(e: Any, negated: bool = False) -> A.IsNull:
    return A.IsNull(S, e, negated)


def _offset(n: int | None) -> A.Literal | None:
    return None if n is None else lit(n)


def prev(e: Any, n: int | None = None) -> A.Navigation:
    return A.Navigation(S, "PREV", e, _offset(n))


def next_(e: Any, n: int | None = None) -> A.Navigation:
    return A.Navigation(S, "NEXT", e, _offset(n))


def first(e: Any, n: int | None = None, semantics: str | None = None) -> A.Navigation:
    return A.Navigation(S, "FIRST", e, _offset(n), semantics)


def last(e: Any, n: int | None = None, semantics: str | None = None) -> A.Navigation:
    return A.Navigation(S, "LAST", e, _offset(n), semantics)


def agg(name: str, *args: Any, semantics: str | None = None, distinct: bool = False) -> A.Aggregate:
    return A.Aggregate(S, name.upper(), tuple(args), distinct, semantics)


def count_star(qualifier: str | None = None, semantics: str | None = None) -> A.Aggregate:
    return agg("COUNT", A.Star(S, ident(qualifier) if qualifier else None), semantics=semantics)


def classifier(v: str | None = None) -> A.Classifier:
    return A.Classifier(S, ident(v) if v is not None else None)


def match_number() -> A.MatchNumber:
    return A.MatchNumber(S)


def func(name: str, *args: Any) -> A.FunctionCall:
    return A.FunctionCall(S, name.upper(), tuple(args))


# ------------------------------------------------------------------ statements


def statement(
    pattern: Any,
    defines: dict[str, Any] | None = None,
    measures: list[tuple[str, Any]] | None = None,
    rows_per_match: str = "ONE",
    skip: str = "PAST_LAST_ROW",
    skip_var: str | None = None,
    partition_by: tuple[str, ...] = (),
    order_by: tuple[str, ...] = ("id",),
    subsets: dict[str, tuple[str, ...]] | None = None,
    select: list[tuple[Any, str | None]] | None = None,
    alias: str | None = "m",
    where: Any = None,
) -> A.Statement:
    """A whole query ``SELECT <select or *> FROM t MATCH_RECOGNIZE (...) AS <alias>``."""
    mr = A.MatchRecognize(
        span=S,
        partition_by=tuple(col(c) for c in partition_by),
        order_by=tuple(A.SortKey(S, col(c)) for c in order_by),
        measures=tuple(A.Measure(S, e, ident(n)) for n, e in (measures or [])),
        rows_per_match=A.RowsPerMatch(S, rows_per_match),
        after_match=A.SkipTo(S, skip, ident(skip_var) if skip_var else None),
        pattern=pattern,
        subsets=tuple(A.Subset(S, ident(k), tuple(ident(v) for v in vs)) for k, vs in (subsets or {}).items()),
        defines=tuple(A.Define(S, ident(k), c) for k, c in (defines or {}).items()),
    )
    if select is None:
        items: tuple[A.SelectItem, ...] = (A.SelectItem(S, A.Star(S)),)
    else:
        items = tuple(A.SelectItem(S, e, ident(a) if a else None) for e, a in select)
    return A.Statement(
        span=S,
        select=items,
        relation=A.Relation(S, "t"),
        match=mr,
        alias=ident(alias) if alias else None,
        where=where,
    )


def pattern_variables(p: Any) -> list[str]:
    """The variables of a pattern, in order of first appearance."""
    out: list[str] = []

    def walk(x: Any) -> None:
        if isinstance(x, A.PatternVar):
            if x.name.key not in out:
                out.append(x.name.key)
        elif isinstance(x, (A.Concat, A.Permute)):
            for i in x.items:
                walk(i)
        elif isinstance(x, A.Alternation):
            for i in x.alternatives:
                walk(i)
        elif isinstance(x, A.Quantified):
            walk(x.term)
        elif isinstance(x, A.Exclusion):
            walk(x.pattern)

    walk(p)
    return out


def has_exclusion(p: Any) -> bool:
    if isinstance(p, A.Exclusion):
        return True
    if isinstance(p, (A.Concat, A.Permute)):
        return any(has_exclusion(i) for i in p.items)
    if isinstance(p, A.Alternation):
        return any(has_exclusion(i) for i in p.alternatives)
    if isinstance(p, A.Quantified):
        return has_exclusion(p.term)
    return False


# ============================================================================ strategies

_QUANTIFIERS = [(0, None), (1, None), (0, 1), (2, 2), (1, 1), (2, None), (0, 2), (1, 2), (0, 0), (2, 3)]


@st.composite
def _quantified(draw: Any, inner: Any) -> A.Quantified:
    lo, hi = draw(st.sampled_from(_QUANTIFIERS))
    return quant(draw(inner), lo, hi, greedy=draw(st.booleans()))


def _leaves(variables: tuple[str, ...]) -> Any:
    return st.sampled_from([var(v) for v in variables] * 5 + [empty(), empty(), anchor_start(), anchor_end()])


@functools.cache
def patterns(variables: tuple[str, ...] = VARIABLES, max_leaves: int = 6) -> Any:
    """Random patterns: concatenation, alternation, grouping, every quantifier greedy or reluctant,
    anchors, exclusion, PERMUTE (at most 3 items) and ``()``; at most ``max_leaves`` terms."""

    kinds = ["concat"] * 6 + ["alternation"] * 2 + ["quantified"] * 6 + ["exclusion", "permute", "optional"]

    @st.composite
    def extend(draw: Any, children: Any) -> Any:
        kind = draw(st.sampled_from(kinds))
        if kind == "quantified":
            return draw(_quantified(children))
        if kind == "exclusion":
            return excl(draw(children))
        if kind == "optional":  # ( () | x ): an optional term that prefers to be empty
            return alt(empty(), draw(children))
        items = draw(st.lists(children, min_size=2, max_size=3))
        return {"concat": cat, "alternation": alt, "permute": perm}[kind](*items)

    return st.recursive(_leaves(variables), extend, max_leaves=max_leaves)


@functools.cache
def _define_conditions(v: str, others: tuple[str, ...], labels: tuple[str, ...] | None = None) -> Any:
    """A family of DEFINE conditions for variable v. ``others`` are the qualifiers it may read
    (the pattern's variables and subsets); ``labels`` the values CLASSIFIER() may take."""
    k = st.integers(min_value=0, max_value=6)
    w = st.sampled_from(others)
    lab = st.sampled_from(labels or others)
    value = col("value")
    vv = col("value", v)
    cmp_op = st.sampled_from(["<", "<=", ">", ">=", "=", "<>"])
    basic = st.one_of(
        # current row
        st.builds(lambda op, n: binop(op, value, lit(n)), cmp_op, k),
        st.builds(lambda op, n: binop(op, vv, lit(n)), cmp_op, k),
        st.just(is_null(value)),
        st.just(lit(True)),
        st.just(lit(False)),
        # physical navigation
        st.builds(lambda op: binop(op, value, prev(value)), cmp_op),
        st.builds(lambda op: binop(op, vv, prev(vv)), cmp_op),
        st.builds(lambda op, n: binop(op, value, prev(value, n)), cmp_op, st.integers(0, 2)),
        st.builds(lambda op: binop(op, value, next_(value)), cmp_op),
        st.just(is_null(prev(value))),
        # cross-variable references
        st.builds(lambda op, x: binop(op, vv, col("value", x)), cmp_op, w),
        st.builds(lambda op, x: binop(op, value, col("value", x)), cmp_op, w),
        # logical navigation
        st.builds(lambda op, x: binop(op, value, last(col("value", x), 1)), cmp_op, w),
        st.builds(lambda op, x: binop(op, value, first(col("value", x))), cmp_op, w),
        st.builds(lambda op, n: binop(op, value, last(value, n)), cmp_op, st.integers(1, 2)),
        st.builds(lambda x: is_null(last(col("value", x), 1)), w),
        st.builds(lambda x: binop(">", value, prev(last(col("value", x)), 1)), w),
        # running aggregates
        st.builds(lambda x, op, n: binop(op, agg("SUM", col("value", x)), lit(n)), w, cmp_op, st.integers(0, 12)),
        st.builds(lambda x, op, n: binop(op, count_star(x), lit(n)), w, cmp_op, st.integers(0, 3)),
        st.builds(lambda op, n: binop(op, count_star(), lit(n)), cmp_op, st.integers(1, 4)),
        st.builds(lambda op, n: binop(op, agg("SUM", value), lit(n)), cmp_op, st.integers(0, 12)),
        st.builds(lambda x, op, n: binop(op, agg("MAX", col("value", x)), lit(n)), w, cmp_op, k),
        st.builds(lambda x: binop("<=", agg("AVG", col("value", x)), value), w),
        # classifier-based
        st.builds(lambda x: binop("=", prev(classifier()), lit(x)), lab),
        st.builds(lambda x: binop("<>", last(classifier(), 1), lit(x)), lab),
        st.builds(lambda x: binop("=", first(classifier()), lit(x)), lab),
        st.builds(lambda x: is_null(classifier(x)), w),
        st.just(is_null(prev(classifier()))),
        st.just(is_null(next_(classifier()))),
    )
    return st.one_of(
        basic,
        basic,
        basic,
        st.builds(and_, basic, basic),
        st.builds(or_, basic, basic),
        basic.map(not_),
    )


@functools.cache
def _measures(variables: tuple[str, ...]) -> Any:
    w = st.sampled_from(variables) if variables else st.nothing()
    sem = st.sampled_from([None, "RUNNING", "FINAL"])
    value = col("value")
    options = [
        st.just(match_number()),
        st.just(classifier()),
        st.just(value),
        st.builds(lambda s: first(value, None, s), sem),
        st.builds(lambda s: last(value, None, s), sem),
        st.builds(lambda s, n: last(value, n, s), sem, st.integers(1, 2)),
        # RUNNING FIRST with an offset sees only the rows so far : NULL until the match is long enough
        st.builds(lambda s, n: first(value, n, s), sem, st.integers(1, 2)),
        st.builds(lambda s: count_star(None, s), sem),
        st.builds(lambda s: agg("SUM", value, semantics=s), sem),
        st.just(prev(value)),
        st.just(next_(value)),
        st.just(next_(classifier())),
        st.builds(lambda s: agg("ARRAY_AGG", classifier(), semantics=s), sem),
    ]
    if variables:
        options += [
            w.map(lambda x: col("value", x)),
            st.builds(lambda x, s: first(col("value", x), None, s), w, sem),
            st.builds(lambda x, s, n: first(col("value", x), n, s), w, sem, st.integers(1, 2)),
            st.builds(lambda x, s: last(col("value", x), None, s), w, sem),
            st.builds(lambda x, s: count_star(x, s), w, sem),
            st.builds(lambda x, s: agg("SUM", col("value", x), semantics=s), w, sem),
            w.map(classifier),
        ]
    return st.lists(st.one_of(options), min_size=1, max_size=4).map(
        lambda es: [(f"m{i}_{_measure_tag(e)}", e) for i, e in enumerate(es)]
    )


def _measure_tag(e: Any) -> str:
    return type(e).__name__.lower()


@st.composite
def queries(draw: Any, variables: tuple[str, ...] = VARIABLES, max_leaves: int = 6) -> A.Statement:
    """A whole Statement over ``t(id, value, part)``: ORDER BY id, optional PARTITION BY part,
    sometimes a SUBSET U, DEFINE conditions from a family (current row, PREV/NEXT, cross-variable,
    FIRST/LAST, running aggregates, CLASSIFIER), random MEASURES, rows per match and AFTER MATCH
    SKIP (TO FIRST/LAST may name U); SELECT *."""
    pattern = draw(patterns(variables, max_leaves))
    pvars = pattern_variables(pattern)
    subsets: dict[str, tuple[str, ...]] = {}
    if len(pvars) >= 2 and draw(st.integers(0, 3)) == 0:  # sometimes a union variable U
        members = draw(st.lists(st.sampled_from(pvars), min_size=1, max_size=len(pvars), unique=True))
        subsets["U"] = tuple(sorted(members))
    qualifiers = pvars + list(subsets)
    defines: dict[str, Any] = {}
    for v in pvars:
        if draw(st.integers(0, 4)) > 0:  # mostly defined; sometimes left always-true
            defines[v] = draw(_define_conditions(v, tuple(qualifiers), tuple(pvars)))
    measures = draw(_measures(tuple(qualifiers)))
    modes = ["ONE", "ALL_SHOW_EMPTY", "ALL_OMIT_EMPTY"]
    if not has_exclusion(pattern):  # the standard forbids exclusion WITH UNMATCHED ROWS
        modes.append("ALL_WITH_UNMATCHED")
    rows_per_match = draw(st.sampled_from(modes))
    skips = ["PAST_LAST_ROW", "PAST_LAST_ROW", "TO_NEXT_ROW"]
    if pvars:
        skips += ["TO_FIRST", "TO_LAST"]
    skip = draw(st.sampled_from(skips))
    skip_var = draw(st.sampled_from(qualifiers)) if skip in ("TO_FIRST", "TO_LAST") else None
    partition_by = ("part",) if draw(st.booleans()) else ()
    return statement(
        pattern,
        defines=defines,
        measures=measures,
        rows_per_match=rows_per_match,
        skip=skip,
        skip_var=skip_var,
        partition_by=partition_by,
        subsets=subsets,
    )


def permute_patterns(variables: tuple[str, ...] = VARIABLES) -> Any:
    """PERMUTE of 2-3 items that are variables, often quantified (``A?``, ``B+``, ``C{2,3}``...), sometimes
    after a leading term: where an item can match in several ways the prefix tree of orders is unsound,
    so the compiler must write those orders out (``PERMUTE(A?, B, C)``)."""
    leaf = st.sampled_from([var(v) for v in variables])
    choice = st.builds(
        lambda v, q, greedy: quant(v, *q, greedy=greedy),
        leaf,
        st.sampled_from([(0, 1), (0, None), (1, None), (0, 2), (1, 2)]),
        st.booleans(),
    )
    item = st.one_of(leaf, choice, choice)
    permute = st.lists(item, min_size=2, max_size=3).map(lambda items: perm(*items))
    return st.one_of(permute, st.builds(cat, leaf, permute), st.builds(cat, permute, leaf))


@st.composite
def permute_queries(draw: Any, variables: tuple[str, ...] = VARIABLES) -> A.Statement:
    """A query over ``permute_patterns()``: each variable undefined (it matches every row, so an optional
    item can take a row another item wants), a comparison with a constant, or that comparison AND a
    history read (``COUNT(*) > 0``, always true), which sends the query to the VM with thread keys;
    CLASSIFIER() and MATCH_NUMBER() show which order matched."""
    pattern = draw(permute_patterns(variables))
    defines: dict[str, Any] = {}
    for v in pattern_variables(pattern):
        kind = draw(st.integers(0, 5))
        if kind <= 1:
            continue
        condition = binop(draw(st.sampled_from(["=", "=", "<=", ">="])), col("value"), lit(draw(st.integers(0, 2))))
        defines[v] = and_(condition, binop(">", count_star(), lit(0))) if kind >= 3 else condition
    return statement(
        pattern,
        defines=defines,
        measures=[("c", classifier()), ("n", match_number())],
        rows_per_match=draw(st.sampled_from(["ONE", "ALL_SHOW_EMPTY"])),
        skip=draw(st.sampled_from(["PAST_LAST_ROW", "TO_NEXT_ROW"])),
    )


@st.composite
def tables(draw: Any, max_rows: int = 10, top: int = 6) -> list[dict]:
    """Rows ``{'id': 1..n (in a shuffled input order), 'value': 0..top or None, 'part': 'p'/'q'/None}``."""
    n = draw(st.one_of(st.integers(3, max_rows), st.integers(0, max_rows)))
    values = draw(st.lists(st.sampled_from(list(range(top + 1)) + [None]), min_size=n, max_size=n))
    parts = draw(st.lists(st.sampled_from(["p", "p", "q", None]), min_size=n, max_size=n))
    order = draw(st.permutations(list(range(n))))
    return [{"id": i + 1, "value": values[i], "part": parts[i]} for i in order]


def rows_for(stmt: A.Statement, max_rows: int = 10) -> Any:
    """Input tables for a query from ``queries()`` (they all read t(id, value, part))."""
    return tables(max_rows)


def query_texts(variables: tuple[str, ...] = VARIABLES) -> Any:
    """SQL text of ``queries()``; needs ``grammar.format.format_statement``."""
    from cep.grammar.format import format_statement  # noqa: PLC0415 - optional, written by another engineer

    return queries(variables).map(format_statement)


# ============================================================================ a plain SQL renderer
# (for failure messages)


def sql_of(stmt: A.Statement) -> str:
    """Render a Statement built by these strategies as SQL text (for reading failures; the
    project's own formatter, when present, is ``grammar.format.format_statement``)."""
    mr = stmt.match
    parts = []
    if mr.partition_by:
        parts.append("PARTITION BY " + ", ".join(_sql_expr(c) for c in mr.partition_by))
    if mr.order_by:
        parts.append(
            "ORDER BY "
            + ", ".join(
                _sql_expr(k.expr)
                + (" DESC" if k.descending else "")
                + ("" if k.nulls_first is None else " NULLS FIRST" if k.nulls_first else " NULLS LAST")
                for k in mr.order_by
            )
        )
    if mr.measures:
        parts.append("MEASURES " + ", ".join(f"{_sql_expr(m.expr)} AS {_sql_ident(m.name)}" for m in mr.measures))
    rpm = {
        "ONE": "ONE ROW PER MATCH",
        "ALL_SHOW_EMPTY": "ALL ROWS PER MATCH",
        "ALL_OMIT_EMPTY": "ALL ROWS PER MATCH OMIT EMPTY MATCHES",
        "ALL_WITH_UNMATCHED": "ALL ROWS PER MATCH WITH UNMATCHED ROWS",
    }[mr.rows_per_match.mode]
    if mr.rows_per_match.mode != "ONE" or mr.rows_per_match.explicit:
        parts.append(rpm)
    if mr.after_match is not None:
        sk = mr.after_match
        text = {
            "PAST_LAST_ROW": "PAST LAST ROW",
            "TO_NEXT_ROW": "TO NEXT ROW",
            "TO_FIRST": f"TO FIRST {_sql_ident(sk.variable) if sk.variable else ''}",
            "TO_LAST": f"TO LAST {_sql_ident(sk.variable) if sk.variable else ''}",
        }[sk.mode]
        parts.append("AFTER MATCH SKIP " + text)
    parts.append(f"PATTERN ({_sql_pattern(mr.pattern)})")
    if mr.subsets:
        parts.append(
            "SUBSET "
            + ", ".join(f"{_sql_ident(s.name)} = ({', '.join(_sql_ident(v) for v in s.variables)})" for s in mr.subsets)
        )
    if mr.defines:
        parts.append("DEFINE " + ", ".join(f"{_sql_ident(d.variable)} AS {_sql_expr(d.condition)}" for d in mr.defines))
    select = ", ".join(
        _sql_expr(i.expr) + (f" AS {_sql_ident(i.alias)}" if i.alias is not None else "") for i in stmt.select
    )
    text = f"SELECT {select} FROM {stmt.relation.name} MATCH_RECOGNIZE ({' '.join(parts)})"
    if stmt.alias is not None:
        text += f" AS {_sql_ident(stmt.alias)}"
    if stmt.where is not None:
        text += f" WHERE {_sql_expr(stmt.where)}"
    return text


def _sql_ident(i: A.Identifier) -> str:
    return f'"{i.name}"' if i.quoted else i.name


def _sql_pattern(p: Any) -> str:
    if isinstance(p, A.PatternVar):
        return _sql_ident(p.name)
    if isinstance(p, A.Empty):
        return "()"
    if isinstance(p, A.Anchor):
        return "^" if p.kind == "start" else "$"
    if isinstance(p, A.Concat):
        return " ".join(_sql_pattern_atom(x, concat=True) for x in p.items)
    if isinstance(p, A.Alternation):
        return " | ".join(_sql_pattern_atom(x) for x in p.alternatives)
    if isinstance(p, A.Quantified):
        return _sql_pattern_atom(p.term, quantified=True) + quant_text(p.min, p.max) + ("" if p.greedy else "?")
    if isinstance(p, A.Exclusion):
        return "{- " + _sql_pattern(p.pattern) + " -}"
    if isinstance(p, A.Permute):
        return "PERMUTE(" + ", ".join(_sql_pattern(x) for x in p.items) + ")"
    raise TypeError(p)


def _sql_pattern_atom(p: Any, concat: bool = False, quantified: bool = False) -> str:
    if isinstance(p, (A.PatternVar, A.Empty, A.Anchor, A.Exclusion, A.Permute)):
        return _sql_pattern(p)
    if concat and isinstance(p, A.Quantified):
        return _sql_pattern(p)
    return "(" + _sql_pattern(p) + ")"


def _sql_expr(e: Any) -> str:
    if isinstance(e, A.Literal):
        return "'" + e.value.replace("'", "''") + "'" if e.kind == "string" else e.text
    if isinstance(e, A.ColumnRef):
        return (_sql_ident(e.qualifier) + "." if e.qualifier is not None else "") + _sql_ident(e.column)
    if isinstance(e, A.Star):
        return (_sql_ident(e.qualifier) + "." if e.qualifier is not None else "") + "*"
    if isinstance(e, A.Unary):
        return f"(NOT {_sql_expr(e.operand)})" if e.op == "NOT" else f"({e.op}{_sql_expr(e.operand)})"
    if isinstance(e, A.Binary):
        return f"({_sql_expr(e.left)} {e.op} {_sql_expr(e.right)})"
    if isinstance(e, A.IsNull):
        return f"({_sql_expr(e.operand)} IS {'NOT ' if e.negated else ''}NULL)"
    if isinstance(e, A.Navigation):
        sem = f"{e.semantics} " if e.semantics else ""
        off = f", {_sql_expr(e.offset)}" if e.offset is not None else ""
        return f"{sem}{e.kind}({_sql_expr(e.operand)}{off})"
    if isinstance(e, A.Aggregate):
        sem = f"{e.semantics} " if e.semantics else ""
        return f"{sem}{e.name}({'DISTINCT ' if e.distinct else ''}{', '.join(_sql_expr(a) for a in e.args)})"
    if isinstance(e, A.FunctionCall):
        return f"{e.name}({', '.join(_sql_expr(a) for a in e.args)})"
    if isinstance(e, A.Classifier):
        return f"CLASSIFIER({_sql_ident(e.variable) if e.variable is not None else ''})"
    if isinstance(e, A.MatchNumber):
        return "MATCH_NUMBER()"
    raise TypeError(e)
