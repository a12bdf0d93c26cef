"""One rule names a column everywhere (``cep/grammar/columns.py``, as Spark resolves names): an unquoted
identifier ignores case, and is an error naming both columns when two differ only in case; a quoted one
is exact. Every clause, input kind and engine agrees: ``ORDER BY Ts`` and ``FIRST(Ts)`` read the same
column of an input holding ``ts`` and ``Ts``, and names given as text (a schema, declared CSV types) are
resolved by the same ``ColumnNames``."""

from __future__ import annotations

import datetime as dt
import functools

import pandas as pd
import pyarrow as pa
import pytest

import cep
from cep.grammar.checks import check
from cep.grammar.columns import ColumnNames
from cep.grammar.errors import CepSemanticError
from cep.grammar.parser import parse_unchecked
from cep.matcher.plan import declared_types
from cep.matcher.rows.text_types import resolve_declared

T0 = dt.datetime(2024, 1, 1)
# ``ts`` runs forwards and ``Ts`` backwards: ordering by one or the other gives opposite matches.
ROWS = [
    {"sym": "a", "ts": T0 + dt.timedelta(seconds=i), "Ts": T0 - dt.timedelta(seconds=i), "price": p}
    for i, p in enumerate([5, 4, 3, 4, 6])
]


def query(order: str, first: str) -> str:
    return (
        f"SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY {order} "
        f"MEASURES FIRST({first}) AS first_time, LAST(B.price) AS bottom "
        "ONE ROW PER MATCH PATTERN (A B+ C) "
        "DEFINE B AS price < PREV(price), C AS price > PREV(price))"
    )


def inputs():
    yield "rows", [dict(row) for row in ROWS]
    yield "pandas", pd.DataFrame(ROWS)
    yield "arrow", pa.Table.from_pylist(ROWS)


def records(result) -> list[dict]:
    if isinstance(result, pd.DataFrame):
        return result.to_dict("records")
    if isinstance(result, pa.Table):
        return result.to_pylist()
    return result


@pytest.fixture(params=[True, False], ids=["fast path", "vm"])
def engine(request):
    """``cep.compile`` on the column-wise engines where they take the query, or on the Pike VM alone."""
    return functools.partial(cep.compile, column_wise=request.param)


@pytest.mark.parametrize("kind,data", list(inputs()), ids=lambda v: v if isinstance(v, str) else "")
def test_an_unquoted_name_two_columns_match_is_an_error_naming_both(engine, kind, data):
    with pytest.raises(CepSemanticError) as raised:
        engine(query("Ts", "Ts")).run(data)
    assert raised.value.code == "E0220"
    assert "'ts'" in raised.value.message and "'Ts'" in raised.value.message
    assert "ambiguous" in raised.value.message


@pytest.mark.parametrize("kind,data", list(inputs()), ids=lambda v: v if isinstance(v, str) else "")
def test_quoted_names_are_exact_and_every_clause_reads_the_same_column(engine, kind, data):
    by_upper = records(engine(query('"Ts"', '"Ts"')).run(data))
    by_lower = records(engine(query('"ts"', '"ts"')).run(data))
    # ORDER BY "Ts" reverses the rows (prices 6 4 3 4 5): the V starts at the row whose "Ts" is T0 - 4 s,
    # and FIRST("Ts") reads that value from the column the rows were ordered by.
    assert [(r["first_time"], r["bottom"]) for r in by_upper] == [(T0 - dt.timedelta(seconds=4), 3)]
    assert [(r["first_time"], r["bottom"]) for r in by_lower] == [(T0, 3)]  # prices 5 4 3 4 6


def test_an_unquoted_name_ignores_case_when_one_column_matches():
    rows = [{k: v for k, v in row.items() if k != "Ts"} for row in ROWS]
    out = cep.compile(query("TS", "tS")).run(rows)
    assert [(r["first_time"], r["bottom"]) for r in out] == [(T0, 3)]


def test_a_quoted_name_of_another_case_is_unknown():
    rows = [{k: v for k, v in row.items() if k != "Ts"} for row in ROWS]
    with pytest.raises(CepSemanticError, match="unknown column 'TS'") as raised:
        cep.compile(query('"TS"', "ts")).run(rows)
    assert raised.value.code == "E0220"


