"""The parser: the conformance corpus, the shape of the AST, keywords as names, normalisations."""

from __future__ import annotations

import datetime
import logging
from decimal import Decimal
from pathlib import Path

import pytest
from lark import Lark
from lark import logger as lark_logger

from cep.grammar import ast as A
from cep.grammar.errors import CepError, CepSemanticError, CepSyntaxError, Span
from cep.grammar.parser import parse, parse_all, parse_schema, parse_unchecked

try:  # `tests` is a package only when the repository root is on sys.path
    from tests.strategies_ast import corpus_queries, uses_subquery
except ModuleNotFoundError:
    from strategies_ast import corpus_queries, uses_subquery

S = Span()
CORPUS = corpus_queries()


def mr(body: str, select: str = "*", tail: str = "") -> str:
    return f"SELECT {select} FROM t MATCH_RECOGNIZE ({body}){tail}"


def pattern_of(text: str) -> A.Pattern:
    return parse_unchecked(mr(f"PATTERN ({text})")).match.pattern


def expr_of(text: str) -> A.Expr:
    return parse_unchecked(mr("MEASURES " + text + " AS x PATTERN (A)")).match.measures[0].expr


def var(name: str, quoted: bool = False) -> A.PatternVar:
    return A.PatternVar(S, A.Identifier(S, name, quoted))


def col(name: str, qualifier: str | None = None) -> A.ColumnRef:
    return A.ColumnRef(S, A.Identifier(S, qualifier) if qualifier else None, A.Identifier(S, name))


def integer(value: int) -> A.Literal:
    return A.Literal(S, "integer", value, str(value))


# ------------------------------------------------------------------------------------- the corpus


@pytest.mark.parametrize("case_id, query, case", CORPUS, ids=[c[0] for c in CORPUS])
def test_every_corpus_query_parses(case_id: str, query: str, case: dict) -> None:
    if uses_subquery(query):
        with pytest.raises(CepSyntaxError) as raised:
            parse(query)
        assert raised.value.code == "E0107"
        assert "subqueries are not supported" in str(raised.value)
    else:  # including the expect_error cases: they fail at run time, not here
        statement = parse(query)
        assert isinstance(statement, A.Statement)


def test_corpus_has_the_expected_mix() -> None:
    subqueries = [q for _, q, _ in CORPUS if uses_subquery(q)]
    runtime_errors = [c for _, _, c in CORPUS if c.get("expect_error")]
    assert len(CORPUS) == 208 and len(subqueries) == 8 and len(runtime_errors) == 3


def test_corpus_queries_pass_the_checks_with_their_schemas() -> None:
    from cep.grammar.checks import check

    for _case_id, query, case in CORPUS:
        if not uses_subquery(query):
            check(parse(query), schema=dict(case["columns"]), source=query)


def _corpus_query(case_id: str) -> str:
    return next(q for i, q, _ in CORPUS if i == case_id)


def test_simple_query_ast() -> None:
    statement = parse(_corpus_query("trino-TestRowPatternMatching-testSimpleQuery-1"))
    match = statement.match
    assert statement.alias == A.Identifier(S, "m")
    assert [item.expr for item in statement.select] == [
        col("id", "m"),
        col("match", "m"),
        col("val", "m"),
        col("label", "m"),
    ]
    assert match.order_by == (A.SortKey(S, col("id")),)
    assert match.measures[0] == A.Measure(S, A.MatchNumber(S), A.Identifier(S, "match"))
    assert match.measures[1].expr == A.Navigation(S, "LAST", col("value"), semantics="RUNNING")
    assert match.measures[2].expr == A.Classifier(S)
    assert match.rows_per_match == A.RowsPerMatch(S, "ALL_SHOW_EMPTY")
    assert match.after_match == A.SkipTo(S, "PAST_LAST_ROW")
    assert match.pattern == A.Concat(
        S, (var("A"), A.Quantified(S, var("B"), 1, None, True, "+"), A.Quantified(S, var("C"), 1, None, True, "+"))
    )
    assert match.defines[0] == A.Define(
        S, A.Identifier(S, "B"), A.Binary(S, "<", col("value", "B"), A.Navigation(S, "PREV", col("value", "B")))
    )


