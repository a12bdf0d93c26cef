"""Streaming: keyed matcher state across micro-batches, event time, watermarks, sessions, late rows.

Two layers:

* Without Spark (fast, many hypothesis examples): ``cep.spark_bridge.engine.local.LocalStream`` applies Spark's
  micro-batch rules to the same per-key engine the Spark bridge runs. Random events are split into
  random micro-batches, shuffled inside the watermark delay, some sent late on purpose; the output
  must equal ``q.run`` over the rows that are not late, session by session.
* On Spark (``@pytest.mark.spark``, one shared session): file-source streams with one file per
  micro-batch (``maxFilesPerTrigger=1``, ``trigger(availableNow=True)``: no sleeps), checking parity,
  timers on idle keys, session timeouts, late rows that Spark itself would have dropped, metrics,
  processing time and two streams unioned. A driver SIGKILLed mid-stream and its restart are checked where a
  driver is killed anyway (a Spark driver JVM each): the V-shape on Spark's state store at every durable step
  of a micro-batch in test_crash_points.py, kills at arbitrary moments with input arriving while the stream is
  down in kafka_tests/test_kafka_stream.py and test_delta_streams.py.
  ``CEP_STREAM_EXAMPLES=N`` runs the in-process parity property with N examples (default 60).
  The fixed parity cases' streams run side by side in the shared session (``parity_streams``).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import random
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cep
from cep.matcher.pike.vm import PartitionMatcher
from cep.spark_bridge.engine import state_codec
from cep.spark_bridge.engine.durations import parse_duration
from cep.spark_bridge.engine.keyed import (
    LATE_BEHIND_FORCED,
    LATE_BEHIND_WATERMARK,
    LATE_NULL_TIME,
    KeyedStream,
    spark_timeout_ms,
)
from cep.spark_bridge.engine.local import LocalStream
from cep.spark_bridge.engine.match_ids import statement_text
from cep.spark_bridge.engine.ordering import canonical_order
from tests.stream_files import write_batch

REPO = Path(__file__).resolve().parent.parent
T0 = dt.datetime(2024, 1, 1)
SENTINEL = "ZZZ"
COLUMNS = ("symbol", "ts", "price")

QUERIES = {
    "vshape": (REPO / "patterns" / "v_shape.sql").read_text(encoding="utf-8"),
    "all_rows": """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts
        MEASURES CLASSIFIER() AS cls, MATCH_NUMBER() AS mno, RUNNING COUNT(*) AS k
        ALL ROWS PER MATCH AFTER MATCH SKIP PAST LAST ROW
        PATTERN (UP+ DOWN) DEFINE UP AS price > PREV(price), DOWN AS price < PREV(price))""",
    "unmatched": """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts
        MEASURES CLASSIFIER() AS cls, MATCH_NUMBER() AS mno
        ALL ROWS PER MATCH WITH UNMATCHED ROWS AFTER MATCH SKIP TO NEXT ROW
        PATTERN (A B?) DEFINE A AS price > 100, B AS price < 100)""",
    "where": """SELECT symbol, first_ts, n FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts
        MEASURES FIRST(A.ts) AS first_ts, COUNT(*) AS n
        ONE ROW PER MATCH PATTERN (A+) DEFINE A AS price >= 100) WHERE n > 1""",
    "next": """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts
        MEASURES FIRST(A.ts) AS a_ts, LAST(B.price) AS b_price
        ONE ROW PER MATCH PATTERN (A B) DEFINE A AS A.price < NEXT(A.price), B AS B.price > 100)""",
    "no_partition": """SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts
        MEASURES FIRST(A.ts) AS a_ts, COUNT(*) AS n, LAST(A.symbol) AS sym
        ONE ROW PER MATCH PATTERN (A{2,} B) DEFINE A AS price < 100, B AS price >= 100)""",
    "within": """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts
        MEASURES FIRST(A.ts) AS a_ts, LAST(C.ts) AS c_ts
        ONE ROW PER MATCH PATTERN (A B* C) WITHIN INTERVAL '40' SECOND
        DEFINE A AS price < 95, C AS price > 105)""",
    "absence": """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts
        MEASURES A.ts AS a_ts, MATCH_STATUS() AS status
        PATTERN (A !B) WITHIN INTERVAL '30' SECOND DEFINE A AS price > 106, B AS price < 95)""",
    "timeouts": """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts
        MEASURES FIRST(A.ts) AS a_ts, COUNT(B.price) AS bs, MATCH_STATUS() AS status, MATCH_NUMBER() AS mno
        ONE ROW PER MATCH SHOW TIMEOUT MATCHES
        PATTERN (A B+ C) WITHIN INTERVAL '20' SECOND
        DEFINE A AS price < 97, B AS price BETWEEN 97 AND 103, C AS price > 103)""",
    "trailing": """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts
        MEASURES COUNT(*) AS n, LAST(A.price) AS p
        ONE ROW PER MATCH PATTERN (A+ $) DEFINE A AS price > 95)""",
    # Overlapping runs of F that time out, cut by session gaps.
    "fail_runs": """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts
        MEASURES FIRST(F.ts) AS f_ts, COUNT(F.*) AS fails, MATCH_STATUS() AS status, MATCH_NUMBER() AS mno
        ONE ROW PER MATCH SHOW TIMEOUT MATCHES
        PATTERN (F{2,} O) WITHIN INTERVAL '20' SECOND
        DEFINE F AS price < 102, O AS price > 106)""",
}


# ------------------------------------------------------------------------------------------ scenarios


def make_events(
    rnd: random.Random, symbols: int, per_symbol: int, *, spacing: int = 7, long_gaps: float = 0.0
) -> list[dict]:
    """Events with whole-second times (ties on purpose) and few distinct prices (ties on purpose);
    with ``long_gaps``, that share of the gaps is 20-120 s (past WITHIN limits and session timeouts)."""
    events = []
    for s in range(symbols):
        t = rnd.randint(0, 20)
        for _ in range(per_symbol):
            t += rnd.randint(20, 120) if rnd.random() < long_gaps else rnd.randint(0, spacing)
            events.append(
                {"symbol": "ABCDEFG"[s], "ts": T0 + dt.timedelta(seconds=t), "price": float(rnd.randint(90, 110))}
            )
    return events


def _ms(value: dt.datetime) -> int:
    return state_codec.datetime_to_micros(value) // 1000


def make_batches(
    events: list[dict], rnd: random.Random, delay_s: int, n_batches: int, *, defer: float = 0.35
) -> list[list[dict]]:
    """Split time-ordered ``events`` into micro-batches; defer some rows to later batches as long as
    they stay above the watermark there (so none is late), and shuffle each batch."""
    ordered = sorted(events, key=lambda e: e["ts"])
    cuts = sorted(rnd.sample(range(1, len(ordered)), min(n_batches - 1, max(0, len(ordered) - 1)))) if ordered else []
    chunks = [ordered[a:b] for a, b in zip([0] + cuts, cuts + [len(ordered)])]
    batches, carried = [], []
    watermark_ms, max_ms = 0, None
    for index, chunk in enumerate(chunks):
        candidates = carried + chunk
        last = index == len(chunks) - 1
        deferred = [] if last else [e for e in candidates if rnd.random() < defer]
        batch = [e for e in candidates if not any(e is d for d in deferred)]
        while True:
            top = max([_ms(e["ts"]) for e in batch] + ([max_ms] if max_ms is not None else []), default=None)
            next_watermark = max(watermark_ms, top - delay_s * 1000) if top is not None else watermark_ms
            # Rows that would be at or below the next watermark (deferred ones, or later chunks' rows
            # tied with this batch's latest) must come in this batch, or they would be late.
            back = [e for e in deferred if _ms(e["ts"]) <= next_watermark]
            for later in chunks[index + 1 :]:
                back += [e for e in later if _ms(e["ts"]) <= next_watermark]
                later[:] = [e for e in later if _ms(e["ts"]) > next_watermark]
            if not back:
                break
            batch += back
            deferred = [e for e in deferred if not any(e is b for b in back)]
        carried = deferred
        max_ms, watermark_ms = top, next_watermark
        rnd.shuffle(batch)
        if batch:
            batches.append(batch)
    return batches


def watermarks_ms(batches: list[list[dict]], delay_s: int) -> list[int]:
    """The watermark Spark uses in each batch (batch 0: 0)."""
    out, watermark, top = [], 0, None
    for batch in batches:
        out.append(watermark)
        times = [_ms(e["ts"]) for e in batch if e["ts"] is not None]
        if times:
            top = max(times + ([top] if top is not None else []))
            watermark = max(watermark, top - delay_s * 1000)
    return out


def inject_late(batches: list[list[dict]], rnd: random.Random, delay_s: int, count: int) -> list[dict]:
    """Add ``count`` rows at or below their batch's watermark; returns them."""
    marks = watermarks_ms(batches, delay_s)
    eligible = [i for i, w in enumerate(marks) if w > _ms(T0)]
    late = []
    for _ in range(count if eligible else 0):
        index = rnd.choice(eligible)
        behind = rnd.choice([0, 1, delay_s, 10 * delay_s])  # exactly at the watermark, or behind it
        row = {
            "symbol": rnd.choice("AB"),
            "ts": T0 + dt.timedelta(milliseconds=marks[index] - _ms(T0) - behind * 1000),
            "price": 100.0,
        }
        if row["ts"] < T0:
            row["ts"] = T0
        batches[index].append(row)
        late.append(row)
    return late


