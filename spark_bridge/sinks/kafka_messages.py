"""The Kafka message of an alert (``alert_message``), a micro-batch's messages column by column
(``batch_messages``), and the messages the process's Kafka sinks share (``SharedMessages``).

**The message**: key = ``match_id`` (UTF-8); value = the alert as the JSON object every sink sends
(``alerts.alert_payload``: rule id and version, match id and status, partition key and measures as objects, event
times and emit time ISO 8601 with ``Z``), compact (``","`` and ``":"``), UTF-8; headers ``cep-rule-id``,
``cep-rule-version``, ``cep-match-status``, ``content-type: application/json``; timestamp = the alert's
``emit_time`` in milliseconds (so a redelivered alert carries the same one).

**A micro-batch at once** (``batch_messages``): the same messages, byte for byte, made one field at a time over
all the alerts: each field's JSON text for the whole column (the strings by C's string encoder, the times by
``isoformat``, the partition key's and measures' JSON text parsed by C's scanner and written again by one C
encoder made once, not one ``JSONEncoder`` set-up per alert), then each value is one template filled with its
alert's texts. A value of a type other than the plain ones (text, a naive ``datetime``, a flag, NULL) is written
by the per-field rule ``alerts.payload_value`` and the encoder, as ``alert_message`` writes it.
tests/kafka_tests/test_kafka_messages.py holds the messages equal to ``alert_message``'s and to ``json.dumps`` of
the documented object on random alerts."""

from __future__ import annotations

import datetime as _dt
import json
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from cep.spark_bridge.sinks.alerts import ALERT_NAMES, PAYLOAD_DECODER, alert_payload, payload_value
from cep.spark_bridge.sinks.time_columns import epoch_millis, iso_texts, naive_micros

__all__ = ["SHARED_MESSAGES", "SharedMessages", "alert_message", "batch_messages"]

# json.dumps(payload, ensure_ascii=False, separators=(",", ":")), without building an encoder per alert
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_STRING = json.encoder.encode_basestring  # a str as JSON text, ensure_ascii=False (C's, where there is one)
_NULL = "null"
_CONTENT_TYPE = ("content-type", b"application/json")
_HEADERS = (("cep-rule-id", "rule_id"), ("cep-rule-version", "rule_version"), ("cep-match-status", "match_status"))
_OBJECTS = frozenset(("measures", "partition_key"))
_TIMES = frozenset(("first_event_time", "last_event_time", "emit_time"))
_VALUE_TEMPLATE = "{" + ",".join(f"{_STRING(name)}:%s" for name in ALERT_NAMES) + "}"


def _one_encoder():
    """``_COMPACT.encode`` as one C encoder made once (``JSONEncoder.encode`` makes one per call): for the parsed
    JSON of a partition key or measures (dicts, lists, text, numbers, flags, NULL: no cycles, no other types)."""
    make = json.encoder.c_make_encoder
    if make is None:  # no C accelerator: the encoder as it is
        return _COMPACT.encode
    encoder = make(None, _COMPACT.default, _STRING, None, ":", ",", False, False, True)
    return lambda value: "".join(encoder(value, 0))


_ENCODE_PARSED = _one_encoder()
_SCAN = PAYLOAD_DECODER.scan_once


def _timestamp(emitted: Any) -> int | None:
    if hasattr(emitted, "to_pydatetime"):
        emitted = emitted.to_pydatetime()
    if isinstance(emitted, _dt.datetime):
        aware = emitted if emitted.tzinfo is not None else emitted.replace(tzinfo=_dt.UTC)
        return int(aware.timestamp() * 1000)
    return None


def alert_message(alert: Mapping[str, Any]) -> dict:
    """The Kafka message of one alert: ``{"key", "value", "headers", "timestamp"}`` (bytes; ms or None)."""
    payload = alert_payload(dict(alert))
    headers = [(header, payload.get(name)) for header, name in _HEADERS]
    headers.append(("content-type", "application/json"))
    return {
        "key": (payload.get("match_id") or "").encode("utf-8"),
        "value": _COMPACT.encode(payload).encode("utf-8"),
        "headers": [(name, str(value).encode("utf-8")) for name, value in headers if value is not None],
        "timestamp": _timestamp(alert.get("emit_time")),
    }


