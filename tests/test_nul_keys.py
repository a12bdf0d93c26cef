"""Partition keys that hold a NUL character stay apart on every path.

pandas before 3.1 hashes and compares object strings only up to their first NUL (pandas-dev/pandas#34551), so
``pd.factorize(['a', 'a\\x00b'])`` gives both one code. Every place that groups rows by a text key through
pandas goes through ``factorize_text``; these tests hold each of them to grouping by Python's own equality,
and the matches to the independent reference matcher (tests/reference_matcher.py)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cep
from cep.cli_io import UsageError
from cep.matcher.vector.arrays import factorize_text, groupers
from cep.spark_bridge.alerting.worker import _key_strings
from cep.spark_bridge.engine.column_table import key_codes
from tests.reference_matcher import reference_run

# few characters, NUL and SOH (the escape's own character) among them, so that values collide often
TEXT = st.text(alphabet="a\x00\x01\x02", max_size=4)
VALUES = st.lists(st.one_of(TEXT, st.none()), max_size=30)


def first_appearance_codes(values: list) -> tuple[list[int], list]:
    """The grouping by Python's equality: codes in order of first appearance; NULL is -1."""
    seen: dict = {}
    codes = [-1 if v is None else seen.setdefault(v, len(seen)) for v in values]
    return codes, list(seen)


@given(VALUES)
def test_factorize_text_groups_by_pythons_equality(values) -> None:
    codes, distinct = factorize_text(np.asarray(values, dtype=object))
    assert (codes.tolist(), distinct) == first_appearance_codes(values)


@given(VALUES)
def test_factorize_text_without_a_sentinel_gives_null_a_code_of_its_own(values) -> None:
    codes, _ = factorize_text(np.asarray(values, dtype=object), use_na_sentinel=False)
    seen: dict = {}
    assert codes.tolist() == [seen.setdefault(v, len(seen)) for v in values]


def test_the_streaming_engines_key_codes_keep_nul_keys_apart() -> None:
    codes, keys = key_codes(["a", "a\x00b", "a", "a\x00c"])
    assert (codes.tolist(), keys) == ([0, 1, 0, 2], ["a", "a\x00b", "a\x00c"])


def test_the_alerting_workers_key_texts_keep_nul_keys_apart() -> None:
    # all text (pandas' string table, which stops at NUL), then with a NULL (its object table, which does not)
    for values in (["", "\x00\x1f", "a", "a\x00b"], ["", "\x00\x1f", "a", "a\x00b", None]):
        frame = pd.DataFrame({"s": pd.Series(values, dtype=object)})
        # each key's JSON as json.dumps writes it, row by row
        assert _key_strings(frame, ["s"]) == [json.dumps({"s": v}) for v in values]


QUERY = cep.compile(
    """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts
    MEASURES FIRST(A.ts) AS s, LAST(B.ts) AS e ONE ROW PER MATCH PATTERN (A B+) DEFINE A AS v = 1, B AS v = 2)"""
)


@given(st.lists(st.tuples(st.sampled_from(["a", "a\x00b", "a\x00c", "\x00"]), st.integers(1, 2)), max_size=25))
def test_matches_over_nul_keys_are_the_reference_matchers(events) -> None:
    rows = [{"k": k, "ts": ts, "v": v} for ts, (k, v) in enumerate(events)]
    expected = sorted(tuple(r.values()) for r in reference_run(QUERY.statement, rows))
    assert sorted(tuple(r.values()) for r in QUERY.run(rows)) == expected
    frame = pd.DataFrame(rows, columns=["k", "ts", "v"])
    assert sorted(map(tuple, QUERY.run(frame).itertuples(index=False))) == expected
    table = pa.Table.from_pandas(frame, preserve_index=False)
    assert sorted(tuple(r.values()) for r in QUERY.run(table).to_pylist()) == expected


def test_two_keys_that_differ_after_a_nul_never_share_a_match() -> None:
    rows = [{"k": "a", "ts": 1, "v": 1}, {"k": "a\x00b", "ts": 2, "v": 2}]
    assert QUERY.run(rows) == []


# The commands' own groupings (display and counts, not matching) go through `groupers`.
FRAME = pd.DataFrame({"k": ["a", "a\x00b", "a", "a\x00b"], "ts": [1, 2, 3, 4], "v": [1, 1, 2, 2]})


@given(st.lists(st.one_of(TEXT, st.none()), min_size=1, max_size=30))
def test_groupers_group_by_pythons_equality(values) -> None:
    frame = pd.DataFrame({"k": pd.Series(values, dtype=object), "n": range(len(values))})
    groups = frame.groupby(groupers(frame, ["k"]), sort=False, dropna=False)
    # each group's rows, by the row numbers, against the grouping by Python's equality (NULLs one group)
    by_value: dict = {}
    for row, value in enumerate(values):
        by_value.setdefault((value is None, value), []).append(row)
    assert [list(g["n"]) for _, g in groups] == list(by_value.values())
    assert groups.ngroups == len(by_value)


def test_the_partition_count_of_a_run_keeps_nul_keys_apart() -> None:
    statement = cep.compile_sql(
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES COUNT(*) AS n PATTERN (A B) "
        "DEFINE A AS v = 1, B AS v = 2)"
    )
    stats: list = []
    result = statement.run({"t": FRAME}, clause_stats=stats)
    assert sorted(result["n"]) == [2, 2]  # each key's two rows, one match each
    assert [s.partitions for s in stats] == [2]


def test_trace_counts_nul_keys_as_two_partitions() -> None:
    from cep.cli import _partition_filter

    with pytest.raises(UsageError, match="the input holds 2 partitions"):
        _partition_filter(QUERY, FRAME, [])


def test_the_reports_summary_keeps_nul_keys_apart() -> None:
    from cep.report import labelled_query, match_summary

    labelled = labelled_query(QUERY).run(FRAME)
    summary = match_summary(labelled, ["k"], "ts")
    assert sorted(zip(summary["partition"], summary["first"], summary["rows"])) == [
        ("k=a", 1, 2),
        ("k=a\x00b", 2, 2),
    ]
