"""DEFINE conditions on times, evaluated column-wise (``matcher/vector/kernels.py``, ``lane_frame.py``),
against the Pike VM and the reference matcher.

Timestamps are int64 microseconds in the kernels, dates int64 days, intervals int64 microseconds: the
generators stress what that representation could get wrong. Sub-second steps and equal timestamps (a
difference of exactly the interval, or zero), NULL times in a column that is not the ORDER BY one,
DATE arithmetic (Python's ``date`` keeps whole days: ``date - INTERVAL '1' HOUR`` is the same date),
naive and UTC times (list of dicts, pandas, Arrow), and type mixes the VM rejects (the kernels must
decline them, so the VM raises its own error). Each query runs on the column-wise engine the planner
picks (the regex fast path, or the sequence engine when the condition reads another variable's row or
the query has WITHIN), on the VM, and where it can, on the reference matcher.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import cep
from cep.matcher.rows.tables import rows_to_columns
from cep.matcher.sql import values as V
from cep.matcher.sql.intervals import interval_to_timedelta
from cep.matcher.vector import fastpath, kernels, sequence_plan
from tests import reference_matcher as reference
from tests.test_sequence import on_vm

T0 = dt.datetime(2024, 1, 1)
UTC = dt.UTC
# Steps between a partition's rows, in microseconds: equal times, sub-second steps, and steps at, just
# under and just over the intervals the conditions use (1 s, 1.5 s, 10 s, 1 minute).
STEPS = st.sampled_from(
    [
        0,
        0,
        1,
        250_000,
        500_000,
        999_999,
        1_000_000,
        1_000_001,
        1_500_000,
        2_000_000,
        10_000_000,
        59_999_999,
        60_000_000,
        90_000_000,
    ]
)
NAMES = ("part", "ts", "seen", "day", "value")

# Conditions on the current row and PREV/NEXT: the regex fast path takes them.
ROW = [
    "ts - PREV(ts) > INTERVAL '1' SECOND",
    "ts - PREV(ts) >= INTERVAL '10' SECOND",
    "ts - PREV(ts) = INTERVAL '0' SECOND",
    "ts - PREV(ts) < INTERVAL '0.5' SECOND",
    "ts >= PREV(ts) + INTERVAL '1.5' SECOND",
    "ts - PREV(ts) <= INTERVAL '999' MILLISECOND",
    "NEXT(ts) - ts <= INTERVAL '1' MINUTE",
    "ts - PREV(ts, 2) IN (INTERVAL '1' SECOND, INTERVAL '2' SECOND)",
    "PREV(ts) + INTERVAL '1' MINUTE > ts",
    "ts - INTERVAL '10' SECOND < PREV(ts)",
    "ts - PREV(ts) <> INTERVAL '1' SECOND",
    "seen > ts",
    "seen - ts BETWEEN INTERVAL '-1' SECOND AND INTERVAL '2' SECOND",
    "seen IS NULL",
    "seen = PREV(seen)",
    "seen - INTERVAL '500' MILLISECOND <= ts",
    "ts - seen > INTERVAL '1:30' MINUTE TO SECOND",
    "ts > TIMESTAMP '2024-01-01 00:00:30'",
    "ts >= TIMESTAMP '2024-01-01 02:00:10+02:00'",
    "ts <= TIMESTAMP '2024-01-01 00:00:01.5'",
    "day - PREV(day) >= INTERVAL '1' DAY",
    "day + INTERVAL '36' HOUR > PREV(day)",
    "day - INTERVAL '1' HOUR = day",
    "day + INTERVAL '-1' HOUR < day",
    "day > DATE '2024-01-02'",
    "day - PREV(day) = INTERVAL '0' SECOND",
    "ts - PREV(ts) >= INTERVAL '1 minute 30 seconds'",
    "ts - PREV(ts) < INTERVAL 2 SECONDS",
    "ts + INTERVAL -'1' SECOND < PREV(ts)",
    "value > 1",
    "value IS NULL OR value < 3",
]
# A type mix the VM rejects (a time and a number, an interval and an interval): the kernels decline the
# batch, and the VM raises its error.
REJECTED = [
    "ts > value",
    "ts - PREV(ts) > 5",
    "INTERVAL '1' SECOND + INTERVAL '1' SECOND < ts - PREV(ts)",
    "day - ts > INTERVAL '0' SECOND",
]


def history(name: str, earlier: list[str]) -> list[str]:
    """Conditions that read the match so far: the sequence engine's lanes (``lane_frame.History``)."""
    out = [
        "ts - FIRST(ts) < INTERVAL '1' MINUTE",
        "ts - FIRST(ts) >= INTERVAL '1.5' SECOND",
        f"LAST({name}.ts, 1) IS NULL OR ts - LAST({name}.ts, 1) <= INTERVAL '1' SECOND",
        "ts - MIN(ts) <= INTERVAL '2' SECOND",
        f"MAX({name}.seen) IS NULL OR MAX({name}.seen) > ts",
        f"MIN({name}.day) = day",
        f"COUNT({name}.seen) < 2",
    ]
    for other in earlier:
        out += [
            f"{name}.ts - {other}.ts <= INTERVAL '30' SECOND",
            f"ts >= {other}.ts + INTERVAL '1.5' SECOND",
            f"ts - LAST({other}.ts) >= INTERVAL '2' SECOND",
            f"{name}.seen - {other}.ts > INTERVAL '0' SECOND",
            f"day - FIRST({other}.day) < INTERVAL '2' DAY",
            f"ts = {other}.ts",
            f"MAX({other}.ts) < ts",
            f"ts - MIN({other}.seen) > INTERVAL '500' MILLISECOND",
        ]
    return out


