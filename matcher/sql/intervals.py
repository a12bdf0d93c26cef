"""Intervals and event time."""

from __future__ import annotations

import datetime as _dt

from cep.grammar import ast
from cep.grammar.errors import CepSemanticError
from cep.grammar.units import MICROS_PER_UNIT, unit_name

# The fields of a range (`INTERVAL '1 2:30' DAY TO MINUTE`): the units from DAY down to SECOND.
_RANGE_FIELDS = ("DAY", "HOUR", "MINUTE", "SECOND")


def _unit(name: str) -> _dt.timedelta:
    found = unit_name(name)
    if found is None:
        raise CepSemanticError(f"unknown interval unit {name.upper()}", code="E0241")
    return _dt.timedelta(microseconds=MICROS_PER_UNIT[found])


def interval_to_timedelta(interval: ast.IntervalLiteral) -> _dt.timedelta:
    """``INTERVAL '10' MINUTE`` -> timedelta; ``INTERVAL '1:30' HOUR TO MINUTE`` counts each field."""
    units = [part for part in interval.unit.replace("_", " ").split() if part.upper() != "TO"]
    fields = interval.text.strip().replace(" ", ":").split(":") if len(units) > 1 else [interval.text.strip()]
    if len(units) > 1:
        first, last = _unit(units[0]), _unit(units[-1])
        ordered = [u for u in map(_unit, _RANGE_FIELDS) if last <= u <= first]
        ordered.sort(reverse=True)
        if len(fields) != len(ordered):
            raise CepSemanticError(
                f"interval '{interval.text}' does not fit {interval.unit}", code="E0241", span=interval.span
            )
        pairs = zip(fields, ordered)
    else:
        pairs = [(fields[0], _unit(units[0]))]
    try:
        total = sum((float(value) * unit for value, unit in pairs), _dt.timedelta())
    except ValueError:
        raise CepSemanticError(
            f"interval '{interval.text}' is not a number", code="E0241", span=interval.span
        ) from None
    return -total if interval.negative else total
