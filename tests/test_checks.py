"""The semantic checks: one test (at least) per check, plus the all-problems-at-once behaviour."""

from __future__ import annotations

import pytest

from cep.grammar.checks import check
from cep.grammar.errors import CepSemanticError
from cep.grammar.parser import parse, parse_unchecked

SCHEMA = {
    "ts": "TIMESTAMP",
    "symbol": "VARCHAR",
    "price": "DOUBLE",
    "qty": "BIGINT",
    "ok": "BOOLEAN",
    "tags": "ARRAY<VARCHAR>",
    "day": "DATE",
}


def codes(query: str, schema: dict | None = None) -> list[str]:
    """The codes of every problem ``check`` finds, in the order reported ([] when none)."""
    try:
        check(parse_unchecked(query), schema=schema, source=query)
    except CepSemanticError as error:
        return [d.code for d in error.errors]
    return []


def messages(query: str, schema: dict | None = None) -> list[str]:
    with pytest.raises(CepSemanticError) as raised:
        check(parse_unchecked(query), schema=schema, source=query)
    return [d.message + (f" ({d.hint})" if d.hint else "") for d in raised.value.errors]


def mr(body: str, select: str = "*", tail: str = " AS m") -> str:
    return f"SELECT {select} FROM t MATCH_RECOGNIZE ({body}){tail}"


def test_a_correct_query_passes() -> None:
    query = mr(
        "PARTITION BY symbol ORDER BY ts MEASURES FIRST(A.price) AS start, LAST(B.price) AS bottom, "
        "COUNT(B.*) AS n, FINAL AVG(B.price) AS mean ONE ROW PER MATCH AFTER MATCH SKIP TO LAST B "
        "PATTERN (A B+ C) SUBSET U = (A, B) DEFINE B AS B.price < PREV(B.price), C AS C.price > LAST(U.price)",
        select="m.symbol, m.start, m.bottom, m.n, m.mean",
    )
    assert codes(query, SCHEMA) == []


# ----------------------------------------------------------------------------------- variables


def test_define_of_a_variable_not_in_the_pattern() -> None:
    assert codes(mr("PATTERN (A B) DEFINE C AS true")) == ["E0202"]
    assert "did you mean 'Bee'?" in messages(mr("PATTERN (A Bee) DEFINE Be AS true"))[0]


def test_variable_defined_twice() -> None:
    assert codes(mr("PATTERN (A B) DEFINE A AS true, a AS false")) == ["E0203"]


def test_quoted_variables_are_case_sensitive() -> None:
    assert codes(mr('PATTERN ("a" A) DEFINE "a" AS true, A AS false')) == []
    assert codes(mr('PATTERN ("a") DEFINE A AS true')) == ["E0202"]


def test_subset_naming_an_unknown_variable() -> None:
    assert codes(mr("PATTERN (A B) SUBSET U = (A, X)")) == ["E0204"]


def test_subset_name_colliding_with_a_variable_or_another_subset() -> None:
    assert codes(mr("PATTERN (A B) SUBSET A = (B)")) == ["E0205"]
    assert codes(mr("PATTERN (A B) SUBSET U = (A), U = (B)")) == ["E0205"]


def test_unknown_qualifier_inside_match_recognize() -> None:
    query = mr("MEASURES C.price AS p PATTERN (A B) DEFINE B AS X.price > 1")
    assert codes(query) == ["E0206", "E0206"]
    assert messages(query)[0].startswith("pattern variable 'C' is used in MEASURES but never appears in PATTERN")
    assert codes(mr("MEASURES CLASSIFIER(Z) AS c, COUNT(Z.*) AS n PATTERN (A)")) == ["E0206", "E0206"]


def test_subset_names_and_pattern_variables_are_valid_qualifiers() -> None:
    assert codes(mr("MEASURES U.price AS p, CLASSIFIER(U) AS c PATTERN (A B) SUBSET U = (A, B)")) == []


