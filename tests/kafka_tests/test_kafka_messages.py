"""A micro-batch's Kafka messages made column by column (``batch_messages``) are, byte for byte, the messages
``alert_message`` makes alert by alert, and both are the documented message written here with ``json`` alone:
value ``json.dumps`` of the alert's object (partition key and measures parsed, non-finite numbers null, times
ISO 8601 with ``Z``) with ``","`` and ``":"``, UTF-8; key the match id; the three ``cep-`` headers and the
content type; timestamp the emit time in epoch milliseconds. No broker: the messages are what the sinks produce."""

from __future__ import annotations

import datetime as dt
import json
import math

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from cep.spark_bridge.sinks.alerts import ALERT_NAMES
from cep.spark_bridge.sinks.kafka_messages import SharedMessages, alert_message, batch_messages

TIME_NAMES = ("first_event_time", "last_event_time", "emit_time")


def _finite(text: str):
    number = float(text)
    return number if math.isfinite(number) else None


def documented_message(alert: dict) -> dict:
    """The message as docs/alerting.md and the Kafka sink's module doc describe it, with nothing of cep."""

    def object_or_text(text):
        if not isinstance(text, str):
            return text
        try:
            return json.loads(text, parse_float=_finite, parse_constant=lambda _name: None)
        except ValueError:
            return text

    def iso_z(value):
        if value is None:
            return None
        if isinstance(value, pd.Timestamp):
            value = value.to_pydatetime()
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return value.isoformat() + "Z"

    payload = {}
    for name in ALERT_NAMES:
        value = alert.get(name)
        if name in ("partition_key", "measures"):
            value = object_or_text(value)
        elif name in TIME_NAMES:
            value = iso_z(value)
        payload[name] = value
    emitted = alert.get("emit_time")
    if isinstance(emitted, pd.Timestamp):
        emitted = emitted.to_pydatetime()
    timestamp = None
    if emitted is not None:
        timestamp = int((emitted if emitted.tzinfo else emitted.replace(tzinfo=dt.UTC)).timestamp() * 1000)
    headers = [("cep-rule-id", "rule_id"), ("cep-rule-version", "rule_version"), ("cep-match-status", "match_status")]
    return {
        "key": (payload["match_id"] or "").encode("utf-8"),
        "value": json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8"),
        "headers": [(h, str(payload[n]).encode("utf-8")) for h, n in headers if payload[n] is not None]
        + [("content-type", b"application/json")],
        "timestamp": timestamp,
    }


TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=10)
NUMBER = st.one_of(
    st.floats(),  # NaN and infinities: null
    st.integers(-(10**30), 10**30),
    st.sampled_from(["1e400", "-1e400", "NaN", "Infinity", "-0.0", "0.1"]),
)
JSON_TEXT = st.one_of(
    st.recursive(
        st.one_of(st.none(), st.booleans(), TEXT, st.floats(allow_nan=False, allow_infinity=False), st.integers()),
        lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(TEXT, inner, max_size=3)),
        max_leaves=6,
    ).map(lambda v: json.dumps(v, ensure_ascii=False)),
    # cep's measures: json.dumps of the values, NaN and infinities written as JSON does not allow
    st.dictionaries(TEXT, NUMBER, max_size=3).map(
        lambda d: (
            "{"
            + ", ".join(f"{json.dumps(k)}: {v if isinstance(v, str) else json.dumps(v)}" for k, v in d.items())
            + "}"
        )
    ),
    st.sampled_from(['  {"a": 1} ', '{"a": 1} x', "not json", "", "[1, 2]", "3", '{"a": 1, "a": 2}', '"\\u00e9"']),
    TEXT,
)
# naive times across the years (numpy's column text within pandas' range, isoformat beyond), whole seconds, aware
NAIVE = st.one_of(
    st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30)),
    st.datetimes(min_value=dt.datetime(1970, 1, 1), max_value=dt.datetime(2300, 1, 1)).map(
        lambda t: t.replace(microsecond=0)
    ),
    st.datetimes(min_value=dt.datetime(2026, 1, 1), max_value=dt.datetime(2026, 1, 2)).map(
        lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000)  # the JSON output's milliseconds
    ),
)
TIME = st.one_of(
    NAIVE,
    st.none(),
    NAIVE.filter(lambda t: 2 <= t.year <= 9998).map(lambda t: t.replace(tzinfo=dt.timezone(dt.timedelta(hours=-5)))),
    NAIVE.filter(lambda t: 1700 < t.year < 2200).map(pd.Timestamp),
)


def alerts(time, *, odd: bool):
    text = st.one_of(TEXT, st.none())
    fields = {name: text for name in ALERT_NAMES}
    fields.update({name: time for name in TIME_NAMES}, partition_key=JSON_TEXT, measures=JSON_TEXT)
    fields["suppressed"] = st.one_of(st.booleans(), st.none())
    if odd:  # values of other types: written field by field as alert_message writes them
        fields["rule_version"] = st.one_of(text, st.integers(1, 5))
        fields["suppressed"] = st.sampled_from([True, False, None, 1, 0])
        fields["measures"] = st.one_of(JSON_TEXT, st.none(), st.integers())
    return st.lists(st.fixed_dictionaries(fields), max_size=10)


@settings(max_examples=200, deadline=None)
@given(batch=st.one_of(alerts(st.one_of(NAIVE, st.none()), odd=False), alerts(TIME, odd=True)))
def test_a_micro_batch_s_messages_are_each_alert_s_message_byte_for_byte(batch):
    made = batch_messages(batch)
    assert made == [alert_message(alert) for alert in batch]
    assert made == [documented_message(alert) for alert in batch]


@settings(max_examples=40, deadline=None)
@given(batch=alerts(st.one_of(NAIVE, st.none()), odd=False), per_generation=st.integers(1, 8))
def test_two_kafka_sinks_share_a_micro_batch_s_messages(batch, per_generation):
    memo = SharedMessages(per_generation)

    class Sink:
        pass

    sinks = [Sink(), Sink()]
    memo.sinks.update(sinks)
    first = memo.messages(batch)
    again = memo.messages([dict(alert) for alert in batch])
    assert first == again == [alert_message(alert) for alert in batch]
    distinct = len({tuple(alert.items()) for alert in batch}) == len(batch)  # equal alerts share one kept message
    if batch and distinct and per_generation >= 2 * len(batch):  # all kept: the second sink gets the kept messages
        assert all(a is b for a, b in zip(again, memo.messages(batch)))


def test_the_lanes_of_two_kafka_sinks_handed_one_list_encode_it_once(monkeypatch):
    """The two lanes woken by one seal ask at the same moment: one makes the messages, the other waits for them."""
    from concurrent.futures import ThreadPoolExecutor

    from cep.spark_bridge.sinks import kafka_messages

    made = []
    real = kafka_messages.batch_messages
    monkeypatch.setattr(kafka_messages, "batch_messages", lambda alerts: made.append(len(alerts)) or real(alerts))
    memo = SharedMessages()

    class Sink:
        pass

    sinks = [Sink(), Sink()]
    memo.sinks.update(sinks)
    base = dt.datetime(2026, 1, 1)
    batch = [
        {**{name: f"{name}-{i}" for name in ALERT_NAMES}, **{name: base for name in TIME_NAMES}, "suppressed": False}
        for i in range(500)
    ]
    with ThreadPoolExecutor(2) as lanes:
        first, second = lanes.map(memo.messages, [batch, batch])
    assert first is second
    assert first == [alert_message(alert) for alert in batch]
    assert made == [500]