@st.composite
def time_queries(draw, sequence_shapes: bool = True) -> str:
    count = draw(st.sampled_from([1, 1, 2, 2, 3]))
    names = ["A", "B", "C"][:count]
    items, defines = [], []
    for index, name in enumerate(names):
        quantifier = draw(
            st.sampled_from(["", "", "+", "{2}", "{1,3}", "{2,}"] if sequence_shapes else ["", "", "+", "{2}"])
        )
        items.append(name + quantifier)
        choices = ROW + (history(name, names[:index]) if sequence_shapes else [])
        if draw(st.integers(0, 2)):
            condition = draw(st.sampled_from(choices))
            if draw(st.integers(0, 3)) == 0:
                condition = f"({condition}) {draw(st.sampled_from(['AND', 'OR']))} ({draw(st.sampled_from(choices))})"
            defines.append(f"{name} AS {condition}")
    within = draw(st.sampled_from(["", "", " WITHIN INTERVAL '10' SECOND"])) if sequence_shapes else ""
    measures = [
        f"FIRST({names[0]}.ts) AS first_ts",
        f"LAST({names[-1]}.ts) AS last_ts",
        "COUNT(*) AS n",
        f"LAST({names[-1]}.seen) AS seen_at",
        f"LAST({names[-1]}.day) AS last_day",
    ]
    skip = draw(st.sampled_from(["PAST LAST ROW", "TO NEXT ROW"]))
    return (
        f"SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts MEASURES {', '.join(measures)} "
        f"ONE ROW PER MATCH AFTER MATCH SKIP {skip} PATTERN ({' '.join(items)}){within}"
        + (f" DEFINE {', '.join(defines)}" if defines else "")
        + ")"
    )