def test_outer_qualifier_must_be_the_match_recognize_alias() -> None:
    assert codes(mr("MEASURES A.x AS x PATTERN (A)", select="t.x")) == ["E0207"]
    assert codes(mr("MEASURES A.x AS x PATTERN (A)", select="m.x", tail="")) == ["E0207"]
    assert codes(mr("MEASURES A.x AS x PATTERN (A)", select="n.*")) == ["E0207"]
    assert codes(mr("MEASURES A.x AS x PATTERN (A)", select="m.x, x, m.*")) == []


def test_row_pattern_functions_are_not_allowed_in_the_outer_query() -> None:
    query = mr("MEASURES A.x AS x PATTERN (A)", select="LAST(m.x), CLASSIFIER()", tail=" AS m WHERE MATCH_NUMBER() > 1")
    assert codes(query) == ["E0208", "E0208", "E0208"]


def test_outer_columns_must_be_outputs_of_one_row_per_match() -> None:
    assert codes(mr("PARTITION BY symbol MEASURES A.x AS x PATTERN (A)", select="m.symbol, m.x, m.y")) == ["E0221"]
    assert codes(mr("MEASURES A.x AS x PATTERN (A)", tail=" AS m ORDER BY x, y")) == ["E0221"]
    assert codes(mr("MEASURES A.x AS x PATTERN (A)", select="x AS renamed", tail=" AS m ORDER BY renamed")) == []
    # ALL ROWS PER MATCH outputs every input column: only known with a schema.
    assert codes(mr("ALL ROWS PER MATCH PATTERN (A)", select="m.anything")) == []
    assert codes(mr("ALL ROWS PER MATCH PATTERN (A)", select="m.anything, m.price"), SCHEMA) == ["E0221"]


# ---------------------------------------------------------------------------------- navigation


def test_navigation_nested_in_the_same_kind() -> None:
    assert codes(mr("MEASURES PREV(PREV(A.x)) AS p, FIRST(LAST(A.x)) AS q PATTERN (A)")) == ["E0210", "E0210"]


def test_physical_navigation_inside_logical_navigation() -> None:
    assert codes(mr("MEASURES LAST(PREV(A.x)) AS p PATTERN (A)")) == ["E0216"]


def test_logical_inside_physical_only_as_the_whole_argument() -> None:
    assert codes(mr("MEASURES PREV(LAST(A.x), 2) AS p, NEXT(FIRST(A.x, 1)) AS q PATTERN (A)")) == []
    assert codes(mr("MEASURES PREV(LAST(A.x) + 1) AS p PATTERN (A)")) == ["E0217"]


def test_aggregates_inside_navigation_and_aggregates() -> None:
    assert codes(mr("MEASURES PREV(SUM(A.x)) AS p PATTERN (A)")) == ["E0211"]
    assert codes(mr("MEASURES SUM(AVG(A.x)) AS p PATTERN (A)")) == ["E0215"]


def test_navigation_inside_aggregates() -> None:
    assert codes(mr("MEASURES SUM(PREV(A.x)) AS p PATTERN (A)")) == ["E0218"]


def test_argument_referring_to_two_variables() -> None:
    assert codes(mr("MEASURES LAST(A.x + B.y) AS p, MAX_BY(A.x, B.y) AS q PATTERN (A B)")) == ["E0212", "E0212"]
    assert (
        codes(mr("MEASURES LAST(A.x + y) AS p, array_agg(U.x || CLASSIFIER(U)) AS q PATTERN (A B) SUBSET U = (A, B)"))
        == []
    )


def test_offset_must_be_a_non_negative_integer_constant() -> None:
    assert codes(mr("MEASURES PREV(A.x, -1) AS p, LAST(A.x, A.y) AS q, FIRST(A.x, 1.5) AS r PATTERN (A)")) == [
        "E0213",
        "E0213",
        "E0213",
    ]
    assert codes(mr("MEASURES PREV(A.x, 0) AS p PATTERN (A)")) == []


