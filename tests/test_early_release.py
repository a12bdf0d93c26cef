"""Early release: a key releases its rows up to its own bound (the largest event time it has read, in Spark's
milliseconds, minus the watermark delay) in the micro-batch that reads them, not one micro-batch later when
Spark's watermark passes them (docs/streaming.md, "An alert one micro-batch earlier").

1. Random streams (several keys, rows out of order, late rows, NULL event times, session gaps, WITHIN,
   absences, timeouts, ALL ROWS PER MATCH, dedup) through ``LocalStream`` with early release, on either
   path, against a reference written apart from the engine's rule: per key and micro-batch, it calls the
   engine as it released before (rows at the watermark only), then once more with no rows at the bound
   max(watermark, key's largest event time in ms - delay). Every micro-batch gives the reference's alerts
   and match ids; late rows are exactly the old release's; the alerts over the whole stream are the old
   release's, each in the same micro-batch or an earlier one.
   A micro-batch run again after a crash (from the committed state) gives the same alerts.
2. By hand: an alert one micro-batch sooner, and a restart whose watermark is behind a key's bound.
3. The alerting worker (``AlertStep``, per key and column-wise, a rule with suppression among them): the
   same alerts, suppressed or not, as with the old release, each in the same micro-batch or an earlier one.
4. On Spark (``@pytest.mark.spark``): a file-source stream, one file per micro-batch, captured by
   ``foreachBatch``: the alert comes in the micro-batch that reads its rows, whose watermark (0) has not
   passed them.
"""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cep
from cep.spark_bridge.engine import state_codec as codec
from cep.spark_bridge.engine.keyed import LATE_BEHIND_WATERMARK, KeyedStream
from cep.spark_bridge.engine.local import LocalStream
from tests.test_alerting import LocalAlerts
from tests.test_alerting_columnwise import alert_tuple, publish
from tests.test_alerting_columnwise import make_batches as alert_batches
from tests.test_streaming_columnar import COLUMNS, EXAMPLES, QUERIES, T0, make_batches

EPOCH = dt.datetime(1970, 1, 1)
NAMES = (
    "greedy_tail",
    "bounded",
    "within_first_hit",
    "within_greedy",
    "prev_next_row",
    "next_within",
    "next_absent",
    "timeout_sla",
    "timeout_greedy",
    "absent_tail",
    "absent_silent",
    "absent_middle",
    "all_rows",
    "all_rows_overlap",
    "card_testing",
)


def engine_of(name: str, session_s, dedup: bool = False) -> KeyedStream:
    q = cep.compile(QUERIES[name])
    options = {"dedup_key": ("v", "w"), "dedup_horizon_us": 20_000_000} if dedup else {}
    return KeyedStream(
        q.plan,
        COLUMNS,
        query_text=q.text,
        session_timeout_us=None if session_s is None else session_s * 1_000_000,
        **options,
    )


def millis(ts: dt.datetime) -> int:
    return (ts - EPOCH) // dt.timedelta(milliseconds=1)


def reference(engine: KeyedStream, batches: list[list[dict]], delay_ms: int) -> list[Counter]:
    """Each micro-batch's (match id, row) pairs, by the rule as the issue states it, on the engine releasing at
    the watermark only: Spark's watermark W (the largest event time read before the batch, in ms, minus the
    delay; never decreasing); a key with rows is called with them at W, then, if its bound
    max(W, its largest event time read so far in ms - delay) is further, once more without rows at that bound;
    a key without rows is called when W reaches its timer, as Spark calls it."""
    assert engine.release_delay_ms is None
    states: dict = {}
    timers: dict = {}
    largest: dict = {}  # key -> its largest event time read so far, in ms
    watermark_ms, seen_ms = 0, None
    out = []

    def call(got: Counter, key: tuple, rows: list[dict] | None, at_ms: int) -> None:
        columns = times = None
        if rows is not None:
            columns = {c: [r[c] for r in rows] for c in engine.read_columns}
            times = [None if r["ts"] is None else codec.datetime_to_micros(r["ts"]) for r in rows]
        result = engine.process(states.get(key), key, columns, times, at_ms * 1000, timed_out=rows is None)
        got.update(zip(result.match_ids, map(tuple, result.rows)))
        states[key], timers[key] = result.state, result.timer_us
        if result.state is None:
            states.pop(key), timers.pop(key)

    for batch in batches:
        got: Counter = Counter()
        groups: dict = {}
        for row in batch:
            groups.setdefault((row["k"],), []).append(row)
        due = [key for key, at in timers.items() if key not in groups and at is not None and watermark_ms * 1000 >= at]
        for key, rows in groups.items():
            call(got, key, rows, watermark_ms)
            times = [millis(r["ts"]) for r in rows if r["ts"] is not None]
            if times:
                largest[key] = max(times + ([largest[key]] if key in largest else []))
            if key in largest and largest[key] - delay_ms > watermark_ms:
                call(got, key, None, largest[key] - delay_ms)
        for key in due:
            call(got, key, None, watermark_ms)
        out.append(got)
        times = [millis(r["ts"]) for r in batch if r["ts"] is not None]
        if times:
            seen_ms = max(times + ([seen_ms] if seen_ms is not None else []))
            watermark_ms = max(watermark_ms, seen_ms - delay_ms)
    return out


