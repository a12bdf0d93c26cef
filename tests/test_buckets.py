"""Keys grouped in buckets (cep.spark_bridge.engine.key_table): the table of per-key states survives bytes, and a
checkpoint written with another bucket count (or per key) is refused instead of losing state.
That bucketing changes no output is checked by tests/test_streaming.py (LocalStream with buckets)."""

import datetime as dt

import pytest

import cep
from cep.grammar.errors import CepRuntimeError
from cep.spark_bridge.engine import state_codec
from cep.spark_bridge.engine.key_table import KeyTable, split_by_key
from cep.spark_bridge.engine.keyed import KeyedStream
from cep.spark_bridge.engine.local import LocalStream

VSHAPE = """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY s ORDER BY ts
  MEASURES FIRST(A.ts) AS start_ts, COUNT(*) AS n ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B+ C+) DEFINE B AS price < PREV(price), C AS price > PREV(price))"""


def test_table_round_trips_through_bytes_with_odd_keys():
    table = KeyTable(buckets=7)
    keys = [("x",), (None,), (1, 2.5), (dt.datetime(2024, 1, 2, 3, 4, 5),), (True, "é")]
    for number, key in enumerate(keys):
        table.states[key] = state_codec.encode({"n": number})
        if number % 2:
            table.timers[key] = 1_000 + number
    again = KeyTable.decode(table.encode(), 7)
    assert again.states == table.states and again.timers == table.timers
    assert again.next_timer() == 1_001
    assert again.due(1_001, busy={}) == [(None,)]
    assert again.due(10_000, busy={(None,): [0]}) == [(dt.datetime(2024, 1, 2, 3, 4, 5),)]


def test_another_bucket_count_or_a_per_key_state_is_refused():
    blob = KeyTable(buckets=64, states={("x",): b"s"}).encode()
    with pytest.raises(CepRuntimeError) as err:
        KeyTable.decode(blob, 32)
    assert err.value.code == "E0482" and "key_buckets=64" in str(err.value)
    per_key = state_codec.encode({"v": 1, "key": ["x"], "pending": None})
    with pytest.raises(CepRuntimeError) as err:
        KeyTable.decode(per_key, 64)
    assert err.value.code == "E0482"


def test_split_by_key_keeps_first_appearance_order():
    assert split_by_key([("b",), ("a",), ("b",), (None,), ("a",)]) == {("b",): [0, 2], ("a",): [1, 4], (None,): [3]}


def test_local_stream_keeps_buckets_as_bytes_and_drops_empty_ones():
    q = cep.compile(VSHAPE)
    t0 = dt.datetime(2024, 1, 1)
    rows = [
        {"s": s, "ts": t0 + dt.timedelta(seconds=i), "price": p}
        for i, (s, p) in enumerate([("a", 5.0), ("b", 5.0), ("a", 4.0), ("b", 6.0), ("a", 6.0), ("b", 4.0)])
    ]
    stream = LocalStream(
        KeyedStream(q.plan, ("s", "ts", "price"), query_text=q.text, session_timeout_us=10_000_000),
        delay_ms=0,
        buckets=3,
    )
    stream.run_batch(rows)
    assert stream.tables and all(isinstance(blob, bytes) for blob in stream.tables.values())
    out, _, _ = stream.run_batch([{"s": "c", "ts": t0 + dt.timedelta(seconds=100), "price": 1.0}])
    assert out == []  # the watermark (5 s) has not reached a's session end (4 s + 10 s) yet
    out, _, _ = stream.run_batch([])  # watermark 100 s: a's and b's sessions end by their timers
    assert [row[1:] for row in out] == [(t0, 3)]  # a: 5, 4, 6 is a V; b: 5, 6, 4 is not
    assert set(stream.states) == {("c",)}