def test_final_in_define() -> None:
    assert codes(mr("PATTERN (A) DEFINE A AS FINAL LAST(A.x) > 0 AND FINAL COUNT(*) > 1")) == ["E0214", "E0214"]
    assert codes(mr("PATTERN (A) DEFINE A AS RUNNING LAST(A.x) > 0")) == []


def test_match_number_is_allowed_in_define_as_trino_does() -> None:
    assert codes(mr("PATTERN (A) DEFINE A AS MATCH_NUMBER() > 1")) == []


def test_running_and_final_on_something_else() -> None:
    query = mr("MEASURES RUNNING PREV(A.x) AS p, FINAL lower(A.s) AS q, RUNNING CLASSIFIER() AS c PATTERN (A)")
    assert codes(query) == ["E0222", "E0222", "E0222"]


def test_star_only_in_count() -> None:
    assert codes(mr("MEASURES SUM(*) AS s, PREV(*) AS p PATTERN (A)")) == ["E0232", "E0232"]


def test_aggregate_without_argument() -> None:
    assert codes(mr("MEASURES SUM() AS s, COUNT() AS n PATTERN (A)")) == ["E0233"]


# ------------------------------------------------------------------------------------- options


def test_skip_to_a_variable_not_in_the_pattern() -> None:
    assert codes(mr("AFTER MATCH SKIP TO LAST D PATTERN (A B)")) == ["E0223"]
    assert codes(mr("AFTER MATCH SKIP TO U PATTERN (A B) SUBSET U = (A)")) == []


def test_show_timeout_matches_needs_within() -> None:
    assert codes(mr("ORDER BY ts ONE ROW PER MATCH SHOW TIMEOUT MATCHES PATTERN (A B)")) == ["E0227"]
    assert (
        codes(mr("ORDER BY ts ONE ROW PER MATCH SHOW TIMEOUT MATCHES PATTERN (A B) WITHIN INTERVAL '1' MINUTE")) == []
    )


def test_within_needs_a_positive_interval_and_an_order() -> None:
    assert codes(mr("ORDER BY ts PATTERN (A B) WITHIN INTERVAL '0' MINUTE")) == ["E0238"]
    assert codes(mr("ORDER BY ts PATTERN (A B) WITHIN INTERVAL -'5' MINUTE")) == ["E0238"]
    assert codes(mr("PATTERN (A B) WITHIN INTERVAL '5' MINUTE")) == ["E0240"]


def test_match_status_needs_timeouts_or_absence() -> None:
    assert codes(mr("ORDER BY ts MEASURES MATCH_STATUS() AS s PATTERN (A B)")) == ["E0228"]
    assert codes(mr("ORDER BY ts MEASURES MATCH_STATUS() AS s PATTERN (A !B C)")) == []
    assert (
        codes(
            mr(
                "ORDER BY ts MEASURES MATCH_STATUS() AS s ONE ROW PER MATCH SHOW TIMEOUT MATCHES "
                "PATTERN (A B) WITHIN INTERVAL '1' HOUR"
            )
        )
        == []
    )
    assert codes(mr("ORDER BY ts PATTERN (A !B C) DEFINE A AS MATCH_STATUS() = 'MATCHED'")) == ["E0229"]


# ------------------------------------------------------------------------------------- absence


def test_absence_cannot_start_the_pattern() -> None:
    assert codes(mr("ORDER BY ts PATTERN (!B A) WITHIN INTERVAL '1' HOUR")) == ["E0224"]


def test_absence_at_the_end_needs_within() -> None:
    assert codes(mr("ORDER BY ts PATTERN (A !B)")) == ["E0225"]
    assert codes(mr("ORDER BY ts PATTERN (A !B) WITHIN INTERVAL '1' HOUR")) == []


