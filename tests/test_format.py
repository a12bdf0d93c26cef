"""The formatter: canonical layout, minimal parentheses, and parse(format(ast)) == ast."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from cep.grammar import ast as A
from cep.grammar.errors import Span
from cep.grammar.format import format_expr, format_pattern, format_statement, quantifier_text
from cep.grammar.parser import parse, parse_unchecked

try:  # `tests` is a package only when the repository root is on sys.path
    from tests.strategies_ast import corpus_queries, expressions, patterns, statements, uses_subquery
except ModuleNotFoundError:
    from strategies_ast import corpus_queries, expressions, patterns, statements, uses_subquery

S = Span()
CORPUS = [(i, q) for i, q, _ in corpus_queries() if not uses_subquery(q)]
ROUND_TRIP = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def expr_of(text: str) -> A.Expr:
    return parse_unchecked(f"SELECT * FROM t MATCH_RECOGNIZE (MEASURES {text} AS x PATTERN (A))").match.measures[0].expr


def pattern_of(text: str) -> A.Pattern:
    return parse_unchecked(f"SELECT * FROM t MATCH_RECOGNIZE (PATTERN ({text}))").match.pattern


# ----------------------------------------------------------------------------------- round trips


def test_round_trip_of_every_corpus_query() -> None:
    for case_id, query in CORPUS:
        statement = parse(query)
        text = format_statement(statement)
        assert parse_unchecked(text) == statement, case_id
        assert format_statement(parse_unchecked(text)) == text, case_id  # formatting is idempotent


@ROUND_TRIP
@given(statements())
def test_round_trip_of_generated_statements(statement: A.Statement) -> None:
    assert parse_unchecked(format_statement(statement)) == statement


@ROUND_TRIP
@given(expressions(max_leaves=20))
def test_round_trip_of_generated_expressions(expr: A.Expr) -> None:
    assert expr_of(format_expr(expr)) == expr


@ROUND_TRIP
@given(patterns(max_leaves=16))
def test_round_trip_of_generated_patterns(pattern: A.Pattern) -> None:
    assert pattern_of(format_pattern(pattern)) == pattern


# ---------------------------------------------------------------------------------------- layout


def test_canonical_layout() -> None:
    query = (
        "select m.id, m.total as t from ticks match_recognize (partition by symbol order by ts desc nulls last "
        "measures first(a.price) as start, final sum(b.qty) as total all rows per match with unmatched rows "
        "after match skip to first b pattern ((a | b)+? c{2,}) within interval '10' minute "
        "subset u = (a, b) define b as b.price < prev(b.price) and b.qty between 1 and 10, c as true) as m "
        "where m.total > 0 order by m.id limit 3"
    )
    assert (
        format_statement(parse(query))
        == """\
SELECT m.id, m.total AS t
FROM ticks
MATCH_RECOGNIZE (
  PARTITION BY symbol
  ORDER BY ts DESC NULLS LAST
  MEASURES
    FIRST(a.price) AS start,
    FINAL SUM(b.qty) AS total
  ALL ROWS PER MATCH WITH UNMATCHED ROWS
  AFTER MATCH SKIP TO FIRST b
  PATTERN ((a | b)+? c{2,})
  WITHIN INTERVAL '10' MINUTE
  SUBSET
    u = (a, b)
  DEFINE
    b AS b.price < PREV(b.price) AND b.qty BETWEEN 1 AND 10,
    c AS TRUE
) AS m
WHERE m.total > 0
ORDER BY m.id
LIMIT 3"""
    )


def test_what_was_written_is_kept() -> None:
    text = format_statement(
        parse(
            "SELECT * FROM 'data/x.parquet' MATCH_RECOGNIZE (ORDER BY PROCTIME() ONE ROW PER "
            "MATCH AFTER MATCH SKIP TO B SEEK PATTERN (A B) DEFINE \"A\" AS x = 'it''s')"
        )
    )
    assert "FROM 'data/x.parquet'" in text
    assert "ORDER BY PROCTIME()" in text and "ONE ROW PER MATCH" in text
    assert "AFTER MATCH SKIP TO B\n" in text and "\n  SEEK\n" in text
    assert "\"A\" AS x = 'it''s'" in text
    assert "ROWS PER MATCH" not in format_statement(parse("SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A))"))


def test_a_number_with_an_exponent_stays_a_double_through_fmt() -> None:
    """``cep fmt`` prints a literal as written, so ``1e0`` and ``-0e0`` stay Spark's DOUBLEs (a DECIMAL's text,
    ``1`` or ``0``, would change their type and lose the zero's sign)."""
    text = format_statement(parse("SELECT * FROM t MATCH_RECOGNIZE (MEASURES 1e0 AS a, -0e0 AS b PATTERN (A))"))
    assert "1e0 AS a" in text and "-0e0 AS b" in text
    a, b = (measure.expr for measure in parse(text).match.measures)
    assert type(a.value) is float and type(b.operand.value) is float


