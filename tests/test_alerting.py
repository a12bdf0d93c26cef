"""Alerting: many rules over one stream, rules changed mid-stream, restarts, suppression, the CLI.

Two layers, as in test_streaming.py:

* Without Spark: ``LocalAlerts`` drives the alerting operator (``Explode`` then ``AlertStep`` per
  (rule, key)) with Spark's micro-batch rules (watermark of the previous batch, timers that fire when
  the watermark passes them, one call per key per batch) and a stand-in for ``GroupState``.
* On Spark (``@pytest.mark.spark``, the shared session; file-source streams in tmp dirs; no sleeps):
  rules added and edited between micro-batches of one running query; a restart after a crash between
  the sink's write and Spark's commit, with the file sink read back through Spark and a SQLite table;
  ``cep stream --once`` and ``cep status``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sqlite3
import zlib
from collections import Counter
from pathlib import Path

import pytest

import cep
from cep.spark_bridge.alerting.bucket_state import BucketState
from cep.spark_bridge.alerting.rule_set import KIND_FAILED, KIND_MATCH, PKEY, SPEC, STAT_NAMES, build_rule_set
from cep.spark_bridge.alerting.store import RuleStore
from cep.spark_bridge.alerting.stream import AlertStream, read_status, rule_rows
from cep.spark_bridge.alerting.worker import AlertStep, Explode
from cep.spark_bridge.engine import state_codec
from cep.spark_bridge.sinks.alerts import ALERT_NAMES, jsonable
from cep.spark_bridge.sinks.file import FileSink
from cep.spark_bridge.sinks.sql import SQLiteSink
from cep.spark_bridge.spark.columns import EVENT_US, KIND
from tests.stream_files import write_batch

T0 = dt.datetime(2024, 1, 1)
TYPES = {"symbol": "VARCHAR", "ts": "TIMESTAMP", "price": "DOUBLE"}
COLUMNS = list(TYPES)
SENTINEL = "zzz"


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def ev(symbol: str, seconds: float, price: float) -> dict:
    return {"symbol": symbol, "ts": at(seconds), "price": float(price)}


def write_rule(directory: Path, name: str, text: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text, encoding="utf-8")
    # Rule files edited within one clock tick must still look changed.
    stamp = os.stat(path).st_mtime_ns + 1_000_000
    os.utime(path, ns=(stamp, stamp))


# ------------------------------------------------------------------------------ the rules, in-process


class FakeState:
    """What ``applyInPandasWithState`` hands the function, for one key in one micro-batch."""

    def __init__(self, value, watermark_ms: int, timed_out: bool) -> None:
        self.value, self.watermark_ms, self.hasTimedOut, self.timeout = value, watermark_ms, timed_out, None

    @property
    def exists(self) -> bool:
        return self.value is not None

    @property
    def get(self):
        return self.value

    def update(self, value) -> None:
        self.value = tuple(value)

    def remove(self) -> None:
        self.value = None

    def setTimeoutTimestamp(self, ms: int) -> None:  # noqa: N802 - Spark's name
        assert ms >= self.watermark_ms
        self.timeout = ms

    def getCurrentWatermarkMs(self) -> int:  # noqa: N802
        return self.watermark_ms


class LocalAlerts:
    """The alerting operator under Spark's micro-batch rules, without Spark."""

    BUCKETS = 3  # keys share calls, as on Spark (where a Murmur3 hash, not this one, places them)

    def __init__(
        self,
        store: RuleStore,
        delay_s: int,
        housekeeping_us: int = 3_600_000_000,
        column_wise: bool = True,
        early_release: bool = True,
    ) -> None:
        self.explode = Explode(store.directory, COLUMNS + [EVENT_US])
        # early_release: as on Spark, each key releases up to its own bound (its largest event time - the delay)
        self.step = AlertStep(
            store.directory,
            housekeeping_us,
            self.BUCKETS,
            column_wise=column_wise,
            release_delay_ms=delay_s * 1000 if early_release else None,
        )
        self.delay_ms = delay_s * 1000
        self.watermark_ms, self.max_ms = 0, None
        self.states: dict[tuple, tuple] = {}
        self.timers: dict[tuple, int] = {}
        self.stats: Counter = Counter()
        self.failures: list[dict] = []  # KIND_FAILED rows: a rule that raised on a key

    def run_batch(self, rows: list[dict]) -> list[dict]:
        import pandas as pd

        frames = []
        if rows:
            pdf = pd.DataFrame(rows, columns=COLUMNS)
            pdf[EVENT_US] = [state_codec.datetime_to_micros(r["ts"]) for r in rows]
            frames = list(self.explode(iter([pdf])))
        groups = {}
        if frames:
            exploded = pd.concat(frames, ignore_index=True)
            exploded["bucket"] = [zlib.crc32(k.encode()) % self.BUCKETS for k in exploded[PKEY]]
            groups = {key: frame.reset_index(drop=True) for key, frame in exploded.groupby([SPEC, "bucket"], sort=True)}
        calls = list(groups.items()) + [
            (k, None) for k, t in sorted(self.timers.items()) if k not in groups and self.watermark_ms > t
        ]
        out = []
        for key, frame in calls:
            state = FakeState(self.states.get(key), self.watermark_ms, frame is None)
            result = pd.concat(list(self.step(key, iter([] if frame is None else [frame]), state)))
            if state.value is None:
                assert state.timeout is None or frame is None
                self.states.pop(key, None)
                self.timers.pop(key, None)
            else:
                self.states[key] = state.value
                self.timers[key] = state.timeout
            for record in frame_records(result):
                if record[KIND] == KIND_MATCH:
                    out.append({name: record[name] for name in ALERT_NAMES})
                elif record[KIND] == KIND_FAILED:
                    self.failures.append(
                        {
                            "rule_id": record["rule_id"],
                            "version": record["rule_version"],
                            "key": record["partition_key"],
                            "error": record["measures"],
                        }
                    )
                else:
                    self.stats.update(
                        {(record["rule_id"], n): v for n, v in zip(STAT_NAMES, record["__cep_stats"]) if v}
                    )
        for row in rows:
            ms = state_codec.datetime_to_micros(row["ts"]) // 1000
            self.max_ms = ms if self.max_ms is None else max(self.max_ms, ms)
        if self.max_ms is not None:
            self.watermark_ms = max(self.watermark_ms, self.max_ms - self.delay_ms)
        return out

    def rules_in_state(self) -> set[str]:
        """The rule ids with state in some bucket: an entry in some key's state (rules run per key), or a
        column-wise table (rules run column-wise)."""
        buckets = [BucketState.decode(blob[0], self.BUCKETS) for blob in self.states.values()]
        per_key = {
            rule_id
            for b in buckets
            for key_state in b.keys.states.values()
            for rule_id in state_codec.decode(key_state)
        }
        return per_key | {rule_id for b in buckets for rule_id in b.rule_ids()}