def test_absence_inside_quantifier_alternation_permute_exclusion() -> None:
    body = "ORDER BY ts PATTERN (A (!B)* C | D) WITHIN INTERVAL '1' HOUR"
    assert codes(mr(body)) == ["E0226"]
    assert codes(mr("ORDER BY ts PATTERN (A (!B | C) D)")) == ["E0226"]
    assert codes(mr("ORDER BY ts PATTERN (A PERMUTE(!B, C) D)")) == ["E0226"]
    assert codes(mr("ORDER BY ts PATTERN (A {- !B -} D)")) == ["E0226"]
    assert codes(mr("ORDER BY ts PATTERN (A (!B C) D)")) == []  # a group in a sequence is the same sequence


# ---------------------------------------------------------------------------------- functions


def test_unknown_function_with_a_suggestion() -> None:
    query = mr("MEASURES lowr(A.s) AS l PATTERN (A)")
    assert codes(query) == ["E0230"]
    assert "did you mean LOWER()?" in messages(query)[0]


def test_proctime_only_in_order_by() -> None:
    assert codes(mr("ORDER BY PROCTIME() PATTERN (A) DEFINE A AS PROCTIME() IS NOT NULL")) == ["E0231"]


def test_unknown_cast_type() -> None:
    assert codes(mr("MEASURES CAST(A.x AS money) AS c PATTERN (A)")) == ["E0242"]


def test_measure_defined_twice() -> None:
    assert codes(mr("MEASURES A.x AS v, A.y AS V PATTERN (A)")) == ["E0237"]


# ---------------------------------------------------------------------------------- with a schema


def test_unknown_column_with_a_suggestion() -> None:
    query = mr("MEASURES A.pricee AS p PATTERN (A) DEFINE A AS symbl = 'x'")
    assert codes(query, SCHEMA) == ["E0220", "E0220"]
    assert "did you mean 'price'?" in messages(query, SCHEMA)[0]
    assert codes(query) == []  # without a schema nothing is known about columns


def test_column_names_are_case_insensitive_unless_quoted() -> None:
    assert codes(mr('MEASURES A.PRICE AS p, A."price" AS q PATTERN (A)'), SCHEMA) == []
    assert codes(mr('MEASURES A."PRICE" AS p PATTERN (A)'), SCHEMA) == ["E0220"]


def test_partition_and_order_columns_must_exist() -> None:
    assert codes(mr("PARTITION BY sym ORDER BY tss PATTERN (A)"), SCHEMA) == ["E0201", "E0201"]


def test_qualified_partition_and_order_columns() -> None:
    assert codes(mr("PARTITION BY t.symbol PATTERN (A)")) == ["E0239"]


def test_order_by_a_non_orderable_column() -> None:
    assert codes(mr("ORDER BY tags PATTERN (A)"), SCHEMA) == ["E0236"]
    assert codes(mr("ORDER BY ts, symbol, qty, day, ok PATTERN (A)"), SCHEMA) == []


def test_incompatible_comparison() -> None:
    query = mr("PATTERN (A) DEFINE A AS symbol < price OR ok = 1 OR qty BETWEEN 'a' AND 2 OR qty IN (1, 'x')")
    assert codes(query, SCHEMA) == ["E0234", "E0234", "E0234", "E0234"]
    assert messages(query, SCHEMA)[0] == "cannot compare text with a number (CAST one side to the other's type)"


def test_comparisons_that_are_fine() -> None:
    query = mr(
        "PATTERN (A) DEFINE A AS qty < price AND ts > TIMESTAMP '2024-01-01 00:00:00' "
        "AND day = DATE '2024-01-01' AND price = CAST(symbol AS double) AND symbol IS NOT NULL"
    )
    assert codes(query, SCHEMA) == []


def test_a_time_compared_with_text_asks_for_a_time_literal() -> None:
    query = mr("PATTERN (A) DEFINE A AS ts > '2024-01-02 10:00:00' AND day = '2024-01-02'")
    assert codes(query, SCHEMA) == ["E0234", "E0234"]
    with pytest.raises(CepSemanticError) as raised:
        check(parse_unchecked(query), schema=SCHEMA, source=query)
    hints = [d.hint for d in raised.value.errors]
    assert hints == ["write a time literal: TIMESTAMP '2024-01-02 10:00:00'", "write a time literal: DATE '2024-01-02'"]


