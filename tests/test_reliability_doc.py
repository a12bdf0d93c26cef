"""docs/reliability.md and the tests agree: every test the table names exists, and every case of the issue
has a row (with a test, or an honest "not yet covered")."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "reliability.md"
REFERENCE = re.compile(r"`(tests/[\w/]+\.py)::(\w+)(?:\[(.*?)\])?`")

# The faults the reliability guide must cover; each must appear in the first column of some row.
ISSUE_CASES = [
    "NULL event time",
    "unparseable event time",
    "NULL partition key",
    "missing from the whole input",
    "missing from some dict rows",
    "a string in a numeric column",
    "JSON line that is not JSON",
    "extra columns",
    "dead-letter directory",
    "CLI summary",
    "no dedup key",
    "`dedup_key`",
    "streaming (`--dedup-key`",
    "years in the future",
    "hot key",
    "exponential backtracking",
    "`A{1,100000}`",
    "1000 nested parentheses",
    "PERMUTE of 12",
    "1 MB query",
    "very long identifiers",
    "`__import__('os')`",
    "attribute access",
    "dunder names",
    "format strings",
    "`eval(`",
    "webhook down",
    "file system full",
    "database locked",
    "4xx",
    "half-written",
    "SIGKILL",
    "executor lost",
    "soak",
]


def rows() -> list[list[str]]:
    """The cells of every table row of the doc (header and separator rows left out)."""
    out = []
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if not line.startswith("|") or set(line) <= set("|-: "):
            continue
        cells = [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if cells and cells[0] not in ("fault", "option", "field"):
            out.append(cells)
    return out


def fault_rows() -> list[list[str]]:
    return [cells for cells in rows() if len(cells) == 3 and ("tests/" in cells[2] or "not yet covered" in cells[2])]


def defined_functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


def references() -> list[tuple[str, str, str | None]]:
    return [match.groups() for cells in fault_rows() for match in REFERENCE.finditer(cells[2])]


def test_the_table_has_rows_and_references():
    assert len(fault_rows()) >= 60
    assert len(references()) >= 60


def test_every_row_names_a_test_or_says_not_yet_covered():
    for fault, behaviour, tests in fault_rows():
        named = REFERENCE.findall(tests)
        assert named or tests == "not yet covered", f"row '{fault}': {tests!r}"
        if not named:
            assert "not yet covered" in behaviour, f"row '{fault}' has no test but does not say so"


@pytest.mark.parametrize("path, name, case", references(), ids=lambda value: str(value)[:80])
def test_every_named_test_exists(path, name, case):
    file = REPO / path
    assert file.is_file(), f"{path} does not exist"
    assert name in defined_functions(file), f"{path} defines no function {name}"
    if case is not None:  # a parametrized case: its id is written in the file
        assert case in file.read_text(encoding="utf-8"), f"{path} has no case {case!r} for {name}"


def test_every_case_of_the_issue_has_a_row():
    faults = "\n".join(cells[0] for cells in fault_rows())
    missing = [case for case in ISSUE_CASES if case not in faults]
    assert missing == []


def test_every_batch_reliability_test_is_in_the_table():
    named = {name for path, name, _ in references() if path == "tests/test_reliability_batch.py"}
    defined = {name for name in defined_functions(REPO / "tests/test_reliability_batch.py") if name.startswith("test_")}
    assert defined - named == set()


def test_hostile_cases_with_a_known_gap_are_marked_open():
    from tests.test_hostile_queries import CASES

    for fault, behaviour, tests in fault_rows():
        for _path, name, case in REFERENCE.findall(tests):
            if name == "test_hostile_query" and case in CASES and CASES[case].known_gap:
                assert "**open**" in behaviour, f"{case!r} is xfail but its row '{fault}' does not say open"
    gaps = [name for name, case in CASES.items() if case.known_gap]
    documented = {case for _, name, case in references() if name == "test_hostile_query"}
    assert set(gaps) <= documented, "a hostile case with a known gap is missing from the table"
