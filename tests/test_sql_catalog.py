"""Spark's function catalogue on the python engine (cep/duckdb_catalog.py): a function Spark does not have is
Spark's error on both engines (sqlglot reads names of every dialect, and DuckDB would answer), and the
arguments Spark's functions default otherwise than DuckDB's give Spark's answer.

Expected values come from Spark itself: each case runs on the ``spark`` fixture and on the python engine, on
the same rows. Found by the differential test's rounds (tests/test_sql_differential.py) and by trying the
functions docs/language.md lists for the clause in the SQL around it.
"""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

import cep
from cep.duckdb_catalog import SPARK_BUILTIN_FUNCTIONS

TABLE = "sqlc_events"
ROWS = [
    {"id": 1, "s": "a", "i": 1},
    {"id": 2, "s": None, "i": 2},
    {"id": 3, "s": "b", "i": 3},
    {"id": 4, "s": "", "i": 4},
]
ARROW = pa.schema([("id", pa.int32()), ("s", pa.string()), ("i", pa.int32())])
HEAD = (
    f"WITH m AS (SELECT * FROM {TABLE} MATCH_RECOGNIZE (ORDER BY id ALL ROWS PER MATCH PATTERN (A) "
    "DEFINE A AS TRUE) r)\n"
)


@pytest.fixture(scope="module")
def events(spark):
    spark.createDataFrame([tuple(row.values()) for row in ROWS], "id INT, s STRING, i INT").createOrReplaceTempView(
        TABLE
    )
    return spark


def python_run(text: str):
    return cep.compile_sql(text).run({TABLE: pa.Table.from_pylist(ROWS, schema=ARROW)}, kind="arrow")


@pytest.mark.spark
def test_the_names_are_sparks_show_functions(events) -> None:
    """The catalogue is Spark's own on the pinned pyspark (regenerate it when the pin moves)."""
    listed = {row[0] for row in events.sql("SHOW FUNCTIONS").collect()}
    named = {name.upper() for name in listed if re.fullmatch(r"[a-z_][a-z0-9_]*", name)}
    assert SPARK_BUILTIN_FUNCTIONS == named - DELTAS_TABLE_FUNCTIONS


# The test session has Delta Lake's connector, whose extension adds its table functions (FROM position only).
DELTAS_TABLE_FUNCTIONS = {"TABLE_CHANGES", "TABLE_CHANGES_BY_PATH"}


# Functions of other dialects that sqlglot's Spark dialect reads and DuckDB ran (each gave a value on the
# python engine, where Spark refuses the statement).
NOT_SPARKS = ["strpos(s, 'b')", "starts_with(s, 'a')", "ends_with(s, 'b')", "array_length(array(i))"]
NOT_SPARKS_DATES = ["week(DATE '2021-03-28')", "isodow(DATE '2021-03-28')", "to_days(i)", "str_position(s, 'b')"]


@pytest.mark.spark
@pytest.mark.parametrize("expression", NOT_SPARKS + NOT_SPARKS_DATES)
def test_a_function_spark_does_not_have_is_sparks_error_on_both(events, expression) -> None:
    text = HEAD + f"SELECT {expression} AS v FROM m"
    with pytest.raises(cep.CepError) as caught:
        python_run(text)
    error = caught.value
    assert error.code == "E0250" and "Spark SQL has no built-in function" in error.message, str(error)
    assert text[error.span.start :].startswith(expression.split("(")[0]), str(error)  # at the call
    with pytest.raises(Exception, match="UNRESOLVED_ROUTINE|Cannot resolve routine"):
        cep.sql(events, text).collect()


@pytest.mark.parametrize("engine", ["python", "spark"])
def test_cep_check_says_it_for_both_engines(engine) -> None:
    text = HEAD + "SELECT strpos(s, 'b') AS v FROM m"
    with pytest.raises(cep.CepError, match=r"no built-in function STRPOS\(\).*Spark's is instr"):
        cep.check_sql(text, engine=engine)


def test_sparks_own_functions_still_run() -> None:
    """Spark's names (and the calls its grammar reads: timestampadd, TRY_CAST) are untouched."""
    text = HEAD + "SELECT instr(s, 'b') AS a, startswith(s, 'a') AS b, TRY_CAST(s AS INT) AS c FROM m ORDER BY id"
    out = python_run(text).to_pylist()
    assert out == [
        {"a": 0, "b": True, "c": None},
        {"a": None, "b": None, "c": None},
        {"a": 1, "b": False, "c": None},
        {"a": 0, "b": False, "c": None},
    ]


# listagg/string_agg without a separator (or a NULL one): Spark joins with nothing between (DuckDB: a comma).
# Spark's answers on ROWS, checked by the test below: 'a', NULL, 'b', '' joined in id order.
SEPARATOR_DEFAULTS = {
    "listagg(s) WITHIN GROUP (ORDER BY id)": "ab",
    "string_agg(s) WITHIN GROUP (ORDER BY id)": "ab",
    "string_agg(s, NULL) WITHIN GROUP (ORDER BY id)": "ab",
    "listagg(i) WITHIN GROUP (ORDER BY id DESC)": "4321",
    "listagg(s, '-') WITHIN GROUP (ORDER BY id)": "a-b-",
}


@pytest.mark.spark
@pytest.mark.parametrize("expression", sorted(SEPARATOR_DEFAULTS))
def test_listagg_without_a_separator_joins_with_nothing_as_on_spark(events, expression) -> None:
    text = HEAD + f"SELECT {expression} AS v FROM m"
    spark = [row["v"] for row in cep.sql(events, text).collect()]
    assert spark == [SEPARATOR_DEFAULTS[expression]]
    assert python_run(text).column("v").to_pylist() == spark