def sentinel(events: list[dict], session_s: int, delay_s: int) -> dict:
    """A row for its own key far enough ahead that the watermark passes every other row and session.

    On Spark it rides in the stream's last micro-batch, not one of its own: the watermark it moves takes effect in
    the micro-batch after it either way (the empty one availableNow runs at the end), and the rows beside it are
    judged against the watermark before it. That is one micro-batch less a stream (5, not 6, in the parity test)."""
    last = max((e["ts"] for e in events), default=T0)
    return {"symbol": SENTINEL, "ts": last + dt.timedelta(seconds=session_s + delay_s + 3600), "price": None}


def sessions(events: list[dict], query, session_s: int | None) -> list[list[dict]]:
    """The rows of each (partition, session): consecutive rows more than ``session_s`` apart split."""
    partition = [c for c in query.plan.partition_columns]
    groups: dict[tuple, list[dict]] = {}
    for event in events:
        groups.setdefault(tuple(event[c] for c in partition), []).append(event)
    out = []
    for rows in groups.values():
        rows = sorted(rows, key=lambda e: e["ts"])
        current = [rows[0]]
        for row in rows[1:]:
            if session_s is not None and (row["ts"] - current[-1]["ts"]).total_seconds() > session_s:
                out.append(current)
                current = []
            current.append(row)
        out.append(current)
    return out


