"""The alerting worker's column-wise rules (``AlertStep`` running a rule on ``ColumnarStep``) against the per-key
worker and the batch replay.

A rule set of several rules on one PARTITION BY (three the chooser routes column-wise, one it keeps per key,
one with suppression) runs over random events cut into random micro-batches with a random watermark delay:

* column-wise worker == per-key worker (``AlertStep(column_wise=False)``, every rule on its Pike VM), micro-batch
  by micro-batch: the same alerts (match id, status, key, times, measures, suppressed) and the same counts;
* == the batch replay (``Replay``, what ``q.run(session_timeout=..., match_ids=True)`` runs) of each rule over
  the rows that were not late, with the rule's match-id text: the same rows and the same ids;
* a checkpoint written by the per-key worker, in the format from before column-wise rules (a bare
  ``KeyTable``), goes on column-wise with the same alerts as the per-key worker.
"""

from __future__ import annotations

import copy
import datetime as dt
import functools
import json
import os
import random
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cep.matcher.plan import COLUMN_WISE, PER_KEY, CompiledQuery
from cep.spark_bridge.alerting.bucket_state import BucketState
from cep.spark_bridge.alerting.rule_set import build_rule_set, match_id_text, statement_to_run
from cep.spark_bridge.alerting.store import RuleStore
from cep.spark_bridge.alerting.worker import runtime_for, times_ns
from cep.spark_bridge.engine import state_codec
from cep.spark_bridge.engine.replay import Replay
from cep.spark_bridge.sinks.alerts import jsonable
from tests.test_alerting import COLUMNS, SENTINEL, TYPES, LocalAlerts, at, write_rule

# Half what the suite ran before; `make test-stream-properties` runs 180 (docs/testing.md).
EXAMPLES = int(os.environ.get("CEP_STREAM_EXAMPLES", "30"))

RULES = {
    "burst.sql": """-- name: burst
SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts
  MEASURES FIRST(A.ts) AS a_ts, COUNT(*) AS n, MATCH_NUMBER() AS mn, LAST(C.price) AS c
  AFTER MATCH SKIP PAST LAST ROW PATTERN (A B{2,} C) WITHIN INTERVAL '10' SECOND
  DEFINE A AS price > 60, B AS price < A.price, C AS price > A.price)""",
    "three.sql": """-- name: three
-- suppress: 20s
SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts MEASURES COUNT(*) AS n, LAST(X.price) AS p
  PATTERN (X{3}) DEFINE X AS price > 50)""",
    "rise.sql": """-- name: rise
SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts
  MEASURES FIRST(A.ts) AS f, COUNT(A.*) AS n, LAST(A.price) - PREV(FIRST(A.price)) AS rise
  PATTERN (A{2,}) DEFINE A AS price > PREV(price))""",
    "sla.sql": """-- name: sla
SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts
  MEASURES A.ts AS a, C.ts AS c, COUNT(*) AS n, MATCH_STATUS() AS status
  ONE ROW PER MATCH SHOW TIMEOUT MATCHES AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B*? C) WITHIN INTERVAL '7' SECOND DEFINE A AS price > 80, C AS price < 20)""",
    "either.sql": """-- name: either
SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts MEASURES COUNT(*) AS n, LAST(C.price) AS c
  PATTERN ((A | B)+ C) DEFINE A AS price > 85, B AS price < 15, C AS price BETWEEN 40 AND 60)""",
}
COLUMN_RULES = {"burst/burst", "three/three", "rise/rise", "sla/sla"}
# gauges each path counts its own way (the VM its threads, the column-wise step its undecided starts)
GAUGES = {"d_live", "d_keys", "dropped_live"}


# build_rule_set's payload of each (rules, session timeout) the property tests publish, built once for the run:
# every example publishes one of a few rule sets into a store of its own, and compiling the five rules again
# was about an eighth of an example's time (cProfile of test_alerting_driver's property).
_BUILT_RULE_SETS: dict[tuple, dict] = {}


