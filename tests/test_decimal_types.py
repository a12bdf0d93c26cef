"""DECIMAL on the Python engine follows Spark's result types when the input declares its decimals.

A column typed DECIMAL(p,s) (an Arrow decimal128 column, a pandas column of that Arrow type, or
``schema={'x': 'DECIMAL(p,s)'}``) gives SUM, AVG, ``-``, ``*`` and ``/`` over it the precision and scale
Spark gives them, each result rounded half up to that scale, and a result the type cannot hold is E0410, as
Spark's ANSI mode (its default) fails. The expected values here come from Python's ``decimal`` module with an
explicit 200-digit context and Spark's type rules written out below (Spark's ``DecimalPrecision`` and
``Average``/``Sum``), not from cep's own ``types.py``. tests/test_spark_decimals.py checks the Spark engine
against Spark SQL, and that the Python engine gives what the Spark engine gives.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
from decimal import ROUND_HALF_UP, Context, Decimal

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import cep

QUERY = cep.compile("""SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts
  MEASURES SUM(x) AS s, AVG(x) AS a, LAST(x) - FIRST(x) AS d, LAST(x) * FIRST(x) AS m, LAST(x) / FIRST(x) AS q
  PATTERN (A+))""")
EXACT = Context(prec=200)
MAX = 38


def adjusted(precision: int, scale: int) -> tuple[int, int]:
    """Spark's adjustPrecisionScale (allowPrecisionLoss, its default): past 38 digits keep the integer
    digits and give up scale, down to min(scale, 6)."""
    if precision <= MAX:
        return precision, scale
    integer_digits = precision - scale
    return MAX, max(MAX - integer_digits, min(scale, 6))


def spark_types(p: int, s: int) -> dict[str, tuple[int, int]]:
    """The result type of each measure over a DECIMAL(p,s) column, by Spark's rules."""
    divide_scale = max(6, s + p + 1)
    return {
        "s": (min(MAX, p + 10), s),
        "a": (min(MAX, p + 4), min(MAX, s + 4)),
        "d": adjusted(p + 1, s),
        "m": adjusted(2 * p + 1, 2 * s),
        "q": adjusted(p - s + s + divide_scale, divide_scale),
    }


def expected(values: list[Decimal], p: int, s: int) -> dict[str, Decimal] | None:
    """Each measure computed exactly, then rounded half up to its Spark type; None when one overflows."""
    total = functools.reduce(EXACT.add, values, Decimal(0))
    exact = {
        "s": total,
        "a": EXACT.divide(total, Decimal(len(values))),
        "d": EXACT.subtract(values[-1], values[0]),
        "m": EXACT.multiply(values[-1], values[0]),
        "q": EXACT.divide(values[-1], values[0]),
    }
    out = {}
    for name, (precision, scale) in spark_types(p, s).items():
        value = exact[name].quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP, context=EXACT)
        if value != 0 and value.adjusted() >= precision - scale:
            return None
        out[name] = value
    return out


def inputs(values: list[Decimal], p: int, s: int):
    """The same rows as an Arrow table, a pandas frame of an Arrow decimal type and a list with a schema."""
    times = [dt.datetime(2024, 1, 1) + dt.timedelta(seconds=i) for i in range(len(values))]
    table = pa.table({"ts": times, "x": pa.array(values, pa.decimal128(p, s))})
    yield "arrow", table, {}
    frame = pd.DataFrame({"ts": times, "x": pd.Series(values, dtype=pd.ArrowDtype(pa.decimal128(p, s)))})
    yield "pandas", frame, {}
    yield "rows", table.to_pylist(), {"schema": {"x": f"DECIMAL({p},{s})"}}


def records(result) -> list[dict]:
    return (
        result
        if isinstance(result, list)
        else result.to_pylist()
        if hasattr(result, "to_pylist")
        else result.to_dict("records")
    )


@st.composite
def decimal_rows(draw):
    p = draw(st.integers(1, MAX))
    s = draw(st.integers(0, p))
    unit = 10**p - 1
    digits = st.integers(-unit, unit)
    first = draw(digits.filter(lambda n: n != 0))
    values = [first] + draw(st.lists(digits, min_size=0, max_size=4))
    return [Decimal(n).scaleb(-s, context=EXACT) for n in values], p, s


