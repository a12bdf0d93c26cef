"""The driver layout of ``cep stream`` (``--state driver``, ``alerting/driver_state.py``) against the keyed layout.

* Without Spark: ``DriverState`` over random micro-batches (late and out-of-order rows, bad rows, a rule edited
  mid-stream, rules column-wise and one per key) gives, micro-batch by micro-batch, the alerts of the keyed layout
  (``LocalAlerts``: Spark's micro-batch rules) run on the same micro-batch followed by the no-data micro-batch
  Spark runs when the watermark moves; the same late rows and counts; and each rule's batch replay
  (``q.run(..., match_ids=True)``) of the rows that were not late, with the same match ids. A micro-batch run
  again from the saved state (a crash before Spark's commit) gives what it gave the first time; its state files
  keep two manifests. A checkpoint of the first state format (a stored fixture) goes on with its own bucket count.
* On Spark: the same stream through ``AlertStream`` in both layouts gives the same alerts and match ids, the
  driver's at least one micro-batch sooner; a checkpoint of one layout started with the other is refused.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cep.grammar.errors import CepSemanticError
from cep.spark_bridge.alerting.driver_state import (
    DRIVER,
    SPARK,
    STATE_DIR,
    STATE_FORMAT,
    V1_BUCKETS,
    DriverState,
    check_layout,
    checkpoint_layout,
    choose_layout,
    is_local_master,
    layout_of,
)
from cep.spark_bridge.alerting.rule_set import FILE, KIND_BAD, KIND_LATE, KIND_MATCH, STAT_NAMES
from cep.spark_bridge.alerting.stream import AlertStream
from cep.spark_bridge.engine import state_codec
from cep.spark_bridge.sinks.alerts import ALERT_NAMES
from cep.spark_bridge.spark.columns import EVENT_US, KIND, NULL_TIME, RAW, REJECT, STATS
from cep.spark_bridge.spark.inputs import CLOCK_ROW
from tests.test_alerting import (
    COLUMNS,
    HIGH,
    SENTINEL,
    SPAN,
    LocalAlerts,
    _schema,
    at,
    price_batches,
    price_walk,
    replay,
    streamed,
    two_partitions,  # noqa: F401 - a fixture
    write_batch,
    write_rule,
)
from tests.test_alerting_columnwise import RULES, alert_tuple, make_batches, not_late, replayed, rule_set_payload

# The layout property's examples: each runs both layouts' rules over a dozen or so micro-batches, about 0.6
# CPU-seconds (not the milliseconds of the engine's own properties), so 15 in the suite; CEP_STREAM_EXAMPLES=N
# (`make test-stream-properties`: 180) explores more.
EXAMPLES = int(os.environ.get("CEP_STREAM_EXAMPLES", "15"))
HOUR_US = 3_600_000_000
BUCKETS = LocalAlerts.BUCKETS
# Counted per call, and the driver makes a timer call in the same micro-batch where Spark makes it in the next.
PER_CALL = {"timers_fired", "d_live", "d_keys", "d_pending"}


def publish(tmp_path: Path, session_s: int, rules: dict[str, str] = RULES):
    from cep.spark_bridge.alerting.store import RuleStore

    store = RuleStore(str(tmp_path / "store"))
    store.publish(rule_set_payload(tmp_path, rules, session_s))
    return store


def driver_frame(rows: list[dict], bad: int = 0, clock_ms: int | None = None) -> pd.DataFrame:
    """A micro-batch as ``driver_input`` brings it: ``bad`` unreadable lines (NULL time), a clock row at
    ``clock_ms`` (``--idle-watermark``)."""
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame[EVENT_US] = [state_codec.datetime_to_micros(r["ts"]) for r in rows]
    frame[REJECT] = frame[RAW] = frame[FILE] = None
    extra = [{"symbol": None, "ts": None, "price": None, EVENT_US: NULL_TIME, REJECT: "not_json", RAW: "{oops"}] * bad
    if clock_ms is not None:
        extra.append({"symbol": None, "ts": None, "price": None, EVENT_US: clock_ms * 1000, REJECT: CLOCK_ROW})
    if extra:
        frame = pd.concat([frame.astype(object), pd.DataFrame(extra, dtype=object)], ignore_index=True)
        frame[EVENT_US] = frame[EVENT_US].astype("int64")
    return frame


def outcome(out: pd.DataFrame) -> tuple[list, Counter, int, int]:
    """(alerts, counts but the per-call ones, late (rule, row) pairs, bad rows) of an operator's output."""
    records = out.to_dict("records")
    alerts = sorted(alert_tuple({n: r[n] for n in ALERT_NAMES}) for r in records if r[KIND] == KIND_MATCH)
    counts: Counter = Counter()
    for r in records:
        if r[KIND] not in (KIND_MATCH, KIND_LATE, KIND_BAD) and r[STATS] is not None:
            counts.update({(r["rule_id"], n): v for n, v in zip(STAT_NAMES, r[STATS]) if v and n not in PER_CALL})
    return alerts, counts, sum(r[KIND] == KIND_LATE for r in records), sum(r[KIND] == KIND_BAD for r in records)


