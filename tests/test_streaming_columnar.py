"""The column-wise streaming path (``spark_bridge/engine/columnar.py``) against the per-key Pike VM path.

Differential: random rows (several keys, tied event times and values, rows out of order within the
watermark delay, late rows, NULL event times, session gaps) split into random micro-batches run through
``LocalStream`` twice, once per path; every micro-batch must give the same output rows in the same order,
the same match ids, the same late rows with the same reasons, the same stats (but ``live_matches``: the
VM counts its threads, the column-wise path its undecided starts; and ``state_bytes``: another state
format) and the same timers. ``CEP_STREAM_EXAMPLES=N`` sets the examples per test (default 120).
"""

from __future__ import annotations

import datetime as dt
import os
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cep
from cep.grammar.errors import CepRuntimeError
from cep.spark_bridge.engine.columnar import ColumnarTable, reasons_not
from cep.spark_bridge.engine.key_table import KeyTable
from cep.spark_bridge.engine.keyed import KeyedStream
from cep.spark_bridge.engine.local import LocalStream

T0 = dt.datetime(2024, 1, 1)
COLUMNS = ("k", "ts", "v", "w")
EXAMPLES = int(os.environ.get("CEP_STREAM_EXAMPLES", "120"))


def query(pattern: str, measures: str, defines: str, *, skip: str = "PAST LAST ROW", within: str = "",
          where: str = "") -> str:
    return (f"SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES {measures} "
            f"ONE ROW PER MATCH AFTER MATCH SKIP {skip} PATTERN ({pattern}) {within} DEFINE {defines}){where}")


QUERIES = {
    "greedy_tail": query("A{3,}", "FIRST(A.ts) AS f, COUNT(*) AS n, MATCH_NUMBER() AS mn", "A AS A.v > 3"),
    "bounded": query("A B{2,4} C", "FIRST(A.ts) AS f, LAST(B.v) AS b, COUNT(*) AS n", "A AS A.v > 6, B AS B.v > 2, C AS C.v < 5"),
    "within_first_hit": query("A B*? C", "A.ts AS a, C.ts AS c, A.v - C.v AS fall", "A AS A.v > 4, C AS C.v < A.v - 2",
                              within="WITHIN INTERVAL '6' SECOND"),
    "within_greedy": query("A B+ C", "FIRST(A.ts) AS f, COUNT(*) AS n", "B AS B.v >= 3, C AS C.v > 7",
                           within="WITHIN INTERVAL '9' SECOND"),
    "prev_next_row": query("A B+ C", "FIRST(A.ts) AS f, COUNT(*) AS n, MATCH_NUMBER() AS mn",
                           "B AS B.v < PREV(B.v), C AS C.v > PREV(C.v)", skip="TO NEXT ROW"),
    "prev2": query("A B", "A.ts AS a, B.v AS b", "A AS A.v > PREV(A.v, 2), B AS B.v < PREV(B.v)", skip="TO NEXT ROW"),
    "running_sum": query("A+ B", "FIRST(A.ts) AS f, SUM(A.w) AS s, COUNT(*) AS n",
                         "A AS SUM(A.w) < 9, B AS SUM(A.w) + B.w >= 9"),
    "cross_variable": query("S D+ U", "S.ts AS s, LAST(D.ts) AS d, COUNT(*) AS n",
                            "D AS D.v < S.v, U AS U.v > LAST(D.v, 1)", skip="TO LAST U"),
    "where": query("A{2,} B", "FIRST(A.ts) AS f, COUNT(*) AS n", "A AS A.v < 5, B AS B.v >= 5", where=" WHERE n > 2"),
}


def make_batches(rnd: random.Random, delay_s: int) -> list[list[dict]]:
    keys = "abc"[: rnd.randint(1, 3)]
    rows, t = [], 0
    for _ in range(rnd.randint(0, 70)):
        t += rnd.choice([0, 0, 1, 1, 2, 3]) if rnd.random() > 0.06 else rnd.randint(15, 60)
        ts = T0 + dt.timedelta(seconds=max(0, t + rnd.randint(-delay_s - 2, 1)))  # out of order, some late
        rows.append({"k": rnd.choice(keys), "ts": None if rnd.random() < 0.02 else ts, "v": rnd.randint(0, 9),
                     "w": rnd.randint(0, 4)})
    cuts = sorted(rnd.sample(range(len(rows) + 1), min(rnd.randint(0, 8), len(rows) + 1)))
    batches = [rows[a:b] for a, b in zip([0] + cuts, cuts + [len(rows)])]
    return batches + [[] for _ in range(rnd.randint(1, 3))] + [[{"k": "z", "ts": T0 + dt.timedelta(hours=5), "v": 0, "w": 0}], []]


