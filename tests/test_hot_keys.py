"""Hot keys at a scaled-down size: the cap on pending rows is applied, counted and bounds the state.

The scenario is ``bench/hot_keys.py``'s (one hot key, many keys with a few rows each, micro-batches of
event time, one hot row in ``defer_every`` arriving a batch later), run through the streaming engine
in-process (``LocalStream``: Spark's micro-batch rules, no Spark). Independent checks: the batch replay
``q.run`` over each key's rows; the hot key's pending rows read back from its saved state.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.hot_keys import END_KEY, HOT_KEY, T0, Scenario, check_against_replay, make_events, run_engine
from cep.spark_bridge.engine.keyed import LATE_BEHIND_FORCED

SMALL = Scenario(hot_rows=12_000, small_keys=300, max_pending_rows=1_500, defer_every=50)


def test_a_hot_key_beyond_the_cap_is_released_early_counted_and_the_other_keys_are_exact():
    events = make_events(SMALL)
    run = run_engine(SMALL, events)

    # The hot key delivers 5,000 rows per micro-batch against a cap of 1,500: it releases early, counted.
    hot_rows = SMALL.hot_rows
    assert run.stats["cap_hits"] > hot_rows // 2
    assert run.hot_pending_max == SMALL.max_pending_rows  # after every call at most the cap, and it was reached
    # Rows deferred by one batch arrive under the forced release: late, with that reason, none dropped.
    deferred = {(HOT_KEY, ts) for ts in _hot_times(events)[SMALL.defer_every - 1 :: SMALL.defer_every]}
    assert run.late and set(run.late) <= deferred
    assert set(run.late.values()) == {LATE_BEHIND_FORCED}
    assert run.stats["late_rows"] == len(run.late)

    checked = check_against_replay(events, run)
    assert checked["small_keys_equal_replay"] and checked["small_key_matches"] > 0
    # Forced releases still feed the hot key's rows in time order: its matches are the replay's over
    # the rows that were not late.
    assert checked["hot_key_equals_replay_of_its_on_time_rows"] and checked["hot_key_matches"] > 0
    assert END_KEY not in {symbol for symbol, _ in run.late}


def test_the_hot_key_state_stays_bounded_as_its_rows_grow():
    """10x the hot rows, the same cap: the hot key's state is no larger (V-shapes complete, the
    matcher trims what it can no longer reach, the pending buffer holds at most the cap)."""
    sizes = {}
    for hot_rows in (10_000, 100_000):
        scenario = dataclasses.replace(SMALL, hot_rows=hot_rows, small_keys=0, defer_every=10**9)
        run = run_engine(scenario, make_events(scenario))
        assert run.hot_pending_max <= scenario.max_pending_rows
        sizes[hot_rows] = max(run.hot_state_bytes)
    assert sizes[100_000] <= 1.2 * sizes[10_000]
    # And bounded in absolute terms: the cap's rows at a few dozen bytes each, plus a little.
    assert sizes[100_000] < 40 * SMALL.max_pending_rows


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    hot_rows=st.integers(1, 4_000),
    small_keys=st.integers(0, 40),
    cap=st.integers(1, 3_000),
    defer_every=st.integers(2, 200),
    seed=st.integers(0, 2**32 - 1),
)
def test_any_cap_keeps_the_other_keys_exact_and_the_hot_key_exact_on_its_on_time_rows(
    hot_rows, small_keys, cap, defer_every, seed
):
    scenario = Scenario(
        hot_rows=hot_rows, small_keys=small_keys, max_pending_rows=cap, defer_every=defer_every, seed=seed
    )
    events = make_events(scenario)
    run = run_engine(scenario, events)
    assert run.hot_pending_max <= cap
    assert set(run.late.values()) <= {LATE_BEHIND_FORCED}  # only the cap can make a row late here
    checked = check_against_replay(events, run)
    assert checked["small_keys_equal_replay"]
    assert checked["hot_key_equals_replay_of_its_on_time_rows"]


def _hot_times(events) -> list:
    hot = np.flatnonzero(events.key < 0)
    return list((T0 + events.us[hot].astype("timedelta64[us]")).astype(object))


# --------------------------------------------------------------- partial matches that never end

NEVER_ENDS = {
    # FIRST(A.v) reads the match history: starts are tried one at a time (lazy starts)
    "history": "PATTERN (A+ B) DEFINE B AS B.v > FIRST(A.v) + 100",
    # conditions on the current row only: every start runs at once
    "row only": "PATTERN (A+ B) DEFINE B AS B.v > 100",
}


@pytest.mark.parametrize("name", sorted(NEVER_ENDS))
def test_a_partial_match_that_never_ends_is_capped_counted_and_the_key_still_matches(name):
    import datetime as dt

    import cep
    from cep.spark_bridge.engine.keyed import KeyedStream
    from cep.spark_bridge.engine.local import LocalStream

    q = cep.compile(f"""SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY s ORDER BY ts
      MEASURES FIRST(A.ts) AS start_ts, COUNT(*) AS n {NEVER_ENDS[name]})""")
    t0 = dt.datetime(2024, 1, 1)

    def rows(first: int, count: int, v: int = 0) -> list[dict]:
        return [{"s": "k", "ts": t0 + dt.timedelta(seconds=first + i), "v": v} for i in range(count)]

    stream = LocalStream(KeyedStream(q.plan, ("s", "ts", "v"), query_text=q.text, max_match_rows=1_000), delay_ms=0)
    sizes = []
    for batch in range(20):  # 10,000 rows, no B: one partial match from the first row, forever
        assert stream.run_batch(rows(batch * 500, 500))[0] == []
        sizes.append(len(stream.states[("k",)]))
    assert stream.stats["match_cap_hits"] >= 1
    # The state stops growing once the cap is reached (a saw tooth between half the cap and the cap),
    # where without the cap it grows with every row.
    assert max(sizes) <= 1.1 * max(sizes[:4])
    uncapped_stream = LocalStream(KeyedStream(q.plan, ("s", "ts", "v"), query_text=q.text), delay_ms=0)
    for batch in range(20):
        uncapped_stream.run_batch(rows(batch * 500, 500))
    assert len(uncapped_stream.states[("k",)]) > 3 * max(sizes)
    # a B at last: with no watermark delay, the key's own bound (its largest event time) releases it at once
    out, _, _ = stream.run_batch(rows(10_000, 1, v=500))
    assert stream.run_batch([])[0] == []
    # The earliest start still kept matches: within the cap, never one of the starts given up.
    assert len(out) == 1 and out[0][2] <= 1_000 + 1 and out[0][1] >= t0 + dt.timedelta(seconds=9_000)
    uncapped = q.run(rows(0, 10_000) + rows(10_000, 1, v=500))
    assert uncapped[0]["n"] == 10_001  # what the cap traded away, and why it is counted