def test_incompatible_arithmetic() -> None:
    query = mr("PATTERN (A) DEFINE A AS symbol + 1 > 0 OR ts * 2 > ts OR qty - INTERVAL '1' HOUR > 0")
    assert codes(query, SCHEMA) == ["E0235", "E0235", "E0235"]
    assert codes(mr("PATTERN (A) DEFINE A AS ts + INTERVAL '1' HOUR > ts AND qty % 2 = 0"), SCHEMA) == []


def test_div_of_a_double_is_refused_at_check_time() -> None:
    """Spark 4.2 refuses DIV with a DOUBLE side at analysis (DATATYPE_MISMATCH; tests/test_clause_functions.py's
    ``test_spark_refuses_div_of_a_double`` asks it): a DOUBLE column, a number with an exponent, a CAST to
    DOUBLE, arithmetic on one. A BIGINT or a DECIMAL is Spark's DIV, and passes."""
    query = mr(
        "PATTERN (A) DEFINE A AS price DIV 2 > 0 OR qty DIV 1e0 > 0 OR CAST(qty AS DOUBLE) DIV 2 > 0"
        " OR -(price + 1) DIV 3 > 0"
    )
    assert codes(query, SCHEMA) == ["E0235"] * 4
    assert "DIV takes integers and DECIMALs" in messages(query, SCHEMA)[0]
    assert codes(mr("PATTERN (A) DEFINE A AS qty DIV 2 > 0 AND CAST(price AS DECIMAL(9,2)) DIV 2.5 > 0"), SCHEMA) == []


# ------------------------------------------------------------------------------------- limits


def test_quantifier_bound_limit() -> None:
    assert codes(mr("PATTERN (A{501})")) == ["E0303"]
    assert codes(mr("PATTERN (A{2,500})")) == []


def test_permute_arity_limit() -> None:
    assert codes(mr("PATTERN (PERMUTE(A, B, C, D, E, F, G))")) == ["E0304"]
    assert codes(mr("PATTERN (PERMUTE(A, B, C, D, E, F))")) == []


def test_pattern_variable_limit() -> None:
    names = " ".join(f"V{i}" for i in range(101))
    assert codes(mr(f"PATTERN ({names})")) == ["E0305"]


def test_expanded_pattern_size_limit() -> None:
    assert codes(mr("PATTERN ((A{100} B{100}){100})")) == ["E0306"]
    assert codes(mr("PATTERN ((PERMUTE(A, B, C, D, E, F)){2})")) == ["E0306"]
    assert codes(mr("PATTERN ((A{10} B){100})")) == []


# --------------------------------------------------------------------------------- all at once


def test_every_problem_is_reported_sorted_by_position() -> None:
    query = (
        "SELECT m.zz FROM t MATCH_RECOGNIZE (\n"
        "  MEASURES FOO(A.x) AS f\n"
        "  PATTERN (A B)\n"
        "  DEFINE C AS PREV(PREV(A.x)) > 0, A AS FINAL LAST(A.x) > 0\n"
        ") AS m"
    )
    with pytest.raises(CepSemanticError) as raised:
        parse(query, filename="q.sql")
    error = raised.value
    assert [d.code for d in error.errors] == ["E0221", "E0230", "E0202", "E0210", "E0214"]
    assert [(d.span.line, d.span.column) for d in error.errors] == [(1, 8), (2, 12), (4, 10), (4, 20), (4, 41)]
    assert error.code == "E0221" and error.line == 1
    assert str(error).count("error[") == 5


def test_check_renders_against_the_given_source() -> None:
    query = mr("PATTERN (A) DEFINE B AS true")
    with pytest.raises(CepSemanticError) as raised:
        check(parse_unchecked(query), source=query, filename="x.sql")
    assert str(raised.value).startswith("x.sql:1:53: error[E0202]")