def _parsed_text(text: str) -> str:
    """The compact JSON text of a partition key's or measures' text, as ``alert_payload`` then the encoder make
    it: parsed whole (C's scanner from the first character to the last, else the decoder, which skips the
    whitespace around), else the text itself as a JSON string."""
    try:
        value, end = _SCAN(text, 0)
    except (StopIteration, ValueError):  # nothing at the first character, or a JSONDecodeError inside
        end = -1
    if end != len(text):
        try:
            value = PAYLOAD_DECODER.decode(text)
        except ValueError:
            return _STRING(text)
    return _ENCODE_PARSED(value)


def _field_texts(name: str, values: list) -> list[str]:
    """One field's JSON texts in the value, for every alert."""
    types = set(map(type, values))
    if name in _OBJECTS and types <= {str, type(None)}:
        seen: dict[str, str] = {}  # a partition key comes back with each alert of its key
        out = []
        for value in values:
            if value is None:
                out.append(_NULL)
                continue
            text = seen.get(value)
            if text is None:
                text = seen[value] = _parsed_text(value)
            out.append(text)
        return out
    if name in _TIMES and types == {_dt.datetime}:
        micros = naive_micros(values)
        if micros is not None:  # naive times, none NULL: numpy's text of the column
            return list(map('"%sZ"'.__mod__, iso_texts(micros)))
    if name in _TIMES and types <= {_dt.datetime, type(None)}:
        return [
            _NULL
            if value is None
            else '"' + value.isoformat() + 'Z"'
            if value.tzinfo is None
            else _COMPACT.encode(payload_value(name, value))
            for value in values
        ]
    if name not in _OBJECTS and name not in _TIMES and types <= {str, type(None)}:
        return [_NULL if value is None else _STRING(value) for value in values]
    if types <= {bool, type(None)} and name not in _OBJECTS and name not in _TIMES:
        return [_NULL if value is None else ("true" if value else "false") for value in values]
    return [_COMPACT.encode(payload_value(name, value)) for value in values]


def _header_values(name: str, values: list) -> list[bytes | None]:
    if set(map(type, values)) <= {str, type(None)}:
        return [None if value is None else value.encode("utf-8") for value in values]
    return [None if (v := payload_value(name, value)) is None else str(v).encode("utf-8") for value in values]


def batch_messages(alerts: Sequence[Mapping[str, Any]]) -> list[dict]:
    """``[alert_message(alert) for alert in alerts]``, made column by column (the module doc)."""
    if not alerts:
        return []
    columns = {name: [alert.get(name) for alert in alerts] for name in ALERT_NAMES}
    texts = [_field_texts(name, columns[name]) for name in ALERT_NAMES]
    values = [(_VALUE_TEMPLATE % row).encode("utf-8") for row in zip(*texts)]
    match_ids = columns["match_id"]
    if set(map(type, match_ids)) <= {str, type(None)}:
        keys = [(value or "").encode("utf-8") for value in match_ids]
    else:
        keys = [(payload_value("match_id", value) or "").encode("utf-8") for value in match_ids]
    header_columns = [_header_values(name, columns[name]) for _, name in _HEADERS]
    names = [header for header, _ in _HEADERS]
    headers = [
        [(name, value) for name, value in zip(names, row) if value is not None] + [_CONTENT_TYPE]
        for row in zip(*header_columns)
    ]
    emitted = columns["emit_time"]
    micros = naive_micros(emitted) if set(map(type, emitted)) == {_dt.datetime} else None
    times = epoch_millis(micros) if micros is not None else None
    if times is None:
        times = [_timestamp(value) for value in emitted]
    return [
        {"key": key, "value": value, "headers": header, "timestamp": time}
        for key, value, header, time in zip(keys, values, headers, times)
    ]