def expected_output(
    query, events: list[dict], session_s: int | None, final_watermark_ms: int | None = None
) -> list[tuple]:
    """What a batch replay gives, session by session, ties ordered as streaming orders them.

    A session ends at its last row + the session timeout: the replay tells the matcher that time
    (``advance``, for WITHIN), then ends its input (``finish``); for a query without WITHIN that is
    exactly ``q.run`` over the session's rows. Without a session timeout a session never ends: the
    replay only tells the matcher the final watermark.
    """
    plan = query.plan
    machine, outer = plan.machine(COLUMNS), plan.outer(COLUMNS)
    out = []
    for rows in sessions(events, query, session_s):
        rows = canonical_order(rows, plan, COLUMNS)
        columns = {c: [r[c] for r in rows] for c in COLUMNS}
        got = []
        for key, indices in plan.partitions(machine, columns):
            matcher = PartitionMatcher(machine, key)
            got += matcher.feed({c: [columns[c][i] for i in indices] for c in machine.columns})
            if session_s is not None:
                got += matcher.advance(max(r["ts"] for r in rows) + dt.timedelta(seconds=session_s))
                got += matcher.finish()
            elif final_watermark_ms is not None:
                got += matcher.advance(state_codec.micros_to_datetime(final_watermark_ms * 1000))
        got = [tuple(r) for r in outer.apply(got, order_and_limit=False)]
        if session_s is not None and machine.within is None:
            assert got == [tuple(r.values()) for r in query.run(rows)]  # the replay is q.run
        out += got
    return out


def normalize(rows) -> list[tuple]:
    def value(v):
        if v is None:
            return None
        if hasattr(v, "to_pydatetime"):
            return v.to_pydatetime()
        if hasattr(v, "item"):
            v = v.item()
        if isinstance(v, float) and math.isnan(v):
            return None
        return v

    return sorted((tuple(value(v) for v in row) for row in rows), key=repr)


def without_sentinel(rows) -> list[tuple]:
    return [r for r in rows if SENTINEL not in r]


def run_local(query, batches, *, delay_s, session_s, max_pending_rows=None, buckets=0):
    kwargs = {} if max_pending_rows is None else {"max_pending_rows": max_pending_rows}
    engine = KeyedStream(
        query.plan,
        COLUMNS,
        query_text=statement_text(query),
        session_timeout_us=None if session_s is None else session_s * 1_000_000,
        **kwargs,
    )
    stream = LocalStream(engine, delay_ms=delay_s * 1000, buckets=buckets)
    out, ids, late = [], [], []
    for batch in batches + [[]]:
        batch_out, batch_ids, batch_late = stream.run_batch(batch)
        out += batch_out
        ids += batch_ids
        late += batch_late
    return out, ids, late, stream


# ----------------------------------------------------------------------------- the engine, no Spark


@settings(
    max_examples=int(os.environ.get("CEP_STREAM_EXAMPLES", "60")),  # make test-stream-properties: 180
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    seed=st.integers(0, 2**32 - 1),
    name=st.sampled_from(sorted(QUERIES)),
    session_s=st.sampled_from([None, 15, 40, 100_000]),
    delay_s=st.sampled_from([0, 5, 30]),
    n_batches=st.integers(1, 8),
    n_late=st.integers(0, 3),
)
def test_local_stream_equals_batch_replay(seed, name, session_s, delay_s, n_batches, n_late):
    rnd = random.Random(seed)
    query = cep.compile(QUERIES[name])
    events = make_events(
        rnd, symbols=rnd.randint(1, 3), per_symbol=rnd.randint(1, 25), long_gaps=rnd.choice([0.0, 0.1, 0.3])
    )
    batches = make_batches(events, rnd, delay_s, n_batches)
    late = inject_late(batches, rnd, delay_s, n_late)
    batches.append([sentinel(events, session_s or 0, delay_s)])
    out, ids, got_late, stream = run_local(query, batches, delay_s=delay_s, session_s=session_s)

    assert sorted(id(r) for _, r in got_late) == sorted(id(r) for r in late)
    assert all(reason == LATE_BEHIND_WATERMARK for reason, _ in got_late)
    finals = [(row, match) for row, match in zip(out, ids) if SENTINEL not in row]
    expected = expected_output(query, events, session_s, stream.watermark_ms)
    assert normalize(r for r, _ in finals) == normalize(expected)
    if query.plan.statement.match.rows_per_match.mode == "ONE":
        assert len({m for _, m in finals}) == len(finals)  # one id per match

    # The same events in another split, with keys kept in buckets of states saved as bytes between
    # micro-batches (as the Spark bridge keeps them), give the same rows with the same ids.
    rnd2 = random.Random(seed + 1)
    batches2 = make_batches(events, rnd2, delay_s, max(1, n_batches - 1)) + [
        [sentinel(events, session_s or 0, delay_s)]
    ]
    out2, ids2, _, _ = run_local(query, batches2, delay_s=delay_s, session_s=session_s, buckets=rnd2.choice([1, 2, 5]))
    assert sorted(zip(map(repr, out), ids)) == sorted(zip(map(repr, out2), ids2))


