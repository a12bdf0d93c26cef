"""The streaming state store: HDFS-backed by default, RocksDB by name, and a checkpoint keeps the store it began with.

What a store is in use is read from Spark itself: each provider reports its own custom metrics in a stateful
operator's progress (RocksDB's start with ``rocksdb``; the HDFS-backed store's ``loadedMapCache...``), and the
checkpoint's offset log records the provider class. The counts a stream gives across a restart come from a
plain count of the files' rows. What ``cep_state_bytes`` and ``cep_state_memory_bytes`` say of a keyed alert
stream is checked against Spark's own progress report and against the state itself, read back through
Spark's state data source (``format("statestore")``)."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from cep.spark_bridge.spark import session
from cep.spark_bridge.spark.session import (
    DEFAULT_ROCKSDB_MEMORY_MB,
    MIN_ROCKSDB_MEMORY_MB,
    ROCKSDB_MEMORY_ENV,
    STATE_STORE_ENV,
    STATE_STORE_PROVIDERS,
    StateStoreError,
    checkpoint_state_store,
    rocksdb_memory_conf,
    state_store_conf,
)

PROVIDER = "spark.sql.streaming.stateStore.providerClass"
CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
BOUNDED = "spark.sql.streaming.stateStore.rocksdb.boundedMemoryUsage"
MEMORY_MB = "spark.sql.streaming.stateStore.rocksdb.maxMemoryUsageMB"


def test_the_hdfs_store_is_the_default_and_rocksdb_comes_with_changelog_checkpointing(monkeypatch):
    monkeypatch.delenv(STATE_STORE_ENV, raising=False)
    assert state_store_conf() == {
        PROVIDER: "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
    }
    conf = state_store_conf("rocksdb")
    assert conf[PROVIDER].endswith(".RocksDBStateStoreProvider")
    assert conf[CHANGELOG] == "true"


def test_a_store_is_chosen_by_name_or_environment(monkeypatch):
    monkeypatch.setenv(STATE_STORE_ENV, " HDFS ")
    assert state_store_conf() == {
        PROVIDER: "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
    }
    assert state_store_conf("rocksdb")[PROVIDER].endswith(".RocksDBStateStoreProvider")  # the argument wins


@pytest.mark.parametrize(("name", "env", "said"), [("memory", None, "state_store"), (None, "lsm", "$CEP_STATE_STORE")])
def test_an_unknown_store_is_refused_by_name(monkeypatch, name, env, said):
    monkeypatch.delenv(STATE_STORE_ENV, raising=False)
    if env:
        monkeypatch.setenv(STATE_STORE_ENV, env)
    with pytest.raises(StateStoreError) as caught:
        state_store_conf(name)
    message = str(caught.value)
    assert message.startswith(said) and "rocksdb, hdfs" in message


def test_rocksdb_memory_is_capped_by_default_and_the_environment_changes_the_cap(monkeypatch):
    monkeypatch.delenv(ROCKSDB_MEMORY_ENV, raising=False)
    assert rocksdb_memory_conf() == {BOUNDED: "true", MEMORY_MB: str(DEFAULT_ROCKSDB_MEMORY_MB)}
    monkeypatch.setenv(ROCKSDB_MEMORY_ENV, " 1_024 ")
    assert rocksdb_memory_conf() == {BOUNDED: "true", MEMORY_MB: "1024"}


@pytest.mark.parametrize("value", ["lots", "512MB", "-1", "1.5", str(MIN_ROCKSDB_MEMORY_MB - 1)])
def test_a_rocksdb_cap_that_is_not_a_whole_number_of_megabytes_is_refused(monkeypatch, value):
    monkeypatch.setenv(ROCKSDB_MEMORY_ENV, value)
    with pytest.raises(StateStoreError) as caught:
        rocksdb_memory_conf()
    message = str(caught.value)
    assert message.startswith(f"${ROCKSDB_MEMORY_ENV} is {value!r}") and f"at least {MIN_ROCKSDB_MEMORY_MB}" in message


@pytest.mark.spark
def test_the_session_fills_in_the_rocksdb_cap_and_keeps_a_spark_setting_of_it(spark, monkeypatch):
    saved = {key: spark.conf.get(key, None) for key in (BOUNDED, MEMORY_MB)}
    try:
        monkeypatch.delenv(ROCKSDB_MEMORY_ENV, raising=False)
        for key in saved:
            spark.conf.unset(key)
        session.get_spark("local[2]")
        assert (spark.conf.get(BOUNDED), spark.conf.get(MEMORY_MB)) == ("true", str(DEFAULT_ROCKSDB_MEMORY_MB))

        spark.conf.unset(MEMORY_MB)
        monkeypatch.setenv(ROCKSDB_MEMORY_ENV, "96")
        session.get_spark("local[2]")
        assert spark.conf.get(MEMORY_MB) == "96"

        # A Spark setting (spark-defaults.conf, conf=, or one set on the session) is the team's: it stays.
        spark.conf.set(BOUNDED, "false")
        session.get_spark("local[2]", conf={MEMORY_MB: "700"})
        assert (spark.conf.get(BOUNDED), spark.conf.get(MEMORY_MB)) == ("false", "700")
    finally:
        for key, value in saved.items():
            spark.conf.unset(key) if value is None else spark.conf.set(key, value)


def _offset_entry(provider: str | None) -> str:
    conf = {"spark.sql.shuffle.partitions": "2"} | ({PROVIDER: provider} if provider else {})
    return "v1\n" + json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": 1, "conf": conf}) + '\n{"logOffset":0}'


def test_checkpoint_store_is_read_from_the_newest_whole_offset_entry(tmp_path):
    assert checkpoint_state_store(tmp_path / "none") is None
    offsets = tmp_path / "offsets"
    offsets.mkdir()
    assert checkpoint_state_store(tmp_path) is None
    (offsets / "0").write_text(_offset_entry(STATE_STORE_PROVIDERS["hdfs"]))
    (offsets / "1").write_text(_offset_entry("com.example.OwnStore"))
    (offsets / ".1.crc").write_text("not an entry")
    assert checkpoint_state_store(tmp_path) == "com.example.OwnStore"
    (offsets / "10").write_text('v1\n{"batchWat')  # cut short by a crash: Spark reads the entry before it
    (offsets / "2").write_text(_offset_entry(STATE_STORE_PROVIDERS["rocksdb"]))
    assert checkpoint_state_store(tmp_path) == "rocksdb"


def _counting_stream(spark, source, checkpoint, seen: list):
    """Rows per key, as a stateful aggregation keeps them; each micro-batch's store metrics into ``seen``."""
    query = (
        spark.readStream.schema("k string, v long")
        .json(str(source))
        .groupBy("k")
        .count()
        .writeStream.outputMode("update")
        .foreachBatch(lambda df, _: seen.extend(tuple(r) for r in df.collect()))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return [p["stateOperators"][0]["customMetrics"] for p in query.recentProgress if p["numInputRows"]]


def _store_of(metrics: dict) -> str:
    if any(name.startswith("rocksdb") for name in metrics):
        return "rocksdb"
    return "hdfs" if "loadedMapCacheHitCount" in metrics else f"unknown: {sorted(metrics)}"


@pytest.mark.spark
def test_a_checkpoint_keeps_its_store_across_a_restart_that_asks_for_another(spark, tmp_path, monkeypatch):
    source, fresh, old = tmp_path / "in", tmp_path / "ck-fresh", tmp_path / "ck-old"
    source.mkdir()
    (source / "1.json").write_text("".join(json.dumps({"k": k, "v": 1}) + "\n" for k in "aab"))
    saved = {key: spark.conf.get(key, None) for key in (PROVIDER, CHANGELOG)}
    try:
        monkeypatch.delenv(STATE_STORE_ENV, raising=False)
        session.get_spark("local[2]", state_store="rocksdb")  # the running session, set to RocksDB
        seen: list = []
        assert {_store_of(m) for m in _counting_stream(spark, source, fresh, seen)} == {"rocksdb"}
        assert checkpoint_state_store(fresh) == "rocksdb"

        session.get_spark("local[2]", state_store="hdfs")
        seen = []
        assert {_store_of(m) for m in _counting_stream(spark, source, old, seen)} == {"hdfs"}
        assert sorted(seen) == [("a", 2), ("b", 1)]

        # The same checkpoint restarted asking for RocksDB: Spark keeps its HDFS store and its counts go on.
        monkeypatch.setenv(STATE_STORE_ENV, "rocksdb")
        session.get_spark("local[2]")
        (source / "2.json").write_text("".join(json.dumps({"k": k, "v": 1}) + "\n" for k in "abc"))
        seen = []
        assert {_store_of(m) for m in _counting_stream(spark, source, old, seen)} == {"hdfs"}
        assert sorted(seen) == [("a", 3), ("b", 2), ("c", 1)]
        assert checkpoint_state_store(old) == "hdfs"
    finally:
        for key, value in saved.items():
            spark.conf.unset(key) if value is None else spark.conf.set(key, value)


# One login per user, never a purchase: every user holds one open partial match (and rows waiting for the
# watermark), so the keyed state grows with the users.
HOLD = """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY user ORDER BY ts MEASURES A.ts AS since
  PATTERN (A B) DEFINE A AS kind = 'login', B AS kind = 'buy')"""


def _logins(users: range) -> str:
    start = dt.datetime(2024, 1, 1)
    return "".join(
        json.dumps({"user": f"u{n}", "kind": "login", "ts": (start + dt.timedelta(seconds=n)).isoformat()}) + "\n"
        for n in users
    )


def _state_blob_bytes(spark, query_checkpoint, batch_id: int) -> int:
    """The bytes of every key bucket's state blob after micro-batch ``batch_id`` (Spark's state reader)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    held = spark.read.format("statestore").option("batchId", batch_id).load(str(query_checkpoint))
    state = held.schema["value"].dataType["groupState"].dataType
    (blob,) = [f.name for f in state.fields if isinstance(f.dataType, T.BinaryType)]
    total = held.select(F.sum(F.octet_length(F.col("value.groupState").getField(blob))).alias("n")).first()["n"]
    return int(total or 0)


def _scrape(metrics) -> dict[str, float]:
    """The unlabelled series ``/metrics`` serves, over HTTP from the server ``cep stream --metrics-port`` runs."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    from cep.spark_bridge.alerting.metrics import ServiceServer

    server = ServiceServer("127.0.0.1", 0, metrics=metrics)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=30) as answer:
            text = answer.read().decode()
    finally:
        server.stop()
    return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples if not s.labels}


