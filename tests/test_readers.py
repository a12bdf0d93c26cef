"""Event files are read without rewriting a value, and alike by both engines (and
the empty-input message): ``cep.cli_io.read_pandas`` (the python engine) and
``cep.spark_bridge.spark.files.read_files`` (Spark) follow one rule for a CSV's column types
(``cep.matcher.rows.text_types``), read CSV by RFC 4180, keep JSON's types, and ``cep run -o out.json``
writes every float exactly."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import math
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cep import cli
from cep.cli_io import read_pandas, read_spark, spark_result, write_json_lines
from cep.matcher.rows.tables import series_values
from cep.matcher.rows.text_types import column_type, evidence

QUERY = "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY s ORDER BY ts MEASURES COUNT(*) AS n PATTERN (A+))\n"

# Files both engines must read alike: name -> text.
FILES = {
    "lookalikes.csv": "s,ts,price\n007,1,1.5\n7,2,NaN\nNA,3,\nnull,4,2.25\n",
    "rfc4180.csv": 's,note,ts\n"a","he said ""hi""\nthen left",1\n"",x,2\n,y,3\n"b",,4\n',
    "typed.csv": (
        "id,big,price,flag,at,code,spelled\n"
        "1,12345678901234567890123,1.5,true,2024-10-27T02:30:00+02:00,02134,1e3\n"
        "2,,NA,False,2024-10-27 01:10:00Z,10001,1000\n"
        "-3,7,-0.25,TRUE,2024-10-27,NA,7\n"
    ),
    # a column of ISO dates is DATE (as Spark, Oracle and Snowflake type it); dates among times are TIMESTAMP
    "dates.csv": (
        "id,d,at,nodate\n1,2024-02-29,2024-01-01,2023-02-29\n2,NA,2024-01-01 10:00,2024-01-01\n3,0001-01-01,,x\n"
    ),
    "lookalikes.json": '{"s": "1e3", "ts": 1}\n{"s": "1000", "ts": 2}\n{"s": "NA", "ts": 3}\n{"s": "null", "ts": 4}\n',
    "typed.json": (
        '{"id": 7, "x": 1.5, "when": "2024-01-01T00:00:00+01:00", "flag": true, "label": "2024"}\n'
        '{"id": null, "x": 2, "when": "2024-01-02", "flag": null, "label": "x"}\n'
        '{"id": 9007199254740993, "x": 0.1, "when": null, "flag": false, "label": null}\n'
    ),
    "array.json": '[{"s": "a", "ts": 1}, {"s": "b", "ts": 2}]',
}


def utc(text: str) -> dt.datetime:
    """An ISO time as the naive UTC time the readers give, by the standard library (not cep's parser)."""
    value = dt.datetime.fromisoformat(text)
    return value.astimezone(dt.UTC).replace(tzinfo=None) if value.tzinfo else value


# What the python reader makes of each column (the Spark reader must make the same values).
EXPECTED = {
    "lookalikes.csv": {"s": ["007", "7", "NA", "null"], "ts": [1, 2, 3, 4], "price": [1.5, math.nan, None, 2.25]},
    "rfc4180.csv": {
        "s": ["a", None, None, "b"],
        "note": ['he said "hi"\nthen left', "x", "y", None],
        "ts": [1, 2, 3, 4],
    },
    "typed.csv": {
        "id": [1, 2, -3],
        "big": [Decimal("12345678901234567890123"), None, Decimal(7)],
        "price": [1.5, None, -0.25],
        "flag": [True, False, True],
        "at": [utc("2024-10-27T02:30:00+02:00"), utc("2024-10-27 01:10:00Z"), utc("2024-10-27")],  # 00:30, 01:10, 00:00
        "code": ["02134", "10001", "NA"],  # a leading zero: text, and NA with it
        "spelled": ["1e3", "1000", "7"],  # two spellings of 1000: text
    },
    "dates.csv": {
        "id": [1, 2, 3],
        "d": [dt.date(2024, 2, 29), None, dt.date(1, 1, 1)],
        "at": [dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 1, 10), None],
        "nodate": ["2023-02-29", "2024-01-01", "x"],  # no 29 February in 2023: text
    },
    "lookalikes.json": {"s": ["1e3", "1000", "NA", "null"], "ts": [1, 2, 3, 4]},
    "typed.json": {
        "id": [7, None, 9007199254740993],
        "x": [1.5, 2.0, 0.1],
        "when": [utc("2024-01-01T00:00:00+01:00"), utc("2024-01-02"), None],  # 2023-12-31 23:00
        "flag": [True, None, False],
        "label": ["2024", "x", None],
    },
    "array.json": {"s": ["a", "b"], "ts": [1, 2]},
}


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("readers")
    for name, text in FILES.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def fmt(name: str) -> str:
    return name.rsplit(".", 1)[1]


