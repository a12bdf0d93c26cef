"""The fast path (numpy kernels + Python's re over one byte per row) against the Pike VM.

The VM is the reference: on random eligible queries (every pattern operator, both greedinesses,
anchors, exclusions, PERMUTE, every SKIP mode, ONE/ALL ROWS, with and without PARTITION BY) and
random tables, both paths must give exactly the same rows in the same order, or the same error.
Conditions read the current row and PREV/NEXT at constant offsets, with NULLs, NaN, arithmetic,
AND/OR/NOT, BETWEEN, IN and IS NULL. Then: which queries are eligible, and why the others are not.
"""

from __future__ import annotations

import functools
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cep
from cep.grammar import ast as A
from cep.grammar.errors import CepError
from cep.matcher.plan import CompiledQuery
from cep.matcher.rows.tables import rows_to_columns
from cep.matcher.vector import fastpath
from tests.strategies_match import (
    S,
    _measures,
    and_,
    binop,
    cat,
    col,
    count_star,
    first,
    has_exclusion,
    is_null,
    last,
    lit,
    next_,
    not_,
    or_,
    pattern_variables,
    patterns,
    plus,
    prev,
    sql_of,
    star,
    statement,
    var,
)
from tests.strategies_match import agg as aggregate
from tests.strategies_match import alt as alternation
from tests.strategies_match import classifier as classifier_of

# ------------------------------------------------------------------------------------ strategies


# The strategy factories below are cached (as tests/strategies_match.py's are): a composite that built its parts
# afresh at every draw had Hypothesis validate them again each time, most of this file's time; a cached strategy
# draws the same examples.
@functools.cache
def _eligible_conditions(v: str) -> st.SearchStrategy:
    """Conditions that read only the current row and fixed PREV/NEXT offsets."""
    value = col("value")
    own = col("value", v)
    cmp = st.sampled_from(["<", "<=", ">", ">=", "=", "<>"])
    small = st.integers(-1, 6)
    operand = st.one_of(
        st.just(value),
        st.just(own),
        st.builds(lambda n: prev(value, n), st.sampled_from([None, 0, 1, 2])),
        st.builds(lambda n: next_(value, n), st.sampled_from([None, 1, 2])),
        st.just(prev(own)),
        st.builds(lambda op, n: binop(op, value, lit(n)), st.sampled_from(["+", "-", "*", "/", "%"]), small),
        st.builds(lambda op: binop(op, value, prev(value)), st.sampled_from(["+", "-", "*", "/", "%"])),
        st.builds(lambda: prev(binop("+", value, lit(1)))),
        st.builds(lambda n: lit(n), small),
    )
    basic = st.one_of(
        st.builds(lambda op, a, b: binop(op, a, b), cmp, operand, operand),
        st.builds(lambda a, n: binop(">", a, lit(n)), operand, small),
        st.builds(is_null, operand, st.booleans()),
        st.builds(lambda a, lo, hi, neg: A.Between(S, a, lit(lo), lit(hi), neg), operand, small, small, st.booleans()),
        st.builds(
            lambda a, items, neg: A.InList(S, a, tuple(lit(i) for i in items), neg),
            operand,
            st.lists(st.one_of(small, st.none()), min_size=1, max_size=3),
            st.booleans(),
        ),
        st.sampled_from([lit(True), lit(False), lit(None)]),
    )
    return st.one_of(basic, basic, st.builds(and_, basic, basic), st.builds(or_, basic, basic), basic.map(not_))


@st.composite
def eligible_queries(draw) -> A.Statement:
    pattern = draw(patterns())
    pvars = pattern_variables(pattern)
    defines = {v: draw(_eligible_conditions(v)) for v in pvars if draw(st.integers(0, 4)) > 0}
    modes = ["ONE", "ALL_SHOW_EMPTY", "ALL_OMIT_EMPTY"] + ([] if has_exclusion(pattern) else ["ALL_WITH_UNMATCHED"])
    skips = ["PAST_LAST_ROW", "PAST_LAST_ROW", "TO_NEXT_ROW"] + (["TO_FIRST", "TO_LAST"] if pvars else [])
    skip = draw(st.sampled_from(skips))
    return statement(
        pattern,
        defines=defines,
        measures=draw(_measures(tuple(pvars))),
        rows_per_match=draw(st.sampled_from(modes)),
        skip=skip,
        skip_var=draw(st.sampled_from(pvars)) if skip in ("TO_FIRST", "TO_LAST") else None,
        partition_by=("part",) if draw(st.booleans()) else (),
    )


