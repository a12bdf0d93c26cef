"""Issue 15's semantic bugs, each pinned by the example that showed it (the property tests in
test_matcher_properties.py compare the engine with the reference matcher on random queries)."""

from __future__ import annotations

import pytest

import cep
from cep.grammar.parser import parse
from tests import reference_matcher as reference


def _rows(values, column="price"):
    return [{"id": i + 1, column: v} for i, v in enumerate(values)]


def _both(text: str, rows: list[dict]) -> list[dict]:
    """The engine's rows, checked equal to the reference matcher's (as a multiset)."""
    got = cep.compile(text).run(rows)
    want = reference.reference_run(parse(text), rows)
    assert sorted(map(repr, got)) == sorted(map(repr, want))
    return got


# ---------------------------------------------------------------------------------------- PERMUTE


@pytest.mark.parametrize("history", ["", " AND COUNT(*) > 0"])
def test_permute_prefers_orders_in_the_standard_expansion(history: str) -> None:
    # PERMUTE(A?, B, C) = A? B C | A? C B | B A? C | ...: the first order with A? empty gives B, C,
    # before the second order (A C B) is tried. A prefix tree A? (B C | C B) gave A, C, B.
    text = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES CLASSIFIER() AS c ALL ROWS PER MATCH "
        f"PATTERN (PERMUTE(A?, B, C)) DEFINE B AS price = 1{history}, C AS price = 2)"
    )
    got = _both(text, _rows([1, 2, 1]))
    assert [r["c"] for r in got] == ["B", "C"]


def test_permute_with_quantified_items_found_by_the_property() -> None:
    text = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES CLASSIFIER() AS c, MATCH_NUMBER() AS n "
        "ALL ROWS PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN (PERMUTE(B*, B{1,2}, X)) "
        "DEFINE B AS value >= 1, X AS value = 2)"
    )
    for values in ([1, 2, 1, 2], [2, 1, 1, 2, 0], [1, 1, 2, 2]):
        _both(text, _rows(values, "value"))


def test_permute_of_plain_variables_stays_a_prefix_tree() -> None:
    # Items that match one way only share their prefix: PERMUTE(A, B, C) compiles to 3 + 2*2 + ... labels,
    # not 3! * 3.
    program = cep.compile("SELECT * FROM t MATCH_RECOGNIZE (PATTERN (PERMUTE(A, B, C)))").plan.machine(("x",)).program
    labels = sum(1 for inst in program.instructions if inst.op == "LABEL")
    assert labels == 3 * (1 + 2 * (1 + 1))  # each first item, then 2 second items, then the last one


# ------------------------------------------------------------------------------- RUNNING FIRST


def test_running_first_sees_only_rows_up_to_the_current_row() -> None:
    text = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES FIRST(UP.price) AS first_up, "
        "LAST(UP.price) AS last_up, COUNT(UP.*) AS ups, FIRST(price, 2) AS third, FINAL FIRST(UP.price) AS f "
        "ALL ROWS PER MATCH PATTERN (A UP+) DEFINE UP AS price > PREV(price))"
    )
    got = _both(text, _rows([5, 6, 7]))
    assert [(r["first_up"], r["last_up"], r["ups"], r["third"], r["f"]) for r in got] == [
        (None, None, 0, None, 6),
        (6, 6, 1, None, 6),
        (6, 7, 2, 7, 6),
    ]


def test_running_measures_see_no_label_after_the_current_row() -> None:
    # RUNNING measures see the match as if it ended at the current row: the next row is not mapped yet,
    # so NEXT(CLASSIFIER()) is NULL, as in DEFINE; FINAL sees the whole match, its labels included.
    text = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES NEXT(CLASSIFIER(), 1) AS nxt, "
        "PREV(FINAL LAST(CLASSIFIER()), 1) AS before_last, FINAL ARRAY_AGG(CLASSIFIER()) AS all_labels, "
        "ARRAY_AGG(CLASSIFIER()) AS so_far ALL ROWS PER MATCH PATTERN (A UP+) DEFINE UP AS price > PREV(price))"
    )
    got = _both(text, _rows([5, 6, 7]))
    assert [(r["nxt"], r["before_last"], r["all_labels"], r["so_far"]) for r in got] == [
        (None, "UP", ["A", "UP", "UP"], ["A"]),
        (None, "UP", ["A", "UP", "UP"], ["A", "UP"]),
        (None, "UP", ["A", "UP", "UP"], ["A", "UP", "UP"]),
    ]


