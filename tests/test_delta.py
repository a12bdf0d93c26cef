"""Delta tables in and out: ``--input delta:PATH`` (time travel, pruning), ``--output delta:PATH``, the Delta alert
sink, and what a bad Delta input is told. Python engine here; Spark's connector in test_delta_spark.py.

The independent source of each expected answer: the same rows written as a Parquet file and read by the
Parquet reader (tested on its own in test_readers.py), or the row counts the test itself wrote.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cep.cli import main
from cep.delta_io import columns_read, default_table, pushed_filters, read_delta_arrow, snapshot_of
from cep.spark_bridge.sinks.delta import DeltaSink, alerts_table
from cep.spark_bridge.spark.delta import CepDeltaError, DeltaSnapshot, check_snapshot
from cep.spark_bridge.spark.session import DELTA_SNAPSHOT_PARTITIONS_CONF, delta_snapshot_conf
from cep.statement import compile_sql

V_SHAPE = "patterns/v_shape.sql"
TICKS = "patterns/data/ticks.csv"


def ticks() -> pd.DataFrame:
    frame = pd.read_csv(TICKS, parse_dates=["ts"])
    frame["day"] = frame["ts"].dt.strftime("%Y-%m-%d")
    return frame


def arrow(frame: pd.DataFrame) -> pa.Table:
    return pa.Table.from_pandas(frame, preserve_index=False)  # a filtered frame's index is no column of the table


def table_rows(out: str) -> list[str]:
    return [line for line in out.splitlines() if line and not line.startswith(("events read", "wrote"))]


@pytest.fixture()
def ticks_table(tmp_path) -> Path:
    path = tmp_path / "ticks"
    frame = ticks()
    write_deltalake(str(path), arrow(frame[frame["symbol"] != "DYNA"]), partition_by=["day"])  # version 0
    write_deltalake(str(path), arrow(frame[frame["symbol"] == "DYNA"]), mode="append")  # version 1
    return path


def test_a_delta_table_gives_the_rows_its_parquet_copy_gives(ticks_table, tmp_path, capsys):
    parquet = tmp_path / "ticks.parquet"
    ticks().to_parquet(parquet, index=False, coerce_timestamps="us")
    assert main(["run", V_SHAPE, "--input", str(parquet), "--engine", "python", "--match-ids"]) == 0
    expected = sorted(table_rows(capsys.readouterr().out))
    assert main(["run", V_SHAPE, "--input", f"delta:{ticks_table}", "--engine", "python", "--match-ids"]) == 0
    assert sorted(table_rows(capsys.readouterr().out)) == expected
    assert len(expected) == 2 + 27  # header, rule and the 27 V shapes of the sample ticks


def test_time_travel_reads_the_version_asked_for(ticks_table, capsys):
    """Version 0 lacks DYNA; the three spellings of "version 0" agree, and the latest version has DYNA."""
    outputs = {}
    for name, extra in {
        "inline": [f"delta:{ticks_table}@v0"],
        "flag": [f"delta:{ticks_table}", "--delta-version", "0"],
        "latest": [f"delta:{ticks_table}"],
    }.items():
        assert main(["run", V_SHAPE, "--engine", "python", "--input", *extra]) == 0
        outputs[name] = table_rows(capsys.readouterr().out)
    assert (
        main(["run", V_SHAPE, "--engine", "python", "--input", f"delta:{ticks_table}@v1", "--delta-version", "0"]) == 0
    )
    assert sum(line.startswith("DYNA") for line in table_rows(capsys.readouterr().out)) == 6  # its own version wins
    assert outputs["inline"] == outputs["flag"]
    assert not any(line.startswith("DYNA") for line in outputs["flag"])
    assert sum(line.startswith("DYNA") for line in outputs["latest"]) == 6
    first_commit = DeltaTable(str(ticks_table)).history()[-1]["timestamp"]  # ms since the epoch
    at = dt.datetime.fromtimestamp(first_commit / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")
    assert snapshot_of(f"delta:{ticks_table}@{at}") == DeltaSnapshot(str(ticks_table), timestamp=at)
    assert read_delta_arrow(snapshot_of(f"delta:{ticks_table}@{at}")).num_rows == 180


def test_a_named_delta_input_in_a_whole_statement(ticks_table, tmp_path, capsys):
    query = tmp_path / "q.sql"
    query.write_text(
        "SELECT symbol, COUNT(*) AS shapes FROM (SELECT * FROM ticks WHERE symbol <> 'ACME') "
        "MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts MEASURES A.ts AS t "
        "PATTERN (A B+ C+) DEFINE B AS price < PREV(price), C AS price > PREV(price)) GROUP BY symbol "
        "ORDER BY symbol"
    )
    assert main(["run", str(query), "--engine", "python", "--input", f"ticks=delta:{ticks_table}"]) == 0
    rows = table_rows(capsys.readouterr().out)[2:]
    assert [row.split()[0] for row in rows] == ["BOLT", "CRUX", "DYNA"]


def test_only_the_columns_the_statement_names_are_read(ticks_table):
    one_row = compile_sql(Path(V_SHAPE).read_text())
    assert set(columns_read(one_row)) >= {"symbol", "ts", "price"}
    table = read_delta_arrow(snapshot_of(f"delta:{ticks_table}"), columns_read(one_row))
    assert table.column_names == ["symbol", "ts", "price"]  # not volume, not the partition column day
    all_rows = compile_sql(Path(V_SHAPE).read_text().replace("ONE ROW PER MATCH", "ALL ROWS PER MATCH"))
    assert columns_read(all_rows) is None
    star_outside = compile_sql(
        "WITH m AS (SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts "
        "MEASURES A.ts AS t PATTERN (A) DEFINE A AS price > 1)) SELECT * FROM ticks"
    )
    assert columns_read(star_outside) is None


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.tuples(st.sampled_from("ab"), st.integers(0, 50), st.integers(1, 9), st.integers(0, 3)),
        min_size=1,
        max_size=40,
    )
)
def test_pruned_and_whole_reads_match_the_same_rows(tmp_path_factory, events):
    """Whatever the rows, reading only the named columns changes no match (the unread column is in the input,
    never in the statement)."""
    path = tmp_path_factory.mktemp("prop") / "t"
    frame = pd.DataFrame(events, columns=["k", "minute", "price", "noise"])
    frame["ts"] = pd.Timestamp("2026-01-01") + pd.to_timedelta(frame["minute"], unit="m")
    write_deltalake(str(path), frame.drop(columns="minute"))
    statement = compile_sql(
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES FIRST(A.ts) AS s, "
        "COUNT(*) AS n ONE ROW PER MATCH PATTERN (A B*) DEFINE B AS price >= PREV(price))"
    )
    snapshot = snapshot_of(f"delta:{path}")
    whole = statement.run(default=read_delta_arrow(snapshot), kind="pandas")
    pruned = statement.run(default=read_delta_arrow(snapshot, columns_read(statement)), kind="pandas")
    pd.testing.assert_frame_equal(whole, pruned)


def test_output_to_delta_appends_a_backtest_once(ticks_table, tmp_path, capsys):
    out = tmp_path / "matches"
    argv = [
        "run",
        V_SHAPE,
        "--engine",
        "python",
        "--input",
        f"delta:{ticks_table}",
        "--match-ids",
        "--output",
        f"delta:{out}",
    ]
    assert main(argv) == 0
    assert "wrote 27 rows" in capsys.readouterr().out
    assert main(argv) == 0  # the same statement over the same table version: nothing more
    assert "nothing appended" in capsys.readouterr().out
    written = DeltaTable(str(out)).to_pandas()
    assert len(written) == 27 and written["match_id"].nunique() == 27
    one_tick = ticks().head(1).assign(symbol="ZED")  # one row: no V shape, but a new version, another input
    write_deltalake(str(ticks_table), arrow(one_tick), mode="append")
    assert main(argv) == 0
    assert len(DeltaTable(str(out)).to_pandas()) == 54


def test_the_alert_sink_writes_each_micro_batch_once_across_a_restart(tmp_path):
    emitted = dt.datetime(2026, 1, 5, 23, 59, 59)
    alerts = [
        {
            "rule_id": "r",
            "rule_version": "1",
            "match_id": f"m{i}",
            "match_status": "MATCHED",
            "partition_key": json.dumps({"k": i}),
            "first_event_time": emitted,
            "last_event_time": emitted,
            "measures": "{}",
            "emit_time": emitted + dt.timedelta(seconds=i),
            "suppressed": False,
        }
        for i in range(3)
    ]
    state = tmp_path / "ck" / "sinks"
    sink = DeltaSink(f"delta:{tmp_path / 'alerts'}", state_dir=str(state))
    assert sum(sink.deliver(alerts[:2], 0).delivered.values()) == 2
    restarted = DeltaSink(f"delta:{tmp_path / 'alerts'}", state_dir=str(state))  # the same checkpoint: the same id
    assert restarted.app_id == sink.app_id
    assert sum(restarted.deliver(alerts[:2], 0).delivered.values()) == 0  # batch 0 again, after a crash
    restarted.deliver(alerts[2:], 1)
    table = DeltaTable(str(tmp_path / "alerts"))
    frame = table.to_pandas()
    assert sorted(frame["match_id"]) == ["m0", "m1", "m2"]
    assert table.metadata().partition_columns == ["emit_date"]
    assert set(frame["emit_date"].astype(str)) == {"2026-01-05", "2026-01-06"}
    assert alerts_table(alerts).schema.field("emit_time").type == pa.timestamp("us")


# ----------------------------------------------------------------------------------------- bad input


def test_a_folder_that_is_not_a_delta_table_is_refused_plainly(tmp_path, capsys):
    ticks().to_parquet(tmp_path / "part-0.parquet", index=False)
    assert main(["run", V_SHAPE, "--engine", "python", "--input", f"delta:{tmp_path}"]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path} is not a Delta table: it has no _delta_log folder" in err
    assert "Traceback" not in err and "read them with --input PATH" in err
    assert main(["run", V_SHAPE, "--engine", "python", "--input", f"delta:{tmp_path / 'nowhere'}"]) == 2
    assert "Delta table not found" in capsys.readouterr().err


def test_a_stream_over_a_folder_that_is_not_a_delta_table_is_refused_before_spark_starts(tmp_path, capsys):
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "v.sql").write_text(Path(V_SHAPE).read_text())
    assert (
        main(
            [
                "stream",
                "--rules",
                str(tmp_path / "rules"),
                "--input",
                f"delta:{tmp_path}",
                "--checkpoint",
                str(tmp_path / "ck"),
            ]
        )
        == 2
    )
    assert f"{tmp_path} is not a Delta table: it has no _delta_log folder" in capsys.readouterr().err
    assert (
        main(
            [
                "stream",
                "--rules",
                str(tmp_path / "rules"),
                "--input",
                str(tmp_path),
                "--delta-option",
                "a=b",
                "--checkpoint",
                str(tmp_path / "ck"),
            ]
        )
        == 2
    )
    assert "--delta-option is for a Delta input" in capsys.readouterr().err


def test_a_version_the_table_lacks_names_the_versions_it_has(ticks_table, capsys):
    assert main(["run", V_SHAPE, "--engine", "python", "--input", f"delta:{ticks_table}@v7"]) == 2
    assert f"the Delta table {ticks_table} has no version 7: its log holds versions 0 to 1" in capsys.readouterr().err
    assert main(["run", V_SHAPE, "--engine", "python", "--input", f"delta:{ticks_table}@2000-01-01T00:00:00"]) == 2
    assert "its first commit in the log, version 0, is at" in capsys.readouterr().err  # Spark refuses it too
    with pytest.raises(CepDeltaError, match="not both"):
        DeltaSnapshot("x", version=1, timestamp="2026-01-01")
    assert main(["run", V_SHAPE, "--engine", "python", "--input", TICKS, "--delta-version", "1"]) == 2
    assert "for a Delta input" in capsys.readouterr().err


def test_a_column_added_later_is_missing_at_the_older_version_with_a_caret(tmp_path, capsys):
    path = tmp_path / "t"
    frame = ticks().drop(columns=["volume"])
    write_deltalake(str(path), frame)
    write_deltalake(str(path), ticks(), mode="append", schema_mode="merge")  # version 1 adds volume
    query = tmp_path / "q.sql"
    query.write_text(Path(V_SHAPE).read_text().replace("COUNT(*) AS n", "SUM(volume) AS v"))
    assert main(["run", str(query), "--engine", "python", "--input", f"delta:{path}@v1"]) == 0
    capsys.readouterr()
    assert main(["run", str(query), "--engine", "python", "--input", f"delta:{path}@v0"]) == 1
    err = capsys.readouterr().err
    assert "volume" in err and "^" in err and "Traceback" not in err


def test_a_widened_column_type_reads_at_each_version(tmp_path):
    path = tmp_path / "t"
    write_deltalake(str(path), pa.table({"k": ["a"], "n": pa.array([1], pa.int32())}))
    write_deltalake(
        str(path), pa.table({"k": ["a"], "n": pa.array([2**40], pa.int64())}), mode="overwrite", schema_mode="overwrite"
    )
    assert read_delta_arrow(DeltaSnapshot(str(path), version=0)).column("n").to_pylist() == [1]
    assert read_delta_arrow(DeltaSnapshot(str(path))).column("n").to_pylist() == [2**40]


def test_a_null_event_time_is_a_counted_bad_row(tmp_path, capsys):
    path = tmp_path / "t"
    frame = ticks()
    frame.loc[3, "ts"] = pd.NaT
    write_deltalake(str(path), frame)
    dead = tmp_path / "bad.jsonl"
    assert main(["run", V_SHAPE, "--engine", "python", "--input", f"delta:{path}", "--dead-letter", str(dead)]) == 0
    assert "bad rows: 1 (null_event_time 1)" in capsys.readouterr().out
    assert json.loads(dead.read_text().splitlines()[0])["_cep_error"] == "null_event_time"


def test_check_snapshot_needs_no_engine(tmp_path):
    (tmp_path / "_delta_log").mkdir()
    with pytest.raises(CepDeltaError, match="holds no commit"):
        check_snapshot(DeltaSnapshot(str(tmp_path)))


# ------------------------------------------------------------------------- filters pushed into the read

V_SHAPE_BODY = Path(V_SHAPE).read_text()


@pytest.fixture()
def by_symbol(tmp_path) -> Path:
    """The sample ticks partitioned by symbol: one folder of files per symbol."""
    path = tmp_path / "by_symbol"
    write_deltalake(str(path), arrow(ticks()), partition_by=["symbol"])
    return path


def test_a_where_on_a_partition_by_column_opens_only_that_partitions_files(by_symbol, tmp_path, capsys):
    """The other symbols' files are deleted after the commit: a read that opened them would fail, so the
    run succeeding shows they were never opened; the answer is the Parquet copy's for that symbol."""
    query = tmp_path / "q.sql"
    query.write_text(V_SHAPE_BODY + " AS m WHERE m.symbol = 'BOLT' AND n > 2")
    parquet = tmp_path / "ticks.parquet"
    ticks().to_parquet(parquet, index=False, coerce_timestamps="us")
    assert main(["run", str(query), "--engine", "python", "--input", str(parquet), "--match-ids"]) == 0
    expected = table_rows(capsys.readouterr().out)
    table = DeltaTable(str(by_symbol))
    kept = set(table.file_uris([("symbol", "=", "BOLT")]))
    others = set(table.file_uris()) - kept
    assert len(kept) == 1 and len(others) == 3  # delta-rs's own file list: one file per symbol
    for uri in others:
        Path(uri.removeprefix("file://")).unlink()
    assert main(["run", str(query), "--engine", "python", "--input", f"delta:{by_symbol}", "--match-ids"]) == 0
    assert table_rows(capsys.readouterr().out) == expected
    assert len(expected) > 2 and all(row.startswith("BOLT") for row in expected[2:])
    # a condition on a measure (not a PARTITION BY column) cannot be pushed: every file is read, and the
    # deleted ones are missed loudly
    query.write_text(V_SHAPE_BODY + " WHERE n > 2")
    assert main(["run", str(query), "--engine", "python", "--input", f"delta:{by_symbol}"]) == 2
    err = capsys.readouterr().err
    assert "cannot read the Delta table" in err and "Traceback" not in err


