"""The alert: one row of ``ALERT_COLUMNS`` per match, and its values as JSON (``alert_payload``)."""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

# Imported inside functions: pyspark, an optional dependency (the "spark" extra) that takes seconds to import.


ALERT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("rule_id", "string"),
    ("rule_version", "string"),
    ("match_id", "string"),
    ("match_status", "string"),  # MATCHED | TIMEOUT | ABSENCE
    ("partition_key", "string"),  # JSON object of the PARTITION BY values, e.g. {"card": "c1"}
    ("first_event_time", "timestamp"),  # UTC
    ("last_event_time", "timestamp"),
    ("measures", "string"),  # JSON object of the rule's output columns
    ("emit_time", "timestamp"),  # when the match was emitted (processing time, UTC)
    ("suppressed", "boolean"),  # throttled by --suppress / '-- suppress:'
)


ALERT_NAMES = tuple(name for name, _ in ALERT_COLUMNS)


FILE_FORMATS = ("json", "parquet", "csv")


def alert_schema():
    from pyspark.sql import types as T

    kinds = {"string": T.StringType(), "timestamp": T.TimestampType(), "boolean": T.BooleanType()}
    return T.StructType([T.StructField(name, kinds[kind], True) for name, kind in ALERT_COLUMNS])


def iso_utc(value: Any) -> str | None:
    """A naive UTC datetime as ISO 8601 with a ``Z`` (what receivers parse without guessing a zone)."""
    if value is None:
        return None
    if hasattr(value, "to_pydatetime"):
        value = value.to_pydatetime()
    if isinstance(value, _dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(_dt.UTC).replace(tzinfo=None)
        return value.isoformat() + "Z"
    return str(value)


def jsonable(value: Any) -> Any:
    """A value as JSON can carry it: datetimes ISO 8601, decimals as text (exact), NaN/inf as null."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if hasattr(value, "item") and type(value).__module__ == "numpy":
        return jsonable(value.item())
    if hasattr(value, "to_pydatetime"):
        value = value.to_pydatetime()
    if isinstance(value, (_dt.datetime, _dt.date, _dt.time)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, _dt.timedelta):
        return value.total_seconds()
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or hasattr(value, "tolist"):
        items = value.tolist() if hasattr(value, "tolist") else value
        return [jsonable(v) for v in items] if isinstance(items, list) else jsonable(items)
    return str(value)


def _finite(text: str) -> float | None:
    number = float(text)
    return number if math.isfinite(number) else None


# ``jsonable(json.loads(text))`` in one pass of the C parser: a non-finite number (``NaN``, ``Infinity``, or a
# literal too large for a double) is None, as ``jsonable`` makes it; nothing else a parse gives needs converting.
PAYLOAD_DECODER = json.JSONDecoder(parse_float=_finite, parse_constant=lambda _name: None)
_OBJECTS = ("measures", "partition_key")  # JSON text in an alert, objects in its payload
_TIMES = frozenset(("first_event_time", "last_event_time", "emit_time"))


def payload_value(name: str, value: Any) -> Any:
    """The value of an alert's field ``name`` in its payload (``alert_payload``)."""
    if name in _OBJECTS and isinstance(value, str):
        try:
            return PAYLOAD_DECODER.decode(value)
        except ValueError:  # not JSON: the text as it is
            return value
    if name in _TIMES:
        value = iso_utc(value)
    return jsonable(value)


def alert_payload(alert: dict) -> dict:
    """One alert as the JSON object sinks send: measures and partition key as objects, times ISO 8601 Z."""
    return {name: payload_value(name, alert.get(name)) for name in ALERT_NAMES}


def rows_to_alerts(rows: Iterable[Any]) -> list[dict]:
    """Spark Rows (or dicts) -> alert dicts, sorted by rule, event time and match id (a stable order)."""
    alerts = [row.asDict() if hasattr(row, "asDict") else dict(row) for row in rows]
    far = _dt.datetime.max
    alerts.sort(key=lambda a: (a.get("rule_id") or "", a.get("last_event_time") or far, a.get("match_id") or ""))
    return alerts
