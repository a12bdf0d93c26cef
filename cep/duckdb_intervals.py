"""Spark's interval literals with two fields (``INTERVAL '1-2' YEAR TO MONTH``, ``INTERVAL '3 04:05:06' DAY TO
SECOND``) and ``make_interval(...)`` on DuckDB (part of the translation in cep/duckdb_sql.py).

DuckDB has no ``YEAR TO MONTH`` form (its parser failed with no place), and sqlglot writes ``make_interval``
as one interval text, into which it pastes a column's name (``'i year'``). The translation reads the literal's
text by Spark's format for its fields and writes DuckDB's interval of the same length: a number of months for
year-month, of microseconds for day-time (Spark's day-time interval is a count of microseconds; a day is 24
hours, as on the naive UTC timestamps cep uses). ``make_interval`` becomes the sum of DuckDB's ``to_years``,
``to_months``, ``to_days``, ``to_hours``, ``to_minutes`` and ``to_microseconds``, the seconds Spark's
DECIMAL(18,6). A text that does not fit the format is refused, naming Spark's format.

Spark's names of the interval literals, for the output columns written without ``AS``
(cep/duckdb_column_names.py), are here too: ``interval_name`` (``INTERVAL '02' HOUR``) and
``interval_fields_name`` (``INTERVAL 1 DAY 2 HOURS``, sqlglot's sum, is Spark's ``INTERVAL '1 02' DAY TO HOUR``).
"""

from __future__ import annotations

import re
from decimal import Decimal

from cep.duckdb_nodes import FRACTIONAL, INTEGRAL, Refusal, call_duck, place_of, type_of

# Imported inside functions: sqlglot (heavy; `cep check` of a single clause needs none of it).

_NUMBER = r"(\d+)"
_SECONDS = r"(\d+(?:\.\d{1,9})?)"
# Spark's formats of a two-field interval's text (after an optional sign), and the fields each number is.
_FORMATS = {
    ("YEAR", "MONTH"): (rf"{_NUMBER}-{_NUMBER}", ("YEAR", "MONTH")),
    ("DAY", "HOUR"): (rf"{_NUMBER} {_NUMBER}", ("DAY", "HOUR")),
    ("DAY", "MINUTE"): (rf"{_NUMBER} {_NUMBER}:{_NUMBER}", ("DAY", "HOUR", "MINUTE")),
    ("DAY", "SECOND"): (rf"{_NUMBER} {_NUMBER}:{_NUMBER}:{_SECONDS}", ("DAY", "HOUR", "MINUTE", "SECOND")),
    ("HOUR", "MINUTE"): (rf"{_NUMBER}:{_NUMBER}", ("HOUR", "MINUTE")),
    ("HOUR", "SECOND"): (rf"{_NUMBER}:{_NUMBER}:{_SECONDS}", ("HOUR", "MINUTE", "SECOND")),
    ("MINUTE", "SECOND"): (rf"{_NUMBER}:{_SECONDS}", ("MINUTE", "SECOND")),
}
_WRITTEN = {  # Spark's words for the formats, for the refusal
    ("YEAR", "MONTH"): "[+|-]y-m",
    ("DAY", "HOUR"): "[+|-]d h",
    ("DAY", "MINUTE"): "[+|-]d h:m",
    ("DAY", "SECOND"): "[+|-]d h:m:s.n",
    ("HOUR", "MINUTE"): "[+|-]h:m",
    ("HOUR", "SECOND"): "[+|-]h:m:s.n",
    ("MINUTE", "SECOND"): "[+|-]m:s.n",
}
# The largest value of a field that is not the first (Spark refuses more: an hour of 24, a minute of 60).
_FIELD_LIMITS = {"MONTH": 11, "HOUR": 23, "MINUTE": 59, "SECOND": Decimal("59.999999")}
_MICROSECONDS = {"DAY": 86_400_000_000, "HOUR": 3_600_000_000, "MINUTE": 60_000_000, "SECOND": 1_000_000}


