"""The column-wise streaming path (``spark_bridge/engine/columnar.py``) against the per-key Pike VM path.

Differential: random rows (several keys, tied event times and values, rows out of order within the
watermark delay, late rows, NULL event times, session gaps) split into random micro-batches run through
``LocalStream`` twice, once per path; every micro-batch must give the same output rows in the same order,
the same match ids, the same late rows with the same reasons, the same stats (but ``live_matches``: the
VM counts its threads, the column-wise path its undecided starts; and ``state_bytes``: another state
format) and the same timers. ``CEP_STREAM_EXAMPLES=N`` sets the examples per test (default 90; ``make
test-stream-properties``: 180).
"""

from __future__ import annotations

import datetime as dt
import os
import random
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cep
from cep.grammar.errors import CepRuntimeError
from cep.matcher.plan import COLUMN_WISE
from cep.spark_bridge.engine.column_table import ColumnarTable
from cep.spark_bridge.engine.key_table import KeyTable
from cep.spark_bridge.engine.keyed import STAT_NAMES, KeyedStream
from cep.spark_bridge.engine.local import LocalStream
from cep.spark_bridge.engine.match_ids import statement_text

T0 = dt.datetime(2024, 1, 1)
COLUMNS = ("k", "ts", "v", "w")
# Half what the suite ran before; `make test-stream-properties` runs 180 (docs/testing.md).
EXAMPLES = int(os.environ.get("CEP_STREAM_EXAMPLES", "90"))


def query(
    pattern: str,
    measures: str,
    defines: str,
    *,
    skip: str = "PAST LAST ROW",
    within: str = "",
    where: str = "",
    timeouts: bool = False,
    order: str = "ts",
    rows: str = "ONE ROW PER MATCH",
) -> str:
    shown = " SHOW TIMEOUT MATCHES" if timeouts else ""
    return (
        f"SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY {order} MEASURES {measures} "
        f"{rows}{shown} AFTER MATCH SKIP {skip} PATTERN ({pattern}) {within} DEFINE {defines}){where}"
    )