# Alerts whose messages one generation of ``SharedMessages`` keeps: two Kafka sinks that keep up deliver the same
# micro-batch within a micro-batch or two of each other (a few thousand alerts each at 20,000 ticks/s), and a
# message is about a kilobyte, so two generations hold a few tens of MB at most. A sink that falls further
# behind encodes its messages again, as it would without the memo.
SHARED_MESSAGES_PER_GENERATION = 16_384
# The types of an alert's values (``ALERT_COLUMNS``: text, times, a flag) for which equal values make the same
# message; any other value (a pandas Timestamp, a number) is encoded on its own, never looked up.
_KEYED_TYPES = (str, bool, type(None), _dt.datetime)
# Micro-batches whose messages are kept by the very list of alerts the lanes were handed (``SharedMessages.messages``):
# the two Kafka sinks' lanes ask for one within a micro-batch or two of each other.
SHARED_BATCHES = 4


class SharedMessages:
    """The Kafka messages of the alerts delivered lately, for every Kafka sink of the process: with two (the
    at-least-once and the exactly-once sink on one stream), each alert's message is encoded once, not once per
    sink. ``alert_message`` is a function of an alert's ``ALERT_NAMES`` values alone, so an alert with the same
    values gets the same bytes; the messages live in two generations, the older dropped when the newer fills.
    With one Kafka sink nothing is kept."""

    def __init__(self, per_generation: int = SHARED_MESSAGES_PER_GENERATION) -> None:
        self.per_generation = per_generation
        self.sinks: weakref.WeakSet = weakref.WeakSet()
        self._newer: dict[tuple, dict] = {}
        self._older: dict[tuple, dict] = {}
        self._lock = threading.Lock()
        self._batches: list[tuple[Sequence, threading.Event, list]] = []  # (alerts, made, [messages]), newest last

    def _keep(self, values: tuple, message: dict) -> None:
        with self._lock:
            if len(self._newer) >= self.per_generation:
                self._older, self._newer = self._newer, {}
            self._newer[values] = message

    def message(self, alert: Mapping[str, Any]) -> dict:
        if len(self.sinks) < 2:
            return alert_message(alert)
        values = tuple(alert.get(name) for name in ALERT_NAMES)
        if not all(type(value) in _KEYED_TYPES for value in values):
            return alert_message(alert)
        found = self._newer.get(values) or self._older.get(values)
        if found is None:
            found = alert_message(alert)
            self._keep(values, found)
        return found

    def messages(self, alerts: Sequence[Mapping[str, Any]]) -> list[dict]:
        """``[self.message(alert) for alert in alerts]``. The lanes of two Kafka sinks woken by one seal ask for the
        same micro-batch at once, both handed the same list (``DeliveryLanes.stage``): the first to ask makes its
        messages, the other waits for them (the encoding alone, no broker in it); a list not seen lately (an entry
        read from disk) is looked up alert by alert, the ones not kept made at once."""
        if len(self.sinks) < 2:
            return batch_messages(alerts)
        with self._lock:
            asked = next((batch for batch in self._batches if batch[0] is alerts), None)
            if asked is None:
                ours: tuple[Sequence, threading.Event, list] = (alerts, threading.Event(), [])
                self._batches = [*self._batches[-(SHARED_BATCHES - 1) :], ours]
        if asked is not None:
            _, done, made = asked
            done.wait()
            return made[0] if made else self._each_alert(alerts)  # else the other lane's encoding failed
        _, done, made = ours
        try:
            made.append(self._each_alert(alerts))
        finally:
            done.set()
        return made[0]

    def _each_alert(self, alerts: Sequence[Mapping[str, Any]]) -> list[dict]:
        found: list[dict | None] = []
        missing: list[int] = []
        keys: list[tuple | None] = []
        for index, alert in enumerate(alerts):
            values = tuple(alert.get(name) for name in ALERT_NAMES)
            if not all(type(value) in _KEYED_TYPES for value in values):
                values = None
            message = None if values is None else (self._newer.get(values) or self._older.get(values))
            if message is None:
                missing.append(index)
            found.append(message)
            keys.append(values)
        made = batch_messages([alerts[index] for index in missing])
        for index, message in zip(missing, made):
            found[index] = message
            if keys[index] is not None:
                self._keep(keys[index], message)
        return found  # type: ignore[return-value]


# The one every Kafka sink of the process uses.
SHARED_MESSAGES = SharedMessages()
