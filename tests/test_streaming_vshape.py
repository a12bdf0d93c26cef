"""The V-shape family (``A B+ C+``: runs followed by more than one item) on the column-wise streaming path.

Differential, as ``test_streaming_columnar.py``: random rows (several keys, ties, rows out of order within the
watermark delay, late rows, NULL event times, session gaps) in random micro-batches through ``LocalStream``
on the column-wise path and on the per-key Pike VM: every micro-batch gives the same rows in the same order,
the same match ids, the same late rows and the same stats. The rows the stream accepted, replayed by
``q.run(session_timeout=..., match_ids=True)``, give the same (match id, row) pairs. The queries: the V and W
shapes of ``patterns/``, runs whose conditions overlap (a row both B and C: several ends possible), reluctant
runs, bounded runs, conditions reading the match so far, WITHIN with SHOW TIMEOUT MATCHES, each skip mode.
"""

from __future__ import annotations

import datetime as dt
import os
import random
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cep
from cep.matcher.plan import COLUMN_WISE
from cep.spark_bridge.engine.keyed import KeyedStream
from cep.spark_bridge.engine.local import LocalStream
from cep.spark_bridge.engine.match_ids import statement_text
from tests.test_streaming_columnar import COLUMNS, assert_same, make_batches, query

EXAMPLES = int(os.environ.get("CEP_STREAM_EXAMPLES", "180"))
REPO = Path(__file__).resolve().parent.parent

FALL, RISE = "B AS B.v < PREV(B.v)", "C AS C.v > PREV(C.v)"
# ties: a row whose value equals the one before is both a fall and a rise, so a run has several possible ends
FALL_OR_FLAT, RISE_OR_FLAT = "B AS B.v <= PREV(B.v)", "C AS C.v >= PREV(C.v)"
V_MEASURES = "FIRST(A.ts) AS f, LAST(B.v) AS bottom, LAST(C.ts) AS e, COUNT(*) AS n, MATCH_NUMBER() AS mn"

QUERIES = {
    "v_shape": query("A B+ C+", V_MEASURES, f"{FALL}, {RISE}"),
    "v_flat": query("A B+ C+", V_MEASURES, f"{FALL_OR_FLAT}, {RISE_OR_FLAT}"),
    "v_flat_next_row": query("A B+ C+", V_MEASURES, f"{FALL_OR_FLAT}, {RISE_OR_FLAT}", skip="TO NEXT ROW"),
    "v_reluctant": query("A B+? C+", V_MEASURES, f"{FALL_OR_FLAT}, {RISE_OR_FLAT}", skip="TO LAST C"),
    "v_reluctant_tail": query("A B+ C+?", V_MEASURES, f"{FALL_OR_FLAT}, {RISE_OR_FLAT}"),
    "v_bounded": query("A B{1,3} C{2,}", V_MEASURES, f"{FALL_OR_FLAT}, {RISE_OR_FLAT}", skip="TO NEXT ROW"),
    # the rise reads the match so far: above where the fall began, and a running sum
    "v_history": query(
        "A B+ C+",
        "FIRST(A.ts) AS f, SUM(C.w) AS s, COUNT(B.*) AS nb, COUNT(*) AS n",
        f"{FALL_OR_FLAT}, C AS C.v >= PREV(C.v) AND C.v <= A.v + 2 AND SUM(C.w) < 9",
        skip="TO FIRST C",
    ),
    "v_within": query(
        "A B+ C+",
        V_MEASURES + ", MATCH_STATUS() AS st",
        f"A AS A.v > 3, {FALL_OR_FLAT}, {RISE}",
        within="WITHIN INTERVAL '8' SECOND",
        timeouts=True,
    ),
    "v_where": query("A B+ C+", V_MEASURES, f"{FALL}, {RISE}", where=" WHERE n > 3"),
    # an absence's run of rows that are not B, then a run: it ends at the first C row
    "absent_then_run": query(
        "A !B C+",
        "A.ts AS a, LAST(C.ts) AS c, COUNT(*) AS n, MATCH_STATUS() AS st",
        "A AS A.v > 6, B AS B.v = 0, C AS C.v < 4",
        within="WITHIN INTERVAL '8' SECOND",
        timeouts=True,
    ),
    "w_shape": query(
        "A B+ C+ D+ E+",
        "FIRST(A.ts) AS f, LAST(B.v) AS b1, LAST(C.v) AS peak, LAST(D.v) AS b2, LAST(E.ts) AS e, COUNT(*) AS n",
        f"{FALL}, {RISE}, D AS D.v < PREV(D.v), E AS E.v > PREV(E.v)",
    ),
    # several ends of a run followed by two items or more: the Pike VM decides those starts
    "w_flat": query(
        "A B+ C+ D+ E+",
        "FIRST(A.ts) AS f, LAST(C.v) AS peak, COUNT(*) AS n, MATCH_NUMBER() AS mn",
        f"{FALL_OR_FLAT}, {RISE_OR_FLAT}, D AS D.v <= PREV(D.v), E AS E.v >= PREV(E.v)",
        within="WITHIN INTERVAL '20' SECOND",
    ),
}


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    name=st.sampled_from(sorted(QUERIES)),
    session_s=st.sampled_from([None, 8, 30]),
    delay_s=st.sampled_from([0, 2, 5]),
    buckets=st.sampled_from([0, 0, 3]),
)
def test_the_v_family_column_wise_equals_per_key(seed, name, session_s, delay_s, buckets):
    route = KeyedStream(cep.compile(QUERIES[name]).plan, COLUMNS, query_text=QUERIES[name]).route()
    assert (route.stream, route.stream_reasons) == (COLUMN_WISE, ())
    batches = make_batches(random.Random(seed), delay_s)
    assert_same(QUERIES[name], batches, delay_s=delay_s, session_s=session_s, buckets=buckets)


@settings(max_examples=max(EXAMPLES // 3, 10), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    name=st.sampled_from(sorted(QUERIES)),
    session_s=st.sampled_from([8, 30]),
    delay_s=st.sampled_from([0, 2, 5]),
)
def test_the_v_family_streams_as_the_replay(seed, name, session_s, delay_s):
    """What the column-wise stream emitted over all micro-batches is ``q.run`` over the rows it accepted (not
    late, a time), with the same match ids."""
    q = cep.compile(QUERIES[name])
    batches = make_batches(random.Random(seed), delay_s)
    engine = KeyedStream(q.plan, COLUMNS, query_text=statement_text(q), session_timeout_us=session_s * 1_000_000)
    stream = LocalStream(engine, delay_ms=delay_s * 1000, columnar=True)
    streamed: Counter = Counter()
    accepted = []
    for batch in batches:
        rows, ids, late = stream.run_batch(batch)
        streamed.update((match, tuple(row)) for row, match in zip(rows, ids) if row[0] != "z")
        refused = {id(row) for _, row in late}
        accepted += [row for row in batch if id(row) not in refused and row["k"] != "z"]
    replayed = q.run(accepted, session_timeout=dt.timedelta(seconds=session_s), match_ids=True) if accepted else []
    assert Counter((row.pop("match_id"), tuple(row.values())) for row in replayed) == streamed