# ----------------------------------------------------------------------------- the outer ORDER BY

_TICKS = [
    {"symbol": s, "ts": i, "price": p}
    for i, (s, p) in enumerate([("B", 5), ("A", 9), ("B", 3), ("A", 8), ("B", 4), ("A", 7), ("A", 9)])
]
_ORDERED = """SELECT MR.symbol, MR.start_ts, MR.bottom {select_extra}
FROM ticks MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts
  MEASURES FIRST(ts) AS start_ts, LAST(DOWN.price) AS bottom, COUNT(*) AS n
  PATTERN (STRT DOWN+) DEFINE DOWN AS price < PREV(price)) MR
ORDER BY {order}"""
_CASES = [
    ("MR.symbol DESC, MR.start_ts", "", [("B", 0, 3), ("A", 1, 7)]),  # Oracle's qualified keys
    ("MR.n DESC", "", [("A", 1, 7), ("B", 0, 3)]),  # a column of MATCH_RECOGNIZE not selected
    ("MR.bottom * -1 DESC", "", [("B", 0, 3), ("A", 1, 7)]),  # an expression
    ("2 DESC", "", [("A", 1, 7), ("B", 0, 3)]),  # a position in the select list
]


@pytest.mark.parametrize("order, extra, expected", _CASES)
def test_qualified_and_computed_outer_order_by_on_the_python_engine(order, extra, expected) -> None:
    rows = cep.compile(_ORDERED.format(select_extra=extra, order=order)).run(_TICKS)
    assert [tuple(r.values()) for r in rows] == expected


@pytest.mark.spark
def test_qualified_and_computed_outer_order_by_on_spark(spark) -> None:
    df = spark.createDataFrame(_TICKS)
    for order, extra, expected in _CASES:
        out = cep.compile(_ORDERED.format(select_extra=extra, order=order)).on_spark(df)
        assert out.columns == ["symbol", "start_ts", "bottom"]
        assert [tuple(r) for r in out.collect()] == expected, order


def test_an_order_by_position_past_the_select_list_is_e0209_with_a_position() -> None:
    text = _ORDERED.format(select_extra="", order="4")
    with pytest.raises(cep.CepError) as info:
        cep.compile(text).run(_TICKS)
    assert info.value.code == "E0209" and info.value.line == 6


def test_exclusion_with_unmatched_rows_is_refused_with_a_position() -> None:
    text = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id ALL ROWS PER MATCH WITH UNMATCHED ROWS\n PATTERN (A {- B -} C))"
    )
    with pytest.raises(cep.CepError) as info:
        cep.compile(text)
    assert info.value.code == "E0243" and (info.value.line, info.value.column) == (2, 13)


# ----------------------------------------------------------------------------- thread equivalence


def test_threads_that_differ_only_in_labels_merge_when_no_condition_reads_labels() -> None:
    # AVG(price) reads every row of the match whatever its label: threads that differ only in their
    # A/B labels have the same future and merge. Kept apart, they would raise E0430 on 9 rows.
    text = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS n, COUNT(B.*) AS bs "
        "PATTERN (((A | B)* (A{3,} | A{2,3} | A)){2,3} $) DEFINE B AS AVG(price) >= 1)"
    )
    for size in (9, 40):
        assert cep.compile(text).run(_rows([5] * size)) == [{"n": size, "bs": 0}]  # A is preferred
    _both(text, _rows([5] * 9))


def test_reads_of_labels_still_keep_threads_apart() -> None:
    # LAST(CLASSIFIER(), 1) reads a label: threads with other labels are not equivalent.
    text = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES CLASSIFIER() AS c ALL ROWS PER MATCH "
        "PATTERN ((A | B)+ C) DEFINE B AS price > 0, C AS LAST(CLASSIFIER(), 1) = 'B' AND AVG(price) > 0)"
    )
    _both(text, _rows([1, 2, 3, 4]))