def test_flink_backtick_variables_and_within() -> None:
    simple = parse(_corpus_query("flink-MatchRecognizeITCase-testSimplePattern-1"))
    assert simple.match.pattern.items[0] == var('A"', quoted=True)
    assert simple.match.defines[0].variable == A.Identifier(S, 'A"', quoted=True)
    timed = parse(_corpus_query("flink-docs-match_recognize-time_constraint-1"))
    assert timed.match.within == A.IntervalLiteral(S, "1", "HOUR")
    assert timed.alias is None and timed.select == (A.SelectItem(S, A.Star(S)),)


def test_subset_skip_and_nested_navigation() -> None:
    skip = parse(_corpus_query("trino-TestRowPatternMatching-testAfterMatchSkip-6"))
    assert skip.match.after_match == A.SkipTo(S, "TO_LAST", A.Identifier(S, "U"), plain=True)
    assert skip.match.subsets == (A.Subset(S, A.Identifier(S, "U"), (A.Identifier(S, "C"), A.Identifier(S, "D"))),)
    nested = expr_of("PREV(LAST(A.value), 3)")
    assert nested == A.Navigation(S, "PREV", A.Navigation(S, "LAST", col("value", "A")), integer(3))


# ----------------------------------------------------------------------------------- the grammar


def _lalr_warnings(grammar: str, caplog: pytest.LogCaptureFixture) -> str:
    level = lark_logger.level
    lark_logger.setLevel(logging.DEBUG)
    try:
        with caplog.at_level(logging.DEBUG, logger="lark"):
            Lark(grammar, parser="lalr", lexer="contextual", debug=True)
    finally:
        lark_logger.setLevel(level)
    return caplog.text.lower()


def test_grammar_has_no_lalr_conflicts(caplog: pytest.LogCaptureFixture) -> None:
    """Lark resolves shift/reduce conflicts silently (as shifts); with debug=True it logs them."""
    dangling_else = 'start: s\ns: "if" s | "if" s "else" s | "x"\n%ignore " "'
    assert "shift/reduce conflict" in _lalr_warnings(dangling_else, caplog)  # the probe works
    caplog.clear()
    grammar = Path(A.__file__).with_name("cep.lark").read_text(encoding="utf-8")
    assert "conflict" not in _lalr_warnings(grammar, caplog)


def test_keywords_are_case_insensitive() -> None:
    assert parse("select * from t match_recognize (pattern (a) define a as true) as m") == parse(
        "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (a) DEFINE a AS TRUE) AS m"
    )


@pytest.mark.parametrize(
    "name",
    [
        "match",
        "value",
        "first",
        "last",
        "prev",
        "next",
        "id",
        "part",
        "classy",
        "label",
        "count",
        "running",
        "final",
        "partition",
        "order",
        "define",
        "pattern",
        "array",
    ],
)
def test_keywords_work_as_measure_names_and_qualified_columns(name: str) -> None:
    statement = parse(
        mr(f"MEASURES A.{name} AS {name} PATTERN (A) DEFINE A AS A.{name} > 0", select=f"m.{name}", tail=" AS m")
    )
    assert statement.match.measures[0].name == A.Identifier(S, name)
    assert statement.match.measures[0].expr == col(name, "A")
    assert statement.select[0].expr == col(name, "m")


def test_common_column_names_work_unqualified() -> None:
    statement = parse(
        mr(
            "PARTITION BY part ORDER BY date MEASURES LAST(value) AS value, FIRST(id) AS first "
            "PATTERN (A) DEFINE A AS prev > next AND match = 1 AND timestamp > 0"
        )
    )
    assert statement.match.order_by[0].expr == col("date")
    condition = statement.match.defines[0].condition
    assert condition.left.left == A.Binary(S, ">", col("prev"), col("next"))


def test_first_and_last_as_pattern_variables() -> None:
    statement = parse(mr("PATTERN ((A | B)+ LAST) DEFINE LAST AS FIRST(CLASSIFIER()) = 'A'"))
    assert statement.match.pattern.items[-1] == var("LAST")
    assert statement.match.defines[0].variable == A.Identifier(S, "LAST")


