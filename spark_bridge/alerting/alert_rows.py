"""A rule's output rows as alert rows, column by column: every alert of a call (all its keys) built in one pass
per column (the status, the times, each measure's JSON text), not one dict and one encoder call per alert.

An alert's measures are the JSON object ``json.dumps({name: jsonable(value), ...}, ensure_ascii=False)``, in the
rule's measure order: each measure's values are encoded as a column (``json_texts``: a value of a type the
column-wise engine emits as plain Python, float, int, bool, str, None, datetime, date, Decimal, is written as
``json`` writes it, any other type through ``jsonable`` and the encoder), then each alert's text is the
object's template filled with its values' texts. tests/test_alerting_alert_rows.py holds both equal to
``json.dumps`` of each alert's values on random measures of every type, NULLs, NaN and infinities included."""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections import Counter
from collections.abc import Sequence
from decimal import Decimal
from itertools import repeat
from operator import itemgetter
from typing import Any

from cep.spark_bridge.engine import state_codec as codec
from cep.spark_bridge.sinks.alerts import jsonable
from cep.spark_bridge.sinks.time_columns import iso_texts, naive_micros

# json.dumps(value, ensure_ascii=False), without building an encoder for every value
UNESCAPED = json.JSONEncoder(ensure_ascii=False)
# a str as JSON text, ``ensure_ascii=False`` (what the encoder writes for a str: C's, where there is one)
_STRING = json.encoder.encode_basestring
# Fewer alerts than this in a call (a per-key rule's call has one or two) are encoded one dict at a time: below
# it, setting up the columns costs more than it saves (measured: 26 µs against 11 for one alert of four measures).
COLUMNS_FROM = 4
# what ``rule.throttle`` counts alerts by status in (another status counts as matched)
STATUS_STAT = {"TIMEOUT": "timeouts", "ABSENCE": "absences", "MATCHED": "matched"}


def _float_text(value: float) -> str:
    # jsonable: NaN and infinities are null; the encoder writes a finite float as float.__repr__
    return float.__repr__(value) if math.isfinite(value) else "null"


def _quoted_ascii(text: str) -> str:
    return '"' + text + '"'  # an ISO 8601 time or a decimal's digits: no character JSON escapes


# The exact types (not subclasses: numpy's float64 is a float, a bool an int) written here as ``json.dumps`` of
# ``jsonable(value)`` writes them; every other value goes through ``jsonable`` and the encoder.
_TEXT_OF_TYPE = {
    float: _float_text,
    int: int.__repr__,
    bool: lambda value: "true" if value else "false",
    str: _STRING,
    type(None): lambda _value: "null",
    _dt.datetime: lambda value: _quoted_ascii(value.isoformat()),
    _dt.date: lambda value: _quoted_ascii(value.isoformat()),
    Decimal: lambda value: _STRING(str(value)),
}


def _any_text(value: Any) -> str:
    return UNESCAPED.encode(jsonable(value))


def json_texts(values: Sequence[Any]) -> list[str]:
    """Each value's JSON text, as ``json.dumps(jsonable(value), ensure_ascii=False)`` writes it."""
    kinds = set(map(type, values))
    if kinds == {float}:
        texts = list(map(float.__repr__, values))
        if not all(map(math.isfinite, values)):
            texts = [text if math.isfinite(value) else "null" for text, value in zip(texts, values)]
        return texts
    if kinds == {str}:
        return list(map(_STRING, values))
    if kinds == {int}:
        return list(map(int.__repr__, values))
    if kinds == {_dt.datetime}:  # a time measure (FIRST(A.ts))
        return _time_texts(values)
    text_of = _TEXT_OF_TYPE.get
    return [text_of(type(value), _any_text)(value) for value in values]


def _time_texts(values: Sequence[_dt.datetime]) -> list[str]:
    """``datetime.isoformat`` of each value, quoted: for naive times within pandas' range, numpy's text of the whole
    column (``time_columns.iso_texts``); any other column (an aware time, a year pandas' nanoseconds do not reach)
    one value at a time."""
    micros = naive_micros(values)
    if micros is None:  # aware: isoformat writes its offset
        return list(map('"%s"'.__mod__, map(_dt.datetime.isoformat, values)))
    return list(map('"%s"'.__mod__, iso_texts(micros)))


