"""WITHIN, SHOW TIMEOUT MATCHES and the clock: the rules of docs/semantics.md ("Event time"), on the
Pike VM, against the reference matcher (``tests/reference_matcher.py``, which knows WITHIN and timeouts).

1. VM == reference: random sequence patterns (single rows, bounded and unbounded counts, greedy and
   reluctant, alternations of variables) with DEFINE conditions on the current row, PREV and earlier
   variables, over rows whose time gaps sit just inside, at and past the limit, with and without
   SHOW TIMEOUT MATCHES.
2. The time told in pieces (``advance`` after every few rows, as micro-batches do) gives what the time
   told once at the end gives: a start tried after an earlier start timed out knows the clock too.
3. The documented example: the plain run, the session replay and ``LocalStream`` give the same TIMEOUT rows.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import cep
from cep.matcher.pike.vm import PartitionMatcher, match_partition
from cep.matcher.plan import replay_clock
from cep.matcher.rows.tables import rows_to_columns
from cep.spark_bridge.engine.keyed import KeyedStream
from cep.spark_bridge.engine.local import LocalStream
from tests import reference_matcher as reference

T0 = dt.datetime(2024, 1, 1)
WITHIN_S = 10
# Gaps (seconds) between a partition's consecutive rows: ties, small steps, and steps that put a row
# just inside (9), at (10) and past (11, 30) the limit of a partial match that began a row earlier.
GAPS = st.sampled_from([0, 1, 1, 2, 3, 4, 9, 10, 11, 30])

VARIABLES = ("A", "B", "C")
ROW_CONDITIONS = [
    "value < 2",
    "value >= 2",
    "value = 3",
    "value > PREV(value)",
    "value <= PREV(value)",
    "value <> 1",
    "TRUE",
]


def history_conditions(variable: str, earlier: list[str]) -> list[str]:
    """Conditions that read an earlier variable's row, the first row or the last rows of the match."""
    out = [
        f"{variable}.value > FIRST(value)",
        "value < LAST(value, 1)",
        f"LAST({variable}.value, 1) IS NULL OR value >= LAST({variable}.value, 1)",
        f"SUM({variable}.value) < 6",
        f"COUNT({variable}.*) <= 2",
    ]
    out += [f"{variable}.value > {other}.value" for other in earlier]
    out += [f"value <= {other}.value + 1" for other in earlier]
    return out


@st.composite
def within_queries(draw, history: bool = True) -> str:
    """A sequence of 1-4 items, each a variable (or an alternation of two) with a quantifier."""
    count = draw(st.integers(1, 4))
    items, used = [], []
    for _ in range(count):
        name = draw(st.sampled_from(VARIABLES))
        term = name
        if draw(st.integers(0, 5)) == 0:
            other = draw(st.sampled_from([v for v in VARIABLES if v != name]))
            term = f"({name} | {other})"
            used.append(other)
        quantifier = draw(st.sampled_from(["", "", "+", "*", "?", "{2,}", "{1,3}", "{2}"]))
        if quantifier and draw(st.booleans()):
            quantifier += "?"
        items.append(term + quantifier)
        used.append(name)
    defines = []
    seen: list[str] = []
    for name in dict.fromkeys(used):
        if draw(st.integers(0, 4)) == 0:
            seen.append(name)
            continue  # no DEFINE: every row
        options = ROW_CONDITIONS + (history_conditions(name, seen) if history else [])
        condition = draw(st.sampled_from(options))
        if draw(st.integers(0, 3)) == 0:
            condition = f"({condition}) AND ({draw(st.sampled_from(ROW_CONDITIONS))})"
        defines.append(f"{name} AS {condition}")
        seen.append(name)
    timeouts = draw(st.booleans())
    skip = draw(st.sampled_from(["PAST LAST ROW", "PAST LAST ROW", "TO NEXT ROW"]))
    measures = "FIRST(ts) AS first_ts, LAST(ts) AS last_ts, COUNT(*) AS n, MATCH_NUMBER() AS mno"
    if timeouts:
        measures += ", MATCH_STATUS() AS status"
    return (
        f"SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts MEASURES {measures} "
        f"ONE ROW PER MATCH{' SHOW TIMEOUT MATCHES' if timeouts else ''} AFTER MATCH SKIP {skip} "
        f"PATTERN ({' '.join(items)}) WITHIN INTERVAL '{WITHIN_S}' SECOND"
        + (f" DEFINE {', '.join(defines)}" if defines else "")
        + ")"
    )


@st.composite
def timed_rows(draw, max_rows: int = 14) -> list[dict]:
    spec = draw(st.lists(st.tuples(st.sampled_from("xy"), GAPS, st.integers(0, 4)), max_size=max_rows))
    clock = {"x": 0, "y": 0}
    rows = []
    for key, gap, value in spec:
        clock[key] += gap
        rows.append({"part": key, "ts": T0 + dt.timedelta(seconds=clock[key]), "value": value})
    return rows


def _canonical(rows) -> Counter:
    return Counter(tuple(sorted((k, repr(v)) for k, v in row.items())) for row in rows)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=within_queries(), rows=timed_rows(), extra_clock=st.sampled_from([None, 0, 9, 10, 60]))
