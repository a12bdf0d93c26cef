"""tests/spark_answers.py, the batched Spark answers of the SQL files: each expression's column from a query of
many, and Spark's own error, from the expression's statement alone, where Spark fails.

Expected values are written by hand from the two rows: ``id + 1`` of 1 and 2, ``upper`` of '7' and 'x'; the
cast of 'x' to INT, which Spark (ANSI mode) refuses with CAST_INVALID_INPUT; 1e300 out of INT's range
(CAST_OVERFLOW); a column the rows do not have.
"""

from __future__ import annotations

import pytest

import cep
from tests.spark_answers import SparkAnswers, select_list

VIEW = "spark_answers_rows"


def over_the_rows(columns: list[tuple[str, str]]) -> str:
    """The columns over the rows as a clause gives them back (every row its own match): cep.sql runs statements
    with a clause."""
    return (
        f"WITH m AS (SELECT * FROM {VIEW} MATCH_RECOGNIZE (ORDER BY id MEASURES A.id AS id, A.s AS s "
        "ONE ROW PER MATCH PATTERN (A) DEFINE A AS TRUE) r)\n"
        f"SELECT {select_list(columns)} FROM m ORDER BY id"
    )


def rows_view(spark) -> None:
    spark.createDataFrame([(1, "7"), (2, "x")], "id INT, s STRING").createOrReplaceTempView(VIEW)


@pytest.mark.spark
def test_an_expression_spark_names_in_its_error_runs_alone_and_the_others_together_again(spark) -> None:
    """Spark's cast error names the cast (its query context's fragment), cep's analysis error its place in the
    statement (the unknown column): each is taken out of the chunk, the rest runs together again."""
    rows_view(spark)
    answers = SparkAnswers(spark, over_the_rows, ["id + 1", "CAST(s AS INT)", "upper(s)", "nope + 1"])
    assert answers["id + 1"].typed() == ([2, 3], "int")
    assert answers["upper(s)"].typed() == (["7", "X"], "string")
    with pytest.raises(Exception, match="CAST_INVALID_INPUT") as caught:  # noqa: B017 - Spark's own class
        answers["CAST(s AS INT)"].values()
    assert "CAST(s AS INT) AS v FROM" in str(caught.value)  # the statement of the expression alone, named v
    with pytest.raises(cep.CepError, match="nope"):
        answers["nope + 1"].values()
    # all four (fails at analysis: nope), nope + 1 alone, the other three (fail on the cast), the cast alone,
    # then id + 1 and upper(s) together
    assert answers.queries == 5
    assert answers["id * 2"].typed() == ([2, 4], "int")  # not given up front: a query of its own
    assert answers.queries == 6


@pytest.mark.spark
def test_a_chunk_failing_without_naming_its_expression_is_halved_until_it_runs_alone(spark) -> None:
    """A DOUBLE's cast out of INT's range: Spark's CAST_OVERFLOW names no fragment of the query."""
    rows_view(spark)
    overflow = "CAST(CAST(id AS DOUBLE) * 1e300 AS INT)"
    answers = SparkAnswers(spark, over_the_rows, ["id + 1", overflow, "upper(s)"])
    assert answers["upper(s)"].typed() == (["7", "X"], "string")
    with pytest.raises(Exception, match="CAST_OVERFLOW"):  # noqa: B017 - Spark's own class
        answers[overflow].values()
    assert answers["id + 1"].typed() == ([2, 3], "int")
    # all three together (fails), id + 1 alone, the other two together (fails), then each of them alone
    assert answers.queries == 5
