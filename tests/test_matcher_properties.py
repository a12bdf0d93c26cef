"""Property tests of the matcher.

1. VM == reference: on random patterns (every operator, both greedinesses, anchors, exclusions,
   PERMUTE, every SKIP mode, ONE/ALL ROWS) with DEFINEs that read the match history, the Pike VM
   gives exactly what the plain backtracking reference in ``tests/reference_matcher.py`` gives.
2. Incremental == whole input: any split of a partition's rows into ``feed`` calls, with the state
   serialized to JSON and restored into a new matcher between calls, gives the same output.
"""

from __future__ import annotations

import json
from collections import Counter

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cep.grammar.errors import CepError
from cep.matcher.pike.vm import PartitionMatcher
from cep.matcher.plan import CompiledQuery
from cep.matcher.rows.tables import rows_to_columns
from tests import reference_matcher as reference
from tests.strategies_match import permute_queries, queries, sql_of, tables

# RUNNING FIRST(...) in MEASURES sees only the match's rows up to the current one (SQL:2016), in the
# engine and in the reference (Trino's look-ahead is the reference's TRINO_RUNNING_FIRST switch, off).
assert not reference.TRINO_RUNNING_FIRST

PROPERTY_SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _engine(stmt, rows, *, fast: bool = True):
    return _run(CompiledQuery(stmt, column_wise=fast), rows)


def _run(plan, rows):
    names, out = plan.run_columns(rows_to_columns(rows) if rows else {"id": [], "value": [], "part": []})
    return [dict(zip(names, row)) for row in out]


def _canonical(rows):
    return Counter(tuple(sorted((k, repr(v)) for k, v in row.items())) for row in rows)


@PROPERTY_SETTINGS
@given(stmt=queries(), rows=tables(), fast=st.booleans())
def test_engine_equals_reference(stmt, rows, fast):
    """Both execution paths (the fast path where eligible, and the Pike VM alone) equal the reference."""
    try:
        expected = reference.reference_run(stmt, rows)
    except reference.ReferenceBudgetExceeded:
        assume(False)
    except reference.ReferenceSkipError as skip:
        try:
            _engine(stmt, rows, fast=fast)
        except CepError as error:
            assert error.code == "E0401", sql_of(stmt)
            return
        raise AssertionError(f"the reference fails AFTER MATCH SKIP, the engine does not:\n{sql_of(stmt)}") from skip
    got = _engine(stmt, rows, fast=fast)
    assert _canonical(got) == _canonical(expected), f"\n{sql_of(stmt)}\nrows={rows}\nengine={got}\nreference={expected}"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stmt=permute_queries(), rows=tables(max_rows=8, top=2), fast=st.booleans())
def test_permute_equals_reference(stmt, rows, fast):
    """PERMUTE with items that match in several ways keeps the standard's order of orders (the random
    queries above rarely draw such a PERMUTE together with history-reading conditions)."""
    test_engine_equals_reference.hypothesis.inner_test(stmt, rows, fast)


def _incremental(plan: CompiledQuery, rows: list[dict], cuts: list[int]) -> list[tuple]:
    columns = rows_to_columns(rows)
    machine = plan.machine(tuple(columns))
    out: list[tuple] = []
    for key, indices in plan.partitions(machine, columns):
        part = {name: [columns[name][i] for i in indices] for name in machine.columns}
        matcher = PartitionMatcher(machine, key)
        begin = 0
        for cut in sorted({c % (len(indices) + 1) for c in cuts}) + [len(indices)]:
            out.extend(matcher.feed({name: values[begin:cut] for name, values in part.items()}))
            begin = max(begin, cut)
            state = json.loads(json.dumps(matcher.state()))  # plain data, nothing else survives
            matcher = PartitionMatcher.from_state(machine, state)
        out.extend(matcher.finish())
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stmt=queries(), rows=tables(max_rows=14), cuts=st.lists(st.integers(0, 20), max_size=6))
def test_incremental_equals_whole(stmt, rows, cuts):
    assume(rows)
    plan = CompiledQuery(stmt)
    columns = rows_to_columns(rows)
    try:
        _, whole = plan.run_columns(columns, outer_order_and_limit=False)
    except CepError:
        assume(False)
    assert Counter(map(repr, _incremental(plan, rows, cuts))) == Counter(map(repr, whole)), sql_of(stmt)