def test_ties_are_broken_by_the_row_values_whatever_the_arrival_order():
    query = cep.compile(QUERIES["no_partition"])
    t = T0 + dt.timedelta(seconds=5)
    rows = [{"symbol": s, "ts": t, "price": p} for s, p in [("B", 99.0), ("A", 98.0), ("C", 101.0), ("A", 97.0)]]
    rows.append({"symbol": "A", "ts": t + dt.timedelta(seconds=1), "price": 100.0})
    results = set()
    for seed in range(6):
        shuffled = rows[:]
        random.Random(seed).shuffle(shuffled)
        out, _, late, _ = run_local(query, [shuffled[:2], shuffled[2:], [sentinel(rows, 1, 5)]], delay_s=5, session_s=1)
        assert late == []
        results.add(tuple(normalize(without_sentinel(out))))
    assert len(results) == 1
    assert list(results)[0] == tuple(normalize(expected_output(query, rows, 1)))


def test_pending_cap_releases_early_and_counts():
    query = cep.compile(QUERIES["vshape"])
    rnd = random.Random(7)
    events = make_events(rnd, symbols=1, per_symbol=40, spacing=2)
    batches = make_batches(events, rnd, 10_000, 3, defer=0.0)  # a huge delay: nothing would be released
    late_row = {"symbol": "A", "ts": events[5]["ts"], "price": 99.0}
    batches.append([late_row])
    out, _, late, stream = run_local(query, batches, delay_s=10_000, session_s=None, max_pending_rows=8)
    assert stream.stats["cap_hits"] > 0
    assert stream.stats["pending_rows"] <= 8 * len(batches)  # summed over the calls, each at most the cap
    assert [(reason, row is late_row) for reason, row in late] == [(LATE_BEHIND_FORCED, True)]
    # Every row was released in order (the cap moves the key's clock), so the matches are the batch ones
    # except the trailing ones that wait for the next row.
    assert set(normalize(out)) <= set(normalize(expected_output(query, events, None)))


def test_idle_key_is_released_by_its_timer_and_its_session_closed():
    query = cep.compile(QUERIES["trailing"])
    rows_b = [{"symbol": "B", "ts": T0 + dt.timedelta(seconds=s), "price": 100.0} for s in (1, 2, 3)]
    rows_a = [{"symbol": "A", "ts": T0 + dt.timedelta(seconds=s), "price": 90.0} for s in (1, 200)]
    engine = KeyedStream(query.plan, COLUMNS, query_text=query.text, session_timeout_us=60_000_000)
    stream = LocalStream(engine, delay_ms=5_000)
    assert stream.run_batch(rows_b + rows_a[:1])[0] == []
    assert set(stream.timers) == {("A",), ("B",)}
    out, _, _ = stream.run_batch(rows_a[1:])  # the watermark is still 0 here
    assert out == []
    out, _, _ = stream.run_batch([])  # watermark 195 s: B's rows are released, its session (3 s + 60 s) closes
    assert out == [("B", 3, 100.0)]
    assert ("B",) not in stream.states and ("B",) not in stream.timers
    assert stream.stats["timers_fired"] >= 1 and stream.stats["sessions_closed"] >= 1


def test_null_event_time_is_late():
    query = cep.compile(QUERIES["vshape"])
    engine = KeyedStream(query.plan, COLUMNS, query_text=query.text)
    stream = LocalStream(engine, delay_ms=0)
    row = {"symbol": "A", "ts": None, "price": 1.0}
    _, _, late = stream.run_batch([row])
    assert late == [(LATE_NULL_TIME, row)]
    assert stream.states == {}


def test_streaming_rejects_what_it_cannot_do():
    with pytest.raises(cep.CepSemanticError, match="first ORDER BY key"):
        KeyedStream(
            cep.compile(QUERIES["vshape"].replace("ORDER BY ts", "ORDER BY ts DESC")).plan, COLUMNS, query_text=""
        )
    with pytest.raises(ValueError):
        KeyedStream(cep.compile(QUERIES["vshape"]).plan, COLUMNS, query_text="", session_timeout_us=0)


PROCTIME_QUERY = """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY PROCTIME()
    MEASURES FIRST(A.price) AS a, LAST(B.price) AS b
    PATTERN (A B) DEFINE B AS B.price > A.price)"""