@functools.cache
@st.composite
def tables(draw, max_rows: int = 16) -> list[dict]:
    """Rows of (id shuffled, value, part); values small ints, or floats with NaN, with NULLs."""
    n = draw(st.integers(0, max_rows))
    floats = draw(st.booleans())
    pool = [x / 2 for x in range(-2, 12)] + [math.nan, None] if floats else list(range(-1, 7)) + [None]
    values = draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n))
    parts = draw(st.lists(st.sampled_from(["p", "p", "q", None]), min_size=n, max_size=n))
    order = draw(st.permutations(list(range(n))))
    return [{"id": i + 1, "value": values[i], "part": parts[i]} for i in order]


# -------------------------------------------------------------------------------------- running


def _run(stmt: A.Statement, rows: list[dict], *, fast: bool):
    columns = rows_to_columns(rows) if rows else {"id": [], "value": [], "part": []}
    plan = CompiledQuery(stmt, column_wise=fast)
    try:
        return "rows", [repr(row) for row in plan.run_columns(columns)[1]]
    except CepError as error:
        return "error", error.code


def _is_eligible(stmt: A.Statement) -> bool:
    plan = CompiledQuery(stmt)
    machine = plan.machine(("id", "value", "part"))
    return fastpath.analyze(stmt, machine, ("id", "value", "part"))[0] is not None


FAST = settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)


@FAST
@given(stmt=eligible_queries(), rows=tables())
def test_fast_path_equals_vm(stmt, rows):
    vm = _run(stmt, rows, fast=False)
    fast = _run(stmt, rows, fast=True)
    assert fast == vm, f"\n{sql_of(stmt)}\nrows={rows}\nvm={vm}\nfast={fast}"


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stmt=eligible_queries(), rows=tables(max_rows=60))
def test_fast_path_equals_vm_longer_partitions(stmt, rows):
    assert _run(stmt, rows, fast=True) == _run(stmt, rows, fast=False), sql_of(stmt)


def test_most_generated_queries_are_eligible():
    """The property tests above must exercise the fast path, not only fall back to the VM."""
    seen: list[bool] = []

    @settings(max_examples=80, database=None, derandomize=True, deadline=None)
    @given(stmt=eligible_queries())
    def collect(stmt):
        seen.append(_is_eligible(stmt))

    collect()
    assert sum(seen) / len(seen) > 0.6, (sum(seen), len(seen))


# -------------------------------------------------------------------------------------- examples

V_SHAPE = dict(
    pattern=cat(var("A"), plus(var("B")), plus(var("C"))),
    defines={
        "B": binop("<", col("value", "B"), prev(col("value", "B"))),
        "C": binop(">", col("value", "C"), prev(col("value"))),
    },
    measures=[("n", count_star()), ("bottom", last(col("value", "B")))],
    partition_by=("part",),
)


def _reasons(**overrides) -> list[str]:
    stmt = statement(**{**V_SHAPE, **overrides})
    plan = CompiledQuery(stmt)
    machine = plan.machine(("id", "value", "part"))
    return fastpath.analyze(stmt, machine, ("id", "value", "part"))[1]


def test_v_shape_is_eligible_and_takes_the_regex():
    stmt = statement(**V_SHAPE)
    rows = [{"id": i, "value": v, "part": "p"} for i, v in enumerate([5, 4, 3, 4, 5, 5, 4, 6, 2, 1, 2])]
    plan = CompiledQuery(stmt)
    names, out = plan.run_columns(rows_to_columns(rows))
    fast = fastpath.plan_for(stmt, plan.machine(("id", "value", "part")), ("id", "value", "part"))
    assert fast is not None and fast.stats["regex_partitions"] == 1
    assert out == [("p", 5, 3), ("p", 3, 4), ("p", 3, 1)]
    assert _run(stmt, rows, fast=False) == _run(stmt, rows, fast=True)