# --------------------------------------------------------------------------------- parentheses


@pytest.mark.parametrize(
    "text, formatted",
    [
        ("(a + b) * c", "(a + b) * c"),
        ("a + (b * c)", "a + b * c"),
        ("a - (b - c)", "a - (b - c)"),
        ("(a - b) - c", "a - b - c"),
        ("NOT (a AND b)", "NOT (a AND b)"),
        ("(NOT a) AND b", "NOT a AND b"),
        ("NOT (a = b)", "NOT a = b"),
        ("(a = b) = c", "(a = b) = c"),
        ("-(-x)", "- -x"),
        ("-(a + b)", "-(a + b)"),
        ("(a OR b) AND c", "(a OR b) AND c"),
        ("(a + 1) IS NULL", "a + 1 IS NULL"),
        ("(a = 1) IS NOT NULL", "(a = 1) IS NOT NULL"),
        ("x BETWEEN (a AND b) AND c", "x BETWEEN (a AND b) AND c"),
        ("(x || 'a') LIKE 'b%' ESCAPE '!'", "x || 'a' LIKE 'b%' ESCAPE '!'"),
        ("x != 1", "x <> 1"),
        ("running   last(x,1)", "RUNNING LAST(x, 1)"),
        ("cast(x as varchar(10))", "CAST(x AS VARCHAR(10))"),
        ("case when a then 1 end", "CASE WHEN a THEN 1 END"),
        ("array[1, 2]", "ARRAY[1, 2]"),
        ("count(distinct a.x)", "COUNT(DISTINCT a.x)"),
        ("interval '1:30' hour to minute", "INTERVAL '1:30' HOUR TO MINUTE"),
        ("timestamp '2024-01-01 10:00:00'", "TIMESTAMP '2024-01-01 10:00:00'"),
        ("1e0 + 1.50", "1e0 + 1.50"),
    ],
)
def test_expression_formatting(text: str, formatted: str) -> None:
    assert format_expr(expr_of(text)) == formatted


@pytest.mark.parametrize(
    "text, formatted",
    [
        ("((A) (B (C)))", "A B C"),
        ("(A B)* | C", "(A B)* | C"),
        ("(A | B) C", "(A | B) C"),
        ("(A*)+", "(A*)+"),
        ("A{ 2 , 3 }?", "A{2,3}?"),
        ("{-B-}+", "{- B -}+"),
        ("PERMUTE(A,B|C)", "PERMUTE(A, B | C)"),
        ("^ ()* $", "^ ()* $"),
        ("A !B C", "A !B C"),
        ('"a b" `c`', '"a b" "c"'),
    ],
)
def test_pattern_formatting(text: str, formatted: str) -> None:
    assert format_pattern(pattern_of(text)) == formatted


def test_quantifier_text_for_hand_built_nodes() -> None:
    a = A.PatternVar(S, A.Identifier(S, "A"))
    assert [
        quantifier_text(A.Quantified(S, a, low, high))
        for low, high in [(0, None), (1, None), (0, 1), (2, 2), (2, None), (2, 5)]
    ] == ["*", "+", "?", "{2}", "{2,}", "{2,5}"]
    assert format_pattern(A.Quantified(S, a, 0, None, greedy=False)) == "A*?"


def test_hand_built_nested_sequences_format_to_equivalent_text() -> None:
    a, b, c = (A.PatternVar(S, A.Identifier(S, n)) for n in "ABC")
    nested = A.Concat(S, (a, A.Concat(S, (b, c))))
    assert format_pattern(nested) == "A (B C)"
    assert pattern_of(format_pattern(nested)) == A.Concat(S, (a, b, c))


