"""Pattern -> program, as golden listings (after Trino's TestIrRowPatternToProgramRewriter and Go's
``compileTests``): each row is a pattern and the exact instructions the compiler must emit, read and
checked by hand against the scheme in ``matcher/program/compiler.py``. The property tests say the VM
matches correctly; this table says how, and keeps the compiler's output from drifting unnoticed."""

from __future__ import annotations

import pytest

from cep.grammar.parser import parse_unchecked
from cep.matcher.program.compiler import compile_pattern
from cep.matcher.program.machine import pattern_labels


def listing(pattern: str) -> list[str]:
    mr = parse_unchecked(
        f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN ({pattern}) WITHIN INTERVAL '1' MINUTE)"
    ).match
    return [line.strip() for line in compile_pattern(mr.pattern, tuple(pattern_labels(mr.pattern))).dump().splitlines()]


GOLDEN = {
    "A B C": [
        "0: LABEL A",
        "1: LABEL B",
        "2: LABEL C",
        "3: DONE",
    ],
    # Greedy and reluctant differ only in the order of SPLIT's targets: the first is preferred.
    "A*": [
        "0: SPLIT 1, 3",
        "1: LABEL A",
        "2: SPLIT 1, 3",
        "3: DONE",
    ],
    "A*?": [
        "0: SPLIT 3, 1",
        "1: LABEL A",
        "2: SPLIT 3, 1",
        "3: DONE",
    ],
    "A+": [
        "0: LABEL A",
        "1: SPLIT 0, 2",
        "2: DONE",
    ],
    "A+?": [
        "0: LABEL A",
        "1: SPLIT 2, 0",
        "2: DONE",
    ],
    "A?": [
        "0: SPLIT 1, 2",
        "1: LABEL A",
        "2: DONE",
    ],
    "A??": [
        "0: SPLIT 2, 1",
        "1: LABEL A",
        "2: DONE",
    ],
    # {n,m} is unrolled: n copies, then m - n optional copies nested inside each other.
    "A{2,4}": [
        "0: LABEL A",
        "1: LABEL A",
        "2: SPLIT 3, 6",
        "3: LABEL A",
        "4: SPLIT 5, 6",
        "5: LABEL A",
        "6: DONE",
    ],
    # Unbounded: the last of the n copies doubles as the loop body (A{2,} is A A+), no A* after it.
    "A{2,}": [
        "0: LABEL A",
        "1: LABEL A",
        "2: SPLIT 1, 3",
        "3: DONE",
    ],
    "A | B": [
        "0: SPLIT 1, 3",
        "1: LABEL A",
        "2: JUMP 4",
        "3: LABEL B",
        "4: DONE",
    ],
    "(A B)+ C": [
        "0: LABEL A",
        "1: LABEL B",
        "2: SPLIT 0, 3",
        "3: LABEL C",
        "4: DONE",
    ],
    # PERMUTE is every order, lexicographic by position, as an alternation.
    "PERMUTE(A, B)": [
        "0: SPLIT 1, 4",
        "1: LABEL A",
        "2: LABEL B",
        "3: JUMP 6",
        "4: LABEL B",
        "5: LABEL A",
        "6: DONE",
    ],
    "{- A -} B": [
        "0: EXCL_BEGIN",
        "1: LABEL A",
        "2: EXCL_END",
        "3: LABEL B",
        "4: DONE",
    ],
    "^ A $": [
        "0: AT_START",
        "1: LABEL A",
        "2: AT_END",
        "3: DONE",
    ],
    "()": [
        "0: DONE",
    ],
    # An absence inside the pattern: rows that are not B, as few as possible, until the first C.
    "A !B C": [
        "0: LABEL A",
        "1: SPLIT 4, 2",
        "2: LABEL !B",
        "3: SPLIT 4, 2",
        "4: LABEL C",
        "5: DONE",
    ],
    # At the end (with WITHIN): as many rows that are not B as arrive, until the deadline.
    "A !B": [
        "0: LABEL A",
        "1: SPLIT 2, 4",
        "2: LABEL !B",
        "3: SPLIT 2, 4",
        "4: DEADLINE",
        "5: DONE",
    ],
}


@pytest.mark.parametrize("pattern", list(GOLDEN))
def test_golden_listing(pattern):
    assert listing(pattern) == GOLDEN[pattern]
