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
    text = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES CLASSIFIER() AS c ALL ROWS PER MATCH "
            f"PATTERN (PERMUTE(A?, B, C)) DEFINE B AS price = 1{history}, C AS price = 2)")
    got = _both(text, _rows([1, 2, 1]))
    assert [r["c"] for r in got] == ["B", "C"]


def test_permute_with_quantified_items_found_by_the_property() -> None:
    text = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES CLASSIFIER() AS c, MATCH_NUMBER() AS n "
            "ALL ROWS PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN (PERMUTE(B*, B{1,2}, X)) "
            "DEFINE B AS value >= 1, X AS value = 2)")
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
    text = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES FIRST(UP.price) AS first_up, "
            "LAST(UP.price) AS last_up, COUNT(UP.*) AS ups, FIRST(price, 2) AS third, FINAL FIRST(UP.price) AS f "
            "ALL ROWS PER MATCH PATTERN (A UP+) DEFINE UP AS price > PREV(price))")
    got = _both(text, _rows([5, 6, 7]))
    assert [(r["first_up"], r["last_up"], r["ups"], r["third"], r["f"]) for r in got] == [
        (None, None, 0, None, 6), (6, 6, 1, None, 6), (6, 7, 2, 7, 6)]