def keyed_then_no_data(local: LocalAlerts, rows: list[dict]) -> tuple[list, Counter]:
    """The keyed layout's micro-batch, then its no-data micro-batch: alerts and counts."""
    before = Counter(local.stats)
    alerts = sorted(alert_tuple(a) for a in local.run_batch(rows) + local.run_batch([]))
    counts = Counter({k: v - before.get(k, 0) for k, v in local.stats.items() if k[1] not in PER_CALL})
    return alerts, +counts


# The property is pure Python, about 0.6 CPU-seconds an example: a load average of 25 on two cores leaves it a
# twelfth of a core, which took its 60 examples near the suite's 600 s timeout. A hang is not what that timeout
# would catch here; a slow neighbour is.
LAYOUT_PROPERTY_TIMEOUT_S = 1800


@pytest.mark.timeout(LAYOUT_PROPERTY_TIMEOUT_S)
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), delay_s=st.sampled_from([0, 2, 5]), session_s=st.sampled_from([15, 60]))
def test_the_driver_gives_the_keyed_layouts_alerts_one_no_data_batch_sooner(tmp_path_factory, seed, delay_s, session_s):
    tmp = tmp_path_factory.mktemp("driver")
    store = publish(tmp, session_s)
    rnd = random.Random(seed)
    batches = make_batches(rnd, delay_s)
    bad = [rnd.choice([0, 0, 1, 2]) for _ in batches]
    local = LocalAlerts(store, delay_s=delay_s)
    driver = DriverState(str(tmp / "ck"), store.directory, columns=COLUMNS, delay_ms=delay_s * 1000,
                         housekeeping_us=HOUR_US, buckets=BUCKETS)  # fmt: skip
    streamed_alerts: list = []
    # a rule edited between two micro-batches, in half the examples (len(batches): never)
    edit_at = rnd.randint(1, len(batches)) if rnd.random() < 0.5 else len(batches)
    for batch_id, rows in enumerate(batches):
        if batch_id == edit_at:
            publish(tmp, session_s, {**RULES, "three.sql": RULES["three.sql"].replace("X{3}", "X{2}")})
        want_alerts, want_counts = keyed_then_no_data(local, rows)
        alerts, counts, _, bad_rows = outcome(driver.run_frame(driver_frame(rows, bad[batch_id]), batch_id))
        assert (alerts, +counts) == (want_alerts, want_counts), f"micro-batch {batch_id}"
        assert bad_rows == bad[batch_id]
        streamed_alerts += alerts
        if rnd.random() < 0.3:  # a crash before Spark's commit: the micro-batch runs again from the files
            again = DriverState(str(tmp / "ck"), store.directory, columns=COLUMNS, delay_ms=delay_s * 1000,
                                housekeeping_us=HOUR_US, buckets=BUCKETS)  # fmt: skip
            assert outcome(again.run_frame(driver_frame(rows, bad[batch_id]), batch_id))[0] == alerts
            driver = again
    manifests = [n for n in os.listdir(tmp / "ck" / STATE_DIR) if n.startswith("m-")]
    assert len(manifests) == min(2, len(batches))
    sentinel = json.dumps({"symbol": SENTINEL})
    ids = Counter((a[0], a[1], a[3], a[6]) for a in streamed_alerts if a[3] != sentinel)
    if edit_at >= len(batches):  # the replay is of one rule set
        assert ids == replayed(store, not_late(batches, delay_s), session_s)