@pytest.mark.parametrize(
    "overrides, reason",
    [
        ({"defines": {"B": binop("<", col("value", "B"), col("value", "A"))}}, "reads another variable's row"),
        ({"defines": {"B": binop("<", col("value"), last(col("value", "B"), 1))}}, "LAST() reads the match history"),
        ({"defines": {"B": binop(">", aggregate("SUM", col("value", "B")), lit(3))}}, "Aggregate"),
        ({"defines": {"B": binop("=", prev(classifier_of()), lit("A"))}}, "navigation, aggregate or CLASSIFIER"),
        ({"defines": {"B": binop("<", col("value"), first(col("value")))}}, "FIRST() reads the match history"),
        ({"pattern": plus(cat(var("A"), var("B")))}, "unbounded quantifier over a group"),
        ({"pattern": cat(star(var("A")), star(var("A")), var("B"))}, "two loops on one path share a variable"),
        ({"pattern": cat(plus(star(var("A"))), var("B"), var("C"))}, "unbounded quantifier over a group"),
    ],
)
def test_not_eligible(overrides, reason):
    reasons = _reasons(**overrides)
    assert reasons and reason in reasons[0], reasons


@pytest.mark.parametrize(
    "pattern",
    [
        star(alternation(var("A"), var("B"))),  # (A|B)* is one character class
        star(alternation(var("A"), var("A"))),  # (A|A)*: the exponential case for a naive translation
        cat(var("A"), A.Quantified(S, cat(var("B"), var("C")), 1, 3, True, "{1,3}")),  # unrolled
        A.Permute(S, (var("A"), plus(var("B")), var("C"))),
    ],
)
def test_eligible_patterns(pattern):
    assert _reasons(pattern=cat(pattern, var("B"), var("C"))) == []


def test_overlapping_loops_fall_back_per_batch():
    """A+ B+ where some row is both A and B: the regex could backtrack among splits, so the VM runs."""
    stmt = statement(
        cat(plus(var("A")), plus(var("B"))),
        defines={"A": binop(">", col("value"), lit(0)), "B": binop(">", col("value"), lit(2))},
        measures=[("n", count_star())],
    )
    rows = [{"id": i, "value": v, "part": None} for i, v in enumerate([1, 1, 3, 3, 0, 1, 2])]
    assert _run(stmt, rows, fast=True) == _run(stmt, rows, fast=False)
    plan = CompiledQuery(stmt)
    plan.run_columns(rows_to_columns(rows))
    fast = fastpath.plan_for(stmt, plan.machine(("id", "value", "part")), ("id", "value", "part"))
    assert fast.stats["vm_partitions"] == 1 and fast.stats["regex_partitions"] == 0


def test_long_runs_take_the_linear_run_scan():
    """A+ B over a long run of A rows with no B: re would restart at every row (quadratic), so the
    sequence-of-runs scan (linear) matches the batch, and no partition goes to the VM."""
    stmt = statement(
        cat(plus(var("A")), var("B")),
        defines={"A": binop("=", col("value"), lit(0)), "B": binop("=", col("value"), lit(1))},
        measures=[("n", count_star())],
    )
    rows = [{"id": i, "value": 0, "part": None} for i in range(20_000)] + [{"id": 20_000, "value": 1, "part": None}]
    plan = CompiledQuery(stmt)
    assert plan.run_columns(rows_to_columns(rows))[1] == [(20_001,)]  # every row: 20,000 A and the B
    fast = fastpath.plan_for(stmt, plan.machine(("id", "value", "part")), ("id", "value", "part"))
    assert fast.stats["run_partitions"] == 1 and fast.stats["vm_partitions"] == 0


def test_long_runs_go_to_the_vm_when_the_pattern_is_not_a_sequence_of_runs():
    """A+ (B C | D) over a long run of A rows: not a sequence of runs, so the VM (linear) runs it."""
    stmt = statement(
        cat(plus(var("A")), alternation(cat(var("B"), var("C")), var("D"))),
        defines={
            "A": binop("=", col("value"), lit(0)),
            "B": binop("=", col("value"), lit(1)),
            "C": binop("=", col("value"), lit(2)),
            "D": binop("=", col("value"), lit(3)),
        },
        measures=[("n", count_star())],
    )
    rows = [{"id": i, "value": 0, "part": None} for i in range(20_000)]
    plan = CompiledQuery(stmt)
    assert plan.run_columns(rows_to_columns(rows))[1] == []
    fast = fastpath.plan_for(stmt, plan.machine(("id", "value", "part")), ("id", "value", "part"))
    assert fast.stats["vm_partitions"] == 1 and fast.stats["run_partitions"] == 0


