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
from cep.spark_bridge.alerting.store import RuleStore
from cep.spark_bridge.alerting.worker import runtime_for
from cep.spark_bridge.engine.keyed import KeyedStream
from cep.spark_bridge.engine.local import LocalStream
from cep.spark_bridge.engine.match_ids import statement_text
from tests.test_alerting_columnwise import assert_column_wise_worker_as_per_key, rule_set_payload
from tests.test_streaming_columnar import COLUMNS, STREAM_CASES, assert_column_wise_as_per_key, make_batches, query

# Half what the suite ran before; `make test-stream-properties` runs 180 (docs/testing.md).
EXAMPLES = int(os.environ.get("CEP_STREAM_EXAMPLES", "90"))
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
    # ALL ROWS PER MATCH: every row of a final match, labelled by the end its run took
    "v_all_rows": query(
        "A B+ C+",
        "FIRST(A.ts) AS f, COUNT(*) AS n, CLASSIFIER() AS cls, MATCH_NUMBER() AS mn",
        f"{FALL_OR_FLAT}, {RISE_OR_FLAT}",
        rows="ALL ROWS PER MATCH",
    ),
    "w_all_rows": query(
        "A B+ C+ D+",
        "COUNT(*) AS n, CLASSIFIER() AS cls, LAST(C.v) AS peak",
        f"{FALL_OR_FLAT}, {RISE_OR_FLAT}, D AS D.v <= PREV(D.v) AND COUNT(D.*) <= 2",
        rows="ALL ROWS PER MATCH",
        skip="TO NEXT ROW",
    ),
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
    # the ends tried in turn restore the running aggregates of the run (SUM(B.w) in C's condition)
    "w_history": query(
        "A B+ C+ D",
        "FIRST(A.ts) AS f, SUM(B.w) AS sb, COUNT(C.*) AS nc, D.v AS d, COUNT(*) AS n",
        f"{FALL_OR_FLAT}, C AS C.v >= PREV(C.v) AND SUM(B.w) + SUM(C.w) < 12 "
        "AND (LAST(C.v, 1) IS NULL OR C.v <> LAST(C.v, 1)), D AS D.v < LAST(C.v) AND COUNT(C.*) >= 2",
        skip="TO NEXT ROW",
    ),
}


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(QUERIES)), **STREAM_CASES)
def test_the_v_family_column_wise_equals_per_key(seed, name, session_s, delay_s, buckets):
    assert_column_wise_as_per_key(QUERIES[name], seed, session_s, delay_s, buckets)


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


# ------------------------------------------------------------------------------------- the alerting worker

VSHAPE_RULES = {
    "vee.sql": """-- name: vee
SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts
  MEASURES FIRST(A.ts) AS a_ts, LAST(B.price) AS bottom, LAST(C.ts) AS c_ts, COUNT(*) AS n, MATCH_NUMBER() AS mn
  AFTER MATCH SKIP PAST LAST ROW PATTERN (A B+ C+)
  DEFINE B AS price <= PREV(price), C AS price >= PREV(price))""",
    "vee_within.sql": """-- name: vee_within
SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts
  MEASURES FIRST(A.ts) AS a_ts, COUNT(*) AS n, MATCH_STATUS() AS status
  ONE ROW PER MATCH SHOW TIMEOUT MATCHES AFTER MATCH SKIP TO NEXT ROW PATTERN (A B+ C+) WITHIN INTERVAL '9' SECOND
  DEFINE A AS price > 50, B AS price < PREV(price), C AS price > PREV(price))""",
    "double.sql": """-- name: double
SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts
  MEASURES FIRST(A.ts) AS a_ts, LAST(UP1.price) AS peak, LAST(UP2.ts) AS e, COUNT(*) AS n
  PATTERN (A DOWN1+ UP1+ DOWN2+ UP2+)
  DEFINE DOWN1 AS price < PREV(price), UP1 AS price >= PREV(price), DOWN2 AS price <= PREV(price),
         UP2 AS price > PREV(price))""",
}


def _publish_vshape_rules(tmp_path: Path, session_s: int) -> RuleStore:
    """The V rules in a store of the example's own, their rule set built once for the run (``rule_set_payload``:
    the same payload, so the worker's compiled rules are reused as in a worker process that runs many batches)."""
    store = RuleStore(str(tmp_path / f"store-{session_s}"))
    store.publish(rule_set_payload(tmp_path, VSHAPE_RULES, session_s))
    return store


def test_the_alerting_worker_runs_the_v_shape_rules_column_wise(tmp_path):
    runtime = runtime_for(_publish_vshape_rules(tmp_path, 30).directory, "0")
    routes = {rule_id: runtime.rule(rule_id).route for rule_id in runtime.entries}
    assert {rule_id: route.stream for rule_id, route in routes.items()} == dict.fromkeys(
        ("vee/vee", "vee_within/vee_within", "double/double"), COLUMN_WISE
    )


@settings(max_examples=max(EXAMPLES // 3, 10), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), delay_s=st.sampled_from([0, 2, 5]), session_s=st.sampled_from([15, 60]))
def test_the_alerting_worker_s_v_shape_rules_equal_per_key_and_the_replay(tmp_path_factory, seed, delay_s, session_s):
    """``tests/test_alerting_columnwise.py``'s property over the V and W rules: the column-wise worker gives
    the per-key worker's alerts and counts, micro-batch by micro-batch, and the replay's rows and ids."""
    assert_column_wise_worker_as_per_key(
        _publish_vshape_rules(tmp_path_factory.mktemp("rules"), session_s), seed, delay_s, session_s
    )