def rule_set_payload(tmp_path: Path, rules: dict[str, str], session_s: int) -> dict:
    """A fresh copy of build_rule_set's payload of ``rules``, written the first time under ``tmp_path`` (a folder
    of its own for each rule set, so a later edit never changes the files of one built before)."""
    key = (tuple(sorted(rules.items())), session_s)
    if key not in _BUILT_RULE_SETS:
        folder = tmp_path / f"rules-{len(_BUILT_RULE_SETS)}"
        for name, text in rules.items():
            write_rule(folder, name, text)
        payload, ruleset = build_rule_set(str(folder), input_types=TYPES, session_timeout_us=session_s * 1_000_000)
        assert not ruleset.errors, [str(e) for e in ruleset.errors]
        _BUILT_RULE_SETS[key] = payload
    return copy.deepcopy(_BUILT_RULE_SETS[key])


def publish(tmp_path: Path, session_s: int, dedup_key: tuple[str, ...] = (), horizon_s: int = 0) -> RuleStore:
    """The rule set in a store; ``dedup_key`` and its horizon as ``cep stream --dedup-key`` publishes them."""
    payload = rule_set_payload(tmp_path, RULES, session_s)
    if dedup_key:
        payload["dedup_key"], payload["dedup_horizon_us"] = list(dedup_key), horizon_s * 1_000_000
    store = RuleStore(str(tmp_path / f"store-{session_s}"))
    store.publish(payload)
    return store


def make_batches(rnd: random.Random, delay_s: int) -> list[list[dict]]:
    rows, t = [], 0
    for _ in range(rnd.randint(0, 90)):
        t += rnd.choice([0, 1, 1, 2, 3]) if rnd.random() > 0.05 else rnd.randint(20, 90)
        seconds = max(0, t + rnd.randint(-delay_s - 2, 1))  # out of order, some late
        price = float(rnd.choice([5, 10, 30, 45, 55, 65, 70, 85, 90, 95]))
        rows.append({"symbol": rnd.choice("abc"), "ts": at(seconds), "price": price})
    cuts = sorted(rnd.sample(range(len(rows) + 1), min(rnd.randint(0, 10), len(rows) + 1)))
    batches = [rows[a:b] for a, b in zip([0] + cuts, cuts + [len(rows)])]
    return batches + [[] for _ in range(rnd.randint(0, 2))] + [[ev_sentinel()], [], []]


def ev_sentinel() -> dict:
    return {"symbol": SENTINEL, "ts": at(100_000), "price": 0.0}


def alert_tuple(alert: dict) -> tuple:
    return tuple(alert[name] for name in ("rule_id", "match_id", "match_status", "partition_key")) + (
        alert["first_event_time"],
        alert["last_event_time"],
        alert["measures"],
        bool(alert["suppressed"]),
    )


def drive(store: RuleStore, batches, delay_s: int, *, column_wise: bool, switch_at: int | None = None):
    """Each micro-batch's alerts and counts. ``switch_at``: from that micro-batch on, a column-wise worker
    goes on from the per-key worker's states, rewritten as the checkpoint format from before column-wise rules."""
    local = LocalAlerts(store, delay_s=delay_s, column_wise=column_wise and switch_at is None)
    steps = []
    for index, batch in enumerate(batches):
        if switch_at is not None and index == switch_at:
            old = {
                key: (BucketState.decode(value[0], local.BUCKETS).keys.encode(),) for key, value in local.states.items()
            }
            assert all(BucketState.decode(v[0], local.BUCKETS).per_key is None for v in old.values())
            local.states = old
            local.step.column_wise = True
        before = Counter(local.stats)
        alerts = sorted(alert_tuple(a) for a in local.run_batch(batch))
        counts = {k: v - before.get(k, 0) for k, v in local.stats.items() if k[1] not in GAUGES}
        steps.append((alerts, {k: v for k, v in counts.items() if v}))
    assert not local.failures
    return steps, local


def not_late(batches, delay_s: int) -> list[dict]:
    """The rows the stream matched: those above the watermark of their micro-batch (Spark's rule, as
    ``LocalAlerts`` moves it)."""
    kept, watermark_ms, max_ms = [], 0, None
    for batch in batches:
        for row in batch:
            if state_codec.datetime_to_micros(row["ts"]) // 1000 > watermark_ms:
                kept.append(row)
        for row in batch:
            ms = state_codec.datetime_to_micros(row["ts"]) // 1000
            max_ms = ms if max_ms is None else max(max_ms, ms)
        if max_ms is not None:
            watermark_ms = max(watermark_ms, max_ms - delay_s * 1000)
    return [row for row in kept if row["symbol"] != SENTINEL]