def test_unsupported_data_falls_back_to_the_vm():
    """A column the kernels cannot reproduce exactly (here: integers beyond 64 bits) runs on the VM."""
    stmt = statement(**V_SHAPE)
    rows = [{"id": i, "value": v, "part": "p"} for i, v in enumerate([2**70, 5, 4, 6])]
    assert _run(stmt, rows, fast=True) == _run(stmt, rows, fast=False)


@pytest.mark.parametrize("op", ["=", "<>", "<", "<=", ">", ">="])
def test_decimal_literals_compare_as_values_compare_does(op):
    """A DECIMAL literal against a float column converts to float (values.compare); against an
    integer column it compares exactly, which a kernel reproduces only when no integer lies between
    the decimal and its float, else it refuses (Unsupported) and the VM runs."""
    from decimal import Decimal

    import numpy as np

    from cep.matcher.sql import values as V
    from cep.matcher.vector import kernels

    column = [0.1, 0.5, 2.5, 3.0, math.nan, None, -1.0]
    for literal in (Decimal("0.1"), Decimal("2.5"), Decimal("3")):
        condition = kernels.compile_condition(
            binop(op, col("value"), A.Literal(S, "decimal", literal, str(literal))), lambda ref: "value", lambda q: True
        )
        frame = kernels.Frame(len(column), {"value": lambda: kernels.load_column(column)}, np.array([0, len(column)]))
        expected = [V.compare(op, v, literal) is True for v in column]
        assert condition(frame).tolist() == expected, (op, literal)


def test_unsorted_and_null_order_keys():
    """Partitioning and ORDER BY done column-wise equal the Python sort (NULLs last, ties stable)."""
    stmt = statement(**V_SHAPE)
    ids = [3, None, 1, 2, 2, 5, None, 4, 0]
    rows = [{"id": i, "value": v, "part": p} for i, v, p in zip(ids, [5, 4, 3, 2, 6, 1, 7, 8, 2], "pqpqppqpq")]
    assert _run(stmt, rows, fast=True) == _run(stmt, rows, fast=False)


# ------------------------------------------------------------------- pandas and Arrow input, column-wise
#
# ``Query.run`` on a DataFrame or a Table hands the fast path numpy columns (matcher/vector/arrays.py) and builds
# the result from typed columns. The reference is the Pike VM on the Python values of the same frame
# (``to_columns``), typed by ``from_rows``: the two must give the same frame, dtypes included.

import datetime as _dt  # noqa: E402

import pandas as pd  # noqa: E402
import pyarrow as pa  # noqa: E402

from cep.matcher.rows.tables import from_rows, to_columns  # noqa: E402

_T0 = _dt.datetime(2024, 1, 2, 9, 30)


@functools.cache
def _vector_measures() -> st.SearchStrategy:
    """Every measure kind the fast path computes column-wise, over columns of several types."""
    names = st.sampled_from(["value", "id", "ts", "part", "flag"])
    variables = st.sampled_from(["A", "B", "C"])
    option = st.one_of(
        st.builds(lambda c: first(col(c)), names),
        st.builds(lambda c: last(col(c)), names),
        st.builds(lambda c, v: first(col(c, v)), names, variables),
        st.builds(lambda c, v: last(col(c, v)), names, variables),
        st.builds(lambda c, v: col(c, v), names, variables),
        st.builds(count_star, st.sampled_from([None, "A", "B"])),
        st.just(A.MatchNumber(S)),
    )
    return st.lists(option, min_size=0, max_size=4).map(lambda es: [(f"m{i}", e) for i, e in enumerate(es)])


@st.composite
def column_queries(draw, one_buffer: bool = False) -> A.Statement:
    """ONE ROW PER MATCH queries whose measures the fast path computes column-wise. ``one_buffer``:
    only those it matches with one search over all partitions (SKIP PAST LAST ROW, no empty match,
    no exclusion)."""
    pattern = draw(patterns())
    if one_buffer:
        pattern = cat(pattern, var("A")) if not has_exclusion(pattern) else var("A")
    pvars = pattern_variables(pattern)
    defines = {v: draw(_eligible_conditions(v)) for v in pvars if draw(st.integers(0, 4)) > 0}
    return statement(
        pattern,
        defines=defines,
        measures=draw(_vector_measures()),
        rows_per_match="ONE",
        skip="PAST_LAST_ROW" if one_buffer else draw(st.sampled_from(["PAST_LAST_ROW", "TO_NEXT_ROW"])),
        partition_by=draw(st.sampled_from([(), ("part",), ("part", "flag")])),
        order_by=draw(st.sampled_from([("id",), ("ts",)])),
    )


