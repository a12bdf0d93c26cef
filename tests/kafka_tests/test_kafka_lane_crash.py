"""The exactly-once Kafka sink's delivered count after a SIGKILL at every commit point of a micro-batch: the
status says what a ``read_committed`` consumer of the topic reads, exactly (tests/lane_crash_driver.py).
Killed between the transaction's commit and its journal record, the restart finds the micro-batch committed
and skips it: its alerts count then, once."""

from __future__ import annotations

import pytest

from tests.kafka_broker import consume
from tests.test_lane_crash_points import BATCHES, POINTS, kill_then_restart

pytestmark = pytest.mark.kafka


@pytest.mark.parametrize("point", POINTS)
def test_the_exactly_once_count_is_what_the_topic_holds_after_a_kill_at_each_commit_point(
    point, kafka_broker, kafka_topic, tmp_path
):
    topic, control = kafka_topic(2), kafka_topic(1, suffix="control")
    url = f"kafka-exactly-once://{kafka_broker.bootstrap}/{topic}?control_topic={control}"
    entry = kill_then_restart(tmp_path / "ck", url, "-", point)
    on_topic = consume(kafka_broker.bootstrap, topic, isolation="read_committed")
    assert len(on_topic) == 3 * BATCHES and len({r["key"] for r in on_topic}) == len(on_topic)
    assert entry["delivered"] == len(on_topic), entry
