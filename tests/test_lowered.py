"""The pattern lowered once (``matcher/program/lowered.py``), and the engines that compile that one form.

The Pike VM's program is checked instruction by instruction in test_program_golden.py; here, what the
lowering decides for every engine (label ids, which absence ends the pattern, PERMUTE's items that match
one way) and that the column-wise engines read the machine's lowered pattern, not the query's text.
"""

from __future__ import annotations

import dataclasses

import pytest

from cep.grammar.parser import parse
from cep.matcher.plan import CompiledQuery
from cep.matcher.program.lowered import Absent, AnyOrder, Choice, Edge, Excluded, Label, Nothing, Repeat, Sequence
from cep.matcher.vector import fastpath, pattern_regex, sequence_plan


def machine_of(pattern: str, within: str = ""):
    defines = ", ".join(f"{name} AS v = {value}" for value, name in enumerate("ABC") if name in pattern)
    statement = parse(
        f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES COUNT(*) AS n PATTERN ({pattern}) "
        f"{within} DEFINE {defines})"
    )
    return statement, CompiledQuery(statement).machine(("ts", "v"))


@pytest.mark.parametrize(
    "pattern,within,lowered",
    [
        ("A B+? C*", "", Sequence((Label(0), Repeat(Label(1), 1, None, False), Repeat(Label(2), 0, None, True)))),
        ("A !B C", "", Sequence((Label(0), Absent(2, False), Label(1)))),  # labels: A, C, then !B
        ("A !B", "WITHIN INTERVAL '1' MINUTE", Sequence((Label(0), Absent(1, True)))),
        (
            "^ (A | B) {- C -} () $",
            "",
            Sequence((Edge(True), Choice((Label(0), Label(1))), Excluded(Label(2)), Nothing(), Edge(False))),
        ),
        ("PERMUTE(A, B?, C)", "", AnyOrder((Label(0), Repeat(Label(1), 0, 1, True), Label(2)), (True, False, True))),
    ],
)
def test_the_lowered_pattern(pattern, within, lowered):
    assert machine_of(pattern, within)[1].pattern == lowered


def test_the_column_wise_engines_compile_the_machines_lowered_pattern():
    statement, machine = machine_of("A B+ C")
    assert pattern_regex.lower(machine.pattern) == (
        "seq",
        (("class", (0,)), ("loop", (1,), 1, None, True), ("class", (2,))),
    )
    assert [(i.label, i.low, i.high) for i in sequence_plan.analyze(statement, machine, ("ts", "v"))[0].items] == [
        (0, 1, 1),
        (1, 1, None),
        (2, 1, 1),
    ]
    # the same query with another lowered pattern in its machine: the engines follow the machine
    swapped = dataclasses.replace(
        machine, pattern=Sequence((Label(0), Choice((Label(1), Repeat(Label(2), 2, 2, True)))))
    )
    assert "not a sequence of variables (an alternation)" in "; ".join(
        sequence_plan.analyze(statement, swapped, ("ts", "v"))[1]
    )
    plan = fastpath.analyze(statement, swapped, ("ts", "v"))[0]
    assert plan is not None and b"|" in plan.regex.pattern