@functools.cache
@st.composite
def frames(draw, max_rows: int = 20):
    """A pandas DataFrame or a pyarrow Table: id (unique, shuffled), value (ints or floats, NULLs, NaN),
    ts (timestamps with ties and NULLs), part (strings, NULL), flag (booleans)."""
    rows = draw(tables(max_rows=max_rows))
    n = len(rows)
    seconds = draw(st.lists(st.one_of(st.integers(0, 5), st.none()), min_size=n, max_size=n))
    flags = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    for row, second, flag in zip(rows, seconds, flags):
        row["ts"] = None if second is None else _T0 + _dt.timedelta(seconds=second)
        row["flag"] = flag
    names = ["id", "value", "ts", "part", "flag"]
    if draw(st.booleans()):
        typed = {"id": pa.int64(), "value": None, "ts": pa.timestamp("ms"), "part": pa.string(), "flag": pa.bool_()}
        arrays = [pa.array([row[name] for row in rows], type=typed[name]) for name in names]
        return pa.Table.from_arrays(arrays, names=names)
    frame = pd.DataFrame({name: [row[name] for row in rows] for name in names}, columns=names)
    if (
        draw(st.booleans())
        and frame["value"].dropna().map(float.is_integer if frame["value"].dtype == float else bool).all()
    ):
        frame["value"] = frame["value"].astype("Int64")  # pandas' nullable integers
    frame["id"] = frame["id"].astype("int64")
    frame["ts"] = pd.to_datetime(frame["ts"])
    return frame


def _frame_run(stmt: A.Statement, frame, *, fast: bool):
    plan = CompiledQuery(stmt, column_wise=fast)
    if fast:
        return plan.run_frame(frame)
    kind, columns = to_columns(frame)
    return from_rows(kind, *plan.run_columns(columns))


def _describe(stmt: A.Statement) -> str:
    try:
        return sql_of(stmt)
    except TypeError:  # sql_of does not print every expression
        return repr(stmt)


def _assert_same_frame(fast, vm, context: str) -> None:
    if isinstance(vm, pd.DataFrame):
        pd.testing.assert_frame_equal(fast, vm, check_dtype=True, obj=context)
    else:
        assert fast.schema == vm.schema, context
        assert [repr(row) for row in fast.to_pylist()] == [repr(row) for row in vm.to_pylist()], context


def _check_frame(stmt: A.Statement, frame) -> None:
    """The frame path gives the VM's frame, or the same error."""
    try:
        vm = _frame_run(stmt, frame, fast=False)
    except CepError as error:
        with pytest.raises(CepError) as raised:
            _frame_run(stmt, frame, fast=True)
        assert raised.value.code == error.code
        return
    _assert_same_frame(_frame_run(stmt, frame, fast=True), vm, f"\n{_describe(stmt)}\n{frame}")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(stmt=column_queries(), frame=frames())
def test_frames_give_what_python_values_give(stmt, frame):
    """pandas/Arrow input with NULLs, every vector measure kind: the column-wise path equals the VM."""
    _check_frame(stmt, frame)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(stmt=column_queries(one_buffer=True), frame=frames(max_rows=40))
def test_one_buffer_scan_gives_what_python_values_give(stmt, frame):
    """Non-empty patterns under SKIP PAST LAST ROW: one split over every partition equals the VM."""
    _check_frame(stmt, frame)