def spark_interval(node, types: dict[int, str]):
    """A two-field interval literal or ``make_interval`` as DuckDB SQL; None for another node."""
    from sqlglot import exp

    if isinstance(node, exp.MakeInterval):
        return _made_interval(node, types)
    if not (isinstance(node, exp.Interval) and isinstance(node.args.get("unit"), exp.IntervalSpan)):
        return None
    span = node.args["unit"]
    fields = (span.this.name.upper(), span.expression.name.upper())
    text = node.this
    if fields not in _FORMATS or not (isinstance(text, exp.Literal) and text.is_string):
        raise Refusal(
            f"the python engine reads an INTERVAL ... {fields[0]} TO {fields[1]} only as a text literal of Spark's "
            "year-month or day-time forms",
            *place_of(node),
        )
    parts = interval_parts(fields, text.this)
    if parts is None:
        raise Refusal(
            f"the python engine cannot read {text.this!r} as an INTERVAL {fields[0]} TO {fields[1]}: Spark's "
            f"form is '{_WRITTEN[fields]}', each field after the first within its range",
            *place_of(node),
        )
    sign, values = -1 if parts[0] else 1, parts[1]
    names = tuple(values)
    if fields == ("YEAR", "MONTH"):
        months = sign * int(values["YEAR"] * 12 + values["MONTH"])
        return exp.Interval(this=exp.Literal.string(str(months)), unit=exp.Var(this="MONTH"))
    micros = sign * int(sum(values[name] * _MICROSECONDS[name] for name in names))
    return exp.Interval(this=exp.Literal.string(str(micros)), unit=exp.Var(this="MICROSECOND"))


def interval_parts(fields: tuple[str, str], text: str) -> tuple[bool, dict[str, Decimal]] | None:
    """A two-field interval's text read by Spark's format for ``fields`` (``("DAY", "SECOND")``): whether it is
    negative, and each field's number in order; None when the text does not fit the format."""
    if fields not in _FORMATS:
        return None
    pattern, names = _FORMATS[fields]
    found = re.fullmatch(r"\s*([+-]?)" + pattern + r"\s*", text)
    values = dict(zip(names, (Decimal(group) for group in found.groups()[1:]), strict=True)) if found else {}
    if not found or any(values[name] > _FIELD_LIMITS[name] for name in names[1:]):
        return None
    return found.group(1) == "-", values


def _made_interval(node, types: dict[int, str]):
    """Spark's make_interval(years, months, weeks, days, hours, mins, secs): the sum of DuckDB's intervals of
    each (an argument left out is 0), NULL where one is NULL."""
    from sqlglot import exp

    parts = []
    for key, duck, times in (
        ("year", "to_years", 1),
        ("month", "to_months", 1),
        ("week", "to_days", 7),
        ("day", "to_days", 1),
        ("hour", "to_hours", 1),
        ("minute", "to_minutes", 1),
    ):
        value = node.args.get(key)
        if value is not None:
            whole = exp.Cast(this=value.copy(), to=exp.DataType.build("INT"))
            scaled = exp.Mul(this=whole, expression=exp.Literal.number(times)) if times > 1 else whole
            parts.append(call_duck(duck, scaled))
    seconds = node.args.get("second")
    if seconds is not None:
        literal = isinstance(seconds, exp.Literal) and seconds.is_number
        if not literal and type_of(seconds, types) not in (*INTEGRAL, "DECIMAL"):
            kind = type_of(seconds, types)
            raise Refusal(
                "the python engine runs make_interval's seconds only as an integer or a DECIMAL (Spark casts them "
                f"to DECIMAL(18,6)){'; here: ' + kind if kind in FRACTIONAL else ''}",
                *place_of(node),
                untyped=kind is None,
            )
        exact = exp.Cast(this=seconds.copy(), to=exp.DataType.build("DECIMAL(18, 6)"))
        micros = exp.Mul(this=exact, expression=exp.Literal.number(1_000_000))
        micros = exp.Cast(this=micros, to=exp.DataType.build("BIGINT"))
        parts.append(call_duck("to_microseconds", micros))
    if not parts:
        return exp.Interval(this=exp.Literal.string("0"), unit=exp.Var(this="MICROSECOND"))
    total = parts[0]
    for part in parts[1:]:
        total = exp.Add(this=total, expression=part)
    return exp.Paren(this=total)


# ------------------------------------------------------------------ Spark's names of interval literals

# Interval units as Spark writes them, and the separator before each field after the first.
_INTERVAL_UNITS = {unit: unit for unit in ("YEAR", "MONTH", "DAY", "HOUR", "MINUTE", "SECOND")}
_INTERVAL_UNITS |= {f"{unit}S": unit for unit in ("YEAR", "MONTH", "DAY", "HOUR", "MINUTE", "SECOND")}
_SEPARATORS = {"MONTH": "-", "HOUR": " ", "MINUTE": ":", "SECOND": ":"}