QUERIES = {
    "greedy_tail": query("A{3,}", "FIRST(A.ts) AS f, COUNT(*) AS n, MATCH_NUMBER() AS mn", "A AS A.v > 3"),
    "bounded": query(
        "A B{2,4} C", "FIRST(A.ts) AS f, LAST(B.v) AS b, COUNT(*) AS n", "A AS A.v > 6, B AS B.v > 2, C AS C.v < 5"
    ),
    "within_first_hit": query(
        "A B*? C",
        "A.ts AS a, C.ts AS c, A.v - C.v AS fall",
        "A AS A.v > 4, C AS C.v < A.v - 2",
        within="WITHIN INTERVAL '6' SECOND",
    ),
    "within_greedy": query(
        "A B+ C", "FIRST(A.ts) AS f, COUNT(*) AS n", "B AS B.v >= 3, C AS C.v > 7", within="WITHIN INTERVAL '9' SECOND"
    ),
    "prev_next_row": query(
        "A B+ C",
        "FIRST(A.ts) AS f, COUNT(*) AS n, MATCH_NUMBER() AS mn",
        "B AS B.v < PREV(B.v), C AS C.v > PREV(C.v)",
        skip="TO NEXT ROW",
    ),
    "prev2": query("A B", "A.ts AS a, B.v AS b", "A AS A.v > PREV(A.v, 2), B AS B.v < PREV(B.v)", skip="TO NEXT ROW"),
    "running_sum": query(
        "A+ B", "FIRST(A.ts) AS f, SUM(A.w) AS s, COUNT(*) AS n", "A AS SUM(A.w) < 9, B AS SUM(A.w) + B.w >= 9"
    ),
    "cross_variable": query(
        "S D+ U",
        "S.ts AS s, LAST(D.ts) AS d, COUNT(*) AS n",
        "D AS D.v < S.v, U AS U.v > LAST(D.v, 1)",
        skip="TO LAST U",
    ),
    # interval arithmetic on the event time (the kernels read it as µs ticks, ``column_table.StreamInput.load``)
    "time_gap": query(
        "A B C",
        "A.ts AS a, C.ts AS c, C.ts - A.ts AS took",
        "A AS A.v > 2, B AS B.ts - A.ts <= INTERVAL '3' SECOND, "
        "C AS C.ts - A.ts < INTERVAL '5' SECOND AND ts >= PREV(ts) + INTERVAL '0.5' SECOND",
        skip="TO NEXT ROW",
    ),
    "where": query("A{2,} B", "FIRST(A.ts) AS f, COUNT(*) AS n", "A AS A.v < 5, B AS B.v >= 5", where=" WHERE n > 2"),
    # NEXT in DEFINE: an open session's last rows are tested only once the rows after them come (or it ends)
    "next_define": query(
        "A B{2,} C",
        "FIRST(A.ts) AS f, COUNT(B.*) AS n, C.v AS c",
        "A AS A.v < NEXT(A.v), B AS B.v >= NEXT(B.v, 2) OR B.v > 6, C AS NEXT(C.v) IS NULL OR C.v < 3",
    ),
    "next_within": query(
        "A B*? C",
        "A.ts AS a, C.ts AS c, COUNT(*) AS n, MATCH_STATUS() AS st",
        "A AS A.v > 5, C AS C.v < A.v - 3 AND NEXT(C.v) > C.v",
        within="WITHIN INTERVAL '7' SECOND",
        timeouts=True,
    ),
    "next_absent": query(
        "A !B", "A.ts AS a, COUNT(*) AS n", "A AS A.v = 9, B AS B.v > NEXT(B.v)", within="WITHIN INTERVAL '5' SECOND"
    ),
    # ORDER BY keys after the event time (rows tied on ts ordered by them, then by the tie-break columns)
    "order_keys": query(
        "A{2,} B",
        "FIRST(A.v) AS fv, LAST(A.w) AS lw, B.v AS b, COUNT(*) AS n",
        "A AS A.v < 6, B AS B.v >= 6 AND B.v > LAST(A.v)",
        order="ts, w DESC, v NULLS FIRST",
    ),
    # the alert rules' measures (patterns/login_burst.sql, card_testing.sql) and their kin, over a w of
    # floats, NULLs and ties (``MIXED``): the VM's measure code once per match on the column-wise path
    "brute_force": query(
        "F{3,} O",
        "FIRST(F.ts) AS f, COUNT(F.*) AS n, COUNT(DISTINCT F.w) AS kinds, O.ts AS o, "
        "MIN(F.w) AS lo, MAX(F.w) AS hi, CLASSIFIER() AS last_label",
        "F AS F.v < 6, O AS O.v >= 6",
        within="WITHIN INTERVAL '9' SECOND",
    ),
    "card_testing": query(
        "S{2,} B",
        "FIRST(S.ts) AS f, ROUND(SUM(S.w), 2) AS total, AVG(S.w) AS mean, SUM(S.w) AS raw, "
        "CASE WHEN SUM(S.w) > 3 THEN 'big' WHEN COUNT(S.w) = 0 THEN NULL ELSE 'small' END AS size, "
        "COALESCE(B.w, -1) * MATCH_NUMBER() AS bw",
        "S AS S.v < 6, B AS B.v >= 6",
        within="WITHIN INTERVAL '12' SECOND",
    ),
    # SHOW TIMEOUT MATCHES (patterns/order_payment_sla.sql and kin): TIMEOUT rows when the watermark, a
    # later row or a session's end passes a start's deadline, numbered and identified as the VM has them
    "timeout_sla": query(
        "A B*? C",
        "A.ts AS a, C.ts AS c, COUNT(*) AS n, MATCH_NUMBER() AS mn, MATCH_STATUS() AS st",
        "A AS A.v > 5, C AS C.v < 3",
        within="WITHIN INTERVAL '7' SECOND",
        timeouts=True,
    ),
    "timeout_greedy": query(
        "A B{2,} C",
        "FIRST(A.ts) AS f, LAST(B.v) AS b, COUNT(*) AS n, MATCH_STATUS() AS st, MATCH_NUMBER() AS mn",
        "A AS A.v > 4, B AS B.v >= 2, C AS C.v > 7",
        within="WITHIN INTERVAL '9' SECOND",
        timeouts=True,
        skip="TO NEXT ROW",
    ),
    "timeout_where": query(
        "A B+ C",
        "FIRST(A.ts) AS f, SUM(B.w) AS s, MATCH_STATUS() AS st",
        "B AS B.v >= 3, C AS C.v > 7",
        within="WITHIN INTERVAL '6' SECOND",
        timeouts=True,
        where=" WHERE st = 'TIMEOUT' OR s > 4",
    ),
    # absence: a trailing `A !B` matches only when the watermark (or a later row, or a session's end) passes
    # A's time + WITHIN with no B row before (patterns/cart_abandoned.sql, sensor_silent.sql); `A !B C`
    "absent_tail": query(
        "A !B",
        "A.ts AS a, COUNT(*) AS n, MATCH_STATUS() AS st, MATCH_NUMBER() AS mn",
        "A AS A.v > 6, B AS B.v < 2",
        within="WITHIN INTERVAL '6' SECOND",
    ),
    "absent_silent": query(
        "A !B", "A.ts AS a, A.v AS v, COUNT(*) AS n", "A AS A.v > 3", within="WITHIN INTERVAL '3' SECOND"
    ),
    "absent_history": query(
        "A !B",
        "A.ts AS a, COUNT(*) AS n, LAST(B.v) AS b",
        "A AS A.v > 5, B AS B.v > A.v + 1",
        within="WITHIN INTERVAL '8' SECOND",
        skip="TO NEXT ROW",
    ),
    "absent_middle": query(
        "A !B C",
        "A.ts AS a, C.ts AS c, COUNT(*) AS n, MATCH_STATUS() AS st",
        "A AS A.v > 5, B AS B.v = 0, C AS C.v < 3",
        within="WITHIN INTERVAL '8' SECOND",
        timeouts=True,
    ),
    "absent_middle_open": query(
        "A !B C", "A.ts AS a, C.ts AS c, COUNT(*) AS n", "A AS A.v > 6, B AS B.v = 0, C AS C.v = 1", skip="TO NEXT ROW"
    ),
    # PREV in a measure (patterns/temperature_rising.sql): reads rows before the match, NULL before its session
    "prev_measure": query(
        "A{2,}",
        "FIRST(A.ts) AS f, COUNT(A.*) AS n, LAST(A.v) - PREV(FIRST(A.v)) AS rise, PREV(A.v, 2) AS back",
        "A AS A.v >= 3",
    ),
    "prev_define_measure": query(
        "A{3,}", "FIRST(A.ts) AS f, ROUND(LAST(A.v) - PREV(FIRST(A.v)), 1) AS rise", "A AS A.v > PREV(A.v)"
    ),
    "prev_measure_within": query(
        "A B+ C",
        "A.ts AS a, PREV(A.w) AS before, PREV(C.v, 3) AS c3, MATCH_STATUS() AS st",
        "B AS B.v >= 3, C AS C.v > 7",
        within="WITHIN INTERVAL '6' SECOND",
        timeouts=True,
        skip="TO NEXT ROW",
    ),
    # ALL ROWS PER MATCH: a row per match row, RUNNING and FINAL measures as the VM's MatchView gives them
    # at each row, every row of a match with its match's id
    "all_rows": query(
        "A B{2,} C",
        "FIRST(A.ts) AS f, COUNT(*) AS n, MATCH_NUMBER() AS mn, CLASSIFIER() AS c, LAST(B.v) AS lb, "
        "FINAL COUNT(B.*) AS fb, FINAL LAST(C.w) AS cw, v AS now",
        "A AS A.v > 5, B AS B.v < A.v, C AS C.v > A.v - 2",
        rows="ALL ROWS PER MATCH",
    ),
    "all_rows_overlap": query(
        "A B+ C",
        "FIRST(B.v) AS fb, FINAL FIRST(C.ts) AS fc, COUNT(B.*) AS nb, LAST(w) AS lw, MATCH_NUMBER() AS mn",
        "B AS B.v >= 3, C AS C.v > 7",
        rows="ALL ROWS PER MATCH SHOW EMPTY MATCHES",
        skip="TO NEXT ROW",
        within="WITHIN INTERVAL '9' SECOND",
    ),
    "all_rows_where": query(
        "A{2,} B",
        "COUNT(A.*) AS na, CLASSIFIER() AS c, FINAL LAST(A.v) AS la",
        "A AS A.v < 5, B AS B.v >= 5",
        rows="ALL ROWS PER MATCH OMIT EMPTY MATCHES",
        where=" WHERE c = 'A' OR la > 2",
        order="ts, w DESC",
    ),
}
MIXED = ("brute_force", "card_testing", "order_keys")  # w: floats that round (0.1 + 0.2), integers, NULLs


