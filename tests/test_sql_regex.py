"""Spark's regular expressions and LIKE patterns on the python engine (cep/duckdb_regex.py): Java's reading of
a replacement, of a pattern that matches the empty string, and of LIKE's escape character \\, where DuckDB's
RE2 and LIKE read the same text otherwise.

Expected values come from Spark itself: each case runs on the ``spark`` fixture and on the python engine, on
the same rows (the values written here are Spark's answers, checked again by the tests).
"""

from __future__ import annotations

import pyarrow as pa
import pytest

import cep
from tests.spark_answers import SparkAnswers, select_list

TABLE = "sqlr_events"
TEXTS = ["a.b|c_d%e\\f", "", None, "ab12cd", "a_b", "axb"]
ARROW = pa.schema([("id", pa.int32()), ("s", pa.string())])
HEAD = (
    f"WITH m AS (SELECT * FROM {TABLE} MATCH_RECOGNIZE (ORDER BY id ALL ROWS PER MATCH PATTERN (A) "
    "DEFINE A AS TRUE) r)\n"
)


@pytest.fixture(scope="module")
def events(spark):
    spark.createDataFrame(list(enumerate(TEXTS)), "id INT, s STRING").createOrReplaceTempView(TABLE)
    return spark


def select_statement(columns: list[tuple[str, str]]) -> str:
    """The statement that selects each (name, expression) of ``columns``, in the rows' order."""
    return HEAD + "SELECT " + select_list(columns) + " FROM m ORDER BY id"


def statement(expression: str) -> str:
    return select_statement([("v", expression)])


@pytest.fixture(scope="module")
def answers(events) -> SparkAnswers:
    """Spark's answer for every expression of this file's cases, from a few queries (tests/spark_answers.py)."""
    return SparkAnswers(
        events,
        select_statement,
        [*SPARKS_ANSWERS, *EMPTY_MATCHES, *JAVA_ONLY_PATTERNS, REGEXP, *GROUPS_OF_NULL, *GROUPS_PAST_NINE],
        expected_to_fail=[*(f"s LIKE '{pattern}'" for pattern in LIKE_ESCAPES_SPARK_REFUSES), *MISSING_GROUPS],
    )


def python_values(expression: str) -> list:
    table = pa.Table.from_pylist([{"id": n, "s": s} for n, s in enumerate(TEXTS)], schema=ARROW)
    return [row["v"] for row in cep.compile_sql(statement(expression)).run({TABLE: table}, kind="rows")]


def refused_for_spark(expression: str, words: str) -> cep.CepError:
    """The python engine's refusal of ``expression`` before running: E0252 saying ``words``, sending to Spark."""
    with pytest.raises(cep.CepError) as caught:
        python_values(expression)
    assert caught.value.code == "E0252" and words in caught.value.message, str(caught.value)
    assert "--engine spark" in str(caught.value)
    return caught.value


# Spark's answers over TEXTS (Java's replacement: $1 a group, \x the character x; LIKE's escape \).
SPARKS_ANSWERS = {
    # DuckDB wrote '$1$1' as it is
    "regexp_replace(s, '([a-z])', '$1$1')": ["aa.bb|cc_dd%ee\\ff", "", None, "aabb12ccdd", "aa_bb", "aaxxbb"],
    "regexp_replace(s, '(b)', '<$0>')": ["a.<b>|c_d%e\\f", "", None, "a<b>12cd", "a_<b>", "ax<b>"],
    # DuckDB read \1 as the group; Java as the character 1
    "regexp_replace(s, '([a-z])', '\\\\1')": ["1.1|1_1%1\\1", "", None, "111211", "1_1", "111"],
    "regexp_replace(s, 'b', '\\\\$')": ["a.$|c_d%e\\f", "", None, "a$12cd", "a_$", "ax$"],
    "regexp_replace(s, 'b', '\\\\\\\\')": ["a.\\|c_d%e\\f", "", None, "a\\12cd", "a_\\", "ax\\"],
    # DuckDB has no escape character in LIKE: 'a\_b' matched nothing there
    "s LIKE 'a\\\\_b'": [False, False, None, False, True, False],
    "s NOT LIKE 'a\\\\_b'": [True, True, None, True, False, True],
    "s ILIKE 'A\\\\_B'": [False, False, None, False, True, False],
    "s LIKE '%\\\\\\\\%'": [True, False, None, False, False, False],
    "s LIKE 'a!_b' ESCAPE '!'": [False, False, None, False, True, False],
}


@pytest.mark.spark
@pytest.mark.parametrize("expression", sorted(SPARKS_ANSWERS))
def test_javas_reading_of_replacements_and_like_escapes_is_sparks_answer(answers, expression) -> None:
    spark = answers[expression].values()
    assert spark == SPARKS_ANSWERS[expression]
    assert python_values(expression) == spark


# Spark's answers differ from DuckDB's where a pattern matches the empty string (regexp_replace(s, 'x*', '-')
# of 'axb' is '-a--b-' on Spark, '-a-b-' on DuckDB; split keeps a trailing '' on Spark): refused.
EMPTY_MATCHES = ["regexp_replace(s, 'x*', '-')", "split(s, 'x*')", "split(s, '')", "regexp_instr(s, 'x*')"]