def interval_name(node, text: str) -> str | None:
    """An interval literal as Spark writes it: ``INTERVAL '1' DAY``, ``INTERVAL '02' HOUR``, ``INTERVAL '3
    04:05:06.5' DAY TO SECOND`` (an hour and a minute in two digits, seconds with a leading zero below ten and
    their fraction without trailing zeros); None for a form whose text is not known here."""
    from sqlglot import exp

    unit, value = node.args.get("unit"), node.this
    if not isinstance(value, exp.Literal) or re.search(r"[a-z]", _written(value, text) or "", re.IGNORECASE):
        return None  # INTERVAL '1 day': the unit inside the text, whose forms Spark reads otherwise
    if isinstance(unit, exp.IntervalSpan):
        fields = (unit.this.name.upper(), unit.expression.name.upper())
        parts = interval_parts(fields, str(value.this))
        if parts is None:
            return None
        negative, values = parts
        suffix = f"{fields[0]} TO {fields[1]}"
    else:
        field = _INTERVAL_UNITS.get(unit.name.upper()) if isinstance(unit, exp.Var) else None
        number = re.fullmatch(r"\s*([+-]?)(\d+(?:\.\d{1,6})?)\s*", str(value.this))
        if field is None or number is None or ("." in number.group(2) and field != "SECOND"):
            return None
        negative, values, suffix = number.group(1) == "-", {field: Decimal(number.group(2))}, field
    return _interval_words(negative, values, suffix)


# The microseconds of each day-time field.
_FIELD_MICROS = {"DAY": 86_400_000_000, "HOUR": 3_600_000_000, "MINUTE": 60_000_000, "SECOND": 1_000_000}


def interval_fields_name(node, text: str) -> str | None:
    """``INTERVAL 1 DAY 2 HOURS`` as Spark names it: one day-time interval from its largest field to its smallest,
    its value the sum, the first field unbounded (``INTERVAL '1 02' DAY TO HOUR``, ``INTERVAL '-0 22' DAY TO HOUR``
    for ``INTERVAL -1 DAY 2 HOURS``); None for another form (a year or month among the fields, a field twice)."""
    from sqlglot import exp

    parts, fields, micros = [node], [], Decimal(0)
    while parts:
        part = parts.pop()
        if isinstance(part, exp.Add):
            parts += [part.expression, part.this]
            continue
        unit, value = part.args.get("unit"), part.this
        field = _INTERVAL_UNITS.get(unit.name.upper()) if isinstance(unit, exp.Var) else None
        number = re.fullmatch(r"[+-]?\d+(?:\.\d{1,6})?", str(value.this)) if isinstance(value, exp.Literal) else None
        if field not in _FIELD_MICROS or field in fields or number is None or "." in value.this and field != "SECOND":
            return None
        fields.append(field)
        micros += Decimal(value.this) * _FIELD_MICROS[field]
    if "+" in text[node.meta["start"] : node.meta["end"] + 1]:
        return None  # INTERVAL 1 DAY + 2 HOURS: sqlglot's reading, not Spark's
    order = [field for field in _FIELD_MICROS if field in fields]
    span = list(_FIELD_MICROS)[list(_FIELD_MICROS).index(order[0]) : list(_FIELD_MICROS).index(order[-1]) + 1]
    rest, values = abs(micros), {}
    for field in span[:-1]:
        values[field], rest = divmod(rest, _FIELD_MICROS[field])
    values[span[-1]] = rest / _FIELD_MICROS[span[-1]]  # whole but for seconds: no field below the fields written
    suffix = span[0] if len(span) == 1 else f"{span[0]} TO {span[-1]}"
    return _interval_words(micros < 0, values, suffix)


def _interval_words(negative: bool, values: dict, suffix: str) -> str | None:
    """Spark's text of an interval of ``values`` (amounts by field, in order) and fields ``suffix``."""
    texts = []
    for field, amount in values.items():
        if field == "SECOND":
            if amount.as_tuple().exponent < -6:
                return None  # Spark keeps microseconds
            texts.append(("0" if amount < 10 else "") + (format(amount.normalize(), "f") if amount else "0"))
        else:
            texts.append(f"{int(amount):02d}" if field in ("HOUR", "MINUTE") else str(int(amount)))
    joined = "".join((_SEPARATORS[field] if n else "") + part for n, (field, part) in enumerate(zip(values, texts)))
    sign = "-" if negative and any(values.values()) else ""
    return f"INTERVAL '{sign}{joined}' {suffix}"


def _written(node, text: str) -> str | None:
    """The text of ``node``'s own token, as written."""
    start, end = node.meta.get("start"), node.meta.get("end")
    return None if start is None or end is None else text[start : end + 1]