def run(text: str, batches, *, columnar: bool, delay_s: int, session_s, buckets: int = 0, max_pending_rows=None,
        max_match_rows=None):
    q = cep.compile(text)
    options = {"max_pending_rows": max_pending_rows} if max_pending_rows else {}
    if max_match_rows:
        options["max_match_rows"] = max_match_rows
    engine = KeyedStream(q.plan, COLUMNS, query_text=q.text,
                         session_timeout_us=None if session_s is None else session_s * 1_000_000, **options)
    stream = LocalStream(engine, delay_ms=delay_s * 1000, buckets=buckets, columnar=columnar)
    steps = []
    for batch in batches:
        before = dict(stream.stats)
        out, ids, late = stream.run_batch(batch)
        stats = {k: v - before[k] for k, v in stream.stats.items() if k not in ("live_matches", "state_bytes")}
        steps.append((out, ids, [(reason, id(row)) for reason, row in late], stats, stream.timers))
    return steps, stream


def assert_same(text, batches, **options):
    expected, _ = run(text, batches, columnar=False, **options)
    got, stream = run(text, batches, columnar=True, **options)
    for index, (want, have) in enumerate(zip(expected, got)):
        assert have == want, f"micro-batch {index}"
    return stream


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), name=st.sampled_from(sorted(QUERIES)), session_s=st.sampled_from([None, 8, 30]),
       delay_s=st.sampled_from([0, 2, 5]), buckets=st.sampled_from([0, 0, 3]))
def test_columnar_equals_per_key(seed, name, session_s, delay_s, buckets):
    assert reasons_not(KeyedStream(cep.compile(QUERIES[name]).plan, COLUMNS, query_text=QUERIES[name])) == []
    batches = make_batches(random.Random(seed), delay_s)
    assert_same(QUERIES[name], batches, delay_s=delay_s, session_s=session_s, buckets=buckets)


@settings(max_examples=max(EXAMPLES // 3, 10), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), name=st.sampled_from(["greedy_tail", "running_sum", "prev_next_row"]),
       session_s=st.sampled_from([None, 30]))
def test_columnar_caps_equal_per_key(seed, name, session_s):
    """Small caps: forced releases (max_pending_rows) and given-up partial matches (max_match_rows, where a
    session piece runs on the VM) as the per-key path has them."""
    batches = make_batches(random.Random(seed), 5)
    assert_same(QUERIES[name], batches, delay_s=5, session_s=session_s, max_pending_rows=4, max_match_rows=6)


def test_a_long_open_run_goes_on_on_the_vm_and_back():
    """A run open for longer than a scan from every start allows (the engine's budget): that call runs on
    the VM, resumed from the carried rows; later calls are column-wise again; the output is the VM's."""
    text = QUERIES["greedy_tail"]
    long_run = [{"k": "a", "ts": T0 + dt.timedelta(milliseconds=i), "v": 9, "w": 0} for i in range(3_000)]
    batches = [long_run[:1000], long_run[1000:], [{"k": "a", "ts": T0 + dt.timedelta(seconds=10), "v": 0, "w": 0}],
               [{"k": "z", "ts": T0 + dt.timedelta(hours=1), "v": 0, "w": 0}], []]
    stream = assert_same(text, batches, delay_s=0, session_s=None)
    assert stream.step.vm_pieces >= 1


def test_the_path_is_named_and_can_be_forced():
    q = cep.compile(QUERIES["greedy_tail"])
    engine = KeyedStream(q.plan, COLUMNS, query_text=q.text)
    assert LocalStream(engine, delay_ms=0).path.startswith("column-wise")
    assert LocalStream(engine, delay_ms=0, columnar=False).path.startswith("per key")
    vshape = cep.compile(query("A B+ C+", "COUNT(*) AS n", "B AS B.v < PREV(B.v), C AS C.v > PREV(C.v)"))
    stream = LocalStream(KeyedStream(vshape.plan, COLUMNS, query_text=vshape.text), delay_ms=0)
    assert stream.path.startswith("per key (Pike VM): ") and "backtracking" in stream.path
    with pytest.raises(CepRuntimeError, match="cannot run this query"):
        LocalStream(KeyedStream(vshape.plan, COLUMNS, query_text=vshape.text), delay_ms=0, columnar=True)


def test_a_checkpoint_of_one_path_is_refused_by_the_other():
    q = cep.compile(QUERIES["greedy_tail"])
    engine = KeyedStream(q.plan, COLUMNS, query_text=q.text)
    rows = [{"k": "a", "ts": T0 + dt.timedelta(seconds=s), "v": 5, "w": 0} for s in range(5)]
    per_key = LocalStream(engine, delay_ms=0, buckets=2, columnar=False)
    columnwise = LocalStream(engine, delay_ms=0, buckets=2, columnar=True)
    for stream in (per_key, columnwise):
        stream.run_batch(rows)
        stream.run_batch([])
    key_blob = next(iter(per_key.tables.values()))
    columnar_blob = next(iter(columnwise.tables.values()))
    with pytest.raises(CepRuntimeError, match="per-key streaming path") as caught:
        ColumnarTable.decode(key_blob, columnwise.step.columns, 2)
    assert caught.value.code == "E0482"
    with pytest.raises(CepRuntimeError, match="column-wise streaming path") as caught:
        KeyTable.decode(columnar_blob, 2)
    assert caught.value.code == "E0482"
    again = ColumnarTable.decode(columnar_blob, columnwise.step.columns, 2)
    assert again.encode() == columnar_blob