def test_quoted_identifiers() -> None:
    statement = parse(mr('PATTERN (a "b"+ "!" `x``y`) DEFINE "b" AS "b".value < PREV("b".value)'))
    assert statement.match.pattern.items == (
        var("a"),
        A.Quantified(S, var("b", True), 1, None, True, "+"),
        var("!", True),
        var("x`y", True),
    )
    assert statement.match.defines[0].condition.left == A.ColumnRef(
        S, A.Identifier(S, "b", True), A.Identifier(S, "value")
    )


def test_unquoted_and_quoted_names_compare_as_sql_does() -> None:
    assert A.Identifier(S, "abc").key == A.Identifier(S, "ABC").key == "ABC"
    assert A.Identifier(S, "abc", quoted=True).key == "abc"


def test_comments_are_ignored() -> None:
    text = "SELECT * -- the columns\nFROM t /* the table\n spans lines */ MATCH_RECOGNIZE (PATTERN (A))"
    assert parse(text) == parse("SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A))")


def test_relation_forms_and_trailing_semicolon() -> None:
    assert parse(mr("PATTERN (A)").replace("FROM t", "FROM db.ticks") + ";").relation == A.Relation(S, "db.ticks")
    path = parse("SELECT * FROM 'data/it''s.parquet' MATCH_RECOGNIZE (PATTERN (A))").relation
    assert path == A.Relation(S, "data/it's.parquet", is_path=True)


def test_alias_forms() -> None:
    assert parse(mr("PATTERN (A)", tail="MR")).alias == A.Identifier(S, "MR")
    assert parse(mr("PATTERN (A)", tail=" AS m")).alias == A.Identifier(S, "m")
    statement = parse(mr("MEASURES A.x AS ax PATTERN (A)", select="ax total, m.*", tail=" m"))
    assert statement.select[0].alias == A.Identifier(S, "total")
    assert statement.select[1] == A.SelectItem(S, A.Star(S, A.Identifier(S, "m")))


def test_outer_where_order_and_limit() -> None:
    statement = parse(
        mr("MEASURES A.x AS ax PATTERN (A)", tail=" AS m WHERE m.ax > 1 ORDER BY m.ax DESC NULLS FIRST LIMIT 5")
    )
    assert statement.where == A.Binary(S, ">", col("ax", "m"), integer(1))
    assert statement.order_by == (A.SortKey(S, col("ax", "m"), descending=True, nulls_first=True),)
    assert statement.limit == 5


# --------------------------------------------------------------------------------------- patterns


@pytest.mark.parametrize(
    "written, low, high, greedy, text",
    [
        ("A*", 0, None, True, "*"),
        ("A*?", 0, None, False, "*"),
        ("A+", 1, None, True, "+"),
        ("A+?", 1, None, False, "+"),
        ("A?", 0, 1, True, "?"),
        ("A??", 0, 1, False, "?"),
        ("A{3}", 3, 3, True, "{3}"),
        ("A{3}?", 3, 3, False, "{3}"),
        ("A{2,}", 2, None, True, "{2,}"),
        ("A{,4}", 0, 4, True, "{,4}"),
        ("A{ 2 , 4 }?", 2, 4, False, "{2,4}"),
        ("A{,}", 0, None, True, "{,}"),
        ("A{02,3}", 2, 3, True, "{2,3}"),
    ],
)
def test_quantifiers(written: str, low: int, high: int | None, greedy: bool, text: str) -> None:
    assert pattern_of(written) == A.Quantified(S, var("A"), low, high, greedy, text)


def test_groups_are_not_nodes_and_nested_sequences_flatten() -> None:
    assert pattern_of("(A)") == var("A")
    assert pattern_of("(((A) (B (C))))") == A.Concat(S, (var("A"), var("B"), var("C")))
    assert pattern_of("A | (B | C)") == A.Alternation(S, (var("A"), var("B"), var("C")))
    assert pattern_of("(A | B) C") == A.Concat(S, (A.Alternation(S, (var("A"), var("B"))), var("C")))
    assert pattern_of("(A B)*") == A.Quantified(S, A.Concat(S, (var("A"), var("B"))), 0, None, True, "*")


def test_alternation_binds_loosest() -> None:
    assert pattern_of("A B | C") == A.Alternation(S, (A.Concat(S, (var("A"), var("B"))), var("C")))


