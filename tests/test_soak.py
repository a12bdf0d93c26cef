"""The soak's own parts (bench/soak.py), without Spark: its input and its check.

The soak reports lost = 0 and duplicated = 0 only if its check can see a loss or a duplicate, and its late
rows are late only if the input puts them far enough behind. Here the soak's input goes through the
streaming engine in-process (``LocalStream``, one file per micro-batch); the bad lines are given the
reasons Spark's reader gives them. The check must find nothing wrong with that output, and must find
each fault planted in it.
"""

from __future__ import annotations

import datetime as dt
import json

import pandas as pd
import pytest

import cep
from bench.soak import BAD_KINDS, DELAY_S, SESSION_S, check, make_input
from cep.spark_bridge.engine.keyed import KeyedStream
from cep.spark_bridge.engine.local import LocalStream
from cep.spark_bridge.engine.match_ids import statement_text
from tests.test_streaming import COLUMNS, QUERIES

OUTPUT = ["symbol", "start_ts", "bottom", "end_ts", "n", "match_id", "cep_late_reason", "cep_late_row"]


@pytest.fixture(scope="module")
def soak_run():
    """A small soak input streamed in-process: (input, output frame as Spark's sink would hold it)."""
    soak = make_input(seed=5, files=80, rows_per_file=10, bad=0.05, late=0.05)
    query = cep.compile(QUERIES["vshape"])
    engine = KeyedStream(
        query.plan, COLUMNS + ("id",), query_text=statement_text(query), session_timeout_us=SESSION_S * 1_000_000
    )
    stream = LocalStream(engine, delay_ms=DELAY_S * 1000)
    records = []
    for lines in soak.files + [soak.last, []]:
        rows = []
        for line in lines:
            try:
                row = json.loads(line)
            except ValueError:
                row = None
            number = row.get("id") if row else None
            if row is None or number in soak.bad_ids:  # what Spark's reader rejects, with its reason
                kind = soak.bad_ids[number] if row else "not_json"
                records.append([None] * 6 + [BAD_KINDS[kind], line])
                continue
            rows.append({**row, "ts": dt.datetime.fromisoformat(row["ts"])})
        out, ids, late = stream.run_batch(rows)
        records += [list(r) + [i, None, None] for r, i in zip(out, ids)]
        records += [[None] * 6 + [reason, json.dumps({**row, "ts": row["ts"].isoformat()})] for reason, row in late]
    return soak, pd.DataFrame(records, columns=OUTPUT)


def test_the_soak_input_streamed_in_process_passes_its_check(soak_run):
    soak, result = soak_run
    report = check(result, soak)
    assert report["matches_expected"] > 50 and report["late_sent"] > 5 and report["bad_sent"] > 5
    assert set(report["bad_sent_by_kind"]) == set(BAD_KINDS)
    zero = ("lost", "unexpected", "duplicated_match_ids", "bad_not_accounted_for", "good_rows_reported_late_or_bad")
    assert {k: report[k] for k in zero} == dict.fromkeys(zero, 0)
    assert report["late_out_as_late"] == report["late_sent"] == report["late"]  # one file per micro-batch here
    assert report["late_sent_but_on_time"] == 0
    assert report["bad_out_with_their_reason"] == report["bad_sent"] == report["dead_lettered"]


def test_the_soak_check_finds_a_lost_match_a_duplicate_and_an_unaccounted_row(soak_run):
    soak, result = soak_run
    matches = result[result["cep_late_reason"].isna()]
    rejected = result[result["cep_late_reason"].isin(set(BAD_KINDS.values()))]
    planted = pd.concat(
        [result.drop(index=[matches.index[0], rejected.index[0]]), matches.iloc[[1]]], ignore_index=True
    )
    report = check(planted, soak)
    assert report["lost"] == 1  # the dropped match (its twin was planted as a duplicate of another)
    assert report["duplicated_match_ids"] == 1 and report["unexpected"] == 1
    assert report["bad_not_accounted_for"] == 1