def make_batches(rnd: random.Random, delay_s: int, mixed: bool = False) -> list[list[dict]]:
    keys = "abc"[: rnd.randint(1, 3)]
    rows, t = [], 0
    for _ in range(rnd.randint(0, 70)):
        t += rnd.choice([0, 0, 1, 1, 2, 3]) if rnd.random() > 0.06 else rnd.randint(15, 60)
        ts = T0 + dt.timedelta(seconds=max(0, t + rnd.randint(-delay_s - 2, 1)))  # out of order, some late
        rows.append(
            {
                "k": rnd.choice(keys),
                "ts": None if rnd.random() < 0.02 else ts,
                "v": rnd.randint(0, 9),
                "w": rnd.choice([0.1, 0.2, 0.7, 2.5, 1, None]) if mixed else rnd.randint(0, 4),
            }
        )
    cuts = sorted(rnd.sample(range(len(rows) + 1), min(rnd.randint(0, 8), len(rows) + 1)))
    batches = [rows[a:b] for a, b in zip([0] + cuts, cuts + [len(rows)])]
    return (
        batches
        + [[] for _ in range(rnd.randint(1, 3))]
        + [[{"k": "z", "ts": T0 + dt.timedelta(hours=5), "v": 0, "w": 0}], []]
    )


def run(
    text: str,
    batches,
    *,
    columnar: bool,
    delay_s: int,
    session_s,
    buckets: int = 0,
    max_pending_rows=None,
    max_match_rows=None,
    dedup_key=None,
    dedup_horizon_s: int = 0,
):
    q = cep.compile(text)
    options = {"max_pending_rows": max_pending_rows} if max_pending_rows else {}
    if max_match_rows:
        options["max_match_rows"] = max_match_rows
    if dedup_key:
        options.update(dedup_key=dedup_key, dedup_horizon_us=dedup_horizon_s * 1_000_000)
    engine = KeyedStream(
        q.plan,
        COLUMNS,
        query_text=q.text,
        session_timeout_us=None if session_s is None else session_s * 1_000_000,
        **options,
    )
    stream = LocalStream(engine, delay_ms=delay_s * 1000, buckets=buckets, columnar=columnar)
    steps = []
    for batch in batches:
        before = dict(stream.stats)
        out, ids, late = stream.run_batch(batch)
        stats = {k: v - before[k] for k, v in stream.stats.items() if k not in ("live_matches", "state_bytes")}
        steps.append((out, ids, [(reason, id(row)) for reason, row in late], stats, stream.timers))
    return steps, stream


def _typed(rows) -> list[tuple]:
    return [tuple(f"{type(v).__name__}:{v!r}" for v in row) for row in rows]


def assert_same(text, batches, **options):
    expected, _ = run(text, batches, columnar=False, **options)
    got, stream = run(text, batches, columnar=True, **options)
    for index, (want, have) in enumerate(zip(expected, got)):
        assert have == want, f"micro-batch {index}"
        assert _typed(have[0]) == _typed(want[0]), f"micro-batch {index}"  # == takes 1 for 1.0
    return stream


# A stream's random cases: the rows' seed, the session timeout, the watermark delay, the key buckets.
STREAM_CASES = {
    "seed": st.integers(0, 2**32 - 1),
    "session_s": st.sampled_from([None, 8, 30]),
    "delay_s": st.sampled_from([0, 2, 5]),
    "buckets": st.sampled_from([0, 0, 3]),
}


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(QUERIES)), **STREAM_CASES)
def test_columnar_equals_per_key(seed, name, session_s, delay_s, buckets):
    assert_column_wise_as_per_key(QUERIES[name], seed, session_s, delay_s, buckets, mixed=name in MIXED)


def assert_column_wise_as_per_key(text: str, seed: int, session_s, delay_s: int, buckets: int, mixed: bool = False):
    """``text`` routes column-wise, and over random micro-batches gives the per-key path's output."""
    route = KeyedStream(cep.compile(text).plan, COLUMNS, query_text=text).route()
    assert (route.stream, route.stream_reasons) == (COLUMN_WISE, ())
    batches = make_batches(random.Random(seed), delay_s, mixed=mixed)
    assert_same(text, batches, delay_s=delay_s, session_s=session_s, buckets=buckets)


