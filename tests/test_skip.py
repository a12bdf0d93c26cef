"""AFTER MATCH SKIP, the one rule and the one walk every engine uses (``matcher/program/skip.py``).

The rule for every start at once (``SkipRule.after_each``, the column-wise engines) must say what the
rule for one match says (``SkipRule.after``, the Pike VM), failures included; the walk must pick the
starts a plain row-by-row search picks. The engines' own answers are compared with the VM's in
test_fastpath.py, test_sequence.py and test_streaming_columnar.py.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cep.grammar.parser import parse
from cep.matcher.plan import CompiledQuery
from cep.matcher.program.skip import (
    FAIL,
    MATCH,
    PAST_LAST_ROW,
    TIMEOUT,
    TO_FIRST,
    TO_LAST,
    TO_NEXT_ROW,
    UNDECIDED,
    SkipFailed,
    SkipRule,
    walk,
)

MODES = (PAST_LAST_ROW, TO_NEXT_ROW, TO_FIRST, TO_LAST)


@st.composite
def matches(draw):
    """(rule, item labels, starts, item rows per match): matches of a sequence of items at some starts."""
    items = draw(st.integers(1, 4))
    item_labels = tuple(draw(st.lists(st.integers(0, 3), min_size=items, max_size=items)))
    mode = draw(st.sampled_from(MODES))
    target = frozenset(draw(st.sets(st.integers(0, 4), max_size=2)))
    rule = SkipRule(mode, target, "T") if mode in (TO_FIRST, TO_LAST) else SkipRule(mode)
    count = draw(st.integers(0, 6))
    starts = np.array(sorted(draw(st.lists(st.integers(0, 40), min_size=count, max_size=count))), dtype=np.int64)
    rows = np.array(
        draw(st.lists(st.lists(st.integers(0, 3), min_size=count, max_size=count), min_size=items, max_size=items)),
        dtype=np.int64,
    ).reshape(items, count)
    return rule, item_labels, starts, rows


@settings(max_examples=300, deadline=None)
@given(matches())
def test_the_rule_for_every_start_says_what_the_rule_for_one_match_says(case):
    rule, item_labels, starts, rows = case
    targets, failed = rule.after_each(starts, rows, item_labels)
    for j, start in enumerate(starts.tolist()):
        labels = [label for label, count in zip(item_labels, rows[:, j].tolist()) for _ in range(count)]
        try:
            expected = rule.after(start, start + len(labels) - 1, labels)
        except SkipFailed:
            assert failed[j], (rule, labels)
            continue
        assert not failed[j] and targets[j] == expected, (rule, labels, targets[j], expected)


def test_the_rule_for_one_match():
    to_b = SkipRule(TO_LAST, frozenset({1}), "B")
    assert SkipRule().after(3, 5, [0, 1, 1]) == 6
    assert SkipRule(TO_NEXT_ROW).after(3, 5, [0, 1, 1]) == 4
    assert to_b.after(3, 5, [0, 1, 1]) == 5
    assert SkipRule(TO_FIRST, frozenset({1}), "B").after(3, 5, [0, 1, 1]) == 4
    assert to_b.after(3, 2, []) == 4  # an empty match moves on by one row whatever the mode
    for labels in ([0, 0], [1, 0]):  # B absent; B the first row
        try:
            to_b.after(3, 4, labels)
        except SkipFailed as why:
            assert "'B'" in str(why)
        else:
            raise AssertionError(labels)


def _search(outcome: list[int], next_start: list[int], offsets: list[int]) -> tuple[list[int], list[int]]:
    """The walk as its definition reads: each segment searched row by row from its first row."""
    chosen, stopped = [], []
    for begin, end in zip(offsets, offsets[1:]):
        row = begin
        while row < end:
            if outcome[row] == FAIL:
                row += 1
            elif outcome[row] == MATCH:
                chosen.append(row)
                row = next_start[row]
            elif outcome[row] == TIMEOUT:
                chosen.append(row)
                row += 1
            else:
                stopped.append(row)
                break
    return chosen, stopped


@st.composite
def starts(draw):
    sizes = draw(st.lists(st.integers(0, 8), min_size=1, max_size=5))
    offsets = [0]
    for size in sizes:
        offsets.append(offsets[-1] + size)
    outcome, next_start = [], []
    for begin, end in zip(offsets, offsets[1:]):
        for row in range(begin, end):
            outcome.append(draw(st.sampled_from([FAIL, FAIL, MATCH, MATCH, TIMEOUT, UNDECIDED])))
            next_start.append(draw(st.integers(row + 1, end)))  # a match's skip stays in its segment
    return outcome, next_start, offsets


@settings(max_examples=300, deadline=None)
@given(starts())
def test_the_walk_picks_the_starts_a_row_by_row_search_picks(case):
    outcome, next_start, offsets = case
    found = walk(np.array(outcome, dtype=np.int8), np.array(next_start, dtype=np.int64), np.array(offsets))
    assert (found.chosen.tolist(), found.stopped.tolist()) == _search(outcome, next_start, offsets)


def test_every_engine_reads_the_rule_the_machine_holds():
    statement = parse(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS n AFTER MATCH SKIP TO LAST B "
        "PATTERN (A B+ C) DEFINE A AS v = 0, B AS v = 1, C AS v = 2)"
    )
    machine = CompiledQuery(statement).machine(("id", "v"))
    assert machine.skip == SkipRule(TO_LAST, frozenset({machine.label_names.index("B")}), "B")


def test_the_rule_over_all_rows_computes_the_matches_only():
    rule = SkipRule(TO_LAST, frozenset({1}), "B")
    outcome = np.array([MATCH, FAIL, MATCH, TIMEOUT, MATCH], dtype=np.int8)
    rows = np.array([[1, 0, 1, 1, 1], [2, 0, 0, 1, 1]], dtype=np.int64)  # the match at row 2 has no B row
    next_start, failed = rule.after_matches(outcome, rows, (0, 1))
    assert failed.tolist() == [False, False, True, False, False]
    assert next_start[[0, 4]].tolist() == [2, 5]  # row 0: A then B B, skip to the last B; row 4: A B
