"""Durations as people write them, to microseconds: the one parser behind every duration option.

    parse_duration("30 seconds") == parse_duration("30s") == parse_duration("INTERVAL 30 s") == 30_000_000
    parse_duration("1 hour 30 minutes"), parse_duration("500ms"), parse_duration(timedelta(minutes=5))

The stream's ``watermark``, ``session_timeout`` and ``max_future_skew``, the rule set's ``housekeeping``,
``--suppress RULE=10m`` and ``cep stream``'s duration options all read their values here.
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Any

from cep.grammar.errors import CepSemanticError
from cep.grammar.units import MICROS_PER_UNIT, OPTION_ABBREVIATIONS, unit_name

_DURATION_PART = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]+)\s*")


def parse_duration(value: Any, *, what: str = "duration") -> int:
    """``"30 seconds"``, ``"30s"``, ``"1 hour 30 minutes"``, ``"500ms"``, a timedelta -> microseconds (>= 0)."""
    if isinstance(value, _dt.timedelta):
        total = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    elif isinstance(value, str):
        text = value.strip()
        if text.lower().startswith("interval"):
            text = text[8:]
        total, position = 0, 0
        for match in _DURATION_PART.finditer(text):
            if match.start() != position:
                break
            name = unit_name(match.group(2), OPTION_ABBREVIATIONS)
            if name is None:
                raise ValueError(
                    f"unknown unit {match.group(2)!r} in {what} {value!r} (e.g. '30 seconds', '5m', '1 hour')"
                )
            total += round(float(match.group(1)) * MICROS_PER_UNIT[name])
            position = match.end()
        if position != len(text) or not text:
            raise ValueError(f"cannot read {what} {value!r} (e.g. '30 seconds', '5m', '1 hour')")
    else:
        raise TypeError(
            f"{what} must be a string like '30 seconds' or a datetime.timedelta, not {type(value).__name__}"
        )
    if total < 0:
        raise ValueError(f"{what} {value!r} is negative")
    return total


def session_timeout_us(value: Any) -> int | None:
    """``session_timeout`` in the forms a stream takes ("30 minutes", "90s", "1 hour 30 minutes", a
    ``timedelta``) as microseconds; None stays None. Anything else raises ``CepSemanticError`` (E0286)."""
    if value is None:
        return None
    try:
        us = parse_duration(value, what="session_timeout")
    except (TypeError, ValueError) as exc:
        raise CepSemanticError(str(exc), code="E0286") from None
    if us <= 0:
        raise CepSemanticError(f"session_timeout must be positive, not {value!r}", code="E0286")
    return us


# Words that turn a duration option off (``--max-future-skew off``, ``--suppress 'noisy=off'``).
OFF = frozenset({"0", "off", "none", "no", "false"})


def is_off(value: Any) -> bool:
    return isinstance(value, str) and value.strip().lower() in OFF
