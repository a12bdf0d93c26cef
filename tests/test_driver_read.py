"""The order a micro-batch's rows reach the driver in the driver layout (``driver_read``): read in fewer tasks than
Kafka partitions (``coalesce``), a micro-batch's partitions come in an order Spark chooses.

* The matches do not depend on that order: the driver's rules (``DriverState.run_frame``) on any permutation of
  each micro-batch's rows give the same alerts, match ids included, the same counts and the same late rows as on
  the rows in Kafka's order, for rules without ``dedup_key`` (ties on the key and event time broken by every
  column the matcher reads, ``KeyedStream.release_order``).
* What takes rows in the order they come (which repeat of a ``dedup_key`` is kept, the late rows' ids) does, so the
  driver puts the rows back in Kafka's order (``in_kafka_order``): then its whole output, row for row, is the same
  whatever order the partitions came in.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cep.spark_bridge.alerting.driver_read import KAFKA_ORDER, in_kafka_order, rows_on_driver
from cep.spark_bridge.alerting.driver_state import DriverState
from cep.spark_bridge.alerting.rule_set import FILE, KIND_LATE, KIND_MATCH, build_rule_set
from cep.spark_bridge.alerting.store import RuleStore
from cep.spark_bridge.engine import state_codec
from cep.spark_bridge.spark.columns import EVENT_US, KIND, NULL_TIME, RAW, REJECT
from cep.spark_bridge.spark.inputs import CLOCK_ROW
from tests.test_alerting import at, write_rule
from tests.test_alerting_columnwise import RULES

EXAMPLES = int(os.environ.get("CEP_STREAM_EXAMPLES", "60"))
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
EMITTED = ["emit_time"]  # the clock's time of the call, not a function of the rows
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


def as_coalesced(rows: list[dict], rnd: random.Random) -> list[dict]:
    """The rows as a read in fewer tasks may bring them: each partition's rows in offset order (a task reads its
    partitions one after another), the partitions in any order."""
    order = list(range(PARTITIONS))
    rnd.shuffle(order)
    return [row for partition in order for row in rows if row["kafka_partition"] == partition]


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


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), delay_s=st.sampled_from([0, 2, 5]))
def test_the_driver_s_matches_do_not_depend_on_the_order_of_a_batch_s_rows(tmp_path_factory, seed, delay_s):
    tmp = tmp_path_factory.mktemp("order")
    store = publish(tmp)
    rnd = random.Random(seed)
    in_order, shuffled = new_driver(tmp / "a", store, delay_s), new_driver(tmp / "b", store, delay_s)
    for batch_id, rows in enumerate(kafka_batches(rnd, delay_s)):
        mixed = rnd.sample(rows, len(rows))
        want = matches(in_order.run_frame(driver_frame(rows), batch_id))
        assert matches(shuffled.run_frame(driver_frame(mixed), batch_id)) == want, f"micro-batch {batch_id}"


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), delay_s=st.sampled_from([0, 2, 5]))
def test_in_kafka_order_the_driver_s_output_is_the_same_whatever_order_the_partitions_came_in(
    tmp_path_factory, seed, delay_s
):
    """Under a ``dedup_key`` the repeat kept is the first to come; put back in Kafka's order, the rows give the
    same output frame, row for row (alerts with match ids, late rows with their row ids, counts)."""
    tmp = tmp_path_factory.mktemp("dedup")
    store = publish(tmp, dedup_key=("symbol", "ts"), horizon_s=delay_s)
    rnd = random.Random(seed)
    in_order, coalesced = new_driver(tmp / "a", store, delay_s), new_driver(tmp / "b", store, delay_s)
    for batch_id, rows in enumerate(kafka_batches(rnd, delay_s)):
        want = in_order.run_frame(driver_frame(rows), batch_id)
        got = coalesced.run_frame(in_kafka_order(driver_frame(as_coalesced(rows, rnd))), batch_id)
        pd.testing.assert_frame_equal(got.drop(columns=EMITTED), want.drop(columns=EMITTED), obj=f"batch {batch_id}")


def test_a_dedup_key_keeps_the_repeat_that_came_first_so_the_order_matters_without_kafka_s(tmp_path):
    """Why ``in_kafka_order`` exists: one tick sent twice, on partitions 0 and 1, under ``--dedup-key symbol,ts``;
    the repeat that comes first is kept, and the offsets rule (X{2} over prices above 50) reports its offset.
    Hand-checked: in Kafka's order partition 0's copy (offset 1) comes first; as read with partition 1 first, its
    copy (offset 0) would be kept."""
    store = publish(tmp_path, dedup_key=("symbol", "ts"), horizon_s=0)
    rows = [
        {"symbol": "a", "ts": at(1), "price": 55.0, "kafka_topic": TOPIC, "kafka_partition": 0, "kafka_offset": 0},
        {"symbol": "a", "ts": at(2), "price": 65.0, "kafka_topic": TOPIC, "kafka_partition": 0, "kafka_offset": 1},
        {"symbol": "a", "ts": at(2), "price": 95.0, "kafka_topic": TOPIC, "kafka_partition": 1, "kafka_offset": 0},
    ]
    partition_1_first = rows[2:] + rows[:2]

    def offsets(name: str, batch: list[dict], *, ordered: bool) -> list[str]:
        frame = driver_frame(batch)
        out = new_driver(tmp_path / name, store, 0).run_frame(in_kafka_order(frame) if ordered else frame, 0)
        return out.loc[(out[KIND] == KIND_MATCH) & (out["rule_id"] == "offsets/offsets"), "measures"].tolist()

    kept_first = ['{"symbol": "a", "first_offset": 0, "last_offset": 1, "n": 2}']
    assert offsets("a", rows, ordered=True) == offsets("b", partition_1_first, ordered=True) == kept_first
    kept_as_read = [kept_first[0].replace('"last_offset": 1', '"last_offset": 0')]
    assert offsets("c", partition_1_first, ordered=False) == kept_as_read


@given(
    places=st.lists(
        st.tuples(st.sampled_from(["t1", "t0", None]), st.integers(0, 5), st.integers(0, 2**40)),
        max_size=30,
        unique=True,
    ),
    seed=st.integers(0, 2**32 - 1),
)
def test_in_kafka_order_sorts_by_topic_partition_offset_with_clock_rows_last(places, seed):
    rows = [
        {"kafka_topic": t, "kafka_partition": None if t is None else p, "kafka_offset": None if t is None else o}
        for t, p, o in places
    ]
    random.Random(seed).shuffle(rows)
    frame = pd.DataFrame(rows, columns=list(KAFKA_ORDER)).assign(n=range(len(rows)))
    got = in_kafka_order(frame)
    placed = sorted((r for r in rows if r["kafka_topic"] is not None), key=lambda r: tuple(r.values()))
    clock = [r for r in rows if r["kafka_topic"] is None]  # stable: in the order they came
    want = pd.DataFrame(placed + clock, columns=list(KAFKA_ORDER))
    assert got[list(KAFKA_ORDER)].astype(object).where(got.notna(), None).values.tolist() == (
        want.astype(object).where(want.notna(), None).values.tolist()
    )
    assert got.index.tolist() == list(range(len(rows)))


def test_a_batch_in_kafka_order_is_handed_over_as_it_is():
    frame = pd.DataFrame({"kafka_topic": ["t"] * 3, "kafka_partition": [0, 0, 1], "kafka_offset": [7, 8, 0]})
    assert in_kafka_order(frame) is frame


@pytest.mark.spark
def test_a_kafka_batch_read_in_fewer_tasks_comes_to_the_driver_in_kafka_s_order(spark):
    """On Spark: a micro-batch of 4 partitions (each a Kafka partition's rows, as the Kafka source plans them)
    read in 2 tasks comes in the order of the read in 4 tasks; a batch of another source as Spark reads it."""
    from pyspark.sql import functions as F

    rows = [("ticks", p, o, f"S{(p * 7 + o) % 5}") for p in range(PARTITIONS) for o in range(50)]
    df = spark.createDataFrame(rows, "kafka_topic STRING, kafka_partition INT, kafka_offset BIGINT, symbol STRING")
    # one Spark partition per Kafka partition, in reverse, so a coalesced read gives them out of order
    by_partition = df.repartitionByRange(PARTITIONS, F.col("kafka_partition").desc()).sortWithinPartitions(
        "kafka_offset"
    )
    assert by_partition.rdd.getNumPartitions() == PARTITIONS
    got = rows_on_driver(by_partition, 2)
    assert list(got.itertuples(index=False, name=None)) == rows
    other = df.select("symbol", F.col("kafka_offset").alias("n"))
    pd.testing.assert_frame_equal(rows_on_driver(other, 2), other.toPandas())


def test_a_clock_row_without_a_place_goes_after_the_batch_s_rows():
    frame = pd.DataFrame(
        {
            "kafka_topic": ["t", None, "t"],
            "kafka_partition": [1.0, float("nan"), 0.0],
            "kafka_offset": [3.0, float("nan"), 9.0],
            EVENT_US: [1, 2_000, NULL_TIME],
            REJECT: [None, CLOCK_ROW, None],
        }
    )
    assert in_kafka_order(frame)[REJECT].tolist() == [None, None, CLOCK_ROW]
    assert in_kafka_order(frame)["kafka_offset"].tolist()[:2] == [9.0, 3.0]
