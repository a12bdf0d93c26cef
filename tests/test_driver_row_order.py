"""The order a micro-batch's rows reach the rules in the driver layout (``DriverState.run_frame``), which a read in
fewer tasks than Kafka partitions (``coalesce``) would leave to Spark (docs/streaming.md, "Fewer read tasks, and the
order of a micro-batch's rows").

* The matches do not depend on that order: the driver's rules on any permutation of each micro-batch's rows give
  the same alerts, match ids included, and the same late rows as on the rows in Kafka's order, for rules without
  ``dedup_key`` (ties on the key and event time broken by every column the matcher reads,
  ``KeyedStream.release_order``).
* Under a ``dedup_key`` they do: the repeat that comes first is kept, so a read that changes the partitions' order
  would have to put the rows back in Kafka's order (topic, partition, offset) first.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cep.spark_bridge.alerting.driver_state import DriverState
from cep.spark_bridge.alerting.rule_set import FILE, KIND_LATE, KIND_MATCH, build_rule_set
from cep.spark_bridge.alerting.store import RuleStore
from cep.spark_bridge.engine import state_codec
from cep.spark_bridge.spark.columns import EVENT_US, KIND, RAW, REJECT
from tests.test_alerting import at, write_rule
from tests.test_alerting_columnwise import RULES

# Half what the suite ran before; `make test-stream-properties` runs 180 (docs/testing.md).
EXAMPLES = int(os.environ.get("CEP_STREAM_EXAMPLES", "30"))
HOUR_US = 3_600_000_000
PARTITIONS = 4  # the bench's topic
TOPIC = "ticks"
TYPES = {
    "symbol": "VARCHAR",
    "ts": "TIMESTAMP",
    "price": "DOUBLE",
    "kafka_topic": "VARCHAR",
    "kafka_partition": "INTEGER",
    "kafka_offset": "BIGINT",
}
COLUMNS = list(TYPES)
# A rule whose measures read the message's offset: two rows equal in everything else are not interchangeable.
OFFSET_RULE = """-- name: offsets
SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts
  MEASURES FIRST(X.kafka_offset) AS first_offset, LAST(X.kafka_offset) AS last_offset, COUNT(*) AS n
  PATTERN (X{2}) DEFINE X AS price > 50)"""


def publish(tmp_path: Path, dedup_key: tuple[str, ...] = (), horizon_s: int = 0) -> RuleStore:
    directory = tmp_path / "rules"
    for name, text in {**RULES, "offsets.sql": OFFSET_RULE}.items():
        write_rule(directory, name, text)
    payload, ruleset = build_rule_set(str(directory), input_types=TYPES, session_timeout_us=60_000_000)
    assert not ruleset.errors, [str(e) for e in ruleset.errors]
    if dedup_key:  # as ``cep stream --dedup-key`` publishes it
        payload["dedup_key"], payload["dedup_horizon_us"] = list(dedup_key), horizon_s * 1_000_000
    store = RuleStore(str(tmp_path / "store"))
    store.publish(payload)
    return store


def kafka_batches(rnd: random.Random, delay_s: int) -> list[list[dict]]:
    """Micro-batches of ticks in Kafka's order (partition, then offset), with many ties on (symbol, ts), some
    differing only in price or only in their place in Kafka (a producer's retry), out of order and late."""
    offsets = [0] * PARTITIONS
    batches, t = [], 0
    for _ in range(rnd.randint(1, 6)):
        rows = []
        for _ in range(rnd.randint(0, 40)):
            t += rnd.choice([0, 0, 0, 1, 2])
            seconds = max(0, t + rnd.randint(-delay_s - 2, 1))
            price = float(rnd.choice([5, 30, 55, 65, 85, 95]))
            row = {"symbol": rnd.choice("ab"), "ts": at(seconds), "price": price}
            for copy in range(rnd.choice([1, 1, 1, 2])):  # a repeat lands on any partition
                partition = rnd.randrange(PARTITIONS)
                placed = {**row, "kafka_topic": TOPIC, "kafka_partition": partition, "kafka_offset": offsets[partition]}
                offsets[partition] += 1
                rows.append(placed if copy == 0 else {**placed, "price": rnd.choice([price, 95.0])})
        batches.append(sorted(rows, key=lambda r: (r["kafka_partition"], r["kafka_offset"])))
    return batches + [[]]


def driver_frame(rows: list[dict]) -> pd.DataFrame:
    """A micro-batch as ``driver_input`` brings it to the driver."""
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame["kafka_partition"] = frame["kafka_partition"].astype("int32")
    frame["kafka_offset"] = frame["kafka_offset"].astype("int64")
    frame[EVENT_US] = pd.array([state_codec.datetime_to_micros(r["ts"]) for r in rows], dtype="int64")
    frame[REJECT] = frame[RAW] = frame[FILE] = None
    return frame


def new_driver(tmp: Path, store: RuleStore, delay_s: int) -> DriverState:
    return DriverState(
        str(tmp), store.directory, columns=COLUMNS, delay_ms=delay_s * 1000, housekeeping_us=HOUR_US, buckets=1
    )


def matches(out: pd.DataFrame) -> list[tuple]:
    """Alerts (rule, match id, key, times, measures, suppressed) and late rows (rule, row) as sorted tuples."""
    alerts = out[out[KIND] == KIND_MATCH]
    names = ["rule_id", "match_id", "partition_key", "first_event_time", "last_event_time", "measures", "suppressed"]
    late = out[out[KIND] == KIND_LATE]
    return sorted(map(tuple, alerts[names].astype(str).to_numpy().tolist())) + sorted(
        ("late", rule, measures) for rule, measures in zip(late["rule_id"], late["measures"])
    )


@pytest.fixture(scope="module")
def plain_rules(tmp_path_factory) -> RuleStore:
    """The rules without a dedup key, published once for the property's examples: each example's drivers pin their
    micro-batches to this one rule set, and the rules are compiled once for the run (a store of its own per example
    compiled them again, with the rule set: about a fifth of an example's time, by cProfile)."""
    return publish(tmp_path_factory.mktemp("rules"))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), delay_s=st.sampled_from([0, 2, 5]))