def object_template(names: Sequence[str]) -> str:
    """The ``%`` template of a JSON object of ``names``, in the encoder's layout (``{"a": %s, "b": %s}``)."""
    if not names:
        return "{}"
    return "{" + ", ".join(_STRING(name).replace("%", "%%") + ": %s" for name in names) + "}"


def measure_texts(measures: Sequence[tuple[int, str]], rows: Sequence[tuple]) -> list[str]:
    """Each row's measures as the JSON object ``{name: jsonable(row[i]) for i, name in measures}`` encoded: a
    name given twice keeps its first place and its last value, as the dict does."""
    if len(rows) < COLUMNS_FROM:
        return [UNESCAPED.encode({name: jsonable(row[index]) for index, name in measures}) for row in rows]
    places: dict[str, int] = {}
    for index, name in measures:
        places[name] = index
    template = object_template(list(places))
    if not places:
        return [template] * len(rows)
    columns = [json_texts(list(map(itemgetter(index), rows))) for index in places.values()]
    if len(columns) == 1:
        return [template % (text,) for text in columns[0]]
    return [template % texts for texts in zip(*columns)]


def append_alerts(rule, calls: Sequence[tuple[str, list[tuple], list[str], int | None]], emitted, alerts, stats):
    """The output rows of ``rule`` for each key of a call (``calls``: the key's partition key text, its rows, their
    match ids, its last alert's event time before them, in the call's order) appended to ``alerts`` as alert rows,
    suppressed or not from the key's last alert; counts added to ``stats``. Returns each key's last alert after
    its rows."""
    rows = [row for call in calls for row in call[1]]
    if not rows:
        return [call[3] for call in calls]
    pkeys = [pkey for pkey, key_rows, _, _ in calls for pkey in repeat(pkey, len(key_rows))]
    match_ids = [match_id for call in calls for match_id in call[2]]
    if rule.status_index is not None:
        statuses = [status or "MATCHED" for status in map(itemgetter(rule.status_index), rows)]
    else:
        statuses = ["MATCHED"] * len(rows)
    first_times = list(map(itemgetter(rule.first_index), rows))
    last_times = list(map(itemgetter(rule.last_index), rows))
    last_alerts, suppressed = _suppressed(rule.throttle, calls, first_times, last_times)
    alerts.extend(
        zip(
            repeat(rule.rule_id),
            repeat(rule.version),
            match_ids,
            statuses,
            pkeys,
            first_times,
            last_times,
            measure_texts(rule.measures, rows),
            repeat(emitted),
            suppressed,
        )
    )
    if len(statuses) < COLUMNS_FROM:
        for status in statuses:
            stats[STATUS_STAT.get(status, "matched")] += 1
    else:
        for status, count in Counter(statuses).items():
            stats[STATUS_STAT.get(status, "matched")] += count
    stats["suppressed"] += sum(suppressed)
    return last_alerts


def _suppressed(throttle, calls, first_times: list, last_times: list) -> tuple[list, list[bool]]:
    """(each key's last alert after its rows, each row suppressed or not): ``throttle.decide`` over each key's
    rows in order, from the row's event time (its last time, else its first). Without an interval nothing is
    suppressed and no time is read."""
    if not throttle.interval:
        return [call[3] for call in calls], [False] * len(first_times)
    last_alerts, suppressed = [], []
    at = 0
    for _, key_rows, _, last_alert in calls:
        for first_time, last_time in zip(first_times[at : at + len(key_rows)], last_times[at : at + len(key_rows)]):
            moment = last_time if last_time is not None else first_time
            event_us = codec.datetime_to_micros(moment) if moment is not None else None
            flag, last_alert = throttle.decide(last_alert, event_us)
            suppressed.append(flag)
        at += len(key_rows)
        last_alerts.append(last_alert)
    return last_alerts, suppressed
