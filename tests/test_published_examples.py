"""Published MATCH_RECOGNIZE examples, run as published on cep's python engine and on Spark.

The cases live in ``tests/published_examples/*.json``, one file per example: the statement exactly as
its publisher printed it (Oracle's Data Warehousing Guide, ORACLE-BASE, Snowflake's reference and user
guide, YDB's reference, Trino's blog, Flink's documentation, *Practical Oracle SQL* ch. 17-21), the input
tables (from the publisher's own CREATE/INSERT statements or printed tables) and the printed output.
Where cep refuses a dialect spelling, the case runs a hand rewrite it names (``rewrites``).
``tests/published_examples/README.md`` describes the format, the sources and the transcription checks.

Each case is run twice:

* python engine: ``cep.compile_sql(statement).run(tables)``, the input tables as Arrow tables under their
  published names (DuckDB runs the SQL around the MATCH_RECOGNIZE clause);
* Spark: the input tables become temporary views under their published names and
  ``cep.sql(spark, statement)`` runs the statement (the whole-statement entry point).

The result is compared with the published output: column names case-insensitively (as a set when the
statement selects ``*``, whose column order each dialect defines its own way, else in order), rows as a
multiset unless the statement has an outer ORDER BY (then in order), numbers numerically, dates and
timestamps as ISO text. Where the publisher departs from the SQL standard the case carries a
``standard_output`` (with the reason) and that is what cep must give.

Cases that fail today are listed in ``KNOWN_FAILURES`` below with what fails (the error code cep gives,
or ``ROWS`` for a wrong answer) and the missing feature or bug. They are ``xfail(strict=True)`` and only
for that failure: another error makes the test fail, and a pass makes it XPASS, which fails too, so the
entry must be removed when the feature lands.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest

import cep
from cep.cli_io import spark_error
from tests.published_examples.tables import convert, parse_inserts, parse_spaced, parse_table, parse_values_clause

CASES_DIR = Path(__file__).resolve().parent / "published_examples"

# ----------------------------------------------------------------------------------------------------
# Known failures: case id -> (what fails, why). "what fails" is the CepError code cep raises, or "ROWS"
# when cep answers with other rows than the published (or standard) output. Every entry was observed by
# running the case; the reason names the feature or bug, first the one that stops the case today, then
# (after "then:") what the case needs beyond it, found by rewriting the blocking construct by hand.
# ----------------------------------------------------------------------------------------------------

PYTHON_FAILURES: dict[str, tuple[str, str]] = {
    "flink-docs-within-one-hour": (
        "ROWS",
        "WITHIN keeps a match only when its last row is less than the interval after its first (Flink's runtime "
        "behaviour as measured, and cep's spec: docs/semantics.md, known deviations); the page keeps the match "
        "12:00-13:00, exactly one hour, where cep finds the next one, 12:20-13:00 (dropDiff 13)",
    ),
}

SPARK_FAILURES: dict[str, tuple[str, str]] = dict(PYTHON_FAILURES)


class KnownFailure(Exception):
    """The case failed exactly as its KNOWN_FAILURES entry says."""


# ---------------------------------------------------------------------------------------------- cases


def load_cases() -> list[dict]:
    return [json.loads(path.read_text(encoding="utf-8")) for path in sorted(CASES_DIR.glob("*.json"))]


CASES = load_cases()
BY_ID = {case["id"]: case for case in CASES}


def statement(case: dict) -> str:
    """The statement run: as published, or (for a published fragment) wrapped in SELECT * FROM input MATCH_RECOGNIZE."""
    return case.get("runnable_query", case["query"])


def _typed(value, kind: str):
    if value is None:
        return None
    if kind == "DATE":
        return dt.date.fromisoformat(value)
    if kind == "TIMESTAMP":
        return dt.datetime.fromisoformat(value)
    return value


def input_rows(table: dict) -> list[dict]:
    names = [name for name, _, _ in table["columns"]]
    kinds = [kind for _, kind, _ in table["columns"]]
    return [{n: _typed(v, k) for n, k, v in zip(names, kinds, row)} for row in table["rows"]]


def expected(case: dict) -> tuple[list[str], list[str], list[list], bool]:
    out = case["output"]
    names = out.get("column_names", out["columns"])
    rows = case["standard_output"]["rows"] if "standard_output" in case else out["rows"]
    return names, out["types"], rows, out["ordered"]


def expected_error(case: dict) -> str | None:
    """The CepError code the standard requires where the publisher printed rows instead (else None)."""
    return case.get("standard_output", {}).get("error")


def _norm(value, kind: str):
    """A comparable form of one value of a column whose published type is ``kind``."""
    if value is None:
        return None
    if hasattr(value, "to_pydatetime"):  # pandas Timestamp
        value = value.to_pydatetime()
    if kind == "DATE":
        if isinstance(value, dt.datetime):
            return value.date().isoformat() if value.time() == dt.time(0) else value.isoformat(" ")
        return value.isoformat() if isinstance(value, dt.date) else str(value)
    if kind == "TIMESTAMP":
        if isinstance(value, dt.datetime):
            return value.replace(tzinfo=None).isoformat(" ", "seconds")
        if isinstance(value, dt.date):
            return f"{value.isoformat()} 00:00:00"
        return str(value)
    if kind.startswith("ARRAY"):
        inner = kind[kind.index("<") + 1 : -1]
        return tuple(_norm(v, inner) for v in value)
    if isinstance(value, bool) or kind == "BOOLEAN":
        return value
    if isinstance(value, (int, float, Decimal)):
        number = float(value)
        return round(number, 6) if math.isfinite(number) else number
    return value


def _selects_star(text: str) -> bool:
    return (
        re.match(
            r"\s*(?:--[^\n]*\n\s*)*select\s+\*",
            re.sub(r"^\s*with\b.*?\)\s*(?=select)", "", text, flags=re.I | re.S),
            re.I,
        )
        is not None
    )


def compare(case: dict, names: list[str], rows: list[list]) -> str | None:
    """None when the result is the expected one, else what differs."""
    want_names, kinds, want_rows, ordered = expected(case)
    got = [n.casefold() for n in names]
    want = [n.casefold() for n in want_names]
    if _selects_star(statement(case)):
        if sorted(got) != sorted(want):
            return f"columns {list(names)} != {want_names} (as sets: SELECT *)"
    elif got != want:
        return f"columns {list(names)} != {want_names}"
    index = [got.index(n) for n in want]
    got_rows = [tuple(_norm(row[i], k) for i, k in zip(index, kinds)) for row in rows]
    want_rows = [
        tuple(
            _norm(convert(v, k) if isinstance(v, str) and k not in ("VARCHAR",) else v, k) for v, k in zip(row, kinds)
        )
        for row in want_rows
    ]
    if ordered:
        if got_rows != want_rows:
            return (
                "rows differ (in order):\n  got  "
                + "\n       ".join(map(str, got_rows))
                + "\n  want "
                + "\n       ".join(map(str, want_rows))
            )
        return None
    missing, extra = Counter(want_rows) - Counter(got_rows), Counter(got_rows) - Counter(want_rows)
    if missing or extra:
        return (
            f"rows differ:\n  missing {sorted(map(str, missing.elements()))}\n"
            f"  extra   {sorted(map(str, extra.elements()))}"
        )
    return None


# ---------------------------------------------------------------------------------------------- engines


def run_python(case: dict) -> tuple[list[str], list[list]]:
    import pyarrow as pa

    tables = {}
    for name, table in case["inputs"].items():
        if table.get("embedded_in_query"):
            continue
        schema = pa.schema([(col, _ARROW_TYPES[kind]) for col, kind, _ in table["columns"]])
        tables[name] = pa.Table.from_pylist(input_rows(table), schema=schema)
    result = cep.compile_sql(statement(case)).run(tables)
    return result.column_names, [list(row.values()) for row in result.to_pylist()]


def _arrow_types() -> dict:
    import pyarrow as pa

    return {
        "VARCHAR": pa.string(),
        "BIGINT": pa.int64(),
        "INTEGER": pa.int32(),
        "DOUBLE": pa.float64(),
        "DATE": pa.date32(),
        "TIMESTAMP": pa.timestamp("us"),
        "BOOLEAN": pa.bool_(),
    }


_ARROW_TYPES = _arrow_types()
_SPARK_TYPES = {
    "VARCHAR": "string",
    "BIGINT": "bigint",
    "INTEGER": "int",
    "DOUBLE": "double",
    "DATE": "date",
    "TIMESTAMP": "timestamp",
    "BOOLEAN": "boolean",
}


class SparkViews:
    """The cases' input tables as the session's temporary views under their published names. A view is made
    again only when a case's table differs from the one its name holds: most publishers' cases read one
    table (19 cases Snowflake's stock_price_history, 15 the book's ticker), and the cases run in file order."""

    def __init__(self, spark) -> None:
        self.spark = spark
        self.holding: dict[str, str] = {}  # view name -> the table it holds (its columns and rows, as JSON)

    def register(self, case: dict) -> None:
        for name, table in case["inputs"].items():
            if table.get("embedded_in_query"):
                continue
            content = json.dumps([table["columns"], table["rows"]])
            if self.holding.get(name) == content:
                continue
            schema = ", ".join(f"`{col}` {_SPARK_TYPES[kind]}" for col, kind, _ in table["columns"])
            rows = [tuple(row[c] for c, _, _ in table["columns"]) for row in input_rows(table)]
            self.spark.createDataFrame(rows, schema).createOrReplaceTempView(name)
            self.holding[name] = content


def run_spark(views: SparkViews, case: dict) -> tuple[list[str], list[list]]:
    views.register(case)
    spark = views.spark
    df = cep.sql(spark, statement(case))
    try:
        return list(df.columns), [list(row) for row in df.collect()]
    except Exception as exc:  # a matcher error raised in a Spark worker arrives wrapped in Spark's exception
        found = re.search(r"error\[(E\d+)\]", spark_error(exc) or "")
        if found:
            raise WorkerError(found[1], str(exc)) from exc
        raise


class WorkerError(Exception):
    """A CepError raised in a Spark worker (``df.collect()`` raises Spark's exception, which holds it)."""

    def __init__(self, code: str, text: str) -> None:
        super().__init__(text)
        self.code = code


def check(case: dict, run, failures: dict[str, tuple[str, str]]) -> None:
    known = failures.get(case["id"])
    wanted_error = expected_error(case)
    try:
        names, rows = run()
    except (cep.CepError, WorkerError) as error:
        if wanted_error == error.code:
            return
        if known and known[0] == error.code:
            raise KnownFailure(f"{error.code}: {known[1]}") from error
        raise AssertionError(f"{case['id']}: cep raised {error.code}:\n{error}") from error
    if wanted_error:
        problem = f"the standard requires error {wanted_error}; cep gave {len(rows)} rows"
        if known and known[0] == "ROWS":
            raise KnownFailure(f"ROWS: {known[1]}\n{problem}")
        raise AssertionError(f"{case['id']}: {problem}")
    problem = compare(case, names, rows)
    if problem and known and known[0] == "ROWS":
        raise KnownFailure(f"ROWS: {known[1]}\n{problem}")
    assert problem is None, f"{case['id']}: {problem}"


def _params(failures: dict[str, tuple[str, str]]) -> list:
    params = []
    for case in CASES:
        known = failures.get(case["id"])
        marks = [pytest.mark.xfail(strict=True, raises=KnownFailure, reason=f"{known[0]}: {known[1]}")] if known else []
        params.append(pytest.param(case["id"], marks=marks, id=case["id"]))
    return params


@pytest.mark.parametrize("case_id", _params(PYTHON_FAILURES))
def test_python_engine(case_id: str) -> None:
    case = BY_ID[case_id]
    check(case, lambda: run_python(case), PYTHON_FAILURES)


@pytest.fixture(scope="module")
def spark_views(spark) -> SparkViews:
    return SparkViews(spark)


@pytest.mark.spark
@pytest.mark.parametrize("case_id", _params(SPARK_FAILURES))
def test_spark(spark_views, case_id: str) -> None:
    case = BY_ID[case_id]
    check(case, lambda: run_spark(spark_views, case), SPARK_FAILURES)


# ---------------------------------------------------------------------------------------------- the cases themselves


def test_failure_tables_name_real_cases() -> None:
    assert set(PYTHON_FAILURES) <= set(BY_ID) and set(SPARK_FAILURES) <= set(BY_ID)


def test_known_failures_are_documented_deviations() -> None:
    """A published example cep answers differently is a deviation docs/semantics.md states."""
    semantics = (Path(__file__).resolve().parents[1] / "docs" / "semantics.md").read_text(encoding="utf-8")
    for case_id in {**PYTHON_FAILURES, **SPARK_FAILURES}:
        assert case_id in semantics, f"{case_id} fails on purpose, but docs/semantics.md does not say so"


def test_at_least_24_cases_with_sources() -> None:
    assert len(CASES) >= 24
    for case in CASES:
        source = case["source"]
        assert {"publisher", "document", "section", "url", "read_from"} <= set(source), case["id"]
        assert case["dialect"] in {"oracle", "snowflake", "trino", "flink", "ydb"}, case["id"]
        assert case["output"]["rows"], case["id"]


@pytest.mark.parametrize("case_id", sorted(BY_ID))
def test_transcription_matches_published_text(case_id: str) -> None:
    """The typed rows are what the verbatim published text says (inputs and output, every value)."""
    case = BY_ID[case_id]
    for name, table in case["inputs"].items():
        text, cols = table["published_text"], table["columns"]
        if re.search(r"insert\s+into", text, re.I):
            raw = parse_inserts(text, name)
        elif table.get("embedded_in_query"):
            raw = parse_values_clause(text)
        else:
            header, raw = parse_table(text)
            printed = table.get("printed_columns", [c[0] for c in cols])
            assert [h.casefold() for h in header] == [name.casefold() for name in printed]
        assert [[convert(v, kind) for v, (_, kind, _) in zip(row, cols)] for row in raw] == table["rows"], name
        assert all(len(row) == len(cols) for row in table["rows"])
    out = case["output"]
    if "translated" in out:  # a translation of the book printed some values translated: mapped back
        header, raw = parse_spaced(out["published_text"])
        raw = [[out["translated"].get(value, value) for value in row] for row in raw]
    else:
        header, raw = parse_table(out["published_text"])
    assert header == out["columns"]
    assert [[convert(v, kind) for v, kind in zip(row, out["types"])] for row in raw] == out["rows"]
    assert all(len(row) == len(out["types"]) for row in out["rows"])
    if "standard_output" in case:
        standard = case["standard_output"]
        assert standard["reason"]
        assert ("error" in standard) != ("rows" in standard)
        assert "error" in standard or len(standard["rows"][0]) == len(out["types"])
    # A statement is run other than as printed only for a named reason: a fragment, or hand rewrites.
    assert ("runnable_query" in case) == bool(case.get("query_is_fragment") or case.get("rewrites"))


# The Flink documentation's examples were transcribed a second time, independently and normalised (input
# named t, whitespace collapsed, no trailing ';'), into the conformance corpus: both copies must agree.
FLINK_CORPUS_TWINS = {
    "flink-docs-price-down-skip-to-last": "flink-docs-match_recognize-introduction-1",
    "flink-docs-aggregation-avg-below-15": "flink-docs-match_recognize-aggregations-1",
    "flink-docs-greedy-quantifier": "flink-docs-match_recognize-greedy-1",
    "flink-docs-reluctant-quantifier": "flink-docs-match_recognize-reluctant-1",
    "flink-docs-within-one-hour": "flink-docs-match_recognize-time_constraint-1",
    "flink-docs-output-mode": "flink-docs-match_recognize-output_mode-1",
    "flink-docs-skip-past-last-row": "flink-docs-match_recognize-after_match_past_last_row-1",
    "flink-docs-skip-to-next-row": "flink-docs-match_recognize-after_match_to_next_row-1",
    "flink-docs-skip-to-last-a": "flink-docs-match_recognize-after_match_to_last_a-1",
}


def _corpus_form(text: str) -> str:
    text = re.sub(r"\bFROM Ticker\b", "FROM t", " ".join(text.split()))
    return text.removesuffix(";").rstrip()


@pytest.mark.parametrize("case_id", sorted(FLINK_CORPUS_TWINS))
def test_flink_cases_agree_with_the_corpus_transcription(case_id: str) -> None:
    from tests.conformance import load_cases as load_corpus

    case = BY_ID[case_id]
    twin = next(c for c in load_corpus() if c["id"] == FLINK_CORPUS_TWINS[case_id])
    assert _corpus_form(statement(case)) == twin["query"]
    table = case["inputs"]["Ticker"]
    order = [[name for name, _, _ in table["columns"]].index(name) for name, _ in twin["columns"]]
    assert [[_iso_t(row[i]) for i in order] for row in table["rows"]] == twin["rows"]
    assert [n.casefold() for n in case["output"]["columns"]] == [n.casefold() for n in twin["expected_columns"]]
    assert [[_iso_t(v) for v in row] for row in case["output"]["rows"]] == twin["expected"]


def _iso_t(value):
    """The corpus writes timestamps with a T: '2011-04-01T10:00:00'."""
    return value.replace(" ", "T") if isinstance(value, str) and re.fullmatch(r"[\d-]+ [\d:]+", value) else value