def frame_records(frame) -> list[dict]:
    """``frame.to_dict("records")``, the same values of the same types, built from one ``to_numpy(object)``
    instead of a pandas lookup per column per call: ``LocalAlerts`` converts every bucket call's output, and
    ``to_dict`` was about a tenth of the columnwise property tests' time (cProfile)."""
    from pandas.api.types import is_object_dtype
    from pandas.core.dtypes.cast import maybe_box_native

    names = frame.columns.tolist()
    boxed = [index for index, dtype in enumerate(frame.dtypes) if is_object_dtype(dtype)]  # as to_dict boxes them
    records = []
    for row in frame.to_numpy(dtype=object).tolist():
        for index in boxed:
            row[index] = maybe_box_native(row[index])
        records.append(dict(zip(names, row)))
    return records


def publish(tmp_path: Path, rules_dir: Path) -> tuple[RuleStore, dict]:
    payload, ruleset = build_rule_set(str(rules_dir), input_types=TYPES)
    assert not ruleset.errors, [str(e) for e in ruleset.errors]
    store = RuleStore(str(tmp_path / "store"))
    store.publish(payload)
    return store, payload


HIGH = """-- name: high
-- suppress: 1m
SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts MEASURES X.price AS p PATTERN (X) DEFINE X AS price > 100)"""  # noqa: E501 (test data: the rule's SQL kept as written)


def test_suppression_at_most_one_alert_per_key_per_interval(tmp_path):
    rules = tmp_path / "rules"
    write_rule(rules, "prices.sql", HIGH)
    store, _ = publish(tmp_path, rules)
    local = LocalAlerts(store, delay_s=5)
    alerts = []
    for batch in (
        [ev("a", 0, 101), ev("a", 10, 102), ev("b", 11, 150)],
        [ev("a", 30, 103), ev("a", 61, 104)],
        [ev("a", 85, 105), ev("a", 125, 106), ev("b", 130, 101)],
        [ev(SENTINEL, 10_000, 1)],
        [],
    ):
        alerts += local.run_batch(batch)
    by_time = {(a["partition_key"], json.loads(a["measures"])["p"]): a["suppressed"] for a in alerts}
    assert by_time == {
        ('{"symbol": "a"}', 101.0): False,
        ('{"symbol": "a"}', 102.0): True,
        ('{"symbol": "a"}', 103.0): True,
        ('{"symbol": "a"}', 104.0): False,
        ('{"symbol": "a"}', 105.0): True,
        ('{"symbol": "a"}', 106.0): False,
        ('{"symbol": "b"}', 150.0): False,
        ('{"symbol": "b"}', 101.0): False,
    }
    assert local.stats[("prices/high", "suppressed")] == 3 and local.stats[("prices/high", "matched")] == 8
    assert all(a["match_status"] == "MATCHED" and a["first_event_time"] == a["last_event_time"] for a in alerts)