def test_processing_time_matches_in_arrival_order_without_waiting():
    query = cep.compile(PROCTIME_QUERY)
    stream = LocalStream(KeyedStream(query.plan, COLUMNS, query_text=query.text), delay_ms=0)
    out, ids, late = stream.run_batch([{"symbol": "A", "ts": None, "price": p} for p in (3.0, 1.0, 2.0)])
    assert (out, late) == ([("A", 1.0, 2.0)], [])  # 3 then 1 is no rise; 1 then 2 is
    assert stream.run_batch([{"symbol": "A", "ts": T0, "price": 5.0}])[0] == []  # 5 starts a new attempt
    assert stream.stats["released_rows"] == 4 and stream.stats["pending_rows"] == 0
    with pytest.raises(cep.CepSemanticError, match="first ORDER BY key"):
        KeyedStream(
            cep.compile(QUERIES["vshape"].replace("ORDER BY ts", "ORDER BY price DESC, ts")).plan,
            COLUMNS,
            query_text="",
        )


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers(-(2**70), 2**70)
        | st.floats(allow_nan=False)
        | st.text(max_size=5)
        | st.binary(max_size=5)
        | st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30))
        | st.dates()
        | st.decimals(allow_nan=False, allow_infinity=False)
        | st.timedeltas(),
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(st.text(max_size=3), children, max_size=3)
            | st.tuples(children, children)
        ),
        max_leaves=12,
    )
)
def test_state_codec_round_trips(value):
    assert state_codec.decode(state_codec.encode(value)) == value


def test_state_codec_formats():
    import numpy as np
    import pandas as pd

    big = {"cols": {"x": list(range(3000))}}
    blob = state_codec.encode(big)
    assert blob[:4] == b"CEPS" and blob[4] == state_codec.VERSION and blob[5] == 1  # compressed
    assert state_codec.decode(blob) == big
    assert state_codec.decode(
        state_codec.encode([np.int64(3), np.float64(0.5), np.array([1, 2]), pd.Timestamp("2024-01-02 03:04:05.000006")])
    ) == [3, 0.5, [1, 2], dt.datetime(2024, 1, 2, 3, 4, 5, 6)]
    assert state_codec.canonical(pd.Timestamp("2024-01-02")) == state_codec.canonical(dt.datetime(2024, 1, 2))
    assert state_codec.canonical(Decimal("1.10")) != state_codec.canonical(1.1)
    with pytest.raises(cep.CepRuntimeError, match="version"):
        state_codec.decode(b"CEPS\x09\x00")
    with pytest.raises(cep.CepRuntimeError, match="CEPS"):
        state_codec.decode(b"\x80\x04junk")


def test_durations_and_timer_arithmetic():
    assert parse_duration("30 seconds") == 30_000_000
    assert parse_duration("30s") == parse_duration("INTERVAL 30 SECONDS") == 30_000_000
    assert parse_duration("1 hour 30 minutes") == 5_400_000_000
    assert parse_duration("500ms") == 500_000
    assert parse_duration(dt.timedelta(minutes=2)) == 120_000_000
    for bad in ("", "soon", "3 fortnights", "5 seconds later"):
        with pytest.raises(ValueError):
            parse_duration(bad)
    # Spark fires when watermark_ms > timeout; the engine wants "watermark_us >= timer_us".
    for timer_us in (3_000, 3_001, 3_999, 4_000, 123_456_789):
        timeout = spark_timeout_ms(timer_us, 0)
        for watermark_ms in range(timeout - 2, timeout + 3):
            assert (watermark_ms > timeout) == (watermark_ms * 1000 >= timer_us)


# ------------------------------------------------------------------------------------------ on Spark


def _spark_schema():
    from pyspark.sql import types as T

    return T.StructType(
        [
            T.StructField("symbol", T.StringType()),
            T.StructField("ts", T.TimestampType()),
            T.StructField("price", T.DoubleType()),
        ]
    )


def write_batches(directory: Path, batches: list[list[dict]], *, first: int = 0) -> None:
    """One JSON file per micro-batch; increasing modification times fix the order the source reads them."""
    for index, batch in enumerate(batches, start=first):
        write_batch(directory, index, batch)


@pytest.fixture()
def few_partitions(spark):
    """Stateful queries fix their shuffle partitions at first start; 1-2 keep a micro-batch cheap here."""
    saved = spark.conf.get("spark.sql.shuffle.partitions")

    def use(n: int) -> None:
        spark.conf.set("spark.sql.shuffle.partitions", str(n))

    use(1)
    yield use
    spark.conf.set("spark.sql.shuffle.partitions", saved)