def streamed(stream: LocalStream, batches) -> tuple[list[Counter], list[Counter]]:
    """Each micro-batch's (match id, row) pairs and its late (reason, row id) pairs."""
    alerts, late = [], []
    for batch in batches:
        rows, ids, lates = stream.run_batch(batch)
        alerts.append(Counter(zip(ids, map(tuple, rows))))
        late.append(Counter((reason, id(row)) for reason, row in lates))
    return alerts, late


def first_batch(per_batch: list[Counter]) -> dict:
    found: dict = {}
    for index, got in enumerate(per_batch):
        for pair in got:
            found.setdefault(pair, index)
    return found


@settings(max_examples=max(EXAMPLES // 2, 10), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    name=st.sampled_from(NAMES),
    delay_s=st.sampled_from([0, 2, 5]),
    session_s=st.sampled_from([None, 8, 30]),
    columnar=st.booleans(),
    buckets=st.sampled_from([0, 3]),
    dedup=st.booleans(),
)
def test_each_alert_comes_in_the_micro_batch_the_key_bound_says(
    seed, name, delay_s, session_s, columnar, buckets, dedup
):
    batches = make_batches(random.Random(seed), delay_s)
    engine = engine_of(name, session_s, dedup)
    delay_ms = delay_s * 1000
    early = LocalStream(engine, delay_ms=delay_ms, buckets=buckets, columnar=columnar)
    old = LocalStream(engine, delay_ms=delay_ms, buckets=buckets, columnar=columnar, early_release=False)
    got, got_late = streamed(early, batches)
    before, before_late = streamed(old, batches)
    want = reference(engine, batches, delay_ms)
    for index, (have, expected) in enumerate(zip(got, want)):
        assert have == expected, f"micro-batch {index}"
    assert got_late == before_late  # late rows are told by Spark's watermark, as before
    assert sum(got, Counter()) == sum(before, Counter())  # the same alerts, ids and all
    now, then = first_batch(got), first_batch(before)
    assert all(now[pair] <= then[pair] for pair in then)


@settings(max_examples=max(EXAMPLES // 6, 10), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    name=st.sampled_from(NAMES),
    columnar=st.booleans(),
    crash_at=st.integers(0, 12),
)
def test_a_micro_batch_run_again_after_a_crash_gives_the_same_alerts(seed, name, columnar, crash_at):
    """A micro-batch that crashed before its commit runs again from the last committed state (the tables as
    bytes, the same watermark) with the same rows: the same alerts, ids and late rows, and the stream goes on
    as if it had run once."""
    batches = make_batches(random.Random(seed), 2)
    crash_at = min(crash_at, len(batches) - 1)
    engine = engine_of(name, 30)
    whole = LocalStream(engine, delay_ms=2000, buckets=3, columnar=columnar)
    want = [whole.run_batch(batch) for batch in batches]
    stream = LocalStream(engine, delay_ms=2000, buckets=3, columnar=columnar)
    for batch in batches[:crash_at]:
        stream.run_batch(batch)
    committed = {b: t if isinstance(t, bytes) else t.encode() for b, t in stream.tables.items()}
    clock = (stream.watermark_ms, stream.max_event_ms)
    stream.run_batch(batches[crash_at])  # its output never committed: the crash
    stream.tables, (stream.watermark_ms, stream.max_event_ms) = dict(committed), clock
    for index in range(crash_at, len(batches)):
        assert stream.run_batch(batches[index]) == want[index], index


def test_early_release_moves_alerts_forward_on_random_streams():
    """Not a vacuous rule: over a few random streams, many alerts come a micro-batch earlier, none later."""
    earlier = later = 0
    for seed in range(30):
        batches = make_batches(random.Random(seed), 2)
        engine = engine_of("bounded", 30)
        now = first_batch(streamed(LocalStream(engine, delay_ms=2000), batches)[0])
        then = first_batch(streamed(LocalStream(engine, delay_ms=2000, early_release=False), batches)[0])
        assert now.keys() == then.keys()
        earlier += sum(now[pair] < then[pair] for pair in then)
        later += sum(now[pair] > then[pair] for pair in then)
    assert earlier > 20 and later == 0


def worker_steps(store, batches, delay_s: int, *, column_wise: bool, early_release: bool) -> list[Counter]:
    local = LocalAlerts(store, delay_s=delay_s, column_wise=column_wise, early_release=early_release)
    steps = [Counter(alert_tuple(a) for a in local.run_batch(batch)) for batch in batches]
    assert not local.failures
    return steps


@settings(max_examples=max(EXAMPLES // 6, 10), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), delay_s=st.sampled_from([0, 2, 5]), session_s=st.sampled_from([15, 60]))
def test_the_alerting_worker_gives_the_same_alerts_never_later(tmp_path_factory, seed, delay_s, session_s):
    store = publish(tmp_path_factory.mktemp("rules"), session_s)
    batches = alert_batches(random.Random(seed), delay_s)
    for column_wise in (False, True):
        now = worker_steps(store, batches, delay_s, column_wise=column_wise, early_release=True)
        then = worker_steps(store, batches, delay_s, column_wise=column_wise, early_release=False)
        assert sum(now, Counter()) == sum(then, Counter())
        first_now, first_then = first_batch(now), first_batch(then)
        assert all(first_now[alert] <= first_then[alert] for alert in first_then)


PAIR = (
    "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES A.ts AS a, B.ts AS b "
    "ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A B) DEFINE A AS A.v > 5, B AS B.v < 3)"
)


def row(key: str, second: float, v: int) -> dict:
    return {"k": key, "ts": T0 + dt.timedelta(seconds=second), "v": v, "w": 0}


@pytest.mark.parametrize("columnar", [False, True])
def test_a_match_comes_in_the_micro_batch_that_reads_its_rows(columnar):
    """Delay 2 s. Batch 0 reads a@0 (A), a@1 (B) and a@5: a's bound is 5 - 2 = 3 s, past both rows, so the
    match (a@0, a@1) comes in batch 0; Spark's watermark is 0 in batch 0 and 3 s in batch 1, so releasing
    at the watermark alone gives it in batch 1. Key b, whose largest time is 0.5 s, waits as before."""
    q = cep.compile(PAIR)
    engine = KeyedStream(q.plan, COLUMNS, query_text=q.text)
    batches = [[row("a", 0, 9), row("a", 1, 1), row("a", 5, 4), row("b", 0, 9), row("b", 0.5, 1)], []]
    match_a = (T0, T0 + dt.timedelta(seconds=1))
    match_b = (T0, T0 + dt.timedelta(seconds=0.5))
    early = LocalStream(engine, delay_ms=2000, columnar=columnar)
    old = LocalStream(engine, delay_ms=2000, columnar=columnar, early_release=False)
    assert [sorted(r[1:] for r in early.run_batch(b)[0]) for b in batches] == [[match_a], [match_b]]
    assert [sorted(r[1:] for r in old.run_batch(b)[0]) for b in batches] == [[], [match_b, match_a]]


@pytest.mark.parametrize("columnar", [False, True])
def test_after_a_restart_behind_a_key_bound_a_row_is_late(columnar):
    """After a restart Spark's first micro-batch runs with the last committed watermark, which may be behind
    a key's bound: a row of that key at or below its bound is late (it would sort before rows already
    matched), as it is without the restart (the watermark would have passed it); above it, it is taken."""
    q = cep.compile(PAIR)
    engine = KeyedStream(q.plan, COLUMNS, query_text=q.text)
    first = LocalStream(engine, delay_ms=2000, buckets=2, columnar=columnar)
    first.run_batch([row("a", 0, 9), row("a", 10, 4)])  # a's bound: 8 s, the watermark still 0
    again = LocalStream(engine, delay_ms=2000, buckets=2, columnar=columnar)
    again.tables = {b: t if isinstance(t, bytes) else t.encode() for b, t in first.tables.items()}
    again.watermark_ms, again.max_event_ms = 0, None  # as restored: batch 0's watermark
    stale, taken, other = row("a", 7, 1), row("a", 9, 1), row("b", 7, 1)
    _, _, late = again.run_batch([stale, taken, other])
    assert late == [(LATE_BEHIND_WATERMARK, stale)]
    rows, _, _ = again.run_batch([row("a", 30, 4)])  # a's bound 28 s: a@9 is released, after a@0 and in order
    assert [r[1:] for r in rows] == [(T0, T0 + dt.timedelta(seconds=9))]


@pytest.mark.spark
def test_spark_gives_the_alert_in_the_micro_batch_that_reads_its_rows(spark, tmp_path):
    """One JSON file per micro-batch (``maxFilesPerTrigger=1``), captured by ``foreachBatch`` with its batch
    id: the match comes in batch 0, whose watermark (Spark's progress says 0) has not passed its rows; the
    watermark alone would release them in batch 1 (the old release in-process says so)."""
    from pyspark.sql import types as T

    from tests.test_streaming import write_batches

    q = cep.compile(PAIR)
    batches = [[row("a", 0, 9), row("a", 1, 1), row("a", 5, 4)], [row("b", 60, 4)]]
    write_batches(tmp_path / "in", batches)
    schema = T.StructType(
        [
            T.StructField("k", T.StringType()),
            T.StructField("ts", T.TimestampType()),
            T.StructField("v", T.LongType()),
            T.StructField("w", T.LongType()),
        ]
    )
    saved = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "1")
    captured: list[tuple[int, tuple]] = []

    def capture(frame, batch_id):
        captured.extend((batch_id, (r["a"], r["b"])) for r in frame.where("cep_late_reason IS NULL").collect())

    try:
        df = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(tmp_path / "in"))
        stream = (
            q.on_spark(df, watermark="2 seconds")
            .writeStream.foreachBatch(capture)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        stream.awaitTermination()
        progress = stream.recentProgress
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", saved)
    assert captured == [(0, (T0, T0 + dt.timedelta(seconds=1)))]
    assert progress[0]["batchId"] == 0 and progress[0]["eventTime"]["watermark"] == "1970-01-01T00:00:00.000Z"
    engine = KeyedStream(q.plan, COLUMNS, query_text=q.text)
    old = LocalStream(engine, delay_ms=2000, early_release=False)
    assert [len(old.run_batch(b)[0]) for b in batches] == [0, 1]


def test_the_alerting_worker_releases_early_on_both_paths(tmp_path):
    """Not a vacuous rule in the worker: over a few random streams, alerts come a micro-batch earlier, per key
    and column-wise."""
    store = publish(tmp_path, 60)
    for column_wise in (False, True):
        earlier = 0
        for seed in range(6):
            batches = alert_batches(random.Random(seed), 2)
            now = first_batch(worker_steps(store, batches, 2, column_wise=column_wise, early_release=True))
            then = first_batch(worker_steps(store, batches, 2, column_wise=column_wise, early_release=False))
            earlier += sum(now[alert] < then[alert] for alert in then)
        assert earlier > 5, column_wise


@pytest.mark.spark
def test_several_watermark_operators_turn_early_release_off(spark, tmp_path):
    """With two watermark operators (inputs that declared theirs before a union) Spark's watermark is the smaller
    of theirs, which a key's bound could pass: the stream releases at the watermark alone. One watermark, on the
    union or added by cep, keeps early release."""
    from pyspark.sql import types as T

    from cep.spark_bridge.spark.streaming import early_release_delay

    schema = T.StructType([T.StructField("k", T.StringType()), T.StructField("ts", T.TimestampType())])
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = spark.readStream.schema(schema).json(str(tmp_path / "a"))
    b = spark.readStream.schema(schema).json(str(tmp_path / "b"))
    each = a.withWatermark("ts", "2 seconds").unionByName(b.withWatermark("ts", "2 seconds"))
    assert early_release_delay(each, 2000) is None
    assert early_release_delay(a.unionByName(b).withWatermark("ts", "2 seconds"), 2000) == 2000
    assert early_release_delay(a.withWatermark("ts", "2 seconds"), 2000) == 2000