def values(frame: pd.DataFrame) -> dict[str, list]:
    """Each column as Python values (None: NULL; pandas Timestamps as datetimes), kinds compared too."""
    out = {}
    for name in frame.columns:
        column = []
        for value in series_values(frame[name]):
            if hasattr(value, "item") and not isinstance(value, (str, bytes)):
                value = value.item()
            column.append(value)
        out[str(name)] = column
    return out


def same(left: dict, right: dict) -> bool:
    def key(value):
        if isinstance(value, float) and math.isnan(value):
            return ("NaN",)
        return (type(value).__name__ if not isinstance(value, bool) else "bool", value)

    return {n: [key(v) for v in c] for n, c in left.items()} == {n: [key(v) for v in c] for n, c in right.items()}


@pytest.mark.parametrize("name", list(FILES))
def test_the_python_reader_keeps_every_value(files, name):
    assert same(values(read_pandas([str(files / name)], fmt(name))), EXPECTED[name])


@pytest.mark.spark
def test_spark_reads_every_file_as_the_python_reader_does(spark, files):
    for name in FILES:
        got = values(spark_result(read_spark(spark, [str(files / name)], fmt(name))))
        assert same(got, EXPECTED[name]), name


@pytest.mark.spark
def test_cep_run_prints_the_same_partitions_on_both_engines(files, capsys):
    query = files / "q.sql"
    query.write_text(QUERY, encoding="utf-8")
    for name in ("lookalikes.csv", "lookalikes.json"):
        tables = []
        for engine in ("python", "spark"):
            assert cli.main(["run", str(query), "--input", str(files / name), "--engine", engine]) == 0
            tables.append(capsys.readouterr().out.splitlines()[:-1])  # without the summary line
        assert tables[0] == tables[1], name
        keys = [line.split()[0] for line in tables[0][2:]]
        assert sorted(keys) == sorted(EXPECTED[name]["s"]), name  # four partitions, each printed as written


@pytest.mark.parametrize("name", [name for name in FILES if name.endswith(".csv")])
def test_text_columns_hold_what_pythons_csv_module_reads(name):
    """The expected texts checked against an independent RFC 4180 reader (an empty field is NULL)."""
    header, *records = list(csv.reader(io.StringIO(FILES[name], newline="")))
    for index, column in enumerate(header):
        if all(value is None or isinstance(value, str) for value in EXPECTED[name][column]):
            assert EXPECTED[name][column] == [record[index] or None for record in records], column


def test_the_text_rule_column_by_column():
    cases = [
        (["007", "7"], "VARCHAR"),
        (["7", "8", None, "NA"], "BIGINT"),
        (["0", "-0"], "VARCHAR"),
        (["+7", "8"], "VARCHAR"),
        (["9223372036854775807"], "BIGINT"),
        (["9223372036854775808"], "DECIMAL(38,0)"),
        (["1e3", "1000"], "VARCHAR"),
        (["1.5", "1.50"], "VARCHAR"),
        (["1.5", "2", "NaN", "-inf"], "DOUBLE"),
        (["NaN"], "VARCHAR"),
        (["NA", "null"], "VARCHAR"),
        (["true", "FALSE", "N/A"], "BOOLEAN"),
        (["2024-01-01", "2024-01-01T10:00:00.123456789+05:30"], "TIMESTAMP"),
        (["2024-02-30"], "VARCHAR"),
        (["2024-01-31", "NA", "9999-12-31"], "DATE"),
        (["2024-01-31", "2024-02-30"], "VARCHAR"),
        (["T02", "T03"], "VARCHAR"),
        (["7\n"], "VARCHAR"),
        ([None, None], "VARCHAR"),
    ]
    assert [(values, column_type(evidence(values))) for values, _ in cases] == cases