@settings(max_examples=max(EXAMPLES // 3, 10), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    name=st.sampled_from(
        [
            "greedy_tail",
            "running_sum",
            "prev_next_row",
            "timeout_sla",
            "next_within",
            "absent_tail",
            "absent_middle",
            "prev_measure",
            "all_rows",
            "all_rows_overlap",
        ]
    ),
    session_s=st.sampled_from([None, 30]),
)
def test_columnar_caps_equal_per_key(seed, name, session_s):
    """Small caps: forced releases (max_pending_rows) and given-up partial matches (max_match_rows, where a
    session piece runs on the VM) as the per-key path has them."""
    batches = make_batches(random.Random(seed), 5)
    assert_same(QUERIES[name], batches, delay_s=5, session_s=session_s, max_pending_rows=4, max_match_rows=6)


def test_a_carried_start_searches_only_the_rows_new_since_its_last_search():
    """``A B*? C`` WITHIN: a start with no C yet is carried, and each later micro-batch searches only its
    new rows for C (``decisions.decide``'s resume): one row per micro-batch, several keys, a hit that comes
    late, a start whose deadline passes with none; the output is the per-key VM's, micro-batch by
    micro-batch."""
    text = QUERIES["within_first_hit"]  # C AS C.v < A.v - 2, WITHIN 6 s
    values = {"a": [9, 8, 9, 7, 8, 6, 9, 9, 1, 5, 9, 9, 9, 9, 9, 9, 9, 0], "b": [5, 5, 6, 5, 5, 5, 5, 2, 5, 5, 5, 9]}
    rows = sorted(
        (
            {"k": k, "ts": T0 + dt.timedelta(milliseconds=700 * i + (k == "b") * 100), "v": v, "w": 0}
            for k, vs in values.items()
            for i, v in enumerate(vs)
        ),
        key=lambda row: row["ts"],
    )
    batches = [[row] for row in rows] + [[{"k": "z", "ts": T0 + dt.timedelta(hours=1), "v": 0, "w": 0}], []]
    stream = assert_same(text, batches, delay_s=0, session_s=None)
    assert stream.step.plan.stats["resumed"] > 0 and stream.step.vm_pieces == 0
    steps, _ = run(text, batches, columnar=True, delay_s=0, session_s=None)
    # by hand (rows 0.7 s apart: 8 rows after a start are within 6 s): a's rows 0-5 (9 ... 6 < 7), 6-8 (9 ... 1),
    # 9-17 (5 ... 0 < 3, eight rows later); b's rows 0-7 (5 ... 2 < 3); b's starts 8-11 never see a C
    index = {(row["k"], row["ts"]): i for k in values for i, row in enumerate(r for r in rows if r["k"] == k)}
    found = sorted((k, index[k, a], index[k, c]) for step in steps for k, a, c, _ in step[0])
    assert found == [("a", 0, 5), ("a", 6, 8), ("a", 9, 17), ("b", 0, 7)]