@pytest.mark.spark
@pytest.mark.parametrize("expression", EMPTY_MATCHES)
def test_a_pattern_that_matches_the_empty_string_is_refused(answers, expression) -> None:
    refused_for_spark(expression, "matches the empty string")
    assert len(answers[expression].values()) == len(TEXTS)  # Spark runs it


LIKE_ESCAPES_SPARK_REFUSES = ["a\\\\xb", "ab\\\\"]


@pytest.mark.spark
@pytest.mark.parametrize("pattern", LIKE_ESCAPES_SPARK_REFUSES)
def test_a_like_escape_spark_refuses_is_an_error_on_both(answers, pattern) -> None:
    expression = f"s LIKE '{pattern}'"
    with pytest.raises(cep.CepError) as caught:
        python_values(expression)
    assert caught.value.code == "E0250" and "escape character" in caught.value.message, str(caught.value)
    with pytest.raises(Exception, match="INVALID_FORMAT.ESC"):
        answers[expression].values()


@pytest.mark.parametrize(
    "replacement, why", [("'$x'", "without a group number"), ("'$12'", "two digits"), ("'a\\\\'", "ends with")]
)
def test_a_replacement_java_reads_by_its_groups_or_refuses_is_refused(replacement, why) -> None:
    with pytest.raises(cep.CepError, match=why) as caught:
        python_values(f"regexp_replace(s, '(a)', {replacement})")
    assert caught.value.code == "E0252"


# regexp_extract of a group the pattern does not have: Spark fails on each text the pattern matches (its default
# group is 1, so a pattern without groups fails with two arguments); DuckDB answered ''.
MISSING_GROUPS = ["regexp_extract(s, 'a')", "regexp_extract(s, '(a)', 2)"]
# The same over a NULL text, or a text the pattern does not match: NULL or '' on Spark, without the error (Spark
# checks the group once the pattern has found a match; seed 60 of the differential).
GROUPS_OF_NULL = ["regexp_extract(CAST(NULL AS STRING), 'a')", "regexp_extract(s, '(a)(b)')", "regexp_extract(s, 'q')"]


@pytest.mark.spark
@pytest.mark.parametrize("expression", MISSING_GROUPS)
def test_a_group_the_pattern_lacks_is_sparks_error(answers, expression) -> None:
    with pytest.raises(cep.CepError) as caught:
        python_values(expression)
    error = caught.value
    assert error.code == "E0250" and "is not in the pattern" in error.message, str(error)
    assert error.span.line == 2 and error.span.column == len("SELECT ") + 1
    with pytest.raises(Exception, match="REGEX_GROUP_INDEX"):
        answers[expression].values()


@pytest.mark.spark
@pytest.mark.parametrize("expression", GROUPS_OF_NULL)
def test_a_group_of_a_null_or_unmatched_text_or_of_a_pattern_that_has_it_is_sparks_value(answers, expression) -> None:
    spark = answers[expression].values()
    expected = {
        GROUPS_OF_NULL[0]: [None] * 6,
        GROUPS_OF_NULL[1]: ["", "", None, "a", "", ""],
        GROUPS_OF_NULL[2]: ["", "", None, "", "", ""],
    }
    assert spark == expected[expression]
    assert python_values(expression) == spark


# Java's constructs RE2 lacks: Spark answers (the test checks it runs), DuckDB failed with RE2's words
# ("invalid perl operator: (?="); the python engine refuses before running, naming the construct.
JAVA_ONLY_PATTERNS = {
    "s RLIKE 'a(?=b)'": "a lookahead",
    "s RLIKE '(?<=a)b'": "a lookbehind",
    "s RLIKE '(?<!a)b'": "a negative lookbehind",
    "s RLIKE '(?!a)b'": "a negative lookahead",
    "regexp(s, '(a)\\\\1')": "a backreference \\1",
    "regexp_like(s, '(?>a)b')": "an atomic group",
    "regexp_extract(s, '(a)(?=b)', 1)": "a lookahead",
    "regexp_replace(s, 'b++', 'X')": "a possessive quantifier ++",
    "regexp_count(s, '(?<x>a)\\\\k<x>')": "a named group",
}


@pytest.mark.spark
@pytest.mark.parametrize("expression", sorted(JAVA_ONLY_PATTERNS))
def test_a_java_construct_re2_lacks_is_refused_by_name(answers, expression) -> None:
    error = refused_for_spark(expression, JAVA_ONLY_PATTERNS[expression])
    assert error.span.line == 2 and error.span.column == len("SELECT ") + 1
    assert len(answers[expression].values()) == len(TEXTS)  # Spark runs it


# DuckDB extracts groups 0 to 9 only ("Group index must be between 0 and 9!", raw, before the refusal);
# Java any group the pattern has: Spark's group 10 of 'ab12cd' is '2'.
GROUPS_PAST_NINE = [
    "regexp_extract(s, '(a)(b)()()()()()()(1)(2)', 10)",
    "regexp_extract_all(s, '(a)(b)()()()()()()(1)(2)', 10)",
]