def test_the_checker_applies_the_same_rule_to_a_schema():
    schema = {"sym": "VARCHAR", "ts": "TIMESTAMP", "Ts": "TIMESTAMP", "price": "DOUBLE"}
    with pytest.raises(CepSemanticError) as raised:
        check(parse_unchecked(query("Ts", "Ts")), schema=schema)
    assert [e.code for e in raised.value.errors] == ["E0220", "E0220"]
    assert all("'ts' and 'Ts'" in e.message for e in raised.value.errors)
    check(parse_unchecked(query('"Ts"', '"ts"')), schema=schema)  # quoted: exact, no problem


def test_names_given_as_text_take_the_exact_spelling_first():
    names = ColumnNames(["ts", "Ts", "Price"])
    assert names.find_name("Ts") == "Ts" and names.find_name("price") == "Price"
    assert names.find_name("nope") is None
    with pytest.raises(CepSemanticError, match="ambiguous"):
        names.find_name("TS")


def test_a_declared_csv_type_resolves_its_column_by_the_same_rule():
    assert resolve_declared({"TS": "TIMESTAMP", "price": "DOUBLE"}, ["ts", "Price"]) == {
        "ts": "TIMESTAMP",
        "Price": "DOUBLE",
    }
    assert resolve_declared({"Ts": "TIMESTAMP"}, ["ts", "Ts"]) == {"Ts": "TIMESTAMP"}  # the exact spelling
    with pytest.raises(CepSemanticError) as raised:
        resolve_declared({"TS": "TIMESTAMP"}, ["ts", "Ts"])
    assert raised.value.code == "E0220" and "'ts' and 'Ts'" in raised.value.message
    with pytest.raises(ValueError, match="no column of that name"):
        resolve_declared({"nope": "DOUBLE"}, ["ts"])


@pytest.mark.parametrize("kind,data", list(inputs()), ids=lambda v: v if isinstance(v, str) else "")
def test_a_schema_name_two_columns_match_is_an_error_naming_both(kind, data):
    """A schema's DECIMAL names its column as a query's unquoted name does: ``TS`` matches ``ts`` and
    ``Ts`` alike, so the run is refused instead of typing whichever column came first."""
    with pytest.raises(CepSemanticError) as raised:
        cep.compile(query('"ts"', '"ts"')).run(data, schema={"PRICE": "DECIMAL(10,2)", "TS": "TIMESTAMP"})
    assert raised.value.code == "E0220" and "'ts' and 'Ts'" in raised.value.message


def test_a_schema_types_its_column_ignoring_case():
    rows = [{k: v for k, v in row.items() if k != "Ts"} for row in ROWS]
    typed = declared_types(rows, {"PRICE": "DECIMAL(10,2)", "Ts": "TIMESTAMP"})
    assert typed == {"sym": "VARCHAR", "ts": "TIMESTAMP", "price": "DECIMAL(10,2)"}
    # the exact spelling wins over another name that matches the same column ignoring case
    assert declared_types(rows, {"PRICE": "DECIMAL(10,2)", "price": "DECIMAL(12,4)"})["price"] == "DECIMAL(12,4)"


def test_order_by_a_qualified_name_finds_its_select_item_ignoring_case():
    out = cep.compile(
        "SELECT m.Bottom FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES LAST(B.price) "
        "AS bottom ONE ROW PER MATCH PATTERN (A B+ C) DEFINE B AS price < PREV(price), "
        "C AS price > PREV(price)) AS m ORDER BY m.BOTTOM"
    ).run([{k: v for k, v in r.items() if k != "Ts"} for r in ROWS])
    assert [r for r in out] == [{"Bottom": 3}] or [list(r.values()) for r in out] == [[3]]


@pytest.mark.spark
def test_spark_applies_the_same_rule(spark):
    """On Spark too, the unquoted name two columns match is refused before any job runs, naming both."""
    df = spark.createDataFrame(pd.DataFrame(ROWS))
    with pytest.raises(CepSemanticError) as raised:
        cep.compile(query("Ts", "Ts")).on_spark(df)
    assert raised.value.code == "E0220" and "'ts' and 'Ts'" in raised.value.message
