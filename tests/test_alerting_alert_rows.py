"""The alert rows of a call built column by column (``alerting/alert_rows.py``) are exactly the rows of the
documented per-alert form: an alert's measures are ``json.dumps({name: jsonable(value), ...},
ensure_ascii=False)`` in the rule's measure order, its status the status measure or MATCHED, its times the
row's, and it is suppressed by ``Throttle.decide`` over its key's alerts in order from the key's last alert.

The independent source is the standard library's ``json.dumps`` (the encoder the alerts were written with, one
dict per alert) and the per-alert loop below, which is the documented rule written out."""

from __future__ import annotations

import datetime as dt
import json
import math
from collections import Counter
from decimal import Decimal
from types import SimpleNamespace

import numpy as np
import pandas as pd
from hypothesis import event, given, settings
from hypothesis import strategies as st

from cep.spark_bridge.alerting.alert_rows import append_alerts, json_texts, measure_texts
from cep.spark_bridge.alerting.suppress import Throttle
from cep.spark_bridge.engine import state_codec as codec
from cep.spark_bridge.sinks.alerts import jsonable

TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=6) | st.sampled_from(
    ["", 'a"b', "a\\b", "tab\there", "ünï", "😀", "\x00\x1f\x7f", "\u2028", "%s", "%%"]
)
FLOATS = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([0.0, -0.0, 1e16, 1e-7, 0.1, 97.5])
TIMES = st.datetimes(min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 12, 31, 23, 59, 59))
AWARE = st.datetimes(timezones=st.sampled_from([dt.UTC, dt.timezone(dt.timedelta(hours=-5, minutes=-30))]))
# Every type the column-wise engine's measures give (plain Python values, NULL as None), and the ones a
# measure could still carry from pandas or numpy (they take ``jsonable``'s way).
VALUES = st.one_of(
    st.none(),
    FLOATS,
    st.integers(min_value=-(2**70), max_value=2**70),
    st.booleans(),
    TEXT,
    TIMES,
    AWARE,
    st.dates(),
    st.times(),
    st.decimals(allow_nan=True, allow_infinity=True, places=None) | st.decimals(places=3, allow_nan=False),
    st.timedeltas(),
    st.binary(max_size=4),
    st.lists(st.integers(-5, 5) | st.floats(allow_nan=True) | st.none(), max_size=3),
    st.builds(np.float64, FLOATS),
    st.builds(np.int64, st.integers(-(2**63), 2**63 - 1)),
    st.builds(pd.Timestamp, TIMES),
)
# A column: one type throughout (the fast paths) or any mix, NULLs included.
NEAR_TIMES = st.datetimes(min_value=dt.datetime(1677, 9, 22), max_value=dt.datetime(2262, 4, 11))  # pandas' ns
COLUMN_KINDS = [
    VALUES,
    FLOATS | st.none(),
    FLOATS,
    st.integers(),
    TEXT,
    TEXT | st.none(),
    TIMES,
    NEAR_TIMES,
    NEAR_TIMES.map(lambda moment: moment.replace(microsecond=0)) | NEAR_TIMES,
    AWARE,
    AWARE | NEAR_TIMES,
    st.booleans(),
]


def documented_measures(measures, row) -> str:
    return json.dumps({name: jsonable(row[index]) for index, name in measures}, ensure_ascii=False)


@st.composite
def measured_rows(draw):
    kinds = draw(st.lists(st.sampled_from(range(len(COLUMN_KINDS))), min_size=0, max_size=5))
    names = draw(st.lists(st.sampled_from(["n", "bottom", 'we"ird', "région", "%s", "a%"]), min_size=len(kinds)))
    count = draw(st.integers(0, 12))
    columns = [draw(st.lists(COLUMN_KINDS[kind], min_size=count, max_size=count)) for kind in kinds]
    rows = list(zip(*columns)) if columns else [()] * count
    measures = list(zip(range(len(kinds)), names[: len(kinds)]))
    return measures, rows


@settings(max_examples=400, deadline=None)
@given(measured_rows())
def test_measure_texts_equal_json_dumps_of_each_alert(case):
    measures, rows = case
    assert measure_texts(measures, rows) == [documented_measures(measures, row) for row in rows]


@settings(max_examples=300, deadline=None)
@given(st.lists(VALUES, max_size=10))
def test_json_texts_equal_json_dumps_of_each_value(values):
    assert json_texts(values) == [json.dumps(jsonable(value), ensure_ascii=False) for value in values]


