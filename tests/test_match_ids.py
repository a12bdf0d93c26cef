"""Match ids of the column-wise streaming path (``match_ids.SessionIds``): the ids of all matches of a call
at once, each session head's hash state kept between calls, must be ``match_id``'s, byte for byte.

1. ``SessionIds`` against ``match_id`` itself, over keys that are equal in Python but not in their
   canonical text (1, 1.0, True; 0.0, -0.0), kept heads reused across calls, and a cache so small it
   starts over inside a call.
2. Many keys in many small micro-batches through ``LocalStream``, column-wise against per key (whose ids
   come from ``match_id`` one match at a time): the same rows and ids, a WHERE that drops some rows
   included.
"""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cep
from cep.spark_bridge.engine import state_codec as codec
from cep.spark_bridge.engine.keyed import KeyedStream
from cep.spark_bridge.engine.local import LocalStream
from cep.spark_bridge.engine.match_ids import SessionIds, match_id, query_fingerprint

FP = query_fingerprint("SELECT 1")
# equal in Python, different canonical text (so different ids): a cache keyed by them must keep them apart
KEY_VALUES = (1, 1.0, True, 0, 0.0, -0.0, False, "1", "a", "é", None, 2**70, Decimal("1"), dt.datetime(2024, 1, 1))
key_tuples = st.lists(st.sampled_from(KEY_VALUES), min_size=0, max_size=2).map(tuple)
sessions = st.tuples(key_tuples, st.sampled_from([0, 1_700_000_000_000_000, -5, None]))
US = st.integers(codec.datetime_to_micros(dt.datetime.min), codec.datetime_to_micros(dt.datetime.max))
match = st.tuples(st.integers(-1, 10**6), st.integers(0, 10**9), US)  # (number, session position, first row's µs)


@settings(max_examples=300, deadline=None)
@given(
    calls=st.lists(st.lists(st.tuples(sessions, st.lists(match, max_size=4)), max_size=6), min_size=1, max_size=4),
    limit=st.sampled_from([1, 2, 3, 1000]),
)
def test_session_ids_are_match_id(calls, limit):
    ids = SessionIds(FP, limit=limit)
    for call in calls:
        got = ids.ids(
            [session for session, _ in call],
            [len(found) for _, found in call],
            [n for _, found in call for n, _, _ in found],
            [s for _, found in call for _, s, _ in found],
            [u for _, found in call for _, _, u in found],
        )
        want = [
            match_id(FP, key, start, n, s, codec.micros_to_datetime(u))
            for (key, start), found in call
            for n, s, u in found
        ]
        assert got == want
        assert len(ids.heads) <= limit


T0 = dt.datetime(2024, 1, 1)
COLUMNS = ("k", "ts", "v")
QUERIES = {
    "where": (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES FIRST(A.ts) AS f, COUNT(*) AS n "
        "ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A{2,} B) DEFINE A AS A.v < 5, B AS B.v >= 5) "
        "WHERE n > 3"
    ),
    "timeouts": (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES A.ts AS a, MATCH_STATUS() AS st, "
        "MATCH_NUMBER() AS mn ONE ROW PER MATCH SHOW TIMEOUT MATCHES AFTER MATCH SKIP PAST LAST ROW "
        "PATTERN (A B+ C) WITHIN INTERVAL '6' SECOND DEFINE A AS A.v > 6, C AS C.v < 3)"
    ),
}


def _run(text: str, batches: list[list[dict]], *, columnar: bool, buckets: int) -> list[tuple]:
    q = cep.compile(text)
    engine = KeyedStream(q.plan, COLUMNS, query_text=q.text, session_timeout_us=120_000_000)
    stream = LocalStream(engine, delay_ms=2000, buckets=buckets, columnar=columnar)
    return [stream.run_batch(batch)[:2] for batch in batches]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    name=st.sampled_from(sorted(QUERIES)),
    buckets=st.sampled_from([0, 3]),
    string_keys=st.booleans(),
)
def test_many_keys_small_micro_batches(seed, name, buckets, string_keys):
    rnd = random.Random(seed)
    keys = [f"user-{i}" if string_keys else i for i in range(rnd.randint(20, 60))]
    rows, t = [], 0
    for _ in range(rnd.randint(200, 600)):
        t += rnd.choice([0, 0, 1]) if rnd.random() > 0.02 else 150  # now and then a session gap for every key
        rows.append({"k": rnd.choice(keys), "ts": T0 + dt.timedelta(seconds=t), "v": rnd.randint(0, 9)})
    size = rnd.randint(3, 25)  # small micro-batches: every key's session matched again call after call
    batches = [rows[i : i + size] for i in range(0, len(rows), size)] + [
        [],
        [{"k": keys[0], "ts": T0 + dt.timedelta(hours=3), "v": 0}],
        [],
    ]
    text = QUERIES[name]
    assert KeyedStream(cep.compile(text).plan, COLUMNS, query_text=text).route().stream_reasons == ()
    want = _run(text, batches, columnar=False, buckets=buckets)
    assert _run(text, batches, columnar=True, buckets=buckets) == want