@functools.cache
def compiled_plan(source: str):
    """A rule's plan for its replay, the statement its workers run (the rule with cep's measures), compiled once
    for the run: every example replays one of a few rule sets."""
    return CompiledQuery(statement_to_run({"source": source, "line": 1, "column": 1}))


def replayed(store: RuleStore, rows: list[dict], session_s: int) -> Counter:
    """Every rule's batch replay with the rule's match-id text: (rule id, match id, key, measures)."""
    runtime = runtime_for(store.directory, "0")
    out: Counter = Counter()
    columns = {name: [row[name] for row in rows] for name in COLUMNS}
    for rule_id, entry in runtime.entries.items():
        rule = runtime.rule(rule_id)
        plan = compiled_plan(entry["source"])
        replay = Replay(
            plan,
            tuple(COLUMNS),
            query_text=match_id_text(rule_id, entry["canonical"]),
            session_timeout_us=session_s * 1_000_000,
            match_ids=True,
        )
        if not rows:
            continue
        names, found = replay.run(columns)
        for values in found:
            row = dict(zip(names, values))
            match_id = row.pop("match_id")
            key = json.dumps({"symbol": row["symbol"]})
            measures = json.dumps(
                {name: jsonable(row[name]) for _, name in rule.measures if name in row}, ensure_ascii=False
            )
            out[(rule_id, match_id, key, measures)] += 1
    return out


def test_one_rule_file_published_with_and_without_a_dedup_key_runs_each_way(tmp_path):
    """A worker process caches each compiled rule; two rule sets of the same rule files (one path, one text)
    that differ only in the stream's dedup key or horizon must not share one: each rule keeps its own."""
    payload = rule_set_payload(tmp_path, RULES, 60)
    settings_seen = []
    for name, dedup_key, horizon_s in (("plain", None, 0), ("by-ts", ["ts", "price"], 5), ("longer", ["ts"], 9)):
        store = RuleStore(str(tmp_path / name))
        store.publish({**payload, "dedup_key": dedup_key, "dedup_horizon_us": horizon_s * 1_000_000})
        engine = runtime_for(store.directory, "0").rule("burst/burst").engine
        settings_seen.append((engine.dedup_columns, engine.dedup_horizon_us))
    assert settings_seen == [((), 0), (("ts", "price"), 5_000_000), (("ts",), 9_000_000)]


def test_the_rule_set_mixes_column_wise_and_per_key_rules(tmp_path):
    runtime = runtime_for(publish(tmp_path, 30).directory, "0")
    routes = {rule_id: runtime.rule(rule_id).route for rule_id in runtime.entries}
    assert {r for r, route in routes.items() if route.stream == COLUMN_WISE} == COLUMN_RULES
    assert routes["either/either"].stream == PER_KEY


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    delay_s=st.sampled_from([0, 2, 5]),
    session_s=st.sampled_from([15, 60]),
)
# A key whose only state was its last alert (the suppression interval of `three`) was called by its timer on the
# per-key path, and counted as a timer fired there and not column-wise.
@example(seed=60000000, delay_s=2, session_s=15)
@example(seed=349, delay_s=0, session_s=15)
def test_column_wise_rules_equal_per_key_and_the_replay(tmp_path_factory, seed, delay_s, session_s):
    assert_column_wise_worker_as_per_key(publish(tmp_path_factory.mktemp("rules"), session_s), seed, delay_s, session_s)


def assert_column_wise_worker_as_per_key(store: RuleStore, seed: int, delay_s: int, session_s: int) -> None:
    """Over random micro-batches, the column-wise worker gives the per-key worker's alerts and counts, and the
    rows and ids of each rule's replay."""
    batches = make_batches(random.Random(seed), delay_s)
    expected, _ = drive(store, batches, delay_s, column_wise=False)
    got, _ = drive(store, batches, delay_s, column_wise=True)
    for index, (want, have) in enumerate(zip(expected, got)):
        assert have == want, f"micro-batch {index}"
    streamed = Counter(
        (a[0], a[1], a[3], a[6]) for alerts, _ in got for a in alerts if a[3] != json.dumps({"symbol": SENTINEL})
    )
    assert streamed == replayed(store, not_late(batches, delay_s), session_s)