def test_anchors_empty_exclusion_permute_absence() -> None:
    assert pattern_of("^A$") == A.Concat(S, (A.Anchor(S, "start"), var("A"), A.Anchor(S, "end")))
    assert pattern_of("() | A") == A.Alternation(S, (A.Empty(S), var("A")))
    assert pattern_of("()") == A.Empty(S)
    assert parse_unchecked(mr("PATTERN ()")).match.pattern == A.Empty(S)
    assert pattern_of("A {- B+ -} C") == A.Concat(
        S, (var("A"), A.Exclusion(S, A.Quantified(S, var("B"), 1, None, True, "+")), var("C"))
    )
    assert pattern_of("{- {- B -} -}") == A.Exclusion(S, A.Exclusion(S, var("B")))
    assert pattern_of("PERMUTE(A, B C, D | E)") == A.Permute(
        S, (var("A"), A.Concat(S, (var("B"), var("C"))), A.Alternation(S, (var("D"), var("E"))))
    )
    assert pattern_of("A !B C") == A.Concat(S, (var("A"), A.Absence(S, A.Identifier(S, "B")), var("C")))


def test_quantifier_braces_and_exclusion_braces_do_not_mix_up() -> None:
    assert pattern_of("A {- B -}{1,2} {- C -}{2}") == A.Concat(
        S,
        (
            var("A"),
            A.Quantified(S, A.Exclusion(S, var("B")), 1, 2, True, "{1,2}"),
            A.Quantified(S, A.Exclusion(S, var("C")), 2, 2, True, "{2}"),
        ),
    )


# ------------------------------------------------------------------------------------ expressions


def test_operator_precedence() -> None:
    assert expr_of("1 + 2 * 3") == A.Binary(S, "+", integer(1), A.Binary(S, "*", integer(2), integer(3)))
    assert expr_of("1 - 2 - 3") == A.Binary(S, "-", A.Binary(S, "-", integer(1), integer(2)), integer(3))
    assert expr_of("a OR b AND NOT c") == A.Binary(
        S, "OR", col("a"), A.Binary(S, "AND", col("b"), A.Unary(S, "NOT", col("c")))
    )
    assert expr_of("NOT a = b") == A.Unary(S, "NOT", A.Binary(S, "=", col("a"), col("b")))
    assert expr_of("-a * b") == A.Binary(S, "*", A.Unary(S, "-", col("a")), col("b"))
    assert expr_of("a || b + c") == A.Binary(S, "+", A.Binary(S, "||", col("a"), col("b")), col("c"))
    assert expr_of("a != b") == A.Binary(S, "<>", col("a"), col("b"))


def test_predicates() -> None:
    assert expr_of("x IS NOT NULL") == A.IsNull(S, col("x"), negated=True)
    assert expr_of("x NOT BETWEEN 1 AND 2 AND y") == A.Binary(
        S, "AND", A.Between(S, col("x"), integer(1), integer(2), negated=True), col("y")
    )
    assert expr_of("x IN (1, 2)") == A.InList(S, col("x"), (integer(1), integer(2)))
    assert expr_of("x NOT LIKE 'a%' ESCAPE '!'") == A.Like(
        S, col("x"), A.Literal(S, "string", "a%", "a%"), A.Literal(S, "string", "!", "!"), negated=True
    )


def test_literals() -> None:
    assert expr_of("'it''s'") == A.Literal(S, "string", "it's", "it's")
    assert expr_of("1.50") == A.Literal(S, "decimal", Decimal("1.50"), "1.50")
    # with an exponent Spark's DOUBLE: the nearest double, its zero signed, its type float (1.0 == Decimal(1))
    for written, value in (("1e0", 1.0), ("2.5E-3", 0.0025), ("0e0", 0.0), ("1e-400", 0.0)):
        parsed = expr_of(written)
        assert parsed == A.Literal(S, "decimal", value, written) and type(parsed.value) is float
    assert expr_of("true") == A.Literal(S, "boolean", True, "TRUE")
    assert expr_of("null") == A.Literal(S, "null", None, "NULL")
    assert expr_of("TIMESTAMP '2024-01-01 10:00:00'") == A.Literal(
        S, "timestamp", datetime.datetime(2024, 1, 1, 10), "2024-01-01 10:00:00"
    )
    assert expr_of("DATE '2024-01-01'") == A.Literal(S, "date", datetime.date(2024, 1, 1), "2024-01-01")