def test_the_driver_s_matches_do_not_depend_on_the_order_of_a_batch_s_rows(
    tmp_path_factory, plain_rules, seed, delay_s
):
    tmp, store = tmp_path_factory.mktemp("order"), plain_rules
    rnd = random.Random(seed)
    in_order, shuffled = new_driver(tmp / "a", store, delay_s), new_driver(tmp / "b", store, delay_s)
    for batch_id, rows in enumerate(kafka_batches(rnd, delay_s)):
        mixed = rnd.sample(rows, len(rows))
        want = matches(in_order.run_frame(driver_frame(rows), batch_id))
        assert matches(shuffled.run_frame(driver_frame(mixed), batch_id)) == want, f"micro-batch {batch_id}"


def test_under_a_dedup_key_the_repeat_that_comes_first_is_kept_so_the_order_of_partitions_matters(tmp_path):
    """One tick sent twice, on partitions 0 and 1, under ``--dedup-key symbol,ts``; the offsets rule (X{2} over
    prices above 50) reports the offsets of its rows. Hand-checked: with partition 0's rows first (the read in one
    task per partition, in partition order) its copy (offset 1) is kept; with partition 1's first, partition 1's
    copy (offset 0)."""
    store = publish(tmp_path, dedup_key=("symbol", "ts"), horizon_s=0)
    rows = [
        {"symbol": "a", "ts": at(1), "price": 55.0, "kafka_topic": TOPIC, "kafka_partition": 0, "kafka_offset": 0},
        {"symbol": "a", "ts": at(2), "price": 65.0, "kafka_topic": TOPIC, "kafka_partition": 0, "kafka_offset": 1},
        {"symbol": "a", "ts": at(2), "price": 95.0, "kafka_topic": TOPIC, "kafka_partition": 1, "kafka_offset": 0},
    ]

    def offsets(name: str, batch: list[dict]) -> list[str]:
        out = new_driver(tmp_path / name, store, 0).run_frame(driver_frame(batch), 0)
        return out.loc[(out[KIND] == KIND_MATCH) & (out["rule_id"] == "offsets/offsets"), "measures"].tolist()

    assert offsets("partition-0-first", rows) == ['{"symbol": "a", "first_offset": 0, "last_offset": 1, "n": 2}']
    assert offsets("partition-1-first", rows[2:] + rows[:2]) == [
        '{"symbol": "a", "first_offset": 0, "last_offset": 0, "n": 2}'
    ]