def _operator_sums(progress: dict) -> tuple[int, dict[str, int]]:
    """The operators' ``memoryUsedBytes`` and custom metrics, each summed over the operators."""
    memory, custom = 0, {}
    for operator in progress["stateOperators"]:
        memory += int(operator["memoryUsedBytes"])
        for name, value in operator["customMetrics"].items():
            custom[name] = custom.get(name, 0) + int(value)
    return memory, custom


@pytest.mark.spark
@pytest.mark.parametrize("store", ["hdfs", "rocksdb"])
def test_state_bytes_and_state_memory_are_each_what_the_store_reports(spark, tmp_path, monkeypatch, store):
    """A keyed alert stream on each store, its state growing over two micro-batches of new users: the status
    (and /metrics) says the state's bytes from the store's own account of it (the HDFS-backed store's current
    version; RocksDB's SST files and memtables) and the store's memory apart, as Spark's progress reports them;
    and the state's bytes are at least the blobs the store holds (read back through Spark's state reader), and
    on the HDFS-backed store grow with the users and stay near those blobs. /metrics is scraped over HTTP."""
    pytest.importorskip("prometheus_client")
    from cep.spark_bridge.alerting.metrics import StreamMetrics
    from cep.spark_bridge.alerting.stream import AlertStream

    rules, source, checkpoint = tmp_path / "rules", tmp_path / "in", tmp_path / "ck"
    rules.mkdir()
    source.mkdir()
    (rules / "hold.sql").write_text(HOLD)
    saved = {key: spark.conf.get(key, None) for key in (PROVIDER, CHANGELOG)}
    seen: list[tuple[dict, dict]] = []
    try:
        monkeypatch.delenv(STATE_STORE_ENV, raising=False)
        session.get_spark("local[2]", state_store=store)
        df = spark.readStream.schema("user string, kind string, ts timestamp").json(str(source))
        stream = AlertStream(spark, str(rules), df, checkpoint=str(checkpoint), state="spark", watermark="5 seconds")
        stream.start()
        try:
            for part, users in enumerate((range(0, 3000), range(3000, 6000))):
                (source / f"{part}.json").write_text(_logins(users))
                stream.process_all_available()
                last = dict(stream.status["last_batch"])
                ran = [p for p in stream.match_query.recentProgress if p["durationMs"].get("addBatch")]
                (progress,) = [p for p in ran if p["batchId"] == last["id"]]
                seen.append((last, progress))
            scraped = _scrape(StreamMetrics(stream))
        finally:
            stream.stop()
        held = _state_blob_bytes(spark, checkpoint / "match", seen[-1][0]["id"])
    finally:
        for key, value in saved.items():
            spark.conf.unset(key) if value is None else spark.conf.set(key, value)

    assert checkpoint_state_store(checkpoint / "match") == store
    for last, progress in seen:
        memory, custom = _operator_sums(progress)
        assert last["state_memory_bytes"] == memory > 0
        if store == "rocksdb":
            assert last["state_bytes"] == custom["rocksdbSstFileSize"] + custom["rocksdbPinnedBlocksMemoryUsage"]
        else:
            assert last["state_bytes"] == custom["stateOnCurrentVersionSizeBytes"]
    (first, _), (last, _) = seen
    assert held > 0 and last["state_bytes"] >= held
    if store == "hdfs":
        assert first["state_bytes"] < last["state_bytes"]  # twice the users, more state
        assert last["state_bytes"] <= 3 * held  # the blobs and the rows and maps around them
    # RocksDB's memtables are charged to its cache in pieces of a fixed size, so a state of some 100 KB moves
    # the figure only when it needs another piece: it is the state's footprint, no finer (docs/operations.md).
    assert (scraped["cep_state_bytes"], scraped["cep_state_memory_bytes"]) == (
        last["state_bytes"],
        last["state_memory_bytes"],
    )
