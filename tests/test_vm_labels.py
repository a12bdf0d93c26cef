"""The Pike VM on label strings, after Trino's ``MatchAssert.IdentityEvaluator``: row i satisfies variable
X exactly when character i of the input is X, so "AABCD" against ``A+ B C? D`` reads as what it means.
The conditions are that trivial evaluator, not SQL, so these tests are about the machine alone:
preference order, quantifiers, alternation, anchors, exclusions and AFTER MATCH SKIP."""

from __future__ import annotations

import dataclasses

import pytest

from cep.grammar.errors import CepRuntimeError
from cep.grammar.parser import parse_unchecked
from cep.matcher.pike.vm import PartitionMatcher
from cep.matcher.program.machine import build_machine

try:  # `tests` is a package only when the repository root is on sys.path
    from tests.work_budget import python_lines
except ModuleNotFoundError:
    from work_budget import python_lines


def identity(label: str):
    """The condition of variable ``label``: the row's letter is ``label``."""

    def holds(env, position=None):
        return env.cols["letter"][env.row - env.base] == label

    return holds


def matches(pattern: str, letters: str, skip: str = "PAST LAST ROW") -> list[tuple[int, str]]:
    """(first row, the letters CLASSIFIER() gives its rows) of each match, empty matches as ''."""
    statement = parse_unchecked(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY i MEASURES MATCH_NUMBER() AS m, CLASSIFIER() AS cls "
        f"ALL ROWS PER MATCH AFTER MATCH SKIP {skip} PATTERN ({pattern}))"
    )
    machine = build_machine(statement, ("i", "letter"))
    machine = dataclasses.replace(machine, conditions=tuple(identity(name) for name in machine.label_names))
    matcher = PartitionMatcher(machine)
    rows = matcher.feed({"i": list(range(len(letters))), "letter": list(letters)}) + matcher.finish()
    found: dict[int, list] = {}
    for position, number, label, _ in rows:  # ALL ROWS: ORDER BY column, measures, the other columns
        found.setdefault(number, [position, ""])[1] += label or ""
    return [tuple(match) for match in found.values()]


@pytest.mark.parametrize(
    "pattern, letters, expected",
    [
        ("A+ B C? D", "AABCD", [(0, "AABCD")]),
        ("A+ B C? D", "AABD", [(0, "AABD")]),
        ("A+ B C? D", "ABCCD", []),
        ("A B+", "ABBB", [(0, "ABBB")]),  # greedy: as many as possible
        ("A B+?", "ABBB", [(0, "AB")]),  # reluctant: as few as possible
        ("A B*? C", "ABBC", [(0, "ABBC")]),  # ... but enough to reach what follows
        ("A | A B", "AB", [(0, "A")]),  # the first alternative is preferred, though shorter
        ("A B | A", "AB", [(0, "AB")]),
        ("(A | B)* C", "ABAC", [(0, "ABAC")]),
        ("PERMUTE(A, B, C)", "CAB", [(0, "CAB")]),
        ("A{2,3}", "AAAAA", [(0, "AAA"), (3, "AA")]),
        ("A{2,3}?", "AAAAA", [(0, "AA"), (2, "AA")]),
        ("^ A", "AAA", [(0, "A")]),  # only at the partition's first row
        ("A $", "AAA", [(2, "A")]),  # only at its last
        ("A {- B -} C", "ABC", [(0, "AC")]),  # B matched, but left out of ALL ROWS PER MATCH
        ("A*", "BAB", [(0, ""), (1, "A"), (2, "")]),  # empty matches where no A starts
        ("B", "AAA", []),
    ],
)
def test_label_strings(pattern, letters, expected):
    assert matches(pattern, letters) == expected


@pytest.mark.parametrize(
    "pattern, letters, skip, expected",
    [
        ("A? B+", "ABB", "PAST LAST ROW", [(0, "ABB")]),
        ("A? B+", "ABB", "TO NEXT ROW", [(0, "ABB"), (1, "BB"), (2, "B")]),
        # The search resumes at the match's last B; no match starts at a B, so the next one is at row 3.
        ("A B+", "ABBAB", "TO LAST B", [(0, "ABB"), (3, "AB")]),
    ],
)
def test_after_match_skip(pattern, letters, skip, expected):
    assert matches(pattern, letters, skip) == expected


def test_skipping_to_the_first_row_of_the_match_is_an_error():
    """SKIP TO FIRST B after "ABB" resumes at row 1, where "BB" matches; skipping to its first B would
    resume at its own first row, looping forever: the standard makes that an error."""
    with pytest.raises(CepRuntimeError, match="cannot skip to the first row of the match") as raised:
        matches("A? B+", "ABB", "TO FIRST B")
    assert raised.value.code == "E0401"


def test_a_nested_loop_that_never_completes_stays_linear():
    """(A+)+ B over rows that never reach a B: a backtracker tries 2^n splits; the VM merges threads
    by instruction and finishes at once (Trino's testLongMatch)."""
    matches("(A+)+ B", "AC")  # the first call imports and builds what every later one reuses
    lines = {}
    for rows in (2000, 4000):
        found, lines[rows] = python_lines(lambda rows=rows: matches("(A+)+ B", "A" * rows + "C"))
        assert found == []
    # Twice the rows, about twice the work (measured: 163,050 and 319,050 lines); 2^n splits would be
    # astronomically more. Lines, not seconds: the same count on any machine (tests/work_budget.py).
    assert lines[4000] < 2.1 * lines[2000], lines
    assert lines[4000] < 200 * 4000, lines
