"""An error the data raises while a clause runs (an INT overflow in DEFINE, a CAST that fails in MEASURES)
is raised inside a Spark task, in mapInArrow's Python worker, and reaches the driver as Spark's exception:
the user gets the python engine's CepError all the same, with its code, line, column, caret and partition.

The expected texts are written out here: the numbers by hand (3 * 2147483647 = 6442450941, past INT's
2147483647, where Spark's ANSI mode fails too; 'abc' is no INT), the carets under the expressions as
written (``A.i * 2147483647`` and ``CAST(A.s AS INT)``, 16 characters each). Both engines must print them.
"""

from __future__ import annotations

import pytest

import cep
from cep.cli import main

OVERFLOW = """SELECT * FROM t MATCH_RECOGNIZE (
  ORDER BY ts
  MEASURES A.i AS i
  PATTERN (A)
  DEFINE A AS A.i * 2147483647 > 0
)
"""
OVERFLOW_ERROR = (
    "{file}:5:15: error[E0410]: integer overflow: '*' gives 6442450941, outside the range of INTEGER "
    "(-2147483648 to 2147483647); Spark SQL fails here too (ANSI mode) (partition (whole input), row 1 in "
    "ORDER BY order)\n"
    "   5 |   DEFINE A AS A.i * 2147483647 > 0\n"
    "     |               ^^^^^^^^^^^^^^^^\n"
    "  hint: CAST an operand to BIGINT (or to DECIMAL(38,0) past BIGINT) to compute in a wider type\n"
)

# A whole statement (the clause reads a subquery, its rows sorted after it), the error in partition b.
CAST = """-- the clause reads a subquery
SELECT k, n FROM (SELECT * FROM t WHERE id > 0) MATCH_RECOGNIZE (
  PARTITION BY k
  ORDER BY ts
  MEASURES CAST(A.s AS INT) AS n
  PATTERN (A)
  DEFINE A AS A.i > 0
) ORDER BY k
"""
CAST_ERROR = (
    "{file}:5:12: error[E0411]: cannot cast 'abc' to INT (partition (k='b'), row 1 in ORDER BY order)\n"
    "   5 |   MEASURES CAST(A.s AS INT) AS n\n"
    "     |            ^^^^^^^^^^^^^^^^\n"
)
ROWS = "k,id,ts,i,s\na,1,2024-01-01 00:00:00,3,12\nb,2,2024-01-01 00:00:01,5,abc\n"


@pytest.mark.spark
@pytest.mark.parametrize("query, expected", [(OVERFLOW, OVERFLOW_ERROR), (CAST, CAST_ERROR)], ids=["define", "cast"])
def test_cep_run_prints_the_same_error_on_both_engines(tmp_path, capsys, spark, query, expected):
    path, data = tmp_path / "q.sql", tmp_path / "t.csv"
    path.write_text(query, encoding="utf-8")
    data.write_text(ROWS, encoding="utf-8")
    schema = "t=k STRING, id INT, ts TIMESTAMP, i INT, s STRING"  # i an INT, as Spark reads it
    printed = {}
    for engine in ("python", "spark"):
        assert main(["run", str(path), "-i", f"t={data}", "--schema", schema, "--engine", engine]) == 1
        captured = capsys.readouterr()
        assert captured.out == ""
        printed[engine] = captured.err
    assert printed == {"python": expected.format(file=path), "spark": expected.format(file=path)}


@pytest.mark.spark
def test_collect_raises_spark_s_exception_carrying_the_cep_error(spark):
    """``q.on_spark(df)`` is lazy: the error comes at ``collect()``, as Spark's exception; its text holds
    the rendered error, and ``cep.spark_cep_error`` gives the CepError itself."""
    query = cep.compile(OVERFLOW, filename="q.sql")
    df = spark.createDataFrame([(1, 3)], "id INT, i INT").selectExpr("id", "TIMESTAMP '2024-01-01 00:00:00' AS ts", "i")
    with pytest.raises(Exception) as raised:  # noqa: PT011 - Spark's class (PythonException), not ours
        query.on_spark(df).collect()
    assert not isinstance(raised.value, cep.CepError)
    assert OVERFLOW_ERROR.format(file="q.sql").rstrip("\n") in str(raised.value)
    error = cep.spark_cep_error(raised.value)
    assert isinstance(error, cep.CepRuntimeError)
    assert (error.code, error.line, error.column) == ("E0410", 5, 15)
    assert str(error) + "\n" == OVERFLOW_ERROR.format(file="q.sql")
    assert cep.spark_cep_error(ValueError("not Spark's")) is None