def test_rows_late_by_spark_s_watermark_are_late_on_the_driver_and_a_clock_row_fires_timers(tmp_path):
    """The row that passes the watermark releases the match in its own micro-batch; a row at or below the
    watermark of the micro-batches before is late, as in the keyed layout (not below the new one: that
    watermark is Spark's next); a clock row moves the watermark and reaches no rule."""
    store = publish(tmp_path, 60, {"span.sql": SPAN})
    driver = DriverState(str(tmp_path / "ck"), store.directory, columns=COLUMNS, delay_ms=5000,
                         housekeeping_us=HOUR_US, buckets=BUCKETS)  # fmt: skip
    ev = [{"symbol": "s", "ts": at(t), "price": p} for t, p in ((0, 5), (1, 15), (2, 25))]
    assert "watermark" not in driver.gauges()  # none before a micro-batch has run
    assert outcome(driver.run_frame(driver_frame(ev[:2]), 0))[0] == []
    # 25 at 2 s completes A B+ C; the match is final once the watermark passes 2 s: at 7 s + a tick.
    alerts, _, late, _ = outcome(driver.run_frame(driver_frame([ev[2], {"symbol": "t", "ts": at(4), "price": 1}]), 1))
    assert alerts == [] and late == 0
    alerts, _, late, _ = outcome(
        driver.run_frame(driver_frame([], clock_ms=state_codec.datetime_to_micros(at(7.001)) // 1000), 2)
    )
    assert [a[3] for a in alerts] == ['{"symbol": "s"}'] and late == 0
    # The status's watermark is the one the timers ran at (7.001 s - 5 s), not Spark's, a micro-batch behind.
    assert driver.gauges()["watermark"] == "2024-01-01T00:00:02.001Z"
    # 1.5 s: below the watermark of the micro-batches before (2.001 s), late; 3 s is not.
    rows = [{"symbol": "u", "ts": at(1.5), "price": 5}, {"symbol": "v", "ts": at(3), "price": 5}]
    assert outcome(driver.run_frame(driver_frame(rows), 3))[2] == 1


# tests/fixtures/driver_state_v1: a checkpoint's driver-state/ and rule store in the first state format (8
# buckets, manifests without a bucket count), written by cep before that format changed: RULES (session 60 s)
# after micro-batches 0 to V1_DONE - 1 of make_batches(random.Random(V1_SEED), 2), a 2 s watermark delay.
V1_FIXTURE = Path(__file__).parent / "fixtures" / "driver_state_v1"
V1_SEED, V1_DONE = 5, 4


def test_a_checkpoint_of_the_first_state_format_goes_on_with_its_own_buckets(tmp_path):
    shutil.copytree(V1_FIXTURE, tmp_path / "v1")
    batches = make_batches(random.Random(V1_SEED), 2)
    assert len(batches) > V1_DONE + 1
    options = {"columns": COLUMNS, "delay_ms": 2000, "housekeeping_us": HOUR_US}
    old = DriverState(str(tmp_path / "v1" / "ck"), str(tmp_path / "v1" / "store"), **options)
    new = DriverState(str(tmp_path / "ck"), publish(tmp_path, 60).directory, **options)
    for batch_id, rows in enumerate(batches[:V1_DONE]):
        new.run_frame(driver_frame(rows), batch_id)
    seen = 0
    for batch_id in range(V1_DONE, len(batches)):
        (alerts, _, late, _), (expected, _, expected_late, _) = (
            outcome(driver.run_frame(driver_frame(batches[batch_id]), batch_id)) for driver in (old, new)
        )
        assert (alerts, late) == (expected, expected_late), batch_id
        seen += len(alerts)
    assert seen  # the fixture's open matches end in these micro-batches
    manifests = [sorted((p / "ck" / STATE_DIR).glob("m-*.json"))[-1] for p in (tmp_path / "v1", tmp_path)]
    (written_old, written_new) = (json.loads(m.read_text()) for m in manifests)
    assert written_old["format"] == written_new["format"] == STATE_FORMAT
    assert (written_old["key_buckets"], written_new["key_buckets"]) == (V1_BUCKETS, new.buckets)


def test_a_checkpoint_of_one_layout_is_refused_by_the_other(tmp_path):
    (tmp_path / "match" / "state" / "0").mkdir(parents=True)
    check_layout(str(tmp_path), "spark")
    with pytest.raises(CepSemanticError, match="--state spark"):
        check_layout(str(tmp_path), "driver")
    other = tmp_path / "other"
    (other / STATE_DIR).mkdir(parents=True)
    (other / STATE_DIR / "m-000000000000.json").write_text("{}")
    check_layout(str(other), "driver")
    with pytest.raises(CepSemanticError, match="start a new checkpoint"):
        check_layout(str(other), "spark")
    # Without --state, a restart goes on in the layout its checkpoint holds; a new checkpoint holds none.
    assert [checkpoint_layout(str(p)) for p in (tmp_path, other, tmp_path / "new")] == ["spark", "driver", None]


# Spark's master URLs (SparkContext's own patterns): one JVM with its threads as executors, or anything else.
LOCAL_MASTERS = ["local", "local[1]", "local[2]", "local[*]", "local[4, 2]", "local[*,3]", " local[2] "]
OTHER_MASTERS = [
    "local-cluster[2,1,1024]",  # a standalone cluster's worker processes on this machine
    "spark://10.0.0.5:7077",
    "yarn",
    "k8s://https://kube.example:6443",
    "mesos://zk://zk:2181/mesos",
    "localhost",
    "local[two]",
    None,  # a stream built without a session (its rules checked only)
]


@pytest.mark.parametrize("master", LOCAL_MASTERS + OTHER_MASTERS)
def test_a_new_checkpoint_runs_its_rules_on_the_driver_on_a_local_master_only(master):
    choice = choose_layout(master, None, None, checkpoint="ck")
    local = master in LOCAL_MASTERS
    assert is_local_master(master) == local
    assert choice.layout == (DRIVER if local else SPARK)
    said = choice.describe()
    if local:
        assert said == f"rules on the driver: a local master ({master}); --state spark for Spark's state store"
    else:
        assert said.startswith("Spark's keyed state: ") and "--state driver to run the rules on the driver" in said
        assert master is None or f"({master})" in said


@pytest.mark.parametrize("master", ["local[*]", "local-cluster[2,1,1024]", "yarn", None])
@pytest.mark.parametrize("asked", [SPARK, DRIVER])
def test_state_chooses_the_layout_of_a_new_checkpoint_whatever_the_master(master, asked):
    choice = choose_layout(master, None, asked, checkpoint="ck")
    assert choice.layout == asked and choice.reason == f"--state {asked}"


@pytest.mark.parametrize("master", ["local[2]", "spark://10.0.0.5:7077", "k8s://https://kube.example:6443"])
@pytest.mark.parametrize("held", [SPARK, DRIVER])
def test_a_checkpoint_keeps_its_own_layout_whatever_the_master(master, held):
    for asked in (None, held):
        choice = choose_layout(master, held, asked, checkpoint="ck")
        assert choice.layout == held and choice.reason == "the checkpoint's own layout"


@pytest.mark.parametrize("master", ["local[2]", "yarn"])
def test_state_against_the_checkpoints_layout_is_refused_with_what_to_do(tmp_path, master):
    keyed, driver = tmp_path / "keyed", tmp_path / "driver"
    (keyed / "match" / "state" / "0").mkdir(parents=True)
    (driver / STATE_DIR).mkdir(parents=True)
    (driver / STATE_DIR / "m-000000000000.json").write_text("{}")
    for checkpoint, held, asked in ((keyed, SPARK, DRIVER), (driver, DRIVER, SPARK)):
        with pytest.raises(CepSemanticError) as chosen:
            layout_of(master, str(checkpoint), asked)
        with pytest.raises(CepSemanticError) as checked:  # what start() says of the same checkpoint
            check_layout(str(checkpoint), asked)
        said = str(chosen.value)
        assert chosen.value.code == checked.value.code == "E0288" and said == str(checked.value)
        assert f"written with --state {held}" in said and f"start a new checkpoint to use --state {asked}" in said
        assert "partial matches do not move" in said
        assert layout_of(master, str(checkpoint), None).layout == held


@pytest.mark.parametrize(("master", "asked"), [("local[*]", None), ("yarn", DRIVER), ("local[2]", DRIVER)])
def test_key_buckets_with_the_rules_on_the_driver_is_refused_saying_what_to_do(master, asked):
    with pytest.raises(CepSemanticError) as refused:
        choose_layout(master, None, asked, checkpoint="ck", key_buckets=512)
    said = str(refused.value)
    assert refused.value.code == "E0289" and "--key-buckets 512" in said and "add --state spark" in said
    with pytest.raises(CepSemanticError, match="the checkpoint's own layout"):
        choose_layout(master, DRIVER, None, checkpoint="ck", key_buckets=512)
    assert choose_layout(master, None, SPARK, checkpoint="ck", key_buckets=512).layout == SPARK
    assert choose_layout(master, SPARK, None, checkpoint="ck", key_buckets=512).layout == SPARK


# ------------------------------------------------------------------------------------------ Spark


def run_layout(
    spark, tmp_path: Path, state: str, batches: list[list[dict]], output_format: str = "json"
) -> tuple[pd.DataFrame, list[int]]:
    """The stream over ``batches`` (one file per micro-batch) in one layout: its alerts, and how many there were
    after each file."""
    rules, source, name = tmp_path / "rules", tmp_path / f"in-{state}-{output_format}", f"{state}-{output_format}"
    source.mkdir()
    df = spark.readStream.schema(_schema()).option("maxFilesPerTrigger", 1).json(str(source))
    stream = AlertStream(spark, str(rules), df, checkpoint=str(tmp_path / f"ck-{name}"),
                         output=str(tmp_path / f"out-{name}"), output_format=output_format, watermark="5 seconds",
                         state=state)  # fmt: skip
    stream.start()
    per_batch = []
    try:
        for index, rows in enumerate(batches):
            write_batch(source, index, rows)
            stream.process_all_available()
            per_batch.append(len(stream.alerts().toPandas()))
    finally:
        stream.stop()
    return stream.alerts().toPandas(), per_batch


# The stream both Spark tests read: HIGH and SPAN over price_batches, a micro-batch that closes the match of "s",
# then two sentinels (the watermark past every row).
LAYOUT_BATCHES = price_batches() + [
    [{"symbol": "s", "ts": at(95), "price": 25.0}] + price_walk(["c", "d"], 90, 140, 3, seed=5),
    [{"symbol": SENTINEL, "ts": at(10_000), "price": 0.0}],
    # The keyed layout releases the matches the sentinel's watermark passes in a no-data micro-batch, which
    # processAllAvailable may not wait for; the next micro-batch with data runs at that watermark.
    [{"symbol": SENTINEL, "ts": at(20_000), "price": 0.0}],
]


class LayoutRuns:
    """``run_layout`` of LAYOUT_BATCHES, each (layout, output format) run once for the module: a stream run is a
    streaming query started and a micro-batch per file, seconds each, and the driver layout's JSON run is what
    both tests compare with."""

    def __init__(self, spark, folder: Path) -> None:
        self.spark, self.folder, self.done = spark, folder, {}
        write_rule(folder / "rules", "prices.sql", HIGH)
        write_rule(folder / "rules", "span.sql", SPAN)

    def __call__(self, state: str, output_format: str = "json") -> tuple[pd.DataFrame, list[int]]:
        if (state, output_format) not in self.done:
            self.done[state, output_format] = run_layout(self.spark, self.folder, state, LAYOUT_BATCHES, output_format)
        return self.done[state, output_format]


@pytest.fixture(scope="module")
def layout_runs(spark, tmp_path_factory) -> LayoutRuns:
    return LayoutRuns(spark, tmp_path_factory.mktemp("layouts"))


@pytest.mark.spark
def test_both_layouts_on_spark_give_the_same_alerts_the_driver_sooner(spark, two_partitions, layout_runs, tmp_path):
    batches, folder = LAYOUT_BATCHES, layout_runs.folder
    keyed, keyed_counts = layout_runs("spark")
    driver, driver_counts = layout_runs("driver")
    columns = ["rule_id", "match_id", "partition_key", "first_event_time", "last_event_time", "measures", "suppressed"]
    assert sorted(map(tuple, driver[columns].values.tolist())) == sorted(map(tuple, keyed[columns].values.tolist()))
    assert driver["match_id"].is_unique and len(driver) > 5
    assert all(d >= k for d, k in zip(driver_counts, keyed_counts))
    # The keyed layout needs Spark's no-data micro-batches (after each watermark move) for its timers; the
    # driver ran them inside the micro-batch that moved the watermark.
    commits = {
        state: len(list((folder / f"ck-{state}-json" / "match" / "commits").glob("[0-9]*")))
        for state in ("spark", "driver")
    }
    assert commits["driver"] == len(batches) < commits["spark"]
    events = [e for b in batches for e in b]
    assert streamed(driver, "span") == replay(SPAN, events) and streamed(driver, "prices/high") == replay(HIGH, events)
    source = spark.readStream.schema(_schema()).json(str(folder / "in-driver-json"))
    again = AlertStream(spark, str(folder / "rules"), source, checkpoint=str(folder / "ck-driver-json"))
    assert again.layout == "driver"  # without state=, a restart goes on in its checkpoint's layout
    keyed_again = AlertStream(spark, str(folder / "rules"), source, checkpoint=str(folder / "ck-spark-json"))
    assert keyed_again.layout == "spark" and keyed_again.choice.reason == "the checkpoint's own layout"
    # A new checkpoint on this session's local master runs its rules on the driver; the status says why.
    new = AlertStream(spark, str(folder / "rules"), source, checkpoint=str(tmp_path / "ck-new"))
    master = spark.conf.get("spark.master")
    assert master.startswith("local") and new.layout == "driver"
    assert new.status["layout"] == {
        "state": "driver",
        "why": f"a local master ({master})",
        "other": "--state spark for Spark's state store",
    }
    with pytest.raises(CepSemanticError, match="--state driver"):
        AlertStream(
            spark, str(folder / "rules"), source, checkpoint=str(folder / "ck-driver-json"), state="spark"
        ).start()


@pytest.mark.spark
def test_the_driver_layout_s_parquet_output_has_the_alerts_of_its_json_output(spark, two_partitions, layout_runs):
    """JSON output is written by the driver (``FileSink.commit_alerts``); Parquet goes through Spark's writer."""
    as_json, _ = layout_runs("driver")
    as_parquet, _ = layout_runs("driver", "parquet")
    columns = ["rule_id", "match_id", "partition_key", "first_event_time", "last_event_time", "measures", "suppressed"]
    assert len(as_json) > 3 and as_json["match_id"].is_unique
    assert sorted(map(tuple, as_parquet[columns].values.tolist())) == sorted(
        map(tuple, as_json[columns].values.tolist())
    )
    assert list((layout_runs.folder / "out-driver-parquet").glob("part-*.parquet"))
    assert list((layout_runs.folder / "out-driver-json").glob("part-*.json"))
