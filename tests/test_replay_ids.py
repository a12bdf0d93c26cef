"""Backtests give the live stream's matches: ``q.run(..., session_timeout=..., match_ids=True)``.

The property (eight queries: WITHIN, SHOW TIMEOUT MATCHES, an absence, ALL ROWS PER MATCH with and
without unmatched rows, a trailing ``$``, an outer WHERE): random events (a few keys, random gaps,
some above the session timeout, some equal to it), fed to ``LocalStream`` in random micro-batches (in
time order, shuffled inside each batch) with a watermark delay that makes nothing late, then a row of
another key far in the future and an empty batch so every session ends, give exactly the
(match_id, row) pairs of one ``q.run`` over the same events in any order. Then: examples, bad
arguments, the command line, and two Spark replays.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cep
from cep.cli import main
from cep.spark_bridge.engine.keyed import KeyedStream
from cep.spark_bridge.engine.local import LocalStream
from cep.spark_bridge.engine.match_ids import statement_text
from tests.test_streaming import QUERIES as STREAM_QUERIES

T0 = dt.datetime(2024, 1, 1)
SENTINEL = "ZZZ"
COLUMNS = ("symbol", "ts", "price")

QUERIES = {
    "numbered": """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts
        MEASURES FIRST(A.ts) AS a_ts, LAST(C.price) AS c_price, MATCH_NUMBER() AS mno
        ONE ROW PER MATCH PATTERN (A B* C) DEFINE A AS price < 97, C AS price > 103)""",
    "within": """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts
        MEASURES FIRST(A.ts) AS a_ts, LAST(C.ts) AS c_ts, MATCH_NUMBER() AS mno
        ONE ROW PER MATCH PATTERN (A B* C) WITHIN INTERVAL '40' SECOND
        DEFINE A AS price < 97, C AS price > 103)""",
    "trailing": """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts
        MEASURES COUNT(*) AS n, LAST(A.price) AS p, MATCH_NUMBER() AS mno
        ONE ROW PER MATCH PATTERN (A+ $) DEFINE A AS price > 95)""",
    # The streaming tests' own: SHOW TIMEOUT MATCHES, an absence, ALL ROWS with and without unmatched rows, WHERE,
    # runs of F that overlap and time out.
    **{name: STREAM_QUERIES[name] for name in ("timeouts", "absence", "all_rows", "unmatched", "where", "fail_runs")},
}
TIMEOUT_S = 45

# (key, gap to the key's previous row in ms, price): gaps of 0 (ties), 45 s (exactly the timeout:
# same session) and more (a new session); 19.999 s, 20 s and 20.001 s put rows just inside, at and past
# the 20 s WITHIN of partial matches that began a row earlier.
EVENTS = st.lists(
    st.tuples(
        st.sampled_from("AB"),
        st.sampled_from([0, 500, 1_000, 3_000, 10_000, 19_999, 20_000, 20_001, 45_000, 45_001, 200_000]),
        st.integers(90, 110),
    ),
    max_size=40,
)


def make_events(spec) -> list[dict]:
    clock = {"A": 0, "B": 7_000}
    events = []
    for key, gap_ms, price in spec:
        clock[key] += gap_ms
        events.append({"symbol": key, "ts": T0 + dt.timedelta(milliseconds=clock[key]), "price": float(price)})
    return events


def stream(query, batches, *, session_s: int, delay_s: int) -> Counter:
    """(match_id, row) of a LocalStream run, without the sentinel's rows."""
    engine = KeyedStream(
        query.plan, COLUMNS, query_text=statement_text(query), session_timeout_us=session_s * 1_000_000
    )
    local = LocalStream(engine, delay_ms=delay_s * 1000)
    got: Counter = Counter()
    for batch in batches:
        rows, ids, late = local.run_batch(batch)
        assert late == []
        got.update((match, tuple(row)) for row, match in zip(rows, ids) if SENTINEL not in row)
    return got