@st.composite
def timed_rows(draw, max_rows: int = 20, nulls: bool = True) -> list[dict]:
    """Rows of two partitions: ``ts`` (the ORDER BY time, never NULL), ``seen`` (another time, NULL in
    some rows, before, at or after ``ts``), ``day`` (a DATE, NULL in some rows) and ``value``."""
    spec = draw(
        st.lists(
            st.tuples(
                st.sampled_from("xy"),
                STEPS,
                st.sampled_from([None, -1_000_000, 0, 0, 700_000, 2_000_001]),
                st.sampled_from([None, 0, 0, 1, 2, 5]),
                st.sampled_from([None, 0, 1, 2, 3]),
            ),
            max_size=max_rows,
        )
    )
    clock = dict.fromkeys("xy", 0)
    rows = []
    for key, step, seen, day, value in spec:
        clock[key] += step
        ts = T0 + dt.timedelta(microseconds=clock[key])
        rows.append(
            {
                "part": key,
                "ts": ts,
                "seen": None if seen is None or not nulls and seen is None else ts + dt.timedelta(microseconds=seen),
                "day": None if day is None else T0.date() + dt.timedelta(days=day),
                "value": value,
            }
        )
    if not nulls:
        for row in rows:
            row["seen"] = row["seen"] or row["ts"]
            row["day"] = row["day"] or T0.date()
            row["value"] = 0 if row["value"] is None else row["value"]
    return rows


def _column_plan(query, columns):
    """The column-wise plan the query takes (the fast path first, then the sequence engine), or None."""
    machine = query.plan.machine(tuple(columns))
    return fastpath.plan_for(query.statement, machine, tuple(columns)) or sequence_plan.plan_for(
        query.statement, machine, tuple(columns)
    )


def _outcome(run):
    try:
        return "rows", run()
    except cep.CepError as error:
        return "error", error.code


def _typed(result):
    kind, value = result
    if kind == "error":
        return result
    names, rows = value
    return names, [tuple(f"{type(v).__name__}:{v!r}" for v in row) for row in rows]


def _check(text: str, rows: list[dict]) -> None:
    query = cep.compile(text)
    columns = rows_to_columns(rows) if rows else {name: [] for name in NAMES}
    plan = _column_plan(query, columns)
    assert plan is not None, text  # every generated condition is evaluated column-wise
    got = _outcome(lambda: query.plan.run_columns(columns))
    want = _outcome(lambda: on_vm(query, columns))
    assert _typed(got) == _typed(want), f"\n{text}\nrows={rows}"
    if got[0] == "error":
        return
    try:
        names, expected = reference.reference_run_table(query.statement, rows)
    except (reference.ReferenceBudgetExceeded, reference.ReferenceSkipError, reference.ReferenceUnsupported):
        return

    def canonical(names, table):
        return Counter(tuple(sorted((k, repr(v)) for k, v in zip(names, row))) for row in table)

    assert canonical(*got[1]) == canonical(names, expected), f"\n{text}\nrows={rows}"


PROPERTY = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(text=time_queries(sequence_shapes=False), rows=timed_rows())
def test_row_conditions_on_times_on_the_fast_path_equal_the_vm_and_the_reference(text, rows):
    _check(text, rows)


@PROPERTY
@given(text=time_queries(), rows=timed_rows())
def test_history_conditions_on_times_on_the_sequence_engine_equal_the_vm_and_the_reference(text, rows):
    _check(text, rows)


# ``A B*? C`` where C compares its row's time with A's: the run ends at the first row where C holds, found by
# a range search over the rows' ticks (``first_hit.py``) rather than row by row.
LATER = [
    "C.ts >= A.ts + INTERVAL '5' SECOND",
    "ts > A.ts + INTERVAL '1.5' SECOND",
    "A.ts + INTERVAL '10' SECOND <= ts",
    "seen < A.ts",
    "day > A.day",
    "ts - INTERVAL '2' SECOND >= FIRST(A.ts)",
    "NEXT(ts) > A.seen",
    "A.seen - INTERVAL '1' SECOND < seen",
    "ts >= A.day",
]