@pytest.mark.spark
@pytest.mark.parametrize("expression", GROUPS_PAST_NINE)
def test_a_group_past_nine_is_refused_where_spark_extracts_it(answers, expression) -> None:
    assert refused_for_spark(expression, "groups 0 to 9 only, not group 10").span.line == 2
    spark = answers[expression].values()
    assert spark[TEXTS.index("ab12cd")] in ("2", ["2"])  # Spark runs it


REGEXP = "regexp(s, 'a.b')"


@pytest.mark.spark
def test_regexp_is_rlike_as_on_spark(answers) -> None:
    """Spark's regexp(s, p) is s RLIKE p (the python engine refused it as a function it did not know)."""
    expression = REGEXP
    spark = answers[expression].values()
    assert spark == [True, False, None, False, True, True]
    assert python_values(expression) == spark


@pytest.mark.parametrize(
    "pattern",
    ["[(?=]", "\\\\(?=a\\\\)", "\\\\Q(?=\\\\E", "a?b+c*", "(?i)a", "(?:a)", "(?P<n>a)", "[\\\\1]", "\\\\0", "a{2}"],
)
def test_what_re2_reads_as_java_does_is_not_a_java_construct(pattern) -> None:
    from cep.duckdb_regex import java_only_construct

    assert java_only_construct(pattern.replace("\\\\", "\\")) is None


# LIKE inside the clause (MEASURES, DEFINE) against Spark's LIKE outside it, on the same texts: the clause reads
# its text literals with Spark's backslash escapes, which keep a backslash before _ and %, so these patterns are
# the same text on both; the clause had no default escape character (Spark's is \).
CLAUSE_LIKES = ["'a\\_b'", "'%\\%%'", "'a!_b' ESCAPE '!'", "'a#%b' ESCAPE '#'", "'a!!b' ESCAPE '!'"]


@pytest.mark.spark
@pytest.mark.parametrize("pattern", CLAUSE_LIKES)
def test_like_inside_the_clause_is_sparks_like_outside_it(events, pattern) -> None:
    texts = [*TEXTS, "a!b", "a%b", "a\\xb"]
    table = pa.Table.from_pylist([{"id": n, "s": s} for n, s in enumerate(texts)], schema=ARROW)
    events.createDataFrame(list(enumerate(texts)), "id INT, s STRING").createOrReplaceTempView("sqlr_like")
    spark = [row["v"] for row in events.sql(f"SELECT s LIKE {pattern} AS v FROM sqlr_like ORDER BY id").collect()]
    measured = (
        f"SELECT * FROM {TABLE} MATCH_RECOGNIZE (ORDER BY id MEASURES A.s LIKE {pattern} AS v ALL ROWS PER MATCH "
        "PATTERN (A) DEFINE A AS TRUE) r ORDER BY id"
    )
    assert [row["v"] for row in cep.compile_sql(measured).run({TABLE: table}, kind="rows")] == spark
    defined = (
        f"SELECT * FROM {TABLE} MATCH_RECOGNIZE (ORDER BY id MEASURES A.id AS v ALL ROWS PER MATCH PATTERN (A) "
        f"DEFINE A AS A.s LIKE {pattern}) r ORDER BY id"
    )
    matched = [row["v"] for row in cep.compile_sql(defined).run({TABLE: table}, kind="rows")]
    assert matched == [n for n, hit in enumerate(spark) if hit]


# Text literals with backslashes, as SQL text: inside the clause (MEASURES, DEFINE) they are the text Spark's
# parser reads outside it ('\\' one backslash, '\t' a tab, '\101' the octal A, '\%' keeps its backslash).
CLAUSE_LITERALS = ["'a\\\\b'", "'\\\\'", "'x\\ty'", "'it\\'s'", "'\\u0041\\101'", "'\\q'", "'a\\\\%'", "'\\%'"]


@pytest.mark.spark
@pytest.mark.parametrize("literal", CLAUSE_LITERALS)
def test_a_text_literal_inside_the_clause_is_sparks_text_outside_it(events, literal) -> None:
    texts = ["a\\b", "\\", "x\ty", "it's", "AA", "q", "a\\%", "\\%"]
    spark = events.sql(f"SELECT {literal} AS v").collect()[0]["v"]
    events.createDataFrame(list(enumerate(texts)), "id INT, s STRING").createOrReplaceTempView("sqlr_literals")
    table = pa.Table.from_pylist([{"id": n, "s": s} for n, s in enumerate(texts)], schema=ARROW)
    measured = (
        f"SELECT * FROM sqlr_literals MATCH_RECOGNIZE (ORDER BY id MEASURES {literal} AS v, A.id AS n "
        f"ONE ROW PER MATCH PATTERN (A) DEFINE A AS A.s = {literal}) r"
    )
    python = cep.compile_sql(measured).run({"sqlr_literals": table}, kind="rows")
    on_spark = [row.asDict() for row in cep.sql(events, measured).collect()]
    assert python == on_spark == [{"v": spark, "n": texts.index(spark)}]