@pytest.mark.parametrize(
    "written, text, unit, negative",
    [
        ("INTERVAL '10' MINUTE", "10", "MINUTE", False),
        ("INTERVAL '10' minutes", "10", "MINUTE", False),
        ("INTERVAL '5' MILLISECONDS", "5", "MILLISECOND", False),
        ("INTERVAL -'2' DAY", "2", "DAY", True),
        ("INTERVAL '1:30' HOUR TO MINUTE", "1:30", "HOUR TO MINUTE", False),
        ("INTERVAL '1 2:03:04' DAY TO SECOND", "1 2:03:04", "DAY TO SECOND", False),
    ],
)
def test_interval_literals(written: str, text: str, unit: str, negative: bool) -> None:
    assert expr_of(written) == A.IntervalLiteral(S, text, unit, negative)


def test_case_cast_array() -> None:
    assert expr_of("CASE WHEN a THEN 1 ELSE 2 END") == A.Case(
        S, None, (A.WhenClause(S, col("a"), integer(1)),), integer(2)
    )
    assert expr_of("CASE x WHEN 1 THEN 'a' END") == A.Case(
        S, col("x"), (A.WhenClause(S, integer(1), A.Literal(S, "string", "a", "a")),)
    )
    assert expr_of("CAST(x AS decimal(2, 1))") == A.Cast(S, col("x"), A.TypeName(S, "DECIMAL", (2, 1)))
    assert expr_of("CAST(x AS timestamp)") == A.Cast(S, col("x"), A.TypeName(S, "TIMESTAMP"))
    assert expr_of("ARRAY['a', x]") == A.ArrayLiteral(S, (A.Literal(S, "string", "a", "a"), col("x")))


def test_calls() -> None:
    assert expr_of("coalesce(x, 0)") == A.FunctionCall(S, "COALESCE", (col("x"), integer(0)))
    assert expr_of("count(*)") == A.Aggregate(S, "COUNT", (A.Star(S),))
    assert expr_of("count()") == A.Aggregate(S, "COUNT", (A.Star(S),))
    assert expr_of("COUNT(B.*)") == A.Aggregate(S, "COUNT", (A.Star(S, A.Identifier(S, "B")),))
    assert expr_of("sum(DISTINCT A.x)") == A.Aggregate(S, "SUM", (col("x", "A"),), distinct=True)
    assert expr_of("max_by(x, y)") == A.Aggregate(S, "MAX_BY", (col("x"), col("y")))
    assert expr_of("classifier(U)") == A.Classifier(S, A.Identifier(S, "U"))
    assert expr_of("match_number()") == A.MatchNumber(S)
    assert expr_of("MATCH_STATUS()") == A.MatchStatus(S)
    assert expr_of("last(x, 2)") == A.Navigation(S, "LAST", col("x"), integer(2))


def test_running_and_final_attach_to_the_call_after_them() -> None:
    assert expr_of("FINAL count(*)") == A.Aggregate(S, "COUNT", (A.Star(S),), semantics="FINAL")
    assert expr_of("PREV(RUNNING LAST(value))") == A.Navigation(
        S, "PREV", A.Navigation(S, "LAST", col("value"), semantics="RUNNING")
    )
    assert expr_of("concat_ws('', RUNNING array_agg(x))").args[1] == A.Aggregate(
        S, "ARRAY_AGG", (col("x"),), semantics="RUNNING"
    )
    # On anything else RUNNING/FINAL is kept, for the checker to reject.
    assert expr_of("RUNNING lower(x)") == A.FunctionCall(S, "LOWER", (col("x"),), semantics="RUNNING")
    assert expr_of("FINAL CLASSIFIER(A)") == A.FunctionCall(S, "CLASSIFIER", (col("A"),), semantics="FINAL")


def test_order_by_proctime() -> None:
    keys = parse(mr("ORDER BY PROCTIME(), ts DESC PATTERN (A)")).match.order_by
    assert keys == (A.SortKey(S, A.ProcTime(S)), A.SortKey(S, col("ts"), descending=True))