def replay(query, events, **options) -> Counter:
    rows = query.run(events, match_ids=True, **options)
    return Counter((row.pop("match_id"), tuple(row.values())) for row in rows if row["symbol"] != SENTINEL)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    spec=EVENTS,
    name=st.sampled_from(sorted(QUERIES)),
    delay_s=st.sampled_from([1, 5, 30]),
    n_batches=st.integers(1, 6),
    rnd=st.randoms(use_true_random=False),
)
def test_replay_gives_the_streams_rows_and_ids(spec, name, delay_s, n_batches, rnd):
    query = cep.compile(QUERIES[name])
    events = make_events(spec)
    ordered = sorted(events, key=lambda e: e["ts"])
    cuts = sorted(rnd.sample(range(1, len(ordered)), min(n_batches - 1, len(ordered) - 1))) if len(ordered) > 1 else []
    batches = [ordered[a:b] for a, b in zip([0] + cuts, cuts + [len(ordered)])]
    for batch in batches:
        rnd.shuffle(batch)  # arrival order inside a micro-batch is Spark's, not the events'
    last = ordered[-1]["ts"] if ordered else T0
    far = {"symbol": SENTINEL, "ts": last + dt.timedelta(seconds=TIMEOUT_S + delay_s + 3600), "price": None}
    live = stream(query, batches + [[far], []], session_s=TIMEOUT_S, delay_s=delay_s)

    shuffled = list(events)
    rnd.shuffle(shuffled)  # a replay orders rows itself, ties as the stream does
    backtest = replay(query, shuffled, session_timeout=dt.timedelta(seconds=TIMEOUT_S))
    assert backtest == live
    if query.statement.match.rows_per_match.mode == "ONE":
        assert all(count == 1 for count in Counter(match for match, _ in backtest.elements()).values())


# ------------------------------------------------------------------------------------------- examples


def ticks(*spec) -> list[dict]:
    return [{"symbol": s, "ts": T0 + dt.timedelta(seconds=sec), "price": float(p)} for s, sec, p in spec]


def test_sessions_restart_match_numbers_and_end_trailing_matches():
    query = cep.compile(QUERIES["trailing"])
    events = ticks(("A", 0, 100), ("A", 5, 101), ("A", 100, 102), ("A", 103, 90), ("A", 104, 99))
    # One session: only the last row is followed by the end of input.
    assert [(r["n"], r["mno"]) for r in query.run(events)] == [(1, 1)]
    # A 30 s timeout cuts at the 95 s gap: each session ends with its own trailing match, numbered from 1.
    got = query.run(events, session_timeout="30s")
    assert [(r["n"], r["p"], r["mno"]) for r in got] == [(2, 101.0, 1), (1, 99.0, 1)]
    assert "match_id" not in got[0]
    with_ids = query.run(events, session_timeout="30 seconds", match_ids=True)
    assert list(with_ids[0]) == ["symbol", "n", "p", "mno", "match_id"]  # the id comes last
    assert [{k: v for k, v in r.items() if k != "match_id"} for r in with_ids] == got
    assert len({r["match_id"] for r in with_ids}) == 2 and all(len(r["match_id"]) == 32 for r in with_ids)


def test_all_rows_of_a_match_share_its_id_and_ids_depend_on_the_statement_text():
    query = cep.compile(QUERIES["all_rows"])
    events = ticks(("A", 0, 100), ("A", 1, 101), ("A", 2, 102), ("A", 3, 99), ("A", 4, 100), ("A", 5, 98))
    rows = query.run(events, match_ids=True)
    by_match = {}
    for row in rows:
        by_match.setdefault(row["mno"], set()).add(row["match_id"])
    assert sorted(by_match) == [1, 2] and all(len(ids) == 1 for ids in by_match.values())
    assert by_match[1] != by_match[2]
    other = cep.compile(QUERIES["all_rows"].replace("SELECT *", "SELECT  *"))  # another text: other ids
    assert {r["match_id"] for r in other.run(events, match_ids=True)}.isdisjoint(r["match_id"] for r in rows)