def test_vm_equals_reference_with_within_and_timeouts(text, rows, extra_clock):
    query = cep.compile(text)
    columns = rows_to_columns(rows) if rows else {"part": [], "ts": [], "value": []}
    clock = None
    if rows and extra_clock is not None:  # the replay's clock, or time told further than the last row
        clock = max(r["ts"] for r in rows) + dt.timedelta(seconds=extra_clock)
    try:
        expected = reference.reference_run(query.statement, rows, clock=clock)
    except reference.ReferenceBudgetExceeded:
        assume(False)
    names, out = query.plan.run_columns(columns, clock=clock)
    got = [dict(zip(names, row)) for row in out]
    assert _canonical(got) == _canonical(expected), f"\n{text}\nrows={rows}\nengine={got}\nreference={expected}"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=within_queries(),
    rows=timed_rows(),
    cuts=st.lists(st.integers(0, 14), max_size=5),
    lag=st.sampled_from([0, 1, 5, 10]),
)
def test_time_told_in_pieces_equals_time_told_once(text, rows, cuts, lag):
    """A stream feeds rows and tells the time (its watermark, ``lag`` behind the last row) after each
    micro-batch; the output is that of one feed and one clock, whatever the cuts."""
    assume(rows)
    plan = cep.compile(text).plan
    columns = rows_to_columns(rows)
    machine = plan.machine(tuple(columns))
    clock = replay_clock(machine, columns)
    for key, indices in plan.partitions(machine, columns):
        part = {name: [columns[name][i] for i in indices] for name in machine.columns}
        once = match_partition(machine, key, part, clock)
        matcher = PartitionMatcher(machine, key)
        pieces, begin = [], 0
        for cut in sorted({c % (len(indices) + 1) for c in cuts}) + [len(indices)]:
            pieces += matcher.feed({name: values[begin:cut] for name, values in part.items()})
            if cut:
                pieces += matcher.advance(part["ts"][cut - 1] - dt.timedelta(seconds=lag))
            begin = max(begin, cut)
        pieces += matcher.advance(clock)
        pieces += matcher.finish()
        assert pieces == once, text


ISSUE_QUERY = """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts
  MEASURES FIRST(ts) AS first_ts, COUNT(F.*) AS fails, MATCH_STATUS() AS status
  ONE ROW PER MATCH SHOW TIMEOUT MATCHES
  PATTERN (F{2,} O) WITHIN INTERVAL '30' SECOND
  DEFINE F AS e = 'fail', O AS e = 'ok')"""


def test_the_issues_timeouts_agree_in_the_run_the_replay_and_the_stream():
    """Issue 16 item 9: a run of two fails, then a gap longer than the 3-minute session timeout."""
    at = lambda m, s: T0 + dt.timedelta(minutes=m, seconds=s)  # noqa: E731
    rows = [
        dict(k="u", ts=at(1, 2), e="login"),
        dict(k="u", ts=at(1, 47), e="fail"),
        dict(k="u", ts=at(2, 7), e="fail"),
        dict(k="u", ts=at(5, 27), e="view"),
        dict(k="u", ts=at(9, 0), e="view"),
        dict(k="u", ts=at(20, 0), e="view"),
    ]
    query = cep.compile(ISSUE_QUERY)
    want = [("u", at(1, 47), 2, "TIMEOUT"), ("u", at(2, 7), 1, "TIMEOUT")]
    assert [tuple(r.values()) for r in query.run(rows)] == want
    replayed = query.run(rows, session_timeout="3 minutes", match_ids=True)
    assert [tuple(r.values())[:-1] for r in replayed] == want
    assert [tuple(r.values()) for r in reference.reference_run(query.statement, rows)] == want
    for sizes in ([1] * 6, [3, 3], [6]):  # one row a micro-batch, two batches, one
        stream = LocalStream(
            KeyedStream(query.plan, ("k", "ts", "e"), query_text=query.text, session_timeout_us=180_000_000), delay_ms=0
        )
        got, ids, begin = [], [], 0
        for size in sizes + [0, 0]:
            out, batch_ids, _ = stream.run_batch(rows[begin : begin + size])
            got, ids, begin = got + out, ids + batch_ids, begin + size
        assert got == want
        assert ids == [r["match_id"] for r in replayed]


def test_a_match_waiting_for_the_partitions_end_is_not_expired_by_within():
    """``A+ $``: the match's rows are inside the limit; time passing it before the end of the input
    (a session's end) does not turn the match into a timeout."""
    query = cep.compile("""SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts
        MEASURES COUNT(*) AS n, MATCH_STATUS() AS status ONE ROW PER MATCH SHOW TIMEOUT MATCHES
        PATTERN (A+ $) WITHIN INTERVAL '10' SECOND DEFINE A AS v > 0)""")
    rows = [dict(k="u", ts=T0 + dt.timedelta(seconds=s), v=1) for s in (0, 3, 6)]
    assert query.run(rows) == [{"k": "u", "n": 3, "status": "MATCHED"}]
    assert [r["n"] for r in query.run(rows, session_timeout="1 minute")] == [3]