# --------------------------------------------------------------------------------- whole clauses


def test_rows_per_match_and_skip_forms() -> None:
    def clause(text: str) -> A.MatchRecognize:
        return parse_unchecked(mr(f"ORDER BY ts {text} PATTERN (A B) WITHIN INTERVAL '1' SECOND")).match

    assert clause("").rows_per_match == A.RowsPerMatch(S, "ONE", explicit=False)
    assert clause("ONE ROW PER MATCH").rows_per_match == A.RowsPerMatch(S, "ONE", explicit=True)
    assert clause("ONE ROW PER MATCH SHOW TIMEOUT MATCHES").rows_per_match == A.RowsPerMatch(
        S, "ONE", show_timeout=True, explicit=True
    )
    assert clause("ALL ROWS PER MATCH").rows_per_match == A.RowsPerMatch(S, "ALL_SHOW_EMPTY")
    assert clause("ALL ROWS PER MATCH SHOW EMPTY MATCHES").rows_per_match == A.RowsPerMatch(
        S, "ALL_SHOW_EMPTY", explicit=True
    )
    assert clause("ALL ROWS PER MATCH OMIT EMPTY MATCHES").rows_per_match.mode == "ALL_OMIT_EMPTY"
    assert clause("ALL ROWS PER MATCH WITH UNMATCHED ROWS").rows_per_match.mode == "ALL_WITH_UNMATCHED"
    assert clause("AFTER MATCH SKIP TO NEXT ROW").after_match == A.SkipTo(S, "TO_NEXT_ROW")
    assert clause("AFTER MATCH SKIP TO FIRST B").after_match == A.SkipTo(S, "TO_FIRST", A.Identifier(S, "B"))
    assert clause("AFTER MATCH SKIP TO LAST B").after_match == A.SkipTo(S, "TO_LAST", A.Identifier(S, "B"))
    assert clause("SEEK").seek and clause("INITIAL").explicit_initial
    assert clause("").after_match is None


def test_spans_point_at_the_source() -> None:
    text = "SELECT *\nFROM t MATCH_RECOGNIZE (\n  PATTERN (A B+)\n  DEFINE B AS B.price > 10)"
    define = parse(text).match.defines[0]
    span = define.condition.left.span
    assert (span.line, span.column, span.end_line, span.end_column) == (4, 15, 4, 22)
    assert text[span.start : span.end] == "B.price"
    assert parse(text).match.pattern.items[1].span.column == 14


# ------------------------------------------------------------------------------- parse_all, schema


def test_parse_all_names_statements_and_keeps_file_positions() -> None:
    text = (
        "-- name: first_one\nSELECT * FROM t MATCH_RECOGNIZE (PATTERN (A));\n\n"
        "-- a comment\n-- name: second\nSELECT * FROM u MATCH_RECOGNIZE (PATTERN (B));\n"
        "SELECT * FROM v MATCH_RECOGNIZE (PATTERN (C))"
    )
    statements = parse_all(text, filename="q.sql")
    assert [s.name for s in statements] == ["first_one", "second", None]
    assert [s.relation.name for s in statements] == ["t", "u", "v"]
    assert statements[1].match.pattern.span.line == 6
    with pytest.raises(CepError) as raised:
        parse_all(text.replace("PATTERN (C)", "PATTERN (C) DEFINE D AS true"), filename="q.sql")
    assert raised.value.line == 7 and str(raised.value).startswith("q.sql:7:")


def test_parse_all_ignores_semicolons_in_strings_and_comments() -> None:
    text = "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS x = ';') -- ;\n;"
    assert len(parse_all(text)) == 1


def test_parse_schema() -> None:
    schema = parse_schema(
        "ts TIMESTAMP, symbol STRING, price DOUBLE, n LONG, i INT, f FLOAT, d DECIMAL(10, 2), "
        "`odd name` varchar, ok boolean, xs ARRAY<INT>"
    )
    assert schema == {
        "ts": "TIMESTAMP",
        "symbol": "VARCHAR",
        "price": "DOUBLE",
        "n": "BIGINT",
        "i": "INTEGER",
        "f": "DOUBLE",
        "d": "DECIMAL(10,2)",
        "odd name": "VARCHAR",
        "ok": "BOOLEAN",
        "xs": "ARRAY<INT>",
    }
    with pytest.raises(CepSyntaxError) as raised:
        parse_schema("ts TIMESTAMP, price MONEY")
    assert raised.value.code == "E0115" and raised.value.column == 15


