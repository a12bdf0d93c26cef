"""Intervals and event time."""

from __future__ import annotations

import datetime as _dt

from cep.grammar import ast
from cep.grammar.errors import CepSemanticError

_UNIT = {
    "MILLISECOND": _dt.timedelta(milliseconds=1),
    "SECOND": _dt.timedelta(seconds=1),
    "MINUTE": _dt.timedelta(minutes=1),
    "HOUR": _dt.timedelta(hours=1),
    "DAY": _dt.timedelta(days=1),
    "WEEK": _dt.timedelta(weeks=1),
}


def _unit(name: str) -> _dt.timedelta:
    name = name.upper()
    if name.endswith("S") and name[:-1] in _UNIT:
        name = name[:-1]
    if name not in _UNIT:
        raise CepSemanticError(f"unknown interval unit {name}", code="E0241")
    return _UNIT[name]


def interval_to_timedelta(interval: ast.IntervalLiteral) -> _dt.timedelta:
    """``INTERVAL '10' MINUTE`` -> timedelta; ``INTERVAL '1:30' HOUR TO MINUTE`` counts each field."""
    units = [part for part in interval.unit.replace("_", " ").split() if part.upper() != "TO"]
    fields = interval.text.strip().replace(" ", ":").split(":") if len(units) > 1 else [interval.text.strip()]
    if len(units) > 1:
        first, last = _unit(units[0]), _unit(units[-1])
        ordered = [u for u in (_UNIT["DAY"], _UNIT["HOUR"], _UNIT["MINUTE"], _UNIT["SECOND"]) if last <= u <= first]
        ordered.sort(reverse=True)
        if len(fields) != len(ordered):
            raise CepSemanticError(f"interval '{interval.text}' does not fit {interval.unit}", code="E0241", span=interval.span)
        pairs = zip(fields, ordered)
    else:
        pairs = [(fields[0], _unit(units[0]))]
    try:
        total = sum((float(value) * unit for value, unit in pairs), _dt.timedelta())
    except ValueError:
        raise CepSemanticError(f"interval '{interval.text}' is not a number", code="E0241", span=interval.span) from None
    return -total if interval.negative else total