def test_bad_rows_cross_the_operator_in_their_own_group_and_reach_no_rule(tmp_path):
    """With the reason column of mark_bad_rows, Explode sends a bad row once, to BAD_SPEC (not to a
    rule's partition spec), and AlertStep hands it back as it came (KIND_BAD), keeping no state."""
    import pandas as pd

    from cep.spark_bridge.alerting.rule_set import BAD_SPEC, KIND_BAD, KIND_STATS

    rules = tmp_path / "rules"
    write_rule(rules, "prices.sql", HIGH)
    store, _ = publish(tmp_path, rules)
    passthrough = ["__cep_reject", "__cep_raw", "__cep_file"]
    rows = [ev("a", 0, 101), ev("a", 1, 5), {"symbol": None, "ts": None, "price": None}]
    pdf = pd.DataFrame(rows, columns=COLUMNS)
    pdf[EVENT_US] = [state_codec.datetime_to_micros(r["ts"]) if r["ts"] else -(2**63) for r in rows]
    pdf["__cep_reject"], pdf["__cep_raw"], pdf["__cep_file"] = (
        [None, None, "not_json"],
        [None, None, "{oops"],
        [None, None, "f.json"],
    )
    exploded = pd.concat(Explode(store.directory, COLUMNS + [EVENT_US] + passthrough, "__cep_reject")(iter([pdf])))
    assert sorted(zip(exploded[SPEC], exploded["price"].fillna(-1))) == [
        ('["symbol"]', 5.0),
        ('["symbol"]', 101.0),
        (BAD_SPEC, -1.0),
    ]
    step = AlertStep(store.directory, 3_600_000_000, 3, passthrough)
    bad = FakeState(None, 0, False)
    out = pd.concat(list(step((BAD_SPEC, 0), iter([exploded[exploded[SPEC] == BAD_SPEC]]), bad)))
    assert list(out[KIND]) == [KIND_BAD] and bad.value is None and bad.timeout is None
    assert out[passthrough].values.tolist() == [["not_json", "{oops", "f.json"]] and out["rule_id"].isna().all()
    good = pd.concat(
        list(step(('["symbol"]', 0), iter([exploded[exploded[SPEC] != BAD_SPEC]]), FakeState(None, 0, False)))
    )
    assert set(good[KIND]) == {KIND_STATS} and good[passthrough].isna().all().all()  # nothing released yet: counts only


V1 = """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts MEASURES COUNT(*) AS n, LAST(X.price) AS p
  PATTERN (X{3}) DEFINE X AS price > 50)"""
V2 = V1.replace("X{3}", "X{2}")


def test_changed_rule_drops_its_state_with_counts_and_unchanged_rule_keeps_it(tmp_path):
    rules = tmp_path / "rules"
    write_rule(rules, "three.sql", V1)
    write_rule(rules, "keep.sql", V1)
    store, _ = publish(tmp_path, rules)
    local = LocalAlerts(store, delay_s=1)
    assert local.run_batch([ev("a", 1, 60), ev("a", 2, 61)]) == []
    local.run_batch([ev("x", 5, 0)])  # moves the watermark: a's two rows are released, a partial match is live
    assert local.stats[("three", "d_live")] >= 1
    write_rule(rules, "three.sql", V2)  # edited: X{2}
    store, _ = publish(tmp_path, rules)
    out = local.run_batch([ev("a", 10, 70), ev("a", 11, 71)]) + local.run_batch([ev("x", 100, 0)]) + local.run_batch([])
    got = sorted((a["rule_id"], json.loads(a["measures"])["n"], a["first_event_time"]) for a in out)
    # keep: the partial match of rows 1 and 2 went on across the edit of the other rule (1, 2, 10).
    # three: fresh state, only the rows after the edit (10, 11).
    assert got == [("keep", 3, at(1)), ("three", 2, at(10))]
    assert local.stats[("three", "dropped_live")] >= 1 and local.stats[("three", "dropped_pending")] >= 1
    versions = {a["rule_id"]: a["rule_version"] for a in out}
    assert versions["three"] == cep_version(V2) and versions["keep"] == cep_version(V1)


def cep_version(text: str) -> str:
    from cep.spark_bridge.alerting.rules import rule_version

    return rule_version(cep.parse(text))


def test_removed_rule_state_is_reclaimed_by_the_housekeeping_timer(tmp_path):
    rules = tmp_path / "rules"
    write_rule(rules, "gone.sql", V1)
    write_rule(rules, "stay.sql", HIGH)
    store, _ = publish(tmp_path, rules)
    local = LocalAlerts(store, delay_s=1, housekeeping_us=60_000_000)
    local.run_batch([ev("a", 1, 60), ev("a", 2, 61)])
    local.run_batch([ev("x", 5, 0)])
    assert "gone" in local.rules_in_state()
    (rules / "gone.sql").unlink()
    publish(tmp_path, rules)
    local.run_batch([ev("x", 200, 0)])  # the watermark passes every housekeeping timer
    local.run_batch([])
    assert "gone" not in local.rules_in_state()
    assert local.stats[("gone", "dropped_live")] >= 1