def start_spark(spark, tmp: Path, name: str, query, batches, **options):
    """Start streaming ``batches`` through ``query`` into the memory table ``name``; returns the running query."""
    write_batches(tmp / "in", batches)
    df = spark.readStream.schema(_spark_schema()).option("maxFilesPerTrigger", 1).json(str(tmp / "in"))
    out = query.on_spark(df, **options)
    return (
        out.writeStream.format("memory")
        .queryName(name)
        .outputMode("append")
        .option("checkpointLocation", str(tmp / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )


def finished(spark, stream, name: str):
    """The query ``stream`` run to its end: (its memory table ``name`` as pandas, its progress list)."""
    stream.awaitTermination()
    result = spark.sql(f"SELECT * FROM {name}").toPandas()
    return result, stream.recentProgress


def run_spark(spark, tmp: Path, name: str, query, batches, **options):
    """Stream ``batches`` through ``query`` to a memory table; returns (pandas result, progress list)."""
    return finished(spark, start_spark(spark, tmp, name, query, batches, **options), name)


def metric_sums(progress) -> Counter:
    total: Counter = Counter()
    for p in progress:
        row = (p.get("observedMetrics") or {}).get("cep")
        if row is not None:
            total.update({k: v for k, v in row.asDict().items() if v})
    return total


def matches_of(result, query) -> list[tuple]:
    names = list(query.output_columns(COLUMNS))
    frame = result[result["cep_late_reason"].isna()] if "cep_late_reason" in result else result
    return normalize(frame[names].itertuples(index=False, name=None))


PARITY_CASES = [  # (seed, query, session timeout in seconds)
    (11, "vshape", None),
    (12, "all_rows", 100_000),
    (13, "no_partition", 25),
    (14, "fail_runs", 40),
    (15, "within", 40),
    (16, "timeouts", 40),
    (17, "absence", None),
    (18, "all_rows", 100_000),
]
# Seed 12's stream runs alone: its Arrow batch size is a setting of the session, not of one query.
ALONE_SEEDS = (12,)


def parity_case(seed: int, name: str, session_s: int | None):
    """A parity case's scenario: (query, events, micro-batches, late rows, watermark delay, on_spark options)."""
    rnd = random.Random(seed)
    query = cep.compile(QUERIES[name])
    events = make_events(rnd, symbols=3, per_symbol=30, long_gaps=0.2 if name == "fail_runs" else 0.0)
    delay_s = 20
    batches = make_batches(events, rnd, delay_s, 4)
    late = inject_late(batches, rnd, delay_s, 2)
    batches[-1].append(sentinel(events, session_s or 0, delay_s))  # in the last batch (see sentinel)
    options = {
        "watermark": f"{delay_s} seconds",
        "session_timeout": None if session_s is None else f"{session_s} seconds",
    }
    if seed == 12:
        options["key_buckets"] = 0  # one Python call per key, the unbucketed path
    if seed in (11, 15, 16, 17, 18):
        options["key_buckets"] = 1  # every key in one bucket: its keys share each call (15-18: column-wise)
    return query, events, batches, late, delay_s, options


@pytest.fixture(scope="module")
def parity_streams(spark, tmp_path_factory):
    """The parity cases' streams (all but ``ALONE_SEEDS``), started together and awaited together: one stream's
    micro-batch plans on the driver, then runs one task at a time (one shuffle partition), so alone it leaves
    one of the session's two cores idle; side by side their planning and tasks interleave. Each is its own
    query, input, checkpoint and memory table; each test asserts on its own. (seed -> (result, progress))"""
    saved = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "1")  # as few_partitions: fixed at each query's first start
    try:
        running = {}
        for seed, name, session_s in PARITY_CASES:
            if seed not in ALONE_SEEDS:
                query, _, batches, _, _, options = parity_case(seed, name, session_s)
                tmp = tmp_path_factory.mktemp(f"parity-{seed}")
                running[seed] = start_spark(spark, tmp, f"parity_{seed}", query, batches, **options)
        return {seed: finished(spark, stream, f"parity_{seed}") for seed, stream in running.items()}
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", saved)


@pytest.mark.spark
@pytest.mark.parametrize("seed,name,session_s", PARITY_CASES)
def test_spark_stream_equals_batch_replay(spark, request, tmp_path, seed, name, session_s):
    query, events, batches, late, delay_s, options = parity_case(seed, name, session_s)
    if seed in ALONE_SEEDS:
        request.getfixturevalue("few_partitions")
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "7")  # several Arrow chunks per key
        try:
            result, progress = run_spark(spark, tmp_path, f"parity_{seed}", query, batches, **options)
        finally:
            spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    else:
        result, progress = request.getfixturevalue("parity_streams")[seed]
    got = without_sentinel(matches_of(result, query))
    assert got == normalize(expected_output(query, events, session_s, watermarks_ms(batches + [[]], delay_s)[-1]))
    late_out = result[result["cep_late_reason"].notna()]
    assert len(late_out) == len(late) and set(late_out["cep_late_reason"]) <= {LATE_BEHIND_WATERMARK}
    # The same rows with the same ids as the in-process rules give.
    local, ids, _, _ = run_local(query, batches, delay_s=delay_s, session_s=session_s)
    matched = result[result["cep_late_reason"].isna()]
    assert sorted(matched["match_id"]) == sorted(ids)
    sums = metric_sums(progress)
    assert sums["late_rows"] == len(late)
    if options.get("key_buckets") == 0:
        assert sums["python_calls"] == sums["key_calls"]
    elif options.get("key_buckets") == 1:  # one call per micro-batch for all three keys
        assert sums["python_calls"] < sums["key_calls"]