@st.composite
def run_queries(draw) -> A.Statement:
    """Sequences of one to four variables, each with any quantifier: the shape ``runs.py`` scans."""
    from tests.strategies_match import _QUANTIFIERS, quant

    items = []
    for _ in range(draw(st.integers(1, 4))):
        low, high = draw(st.sampled_from(_QUANTIFIERS + [(1, 1)] * 4))
        term = var(draw(st.sampled_from(["A", "B", "C"])))
        items.append(term if (low, high) == (1, 1) else quant(term, low, high, greedy=draw(st.booleans())))
    pattern = cat(*items)
    defines = {v: draw(_eligible_conditions(v)) for v in pattern_variables(pattern) if draw(st.integers(0, 4)) > 0}
    return statement(
        pattern,
        defines=defines,
        measures=draw(_vector_measures()),
        rows_per_match="ONE",
        skip="PAST_LAST_ROW",
        partition_by=draw(st.sampled_from([(), ("part",)])),
    )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(stmt=run_queries(), frame=frames(max_rows=40))
def test_run_scan_gives_what_python_values_give(stmt, frame):
    """With no restart budget at all, every batch the run scan can take goes to it: it equals the VM."""
    from unittest import mock

    with mock.patch.object(fastpath, "RESTART_BUDGET", 0), mock.patch.object(fastpath, "RESTART_SLACK", -1):
        _check_frame(stmt, frame)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stmt=eligible_queries(), frame=frames(max_rows=40))
def test_frames_on_every_eligible_query(stmt, frame):
    """ALL ROWS, SKIP TO, expressions in measures: the frame path converts what it must and agrees."""
    _check_frame(stmt, frame)


@pytest.mark.parametrize("library", ["pandas", "arrow"])
def test_v_shape_frame_never_builds_python_rows(library, monkeypatch):
    """The V-shape over a frame: no input column is turned into Python values, types are kept."""
    from cep.matcher.vector.layout import ArrayInput

    stmt = statement(
        **{
            **V_SHAPE,
            "measures": [
                ("n", count_star()),
                ("bottom", last(col("value", "B"))),
                ("start", first(col("ts", "A"))),
                ("m", A.MatchNumber(S)),
            ],
        }
    )
    values = [5, 4, 3, 4, 5, 5, 4, 6, 2, 1, 2]
    data = {
        "id": list(range(len(values))),
        "value": values,
        "part": ["p"] * len(values),
        "ts": [_T0 + _dt.timedelta(seconds=i) for i in range(len(values))],
    }
    frame = pd.DataFrame(data) if library == "pandas" else pa.table(data)
    expected = _frame_run(stmt, frame, fast=False)

    def refuse(self):
        raise AssertionError("the input was converted to Python values")

    monkeypatch.setattr(ArrayInput, "python", refuse)
    out = _frame_run(stmt, frame, fast=True)
    _assert_same_frame(out, expected, library)
    rows = out.to_dict("records") if library == "pandas" else out.to_pylist()
    assert [(r["n"], r["bottom"], r["m"]) for r in rows] == [(5, 3, 1), (3, 4, 2), (3, 1, 3)]
    if library == "pandas":
        assert str(out["bottom"].dtype) == "int64" and str(out["start"].dtype) == "datetime64[ns]"
    else:
        assert out.schema.field("bottom").type == pa.int64() and out.schema.field("start").type == pa.timestamp("us")


def _share_calling(monkeypatch, module, name: str, queries, frame_strategy, examples: int) -> float:
    """Over ``examples`` generated (query, frame) pairs the fast path takes (and that compile): the share
    of runs that call ``module.name``."""
    calls: list[int] = []
    original = getattr(module, name)
    monkeypatch.setattr(module, name, lambda *args: calls.append(1) or original(*args))
    runs = []

    @settings(max_examples=examples, database=None, derandomize=True, deadline=None)
    @given(stmt=queries, frame=frame_strategy)
    def collect(stmt, frame):
        names = ("id", "value", "ts", "part", "flag")
        try:
            machine = CompiledQuery(stmt).machine(names)
        except CepError:  # a measure naming a variable the pattern does not have
            return
        if len(frame) and fastpath.analyze(stmt, machine, names)[0] is not None:
            runs.append(1)
            _frame_run(stmt, frame, fast=True)

    collect()
    return len(calls) / len(runs)


def test_most_generated_frames_take_the_column_path(monkeypatch):
    """The frame property test must exercise the typed column output, not only the conversions."""
    import cep.matcher.plan as plan_module

    assert _share_calling(monkeypatch, plan_module, "from_columns", column_queries(), frames(), 60) > 0.6


# ------------------------------------------------------------------- ALL ROWS PER MATCH, column-wise