# ------------------------------------------------------------------------------------------ Spark


def _schema():
    from pyspark.sql import types as T

    return T.StructType(
        [
            T.StructField("symbol", T.StringType()),
            T.StructField("ts", T.TimestampType()),
            T.StructField("price", T.DoubleType()),
        ]
    )


@pytest.fixture()
def two_partitions(spark):
    saved = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    yield
    spark.conf.set("spark.sql.shuffle.partitions", saved)


def replay(text: str, events: list[dict]) -> list[tuple]:
    """(partition key JSON, measures JSON) of a rule's batch replay, as the alerts carry them."""
    query = cep.compile(text)
    out = []
    for row in query.run([e for e in events if e["symbol"] != SENTINEL]):
        key = json.dumps({"symbol": row["symbol"]})
        out.append((key, json.dumps({k: jsonable(v) for k, v in row.items()})))
    return sorted(out)


def streamed(frame, rule_id: str, version: str | None = None) -> list[tuple]:
    rows = frame[(frame["rule_id"] == rule_id) & (frame["partition_key"] != json.dumps({"symbol": SENTINEL}))]
    if version is not None:
        rows = rows[rows["rule_version"] == version]
    return sorted(zip(rows["partition_key"], rows["measures"]))


SPAN = """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts
  MEASURES FIRST(A.ts) AS a_ts, LAST(C.price) AS c_price, COUNT(B.*) AS bs
  AFTER MATCH SKIP PAST LAST ROW PATTERN (A B+ C) DEFINE A AS price < 10, B AS price BETWEEN 10 AND 20, C AS price > 20)"""  # noqa: E501 (test data: the rule's SQL kept as written)
R2_OLD = """-- name: run
SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts MEASURES COUNT(*) AS n, SUM(X.price) AS total
  AFTER MATCH SKIP PAST LAST ROW PATTERN (X{3}) DEFINE X AS price > 50)"""
R2_NEW = R2_OLD.replace("X{3}", "X{2}")
R3 = """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts MEASURES FIRST(L.ts) AS l_ts, LAST(H.price) AS h
  AFTER MATCH SKIP PAST LAST ROW PATTERN (L H) DEFINE L AS price < 10, H AS price > 50)"""  # noqa: E501 (test data: the rule's SQL kept as written)


def price_walk(symbols, start: int, end: int, step: int, seed: int) -> list[dict]:
    import random

    rnd = random.Random(seed)
    return [
        ev(s, t + i, rnd.choice([5, 15, 25, 55, 65])) for t in range(start, end, step) for i, s in enumerate(symbols)
    ]


def price_batches() -> list[list[dict]]:
    """Two micro-batches for HIGH (alerts, some suppressed) and SPAN (a match of "s" left open after them)."""
    return [
        [ev("a", 0, 101), ev("a", 10, 102), ev("b", 11, 150)] + price_walk(["c", "d"], 0, 30, 3, seed=3),
        [ev("a", 30, 103), ev("a", 61, 104), ev("s", 50, 5), ev("s", 51, 15)]
        + price_walk(["c", "d"], 40, 80, 3, seed=4),
    ]


def price_batches_to_the_end() -> list[list[dict]]:
    """``price_batches``, a third micro-batch that closes the match of "s", then the sentinel alone (the
    watermark past all): a restart's input."""
    return price_batches() + [
        [ev("a", 85, 105), ev("a", 125, 106), ev("b", 130, 101), ev("s", 95, 25)]
        + price_walk(["c", "d"], 90, 140, 3, seed=5),
        [ev(SENTINEL, 10_000, 0)],
    ]


@pytest.mark.spark
def test_bad_rows_first_seen_at_a_compaction_batch_are_written(spark, tmp_path):
    """The stream commits its bad rows with Spark's file sink only in micro-batches that have some, and records
    the others with no file. Spark's sink log compacts itself at every tenth batch (9, 19, ...) from the entries
    of the batches before it and fails when one is missing: a stream whose first bad row came at batch 9 failed
    that micro-batch, and again on every restart."""
    sink = FileSink(str(tmp_path / "bad-rows"), "json")
    sink.prepare()
    rows = spark.createDataFrame([("not_json", "{oops")], "_cep_error string, _cep_raw string").coalesce(1)
    for batch_id in range(21):
        if batch_id in (9, 19):
            sink.commit(batch_id, rows)
        else:
            sink.commit_nothing(batch_id, spark)
    sink.commit_nothing(9, spark)  # a micro-batch run again after a crash: recorded once, its file kept
    assert len(list((tmp_path / "bad-rows").glob("part-*"))) == 2  # no empty file for the other batches
    assert sorted(r._cep_raw for r in spark.read.json(str(tmp_path / "bad-rows")).collect()) == ["{oops", "{oops"]
    assert sink.has_batch(20) and sink.has_batch(9)