@st.composite
def first_hit_queries(draw) -> str:
    run = draw(st.sampled_from(["B*?", "B*", "B+?", "B{0,4}", "B{1,3}?"]))
    defines = [f"C AS {draw(st.sampled_from(LATER))}"] + draw(
        st.sampled_from([[], ["A AS value IS NOT NULL"], ["A AS seen IS NOT NULL"]])
    )
    within = draw(st.sampled_from(["", " WITHIN INTERVAL '10' SECOND"]))
    return (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts MEASURES A.ts AS a_ts, C.ts AS c_ts, "
        f"COUNT(B.*) AS waited ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A {run} C){within} "
        f"DEFINE {', '.join(defines)})"
    )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=first_hit_queries(), rows=timed_rows(max_rows=24))
def test_runs_ended_by_a_time_comparison_with_an_earlier_row_equal_the_vm_and_the_reference(text, rows):
    _check(text, rows)


def test_a_run_before_a_later_time_ends_by_the_range_search():
    query = cep.compile(
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts MEASURES A.ts AS a_ts, C.ts AS c_ts, "
        "COUNT(B.*) AS waited PATTERN (A B*? C) DEFINE A AS value = 1, C AS C.ts >= A.ts + INTERVAL '5' SECOND)"
    )
    rows = [
        {"part": "x", "ts": T0 + dt.timedelta(seconds=s), "seen": None, "day": None, "value": v}
        for s, v in zip([0, 1, 2, 4.999999, 5, 6, 7, 12, 12, 20], [1, 0, 1, 0, 0, 1, 0, 0, 0, 1])
    ]
    columns = rows_to_columns(rows)
    plan = _column_plan(query, columns)
    assert plan.hits and (query.plan.run_columns(columns)) == on_vm(query, columns)
    assert plan.stats["first_hit"] >= 1 and plan.stats["vm_partitions"] == 0
    assert "C's comparison" in query.explain()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=time_queries(), rows=timed_rows(max_rows=12), rejected=st.sampled_from(REJECTED))
def test_a_type_mix_the_vm_rejects_gives_the_vms_error(text, rows, rejected):
    assume(rows)
    text = (
        text.replace("ONE ROW PER MATCH", "ONE ROW PER MATCH").replace(" DEFINE ", f" DEFINE Z AS {rejected}, ", 1)
        if " DEFINE " in text
        else text[:-1] + f" DEFINE Z AS {rejected})"
    )
    text = text.replace("PATTERN (", "PATTERN (Z ", 1)
    query = cep.compile(text)
    columns = rows_to_columns(rows)
    assert _outcome(lambda: query.plan.run_columns(columns)) == _outcome(lambda: on_vm(query, columns))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=time_queries(),
    rows=timed_rows(max_rows=14),
    zone=st.sampled_from([None, UTC, dt.timezone(dt.timedelta(hours=2))]),
)
def test_lists_pandas_and_arrow_give_the_vms_rows(text, rows, zone):
    """The same rows as a list of dicts, a pandas frame and an Arrow table, naive or zoned (an aware time
    is an instant, kept in UTC): the column-wise run of each equals the VM's run of the same input."""
    assume(rows)
    if zone is not None:
        for row in rows:
            row["ts"] = row["ts"].replace(tzinfo=zone)
            row["seen"] = row["seen"] and row["seen"].replace(tzinfo=zone)
    query = cep.compile(text)
    frame = pd.DataFrame(rows).astype({"value": "Int64"})
    frame["seen"] = pd.to_datetime(frame["seen"], utc=zone is not None)
    inputs = {"rows": rows, "pandas": frame, "arrow": pa.Table.from_pylist(rows)}
    for library, data in inputs.items():
        got = _outcome(lambda data=data: query.run(data))
        want = _outcome(lambda data=data: cep.compile(text, column_wise=False).run(data))
        assert got[0] == want[0], (library, text, got, want)
        if got[0] == "error":
            assert got == want, (library, text)
        elif library == "pandas":
            pd.testing.assert_frame_equal(got[1], want[1])
        elif library == "arrow":
            assert got[1].equals(want[1]), (library, text)
        else:
            assert _typed(("rows", ([], [tuple(r.items()) for r in got[1]]))) == _typed(
                ("rows", ([], [tuple(r.items()) for r in want[1]]))
            ), (library, text)