@pytest.mark.spark
@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    seed=st.integers(0, 2**32 - 1),
    name=st.sampled_from(["vshape", "unmatched", "where", "next", "timeouts", "fail_runs"]),
)
def test_spark_stream_equals_batch_replay_hypothesis(spark, few_partitions, tmp_path_factory, seed, name):
    """Random events with session gaps and partial matches that overlap and time out, in random
    micro-batches through Spark, give the batch replay's rows."""
    rnd = random.Random(seed)
    query = cep.compile(QUERIES[name])
    events = make_events(rnd, symbols=2, per_symbol=rnd.randint(5, 25), long_gaps=rnd.choice([0.0, 0.15, 0.3]))
    delay_s = rnd.choice([5, 30])
    batches = make_batches(events, rnd, delay_s, rnd.randint(2, 4))
    batches[-1].append(sentinel(events, 60, delay_s))  # in the last batch (see sentinel)
    tmp = tmp_path_factory.mktemp("hyp")
    result, _ = run_spark(
        spark, tmp, f"hyp_{tmp.name}", query, batches, watermark=f"{delay_s} seconds", session_timeout="60 seconds"
    )
    assert without_sentinel(matches_of(result, query)) == normalize(expected_output(query, events, 60))


@pytest.mark.spark
def test_spark_timers_sessions_late_rows_and_metrics(spark, few_partitions, tmp_path):
    """B's rows wait (its own bound, 3 s - 10 s, is behind them) until the watermark passes them, and its
    session timeout emits the trailing match. D gets one row and never again: Spark calls it by its timers,
    to release the row, then to end its session. Rows far behind the watermark, which Spark would drop
    before any function, and a row with no event time come out as late rows."""
    query = cep.compile(QUERIES["trailing"])
    at = lambda s: T0 + dt.timedelta(seconds=s)  # noqa: E731
    batches = [
        [{"symbol": "B", "ts": at(s), "price": 100.0} for s in (3, 1, 2)]
        + [{"symbol": "A", "ts": at(1), "price": 90.0}],
        [
            {"symbol": "A", "ts": at(100), "price": 90.0},  # watermark -> 90 s for the next batch
            {"symbol": "D", "ts": at(50), "price": 90.0},  # above D's bound (40 s): waits for the watermark
        ],
        [
            {"symbol": "A", "ts": at(300), "price": 90.0},
            {"symbol": "A", "ts": at(5), "price": 99.0},  # late: 5 s <= 90 s
            {"symbol": "B", "ts": at(90), "price": 99.0},
            {"symbol": "C", "ts": None, "price": 1.0},
        ],  # at the watermark; no time
        [
            {"symbol": "A", "ts": at(400), "price": 90.0},
            {"symbol": "B", "ts": at(2), "price": 99.0},
        ],  # 2 s: Spark would drop it
    ]
    result, progress = run_spark(
        spark, tmp_path, "timers", query, batches, watermark="10 seconds", session_timeout="60 seconds"
    )
    assert matches_of(result, query) == [("B", 3, 100.0)]
    late = result[result["cep_late_reason"].notna()]
    reasons = Counter(late["cep_late_reason"])
    assert reasons == {LATE_BEHIND_WATERMARK: 3, LATE_NULL_TIME: 1}
    payloads = sorted(json.loads(p)["ts"] or "" for p in late["cep_late_row"])
    assert payloads == ["", "2024-01-01T00:00:02", "2024-01-01T00:00:05", "2024-01-01T00:01:30"]
    assert len(result["match_id"].dropna()) == 1
    sums = metric_sums(progress)
    assert sums["events_in"] == 12 and sums["late_rows"] == 3 and sums["matches_out"] == 1
    assert sums["bad_rows"] == sums["null_event_time"] == 1  # no event time: bad, not late
    assert sums["timers_fired"] >= 2 and sums["sessions_closed"] >= 2 and sums["released_rows"] == 7