@pytest.mark.spark
def test_rules_added_and_edited_between_micro_batches_of_a_running_stream(spark, two_partitions, tmp_path):
    rules, source, checkpoint = tmp_path / "rules", tmp_path / "in", tmp_path / "ck"
    write_rule(rules, "span.sql", SPAN)
    write_rule(rules, "two.sql", R2_OLD)
    # Batch 1 ends inside a SPAN match for "s" (A then B) and inside an X{3} run of the old "two/run".
    batch1 = price_walk(["a", "b"], 0, 40, 4, seed=1) + [
        ev("s", 40, 5),
        ev("s", 41, 15),
        ev("r", 10, 60),
        ev("r", 11, 61),
    ]
    late = ev("a", 2, 500.0)  # far behind the watermark when it comes: late for each of the three rules
    batch2 = price_walk(["a", "b"], 100, 160, 4, seed=2) + [ev("s", 100, 25), ev("r", 101, 62), late]
    batch3 = [ev(SENTINEL, 10_000, 0)]
    write_batch(source, 1, batch1)
    events_log: list[str] = []
    df = spark.readStream.schema(_schema()).json(str(source))
    database = tmp_path / "alerts.db"
    stream = AlertStream(
        spark,
        str(rules),
        df,
        checkpoint=str(checkpoint),
        output=str(tmp_path / "out"),
        output_format="parquet",
        sinks=[SQLiteSink(str(database))],
        watermark="5 seconds",
        on_event=events_log.append,
    )
    stream.start()
    try:
        stream.process_all_available()
        old_two = stream.ruleset["two/run"].version
        # Between micro-batches: a rule is added, one is edited, a broken one appears.
        write_rule(rules, "three.sql", R3)
        write_rule(rules, "two.sql", R2_NEW)
        write_rule(
            rules, "broken.sql", "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A) DEFINE A AS nope > 1)"
        )
        changes = stream.refresh_rules()
        assert (changes.added, changes.changed, changes.removed) == (("three",), ("two/run",), ())
        write_batch(source, 2, batch2)
        stream.process_all_available()
        write_batch(source, 3, batch3)
        stream.process_all_available()
    finally:
        stream.stop()
    out = stream.alerts().toPandas()
    assert out["match_id"].is_unique and set(out["match_status"]) == {"MATCHED"}
    new_two = stream.ruleset["two/run"].version
    written = stream.late_rows()  # DEAD_LETTER/late/: one line per rule and late row
    assert sorted(r["rule_id"] for r in written) == ["span", "three", "two/run"]
    assert {(r["reason"], r["row"]["price"], r["partition_key"], r["event_time"]) for r in written} == {
        ("behind_watermark", 500.0, '{"symbol": "a"}', "2024-01-01T00:00:02Z")
    }
    batch2.remove(late)  # the replays below are of the rows that were matched
    # The unchanged rule saw everything; its match that spans the edit completed.
    assert streamed(out, "span") == replay(SPAN, batch1 + batch2 + batch3)
    spanning = out[(out["rule_id"] == "span") & (out["partition_key"] == '{"symbol": "s"}')]
    assert list(spanning["first_event_time"]) == [at(40)] and list(spanning["last_event_time"]) == [at(100)]
    # The edited rule started fresh with the rows after its change; the added rule too.
    assert streamed(out, "two/run", new_two) == replay(R2_NEW, batch2 + batch3)
    assert set(streamed(out, "two/run", old_two)) <= set(replay(R2_OLD, batch1))
    assert streamed(out, "three") == replay(R3, batch2 + batch3)
    assert not (out["rule_id"] == "broken").any()
    with sqlite3.connect(database) as db:  # the delivery query ran alongside, micro-batch by micro-batch
        assert sorted(r[0] for r in db.execute("SELECT match_id FROM alerts")) == sorted(out["match_id"])
    # What the status file says, and what was logged.
    status = read_status(str(checkpoint))
    rows = {r["rule"]: r for r in rule_rows(status)}
    assert (
        rows["span"]["matches"] == len(streamed(out, "span"))
        and rows["span"]["version"] == stream.ruleset["span"].version
    )
    assert rows["two/run"]["version"] == new_two and rows["broken"]["state"] == "error"
    assert "broken.sql:1:" in rows["broken"]["errors"][0] and "E0" in rows["broken"]["errors"][0]
    old = status["rules"]["two/run"]["versions"][old_two]
    assert (
        old["dropped_live"] >= 1 and old["live_partial_matches"] == 0 and old["pending_rows"] == 0 and old["keys"] == 0
    )
    assert any("two/run changed" in e for e in events_log) and any("rule three added" in e for e in events_log)
    assert any("dropped" in e and old_two in e for e in events_log)
    assert (
        status["late_rows"] == 1 and rows["span"]["late"] == rows["three"]["late"] == 1
    )  # the row once, and once per rule


