"""TIME values in the SQL around MATCH_RECOGNIZE: Spark 4.2 reads a ``TIME '...'`` literal and runs a few
functions over it (a cast to text, comparisons, concat, length, max, greatest, array, count); every other
function of a TIME (``hour``, ``minute``, ``second``, ``EXTRACT``, ``coalesce``, ``if``, ``+ INTERVAL``, a date
function) is Spark's error, so the python engine, whose DuckDB would answer, refuses it before running, at the
function, in ``cep check`` too (cep/duckdb_functions.py, ``time_values_spark_refuses``): as the statement's own
error (E0250), since Spark fails alike, without a hint to run it there. Spark's answers are its own."""

from __future__ import annotations

import pytest

import cep

HEAD = (
    "WITH m AS (SELECT * FROM sqltime_events MATCH_RECOGNIZE (ORDER BY id MEASURES A.id AS id "
    "ONE ROW PER MATCH PATTERN (A) DEFINE A AS TRUE) r)\n"
)
REFUSED = [
    "hour(TIME '01:02:03')",
    "minute(TIME '01:02:03')",
    "second(TIME '01:02:03')",
    "extract(HOUR FROM TIME '01:02:03')",
    "coalesce(TIME '01:02:03', NULL)",
    "if(id > 0, TIME '01:02:03', NULL)",
    "TIME '01:02:03' + INTERVAL '1' HOUR",
    "year(TIME '01:02:03')",
    "date_format(TIME '01:02:03', 'HH')",
]
ACCEPTED = [
    "CAST(TIME '01:02:03' AS STRING)",
    "TIME '01:02:03' < TIME '01:02:04'",
    "concat('a', TIME '01:02:03')",
    # the length of its text, without the fraction's trailing zeros (DuckDB has no length(TIME): its raw error)
    "length(TIME '01:02:03.120')",
    "length(TIME '01:02:03.123456')",
]


def statement(expression: str) -> str:
    return HEAD + f"SELECT {expression} AS v FROM m"


@pytest.mark.parametrize("expression", REFUSED)
def test_a_function_spark_refuses_over_a_time_is_refused_at_the_function(expression) -> None:
    for run in (cep.check_sql, lambda text: cep.compile_sql(text).run({"sqltime_events": [{"id": 1}]})):
        with pytest.raises(cep.CepError) as caught:
            run(statement(expression))
        error = caught.value
        # Spark's error too: the statement's own (E0250, as CAST(x AS TIME) is), without a hint to run it on Spark
        assert error.code == "E0250" and "TIME value" in error.message, str(error)
        assert error.span.line == 2 and error.span.column > len("SELECT "), str(error)
        assert "--engine spark" not in str(error) and "Spark may run it" not in str(error), str(error)


@pytest.mark.spark
@pytest.mark.parametrize("expression", REFUSED)
def test_spark_refuses_it_too(spark, expression) -> None:
    with pytest.raises(Exception, match="TIME"):
        spark.sql(f"SELECT {expression} AS v FROM VALUES (1) AS t(id)").collect()


@pytest.mark.spark
@pytest.mark.parametrize("expression", ACCEPTED)
def test_what_spark_runs_over_a_time_the_python_engine_answers_alike(spark, expression) -> None:
    (expected,) = spark.sql(f"SELECT {expression} AS v FROM VALUES (1) AS t(id)").collect()
    rows = cep.compile_sql(statement(expression)).run({"sqltime_events": [{"id": 1}]})
    assert [row["v"] for row in rows] == [expected["v"]]
