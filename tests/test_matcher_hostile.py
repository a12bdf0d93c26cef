"""Hostile patterns stay linear: live threads stay bounded by the program size, whatever the input.

Timing lives in bench/hostile.py; here we assert the structural reason the time is linear: the number
of live partial matches never grows with the number of rows. Patterns beyond the named limits are
refused with a CepError, quickly.
"""

from __future__ import annotations

import pytest

from cep.grammar.errors import CepError
from cep.matcher.pike.vm import PartitionMatcher
from cep.matcher.plan import CompiledQuery
from cep.matcher.program.compiler import MAX_PROGRAM_SIZE
from tests.strategies_match import alt, binop, cat, col, count_star, lit, plus, quant, star, statement, var
from tests.work_budget import python_lines

A, B, C = var("A"), var("B"), var("C")
HOSTILE = {
    "(A*)*B": cat(star(star(A)), B),
    "(A|A)*B": cat(star(alt(A, A)), B),
    "(A+)+B": cat(plus(plus(A)), B),
    "A*A*A*A*B": cat(star(A), star(A), star(A), star(A), B),
    "(A|B)*C": cat(star(alt(A, B)), C),
    "(A*?)*?B": cat(star(star(A, greedy=False), greedy=False), B),
}
# A and B hold on every row, C on none: every hostile pattern keeps trying and never matches.
DEFINES = {"A": binop("=", col("v"), lit(0)), "B": binop("=", col("v"), lit(0)), "C": binop("=", col("v"), lit(1))}


def _max_live_threads(pattern, rows: int) -> tuple[int, int]:
    variables = {n for n in "ABC" if n in repr(pattern)}
    stmt = statement(
        pattern, defines={k: v for k, v in DEFINES.items() if k in variables}, measures=[("n", count_star())]
    )
    machine = CompiledQuery(stmt).machine(("id", "v"))
    matcher = PartitionMatcher(machine)
    peak = 0
    for i in range(rows):
        matcher.feed({"id": [i], "v": [0]})
        peak = max(peak, matcher.live_threads())
    matcher.finish()
    return peak, len(machine.program)


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_live_threads_bounded_by_program_size(name):
    peak_small, size = _max_live_threads(HOSTILE[name], 200)
    peak_large, _ = _max_live_threads(HOSTILE[name], 2000)
    assert peak_large <= size, f"{name}: {peak_large} live threads for a {size}-instruction program"
    assert peak_large == peak_small, f"{name}: live threads grew with the input ({peak_small} -> {peak_large})"


def test_buffered_rows_stay_bounded_when_nothing_matches():
    stmt = statement(cat(plus(A), C), defines=DEFINES, measures=[("n", count_star())])
    machine = CompiledQuery(stmt).machine(("id", "v"))
    matcher = PartitionMatcher(machine)
    for chunk in range(50):
        matcher.feed({"id": list(range(chunk * 1000, chunk * 1000 + 1000)), "v": [1] * 1000})
    # v = 1 fails A at every row, so no start survives: the buffer is trimmed as the search moves on.
    assert matcher.buffered_rows() < 10_000


def test_huge_bounded_quantifier_is_refused_quickly():
    stmt = statement(quant(A, 1, 100_000), defines={"A": DEFINES["A"]})

    def refused() -> CepError:
        with pytest.raises(CepError) as raised:
            CompiledQuery(stmt).machine(("id", "v"))
        return raised.value

    error, lines = python_lines(refused)
    # Refused while building, long before memory runs out: the work is the size limit's, not the bound's
    # (measured: 70,501 lines for {1,100000} and for {1,10000000} alike; lines, not seconds, so the same on
    # any machine: tests/work_budget.py).
    assert lines < 50 * MAX_PROGRAM_SIZE, lines
    assert "MAX_PROGRAM_SIZE" in error.message
    assert str(MAX_PROGRAM_SIZE) in error.message