@pytest.mark.spark
def test_restart_after_a_crash_before_commit_no_loss_no_duplicates(spark, two_partitions, tmp_path):
    rules, source, checkpoint, output = tmp_path / "rules", tmp_path / "in", tmp_path / "ck", tmp_path / "out"
    write_rule(rules, "prices.sql", HIGH)
    write_rule(rules, "span.sql", SPAN)
    batches = price_batches_to_the_end()
    database = tmp_path / "alerts.db"

    def run(files: int) -> AlertStream:
        for index in range(files):
            write_batch(source, index, batches[index])
        df = spark.readStream.schema(_schema()).option("maxFilesPerTrigger", 1).json(str(source))
        stream = AlertStream(
            spark,
            str(rules),
            df,
            checkpoint=str(checkpoint),
            output=str(output),
            output_format="json",
            sinks=[SQLiteSink(str(database))],
            watermark="5 seconds",
        )
        stream.run_available_now()
        return stream

    run(2)
    # A crash after the sinks wrote the last micro-batch and before Spark committed it: on restart the
    # batch runs again (same offsets, same rule set), its output must not be duplicated.
    commits = sorted((checkpoint / "match" / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    commits[-1].unlink()
    (commits[-1].parent / f".{commits[-1].name}.crc").unlink(missing_ok=True)
    stream = run(len(batches))
    out = stream.alerts().toPandas()
    events = [e for b in batches for e in b]
    assert out["match_id"].is_unique
    assert streamed(out, "prices/high") == replay(HIGH, events)
    assert streamed(out, "span") == replay(SPAN, events)
    across = out[(out["rule_id"] == "span") & (out["partition_key"] == '{"symbol": "s"}')]
    assert list(across["first_event_time"]) == [at(50)] and list(across["last_event_time"]) == [
        at(95)
    ]  # spans the restart
    high = out[out["rule_id"] == "prices/high"]
    assert int(high["suppressed"].sum()) == 3 and int(out[out["rule_id"] == "span"]["suppressed"].sum()) == 0
    with sqlite3.connect(database) as db:
        rows = db.execute("SELECT match_id, suppressed FROM alerts").fetchall()
    assert sorted(r[0] for r in rows) == sorted(out[~out["suppressed"]]["match_id"])  # one row per unsuppressed match
    status = read_status(str(checkpoint))
    counts = {r["rule"]: r for r in rule_rows(status)}
    assert counts["prices/high"]["suppressed"] == 3 and counts["prices/high"]["matches"] == len(high)
    assert status["state"] == "stopped" and status["sinks"][SQLiteSink(str(database)).key()]["delivered"] == len(rows)


@pytest.mark.spark
def test_cli_stream_once_and_status(spark, two_partitions, tmp_path, capsys):
    from cep import status_cli, stream_cli
    from tests.test_sinks import Receiver

    receiver = Receiver(["500", "timeout"])  # the first alert needs three attempts

    rules, source, checkpoint = tmp_path / "rules", tmp_path / "in", tmp_path / "ck"
    write_rule(rules, "prices.sql", HIGH)
    write_rule(
        rules,
        "bad.sql",
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts ALL ROWS PER MATCH PATTERN (A) DEFINE A AS price > 1)",
    )
    write_batch(source, 0, [ev("a", 0, 101), ev("a", 100, 150), ev(SENTINEL, 1000, 0)])
    parser = argparse.ArgumentParser(prog="cep")
    subparsers = parser.add_subparsers(dest="command")
    stream_cli.add_commands(subparsers)
    status_cli.add_commands(subparsers)

    def cep_main(*argv: str) -> int:
        args = parser.parse_args(list(argv))
        return args.func(args)

    try:
        code = cep_main(
            "stream",
            "--rules",
            str(rules),
            "--input",
            str(source),
            "--checkpoint",
            str(checkpoint),
            "--sink",
            "csv",
            "--sink",
            "console",
            "--sink",
            "webhook",
            receiver.url,
            "--webhook-timeout",
            "0.5",
            "--watermark",
            "5s",
            "--once",
            "--master",
            "local[2]",
        )
    finally:
        receiver.stop()
    captured = capsys.readouterr()
    assert code == 1  # a rule could not be loaded (it was skipped; the others ran)
    # A new checkpoint on a local master: the rules run on the driver, and the start line and the status say why.
    assert "(rules on the driver: a local master (local[2]); --state spark for Spark's state store)" in captured.err
    assert read_status(str(checkpoint))["layout"] == {
        "state": "driver",
        "why": "a local master (local[2])",
        "other": "--state spark for Spark's state store",
    }
    assert "bad.sql:1:" in captured.err and "E0602" in captured.err
    assert captured.out.count("ALERT prices/high  MATCHED  symbol=a") == 2
    alerts = FileSink(str(checkpoint / "matches"), "csv").read(spark)
    assert alerts.count() == 2
    assert sorted(receiver.processed) == sorted(r.match_id for r in alerts.collect()) and len(receiver.requests) == 4
    assert not list(
        (checkpoint / "dead-letter").glob("*.json")
    )  # no webhook dead letter (bad-rows/ holds bad input rows)
    assert not list((checkpoint / "dead-letter" / "bad-rows").glob("part-*"))  # no bad row: no (empty) file either
    copies = (checkpoint / "status.json", checkpoint / "status.backup.json")
    assert all(p.stat().st_mode & 0o777 == 0o600 for p in copies)
    assert cep_main("status", "--checkpoint", str(checkpoint)) == 3  # stopped (the LSB code), not running
    shown = capsys.readouterr().out
    assert "prices/high" in shown and "stopped" in shown and "bad" in shown and "E0602" in shown
    layout_line = "state: rules on the driver (--state driver): a local master (local[2]); --state spark for Spark's"
    assert layout_line in shown
    line = next(row for row in shown.splitlines() if row.startswith("prices/high"))
    assert line.split()[1:4] == ["active", cep_version(HIGH), "2"]
    # The backtest of the rule set gives the live stream's ids (and suppression).
    from cep.cli import main

    replayed = tmp_path / "replayed.json"
    assert (
        main(
            [
                "run",
                "--rules",
                str(rules),
                "--input",
                *map(str, sorted(source.glob("*.json"))),
                "--engine",
                "python",
                "-o",
                str(replayed),
            ]
        )
        == 1
    )  # bad.sql is reported again
    capsys.readouterr()
    backtest = [json.loads(line) for line in replayed.read_text().splitlines()]
    assert sorted((a["rule_id"], a["match_id"], a["suppressed"]) for a in backtest) == sorted(
        (r.rule_id, r.match_id, r.suppressed) for r in alerts.collect()
    )
    # One query file works too: a rule set of one file.
    single = tmp_path / "one.sql"
    single.write_text(HIGH, encoding="utf-8")
    assert (
        cep_main(
            "stream",
            str(single),
            "--input",
            str(source),
            "--checkpoint",
            str(tmp_path / "ck1"),
            "--watermark",
            "5s",
            "--once",
        )
        == 0
    )
    assert read_status(str(tmp_path / "ck1"))["rules"]["one/high"]["versions"][cep_version(HIGH)]["matched"] == 2


class _SchemaOnly:
    """Enough of a streaming DataFrame for AlertStream's rule handling (no Spark job runs)."""

    def __init__(self) -> None:
        self.schema = _schema()
        self.isStreaming = True


def test_a_rule_broken_by_an_edit_keeps_running_its_last_good_version(tmp_path):
    rules = tmp_path / "rules"
    write_rule(rules, "prices.sql", HIGH)
    messages: list[str] = []
    stream = AlertStream(None, str(rules), _SchemaOnly(), checkpoint=str(tmp_path / "ck"), on_event=messages.append)
    assert stream.refresh_rules().added == ("prices/high",)
    good = stream.ruleset["prices/high"].version
    write_rule(rules, "prices.sql", HIGH.replace("price > 100", "price >"))
    changes = stream.refresh_rules()
    assert not changes and stream.ruleset["prices/high"].version == good
    assert [r["rule_id"] for r in stream.payload["rules"]] == ["prices/high"]
    row = {r["rule"]: r for r in rule_rows(stream.status)}["prices/high"]
    assert row["state"] == "active" and "prices.sql:3:" in row["errors"][0] and "keeps running" in row["errors"][0]
    assert any("keeps running" in m for m in messages)
    # Across a restart too: the last published set still holds it.
    again = AlertStream(None, str(rules), _SchemaOnly(), checkpoint=str(tmp_path / "ck"))
    assert not again.refresh_rules() and again.ruleset["prices/high"].version == good
    write_rule(rules, "prices.sql", HIGH.replace("price > 100", "price > 200"))
    assert again.refresh_rules().changed == ("prices/high",)
    (rules / "prices.sql").unlink()
    assert again.refresh_rules().removed == ("prices/high",)
    assert rule_rows(again.status)[0]["state"] == "removed"


def test_a_broken_rule_file_that_is_deleted_leaves_the_error_state(tmp_path):
    rules = tmp_path / "rules"
    write_rule(rules, "prices.sql", HIGH)
    write_rule(rules, "broken.sql", HIGH.replace("price > 100", "price >"))
    messages: list[str] = []
    stream = AlertStream(None, str(rules), _SchemaOnly(), checkpoint=str(tmp_path / "ck"), on_event=messages.append)
    stream.refresh_rules()
    states = {r["rule"]: r["state"] for r in rule_rows(stream.status)}
    assert states == {"prices/high": "active", "broken/high": "error"}
    (rules / "broken.sql").unlink()
    stream.refresh_rules()
    states = {r["rule"]: r for r in rule_rows(stream.status)}
    assert states["broken/high"]["state"] == "removed" and states["broken/high"]["errors"] == []
    assert stream.status["errors"] == [] and any("broken/high" in m and "error is cleared" in m for m in messages)
    from cep.spark_bridge.alerting.metrics import StreamMetrics

    text = "\n".join(f"{m.name}{s.labels} {s.value}" for m in StreamMetrics(stream).collect() for s in m.samples)
    assert "cep_rules{'state': 'error'} 0" in text and "cep_rules{'state': 'active'} 1" in text


def test_a_checkpoint_of_the_old_bad_row_query_is_moved_aside(tmp_path):
    """Before one query wrote both outputs, a second query kept CHECKPOINT/bad-rows/ and its own batch ids
    in DEAD_LETTER/bad-rows/_spark_metadata; the file sink would skip the new query's batches up to those
    ids. Both move aside, still readable, and the log line says where the earlier bad rows are."""
    from cep.spark_bridge.alerting.layouts import retire_bad_row_query

    checkpoint = tmp_path / "ck"
    (checkpoint / "bad-rows" / "commits").mkdir(parents=True)
    (checkpoint / "dead-letter" / "bad-rows" / "_spark_metadata").mkdir(parents=True)
    (checkpoint / "dead-letter" / "bad-rows" / "part-0.json").write_text('{"_cep_error": "not_json"}\n')
    bad_rows = FileSink(str(checkpoint / "dead-letter" / "bad-rows"), "json")
    messages: list[str] = []
    retire_bad_row_query(str(checkpoint), bad_rows, lambda message, level="info": messages.append(message))
    assert not (checkpoint / "bad-rows").exists() and not (checkpoint / "dead-letter" / "bad-rows").exists()
    (old,) = (checkpoint / "dead-letter").glob("bad-rows.before-*")
    assert (old / "part-0.json").exists() and len(list(checkpoint.glob("bad-rows.before-*"))) == 1
    assert len(messages) == 1 and str(old) in messages[0]
    retire_bad_row_query(str(checkpoint), bad_rows, messages.append)  # nothing left to move: a no-op
    assert len(list((checkpoint / "dead-letter").glob("bad-rows.before-*"))) == 1 and len(messages) == 1


def test_a_rules_directory_that_disappears_is_an_outage_not_a_deletion(tmp_path):
    """The directory goes away for a while (a remount, a deploy replacing it): the last good rule set keeps
    running with its state, the outage is logged once and shown in the status, and nothing changes
    when the directory is back. Matches that span the outage complete, as in the replay."""
    rules = tmp_path / "rules"
    write_rule(rules, "three.sql", V1)
    messages: list[str] = []
    stream = AlertStream(None, str(rules), _SchemaOnly(), checkpoint=str(tmp_path / "ck"), on_event=messages.append)
    stream.refresh_rules(force=True)
    local = LocalAlerts(stream.store, delay_s=1)
    batches = [
        [ev("a", 1, 60), ev("a", 2, 61)],
        [ev("x", 5, 0)],
        [ev("a", 10, 70), ev("b", 11, 80)],
        [ev("b", 12, 81), ev("b", 13, 82)],
        [ev("x", 100, 0)],
        [],
    ]
    out = local.run_batch(batches[0]) + local.run_batch(batches[1])
    set_before = stream.store.current_id()
    os.rename(rules, tmp_path / "away")  # gone: every rule's state would go with a deletion
    for _ in range(3):
        assert not stream.refresh_rules()
    assert stream.store.current_id() == set_before and list(stream.ruleset.rules) == ["three"]
    assert stream.status["rules_outage"]["error"] == "it does not exist"
    assert sum("cannot be read" in m for m in messages) == 1 and "keeps running" in messages[-1]
    out += local.run_batch(batches[2]) + local.run_batch(batches[3])
    os.rename(tmp_path / "away", rules)
    assert not stream.refresh_rules() and "rules_outage" not in stream.status
    assert any("can be read again" in m for m in messages)
    out += local.run_batch(batches[4]) + local.run_batch(batches[5])
    got = sorted((a["partition_key"], json.loads(a["measures"])["n"], a["first_event_time"]) for a in out)
    expected = sorted(
        (json.dumps({"symbol": r["symbol"]}), r["n"], at(1) if r["symbol"] == "a" else at(11))
        for r in cep.compile(V1).run([e for b in batches for e in b if e["symbol"] != "x"])
    )
    assert got == expected and len(got) == 2  # a: rows 1, 2, 10 across the outage; b: 11, 12, 13
    for path in rules.iterdir():  # every file deleted from a directory that is there: a deletion
        path.unlink()
    assert stream.refresh_rules().removed == ("three",)