@settings(max_examples=150, deadline=None)
@given(decimal_rows())
# 9999999999999999999 / 26 at scale 19 ends in ...538|46: a quotient rounded half up to 38 digits first
# (...5385) rounded up to ...539; Spark SQL 4.2 gives ...538 for CAST(... AS DECIMAL(19,0)) / CAST(26 AS ...)
@example(([Decimal(26), Decimal(9999999999999999999)], 19, 0))
def test_decimal_results_have_sparks_types_on_every_typed_input(case):
    values, p, s = case
    want = expected(values, p, s)
    for kind, data, options in inputs(values, p, s):
        if want is None:
            with pytest.raises(cep.CepRuntimeError, match="E0410"):
                QUERY.run(data, **options)
            continue
        [out] = records(QUERY.run(data, **options))
        for name, value in want.items():
            assert isinstance(out[name], Decimal) and out[name] == value, (kind, name, p, s, values)
            assert out[name].as_tuple().exponent == -spark_types(p, s)[name][1], (kind, name)  # the scale too


def test_arrow_output_columns_carry_the_decimal_types():
    values = [Decimal("1.25"), Decimal("2.50"), Decimal("4.00")]
    out = QUERY.run(next(inputs(values, 5, 2))[1])
    types = {name: (t.precision, t.scale) for name, t in zip(out.column_names, out.schema.types)}
    assert types == spark_types(5, 2)


def test_plain_decimals_in_a_list_stay_exact():
    """A ``Decimal`` in a list with no declared type carries no precision: its arithmetic is exact (76
    digits of working precision), where Spark would need a type to round to (docs/semantics.md)."""
    rows = [{"ts": 1, "x": Decimal("1.0000000001")}, {"ts": 2, "x": Decimal("3")}]
    [out] = QUERY.run(rows)
    assert (
        str(out["q"]).startswith("2.99999999970000000002999999999") and out["q"].as_tuple().exponent < -22
    )  # Spark: 22 places
    assert out["d"] == Decimal("1.9999999999") and out["a"] == Decimal("2.00000000005")


def write_decimal_files(tmp_path) -> tuple:
    """A Parquet file with a DECIMAL(10,2) column and a CSV whose integers are too wide for BIGINT (its
    column is DECIMAL(38,0) on both engines: ``text_types``), and the query over both."""
    import pyarrow.parquet as pq

    times = pa.array([dt.datetime(2024, 1, 1, 0, 0, i) for i in range(3)], pa.timestamp("us"))
    values = pa.array([Decimal("3.00"), Decimal("7.00"), Decimal("1.23")], pa.decimal128(10, 2))
    pq.write_table(pa.table({"k": ["a"] * 3, "ts": times, "x": values}), tmp_path / "dec.parquet")
    (tmp_path / "dec.csv").write_text(
        "k,ts,x\na,2024-01-01T00:00:00,12345678901234567890123\na,2024-01-01T00:00:01,7\na,2024-01-01T00:00:02,3\n",
        encoding="utf-8",
    )
    query = tmp_path / "dec.sql"
    query.write_text(
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES SUM(x) AS s, AVG(x) AS a, "
        "LAST(x) / FIRST(x) AS q, FIRST(x) / LAST(x) AS r PATTERN (A B C))",
        encoding="utf-8",
    )
    return query, tmp_path / "dec.parquet", tmp_path / "dec.csv"


def cli_output(query, source, engine: str, tmp_path) -> str:
    from cep import cli

    out = tmp_path / f"out-{source.suffix[1:]}-{engine}.json"
    assert cli.main(["run", str(query), "--input", str(source), "--engine", engine, "-o", str(out)]) == 0
    return out.read_text(encoding="utf-8")


def test_cep_run_keeps_a_files_decimal_types_on_the_python_engine(tmp_path):
    """A Parquet DECIMAL(10,2) column and a CSV's DECIMAL(38,0) column keep their types in the python
    engine's reader, so ``/`` has Spark's scale: max(6, s1 + p2 + 1), 13 and 39 -> 6 (past 38 digits)."""
    query, parquet, csv = write_decimal_files(tmp_path)
    [row] = map(json.loads, cli_output(query, parquet, "python", tmp_path).splitlines())
    assert row == {"k": "a", "s": 11.23, "a": 3.743333, "q": 0.41, "r": 2.4390243902439}
    assert '"q": 0.4100000000000' in cli_output(query, parquet, "python", tmp_path)  # 13 places
    text = cli_output(query, csv, "python", tmp_path)
    assert '"q": 0.000000' in text and '"r": 4115226300411522630041.000000' in text  # 6 places


@pytest.mark.spark
def test_cep_run_gives_the_same_decimals_on_both_engines(spark, tmp_path):
    query, parquet, csv = write_decimal_files(tmp_path)
    for source in (parquet, csv):
        assert cli_output(query, source, "python", tmp_path) == cli_output(query, source, "spark", tmp_path), source


