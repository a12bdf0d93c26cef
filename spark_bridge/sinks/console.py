"""``ConsoleSink``: one readable line per alert."""

from __future__ import annotations

import datetime as _dt
import json
import sys
from collections.abc import Sequence
from typing import Any

from cep.spark_bridge.sinks.alerts import alert_payload
from cep.spark_bridge.sinks.base import AlertSink, Delivery
from cep.spark_bridge.sinks.safe_text import visible


# ------------------------------------------------------------------------------------- alert sinks
class ConsoleSink(AlertSink):
    """One line per alert: time, rule, status, partition key, measures, match id."""

    name = "console"

    def __init__(self, stream=None, *, width: int = 160) -> None:
        self.stream = stream
        self.width = width

    @staticmethod
    def line(alert: dict) -> str:
        payload = alert_payload(alert)
        key = payload.get("partition_key") or {}
        key_text = " ".join(f"{k}={_short(v)}" for k, v in key.items()) if isinstance(key, dict) else str(key)
        measures = payload.get("measures") or {}
        measure_text = (
            ", ".join(f"{k}={_short(v)}" for k, v in measures.items()) if isinstance(measures, dict) else str(measures)
        )
        first = _clock(alert.get("first_event_time"))
        last = _clock(alert.get("last_event_time"))
        span = first if first == last else f"{first} .. {last}"
        parts = [
            f"ALERT {payload['rule_id']}",
            payload.get("match_status") or "",
            key_text,
            span,
            measure_text,
            f"[{(payload.get('match_id') or '')[:12]}]",
        ]
        return visible("  ".join(p for p in parts if p))  # data never repaints the terminal

    def deliver(self, alerts: Sequence[dict], batch_id: int) -> Delivery:
        report = Delivery(self.name)
        stream = self.stream or sys.stdout
        for alert in alerts:
            stream.write(self.line(alert) + "\n")
            report.delivered[alert["rule_id"]] += 1
        stream.flush()
        return report


def _short(value: Any, limit: int = 40) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _clock(value: Any) -> str:
    if value is None:
        return "?"
    if hasattr(value, "to_pydatetime"):
        value = value.to_pydatetime()
    if isinstance(value, _dt.datetime):
        return (
            value.strftime("%Y-%m-%d %H:%M:%S")
            + (f".{value.microsecond:06d}".rstrip("0") if value.microsecond else "")
            + "Z"
        )
    return str(value)
