"""Aggregates in DEFINE (RUNNING semantics), which the Pike VM carries as running state per thread.

``matcher/sql/running.py`` folds SUM/COUNT/AVG/MIN/MAX one row at a time along each thread's history
instead of over the whole partial match at every evaluation. These properties check it against the
plain backtracking reference (``tests/reference_matcher.py``), which folds from scratch every time,
on floats that round (0.1 + 0.2), NULLs, integers mixed with floats, aggregates over one variable,
another one, a SUBSET and every row; and that the state still survives a JSON round trip.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cep.grammar.errors import CepError, CepRuntimeError
from cep.grammar.parser import parse
from cep.matcher.plan import CompiledQuery
from cep.matcher.rows.tables import rows_to_columns
from cep.matcher.sql.running import FOLDS as RUNNING_FOLDS
from tests import reference_matcher as reference
from tests.strategies_match import (
    VARIABLES,
    agg,
    and_,
    binop,
    classifier,
    col,
    count_star,
    lit,
    or_,
    pattern_variables,
    patterns,
    sql_of,
    statement,
)
from tests.test_matcher_properties import _canonical, _incremental

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Values whose running sums round differently depending on the order of the additions.
VALUES = [0, 1, 2, 5, 0.1, 0.2, 0.3, 1.5, -0.7, None, None]
FOLDS = ["SUM", "COUNT", "AVG", "MIN", "MAX"]


@st.composite
def aggregate_terms(draw, qualifiers: tuple[str, ...]):
    """``SUM(B.value)``, ``COUNT(*)``, ``AVG(value)``, ... over a variable, the subset U, or every row."""
    qualifier = draw(st.sampled_from(qualifiers + (None,)))
    if draw(st.integers(0, 5)) == 0:
        return count_star(qualifier)
    return agg(draw(st.sampled_from(FOLDS)), col("value", qualifier))


@st.composite
def aggregate_conditions(draw, qualifiers: tuple[str, ...]):
    term = draw(aggregate_terms(qualifiers))
    if draw(st.booleans()):
        term = binop(draw(st.sampled_from(["+", "-"])), term, col("value"))
    op = draw(st.sampled_from(["<", "<=", ">", ">=", "=", "<>"]))
    bound = draw(st.one_of(st.integers(0, 6), st.sampled_from([0.3, 0.6, 1.5, 2.5]).map(lit), st.just(col("value"))))
    condition = binop(op, term, bound if not isinstance(bound, int) else lit(bound))
    if draw(st.integers(0, 3)) == 0:
        other = draw(aggregate_conditions(qualifiers))
        condition = draw(st.sampled_from([and_, or_]))(condition, other)
    return condition


@st.composite
def aggregate_queries(draw):
    pattern = draw(patterns(VARIABLES, max_leaves=4))
    variables = pattern_variables(pattern)
    subsets = {}
    if len(variables) >= 2 and draw(st.booleans()):
        subsets["U"] = tuple(sorted(draw(st.lists(st.sampled_from(variables), min_size=1, unique=True))))
    qualifiers = tuple(variables) + tuple(subsets)
    defines = {v: draw(aggregate_conditions(qualifiers)) for v in variables if draw(st.integers(0, 5)) > 0}
    measures = [("n", count_star()), ("total", agg("SUM", col("value"))), ("label", classifier())]
    return statement(
        pattern,
        defines=defines,
        measures=measures,
        rows_per_match=draw(st.sampled_from(["ONE", "ALL_SHOW_EMPTY"])),
        skip=draw(st.sampled_from(["PAST_LAST_ROW", "TO_NEXT_ROW"])),
        partition_by=("part",) if draw(st.booleans()) else (),
        subsets=subsets,
    )


@st.composite
def float_tables(draw, max_rows: int = 14):
    n = draw(st.integers(0, max_rows))
    values = draw(st.lists(st.sampled_from(VALUES), min_size=n, max_size=n))
    parts = draw(st.lists(st.sampled_from(["p", "q"]), min_size=n, max_size=n))
    return [{"id": i + 1, "value": values[i], "part": parts[i]} for i in range(n)]


def _vm(stmt, rows):
    # aggregates never take the regex fast path; be sure no column-wise engine runs
    names, out = CompiledQuery(stmt, column_wise=False).run_columns(
        rows_to_columns(rows) if rows else {"id": [], "value": [], "part": []}
    )
    return [dict(zip(names, row)) for row in out]


@SETTINGS
@given(stmt=aggregate_queries(), rows=float_tables())
def test_define_aggregates_equal_the_reference(stmt, rows):
    try:
        expected = reference.reference_run(stmt, rows)
    except (reference.ReferenceBudgetExceeded, reference.ReferenceSkipError):
        assume(False)
    except CepError as error:
        with pytest.raises(CepError) as raised:
            _vm(stmt, rows)
        assert raised.value.code == error.code
        return
    got = _vm(stmt, rows)
    # repr: floats must agree to the last bit, so the running folds add in the reference's order
    assert _canonical(got) == _canonical(expected), f"\n{sql_of(stmt)}\nrows={rows}\nvm={got}\nreference={expected}"


@SETTINGS
@given(stmt=aggregate_queries(), rows=float_tables(14), cuts=st.lists(st.integers(0, 20), max_size=5))
def test_define_aggregates_survive_the_state_round_trip(stmt, rows, cuts):
    """The running state is not serialized: from_state replays it over the buffered rows."""
    assume(rows)
    plan = CompiledQuery(stmt)
    try:
        _, whole = plan.run_columns(rows_to_columns(rows), outer_order_and_limit=False)
    except CepError:
        assume(False)
    assert Counter(map(repr, _incremental(plan, rows, cuts))) == Counter(map(repr, whole)), sql_of(stmt)


def _run_text(query: str, rows: list[dict]):
    return CompiledQuery(parse(query)).run_columns(rows_to_columns(rows))[1]


def test_a_fold_that_fails_raises_only_when_its_value_is_read():
    """SUM over strings: the running fold step fails at the second row, yet the error surfaces only
    where the full fold raises it, when a condition reads the aggregate (not when OR short-circuits)."""
    rows = [{"id": i + 1, "value": i, "name": name} for i, name in enumerate(["x", "y", "z"])]
    shape = """SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS n ONE ROW PER MATCH
        PATTERN (A+) DEFINE A AS {} OR SUM(A.name) > 0)"""
    assert _run_text(shape.format("value >= 0"), rows) == [(3,)]
    with pytest.raises(CepRuntimeError) as raised:
        _run_text(shape.format("id = 1"), rows)  # row 2 reads SUM('x', 'y')
    assert raised.value.code == "E0410" and "'+'" in str(raised.value)


def test_a_start_still_alive_at_the_end_of_input_does_not_hide_later_starts():
    """Lazy starts (conditions read the history): the start at row 1 is still waiting for B when the
    input ends; the start at row 2 matches rows 2-3 (A = 0, then B with SUM(A.value) = 0 < 1).
    Found by the property above; ending the search at the first start would be wrong."""
    text = """SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS n, FIRST(A.id) AS a
        ONE ROW PER MATCH PATTERN (A*? B) DEFINE B AS SUM(A.value) < 1)"""
    rows = [{"id": 1, "value": 1}, {"id": 2, "value": 0}, {"id": 3, "value": 0}]
    assert reference.reference_run(parse(text), rows) == [{"n": 2, "a": 2}]
    assert _run_text(text, rows) == [(2, 2)]


WITHIN_PATTERNS = ["A B*? C", "A B+ C", "A+ B", "(A | B)+ C"]
WITHIN_DEFINES = [
    "C AS C.value < A.value - 0.5",
    "B AS SUM(A.value) > 2, C AS C.value > B.value",
    "A AS value >= 1, C AS COUNT(B.*) >= 1 AND C.value < FIRST(A.value)",
    "B AS B.value <> A.value",
]


@SETTINGS
@given(
    pattern=st.sampled_from(WITHIN_PATTERNS),
    define=st.sampled_from(WITHIN_DEFINES),
    seconds=st.integers(1, 6),
    values=st.lists(st.sampled_from([0, 1, 2, 3, 0.5, None]), max_size=14),
    gaps=st.lists(st.integers(0, 3), min_size=14, max_size=14),
)
def test_within_equals_the_reference(pattern, define, seconds, values, gaps):
    """WITHIN expiry while rows are stepped several at a time: the VM equals the reference."""
    import datetime as dt

    text = f"""SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(ts) AS first_ts, COUNT(*) AS n
        ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN ({pattern}) WITHIN INTERVAL '{seconds}' SECOND
        DEFINE {define})"""
    defined = {part.split(" AS ")[0].strip() for part in define.split(", ") if " AS " in part}
    assume(
        defined
        <= set(
            pattern.replace("(", " ").replace(")", " ").replace("|", " ").replace("+", " ").replace("*?", " ").split()
        )
    )
    start = dt.datetime(2024, 1, 2, 9, 30)
    rows, ts = [], start
    for value, gap in zip(values, gaps):
        ts += dt.timedelta(seconds=gap + 1)
        rows.append({"ts": ts, "value": value})
    stmt = parse(text)
    try:
        expected = [tuple(r.values()) for r in reference.reference_run(stmt, rows)]
    except (reference.ReferenceBudgetExceeded, reference.ReferenceSkipError):
        assume(False)
    got = CompiledQuery(stmt).run_columns(rows_to_columns(rows) if rows else {"ts": [], "value": []})[1]
    assert got == expected, text


def test_a_measure_reads_the_aggregate_that_define_carries():
    """ONE ROW PER MATCH: SUM/AVG/MAX/COUNT(A.*) in MEASURES that DEFINE also carries are read from the
    states after the match's last row (ExpressionCompiler._final_state), bit for bit the plain fold."""
    rows = [{"id": i + 1, "value": v} for i, v in enumerate([0.1, 0.2, 0.3, 5, 0.1, 0.2, 7])]
    text = """SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id
        MEASURES SUM(A.value) AS s, AVG(A.value) AS a, MAX(A.value) AS m, COUNT(A.*) AS n
        ONE ROW PER MATCH PATTERN (A+ B)
        DEFINE A AS SUM(A.value) < 1 AND AVG(A.value) < 1 AND COUNT(A.*) < 9, B AS MAX(A.value) >= 0.3)"""
    plan = CompiledQuery(parse(text))
    measures = plan.machine(("id", "value")).output.measures
    carried = {"final_state" if name in RUNNING_FOLDS else "aggregate" for name in ("SUM", "AVG", "MAX", "COUNT")}
    # SUM and AVG are full folds from Python 3.12 (running.py); an integer SUM's overflow check wraps the
    # closure it checks (operators.bounded)
    assert {getattr(m, "__wrapped__", m).__name__ for m in measures} == carried
    a = [0.1, 0.2, 0.3]
    assert plan.run_columns(rows_to_columns(rows))[1] == [(sum(a), sum(a) / 3, 0.3, 3)]