def test_every_input_kind_and_time_zone_gives_the_same_ids():
    query = cep.compile(QUERIES["numbered"])
    events = ticks(("A", 0, 96), ("A", 10, 100), ("A", 20, 104), ("B", 0, 95), ("B", 100, 96), ("B", 101, 106))
    want = query.run(events, session_timeout="1m", match_ids=True)
    assert len(want) == 2
    frame = pd.DataFrame(events)
    assert query.run(frame, session_timeout="1m", match_ids=True).to_dict("records") == want
    table = pa.Table.from_pylist(events)
    assert query.run(table, session_timeout="1m", match_ids=True).to_pylist() == want
    aware = [{**e, "ts": e["ts"].replace(tzinfo=dt.UTC).astimezone(dt.timezone(dt.timedelta(hours=2)))} for e in events]
    assert query.run(aware, session_timeout="1m", match_ids=True) == want  # as the stream: naive UTC times


def test_outer_order_by_and_limit_keep_each_rows_id():
    text = QUERIES["numbered"].replace("SELECT *", "SELECT symbol, c_price") + " ORDER BY c_price DESC LIMIT 1"
    query = cep.compile(text)
    events = ticks(("A", 0, 96), ("A", 10, 104), ("B", 0, 95), ("B", 10, 108))
    top = query.run(events, match_ids=True)
    assert [(r["symbol"], r["c_price"]) for r in top] == [("B", 108.0)]
    every = cep.compile(QUERIES["numbered"]).run(events, match_ids=True)
    # The id hashes the statement's text: the same match under another statement has another id.
    assert top[0]["match_id"] not in {r["match_id"] for r in every}
    unordered = cep.compile(text.replace(" ORDER BY c_price DESC LIMIT 1", "")).run(events, match_ids=True)
    assert len(unordered) == 2 and top[0]["match_id"] not in {r["match_id"] for r in unordered}


# ------------------------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "bad, message",
    [
        ("soon", "cannot read session_timeout 'soon'"),
        ("5 fortnights", "unknown unit 'fortnights'"),
        ("0s", "session_timeout must be positive"),
        (30, "session_timeout must be a string like '30 seconds' or a datetime.timedelta, not int"),
        (dt.timedelta(seconds=-1), "is negative"),
    ],
)
def test_a_bad_session_timeout_is_a_cep_error(bad, message):
    query = cep.compile(QUERIES["numbered"])
    with pytest.raises(cep.CepError, match=message) as raised:
        query.run(ticks(("A", 0, 96)), session_timeout=bad)
    assert raised.value.code == "E0286"


def test_what_a_replay_with_ids_refuses():
    events = ticks(("A", 0, 96), ("A", 10, 104))
    numbered = cep.compile(QUERIES["numbered"])
    with pytest.raises(cep.CepError, match="NULL event time") as raised:
        numbered.run(events + [{"symbol": "A", "ts": None, "price": 1.0}], match_ids=True)
    assert raised.value.code == "E0440"
    dead: list = []
    assert (
        len(numbered.run(events + [{"symbol": "A", "ts": None, "price": 1.0}], match_ids=True, dead_letter=dead)) == 1
    )
    assert [d["_cep_error"] for d in dead] == ["null_event_time"]
    with pytest.raises(cep.CepError, match="to hold timestamps, not int") as raised:
        numbered.run([{**e, "ts": i} for i, e in enumerate(events)], session_timeout="1s")
    assert raised.value.code == "E0282"
    clash = cep.compile(QUERIES["numbered"].replace("MATCH_NUMBER() AS mno", "MATCH_NUMBER() AS match_id"))
    with pytest.raises(cep.CepError, match="named match_id") as raised:
        clash.run(events, match_ids=True)
    assert raised.value.code == "E0284"
    assert clash.run(events)[0]["match_id"] == 1  # without match_ids the name is free


# --------------------------------------------------------------------------------------- command line


