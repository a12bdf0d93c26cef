"""The conformance corpus, case by case: every case passes or is a documented deviation.

Each case's query is compiled with ``cep.compile`` and run with ``Query.run`` on the case's rows; the
output is compared with ``expected`` as a multiset (no case asserts order), column names
case-insensitively, numbers numerically. ``expect_error`` cases must raise a ``CepError``. Where a
case's ``standard_divergence`` says the peer departs from the standard, we follow the standard: the
answer the note describes is written out below (``STANDARD_ANSWERS``) and checked instead.

Known deviations live in ``DEVIATIONS`` (case id -> reason); each must also be listed in
docs/semantics.md, which a test below checks.
"""

from __future__ import annotations

import re
from functools import cache

import pytest

import cep
from cep.matcher.rows.tables import rows_to_columns
from tests.conformance import ROOT, as_multiset, load_cases, typed_rows

# The answers standard (backtracking, end-of-partition) semantics give where the peer's differ.
# Transcribed from each case's `standard_divergence` note, which states them.
STANDARD_ANSWERS: dict[str, object] = {
    "flink-MatchRecognizeITCase-testLogicalOffsets-1": [[1, 2, 3, 21, 16], [6, 7, 8, 33, 33]],
    "flink-docs-match_recognize-after_match_to_next_row-1": [
        ["XYZ", 26, "2018-09-17T10:00:01", "2018-09-17T10:00:04"],
        ["XYZ", 24, "2018-09-17T10:00:02", "2018-09-17T10:00:05"],
        ["XYZ", 25, "2018-09-17T10:00:03", "2018-09-17T10:00:06"],
        ["XYZ", 22, "2018-09-17T10:00:04", "2018-09-17T10:00:07"],
        ["XYZ", 17, "2018-09-17T10:00:05", "2018-09-17T10:00:07"],
        ["XYZ", 7, "2018-09-17T10:00:06", "2018-09-17T10:00:07"],
    ],
    # RUNNING FIRST(value, 2) sees only the rows up to the current one (Trino looks ahead).
    "trino-TestRowPatternMatching-testNavigationFunctions-9": [[1, None], [2, None], [3, 30]],
    # RUNNING NEXT(CLASSIFIER()) sees no label after the current row (Trino's reads the whole match).
    "trino-TestRowPatternMatching-testClassifierFunctionPastCurrentRow-1": [
        [1, 90, "A", None],
        [2, 80, "B", None],
        [3, 70, "B", None],
        [4, 80, "C", None],
    ],
    # SKIP TO LAST A lands on the fourth match's own first row: the standard makes that an error.
    "flink-docs-match_recognize-after_match_to_last_a-1": "error",
}

# Cases we deliberately do not reproduce, with the reason (mirrored in docs/semantics.md).
DEVIATIONS: dict[str, str] = {
    "flink-docs-match_recognize-time_constraint-1": (
        "WITHIN keeps a match only when last - first < interval (Flink's runtime behaviour, measured with "
        "PyFlink 2.3 by make bench, and our spec); this documentation example keeps a match exactly one "
        "interval long"
    ),
}


@cache
def outcome(case_id: str) -> tuple[str, str]:
    """('pass' | 'fail', detail) for one case, run whether or not it is a documented deviation."""
    case = next(c for c in load_cases() if c["id"] == case_id)
    expected = STANDARD_ANSWERS.get(case_id, case["expected"])
    wants_error = case["expect_error"] is not None or expected == "error"
    try:
        names, result = run_case(case)
    except cep.CepError as error:
        if wants_error:
            return "pass", f"raised as expected: {error.message}"
        return "fail", f"raised {error.code}: {error}"
    if wants_error:
        return "fail", f"expected an error ({case['expect_error']}), got {len(result)} rows"
    if result and [n.casefold() for n in names] != [n.casefold() for n in case["expected_columns"]]:
        return "fail", f"columns {list(names)} != {case['expected_columns']}"
    got = as_multiset(result, expected=False)
    want = as_multiset(expected, expected=True)
    if got != want:
        return (
            "fail",
            f"rows differ:\n  missing {sorted(map(str, (want - got).elements()))}\n"
            f"  extra   {sorted(map(str, (got - want).elements()))}",
        )
    return "pass", ""


def run_case(case: dict) -> tuple[list[str], list]:
    """(names, rows): one MATCH_RECOGNIZE statement through ``cep.compile``; a whole statement (WITH,
    subqueries) through ``cep.compile_sql``, the SQL around the clause run by DuckDB, over the table ``t``."""
    try:
        query = cep.compile(case["query"])
    except cep.CepSyntaxError as error:
        if error.code != "E0107":
            raise
        import pyarrow as pa

        table = cep.compile_sql(case["query"]).run({"t": pa.Table.from_pylist(typed_rows(case))})
        return table.column_names, [
            tuple(column[i] for column in table.to_pydict().values()) for i in range(table.num_rows)
        ]
    # The plan's own (names, rows) output: a list of dicts would merge duplicate column names.
    return query.plan.run_columns(rows_to_columns(typed_rows(case)))


CASE_IDS = [case["id"] for case in load_cases()]


def _case_param(case_id: str):
    """A documented deviation runs like any case and must fail (strict xfail): the day it passes, the test
    fails, so the deviation is taken out of DEVIATIONS and docs/semantics.md."""
    if case_id not in DEVIATIONS:
        return case_id
    reason = f"documented deviation: {DEVIATIONS[case_id]}"
    return pytest.param(case_id, marks=pytest.mark.xfail(strict=True, raises=AssertionError, reason=reason))


@pytest.mark.parametrize("case_id", [_case_param(case_id) for case_id in CASE_IDS])
def test_case(case_id: str) -> None:
    status, detail = outcome(case_id)
    assert status == "pass", f"{case_id}: {detail}"


def test_summary(capsys) -> None:
    counts = {"pass": 0, "fail": 0, "deviation": 0}
    for case_id in CASE_IDS:
        status = outcome(case_id)[0]
        counts["deviation" if case_id in DEVIATIONS and status == "fail" else status] += 1
    with capsys.disabled():
        print(
            f"\nconformance: {counts['pass']} passed, {counts['deviation']} documented deviations, "
            f"{counts['fail']} failed (of {len(CASE_IDS)})"
        )
    assert counts["fail"] == 0


def test_deviations_are_documented() -> None:
    text = (ROOT / "docs" / "semantics.md").read_text(encoding="utf-8") if DEVIATIONS else ""
    for case_id in DEVIATIONS:
        assert re.search(re.escape(case_id), text), f"{case_id} is a deviation but docs/semantics.md does not list it"