@functools.cache
def _all_rows_measures(qualifiers: tuple[str, ...]) -> st.SearchStrategy:
    """Every measure kind ``matcher/vector/all_rows.py`` computes: RUNNING (the default) and FINAL FIRST/LAST,
    column references qualified and not, COUNT(*)/COUNT(v.*), CLASSIFIER(), MATCH_NUMBER()."""
    names = st.sampled_from(["value", "id", "ts", "part", "flag"])
    variables = st.sampled_from(qualifiers)
    semantics = st.sampled_from([None, "RUNNING", "FINAL"])
    option = st.one_of(
        st.builds(col, names),
        st.builds(col, names, variables),
        st.builds(lambda c, s: first(col(c), semantics=s), names, semantics),
        st.builds(lambda c, s: last(col(c), semantics=s), names, semantics),
        st.builds(lambda c, v, s: first(col(c, v), semantics=s), names, variables, semantics),
        st.builds(lambda c, v, s: last(col(c, v), semantics=s), names, variables, semantics),
        st.builds(lambda c, v, s: last(col(c, v), 0, semantics=s), names, variables, semantics),
        st.builds(count_star, st.one_of(st.none(), variables), semantics),
        st.just(classifier_of()),
        st.just(A.MatchNumber(S)),
    )
    return st.lists(option, min_size=0, max_size=5).map(lambda es: [(f"m{i}", e) for i, e in enumerate(es)])


@st.composite
def all_rows_queries(draw) -> A.Statement:
    """ALL ROWS PER MATCH (SHOW or OMIT EMPTY) under SKIP PAST LAST ROW over non-empty patterns with no
    exclusion: the queries whose every output row the fast path computes column-wise."""
    pattern = draw(patterns())
    pattern = cat(pattern, var("A")) if not has_exclusion(pattern) else var("A")
    pvars = pattern_variables(pattern)
    subsets = (
        {"U": tuple(sorted(set(draw(st.lists(st.sampled_from(pvars), min_size=1, max_size=2)))))}
        if draw(st.booleans())
        else {}
    )
    defines = {v: draw(_eligible_conditions(v)) for v in pvars if draw(st.integers(0, 4)) > 0}
    return statement(
        pattern,
        defines=defines,
        measures=draw(_all_rows_measures((*pvars, *subsets))),
        rows_per_match=draw(st.sampled_from(["ALL_SHOW_EMPTY", "ALL_OMIT_EMPTY"])),
        skip="PAST_LAST_ROW",
        partition_by=draw(st.sampled_from([(), ("part",), ("part", "flag")])),
        order_by=draw(st.sampled_from([("id",), ("ts",), ("ts", "id")])),
        subsets=subsets,
    )


ALL_ROWS = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)


@ALL_ROWS
@given(stmt=all_rows_queries(), frame=frames(max_rows=40))
def test_all_rows_column_wise_gives_what_python_values_give(stmt, frame):
    """ALL ROWS PER MATCH over pandas/Arrow input: the column-wise rows equal the VM's frame."""
    _check_frame(stmt, frame)


@ALL_ROWS
@given(stmt=all_rows_queries(), rows=tables(max_rows=40))
def test_all_rows_column_wise_on_python_values(stmt, rows):
    """The same over Python values (``run_columns``): the rows equal the VM's, in order."""
    assert _run(stmt, rows, fast=True) == _run(stmt, rows, fast=False), sql_of(stmt)


def test_most_generated_all_rows_queries_take_the_column_path(monkeypatch):
    """The ALL ROWS property tests must exercise ``all_rows.columns``, not the per-row output."""
    from cep.matcher.vector import all_rows

    assert _share_calling(monkeypatch, all_rows, "columns", all_rows_queries(), frames(max_rows=40), 80) > 0.6