def test_generated_queries_run_column_wise_without_falling_back():
    """The properties above must exercise the kernels, not the VM: on rows without NULLs, almost every
    generated query runs every partition column-wise."""
    outcomes: list[bool] = []

    @settings(max_examples=120, database=None, derandomize=True, deadline=None)
    @given(text=time_queries(), rows=timed_rows(nulls=False))
    def collect(text, rows):
        assume(rows and "+02:00" not in text)  # a zoned literal against naive times: the VM's error, on purpose
        query = cep.compile(text)
        columns = rows_to_columns(rows)
        plan = _column_plan(query, columns)
        plan.run(columns, fallback=lambda key, part: [])
        outcomes.append(plan.stats["vm_partitions"] == 0)

    collect()
    assert sum(outcomes) / len(outcomes) > 0.75, Counter(outcomes)


# ------------------------------------------------------------------------------- kernels, one by one


def _evaluate(condition_text: str, columns: dict[str, list]) -> list[bool]:
    """A condition's kernel over one partition of ``columns``."""
    query = cep.compile(
        f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES COUNT(*) AS n PATTERN (A) DEFINE A AS {condition_text})"
    )
    condition = query.statement.match.defines[0].condition
    kernel = kernels.compile_condition(condition, lambda ref: ref.column.name, lambda q: True)
    n = len(next(iter(columns.values())))
    frame = kernels.Frame(
        n,
        {name: (lambda values=values: kernels.load_column(values)) for name, values in columns.items()},
        np.array([0, n]),
    )
    return kernel(frame).tolist()


@pytest.mark.parametrize(
    "interval, unit",
    [
        ("1", "SECOND"),
        ("1.5", "SECOND"),
        ("0.000001", "SECOND"),
        ("0.0000015", "SECOND"),
        ("0.0000025", "SECOND"),
        ("3", "MILLISECOND"),
        ("1.0000005", "MINUTE"),
        ("1:30", "MINUTE TO SECOND"),
        ("2", "DAY"),
        ("-1", "DAY"),
        ("1:1:1", "HOUR TO SECOND"),
    ],
)
def test_an_interval_is_the_vms_timedelta_to_the_microsecond(interval, unit):
    """The kernels read an interval as the VM does (``interval_to_timedelta`` rounds a fraction of a
    microsecond half to even), so a difference exactly at the interval compares equal on both."""
    query = cep.compile(
        f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES COUNT(*) AS n PATTERN (A) "
        f"DEFINE A AS ts - PREV(ts) = INTERVAL '{interval}' {unit})"
    )
    delta = interval_to_timedelta(query.statement.match.defines[0].condition.right)
    stamps = [T0, T0 + delta, T0 + delta + dt.timedelta(microseconds=1), T0 + 2 * delta + dt.timedelta(microseconds=1)]
    stamps = sorted(stamps)
    text = f"ts - PREV(ts) = INTERVAL '{interval}' {unit}"
    expected = [
        V.compare("=", None if i == 0 else V.subtract(b, a), delta) is True
        for i, (a, b) in enumerate(zip([None] + stamps, stamps))
    ]
    assert _evaluate(text, {"ts": stamps}) == expected


def test_date_arithmetic_keeps_whole_days_as_python_does():
    days = [dt.date(2024, 1, 1), dt.date(2024, 1, 2), None, dt.date(2024, 3, 1)]
    for text, function in [
        ("day - INTERVAL '1' HOUR = day", lambda d: V.compare("=", V.subtract(d, dt.timedelta(hours=1)), d)),
        ("day + INTERVAL '-1' HOUR < day", lambda d: V.compare("<", V.add(d, -dt.timedelta(hours=1)), d)),
        (
            "day + INTERVAL '47' HOUR = day + INTERVAL '1' DAY",
            lambda d: V.compare("=", V.add(d, dt.timedelta(hours=47)), V.add(d, dt.timedelta(days=1))),
        ),
    ]:
        assert _evaluate(text, {"day": days, "ts": list(range(4))}) == [function(d) is True for d in days], text