def test_an_integer_column_with_a_null_prints_as_integers(tmp_path, capsys):
    """pandas turns an integer column with a NULL into floats (7 -> 7.0, 2**53 + 1 -> 2**53): not here."""
    table = pa.table({"s": ["a", "b", "c"], "ts": [1, 2, 3], "id": pa.array([7, None, 2**53 + 1], pa.int64())})
    pq.write_table(table, tmp_path / "ids.parquet")
    query = tmp_path / "q.sql"
    query.write_text(
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY s ORDER BY ts MEASURES LAST(id) AS id PATTERN (A))\n",
        encoding="utf-8",
    )
    assert cli.main(["run", str(query), "--input", str(tmp_path / "ids.parquet"), "--engine", "python"]) == 0
    printed = capsys.readouterr().out.split()
    assert "7" in printed and "9007199254740993" in printed and "7.0" not in printed


def test_an_empty_json_input_says_the_input_is_empty(tmp_path, capsys):
    query = tmp_path / "q.sql"
    query.write_text(QUERY, encoding="utf-8")
    (tmp_path / "empty.json").write_text("", encoding="utf-8")
    assert (
        cli.main(["run", str(query), "--input", str(tmp_path / "empty.json"), "--engine", "python"]) == cli.EXIT_USAGE
    )
    err = capsys.readouterr().err
    assert "empty.json is empty" in err and "PARTITION BY" not in err and "E0220" not in err


# -------------------------------------------------------------------------------------------- output

FLOATS = [
    1.23456e-10,
    1.2345e-11,
    0.1 + 0.2,
    5e-324,
    1.7976931348623157e308,
    -0.0,
    2.0**53 + 2,
    math.nan,
    math.inf,
    -math.inf,
]


def read_back(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_cep_run_json_output_keeps_every_float(tmp_path, capsys):
    source = tmp_path / "floats.json"
    source.write_text(
        "".join(json.dumps({"s": "a", "ts": i, "x": x}) + "\n" for i, x in enumerate(FLOATS)), encoding="utf-8"
    )
    query = tmp_path / "q.sql"
    query.write_text(
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY s ORDER BY ts MEASURES LAST(x) AS y "
        "ALL ROWS PER MATCH PATTERN (A))\n",
        encoding="utf-8",
    )
    out = tmp_path / "out.json"
    assert cli.main(["run", str(query), "--input", str(source), "--engine", "python", "-o", str(out)]) == 0
    written = [row["y"] for row in read_back(out)]
    assert [repr(x) for x in written] == [repr(x) for x in FLOATS]  # bit for bit, -0.0 and NaN included


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True) | st.none(), min_size=1, max_size=8))
def test_json_lines_round_trip_any_float(tmp_path_factory, xs):
    path = tmp_path_factory.mktemp("json") / "out.json"
    write_json_lines(pd.DataFrame({"x": pd.array(xs, dtype=object)}), str(path))
    assert [repr(row["x"]) for row in read_back(path)] == [repr(x) for x in xs]


def empty_inputs(tmp_path: Path) -> list[Path]:
    """A header-only CSV and a zero-row Parquet file: tables with columns and no rows."""
    (tmp_path / "header.csv").write_text("s,ts,price\n", encoding="utf-8")
    pq.write_table(
        pa.table(
            {
                "s": pa.array([], pa.string()),
                "ts": pa.array([], pa.timestamp("us")),
                "price": pa.array([], pa.float64()),
            }
        ),
        tmp_path / "none.parquet",
    )
    return [tmp_path / "header.csv", tmp_path / "none.parquet"]


def run_on_empty(tmp_path: Path, capsys, engine: str) -> None:
    query = tmp_path / "q.sql"
    query.write_text(QUERY, encoding="utf-8")
    for path in empty_inputs(tmp_path):
        assert cli.main(["run", str(query), "--input", str(path), "--engine", engine]) == 0, path
        out, err = capsys.readouterr()
        assert "(no matches: the input has no rows)" in out and "events read: 0" in out, (path, out)
        assert "E0220" not in err and "PARTITION BY" not in err, path
        # The columns are known, so a query naming one the file lacks is still the query's fault.
        query.write_text(QUERY.replace("PARTITION BY s", "PARTITION BY nope"), encoding="utf-8")
        assert cli.main(["run", str(query), "--input", str(path), "--engine", engine]) == cli.EXIT_QUERY_ERROR
        assert "nope" in capsys.readouterr().err
        query.write_text(QUERY, encoding="utf-8")


def test_a_csv_or_parquet_input_with_no_rows_says_so_on_the_python_engine(tmp_path, capsys):
    run_on_empty(tmp_path, capsys, "python")


@pytest.mark.spark
def test_a_csv_or_parquet_input_with_no_rows_says_so_on_spark(spark, tmp_path, capsys):
    run_on_empty(tmp_path, capsys, "spark")
