"""One bad event or one bad rule never stops the alerts: a live rule-set stream from a real Kafka topic
(tests/kafka_broker.py) holding poison events (times pandas cannot hold) beside good ones, with a rule
that explodes at run time beside a good rule. The good rule's alerts equal its backtest, the poison
events are counted bad rows, and the exploding rule is quarantined with its reason in the status."""

from __future__ import annotations

import json
import time

import pytest

import cep
from cep.spark_bridge.alerting.stream import AlertStream, rule_rows
from cep.spark_bridge.sinks.alerts import jsonable
from cep.spark_bridge.spark.kafka import kafka_location, read_kafka
from tests.kafka_broker import produce
from tests.kafka_tests.test_kafka_stream import RULES, SCHEMA, SENTINEL, SESSION, committed_records, messages, ticks

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

GOOD = RULES["rise"]
EXPLODING = """SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts MEASURES COUNT(*) AS n
    PATTERN ((A | B)+ C) DEFINE A AS SUM(A.price) > 0, B AS SUM(B.price) > 0, C AS price < 0)"""
# Times Spark reads but pandas' nanoseconds cannot hold (the stateful operator's input), and one Spark
# cannot read at all (year 0): each must be a bad_event_time row, never a failed micro-batch.
POISON = ["1600-01-01T00:00:00Z", "0001-01-01T00:00:00", "2300-01-01T00:00:00Z", "0000-01-01T00:00:00Z"]


@pytest.mark.timeout(900)
def test_poison_events_and_an_exploding_rule_leave_the_good_rules_alerts_equal_to_the_backtest(
    kafka_broker, kafka_topic, spark, tmp_path
):
    spark.conf.set("spark.sql.shuffle.partitions", "1")
    boot = kafka_broker.bootstrap
    topic = kafka_topic(1)
    events = ticks(seed=11, symbols=3, per_symbol=30)
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "rise.sql").write_text(GOOD, encoding="utf-8")
    (rules / "boom.sql").write_text(EXPLODING, encoding="utf-8")
    poison = [{"key": "S1", "value": json.dumps({"symbol": "S1", "ts": ts, "price": 50.0})} for ts in POISON]
    produce(boot, topic, messages(events[:20]) + poison + messages(events[20:] + [SENTINEL]))
    expected = sorted(
        json.dumps({k: jsonable(v) for k, v in row.items()}, sort_keys=True)
        for row in cep.compile(GOOD).run(events + [SENTINEL], session_timeout=SESSION)
    )
    checkpoint = tmp_path / "ck"
    stream = AlertStream(
        spark,
        str(rules),
        read_kafka(spark, f"kafka://{boot}/{topic}", schema=SCHEMA),
        checkpoint=str(checkpoint),
        watermark="1 minute",
        session_timeout=SESSION,
        trigger="1 second",
        source_location=kafka_location(),
    )
    stream.start()

    def alerts() -> list[dict]:
        written = (checkpoint / "matches" / "_spark_metadata").exists()
        found = committed_records(checkpoint / "matches") if written else []
        return [a for a in found if a["rule_id"] == "rise"]

    try:
        deadline = time.monotonic() + 600
        while len(alerts()) < len(expected) or "boom" in stream.ruleset:
            stream.check()  # raises if the matching query failed
            stream.refresh_rules()
            stream.poll()
            assert time.monotonic() < deadline, (
                f"{len(alerts())} of {len(expected)} alerts; {stream.status.get('events')}"
            )
            time.sleep(0.5)
        stream.process_all_available()
    finally:
        stream.stop()
    assert sorted(json.dumps(json.loads(a["measures"]), sort_keys=True) for a in alerts()) == expected
    dead = committed_records(checkpoint / "dead-letter" / "bad-rows")
    assert sorted((r["_cep_error"], r["_cep_file"]) for r in dead) == [
        ("bad_event_time", f"{topic}-0@{20 + i}") for i in range(len(POISON))
    ]
    assert stream.status["bad_rows"] == {"bad_event_time": len(POISON)}
    row = {r["rule"]: r for r in rule_rows(stream.status)}["boom"]
    assert row["state"] == "failed" and "E0430" in row["errors"][0] and "quarantined" in row["errors"][0]
    assert stream.status["state"] != "failed" and not stream.status.get("query_errors")
    # The backtest from the same topic: the stream's alerts and ids, the same bad rows; the exploding rule fails
    # alone there too (exit 1 says so).
    from cep.cli import main

    replayed, dead_letter = tmp_path / "replayed.json", tmp_path / "bad.jsonl"
    assert (
        main(
            [
                "run",
                "--rules",
                str(rules),
                "--input",
                f"kafka://{boot}/{topic}",
                "--engine",
                "python",
                "--session-timeout",
                SESSION,
                "--dead-letter",
                str(dead_letter),
                "-o",
                str(replayed),
            ]
        )
        == 1
    )
    backtest = [json.loads(line) for line in replayed.read_text().splitlines()]
    assert sorted((a["rule_id"], a["match_id"]) for a in backtest) == sorted(
        (a["rule_id"], a["match_id"]) for a in alerts()
    )
    bad = [json.loads(line) for line in dead_letter.read_text().splitlines()]
    assert sorted((r["_cep_error"], r["_cep_file"]) for r in bad) == sorted(
        (r["_cep_error"], r["_cep_file"]) for r in dead
    )
