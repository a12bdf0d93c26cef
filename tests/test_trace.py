"""``Query.trace``: the trace of a non-matching partition names the row and condition that broke each candidate."""

from __future__ import annotations

import cep

QUERY = """
SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY s ORDER BY id
  MEASURES COUNT(*) AS n
  PATTERN (A B+ C) DEFINE B AS v < PREV(v), C AS v > PREV(v) + 10)
"""


def test_trace_explains_a_non_match():
    q = cep.compile(QUERY)
    rows = [dict(s="x", id=i, v=v) for i, v in enumerate([5, 4, 3, 9])]
    assert q.run(rows) == []  # 9 > 3 + 10 is false: no V-shape steep enough
    trace = q.trace(rows, partition={"s": "x"})
    dropped = trace[trace.event == "dropped"]
    # Row 3 (v=9) breaks the candidate that began at row 0: B fails (9 < 3 is false) and C fails.
    at_row_3 = dropped[(dropped.row == 3) & (dropped.match_start == 0)].detail.tolist()
    assert "B: v < PREV(v) was false" in at_row_3
    assert "C: v > PREV(v) + 10 was false" in at_row_3
    # Later starts were merged into the earlier candidate, and the trace says so.
    assert dropped.detail.str.contains("merged into an equivalent partial match").any()
    assert set(trace.columns) == {"partition", "row", "order_key", "event", "match_start", "detail"}


def test_trace_shows_where_a_match_began_and_ended():
    q = cep.compile(QUERY)
    rows = [dict(s="y", id=i, v=v) for i, v in enumerate([5, 4, 3, 20])]
    trace = q.trace(rows)
    matches = trace[trace.event == "match"]
    assert matches.detail.tolist() == ["match 1: rows 0..3 as A B B C"]
    assert matches.match_start.tolist() == [0]
