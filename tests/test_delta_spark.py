"""Delta tables on Spark, through Delta's own connector: the same matches and match ids as the python engine
(which reads with delta-rs), a pushed-down filter, and a changed schema told the same on both engines. (``cep stream``
following a Delta table is in test_delta_streams.py.)

The independent source: the python engine's backtest of the same table (tested against the Parquet reader in
test_delta.py), and the rows this test wrote.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from cep.cli import main
from cep.spark_bridge.spark.delta import DeltaSnapshot, read_delta

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[1]
V_SHAPE = str(ROOT / "patterns" / "v_shape.sql")
TICKS = ROOT / "patterns" / "data" / "ticks.csv"


def table_rows(out: str) -> list[str]:
    return sorted(line for line in out.splitlines() if line and not line.startswith(("events read", "wrote")))


@pytest.mark.timeout(2400)  # four Spark jobs: many minutes on a loaded 2-core machine
def test_both_engines_give_the_same_matches_and_match_ids_at_each_version(spark, tmp_path, capsys):
    frame = pd.read_csv(TICKS, parse_dates=["ts"])
    frame["day"] = frame["ts"].dt.strftime("%Y-%m-%d")
    path = tmp_path / "ticks"
    write_deltalake(
        str(path), pa.Table.from_pandas(frame[frame["symbol"] != "DYNA"], preserve_index=False), partition_by=["day"]
    )
    write_deltalake(
        str(path), pa.Table.from_pandas(frame[frame["symbol"] == "DYNA"], preserve_index=False), mode="append"
    )
    for spec in (f"delta:{path}", f"delta:{path}@v0"):
        answers = {}
        for engine in ("python", "spark"):
            assert main(["run", V_SHAPE, "--input", spec, "--engine", engine, "--match-ids"]) == 0
            answers[engine] = table_rows(capsys.readouterr().out)
        assert answers["python"] == answers["spark"]
        assert len(answers["spark"]) == 2 + (27 if spec.endswith(str(path)) else 21)
    for engine in ("python", "spark"):  # before the first commit: no version to read, said plainly on both
        assert (
            main(
                [
                    "run",
                    V_SHAPE,
                    "--input",
                    f"delta:{path}",
                    "--engine",
                    engine,
                    "--delta-timestamp",
                    "2000-01-01T00:00:00",
                ]
            )
            == 2
        )
        err = capsys.readouterr().err
        assert f"cannot read the Delta table {path} as of 2000-01-01T00:00:00" in err and "Traceback" not in err


@pytest.mark.timeout(1800)  # two Spark jobs on a loaded machine
def test_a_filter_on_a_partition_by_column_is_pushed_into_the_read_on_both_engines(spark, tmp_path, capsys):
    """The other symbols' files are deleted after the commit, so a read that opened them would fail; both
    engines give the answer the same statement gives over a Parquet copy of the whole table (match ids hash
    the statement's text, so the statement must be the same)."""
    frame = pd.read_csv(TICKS, parse_dates=["ts"])
    path = tmp_path / "by_symbol"
    write_deltalake(str(path), pa.Table.from_pandas(frame, preserve_index=False), partition_by=["symbol"])
    query = tmp_path / "q.sql"
    query.write_text(Path(V_SHAPE).read_text() + " AS m WHERE m.symbol IN ('BOLT', 'CRUX')")
    parquet = tmp_path / "ticks.parquet"
    frame.to_parquet(parquet, index=False, coerce_timestamps="us")
    assert main(["run", str(query), "--input", str(parquet), "--engine", "python", "--match-ids"]) == 0
    expected = [row for row in table_rows(capsys.readouterr().out) if row.startswith(("BOLT", "CRUX"))]
    table = DeltaTable(str(path))
    for uri in set(table.file_uris()) - set(table.file_uris([("symbol", "in", ["BOLT", "CRUX"])])):
        Path(uri.removeprefix("file://")).unlink()
    for engine in ("python", "spark"):
        assert main(["run", str(query), "--input", f"delta:{path}", "--engine", engine, "--match-ids"]) == 0
        rows = table_rows(capsys.readouterr().out)
        assert [row for row in rows if row.startswith(("BOLT", "CRUX"))] == expected, engine
    assert len(expected) > 10


@pytest.mark.timeout(2400)  # six Spark jobs on a loaded machine
def test_a_changed_schema_and_bad_times_are_told_the_same_on_both_engines(spark, tmp_path, capsys):
    """A column added at version 1 is an unknown column with its caret at version 0; a type widened between
    versions reads as each version has it; a time column of text with a value that is no time, or with a
    NULL, is a counted bad row. The same words on both engines (the python engine's answers are checked
    against files in test_delta.py)."""
    frame = pd.read_csv(TICKS, parse_dates=["ts"])
    grown = tmp_path / "grown"
    write_deltalake(str(grown), pa.Table.from_pandas(frame.drop(columns=["volume"]), preserve_index=False))
    write_deltalake(
        str(grown), pa.Table.from_pandas(frame, preserve_index=False), mode="overwrite", schema_mode="overwrite"
    )  # version 1: volume added
    query = tmp_path / "q.sql"
    query.write_text(Path(V_SHAPE).read_text().replace("COUNT(*) AS n", "SUM(volume) AS v"))
    texts = frame.astype({"ts": str})
    texts.loc[5, "ts"] = "not a time"
    nulls = frame.copy()
    nulls.loc[3, "ts"] = pd.NaT
    for name, rows in (("texts", texts), ("nulls", nulls)):
        write_deltalake(str(tmp_path / name), pa.Table.from_pandas(rows, preserve_index=False))
    answers: dict[str, list[list[str]]] = {}
    for engine in ("python", "spark"):
        assert main(["run", str(query), "--engine", engine, "--input", f"delta:{grown}@v0"]) == 1
        err = capsys.readouterr().err
        assert "volume" in err and "^" in err and "Traceback" not in err, engine
        assert main(["run", str(query), "--engine", engine, "--input", f"delta:{grown}"]) == 0
        assert "matches: 27" in capsys.readouterr().out, engine
        for name, reason in (("texts", "bad_event_time"), ("nulls", "null_event_time")):
            dead = tmp_path / f"{name}-{engine}.jsonl"
            args = [
                "run",
                V_SHAPE,
                "--engine",
                engine,
                "--input",
                f"delta:{tmp_path / name}",
                "--dead-letter",
                str(dead),
            ]
            assert main(args) == 0
            out = capsys.readouterr().out
            assert f"bad rows: 1 ({reason} 1)" in out, (engine, name, out)
            answers.setdefault(name, []).append(table_rows(out.split("events read")[0]))
    assert all(python == spark and len(python) > 20 for python, spark in answers.values())
    widened = tmp_path / "widened"
    write_deltalake(str(widened), pa.table({"k": ["a"], "n": pa.array([1], pa.int32())}))
    write_deltalake(
        str(widened),
        pa.table({"k": ["a"], "n": pa.array([2**40], pa.int64())}),
        mode="overwrite",
        schema_mode="overwrite",
    )
    at = {version: read_delta(spark, DeltaSnapshot(str(widened), version=version)).collect() for version in (0, 1)}
    assert [row["n"] for row in at[0]] == [1] and [row["n"] for row in at[1]] == [2**40]


def test_the_local_session_replays_delta_logs_in_one_partition_per_core_unless_told(spark):
    """The suite's session is local[2]: Delta rebuilds a table's state in 2 partitions, not its default 50 (the
    cost of every read here); a value someone set is kept when the session is asked for again (the CLI in this
    process does that for each command)."""
    from cep.spark_bridge.spark.session import DELTA_SNAPSHOT_PARTITIONS_CONF, get_spark

    assert spark.sparkContext.master == "local[2]"
    assert spark.conf.get(DELTA_SNAPSHOT_PARTITIONS_CONF) == "2"
    spark.conf.set(DELTA_SNAPSHOT_PARTITIONS_CONF, "7")
    try:
        assert get_spark("local[*]").conf.get(DELTA_SNAPSHOT_PARTITIONS_CONF) == "7"
    finally:
        spark.conf.set(DELTA_SNAPSHOT_PARTITIONS_CONF, "2")