def test_a_number_past_a_doubles_range_is_refused_as_spark_refuses_it() -> None:
    # Spark 4.2: SELECT 1e400 is a ParseException (out of DOUBLE's range); 1e-400 is 0.0 (test_literals).
    with pytest.raises(CepSyntaxError) as raised:
        parse("SELECT * FROM t MATCH_RECOGNIZE (MEASURES 1e400 AS a PATTERN (A))")
    assert raised.value.code == "E0108" and raised.value.column == 43 and "1e400" in raised.value.message


def test_parse_schema_keeps_a_decimals_size() -> None:
    # Spark's DDL (StructType.fromDDL, spark.read.schema) reads DECIMAL, DEC and NUMERIC alone as DECIMAL(10,0).
    schema = parse_schema("a DECIMAL(10,2), b decimal, c NUMERIC(5), d dec(38, 38), e DECIMAL(1, 0)")
    assert schema == {
        "a": "DECIMAL(10,2)",
        "b": "DECIMAL(10,0)",
        "c": "DECIMAL(5,0)",
        "d": "DECIMAL(38,38)",
        "e": "DECIMAL(1,0)",
    }


@pytest.mark.parametrize(
    "written, why",
    [
        ("DECIMAL(39, 2)", "precision is 1 to 38, not 39"),
        ("DECIMAL(0)", "precision is 1 to 38, not 0"),
        ("NUMERIC(3,4)", "scale is 0 to its precision (3), not 4"),
    ],
)
def test_a_decimal_size_spark_refuses_is_a_schema_error(written: str, why: str) -> None:
    with pytest.raises(CepSyntaxError) as raised:
        parse_schema(f"ts TIMESTAMP, x {written}")
    assert raised.value.code == "E0115" and raised.value.column == 15 and why in raised.value.message
    assert "^" * len(f"x {written}") in str(raised.value)


def test_limits_on_the_text() -> None:
    with pytest.raises(CepSemanticError) as raised:
        parse(mr("PATTERN (A) DEFINE A AS " + "(" * 300 + "1" + ")" * 300))
    assert raised.value.code == "E0302"
    with pytest.raises(CepSemanticError) as raised:
        parse(mr("PATTERN (A) DEFINE A AS x = 1" + " /* padding */" * 20_000))
    assert raised.value.code == "E0301"


def test_spans_are_values_and_node_equality_leaves_them_out():
    """Two texts that mean the same query give equal (and equally hashed) ASTs, while their spans stay
    real values that differ where the texts do (``field(compare=False)`` on each node's span)."""
    tight = parse_unchecked("SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A B))")
    loose = parse_unchecked("SELECT *\nFROM t MATCH_RECOGNIZE (\n  PATTERN ( A  B )\n)")
    assert tight == loose and hash(tight) == hash(loose)
    assert tight.match.pattern.span != loose.match.pattern.span
    assert Span(1, 2, 1, 3, 1, 2) == Span(1, 2, 1, 3, 1, 2) != Span(2, 2, 2, 3, 9, 10)
    assert len({Span(1, 1), Span(1, 1), Span(2, 1)}) == 2


def test_parse_schema_names_a_column_left_without_a_type() -> None:
    # 'price' with its type forgotten was read as a column 'pric' of type 'e' ("unknown type 'e'").
    with pytest.raises(CepSyntaxError) as caught:
        parse_schema("symbol STRING, day DATE, price")
    assert "column 'price' has no type" in caught.value.message and caught.value.span.column == 26
    with pytest.raises(CepSyntaxError, match="unknown type 'DOUBL'"):
        parse_schema("ts TIMESTAMP, price DOUBL")
    assert parse_schema('a:INT, "b c" DOUBLE, `x`STRING') == {"a": "INTEGER", "b c": "DOUBLE", "x": "VARCHAR"}