@settings(max_examples=max(EXAMPLES // 2, 10), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    delay_s=st.sampled_from([0, 2, 5]),
    session_s=st.sampled_from([15, 60]),
)
def test_dedup_key_rules_stay_column_wise_and_equal_per_key(tmp_path_factory, seed, delay_s, session_s):
    """Events delivered again (at least once, as Kafka does), under the stream's ``dedup_key`` (symbol's
    ts and price, remembered for the watermark delay): the column-wise rules drop the same repeats as the
    per-key worker, micro-batch by micro-batch, and give the replay of the events without repeats."""
    store = publish(tmp_path_factory.mktemp("rules"), session_s, dedup_key=("ts", "price"), horizon_s=delay_s)
    runtime = runtime_for(store.directory, "0")
    assert {r for r in runtime.entries if runtime.rule(r).route.stream == COLUMN_WISE} == COLUMN_RULES
    rnd = random.Random(seed)
    batches, sent = [], []
    for batch in make_batches(rnd, delay_s):
        sent += batch
        again = [dict(row) for row in rnd.sample(sent, min(len(sent), rnd.randint(0, 4)))]
        batches.append([*batch, *again] if rnd.random() < 0.5 else [*again, *batch])
    expected, _ = drive(store, batches, delay_s, column_wise=False)
    got, _ = drive(store, batches, delay_s, column_wise=True)
    for index, (want, have) in enumerate(zip(expected, got)):
        assert have == want, f"micro-batch {index}"
    events, firsts = set(), []  # each event once, where it first came
    for row in not_late(batches, delay_s):
        if (row["symbol"], row["ts"], row["price"]) not in events:
            events.add((row["symbol"], row["ts"], row["price"]))
            firsts.append(row)
    dropped = sum(n for _, counts in got for (rule_id, name), n in counts.items() if name == "duplicates_dropped")
    assert dropped >= len(not_late(batches, delay_s)) - len(firsts)  # every repeat above the watermark, at least
    streamed = Counter(
        (a[0], a[1], a[3], a[6]) for alerts, _ in got for a in alerts if a[3] != json.dumps({"symbol": SENTINEL})
    )
    assert streamed == replayed(store, firsts, session_s)


@settings(max_examples=max(EXAMPLES // 3, 10), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), cut=st.integers(1, 6), delay_s=st.sampled_from([2, 5]))
def test_a_per_key_checkpoint_of_the_old_format_goes_on_column_wise(tmp_path_factory, seed, cut, delay_s):
    store = publish(tmp_path_factory.mktemp("rules"), 60)
    batches = make_batches(random.Random(seed), delay_s)
    expected, _ = drive(store, batches, delay_s, column_wise=False)
    got, local = drive(store, batches, delay_s, column_wise=True, switch_at=min(cut, len(batches) - 1))
    assert [alerts for alerts, _ in got] == [alerts for alerts, _ in expected]
    # after the move (in each bucket called since: the others wait in the old format), the key entries hold
    # the per-key rule alone
    for blob in local.states.values():
        bucket = BucketState.decode(blob[0], local.BUCKETS)
        if bucket.per_key is None:
            continue
        assert bucket.per_key == {"either/either"}
        assert {r for s in bucket.keys.states.values() for r in state_codec.decode(s)} <= {"either/either"}


def test_an_unknown_bucket_state_version_is_refused(tmp_path):
    import pytest

    from cep.grammar.errors import CepRuntimeError

    blob = state_codec.encode({"kind": "cep-alert-bucket", "v": 99, "keys": None, "rules": {}, "per_key": []})
    with pytest.raises(CepRuntimeError, match="version 99") as raised:
        BucketState.decode(blob, 3)
    assert raised.value.code == "E0481"


_ALERT_TIMES = st.one_of(
    st.none(),
    st.datetimes(min_value=dt.datetime(1700, 1, 1), max_value=dt.datetime(2200, 1, 1)),
    st.datetimes(min_value=dt.datetime(1700, 1, 1), max_value=dt.datetime(2200, 1, 1)).map(pd.Timestamp),
)


@settings(max_examples=200, deadline=None)
@given(values=st.lists(_ALERT_TIMES, max_size=30))
def test_an_alerts_times_become_the_same_datetime64_as_numpys_conversion(values):
    """The alerts' times column (``times_ns``, pandas' converter) holds, value for value, what numpy's own
    conversion of the same Python times gives: the microsecond, NaT for None."""
    got = times_ns(values)
    expected = np.array(values, dtype="datetime64[us]").astype("datetime64[ns]")
    assert got.dtype == np.dtype("datetime64[ns]") and len(got) == len(values)
    assert np.array_equal(got, expected, equal_nan=True)