OPEN_TAIL = """SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS n
  PATTERN (A+ B) DEFINE B AS B.v > FIRST(A.v) + 100)"""


def test_an_open_tail_past_the_rescan_limit_is_refused_and_below_it_runs(monkeypatch):
    """FIRST(A.v) reads the match history, so starts are tried one at a time; no row is a B, so every
    start's partial match stays open to the end and each later start rescans the tail at the end. Each
    row of a rescan reads FIRST(A.v) from the thread's carried state, never by walking its history
    (which made the tail cubic: docs/performance.md)."""
    import cep
    from cep.matcher.pike import vm
    from cep.matcher.sql.context import ThreadView

    def walked(*args):
        raise AssertionError("FIRST(A.v) walked the thread's history")

    monkeypatch.setattr(ThreadView, "first_in", walked)
    query = cep.compile(OPEN_TAIL, column_wise=False)  # the VM's own bound (the sequence engine has a budget, below)
    rows = [{"id": i, "v": 0} for i in range(300)]
    monkeypatch.setattr(vm, "MAX_TAIL_RESCAN_ROWS", 300 * 299 // 2)  # exactly what this tail needs
    assert query.run(rows) == []
    monkeypatch.setattr(vm, "MAX_TAIL_RESCAN_ROWS", 10_000)
    with pytest.raises(CepError) as err:
        query.run(rows)
    assert err.value.code == "E0431" and "MAX_TAIL_RESCAN_ROWS" in str(err.value) and "WITHIN" in str(err.value)
    # A row that ends the matches keeps the tails short: the same rows with a B at the end match.
    assert query.run(rows + [{"id": 300, "v": 500}]) == [{"n": 301}]


def test_the_sequence_engine_hands_an_open_tail_to_the_vm(monkeypatch):
    """The column-wise sequence engine scans from every start: an open tail of 3,000 rows would cost
    4.5 million row looks, past its budget of SCAN_BUDGET_PER_ROW a row; the batch goes to the VM, which
    refuses it with E0431. The VM's rescan limit is lowered here so that the refusal comes after 10,000
    rescanned rows rather than after the 2 million the default allows."""
    import cep
    from cep.matcher.pike import vm
    from cep.matcher.vector import sequence, sequence_plan

    monkeypatch.setattr(vm, "MAX_TAIL_RESCAN_ROWS", 10_000)
    query = cep.compile(OPEN_TAIL)
    rows = [{"id": i, "v": 0} for i in range(3_000)]
    assert 3_000 * 2_999 // 2 > sequence.SCAN_BUDGET_PER_ROW * 3_000 + sequence.SCAN_SLACK
    plan = sequence_plan.plan_for(query.statement, query.plan.machine(("id", "v")), ("id", "v"))
    assert plan is not None
    with pytest.raises(CepError) as err:
        query.run(rows)
    assert err.value.code == "E0431"
    assert any("quadratic" in note for note in plan.notes)


@pytest.mark.parametrize("pattern", ["((A?){1,500})", "((A*){1,500})", "((A|B?){1,300})", "((A? B?){1,300})"])
def test_unrolled_groups_run_and_explain_without_recursion_errors(pattern):
    """Issue 16: bounded quantifiers over groups unroll into hundreds of nested optionals; no recursion
    depth may follow the bound (the fast path's regex translation sends them to the VM instead)."""
    import cep
    from cep.matcher.explain.dot import to_dot

    defines = "A AS v = 0" + (", B AS v = 1" if "B" in pattern else "")
    query = cep.compile(
        f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS n PATTERN {pattern} DEFINE {defines})"
    )
    rows = [{"id": i, "v": i % 3} for i in range(12)]
    on_vm = cep.compile(query.text, column_wise=False).run(rows)
    assert query.run(rows) == on_vm and on_vm  # the plan sends the pattern to the VM: same rows
    assert "Pike VM (not eligible for the fast path: the pattern nests more than" in query.explain()
    assert to_dot(query.statement).startswith("digraph pattern")