@pytest.mark.spark
def test_spark_late_count_only_declared_watermark_and_refusals(spark, few_partitions, tmp_path):
    query = cep.compile(QUERIES["vshape"])
    rnd = random.Random(5)
    events = make_events(rnd, symbols=2, per_symbol=20)
    batches = make_batches(events, rnd, 15, 3)
    late = inject_late(batches, rnd, 15, 3)
    batches[-1].append(sentinel(events, 30, 15))  # in the last batch (see sentinel)
    write_batches(tmp_path / "in", batches)
    df = spark.readStream.schema(_spark_schema()).option("maxFilesPerTrigger", 1).json(str(tmp_path / "in"))
    df = df.withWatermark("ts", "15 seconds")
    with pytest.raises(cep.CepSemanticError, match="differs"):
        query.on_spark(df, watermark="1 minute")
    with pytest.raises(cep.CepSemanticError, match="declares its watermark"):
        query.on_spark(df.withColumn("t2", df.ts).withWatermark("t2", "1 second"))
    with pytest.raises(cep.CepSemanticError, match="LIMIT"):
        cep.compile(QUERIES["vshape"] + " LIMIT 3").on_spark(df)
    with pytest.raises(cep.CepSemanticError, match="not timestamp"):
        query.on_spark(df.withColumn("ts", df.ts.cast("string")))
    with pytest.raises(cep.CepSemanticError, match="clash"):
        cep.compile(QUERIES["where"].replace("n FROM", "n AS match_id FROM")).on_spark(df)
    with pytest.raises(ValueError, match="late"):
        query.on_spark(df, late="drop")
    out = query.on_spark(df, session_timeout="30 seconds", late="count")
    assert out.columns == list(query.output_columns(COLUMNS)) + ["match_id"]
    stream = (
        out.writeStream.format("memory")
        .queryName("late_count")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    stream.awaitTermination()
    result = spark.sql("SELECT * FROM late_count").toPandas()
    assert without_sentinel(
        normalize(result[list(query.output_columns(COLUMNS))].itertuples(index=False, name=None))
    ) == normalize(expected_output(query, events, 30))
    assert metric_sums(stream.recentProgress)["late_rows"] == len(late)


@pytest.mark.spark
def test_spark_processing_time(spark, few_partitions, tmp_path):
    query = cep.compile(PROCTIME_QUERY)
    batches = [
        [{"symbol": "A", "ts": T0, "price": 1.0}, {"symbol": "B", "ts": T0, "price": 5.0}],
        [{"symbol": "A", "ts": None, "price": 2.0}, {"symbol": "B", "ts": T0, "price": 4.0}],
    ]
    with pytest.raises(cep.CepSemanticError, match="PROCTIME"):
        run_spark(spark, tmp_path, "proctime_bad", query, batches, session_timeout="1 minute")
    result, progress = run_spark(spark, tmp_path, "proctime", query, batches)
    assert matches_of(result, query) == [("A", 1.0, 2.0)]  # B fell: no match; nothing waited for a watermark
    assert metric_sums(progress)["released_rows"] == 4


@pytest.mark.spark
def test_spark_two_streams_unioned(spark, few_partitions, tmp_path):
    """The stream-stream recipe of docs/streaming.md: union with a kind column, then match."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    text = """SELECT * FROM events MATCH_RECOGNIZE (PARTITION BY user ORDER BY ts
        MEASURES COUNT(C.ts) AS clicks, LAST(O.amount) AS amount
        PATTERN (C+ O) DEFINE C AS kind = 'click', O AS kind = 'order' AND amount > 100)"""
    query = cep.compile(text)
    rnd = random.Random(3)
    clicks, orders = [], []
    for user in ("u1", "u2"):
        for second in range(0, 60, 3):
            if rnd.random() < 0.7:
                clicks.append({"user": user, "ts": T0 + dt.timedelta(seconds=second), "page": f"p{second}"})
            else:
                orders.append(
                    {"user": user, "ts": T0 + dt.timedelta(seconds=second), "amount": float(rnd.choice([50, 150]))}
                )
    far = T0 + dt.timedelta(hours=2)
    for rows, extra in (
        (clicks, {"user": "zz", "ts": far, "page": "x"}),
        (orders, {"user": "zz", "ts": far, "amount": 1.0}),
    ):
        parts = [sorted(rows, key=lambda r: r["ts"])[i::3] for i in range(3)]  # three interleaved batches each
        parts.append([extra])
        directory = tmp_path / ("clicks" if "page" in extra else "orders")
        directory.mkdir()
        for index, part in enumerate(parts):
            path = directory / f"b{index}.json"
            path.write_text(
                "".join(json.dumps({**r, "ts": r["ts"].isoformat()}) + "\n" for r in part), encoding="utf-8"
            )
            os.utime(path, (1_700_000_000 + index, 1_700_000_000 + index))
    ts = T.StructField("ts", T.TimestampType())
    click_df = (
        spark.readStream.schema(
            T.StructType([T.StructField("user", T.StringType()), ts, T.StructField("page", T.StringType())])
        )
        .option("maxFilesPerTrigger", 1)
        .json(str(tmp_path / "clicks"))
    )
    order_df = (
        spark.readStream.schema(
            T.StructType([T.StructField("user", T.StringType()), ts, T.StructField("amount", T.DoubleType())])
        )
        .option("maxFilesPerTrigger", 1)
        .json(str(tmp_path / "orders"))
    )
    events = click_df.select(
        "user", "ts", F.lit("click").alias("kind"), "page", F.lit(None).cast("double").alias("amount")
    ).unionByName(
        order_df.select("user", "ts", F.lit("order").alias("kind"), F.lit(None).cast("string").alias("page"), "amount")
    )
    out = query.on_spark(events, watermark="1 minute", session_timeout="10 minutes")
    stream = (
        out.writeStream.format("memory")
        .queryName("two_streams")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    stream.awaitTermination()
    result = spark.sql("SELECT user, clicks, amount FROM two_streams WHERE cep_late_reason IS NULL").toPandas()
    union = [{"user": r["user"], "ts": r["ts"], "kind": "click", "page": r["page"], "amount": None} for r in clicks]
    union += [{"user": r["user"], "ts": r["ts"], "kind": "order", "page": None, "amount": r["amount"]} for r in orders]
    expected = query.run(canonical_order(union, query.plan, ("user", "ts", "kind", "page", "amount")))
    assert expected  # the scenario has matches
    assert normalize(r for r in result.itertuples(index=False, name=None) if r[0] != "zz") == normalize(
        tuple(r.values()) for r in expected
    )