@pytest.mark.parametrize("path", ["C:\\data\\ticks.csv", "it's.csv", "a\\\\b.parquet"])
def test_a_path_is_formatted_as_written(path: str) -> None:
    """`FROM 'path'` reads the path as written (only '' is a quote, as the whole-statement reader does), so
    `cep fmt` writes it back so: doubling its backslashes (as for a text literal) named another file."""
    text = "SELECT * FROM '" + path.replace("'", "''") + "' MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS TRUE)"
    statement = parse_unchecked(text)
    assert statement.relation.name == path
    assert parse_unchecked(format_statement(statement)) == statement
    assert "'" + path.replace("'", "''") + "'" in format_statement(statement)


# ------------------------------------------------------------------------------ whole statements

# Whole statements around a corpus query: window functions over the clause's rows (the SQL around it), WITH,
# a subquery, a join. `cep fmt` lays out each clause and keeps the SQL around it as written.
WHOLE_SHAPES = [
    "WITH m AS ({q})\nSELECT *, row_number() OVER (ORDER BY 1) AS n, avg(1) OVER (PARTITION BY 1) AS a FROM m",
    "SELECT * FROM ({q}) x WHERE 1 = 1",
    "SELECT x.*, count(*) OVER () AS c FROM ({q}) x JOIN (SELECT 1 AS one) y ON 1 = 1",
]


def _clauses(text: str) -> list:
    from cep.grammar.statement import split

    return [clause.statement for clause in split(text).clauses]


def _around(text: str) -> str:
    """The text outside the clauses' MATCH_RECOGNIZE (...) parts."""
    from cep.grammar.statement import split

    kept, done = [], 0
    for clause in sorted(split(text).clauses, key=lambda c: c.keyword):
        kept.append(text[done : clause.keyword])
        done = clause.end
    return "".join([*kept, text[done:]]).strip()


def test_whole_statements_with_window_functions_round_trip() -> None:
    """For each corpus query inside each shape: the clauses parse back to the same ASTs, the SQL around them
    is unchanged, and formatting again changes nothing."""
    from cep.cli import format_text

    formatted_some = 0
    for case_id, query in CORPUS:
        for shape in WHOLE_SHAPES:
            text = shape.format(q=query.strip().rstrip(";"))
            try:
                before = _clauses(text)
            except Exception:  # noqa: BLE001, S112 - a corpus query that is no valid part of a whole statement
                continue
            formatted = format_text(text)
            assert _clauses(formatted) == before, case_id
            assert _around(formatted) == _around(text), case_id
            assert format_text(formatted) == formatted, case_id
            formatted_some += 1
    assert formatted_some > len(CORPUS)  # most corpus queries fit every shape


def test_cep_fmt_formats_a_statement_with_a_window_function_outside_the_clause(tmp_path, capsys) -> None:
    from cep.cli import main

    query = tmp_path / "q.sql"
    query.write_text(
        "select v, avg(v) over (order by v) as a from t match_recognize (order by id measures a.v as v "
        "one row per match pattern (a b*) define b as b.v > prev(b.v)) r\n",
        encoding="utf-8",
    )
    assert main(["fmt", str(query)]) == 0
    assert capsys.readouterr().out == (
        "select v, avg(v) over (order by v) as a from t MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES\n"
        "    a.v AS v\n"
        "  ONE ROW PER MATCH\n"
        "  PATTERN (a b*)\n"
        "  DEFINE\n"
        "    b AS b.v > PREV(b.v)\n"
        ") r\n"
    )


def test_cep_fmt_formats_a_statement_with_typeof_in_the_outer_select(tmp_path, capsys) -> None:
    """typeof() is Spark's, not the clause language's: the outer SELECT holding it is kept as written (as
    cep run runs it) and only the clause is laid out."""
    from cep.cli import main

    query = tmp_path / "q.sql"
    query.write_text(
        "select typeof(v) as t, v from t match_recognize (order by id measures a.v as v pattern (a))\n",
        encoding="utf-8",
    )
    assert main(["fmt", str(query)]) == 0
    assert capsys.readouterr().out == (
        "select typeof(v) as t, v from t MATCH_RECOGNIZE (\n  ORDER BY id\n  MEASURES\n    a.v AS v\n  PATTERN (a)\n)\n"
    )


def test_a_clause_holding_a_subquery_is_kept_as_written() -> None:
    from cep.cli import format_text

    text = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES A.v AS v PATTERN (A) "
        "DEFINE A AS A.v > (SELECT avg(v) FROM t)) r"
    )
    assert format_text(text) == text