def test_cep_run_session_timeout_and_match_ids(tmp_path, capsys):
    query_file = tmp_path / "q.sql"
    query_file.write_text(QUERIES["trailing"], encoding="utf-8")
    events = ticks(("A", 0, 100), ("A", 5, 101), ("A", 100, 102), ("A", 103, 90), ("A", 104, 99))
    data = tmp_path / "events.csv"
    pd.DataFrame(events).to_csv(data, index=False)
    out = tmp_path / "out.csv"
    args = ["run", str(query_file), "-i", str(data), "--engine", "python", "-o", str(out)]
    assert main(args + ["--session-timeout", "30s", "--match-ids"]) == 0
    got = pd.read_csv(out)
    want = pd.DataFrame(
        cep.compile(QUERIES["trailing"], filename=str(query_file)).run(events, session_timeout="30s", match_ids=True)
    )
    assert list(got.columns)[-1] == "match_id"
    assert sorted(got["match_id"]) == sorted(want["match_id"]) and sorted(got["n"]) == [1, 2]
    assert main(args) == 0
    assert "match_id" not in pd.read_csv(out).columns and len(pd.read_csv(out)) == 1  # one session
    capsys.readouterr()
    assert main(args + ["--session-timeout", "soon"]) == 2
    assert "--session-timeout: cannot read session_timeout 'soon'" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------- Spark


@pytest.mark.spark
def test_static_on_spark_replays_like_run(spark):
    from pyspark.sql import types as T

    query = cep.compile(QUERIES["within"])
    events = ticks(
        ("A", 0, 96),
        ("A", 10, 100),
        ("A", 20, 104),
        ("A", 30, 95),
        ("A", 200, 94),
        ("A", 210, 105),
        ("B", 0, 95),
        ("B", 100, 96),
        ("B", 101, 100),
        ("B", 102, 106),
        ("B", 103, 96),
    )
    schema = T.StructType(
        [
            T.StructField("symbol", T.StringType()),
            T.StructField("ts", T.TimestampType()),
            T.StructField("price", T.DoubleType()),
        ]
    )
    df = spark.createDataFrame([tuple(e.values()) for e in events], schema)
    want = query.run(events, session_timeout="60 seconds", match_ids=True)
    got = query.on_spark(df, session_timeout="60 seconds", match_ids=True).toPandas()
    assert list(got.columns) == list(want[0])
    records = [
        {k: (v.to_pydatetime() if hasattr(v, "to_pydatetime") else v) for k, v in r.items()}
        for r in got.to_dict("records")
    ]
    assert sorted(records, key=lambda r: r["match_id"]) == sorted(want, key=lambda r: r["match_id"])
    # A: a match in each of its two sessions (the 95 at 30 s finds no C within 40 s); B: one, in its second.
    assert [(r["symbol"], r["mno"]) for r in want] == [("A", 1), ("A", 1), ("B", 1)]
    with pytest.raises(cep.CepError, match="E0286|must be positive"):
        query.on_spark(df, session_timeout="0 seconds")


@pytest.mark.spark
def test_cep_run_spark_engine_gives_the_python_engines_ids(spark, tmp_path):
    query_file = tmp_path / "q.sql"
    query_file.write_text(QUERIES["numbered"], encoding="utf-8")
    data = tmp_path / "events.csv"
    pd.DataFrame(
        ticks(("A", 0, 96), ("A", 10, 104), ("A", 300, 96), ("A", 301, 104), ("B", 0, 95), ("B", 9, 108))
    ).to_csv(data, index=False)
    outputs = {}
    for engine in ("python", "spark"):
        out = tmp_path / f"{engine}.csv"
        args = [
            "run",
            str(query_file),
            "-i",
            str(data),
            "--engine",
            engine,
            "-o",
            str(out),
            "--session-timeout",
            "1 minute",
        ]
        assert main(args + ["--match-ids"]) == 0
        outputs[engine] = pd.read_csv(out).sort_values("match_id").reset_index(drop=True)
    assert len(outputs["python"]) == 3 and list(outputs["python"]["mno"]) == [1, 1, 1]
    pd.testing.assert_frame_equal(outputs["spark"], outputs["python"])