def test_measure_texts_by_hand():
    """Written down from the JSON grammar: floats shortest-repr, NaN and infinity null, times ISO 8601, decimals
    as text, non-ASCII unescaped, a name given twice at its first place with its last value."""
    row = (97.5, math.nan, 4, None, dt.datetime(2026, 1, 1, 0, 0, 0, 50000), Decimal("1.50"), 'é"', -math.inf, True)
    measures = [(0, "bottom"), (1, "x"), (2, "n"), (3, "gone"), (4, "start_ts"), (5, "d"), (6, "t"), (7, "x"), (8, "b")]
    assert measure_texts(measures, [row]) == [
        '{"bottom": 97.5, "x": null, "n": 4, "gone": null, "start_ts": "2026-01-01T00:00:00.050000", '
        '"d": "1.50", "t": "é\\"", "b": true}'
    ]
    assert measure_texts([], [(), ()]) == ["{}", "{}"]


def documented_alerts(rule, calls, emitted):
    """The per-alert rule: one alert after another, each key from its own last alert."""
    alerts, stats, lasts = [], Counter(), []
    for pkey, rows, ids, last_alert in calls:
        for row, match_id in zip(rows, ids):
            status = (row[rule.status_index] if rule.status_index is not None else None) or "MATCHED"
            first, last = row[rule.first_index], row[rule.last_index]
            moment = last if last is not None else first
            event_us = codec.datetime_to_micros(moment) if moment is not None else None
            suppressed, last_alert = rule.throttle.decide(last_alert, event_us)
            measures = documented_measures(rule.measures, row)
            alerts.append(
                (rule.rule_id, rule.version, match_id, status, pkey, first, last, measures, emitted, suppressed)
            )
            stats[{"TIMEOUT": "timeouts", "ABSENCE": "absences"}.get(status, "matched")] += 1
            stats["suppressed"] += int(suppressed)
        lasts.append(last_alert)
    return alerts, stats, lasts


MINUTE = dt.timedelta(minutes=1)
KEY_ROW = st.tuples(
    st.sampled_from([None, "", "MATCHED", "TIMEOUT", "ABSENCE"]),
    st.none() | st.builds(lambda m: dt.datetime(2026, 1, 1) + m * MINUTE, st.integers(0, 30)),
    st.none() | st.builds(lambda m: dt.datetime(2026, 1, 1) + m * MINUTE, st.integers(0, 30)),
    FLOATS | st.none(),
    st.integers(0, 9),
)


@st.composite
def rule_calls(draw):
    interval = draw(st.sampled_from([None, 0, 60_000_000, 5 * 60_000_000]))
    status_index = draw(st.sampled_from([None, 0]))
    rule = SimpleNamespace(
        rule_id="r1",
        version="v1",
        status_index=status_index,
        first_index=1,
        last_index=2,
        measures=[(3, "bottom"), (4, "n")] + ([(0, "status")] if status_index is not None else []),
        throttle=Throttle(interval),
    )
    calls = []
    for key in range(draw(st.integers(0, 4))):
        rows = draw(st.lists(KEY_ROW, max_size=5))
        last = draw(st.none() | st.builds(lambda m: 1_767_225_600_000_000 + m * 60_000_000, st.integers(-5, 30)))
        calls.append((f'{{"symbol": "K{key}"}}', rows, [f"id{key}-{i}" for i in range(len(rows))], last))
    return rule, calls


@settings(max_examples=300, deadline=None)
@given(rule_calls())
def test_append_alerts_equal_the_per_alert_rule(case):
    rule, calls = case
    emitted = dt.datetime(2026, 12, 7)
    alerts, stats = [("an", "earlier", "alert")], Counter()
    lasts = append_alerts(rule, calls, emitted, alerts, stats)
    expected, expected_stats, expected_lasts = documented_alerts(rule, calls, emitted)
    assert alerts[1:] == expected
    assert all(type(a[9]) is bool for a in alerts[1:])
    assert +stats == +expected_stats
    assert lasts == expected_lasts


# Plain state data of every size about ``COMPRESS_ABOVE`` (the codec compresses only above it).
STATE = st.recursive(
    st.none() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40) | st.binary(max_size=600),
    lambda inner: st.lists(inner, max_size=8) | st.dictionaries(st.text(max_size=8), inner, max_size=8),
    max_leaves=60,
)


@settings(max_examples=200, deadline=None)
@given(STATE, st.integers(0, 300))
def test_state_compressed_later_is_the_bytes_encode_gives(state, copies):
    """The driver keeps a bucket's bytes uncompressed between its two calls of a micro-batch and compresses them
    once when it keeps them: the bytes saved are those ``encode`` gives, byte for byte."""
    state = [state] * copies  # about COMPRESS_ABOVE and past it
    event(f"compressed: {len(codec.encode(state, compress=False)) - 6 > codec.COMPRESS_ABOVE}")
    loose = codec.encode(state, compress=False)
    assert codec.compressed(loose) == codec.encode(state)
    assert codec.compressed(codec.encode(state)) == codec.encode(state)
    assert codec.decode(loose) == codec.decode(codec.encode(state))