def test_a_column_repeated_in_order_by_streams_as_the_batch_replay():
    """``ORDER BY ts, v DESC, v, ts`` orders as ``ts, v DESC`` (a repeat orders nothing more): it streamed
    with a KeyError on both paths (the time column is not among the pending columns); now both give the
    batch replay's matches, the stream's ties broken as ``canonical_order`` breaks them."""
    from cep.spark_bridge.engine.ordering import canonical_order

    text = query(
        "A{2,} B",
        "FIRST(A.v) AS fv, LAST(A.v) AS lv, COUNT(*) AS n",
        "A AS A.v < 6, B AS B.v >= 6",
        order="ts, v DESC, v, ts",
    )
    rows = [{"k": "ab"[i % 2], "ts": T0 + dt.timedelta(seconds=i // 4), "v": (i * 7) % 9, "w": 0} for i in range(60)]
    # cut between two event times (a row tied with one already released would be late)
    batches = [rows[:24], rows[24:], [{"k": "z", "ts": T0 + dt.timedelta(hours=1), "v": 0, "w": 0}], []]
    assert_same(text, batches, delay_s=0, session_s=None)
    steps, _ = run(text, batches, columnar=True, delay_s=0, session_s=None)
    q = cep.compile(text)
    replay = [tuple(row.values()) for row in q.run(canonical_order(rows, q.plan))]
    streamed = [row for step in steps for row in step[0]]
    assert sorted(streamed) == sorted(replay) and len(replay) >= 4


def test_a_long_open_run_goes_on_on_the_vm_and_back():
    """A run open for longer than a scan from every start allows (the engine's budget): that call runs on
    the VM, resumed from the carried rows; later calls are column-wise again; the output is the VM's."""
    text = QUERIES["greedy_tail"]
    long_run = [{"k": "a", "ts": T0 + dt.timedelta(milliseconds=i), "v": 9, "w": 0} for i in range(3_000)]
    batches = [
        long_run[:1000],
        long_run[1000:],
        [{"k": "a", "ts": T0 + dt.timedelta(seconds=10), "v": 0, "w": 0}],
        [{"k": "z", "ts": T0 + dt.timedelta(hours=1), "v": 0, "w": 0}],
        [],
    ]
    stream = assert_same(text, batches, delay_s=0, session_s=None)
    assert stream.step.vm_pieces >= 1


def test_the_path_is_named_and_can_be_forced():
    q = cep.compile(QUERIES["greedy_tail"])
    engine = KeyedStream(q.plan, COLUMNS, query_text=q.text)
    assert LocalStream(engine, delay_ms=0).path.startswith("column-wise")
    assert LocalStream(engine, delay_ms=0, columnar=False).path.startswith("per key")
    after = cep.compile(query("A{2,} B", "NEXT(B.v) AS later", "A AS A.v < 5, B AS B.v >= 5"))
    stream = LocalStream(KeyedStream(after.plan, COLUMNS, query_text=after.text), delay_ms=0)
    assert stream.path.startswith("per key (Pike VM): ") and "NEXT in a measure" in stream.path
    with pytest.raises(CepRuntimeError, match="cannot run this query"):
        LocalStream(KeyedStream(after.plan, COLUMNS, query_text=after.text), delay_ms=0, columnar=True)


def test_a_column_wise_checkpoint_is_refused_by_the_per_key_path():
    q = cep.compile(QUERIES["greedy_tail"])
    engine = KeyedStream(q.plan, COLUMNS, query_text=q.text)
    rows = [{"k": "a", "ts": T0 + dt.timedelta(seconds=s), "v": 5, "w": 0} for s in range(5)]
    columnwise = LocalStream(engine, delay_ms=0, buckets=2, columnar=True)
    columnwise.run_batch(rows)
    columnwise.run_batch([])
    blob = next(iter(columnwise.tables.values()))
    with pytest.raises(CepRuntimeError, match="column-wise streaming path") as caught:
        KeyTable.decode(blob, 2)
    assert caught.value.code == "E0482"
    again = ColumnarTable.decode(blob, columnwise.step.columns, 2, engine)
    assert again.encode() == blob
    with pytest.raises(CepRuntimeError, match="key_buckets=2, not 3") as caught:
        ColumnarTable.decode(blob, columnwise.step.columns, 3, engine)
    assert caught.value.code == "E0482"
    # A checkpoint from before key buckets (one state per key) is refused as the per-key path refuses it.
    per_key = engine.process(None, ("a",), {"k": ["a"], "v": [5], "w": [0]}, [1_000_000], 0).state
    with pytest.raises(CepRuntimeError, match="before key buckets") as caught:
        ColumnarTable.decode(per_key, columnwise.step.columns, 2, engine)
    assert caught.value.code == "E0482"


def _fed(
    name: str, batches: list, *, buckets: int, columnar: bool, early_release: bool = True
) -> tuple[KeyedStream, LocalStream]:
    """A LocalStream of ``QUERIES[name]`` (watermark delay 5 s, session timeout 30 s) fed ``batches``,
    and its engine (to resume another stream from its tables). ``early_release=False``: as cep released rows
    before a key's own bound (the checkpoint fixtures were written so)."""
    q = cep.compile(QUERIES[name])
    engine = KeyedStream(q.plan, COLUMNS, query_text=q.text, session_timeout_us=30_000_000)
    local = LocalStream(engine, delay_ms=5_000, buckets=buckets, columnar=columnar, early_release=early_release)
    for batch in batches:
        local.run_batch(batch)
    return engine, local


def going_on(engine: KeyedStream, stream: LocalStream, *, buckets: int, columnar: bool) -> LocalStream:
    """A new stream of today's rules (early release) from what ``stream`` left in its tables (as Spark
    restores a checkpoint: bytes, and the watermark)."""
    again = LocalStream(engine, delay_ms=stream.delay_ms, buckets=buckets, columnar=columnar)
    again.tables = {bucket: t if isinstance(t, bytes) else t.encode() for bucket, t in stream.tables.items()}
    again.watermark_ms, again.max_event_ms = stream.watermark_ms, stream.max_event_ms
    return again


def test_a_per_key_checkpoint_goes_on_column_wise():
    """A stream upgraded to the column-wise path keeps its checkpoint: the per-key path's bucket tables are
    read (each key's pending rows, and its matcher's rows from its first undecided start), and the rest
    of the stream gives what the per-key path gives."""
    for seed in range(12):
        rnd = random.Random(seed)
        batches = make_batches(rnd, 5)
        cut = rnd.randint(1, len(batches) - 1)
        for name in (
            "greedy_tail",
            "within_greedy",
            "prev_next_row",
            "timeout_sla",
            "absent_tail",
            "absent_middle",
            "all_rows",
            "all_rows_overlap",
        ):
            engine, old = _fed(name, batches[:cut], buckets=3, columnar=False)
            new = LocalStream(engine, delay_ms=5_000, buckets=3, columnar=True)
            new.tables, new.watermark_ms, new.max_event_ms = dict(old.tables), old.watermark_ms, old.max_event_ms
            for batch in batches[cut:]:
                assert new.run_batch(batch) == old.run_batch(batch), (seed, name)


DEDUPED = ("greedy_tail", "bounded", "within_greedy", "timeout_sla", "absent_tail", "where", "all_rows")


@settings(max_examples=max(EXAMPLES // 2, 10), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    name=st.sampled_from(DEDUPED),
    dedup_key=st.sampled_from([("w",), ("v", "w")]),
    horizon_s=st.sampled_from([0, 4, 40]),
    delay_s=st.sampled_from([0, 2, 5]),
    session_s=st.sampled_from([None, 8, 30]),
    buckets=st.sampled_from([0, 3]),
)
def test_dedup_key_columnar_equals_per_key(seed, name, dedup_key, horizon_s, delay_s, session_s, buckets):
    """``dedup_key`` on the column-wise path: a row that repeats a value its key remembers is dropped (late
    or not) and counted, an accepted row's value is remembered and a late row's is not, NULL repeats
    nothing, and a value is forgotten once the watermark passes it by the horizon (a timer calls the key
    for that): the same rows, ids, late rows, counts and timers as the per-key path, micro-batch by
    micro-batch."""
    batches = make_batches(random.Random(seed), delay_s)
    options = dict(delay_s=delay_s, session_s=session_s, buckets=buckets, dedup_key=dedup_key)
    stream = assert_same(QUERIES[name], batches, dedup_horizon_s=horizon_s, **options)
    assert stream.step is not None


@settings(max_examples=max(EXAMPLES // 2, 10), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    name=st.sampled_from(["all_rows", "all_rows_overlap", "all_rows_where", "bounded", "timeout_sla"]),
    delay_s=st.sampled_from([0, 2, 5]),
    session_s=st.sampled_from([8, 30]),
    deduped=st.booleans(),
    buckets=st.sampled_from([0, 3]),
)
def test_a_column_wise_stream_gives_the_backtest_rows_and_ids(seed, name, delay_s, session_s, deduped, buckets):
    """ALL ROWS PER MATCH and ``dedup_key`` streamed column-wise (random cuts, random watermark delays, late
    rows, NULL event times, events delivered twice) give ``q.run(session_timeout=..., match_ids=True)``'s
    (match id, row) pairs over the rows the stream took: those above the watermark, each event once."""
    rnd = random.Random(seed)
    batches, sent = [], []
    for batch in make_batches(rnd, delay_s):
        sent += [row for row in batch if row["ts"] is not None and row["k"] != "z"]
        again = [dict(row) for row in rnd.sample(sent, min(len(sent), rnd.randint(0, 3)))] if deduped else []
        batches.append([*batch, *again])
    q = cep.compile(QUERIES[name])
    dedup = {"dedup_key": ("ts", "v", "w"), "dedup_horizon_us": 3_600_000_000} if deduped else {}
    engine = KeyedStream(
        q.plan, COLUMNS, query_text=statement_text(q), session_timeout_us=session_s * 1_000_000, **dedup
    )
    stream = LocalStream(engine, delay_ms=delay_s * 1000, buckets=buckets, columnar=True)
    streamed: Counter = Counter()
    taken, events, watermark_ms, max_ms = [], set(), 0, None
    for batch in batches:
        rows, ids, _ = stream.run_batch(batch)
        streamed.update((match_id, tuple(row)) for row, match_id in zip(rows, ids) if "z" not in row)
        for row in batch:  # Spark's rule: a row above the watermark of its micro-batch is matched
            ms = None if row["ts"] is None else int((row["ts"] - dt.datetime(1970, 1, 1)).total_seconds() * 1000)
            event = (row["k"], row["ts"], row["v"], row["w"]) if deduped else id(row)
            if ms is not None and ms > watermark_ms and row["k"] != "z" and event not in events:
                taken.append(row)
                events.add(event)
        seen_ms = [int((r["ts"] - dt.datetime(1970, 1, 1)).total_seconds() * 1000) for r in batch if r["ts"]]
        if seen_ms:
            max_ms = max([*seen_ms, max_ms] if max_ms is not None else seen_ms)
            watermark_ms = max(watermark_ms, max_ms - delay_s * 1000)
    assert stream.step is not None and stream.step.vm_pieces == 0
    rnd.shuffle(taken)  # a replay orders rows itself, ties as the stream does
    replayed = q.run(taken, session_timeout=dt.timedelta(seconds=session_s), match_ids=True)
    assert streamed == Counter((row.pop("match_id"), tuple(row.values())) for row in replayed)


def test_dedup_values_survive_a_checkpoint_on_either_path():
    """Remembered dedup values are state: a column-wise table keeps them in its bytes, and a per-key
    checkpoint's are read when the stream goes on column-wise; the rest of the stream drops the same rows."""
    dropped = 0
    for seed in range(10):
        rnd = random.Random(seed)
        batches = make_batches(rnd, 5)
        cut = rnd.randint(1, len(batches) - 1)
        options = dict(delay_s=5, session_s=30, buckets=3, dedup_key=("v", "w"), dedup_horizon_s=20)
        expected, _ = run(QUERIES["bounded"], batches, columnar=False, **options)
        dropped += sum(step[3]["duplicates_dropped"] for step in expected)
        for first_columnar in (False, True):
            _, first = run(QUERIES["bounded"], batches[:cut], columnar=first_columnar, **options)
            q = cep.compile(QUERIES["bounded"])
            engine = KeyedStream(
                q.plan,
                COLUMNS,
                query_text=q.text,
                session_timeout_us=30_000_000,
                dedup_key=("v", "w"),
                dedup_horizon_us=20_000_000,
            )
            again = LocalStream(engine, delay_ms=5_000, buckets=3, columnar=True)
            saved = {bucket: t if isinstance(t, bytes) else t.encode() for bucket, t in first.tables.items()}
            again.tables, again.watermark_ms, again.max_event_ms = saved, first.watermark_ms, first.max_event_ms
            for index, batch in enumerate(batches[cut:], start=cut):
                out, ids, late = again.run_batch(batch)
                assert (out, ids) == expected[index][:2], (seed, first_columnar, index)
    assert dropped > 0  # the events repeat (v, w) pairs within a key


TIMED = (
    "within_first_hit",
    "within_greedy",
    "timeout_sla",
    "timeout_greedy",
    "timeout_where",
    "absent_tail",
    "absent_silent",
    "absent_history",
    "absent_middle",
    "brute_force",
    "card_testing",
    "next_within",
    "next_absent",
    "all_rows_overlap",
)


@settings(max_examples=max(EXAMPLES // 3, 10), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    name=st.sampled_from(TIMED),
    cut=st.integers(1, 12),
    session_s=st.sampled_from([None, 30]),
)
def test_a_restored_column_wise_stream_goes_on_as_the_per_key_path(seed, name, cut, session_s):
    """A column-wise stream stopped after ``cut`` micro-batches and resumed by a new process (its bucket
    tables as bytes, a newly compiled query) gives, micro-batch by micro-batch, the per-key path's output:
    carried partial matches, their WITHIN deadlines and timers survive the checkpoint."""
    batches = make_batches(random.Random(seed), 5, mixed=name in MIXED)
    cut = min(cut, len(batches) - 1)
    expected, _ = run(QUERIES[name], batches, columnar=False, delay_s=5, session_s=session_s, buckets=3)
    first, stream = run(QUERIES[name], batches[:cut], columnar=True, delay_s=5, session_s=session_s, buckets=3)
    q = cep.compile(QUERIES[name])
    engine = KeyedStream(
        q.plan, COLUMNS, query_text=q.text, session_timeout_us=None if session_s is None else session_s * 1_000_000
    )
    again = LocalStream(engine, delay_ms=5_000, buckets=3, columnar=True)
    saved = {
        bucket: t if isinstance(t, bytes) else t.encode() for bucket, t in stream.tables.items()
    }  # what Spark keeps
    again.tables, again.watermark_ms, again.max_event_ms = saved, stream.watermark_ms, stream.max_event_ms
    got = list(first)
    for batch in batches[cut:]:
        out, ids, late = again.run_batch(batch)
        got.append((out, ids, [(reason, id(row)) for reason, row in late]))
    for index, (want, have) in enumerate(zip(expected, got)):
        assert have[:3] == want[:3], f"micro-batch {index}"


def _clicks(*rows) -> list[dict]:
    return [{"k": k, "ts": T0 + dt.timedelta(seconds=s), "v": v, "w": 0} for k, s, v in rows]


@pytest.mark.parametrize("columnar", [True, False])
def test_the_watermark_alone_completes_an_absence_and_a_timeout(columnar):
    """Key a's last rows come in micro-batch 0; only key b's rows move the watermark after that. a's
    trailing absence completes (ABSENCE) and its SLA times out (TIMEOUT) in the micro-batch whose
    watermark passes the deadline, called by its timer with no row of its own: here by hand, on both paths."""
    absence = query(
        "A !B",
        "A.ts AS a, COUNT(*) AS n, MATCH_STATUS() AS st",
        "A AS A.v > 6, B AS B.v < 2",
        within="WITHIN INTERVAL '10' SECOND",
    )
    sla = query(
        "A B*? C",
        "A.ts AS a, COUNT(*) AS n, MATCH_STATUS() AS st",
        "A AS A.v > 6, C AS C.v < 2",
        within="WITHIN INTERVAL '10' SECOND",
        timeouts=True,
    )
    batches = [
        _clicks(("a", 0, 9), ("a", 3, 5)),
        _clicks(("b", 6, 5)),
        _clicks(("b", 12, 5)),
        _clicks(("b", 16, 5)),
        [],
    ]
    # watermark (delay 2 s) after each batch: 1, 4, 10, 14 s; a's deadline is 0 s + 10 s: W >= 10 s in batch 3
    for text, status in ((absence, "ABSENCE"), (sla, "TIMEOUT")):
        steps, stream = run(text, batches, columnar=columnar, delay_s=2, session_s=None)
        assert [len(out) for out, *_ in steps] == [0, 0, 0, 1, 0], text
        assert steps[3][0] == [("a", T0, 2, status)]
        assert steps[3][3]["timers_fired"] == 1 and steps[3][3]["key_calls"] == 2
        assert stream.path.startswith("column-wise" if columnar else "per key")


def test_spark_bucket_calls_equal_per_key_calls():
    """The function Spark calls for a bucket of keys (``_SparkStep``, called here with the frames and the
    state Spark would give it) returns the same frame on both paths, bad rows included, for ALL ROWS PER
    MATCH and under a ``dedup_key`` too."""
    import pandas as pd

    from cep.spark_bridge.spark.columns import EVENT_US, MARKER, NULL_TIME
    from cep.spark_bridge.spark.streaming import _SparkStep

    class State:  # what _SparkStep reads and writes of pyspark's GroupState
        def __init__(self) -> None:
            self.blob, self.watermark_ms, self.hasTimedOut = None, 0, False

        exists = property(lambda self: self.blob is not None)
        get = property(lambda self: (self.blob,))
        getCurrentWatermarkMs = lambda self: self.watermark_ms  # noqa: E731
        update = lambda self, value: setattr(self, "blob", value[0])  # noqa: E731
        remove = lambda self: setattr(self, "blob", None)  # noqa: E731
        setTimeoutTimestamp = lambda self, ms: None  # noqa: E731

    types = {"k": "VARCHAR", "ts": "TIMESTAMP", "v": "BIGINT", "w": "BIGINT"}
    for seed in range(8):
        batches = make_batches(random.Random(seed), 5)
        names = ("within_first_hit", "running_sum", "timeout_sla", "absent_tail", "next_within", "order_keys")
        runs = [(name, ()) for name in names] + [("all_rows", ()), ("bounded", ("v", "w")), ("all_rows", ("w",))]
        for name, dedup_key in runs:
            q = cep.compile(QUERIES[name])
            frames = []
            for columnar in (True, False):
                step = _SparkStep(
                    q.plan,
                    COLUMNS,
                    ("k",),
                    query_text=q.text,
                    session_timeout_us=30_000_000,
                    max_pending_rows=1_000,
                    output_columns=q.plan.output_types(types),
                    late_rows=True,
                    key_buckets=1,
                    column_wise=columnar,
                    dedup_key=dedup_key,
                    dedup_horizon_us=3_000_000,
                )
                assert (step.route().stream == COLUMN_WISE) == columnar
                state, top, out = State(), None, []
                for batch in batches:
                    state.watermark_ms = 0 if top is None else top // 1000 - 5_000
                    parts = []
                    if batch:
                        frame = pd.DataFrame(batch)
                        frame["ts"] = pd.to_datetime(frame["ts"])
                        frame[EVENT_US] = pd.Series(
                            [NULL_TIME if pd.isna(t) else t.value // 1000 for t in frame["ts"]], dtype="int64"
                        )
                        frame[MARKER] = pd.NaT
                        parts = [frame]
                        known = [t for t in frame[EVENT_US].tolist() if t != NULL_TIME]
                        if known:
                            top = max(known) if top is None else max(top, max(known))
                    for f in step(("bucket",), iter(parts), state):
                        records = f.to_dict("records")
                        for record in records:  # the two stats that differ by design (module docstring)
                            if record["__cep_stats"] is not None:
                                record["__cep_stats"] = [
                                    v
                                    for n, v in zip(STAT_NAMES, record["__cep_stats"])
                                    if n not in ("live_matches", "state_bytes")
                                ]
                        out.append(records)
                frames.append(out)
            assert frames[0] == frames[1], (seed, name, dedup_key)


def test_explain_names_the_streaming_path():
    assert cep.compile(QUERIES["running_sum"]).explain().splitlines()[-1].startswith("  streaming: column-wise")
    vshape = cep.compile(query("A B+ C+", "COUNT(*) AS n", "B AS B.v < PREV(B.v), C AS C.v > PREV(C.v)"))
    assert vshape.explain().splitlines()[-1].startswith("  streaming: column-wise")
    assert "ALL ROWS PER MATCH: a match's rows" in cep.compile(QUERIES["all_rows"]).explain().splitlines()[-1]
    # ALL ROWS that the column-wise rows cannot give exactly stays per key, and says why
    for rows, measures, why in (
        ("ALL ROWS PER MATCH WITH UNMATCHED ROWS", "COUNT(*) AS n", "ALL ROWS PER MATCH WITH UNMATCHED ROWS"),
        ("ALL ROWS PER MATCH", "SUM(B.v) AS s", "ALL ROWS PER MATCH with a measure not computed column-wise"),
    ):
        text = query("A B+", measures, "A AS A.v > 5, B AS B.v < 3", rows=rows)
        route = KeyedStream(cep.compile(text).plan, COLUMNS, query_text=text).route()
        assert route.stream_reasons == (f"not the sequence engine ({why})",)
        assert cep.compile(text).plan.route(COLUMNS).batch != "sequence engine"


def test_the_alert_rules_stream_column_wise_but_a_measure_reading_after_its_match_does_not():
    root = Path(__file__).resolve().parent.parent
    for name in (
        "login_burst",
        "card_testing",
        "order_payment_sla",
        "cart_abandoned",
        "sensor_silent",
        "temperature_rising",
    ):
        q = cep.compile((root / "patterns" / f"{name}.sql").read_text(encoding="utf-8"))
        assert q.explain().splitlines()[-1].startswith("  streaming: column-wise"), name
    after = cep.compile(query("A{2,} B", "FIRST(A.ts) AS f, NEXT(B.v) AS after", "A AS A.v < 5, B AS B.v >= 5"))
    assert KeyedStream(after.plan, COLUMNS, query_text=after.text).route().stream_reasons == (
        "NEXT in a measure (a match waits for the rows after it)",
    )
    ahead = cep.compile(QUERIES["next_within"]).explain().splitlines()[-1]
    assert ahead.startswith("  streaming: column-wise") and ahead.endswith(
        "NEXT in DEFINE: a session's last rows are tested once the rows after them come (or it ends)"
    )


def _fixture_rows() -> list[list[dict]]:
    """The micro-batches tests/streaming_checkpoints/columnar_v1.json was written from (3 keys, floats and
    NULLs in w, tied times, a gap), then the rest of the stream."""
    rows = [
        {
            "k": "abc"[i % 3],
            "ts": T0 + dt.timedelta(seconds=i // 2 + (20 if i > 40 else 0)),
            "v": (i * 7) % 10,
            "w": [0.1, 0.2, None, 2.5, 1.0][i % 5],
        }
        for i in range(60)
    ]
    return [rows[:25], rows[25:45], rows[45:], [], [{"k": "z", "ts": T0 + dt.timedelta(hours=5), "v": 0, "w": 0.0}], []]


def _without_searched(states: dict) -> dict:
    """Each key's state decoded, without the column where carried starts' searches stopped (``SEARCHED``)."""
    from cep.spark_bridge.engine import state_codec as codec
    from cep.spark_bridge.engine.column_table import SEARCHED

    decoded = {key: codec.decode(blob) for key, blob in states.items()}
    for state in decoded.values():
        state["carried"]["cols"].pop(SEARCHED, None)
    return decoded


def test_a_checkpoint_of_the_first_table_format_goes_on():
    """Checkpoints written by the column-wise path's first state format (every column a list of values,
    written by cep before numeric columns were kept as bytes) are read: the stream resumed from them gives
    what the uninterrupted stream gives, and its next state is written in the current format."""
    import base64
    import json

    from cep.spark_bridge.engine import state_codec as codec
    from cep.spark_bridge.engine.column_table import TABLE_VERSION

    fixture = json.loads((Path(__file__).parent / "streaming_checkpoints" / "columnar_v1.json").read_text())
    batches, cut = _fixture_rows(), fixture["cut"]
    for name, saved in fixture["queries"].items():
        engine, whole = _fed(name, batches[:cut], buckets=2, columnar=True, early_release=False)
        resumed = LocalStream(engine, delay_ms=5_000, buckets=2, columnar=True)
        resumed.tables = {int(bucket): base64.b64decode(blob) for bucket, blob in saved["tables"].items()}
        assert {codec.decode(blob)["v"] for blob in resumed.tables.values()} == {1}
        # the same state, read; format 1 predates the searches' progress kept with carried starts (read as none)
        assert _without_searched(resumed.states) == _without_searched(whole.states) and resumed.timers == whole.timers
        resumed.watermark_ms, resumed.max_event_ms = saved["watermark_ms"], saved["max_event_ms"]
        whole = going_on(engine, whole, buckets=2, columnar=True)  # both go on releasing early
        outputs = []
        for batch in batches[cut:]:
            want, got = whole.run_batch(batch), resumed.run_batch(batch)
            assert got[:2] == want[:2] and [(r, row) for r, row in got[2]] == [(r, row) for r, row in want[2]], name
            outputs += got[0]
        assert outputs, name  # the resumed part emits matches
        assert all(codec.decode(blob)["v"] == TABLE_VERSION for blob in resumed.tables.values())
    broken = codec.decode(base64.b64decode(fixture["queries"]["card_testing"]["tables"]["1"]))
    broken["v"] = 99
    with pytest.raises(CepRuntimeError, match="version 99") as caught:
        ColumnarTable.decode(codec.encode(broken), ("v", "w"), 2)
    assert caught.value.code == "E0481"
