"""Kafka as the input of ``q.on_spark`` and ``cep run``, against the real broker, in the tests' own SparkSession
(started with Spark's Kafka connector by tests/conftest.py).

* Four partitions: eight symbols spread by the producer's key hashing, produced out of event-time order
  (each event up to 30 s behind the order, the watermark 2 minutes), read a few offsets per micro-batch:
  the stream's matches and match ids equal one ``q.run`` over the same events; no row was late.
  ``cep run --input kafka://`` over the same topic (both engines, ``--session-timeout --match-ids``) gives the
  same ids, and sets the bad messages aside as the stream does.
* Bad messages (not JSON, a value of the wrong type, a time that does not parse, no time, a time far ahead,
  an empty value) come out of the stream as bad rows with their reasons, counted; the rest matches.
* The Kafka timestamp as the event time; CSV values; a missing topic and unreachable brokers: CepKafkaError
  naming the topic and the servers, no Java trace on the console.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

import cep
from cep.cli import main
from cep.spark_bridge.engine.keyed import BAD_REASONS
from cep.spark_bridge.spark.kafka import CepKafkaError, read_kafka
from tests.kafka_broker import consume, free_port, produce
from tests.test_streaming import (
    few_partitions,  # noqa: F401 - a fixture: one shuffle partition
    metric_sums,
)
from tests.test_streaming_bad_events import BAD_LINES, QUOTED_NUMBER_LINES, VSHAPE

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

T0 = dt.datetime(2024, 1, 1)
SYMBOLS = [f"S{i}" for i in range(8)]
SCHEMA = "symbol STRING, ts TIMESTAMP, price DOUBLE"
SESSION = "5 minutes"
SENTINEL = "ZZZ"


def random_walk(rnd: random.Random, per_symbol: int = 30) -> list[dict]:
    """Ticks every 10 s (with jitter) per symbol, prices in a small range so that V shapes are common."""
    rows = []
    for symbol in SYMBOLS:
        price = 100.0
        for i in range(per_symbol):
            price = max(90.0, min(110.0, price + rnd.choice([-2, -1, 1, 2])))
            rows.append({"symbol": symbol, "ts": T0 + dt.timedelta(seconds=10 * i + rnd.randint(0, 5)), "price": price})
    return sorted(rows, key=lambda r: (r["ts"], r["symbol"]))


def shuffled(rnd: random.Random, events: list[dict], lateness_s: int) -> list[dict]:
    """The events in an arrival order where each is at most ``lateness_s`` behind the event-time order."""
    return sorted(events, key=lambda r: r["ts"] + dt.timedelta(seconds=rnd.uniform(0, lateness_s)))


def message(row: dict) -> dict:
    return {"key": row["symbol"], "value": {**row, "ts": row["ts"].isoformat()}}


def run_stream(spark, matches, name: str, checkpoint: Path):
    """Run a streaming result over what the topic holds now: (query, rows as pandas). ``foreachBatch``
    collects them (the memory sink cannot restart from a checkpoint, which the tests do)."""
    frames: list[pd.DataFrame] = []
    query = (
        matches.writeStream.foreachBatch(lambda df, _: frames.append(df.toPandas()))
        .queryName(name)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert query.exception() is None
    return query, pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=matches.columns)


def comparable(rows, names) -> list[tuple]:
    """Rows (dicts, or a pandas frame) as sorted tuples of ``names``; times as ISO text."""
    records = rows.to_dict("records") if isinstance(rows, pd.DataFrame) else list(rows)

    def text(value):
        if isinstance(value, (dt.datetime, pd.Timestamp)):
            return pd.Timestamp(value).isoformat()
        return value

    return sorted(tuple(text(r[n]) for n in names) for r in records)


@pytest.fixture(scope="module")
def four_partitions(kafka_broker, spark, tmp_path_factory):
    """A 4-partition topic of shuffled ticks (and two bad messages), streamed once through ``q.on_spark``."""
    import uuid

    rnd = random.Random(14)
    topic = f"ticks4-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topics({topic: 4})
    events = random_walk(rnd)
    bad = [
        {"key": "S0", "value": "not json at all"},
        {"key": "S1", "value": '{"symbol": "S1", "ts": "2024-01-01T00:01:00", "price": "x"}'},
    ]
    arrivals = [message(r) for r in shuffled(rnd, events, lateness_s=30)]
    url = f"kafka://{kafka_broker.bootstrap}/{topic}"
    produce(kafka_broker.bootstrap, topic, arrivals[:100])
    spark.conf.set("spark.sql.shuffle.partitions", "1")
    query = cep.compile(VSHAPE)
    tmp = tmp_path_factory.mktemp("four-partitions")
    # The schema from the messages there (a wrong type among them would widen its column to text)
    source = read_kafka(spark, url, options={"maxOffsetsPerTrigger": "60"})
    produce(kafka_broker.bootstrap, topic, bad + arrivals[100:])
    matches = query.on_spark(source, watermark="2 minutes", session_timeout=SESSION)
    first, result1 = run_stream(spark, matches, "kafka_four_1", tmp / "ck")
    # The sentinel, far ahead, comes after everything else: it closes every session (trailing matches).
    sentinel = {"symbol": SENTINEL, "ts": T0 + dt.timedelta(days=1), "price": 1.0}
    produce(kafka_broker.bootstrap, topic, [message(sentinel)])
    second, result2 = run_stream(spark, matches, "kafka_four_2", tmp / "ck")
    return {
        "url": url,
        "topic": topic,
        "events": events + [sentinel],
        "query": query,
        "tmp": tmp,
        "result": pd.concat([result1, result2], ignore_index=True),
        "source": source,
        "progress": list(first.recentProgress) + list(second.recentProgress),
    }


def test_four_partitions_and_shuffled_arrival_give_the_batch_replay(four_partitions, kafka_broker):
    run = four_partitions
    query, result = run["query"], run["result"]
    assert {r["partition"] for r in consume(kafka_broker.bootstrap, run["topic"])} == {0, 1, 2, 3}
    names = list(query.output_columns(("symbol", "ts", "price"))) + ["match_id"]
    replay = query.run(run["events"], session_timeout=SESSION, match_ids=True)
    live = result[result["cep_late_reason"].isna()]
    assert len(replay) > 20
    assert comparable(live, names) == comparable(replay, names)
    assert live["match_id"].is_unique
    sums = metric_sums(run["progress"])
    assert sums["late_rows"] == 0 and sums["bad_rows"] == 2
    assert sorted(result["cep_late_reason"].dropna()) == ["not_json", "wrong_type"]
    assert len([p for p in run["progress"] if p["numInputRows"]]) >= 5  # 60 offsets per micro-batch


def test_the_inferred_schema_has_the_value_fields_and_the_message_columns(four_partitions):
    fields = {f.name: f.dataType.simpleString() for f in four_partitions["source"].schema.fields}
    assert fields == {
        "price": "double",
        "symbol": "string",
        "ts": "timestamp",
        "kafka_key": "string",
        "kafka_topic": "string",
        "kafka_partition": "int",
        "kafka_offset": "bigint",
        "kafka_timestamp": "timestamp",
        "_corrupt_record": "string",
    }


@pytest.mark.parametrize("engine", ["python", "spark"])
def test_cep_run_replays_the_topic_with_the_stream_s_match_ids(four_partitions, engine, capsys):
    run = four_partitions
    query_file = run["tmp"] / "v_shape.sql"
    query_file.write_text(VSHAPE, encoding="utf-8")
    out = run["tmp"] / f"replay-{engine}.json"
    dead = run["tmp"] / f"dead-{engine}.jsonl"
    code = main(
        [
            "run",
            str(query_file),
            "--input",
            run["url"],
            "--engine",
            engine,
            "--session-timeout",
            SESSION,
            "--match-ids",
            "--output",
            str(out),
            "--dead-letter",
            str(dead),
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0
    live = run["result"][run["result"]["cep_late_reason"].isna()]
    replay = pd.read_json(out, lines=True)
    assert sorted(replay["match_id"]) == sorted(live["match_id"])
    assert f"events read: {len(run['events']) + 2}, partitions: {len(SYMBOLS) + 1}," in printed
    assert f"bad rows: 2 (not_json 1, wrong_type 1) -> {dead}" in printed
    records = [json.loads(line) for line in dead.read_text().splitlines()]
    assert sorted(r["_cep_error"] for r in records) == ["not_json", "wrong_type"]
    assert all(r["_cep_file"].startswith(f"{run['topic']}-") and "@" in r["_cep_file"] for r in records)


def test_bad_messages_are_bad_rows_with_their_reasons(kafka_broker, kafka_topic, spark, few_partitions, tmp_path):
    topic = kafka_topic(2)
    rnd = random.Random(5)
    events = [r for r in random_walk(rnd, per_symbol=12) if r["symbol"] in ("S0", "S1")]
    messages = [message(r) for r in events]
    bad = BAD_LINES + QUOTED_NUMBER_LINES  # a quoted "NaN" in the DOUBLE price is a string, as in a file
    for i, (line, _) in enumerate(bad):
        messages.insert(3 + 4 * i, {"key": "S0", "value": line})
    messages.insert(9, {"key": "S1", "value": None})  # an empty value (a tombstone): nothing to read
    messages.insert(11, {"key": "S1", "value": "[1, 2]"})  # JSON, but not an object
    messages.insert(13, {"key": "S0", "value": ""})  # zero bytes: as empty as a tombstone
    messages.insert(15, {"key": "S0", "value": " \n"})  # only blanks
    messages.append(message({"symbol": SENTINEL, "ts": T0 + dt.timedelta(days=1), "price": 1.0}))
    produce(kafka_broker.bootstrap, topic, messages)
    query = cep.compile(VSHAPE)
    source = read_kafka(spark, f"kafka://{kafka_broker.bootstrap}/{topic}", schema=SCHEMA)
    matches = query.on_spark(source, watermark="5 minutes", session_timeout=SESSION, max_future_skew="1 day")
    stream, result = run_stream(spark, matches, "kafka_bad_rows", tmp_path / "ck")
    expected = Counter(reason for _, reason in bad) + Counter({"not_json": 4})
    assert Counter(result["cep_late_reason"].dropna()) == expected
    rejected = result[result["cep_late_reason"].notna()]
    assert set(rejected[rejected["cep_late_reason"] == "not_json"]["cep_late_row"]) == {
        "this is not json",
        BAD_LINES[1][0],
        "",
        "[1, 2]",
        " \n",
    }
    sums = metric_sums(stream.recentProgress)
    assert Counter({r: sums[r] for r in BAD_REASONS}) == expected and sums["late_rows"] == 0
    names = list(query.output_columns(("symbol", "ts", "price")))
    assert comparable(result[result["cep_late_reason"].isna()], names) == comparable(
        query.run(events, session_timeout=SESSION), names
    )


def test_the_kafka_timestamp_is_an_event_time_and_csv_values_read(
    kafka_broker, kafka_topic, spark, few_partitions, tmp_path
):
    topic = kafka_topic(1)
    base = int(dt.datetime(2024, 1, 1, tzinfo=dt.UTC).timestamp() * 1000)
    prices = [5, 4, 3, 4, 5, 6, 2, 1, 2]
    produce(
        kafka_broker.bootstrap,
        topic,
        [{"key": "A", "value": f"A,{p}", "timestamp": base + 1000 * i} for i, p in enumerate(prices)]
        + [{"key": "A", "value": "A,3,extra"}, {"key": "Z", "value": "Z,1", "timestamp": base + 86_400_000}],
    )
    query = cep.compile("""SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY kafka_timestamp
        MEASURES FIRST(A.kafka_timestamp) AS start_ts, LAST(B.price) AS bottom, COUNT(*) AS n
        ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A B+ C+)
        DEFINE B AS B.price < PREV(B.price), C AS C.price > PREV(C.price))""")
    source = read_kafka(
        spark, f"kafka://{kafka_broker.bootstrap}/{topic}", schema="symbol STRING, price DOUBLE", format="csv"
    )
    _, result = run_stream(spark, query.on_spark(source, session_timeout="1 minute"), "kafka_csv", tmp_path / "ck")
    matches = result[result["cep_late_reason"].isna()]
    assert sorted(zip(matches["start_ts"].astype(str), matches["bottom"], matches["n"])) == [
        ("2024-01-01 00:00:00", 3.0, 6),
        ("2024-01-01 00:00:06", 1.0, 3),
    ]
    assert list(result["cep_late_reason"].dropna()) == ["not_json"]  # three fields for two columns


def test_a_missing_topic_names_it_and_the_servers(kafka_broker, kafka_topic, spark, tmp_path, capfd):
    existing = kafka_topic(1)
    with pytest.raises(CepKafkaError) as caught:
        read_kafka(spark, f"kafka://{kafka_broker.bootstrap}/no-such-topic", schema=SCHEMA)
    text = str(caught.value)
    assert caught.value.code == "E0490"
    assert text.startswith(
        f"kafka://{kafka_broker.bootstrap}/no-such-topic: error[E0490]: topic 'no-such-topic' "
        f"does not exist on {kafka_broker.bootstrap} (topics there: "
    )
    assert existing in text
    query_file = tmp_path / "q.sql"
    query_file.write_text(VSHAPE, encoding="utf-8")
    assert main(["run", str(query_file), "--input", f"kafka://{kafka_broker.bootstrap}/no-such-topic"]) == 2
    err = capfd.readouterr().err
    assert "topic 'no-such-topic' does not exist" in err and "at org.apache" not in err and "Traceback" not in err


def test_unreachable_brokers_are_E0491_with_the_trace_in_the_log(spark, capfd):
    from cep.spark_bridge.spark.session import spark_log_path

    address = f"127.0.0.1:{free_port()}"
    with pytest.raises(CepKafkaError) as caught:
        read_kafka(
            spark,
            f"kafka://{address}/ticks",
            schema=SCHEMA,
            options={"kafka.default.api.timeout.ms": "2000", "kafka.request.timeout.ms": "1000"},
        )
    text = str(caught.value)
    assert caught.value.code == "E0491"
    assert f"cannot reach the Kafka brokers at {address}" in text and spark_log_path() in text
    assert "at org.apache" not in capfd.readouterr().err
    with open(spark_log_path(), encoding="utf-8", errors="replace") as fh:
        assert f"Kafka check of kafka://{address}/ticks failed" in fh.read()


def test_several_topics_and_a_pattern(kafka_broker, kafka_topic, spark):
    import uuid

    prefix = f"multi-{uuid.uuid4().hex[:6]}"
    kafka_broker.create_topics({f"{prefix}-a": 1, f"{prefix}-b": 2, f"{prefix}x-c": 1})
    for topic in (f"{prefix}-a", f"{prefix}-b", f"{prefix}x-c"):
        produce(kafka_broker.bootstrap, topic, [message({"symbol": topic[-1], "ts": T0, "price": 1.0})])

    def topics_read(path: str) -> list[str]:
        df = read_kafka(spark, f"kafka://{kafka_broker.bootstrap}/{path}", schema=SCHEMA, streaming=False)
        return sorted(r["kafka_topic"] for r in df.select("kafka_topic").collect())

    assert topics_read(f"{prefix}-a,{prefix}-b") == [f"{prefix}-a", f"{prefix}-b"]
    assert topics_read(f"{prefix}-.*") == [f"{prefix}-a", f"{prefix}-b"]  # a pattern matches whole names
    with pytest.raises(CepKafkaError, match="no topic on .* matches 'nothing-here-.\\*'"):
        topics_read("nothing-here-.*")  # a static read of no topic says so; a stream would wait for one


def test_a_static_read_asks_the_check_and_the_schema_s_offsets_on_one_admin_client(
    kafka_broker, kafka_topic, spark, monkeypatch
):
    """``cep run --input kafka://`` without --schema: the check (topics, partitions) and the schema's sample
    (earliest and latest offsets) go through one Kafka AdminClient in Spark's JVM, not one each (each costs
    a connection, a metadata request and a close). Counted at the client's opening; the client is real."""
    from cep.spark_bridge.spark.kafka_check import JvmAdmin

    topic = kafka_topic(partitions=2)
    rows = [{"symbol": "A", "ts": f"2024-01-01T00:0{i}:00", "price": 10.0 + i} for i in range(3)]
    produce(kafka_broker.bootstrap, topic, [{"key": "A", "value": row} for row in rows])
    opened = []
    enter = JvmAdmin.__enter__

    def counted(admin):
        opened.append(admin.address)
        return enter(admin)

    monkeypatch.setattr(JvmAdmin, "__enter__", counted)
    events = read_kafka(spark, f"kafka://{kafka_broker.bootstrap}/{topic}", streaming=False)
    assert len(opened) == 1
    assert sorted(events.columns[:3]) == ["price", "symbol", "ts"]
    assert sorted(row["price"] for row in events.select("price").collect()) == [10.0, 11.0, 12.0]
