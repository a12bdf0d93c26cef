"""A JSON column that mixes kinds (numbers and one string) is typed the same way on both engines.

Spark's JSON schema inference reads a column holding ``5.0`` and ``"abc"`` as STRING, and then compares
prices as text: ``cep run --engine spark`` must not return another match than ``--engine python``, which
sets the ``"abc"`` row aside as ``wrong_type``. Now Spark types the column by the kind most of its values
have (``cep.spark_bridge.spark.files.json_kinds``, the rule of ``cep.matcher.rows.validate``) and the odd
row is set aside, or (without a dead letter) fails the run, as on the python engine. Every expected value
below is the python engine's.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_cli_bad_rows import LINES, VSHAPE

import cep
from cep import cli
from cep.cli_io import read_pandas


def write_json_lines(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def run_cli(engine: str, source: Path, dead: Path | None, capsys) -> tuple[int, list[str], str]:
    args = ["run", str(VSHAPE), "--input", str(source), "--engine", engine]
    code = cli.main(args + (["--dead-letter", str(dead)] if dead else []))
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


def bad_rows(dead: Path) -> list[tuple]:
    """(event time as printed, reason, code, detail) of each dead-letter record, in event-time order."""
    records = [json.loads(line) for line in dead.read_text(encoding="utf-8").splitlines()]
    return sorted(
        ((r["ts"] or "")[:19].replace("T", " "), r["_cep_error"], r["_cep_error_code"], r["_cep_error_detail"])
        for r in records
    )


@pytest.mark.spark
def test_a_string_among_numbers_is_set_aside_on_both_engines(spark, tmp_path, capsys):
    """Also the dead letter of ``cep run --engine spark`` in general (a NULL event time beside the odd kind): the
    same records (the NULL event time's detail too) and the same summary as the python engine's."""
    source = write_json_lines(tmp_path / "events.json", LINES)
    printed, records = {}, {}
    for engine in ("python", "spark"):
        dead = tmp_path / f"bad-{engine}.jsonl"
        code, lines, err = run_cli(engine, source, dead, capsys)
        assert code == 0, err
        printed[engine] = lines[:-2]  # the table, without the two summary lines
        records[engine] = bad_rows(dead)
        assert lines[-1] == f"bad rows: 2 (null_event_time 1, wrong_type 1) -> {dead}"
    assert printed["spark"] == printed["python"]
    assert [r[:3] for r in records["spark"]] == [r[:3] for r in records["python"]]
    assert [r[1:3] for r in records["python"]] == [("null_event_time", "E0440"), ("wrong_type", "E0442")]
    assert records["python"][1][0] == "2024-01-01 00:00:03"
    # The NULL event time's detail is one sentence on both; the odd kind's says what each reader saw.
    assert records["spark"][0][3] == records["python"][0][3] == "event time 'ts' is NULL"
    # Independent of both: the python engine's table is that of the good rows alone.
    good = cep.compile(VSHAPE.read_text(encoding="utf-8")).run(read_pandas([str(source)], "json").drop(index=[2, 3]))
    assert len(good) == 1 and f"{good.iloc[0]['bottom']}" in printed["python"][2]


@pytest.mark.spark
def test_without_a_dead_letter_both_engines_fail_rather_than_answer(spark, tmp_path, capsys):
    source = write_json_lines(tmp_path / "events.json", [line for line in LINES if line["ts"]])
    code, _, err = run_cli("python", source, None, capsys)
    assert code == cli.EXIT_QUERY_ERROR and "E0410" in err  # 'abc' < 3.0
    code, _, err = run_cli("spark", source, None, capsys)
    # One code on both engines (docs/reliability.md): E0410, naming the reason and quoting the line.
    assert code == cli.EXIT_QUERY_ERROR and "E0410" in err and "wrong_type" in err and '"price":"abc"' in err


@pytest.mark.spark
def test_a_bad_event_time_without_a_dead_letter_is_E0410_on_both_engines(spark, tmp_path, capsys):
    """An event time that is a string among numbers: python E0410 and Spark E0442 before (E0441 after the
    JSON kinds typing); now E0410 on both, and bad_event_time (E0441) with a dead letter on both."""
    lines = [
        {"symbol": "A", "ts": 1, "price": 5.0},
        {"symbol": "A", "ts": 2, "price": 3.0},
        {"symbol": "A", "ts": "abc", "price": 3.0},
        {"symbol": "A", "ts": 4, "price": 4.0},
    ]
    source = write_json_lines(tmp_path / "events.json", lines)
    for engine in ("python", "spark"):
        code, _, err = run_cli(engine, source, None, capsys)
        assert code == cli.EXIT_QUERY_ERROR and "error[E0410]" in err and "abc" in err, engine
        dead = tmp_path / f"dead-{engine}.json"
        code, _, _ = run_cli(engine, source, dead, capsys)
        assert code == 0, engine
        [letter] = [json.loads(line) for line in dead.read_text(encoding="utf-8").splitlines()]
        assert (letter["_cep_error"], letter["_cep_error_code"]) == ("bad_event_time", "E0441"), engine


@pytest.mark.spark
def test_the_kind_most_values_have_wins(spark, tmp_path):
    """Numbers among strings are the odd ones in a column of strings; a boolean among numbers in a column of
    numbers: Spark's reader sets aside the rows the python engine's row checks find odd, column by column."""
    from cep.spark_bridge.spark.files import read_files

    rows = [
        {"id": 0, "k": "a", "n": 1},
        {"id": 1, "k": "b", "n": "x"},
        {"id": 2, "k": 3, "n": 2},
        {"id": 3, "k": "d", "n": True},
        {"id": 4, "k": None, "n": None},
        {"id": 5, "k": "f", "n": 7},
    ]
    source = write_json_lines(tmp_path / "kinds.json", rows)
    df = read_files(spark, [str(source)], "json")
    assert dict(df.dtypes) == {"_corrupt_record": "string", "id": "bigint", "k": "string", "n": "bigint"}
    read = {r["id"]: r for r in df.collect()}
    frame = read_pandas([str(source)], "json")
    odd: set[int] = set()
    for column in ("k", "n"):
        found: list = []
        cep.compile(
            f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES A.{column} AS v PATTERN (A) DEFINE A AS TRUE)"
        ).run(frame, dead_letter=found)
        assert {r["_cep_error"] for r in found} == {"wrong_type"}
        odd |= {r["_cep_row"] for r in found}
        assert {i for i in read if read[i][column] is None} == odd_in(frame, column, found)
    assert odd and {i for i in read if read[i]["_corrupt_record"] is not None} == odd
    for i in set(read) - odd:  # the other rows: the python engine's values
        assert (read[i]["k"], read[i]["n"]) == tuple(None if frame.at[i, c] is None else frame.at[i, c] for c in "kn")


def odd_in(frame, column: str, found: list) -> set[int]:
    """The rows whose ``column`` Spark leaves NULL: the JSON nulls and the odd values the python engine found."""
    return {i for i, v in enumerate(frame[column]) if v is None} | {r["_cep_row"] for r in found}


@pytest.mark.spark
def test_cep_stream_types_a_mixed_json_column_as_cep_run_does(spark, tmp_path):
    """``cep stream`` without --schema over a directory of JSON files: the column's kind comes from the files
    there at start, and a later string in it is a bad row, with the reasons the python engine gives."""
    from cep.spark_bridge.spark.inputs import dead_letter_rows, mark_bad_rows
    from cep.stream_cli import stream_source

    first, later = (
        [line for line in LINES if line["ts"]],
        [{"symbol": "B", "ts": "2024-01-01T00:00:09", "price": "n/a"}],
    )
    write_json_lines(tmp_path / "in" / "batch-0000.json", first)
    source = stream_source(spark, str(tmp_path / "in"), "json")
    assert dict(source.dtypes)["price"] == "double"
    write_json_lines(tmp_path / "in" / "batch-0001.json", later)
    stream = (
        dead_letter_rows(mark_bad_rows(source, "ts", null_time=True))
        .writeStream.format("memory")
        .queryName("mixed_kinds_bad")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    stream.awaitTermination()
    dead = spark.sql("SELECT * FROM mixed_kinds_bad").toPandas()
    streamed = sorted((json.loads(text)["ts"], reason) for text, reason in zip(dead["_cep_input"], dead["_cep_error"]))
    found: list = []
    cep.compile(VSHAPE.read_text(encoding="utf-8")).run(read_pandas([str(tmp_path / "in")], "json"), dead_letter=found)
    assert streamed == sorted((r["ts"].isoformat(), r["_cep_error"]) for r in found)
    assert [reason for _, reason in streamed] == ["wrong_type", "wrong_type"]


@pytest.mark.spark
def test_an_odd_value_in_a_column_the_query_never_reads_sets_nothing_aside_on_either_engine(spark, tmp_path, capsys):
    """Only the columns the query reads decide (docs/reliability.md): a number among the strings of
    ``note``, which the V-shape query never reads, kept the row on the python engine but set it aside on
    Spark (its reader types every column before it knows the query)."""
    lines = [dict(line, note="ok") for line in LINES if line["ts"] and line["price"] != "abc"]
    lines[1]["note"] = 17  # the odd one: a number among strings
    source = write_json_lines(tmp_path / "events.json", lines)
    printed = {}
    for engine in ("python", "spark"):
        dead = tmp_path / f"dead-{engine}.json"
        code, out, err = run_cli(engine, source, dead, capsys)
        assert code == 0 and not err.strip(), (engine, err)
        assert not dead.exists() or dead.read_text(encoding="utf-8") == "", engine
        printed[engine] = [re.sub(r"seconds: .*|-> .*", "", line) for line in out]  # the timing and the file differ
        code, out, err = run_cli(engine, source, None, capsys)  # and without a dead letter: no error
        assert code == 0, (engine, err)
    assert printed["spark"] == printed["python"]
    assert "events read: 4, partitions: 2, matches: 1" in "\n".join(printed["python"])


@pytest.mark.spark
def test_cep_stream_reads_a_quoted_nan_in_a_number_column_as_cep_run_does(spark, tmp_path):
    """Spark's JSON reader took ``"NaN"``, ``"Infinity"`` (``allowNonNumericNumbers``) and ``"1.5"`` as
    numbers in the DOUBLE column ``cep stream`` found at start, where ``cep run`` sets such a row aside as
    ``wrong_type``. Now a quoted value is a bad row there too, and the bare tokens ``NaN`` and
    ``Infinity`` stay numbers, as Python's ``json`` reads them (the expected rows are the python engine's)."""
    from cep.spark_bridge.spark.columns import RAW, REJECT
    from cep.spark_bridge.spark.inputs import mark_bad_rows
    from cep.stream_cli import stream_source

    first = [line for line in LINES if line["ts"] and line["price"] != "abc"]
    prices = ["NaN", "Infinity", "-INF", "1.5", float("nan"), float("inf"), float("-inf"), 1.5]
    later = [{"symbol": "C", "ts": f"2024-01-01T00:00:{10 + i:02d}", "price": p} for i, p in enumerate(prices)]
    write_json_lines(tmp_path / "in" / "batch-0000.json", first)
    source = stream_source(spark, str(tmp_path / "in"), "json")
    assert dict(source.dtypes)["price"] == "double"
    write_json_lines(tmp_path / "in" / "batch-0001.json", later)
    assert "NaN" in (tmp_path / "in" / "batch-0001.json").read_text(encoding="utf-8").splitlines()[4]  # a bare token
    marked = mark_bad_rows(source, "ts", null_time=True)
    stream = (
        marked.writeStream.format("memory")
        .queryName("quoted_numbers")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    stream.awaitTermination()
    rows = spark.sql("SELECT * FROM quoted_numbers WHERE symbol = 'C'").toPandas().sort_values("ts")
    found: list = []
    cep.compile(VSHAPE.read_text(encoding="utf-8")).run(read_pandas([str(tmp_path / "in")], "json"), dead_letter=found)
    assert sorted(r["ts"].isoformat()[11:19] for r in found) == ["00:00:10", "00:00:11", "00:00:12", "00:00:13"]
    assert all(r["_cep_error"] == "wrong_type" for r in found)
    bad = sorted(json.loads(text)["ts"][11:19] for text, reason in zip(rows[RAW], rows[REJECT]) if reason)
    assert bad == sorted(r["ts"].isoformat()[11:19] for r in found)
    assert set(rows[REJECT].dropna()) == {"wrong_type"}
    good = rows[rows[REJECT].isna()]["price"].tolist()
    assert len(good) == 4 and good[0] != good[0] and good[1:] == [float("inf"), float("-inf"), 1.5]


@pytest.mark.spark
def test_select_star_lists_a_json_files_columns_in_one_order_on_both_engines(spark, tmp_path, capsys):
    """Spark's JSON reader orders a file's columns by name; the python reader listed them as first seen, so
    ``SELECT *`` printed another header. Both now print Spark's order."""
    query = tmp_path / "star.sql"
    query.write_text(
        """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts
  MEASURES CLASSIFIER() AS var ALL ROWS PER MATCH PATTERN (A B+) DEFINE B AS B.price < PREV(B.price))""",
        encoding="utf-8",
    )
    lines = [
        {"ts": f"2024-01-01T00:00:0{i}", "zeta": i, "symbol": "A", "price": p, "Note": "n", "_x": True}
        for i, p in enumerate([5.0, 4.0, 3.0])
    ]
    source = write_json_lines(tmp_path / "events.json", lines)
    headers = {}
    for engine in ("python", "spark"):
        assert cli.main(["run", str(query), "--input", str(source), "--engine", engine]) == 0, engine
        headers[engine] = capsys.readouterr().out.splitlines()[0].split()
    assert headers["python"] == headers["spark"], headers


