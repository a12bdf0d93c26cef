"""``FileSink.commit_alerts``: alerts already on the driver written without a Spark job (the driver layout's
``foreachBatch``), against Spark's own file sink (``FileSink.commit``) fed the same alerts: the same JSON lines,
the same rows read back through ``_spark_metadata``, each batch id once, across the log's compaction."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from cep.spark_bridge.sinks.alerts import ALERT_NAMES, alert_schema
from cep.spark_bridge.sinks.file import LOCAL_LOG_CLEANUP_MS, LOG_CLEANUP_CONF, FileSink, local_log_settings
from cep.spark_bridge.spark.session import starting_with

pytestmark = pytest.mark.spark

TEXT = st.one_of(st.none(), st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12))
MOMENT = st.one_of(st.none(), st.datetimes(min_value=dt.datetime(1970, 1, 2), max_value=dt.datetime(2200, 1, 1)))
ALERT = st.fixed_dictionaries(
    {
        "rule_id": st.sampled_from(["a", "fraud/card", "ünï"]),
        "rule_version": TEXT,
        "match_id": st.text(alphabet="0123456789abcdef", min_size=1, max_size=8),
        "match_status": st.sampled_from(["MATCHED", "TIMEOUT", None]),
        "partition_key": TEXT,
        "first_event_time": MOMENT,
        "last_event_time": MOMENT,
        "measures": TEXT,
        "emit_time": MOMENT,
        "suppressed": st.one_of(st.none(), st.booleans()),
    }
)
# past the sink log's compaction (every tenth batch): the compacted log must still name every file
BATCHES = st.lists(st.lists(ALERT, max_size=6), min_size=11, max_size=12)


def lines(directory: Path) -> list[dict]:
    return sorted(
        (json.loads(line) for path in directory.glob("part-*") for line in path.read_text().split("\n") if line),
        key=lambda row: json.dumps(row, sort_keys=True),
    )


def read_back(spark, sink: FileSink) -> list[tuple]:
    return sorted((tuple(row) for row in sink.read(spark).collect()), key=repr)


# a Spark job per batch and sink: few examples, and no shrinking (minutes per step under Spark)
@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck), phases=(Phase.generate,))
@given(batches=BATCHES)
def test_alerts_written_on_the_driver_are_what_spark_s_file_sink_writes_and_reads_back(
    spark, tmp_path_factory, batches
):
    base = tmp_path_factory.mktemp("sinks")
    driver, spark_sink = FileSink(str(base / "driver")), FileSink(str(base / "spark"))
    assert driver.writes_on_driver(spark)
    for batch_id, alerts in enumerate(batches):
        stored = driver.as_stored([dict(a) for a in alerts])
        driver.commit_alerts(batch_id, stored, spark)
        rows = [tuple(a[name] for name in ALERT_NAMES) for a in stored]
        spark_sink.commit(batch_id, spark.createDataFrame(rows, alert_schema()).coalesce(1))
    # a batch run again after a crash is skipped, as Spark's sink skips it
    driver.commit_alerts(len(batches) - 1, driver.as_stored([dict(a) for a in batches[-1]] * 2), spark)
    assert lines(base / "driver") == lines(base / "spark")
    assert read_back(spark, driver) == read_back(spark, spark_sink)
    assert (base / "driver" / "_spark_metadata" / "9.compact").exists()
    assert driver.has_batch(len(batches) - 1) and not driver.has_batch(len(batches))


def test_only_local_json_in_utc_is_written_on_the_driver(spark, tmp_path):
    assert not FileSink(str(tmp_path), "parquet").writes_on_driver(spark)
    assert not FileSink("s3a://bucket/alerts").writes_on_driver(spark)
    spark.conf.set("spark.sql.session.timeZone", "Europe/Paris")
    try:
        assert not FileSink(str(tmp_path)).writes_on_driver(spark)
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")


def test_a_stream_s_local_sink_logs_drop_what_a_compaction_holds_at_once(spark, tmp_path):
    """Spark's sink log lists its whole folder at every commit to find the entries a newer compaction holds, and
    by default deletes them only after 10 minutes: the folder, and each commit's listing, grows with the stream.
    Around a query's start ``local_log_settings`` gives the query's own session no delay when every sink is local,
    and the caller's session is given back as it was; the log still reads back every committed file."""
    sink, remote = FileSink(str(tmp_path / "out")), FileSink("s3a://bucket/alerts")
    sink.prepare()
    rows = spark.createDataFrame([(f"m{n}",) for n in range(3)], "match_id string").coalesce(1)
    seen: dict[int, str] = {}

    def each(batch, batch_id: int) -> None:
        if batch_id % 7 == 3:
            sink.commit(batch_id, rows)
        else:
            sink.commit_nothing(batch_id, batch.sparkSession)
        seen[batch_id] = batch.sparkSession.conf.get(LOG_CLEANUP_CONF)  # committed: the stop may cut the next one

    # Spark keeps the entries of the last minBatchesToRetain batches: with 1 (Spark's least), the compactions at
    # batches 19 and 29 delete the entries before 9 and before 19, so 30 micro-batches show the deletions (with
    # Spark's 100, not before batch 110); each micro-batch is a Spark job or a log entry, a second under load.
    spark.conf.set("spark.sql.streaming.minBatchesToRetain", "1")
    try:
        source = spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 1).load()
        writer = source.writeStream.foreachBatch(each).option("checkpointLocation", str(tmp_path / "ck"))
        with starting_with(spark, local_log_settings(spark, [sink])):
            query = writer.trigger(processingTime="1 millisecond").start()
        assert spark.conf.get(LOG_CLEANUP_CONF, None) is None  # the caller's session as it was
        try:
            while len(seen) < 30 and query.isActive:
                query.awaitTermination(0.2)
        finally:
            query.stop()
    finally:
        spark.conf.unset("spark.sql.streaming.minBatchesToRetain")
    assert set(seen.values()) == {str(LOCAL_LOG_CLEANUP_MS)}
    last = max(seen)
    # the log's entries (N, N.compact), not a checksum or the temporary file of a write the stop cut short
    entries = [p.name for p in (tmp_path / "out" / "_spark_metadata").iterdir() if p.name.split(".")[0].isdigit()]
    # the old entries are gone: what is left begins at most 10 batches before the last compaction (at or after
    # batch 29), where Spark's 10-minute delay would have kept every entry from batch 0
    assert min(int(name.split(".")[0]) for name in entries) >= last - 20
    written = [batch for batch in range(last + 1) if batch % 7 == 3]
    assert sink.read(spark).count() == 3 * len(written)
    assert sorted(p.name for p in (tmp_path / "out").glob("part-*")) and sink.has_batch(last)
    # a delay the session sets is kept, and a sink off this machine keeps Spark's default
    assert local_log_settings(spark, [sink, remote]) == {}
    spark.conf.set(LOG_CLEANUP_CONF, "5s")
    try:
        with starting_with(spark, local_log_settings(spark, [sink])):
            assert spark.conf.get(LOG_CLEANUP_CONF) == "5s"
        assert spark.conf.get(LOG_CLEANUP_CONF) == "5s"
    finally:
        spark.conf.unset(LOG_CLEANUP_CONF)