def test_times_beyond_year_9999_are_left_to_the_vm():
    """``ts + INTERVAL`` past datetime.max: the VM raises its error; the kernel declines, never wraps."""
    with pytest.raises(kernels.Unsupported):
        _evaluate("ts + INTERVAL '2' DAY > ts", {"ts": [dt.datetime(9999, 12, 30), dt.datetime(2024, 1, 1)]})
    assert _evaluate("ts + INTERVAL '2' DAY > ts", {"ts": [None, dt.datetime(9999, 12, 1)]}) == [False, True]


@pytest.mark.parametrize(
    "values",
    [
        [T0, T0.replace(tzinfo=UTC)],  # naive and aware: Python refuses to order them
        [T0.replace(tzinfo=dt.timezone(dt.timedelta(hours=1)))],  # only tables.instant's UTC reaches the kernels
        [T0, T0.date()],  # a timestamp and a date
    ],
)
def test_time_columns_the_kernels_decline(values):
    with pytest.raises(kernels.Unsupported):
        kernels.load_column(values)


def test_sensor_gap_runs_on_the_fast_path_with_the_vms_rows():
    """patterns/sensor_gap.sql: a gap of at least 10 minutes between a sensor's readings, column-wise."""
    with open("patterns/sensor_gap.sql") as handle:
        query = cep.compile(handle.read())
    assert "path: fast path" in query.explain()
    steps = [0, 600, 599, 601, 0, 1200, 30, 600]
    rows, expected = [], []
    for sensor, extra in (("T1", 0), ("T2", 500_000)):  # T2: each step half a second longer
        clock = T0
        for index, step in enumerate(steps):
            before, clock = clock, clock + dt.timedelta(seconds=step, microseconds=extra if index else 0)
            rows.append({"sensor": sensor, "ts": clock, "value": 1.0})
            if index and clock - before >= dt.timedelta(minutes=10):
                expected.append(clock - before)
    columns = rows_to_columns(rows)
    names, got = query.plan.run_columns(columns)
    assert (names, got) == on_vm(query, columns)
    assert [row[names.index("silence")] for row in got] == expected and len(expected) == 8
    plan = _column_plan(query, columns)
    plan.run(columns, fallback=lambda key, part: [])
    assert plan.stats["vm_partitions"] == 0


@pytest.mark.spark
def test_spark_replay_of_time_conditions_gives_the_python_engines_rows(spark):
    """The Spark replay hands the engines Arrow batches of Spark's timestamps: the same rows as ``run``."""
    with open("patterns/sensor_gap.sql") as handle:
        texts = [
            handle.read(),
            """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY sensor ORDER BY ts
            MEASURES A.ts AS a_ts, C.ts AS c_ts, C.ts - A.ts AS took PATTERN (A B C)
            DEFINE B AS B.ts - A.ts <= INTERVAL '701' SECOND,
                   C AS ts > TIMESTAMP '2024-01-01 00:11:40' AND C.ts - A.ts < INTERVAL '30' MINUTE)""",
        ]
    steps = [(0, 0), (700, 5), (701, 0), (1400, 1), (1401, 2), (2100, 3), (2100, 3), (2700, 999_999)]
    rows = [
        {"sensor": sensor, "ts": T0 + dt.timedelta(seconds=s, microseconds=us), "v": i}
        for sensor in "ab"
        for i, (s, us) in enumerate(steps)
    ]
    frame = spark.createDataFrame(rows)
    for text in texts:
        query = cep.compile(text)
        want = query.run(rows)
        got = [row.asDict() for row in query.on_spark(frame).collect()]
        assert want and Counter(map(repr, map(sorted, map(dict.items, got)))) == Counter(
            map(repr, map(sorted, map(dict.items, want)))
        ), text