def test_all_rows_v_shape_running_and_final():
    """The V-shape in ALL ROWS: RUNNING values grow with the match (FIRST(C.value) is NULL until a C row),
    FINAL ones are the match's."""
    stmt = statement(
        **{
            **V_SHAPE,
            "rows_per_match": "ALL_SHOW_EMPTY",
            "measures": [
                ("cls", classifier_of()),
                ("n", count_star()),
                ("nb", count_star("B", "FINAL")),
                ("bottom", last(col("value", "B"))),
                ("low", last(col("value", "B"), semantics="FINAL")),
                ("top", first(col("value", "C"))),
                ("m", A.MatchNumber(S)),
            ],
        }
    )
    rows = [{"id": i, "value": v, "part": "p"} for i, v in enumerate([5, 4, 3, 4, 5, 5, 4, 6])]
    plan = CompiledQuery(stmt)
    out = plan.run_columns(rows_to_columns(rows))[1]
    fast = fastpath.plan_for(stmt, plan.machine(("id", "value", "part")), ("id", "value", "part"))
    assert fast.all_rows is not None and fast.stats["regex_partitions"] == 1
    assert [row[2:9] for row in out] == [
        ("A", 1, 2, None, 3, None, 1),
        ("B", 2, 2, 4, 3, None, 1),
        ("B", 3, 2, 3, 3, None, 1),
        ("C", 4, 2, 3, 3, 4, 1),
        ("C", 5, 2, 3, 3, 4, 1),
        ("A", 1, 1, None, 4, None, 2),
        ("B", 2, 1, 4, 4, None, 2),
        ("C", 3, 1, 4, 4, 6, 2),
    ]
    assert _run(stmt, rows, fast=True) == _run(stmt, rows, fast=False)


@pytest.mark.parametrize("offset", [-12, -9, -8, -3, -1, 1, 2, 8, 9, 15])
def test_shifted_columns_are_null_outside_the_partition(offset):
    """PREV/NEXT at any offset: row i reads row i + offset of its own partition, else NULL (short
    offsets mark partition edges one distance at a time, long ones compare every row)."""
    import numpy as np

    from cep.matcher.vector import kernels

    sizes = [0, 1, 3, 8, 9, 20, 2]
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    n = int(offsets[-1])
    values = np.arange(n, dtype=np.int64) * 10
    frame = kernels.Frame(n, {"v": lambda: kernels.Value("int", values, None)}, offsets)
    shifted = frame.column("v", offset)
    expected = []
    for begin, end in zip(offsets[:-1], offsets[1:]):
        expected += [values[i + offset] if begin <= i + offset < end else None for i in range(begin, end)]
    got = [None if null else int(v) for v, null in zip(shifted.data, shifted.nulls)]
    assert got == expected


def test_eight_variables_with_long_runs_across_partitions():
    """With 8 variables every byte value is a possible row (0xFF too), so the restart budget must end
    runs at the partitions' ends itself: a long run in one partition does not spill into the next."""
    names = "ABCDEFGH"
    stmt = statement(
        cat(*[var(v) for v in names[:-1]], plus(var("H"))),
        defines={v: binop(">=", col("value"), lit(0)) for v in names},  # every row is every variable: 0xFF
        measures=[("n", count_star())],
        partition_by=("part",),
    )
    # each partition's run is within budget (60**2 <= 64 * 60 + slack); the two as one run would not be
    rows = [{"id": i, "value": 1, "part": part} for part in "pq" for i in range(60)]
    frame = pd.DataFrame(rows)
    plan = CompiledQuery(stmt)
    fast = fastpath.plan_for(stmt, plan.machine(tuple(frame.columns)), tuple(frame.columns))
    assert fast is not None and fast.separated_regex is None  # 8 variables: no byte is free to separate
    assert 60**2 <= fastpath.RESTART_BUDGET * 60 + fastpath.RESTART_SLACK < 120**2
    out = plan.run_frame(frame)
    assert out.to_dict("records") == [{"part": "p", "n": 60}, {"part": "q", "n": 60}]
    assert fast.stats["regex_partitions"] == 2 and fast.stats["vm_partitions"] == 0
    _assert_same_frame(out, _frame_run(stmt, frame, fast=False), "vm")


def test_column_wise_false_runs_every_partition_on_the_vm():
    """``column_wise=False`` (the reference the comparisons above run against) really leaves the column-wise
    engines out, for that query only: the same rows, from the VM."""
    text = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY id MEASURES COUNT(*) AS n PATTERN (A B+) "
        "DEFINE A AS value = 0, B AS value > PREV(value))"
    )
    rows = [{"id": i, "value": i % 4, "part": "pq"[i % 2]} for i in range(40)]
    names = ("id", "value", "part")
    fast, vm = cep.compile(text), cep.compile(text, column_wise=False)
    assert fast.plan.route(names).column_plan is not None
    assert vm.plan.route(names).column_plan is None
    assert vm.run(rows) == fast.run(rows) != []
