"""Absence on a quiet topic: `A !B WITHIN ...` fires by the wall clock with ``cep stream --idle-watermark``,
while no other event arrives to move the watermark (a real broker, ``cep stream`` as its user runs it)."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from tests.kafka_broker import produce
from tests.kafka_tests.test_kafka_stream import ChildStream, committed_records

pytestmark = pytest.mark.kafka

RESET_WITHOUT_LOGIN = """-- name: no_login
SELECT * FROM events MATCH_RECOGNIZE (
  PARTITION BY user_id ORDER BY ts
  MEASURES A.ts AS reset_at, MATCH_STATUS() AS status
  ONE ROW PER MATCH SHOW TIMEOUT MATCHES
  PATTERN (A !B) WITHIN INTERVAL '2' SECOND
  DEFINE A AS A.kind = 'reset', B AS B.kind = 'login'
)"""


@pytest.mark.long
@pytest.mark.timeout(900)
def test_an_absence_fires_on_a_quiet_topic_by_the_wall_clock(kafka_broker, kafka_topic, tmp_path):
    topic = kafka_topic(2)
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "auth.sql").write_text(RESET_WITHOUT_LOGIN)
    checkpoint = tmp_path / "ck"
    stream = ChildStream(
        [
            "stream",
            "--rules",
            str(rules),
            "--input",
            f"kafka://{kafka_broker.bootstrap}/{topic}",
            "--schema",
            "user_id STRING, kind STRING, ts TIMESTAMP",
            "--checkpoint",
            str(checkpoint),
            "--watermark",
            "1s",
            "--idle-watermark",
            "3s",
            "--trigger",
            "1s",
            "--master",
            "local[2]",
        ],
        tmp_path,
        0,
    )
    try:
        stream.wait_for(lambda: "running;" in stream.log_path.read_text(errors="replace"), "the start")
        now = dt.datetime.now(dt.UTC)
        stamp = lambda seconds: (now + dt.timedelta(seconds=seconds)).isoformat()  # noqa: E731
        produce(
            kafka_broker.bootstrap,
            topic,
            [
                {"key": "ann", "value": {"user_id": "ann", "kind": "reset", "ts": stamp(0)}},
                {"key": "bob", "value": {"user_id": "bob", "kind": "reset", "ts": stamp(0)}},
                {"key": "bob", "value": {"user_id": "bob", "kind": "login", "ts": stamp(1)}},
            ],
        )  # and then nothing: the topic stays quiet

        def absences() -> list[dict]:
            matches = checkpoint / "matches"
            if not (matches / "_spark_metadata").is_dir():
                return []
            return [r for r in committed_records(matches) if r["match_status"] == "ABSENCE"]

        stream.wait_for(lambda: absences(), "the absence alert on the quiet topic", timeout=300)
        found = absences()
        assert [json.loads(r["partition_key"]) for r in found] == [{"user_id": "ann"}]  # bob logged in
    finally:
        stream.stop()
    status = json.loads((checkpoint / "status.json").read_text())
    assert status["idle_watermark"] is True and not status.get("bad_rows", {}).get("null_event_time")
