"""Absence on a quiet topic: `A !B WITHIN ...` fires by the wall clock with ``cep stream --idle-watermark``,
while no other event arrives to move the watermark (a real broker, ``cep stream``'s command line).

The command runs in the test's process on the suite's session (tests/running_command.py: no Spark driver of its
own to start) and is stopped with SIGTERM, its clean stop, once the alert is there.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time

import pytest

from tests.kafka_broker import produce
from tests.kafka_tests.test_kafka_stream import committed_records
from tests.running_command import run_until_watched

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

RESET_WITHOUT_LOGIN = """-- name: no_login
SELECT * FROM events MATCH_RECOGNIZE (
  PARTITION BY user_id ORDER BY ts
  MEASURES A.ts AS reset_at, MATCH_STATUS() AS status
  ONE ROW PER MATCH SHOW TIMEOUT MATCHES
  PATTERN (A !B) WITHIN INTERVAL '2' SECOND
  DEFINE A AS A.kind = 'reset', B AS B.kind = 'login'
)"""
WAIT_S = 300  # for the stream's query to start, then for the alert: minutes on a loaded 2-core machine


@pytest.mark.timeout(900)  # a stream on the suite's session: seconds, minutes on a loaded machine
def test_an_absence_fires_on_a_quiet_topic_by_the_wall_clock(kafka_broker, kafka_topic, spark, tmp_path, capsys):
    topic = kafka_topic(2)
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "auth.sql").write_text(RESET_WITHOUT_LOGIN)
    checkpoint = tmp_path / "ck"
    argv = [
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
    ]

    def absences() -> list[dict]:
        matches = checkpoint / "matches"
        if not (matches / "_spark_metadata").is_dir():
            return []
        return [r for r in committed_records(matches) if r["match_status"] == "ABSENCE"]

    running_before = {q.id for q in spark.streams.active}  # none, unless a test before left one running
    found: list[dict] = []

    def feed_and_watch(command_done: threading.Event) -> None:
        def wait_for(condition, what: str) -> None:
            deadline = time.monotonic() + WAIT_S
            while not condition():
                assert not command_done.is_set(), f"cep stream ended before {what}"
                assert time.monotonic() < deadline, f"no {what} in {WAIT_S} s"
                time.sleep(0.3)  # polling the session or the checkpoint, not waiting a fixed time

        wait_for(lambda: {q.id for q in spark.streams.active} - running_before, "the start")
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
        wait_for(absences, "the absence alert on the quiet topic")
        found.extend(absences())

    code = run_until_watched(argv, feed_and_watch)
    printed = capsys.readouterr()
    assert code == 0, (printed.out + printed.err)[-3000:]  # stopped cleanly by SIGTERM
    assert "stopped cleanly" in printed.err + printed.out
    assert [json.loads(r["partition_key"]) for r in found] == [{"user_id": "ann"}]  # bob logged in
    status = json.loads((checkpoint / "status.json").read_text())
    assert status["idle_watermark"] is True and not status.get("bad_rows", {}).get("null_event_time")