def test_which_conditions_are_pushed():
    def pushed(text: str, table: str = "ticks") -> set[tuple]:
        statement = compile_sql(text)
        return {(f.column, f.op, f.values) for f in pushed_filters(statement, default_table(statement) or table)}

    clause = (
        "MATCH_RECOGNIZE (PARTITION BY day, symbol ORDER BY ts MEASURES COUNT(*) AS n PATTERN (A) "
        "DEFINE A AS price > 1)"
    )
    assert pushed(
        f"SELECT * FROM ticks {clause} AS m WHERE m.day >= '2024-01-02' AND n > 3 AND symbol IN ('A', 'B')"
    ) == {
        ("day", ">=", ("2024-01-02",)),
        ("symbol", "in", ("A", "B")),
    }
    assert pushed(f"SELECT * FROM ticks {clause} WHERE 5 < day") == {("day", ">", (5,))}
    assert pushed(f"SELECT * FROM ticks {clause} WHERE day = '1' OR symbol = 'A'") == set()  # not a conjunction
    assert pushed(f"SELECT * FROM (SELECT * FROM ticks WHERE price > -3 AND day = 'x') {clause}") == {
        ("price", ">", (-3,)),
        ("day", "=", ("x",)),
    }
    # every reference must have the condition: a second, unfiltered read of the table pushes nothing
    assert (
        pushed(
            f"WITH w AS (SELECT * FROM ticks WHERE day = 'x') SELECT * FROM w {clause} "
            f"UNION ALL SELECT * FROM ticks {clause}"
        )
        == set()
    )
    assert pushed(
        f"WITH w AS (SELECT * FROM ticks WHERE day = 'x') SELECT * FROM w {clause} "
        f"UNION ALL SELECT * FROM ticks {clause} WHERE day = 'x'"
    ) == {("day", "=", ("x",))}
    # a join, a subquery inside the clause that reads the table, a column compared with a column
    assert (
        pushed(f"SELECT * FROM (SELECT t.* FROM ticks t JOIN d ON t.day = d.day WHERE t.day = 'x') {clause}") == set()
    )
    inner = clause.replace("price > 1", "price > (SELECT AVG(price) FROM ticks)")
    assert pushed(f"SELECT * FROM ticks {inner} WHERE day = 'x'") == set()
    assert pushed(f"SELECT * FROM (SELECT * FROM ticks WHERE day = symbol) {clause}") == set()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    events=st.lists(
        st.tuples(st.sampled_from(["d1", "d2", "d3"]), st.sampled_from("ab"), st.integers(0, 50), st.integers(1, 9)),
        min_size=1,
        max_size=40,
    ),
    op=st.sampled_from(["=", "<>", "<", "<=", ">", ">="]),
    day=st.sampled_from(["d0", "d1", "d2", "d3", "d4"]),
    where_inside=st.booleans(),
)
def test_a_pushed_filter_changes_no_answer(tmp_path_factory, events, op, day, where_inside):
    """Whatever the rows and the condition on the partition column, the statement's answer from the read with
    the condition pushed in equals its answer from the whole table."""
    path = tmp_path_factory.mktemp("push") / "t"
    frame = pd.DataFrame(events, columns=["day", "k", "minute", "price"])
    frame["ts"] = pd.Timestamp("2026-01-01") + pd.to_timedelta(frame["minute"], unit="m")
    write_deltalake(str(path), arrow(frame.drop(columns="minute")), partition_by=["day"])
    body = (
        "MATCH_RECOGNIZE (PARTITION BY day, k ORDER BY ts MEASURES FIRST(A.ts) AS s, COUNT(*) AS n "
        "ONE ROW PER MATCH PATTERN (A B*) DEFINE B AS price >= PREV(price))"
    )
    text = (
        f"SELECT * FROM (SELECT * FROM t WHERE day {op} '{day}') {body} ORDER BY day, k, s"
        if where_inside
        else f"SELECT * FROM t {body} WHERE day {op} '{day}' ORDER BY day, k, s"
    )
    statement = compile_sql(text)
    filters = pushed_filters(statement, default_table(statement))
    assert [(f.column, f.op) for f in filters] == [("day", "!=" if op == "<>" else op)]
    snapshot = snapshot_of(f"delta:{path}")
    whole = statement.run(default=read_delta_arrow(snapshot), kind="pandas")
    pushed = read_delta_arrow(snapshot, None, filters)
    assert sorted(set(pushed.column("day").to_pylist())) == sorted(
        {
            d
            for d in frame["day"]
            if {"=": d == day, "<>": d != day, "<": d < day, "<=": d <= day, ">": d > day, ">=": d >= day}[op]
        }
    )
    # no match at all: an empty output's time column is typed from no rows (object) on the empty read
    pd.testing.assert_frame_equal(statement.run(default=pushed, kind="pandas"), whole, check_dtype=not whole.empty)


@pytest.mark.parametrize(
    ("master", "cores"),
    [("local", 1), ("local[2]", 2), ("local[3, 2]", 3), ("local[*]", os.cpu_count()), ("spark://h:7077", None)],
)
def test_delta_replays_its_log_in_one_partition_per_local_core(master, cores):
    """Delta's 50 partitions of a snapshot's state are 50 tasks per read on a local master: one per core instead
    (spark_bridge/spark/session.py); a cluster keeps Delta's own default (no setting)."""
    expected = {} if cores is None else {DELTA_SNAPSHOT_PARTITIONS_CONF: str(cores)}
    assert delta_snapshot_conf(master) == expected