# The columns named (a JSON file's columns come in Spark's order, sorted by name, on both engines).
ALL_ROWS = """SELECT symbol, ts, var, price, note FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts
  MEASURES CLASSIFIER() AS var ALL ROWS PER MATCH PATTERN (A B+) DEFINE B AS B.price < PREV(B.price))"""


@pytest.mark.spark
def test_all_rows_per_match_shows_an_odd_value_of_a_column_it_carries_on_neither_engine(spark, tmp_path, capsys):
    """ALL ROWS PER MATCH carries ``note``, which no condition reads: an odd value there (a number among
    strings) came out NULL on Spark (its typed column cannot hold it) and as it was on the python engine.
    A column the output carries is read: the row is ``wrong_type`` on both engines, set aside and counted,
    the same table from both; without a dead letter both stop with E0410. CSV (text: one kind) and
    Parquet (typed) carry every value on both."""
    import pandas as pd

    query = tmp_path / "all_rows.sql"
    query.write_text(ALL_ROWS, encoding="utf-8")
    lines = [
        {"symbol": "A", "ts": f"2024-01-01T00:00:0{i}", "price": p, "note": n}
        for i, (p, n) in enumerate([(5.0, "x"), (4.0, "y"), (3.0, 17), (2.0, "w"), (1.0, "v")])
    ]
    sources = {"json": write_json_lines(tmp_path / "events.json", lines)}
    frame = pd.DataFrame(lines).assign(note=lambda f: f["note"].astype(str), ts=lambda f: pd.to_datetime(f["ts"]))
    frame.to_csv(tmp_path / "events.csv", index=False)
    frame.to_parquet(tmp_path / "events.parquet", index=False, coerce_timestamps="us")
    sources.update(csv=tmp_path / "events.csv", parquet=tmp_path / "events.parquet")
    for kind, source in sources.items():
        printed, records = {}, {}
        for engine in ("python", "spark"):
            dead = tmp_path / f"dead-{kind}-{engine}.jsonl"
            code = cli.main(["run", str(query), "--input", str(source), "--engine", engine, "--dead-letter", str(dead)])
            captured = capsys.readouterr()
            assert code == 0, (kind, engine, captured.err)
            printed[engine] = [re.sub(r"seconds: .*|-> .*", "", line) for line in captured.out.splitlines()]
            records[engine] = (
                [(r["_cep_error"], r["price"]) for r in map(json.loads, dead.read_text().splitlines())]
                if dead.exists()
                else []
            )
        assert printed["spark"] == printed["python"], kind
        assert records["spark"] == records["python"] == ([("wrong_type", 3.0)] if kind == "json" else []), kind
        table = "\n".join(printed["python"])
        assert ("17" in table) == (kind != "json"), kind  # shown as it was, or set aside: never NULL
        assert "events read: 5, partitions: 1, matches: 1" in table or kind == "json", (kind, table)
    for engine in ("python", "spark"):  # and without a dead letter both stop, naming the row, where python answered
        code = cli.main(["run", str(query), "--input", str(sources["json"]), "--engine", engine])
        err = capsys.readouterr().err
        assert code == cli.EXIT_QUERY_ERROR and "error[E0410]" in err and "wrong_type" in err and "17" in err, (
            engine,
            err,
        )