# A CSV typed by --schema 'x DECIMAL(10,2)': Spark's reader with that schema rounds 1.235 and 10.005 half up
# to 1.24 and 10.01, and cannot hold 123456789.5 (9 digits before the point, the type holds 8): its cast
# gives NULL, so both engines set the row aside as wrong_type.
DECLARED_CSV = (
    "k,ts,x\na,2024-01-01T00:00:00,1.235\na,2024-01-01T00:00:01,123456789.5\n"
    "a,2024-01-01T00:00:02,2.5\na,2024-01-01T00:00:03,10.005\n"
)
DECLARED_SCHEMA = "ts TIMESTAMP, x DECIMAL(10,2)"
DECLARED_QUERY = (
    "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES SUM(x) AS s, AVG(x) AS a, "
    "LAST(x) - FIRST(x) AS d, COUNT(*) AS n PATTERN (A B+) DEFINE B AS x > PREV(x))"
)


def declared_run(tmp_path, engine: str) -> tuple[str, list[dict]]:
    """``cep run --schema DECLARED_SCHEMA`` over DECLARED_CSV: (the output text, the dead letters)."""
    from cep import cli

    (tmp_path / "declared.csv").write_text(DECLARED_CSV, encoding="utf-8")
    (tmp_path / "declared.sql").write_text(DECLARED_QUERY, encoding="utf-8")
    out, dead = tmp_path / f"declared-{engine}.json", tmp_path / f"declared-{engine}.jsonl"
    assert (
        cli.main(
            [
                "run",
                str(tmp_path / "declared.sql"),
                "--input",
                str(tmp_path / "declared.csv"),
                "--engine",
                engine,
                "--schema",
                DECLARED_SCHEMA,
                "--dead-letter",
                str(dead),
                "-o",
                str(out),
            ]
        )
        == 0
    )
    return out.read_text(encoding="utf-8"), [json.loads(line) for line in dead.read_text(encoding="utf-8").splitlines()]


def test_cep_run_reads_a_schemas_decimal_size(tmp_path):
    """SUM of DECIMAL(10,2) is DECIMAL(20,2), AVG DECIMAL(14,6), LAST - FIRST DECIMAL(11,2) (Spark's rules, at
    the top of this file); the values by hand: 1.24 + 2.50 + 10.01 = 13.75, / 3 = 4.583333, 10.01 - 1.24."""
    text, dead = declared_run(tmp_path, "python")
    [row] = [json.loads(line, parse_float=Decimal) for line in text.splitlines()]
    assert row == {"k": "a", "s": Decimal("13.75"), "a": Decimal("4.583333"), "d": Decimal("8.77"), "n": 3}
    assert '"s": 13.75,' in text and '"a": 4.583333,' in text and '"d": 8.77,' in text  # each at its type's scale
    assert [letter["_cep_error"] for letter in dead] == ["wrong_type"] and "123456789.5" in json.dumps(dead)


@pytest.mark.spark
def test_a_schemas_decimal_size_gives_what_spark_sql_gives_on_both_engines(spark, tmp_path):
    """The independent answer: Spark's own CSV reader with the same schema, and Spark SQL over its rows."""
    python, python_dead = declared_run(tmp_path, "python")
    sparks, spark_dead = declared_run(tmp_path, "spark")
    assert python == sparks
    assert [d["_cep_error"] for d in python_dead] == [d["_cep_error"] for d in spark_dead] == ["wrong_type"]
    read = (
        spark.read.schema("k string, ts timestamp, x decimal(10,2), _corrupt_record string")
        .options(header="true")
        .csv(str(tmp_path / "declared.csv"))
    ).cache()  # Spark reads _corrupt_record only so
    read = read.where(read["_corrupt_record"].isNull()).drop("_corrupt_record")  # Spark refuses 123456789.5 too
    assert read.count() == 3
    read.createOrReplaceTempView("declared")
    sql = spark.sql("SELECT SUM(x) AS s, AVG(x) AS a, MAX_BY(x, ts) - MIN_BY(x, ts) AS d FROM declared")
    [want] = sql.collect()
    [row] = [json.loads(line, parse_float=Decimal) for line in python.splitlines()]
    for name in ("s", "a", "d"):
        assert row[name] == want[name] and row[name].as_tuple().exponent == want[name].as_tuple().exponent, name


def test_a_kafka_value_schema_keeps_a_decimals_size():
    """``cep run``/``cep stream`` over Kafka read JSON values with this schema (the reading itself, rounding
    and refusing as ``cep stream`` does, is tests/test_streaming_bad_events.py's)."""
    from pyspark.sql import types as T

    from cep.spark_bridge.spark.kafka import value_schema

    schema = value_schema("ts TIMESTAMP, x DECIMAL(10,2), y DECIMAL")
    assert schema["x"].dataType == T.DecimalType(10, 2) and schema["y"].dataType == T.DecimalType(10, 0)
