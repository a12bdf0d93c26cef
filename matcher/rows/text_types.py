"""The type of a column of text (a CSV file's): one rule, followed by the Python engine's reader
(``cep.cli_io``) and Spark's (``cep.spark_bridge.spark.files``), so both read a file the same way.

A reader never rewrites a value. A CSV field is text; a column becomes another type only when every
value in it is that type's text, written so that no value changes and no two values become one:

==============  ==============================================================================
type            when every value (NULL markers aside) is
==============  ==============================================================================
BIGINT          an integer written plainly: ``0`` or ``-?[1-9][0-9]*``, within 64 bits. ``007``,
                ``+7`` and ``-0`` are not: leading zeros and signs are how identifiers are written, and
                the number would print differently
DECIMAL(38,0)   such an integer of up to 38 digits
DOUBLE          a number: an integer or a decimal without leading zeros, with an optional exponent,
                or ``NaN``/``Inf``/``Infinity`` (any case, a ``-`` allowed); at least one finite; and no
                two different texts that are the same number (``1e3`` and ``1000``, ``1.5`` and
                ``1.50``, ``0`` and ``-0``): then the text is what tells the values apart, and it
                stays text. A DOUBLE prints as a number (``1.50`` as ``1.5``); its value is kept
BOOLEAN         ``true`` or ``false``, in any case
DATE            an ISO 8601 date, ``2024-01-31`` (as Spark, Oracle and Snowflake type it, so that
                ``d < DATE '2024-02-01'`` compares dates and a date prints without a time); a valid
                date of the years 1 to 9999
TIMESTAMP       an ISO 8601 date and time (dates among them: a column mixing ``2024-01-31`` and
                ``2024-01-31 10:00`` is TIMESTAMP, the date at midnight), with an optional fraction of a second and a
                ``Z``, ``+hh``, ``+hhmm`` or ``+hh:mm`` offset after the seconds (Spark reads none after
                ``hh:mm``): an offset makes it an instant, read as
                its UTC time. Microseconds are kept (a finer fraction is rounded down), and a time must
                fall within the years 1 to 9999 (Python's datetime)
VARCHAR         anything else; the text as written
==============  ==============================================================================

NULL: an empty field (quoted or not) is NULL in every column. In a column of another type than VARCHAR
the text ``NA``, ``N/A``, ``NULL``, ``null`` and ``None`` is NULL too (``NULL_MARKERS``): it cannot be a
number, a time or a boolean, so it marks a missing one. In a VARCHAR column it is text: the country
code ``NA`` stays ``NA``.

A declared type (``cep run --schema 'price DOUBLE'`` on a CSV file, as ``cep stream --schema``) replaces
the rule for its column: a value is read as that type when its text is one (``DECLARED_PATTERNS``, wider
than the rule's: ``007`` is the BIGINT 7, ``+1.50`` the DOUBLE 1.5; a DECIMAL(p,s) takes a plain decimal
number rounded half up to its scale, ``1.235`` the DECIMAL(10,2) 1.24, as Spark's reader does with a
schema, and refuses one with more than p-s digits before the point), and is otherwise kept as its text,
which the row checks then set aside as ``wrong_type`` (``bad_event_time`` in the event time column). Both
engines test the same patterns, so they take and refuse the same values.

``TextEvidence`` counts what a column holds; ``column_type`` decides from the counts alone, so the
Python reader counts values in Python (``evidence``) and Spark's counts them in one aggregation, with
the same patterns (``PATTERNS``: regular expressions Python and Java read alike).
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from dataclasses import dataclass
from decimal import Decimal

from cep.grammar.columns import ColumnNames
from cep.grammar.limits import MAX_DECIMAL_PRECISION
from cep.matcher.sql.types import decimal_params, is_decimal, round_decimal

# The times the engines can hold: pandas' datetime64[ns] (microseconds inside it), in which the python
# engine's frames and Spark's stateful operators (applyInPandasWithState) carry every time column. A
# datetime holds the years 1 to 9999; a time outside these is a bad row (``bad_event_time`` in the event
# time column, else ``wrong_type``), never a failed run or micro-batch.
FIRST_HELD_TIME = _dt.datetime(1677, 9, 21, 0, 12, 43, 145225)
LAST_HELD_TIME = _dt.datetime(2262, 4, 11, 23, 47, 16, 854775)


def time_is_held(value: _dt.datetime) -> bool:
    """Whether a naive UTC ``value`` is within ``FIRST_HELD_TIME`` .. ``LAST_HELD_TIME``."""
    return FIRST_HELD_TIME <= value.replace(tzinfo=None) <= LAST_HELD_TIME


# The texts that mark a missing value in a column that is not text.
NULL_MARKERS = ("NA", "N/A", "NULL", "null", "None")
# The range of a BIGINT (Spark's LongType) and the digits of the widest DECIMAL.
_BIGINT_MIN, _BIGINT_MAX = -(2**63), 2**63 - 1
MAX_DECIMAL_DIGITS = MAX_DECIMAL_PRECISION

# Each pattern is anchored and uses only syntax Python's re and Java's regex agree on.
PATTERNS = {
    "integer": r"^(0|-?[1-9][0-9]*)$",
    "wide_integer": r"^(0|-?[1-9][0-9]{0,37})$",
    "number": (
        r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$"
        r"|^-?([Nn][Aa][Nn]|[Ii][Nn][Ff]|[Ii][Nn][Ff][Ii][Nn][Ii][Tt][Yy])$"
    ),
    "finite": r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$",
    "boolean": r"^([Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee])$",
    # an offset only after the seconds: Spark's cast reads no offset after hours and minutes alone
    "date": r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$",
    "timestamp": (
        r"^[0-9]{4}-[0-9]{2}-[0-9]{2}"  # the date
        r"([T ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,9})?(Z|[+-][0-9]{2}(:?[0-9]{2})?)?)?)?$"
    ),
}
_COMPILED = {name: re.compile(pattern) for name, pattern in PATTERNS.items()}
# The texts each declared type takes (the canonical names of ``cep.grammar.type_names.normalize_type``).
# DECIMAL (every DECIMAL(p,s), ``declared_family``): a plain decimal number, rounded half up to the scale
# and refused past the precision, as Spark's cast and its CSV reader with a schema do; INTEGER: 32 bits.
DECLARED_PATTERNS = {
    "BIGINT": r"^[-+]?[0-9]{1,19}$",
    "INTEGER": r"^[-+]?[0-9]{1,10}$",
    "SMALLINT": r"^[-+]?[0-9]{1,5}$",
    "TINYINT": r"^[-+]?[0-9]{1,3}$",
    "DOUBLE": (
        r"^[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?$"
        r"|^[Nn][Aa][Nn]$|^[-+]?[Ii][Nn][Ff]([Ii][Nn][Ii][Tt][Yy])?$"
    ),
    "DECIMAL": r"^[-+]?[0-9]+(\.[0-9]+)?$",
    "BOOLEAN": PATTERNS["boolean"],
    "TIMESTAMP": PATTERNS["timestamp"],
    "DATE": r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$",
    "VARCHAR": r"^",
}
# The range of each declared integer type, checked after its pattern (as Spark's cast returns NULL past it).
DECLARED_RANGES = {
    "BIGINT": (_BIGINT_MIN, _BIGINT_MAX),
    "INTEGER": (-(2**31), 2**31 - 1),
    "SMALLINT": (-(2**15), 2**15 - 1),
    "TINYINT": (-(2**7), 2**7 - 1),
}
_DECLARED = {name: re.compile(pattern) for name, pattern in DECLARED_PATTERNS.items()}
_WHOLE_NUMBER = re.compile(r"[-+]?[0-9]+")
# PATTERNS["timestamp"] in parts: the date and time, the fraction of a second, the offset.
_TIMESTAMP_PARTS = re.compile(
    r"([0-9]{4}-[0-9]{2}-[0-9]{2}(?:[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2})?)?)"  # the date and time
    r"(\.[0-9]{1,9})?"  # the fraction of a second
    r"(Z|[+-][0-9]{2}(?::?[0-9]{2})?)?"  # the offset
)


@dataclass(frozen=True)
class TextEvidence:
    """What one column of text holds (NULLs not counted): how many of its values fit each type."""

    values: int  # non-NULL values
    markers: int = 0  # values that are NULL_MARKERS
    integers: int = 0  # plain integers within 64 bits
    wide_integers: int = 0  # plain integers of up to 38 digits
    numbers: int = 0  # numbers (PATTERNS["number"])
    finite: int = 0  # numbers other than NaN and the infinities
    distinct_number_texts: int = 0  # distinct texts among the numbers
    distinct_numbers: int = 0  # distinct numbers among them, as doubles (NaN counted once)
    booleans: int = 0
    timestamps: int = 0  # valid ISO timestamps (dates included)
    dates: int = 0  # valid ISO dates without a time


def column_type(evidence: TextEvidence) -> str:
    """The column's type by the rule of the module docstring."""
    n = evidence.values - evidence.markers
    if n <= 0:
        return "VARCHAR"  # nothing but NULL markers: they are the values
    if evidence.integers == n:
        return "BIGINT"
    if evidence.wide_integers == n:
        return f"DECIMAL({MAX_DECIMAL_DIGITS},0)"
    if evidence.numbers == n and evidence.finite > 0 and evidence.distinct_number_texts == evidence.distinct_numbers:
        return "DOUBLE"
    if evidence.booleans == n:
        return "BOOLEAN"
    if evidence.dates == n:
        return "DATE"
    if evidence.timestamps == n:
        return "TIMESTAMP"
    return "VARCHAR"


def evidence(values: list) -> TextEvidence:
    """Count what a column of Python strings (None: NULL) holds, as Spark's reader counts it."""
    present = [v for v in values if v is not None]
    markers = sum(1 for v in present if v in NULL_MARKERS)
    plain = [v for v in present if v not in NULL_MARKERS]
    match = {name: pattern.fullmatch for name, pattern in _COMPILED.items()}  # fullmatch: a trailing newline is no end
    integers = [v for v in plain if match["integer"](v)]
    numbers = [v for v in plain if match["number"](v)]
    return TextEvidence(
        values=len(present),
        markers=markers,
        integers=sum(1 for v in integers if _BIGINT_MIN <= int(v) <= _BIGINT_MAX),
        wide_integers=sum(1 for v in plain if match["wide_integer"](v)),
        numbers=len(numbers),
        finite=sum(1 for v in numbers if match["finite"](v)),
        distinct_number_texts=len(set(numbers)),
        distinct_numbers=len({_double_key(float(v)) for v in numbers}),
        booleans=sum(1 for v in plain if match["boolean"](v)),
        timestamps=sum(1 for v in plain if match["timestamp"](v) and parse_timestamp(v) is not None),
        dates=sum(1 for v in plain if match["date"](v) and parse_timestamp(v) is not None),
    )


def _double_key(value: float):
    """A double as a set member: every NaN is one value (Spark's grouping), -0.0 is 0.0."""
    return "NaN" if math.isnan(value) else value


def string_type(evidence: TextEvidence) -> str:
    """The type of a JSON column of strings: TIMESTAMP when most of them (more than half) are ISO 8601
    times (JSON has no time type), else VARCHAR. JSON has numbers, booleans and null of its own: a
    string stays a string. In a TIMESTAMP column a string that is no time (``"yesterday"``) keeps its
    text, and the row checks set it aside (``bad_event_time`` in the event time column, ``wrong_type`` in
    another), as for a value of the minority kind in a column of mixed kinds: one odd value never turns
    the column into text, which would order the times as strings."""
    return "TIMESTAMP" if evidence.values and 2 * evidence.timestamps > evidence.values else "VARCHAR"


def parse_timestamp(text: str) -> _dt.datetime | None:
    """An ISO 8601 timestamp (``PATTERNS["timestamp"]``) as a naive UTC datetime to the microsecond (the
    fraction rounded down; an offset converted to UTC), or None when it is no valid time."""
    match = _TIMESTAMP_PARTS.fullmatch(text)
    if match is None or not _COMPILED["timestamp"].fullmatch(text):
        return None
    body, fraction, offset = match.group(1), match.group(2) or "", match.group(3)
    micros = (fraction[1:] + "000000")[:6] if fraction else ""
    if offset is not None and offset != "Z" and ":" not in offset:
        offset = offset[:3] + ":" + (offset[3:] or "00")
    try:
        value = _dt.datetime.fromisoformat(body.replace(" ", "T") + (f".{micros}" if micros else ""))
    except ValueError:
        return None
    if offset is not None:
        delta = (
            _dt.timedelta(0)
            if offset == "Z"
            else _dt.timedelta(hours=int(offset[1:3]), minutes=int(offset[4:6])) * (1 if offset[0] == "+" else -1)
        )
        try:
            value = value - delta
        except OverflowError:
            return None
    return value


def convert(text: str, type_name: str):
    """One value of a column of ``type_name`` (``column_type``) as a Python value (NULL markers: None)."""
    if type_name == "VARCHAR":
        return text
    if text in NULL_MARKERS:
        return None
    if type_name == "BIGINT":
        return int(text)
    if type_name.startswith("DECIMAL"):
        return Decimal(text)
    if type_name == "DOUBLE":
        return float(text)
    if type_name == "BOOLEAN":
        return text.lower() == "true"
    if type_name == "DATE":
        return _dt.date.fromisoformat(text)
    return parse_timestamp(text)


def declared_value(text: str, type_name: str):
    """One CSV value of a column declared ``type_name`` (a canonical name, ``DECLARED_PATTERNS``): the value
    when its text is one of that type, None for a NULL marker, else the text itself (a bad value the row
    checks set aside)."""
    if type_name == "VARCHAR":
        return text
    if text in NULL_MARKERS:
        return None
    if not _DECLARED[declared_family(type_name)].fullmatch(text):
        return text
    if type_name in DECLARED_RANGES:
        low, high = DECLARED_RANGES[type_name]
        return int(text) if low <= int(text) <= high else text
    size = decimal_params(type_name)
    if size is not None:
        value = round_decimal(Decimal(text), *size)
        return text if value is None else value.copy_abs() if value.is_zero() else value  # -0.00 is 0.00 in Spark
    if type_name == "DOUBLE":
        return float(text)
    if type_name == "BOOLEAN":
        return text.lower() == "true"
    if type_name == "DATE":
        try:
            return _dt.date.fromisoformat(text)
        except ValueError:
            return text
    parsed = parse_timestamp(text)
    return text if parsed is None else parsed


def out_of_range(text: str, type_name: str) -> bool:
    """Whether ``text`` is written as a number of the declared integer or DECIMAL type ``type_name`` but
    does not fit it (so the row checks can say so, rather than "text where a number is expected")."""
    if type_name in DECLARED_RANGES:
        written = _WHOLE_NUMBER.fullmatch(text)
    elif decimal_params(type_name) is not None:
        written = _DECLARED["DECIMAL"].fullmatch(text)
    else:
        return False
    return written is not None and declared_value(text, type_name) == text


def declared_family(type_name: str) -> str:
    """The ``DECLARED_PATTERNS`` key of a declared type: 'DECIMAL' for every DECIMAL(p,s), else the name."""
    return "DECIMAL" if is_decimal(type_name) else type_name


class RepeatedColumnError(ValueError):
    """A CSV header that names a column twice (``repeated_column``)."""


def repeated_column(names: list, where: str = "the header") -> str | None:
    """The message for a header (``where``: or a JSON or Parquet file's columns) that names a column twice
    (ignoring case, as SQL names are), or None. Both readers refuse such a file: pandas would read the second
    as ``v.1``, DuckDB as ``v_1`` and Spark as ``v2`` (or refuse it), and a query naming ``v`` would read the
    first on one engine and fail on the other."""
    spelled = [str(name) for name in names]
    repeat = ColumnNames.first_repeat(spelled)
    if repeat is None:
        return None
    first, second = repeat
    at = f"columns {first} and {second}; " if where == "the header" else ""  # a JSON file's columns are sorted
    return (
        f"{where} names the column {spelled[second - 1]!r} twice ({at}SQL names ignore case); rename one of them "
        "in the file"
    )


def resolve_declared(declared: dict[str, str], columns: list[str]) -> dict[str, str]:
    """``declared`` (column -> type, as written by the user) keyed by the input's own column names, as
    ``ColumnNames.find_name`` resolves them (the exact spelling, else the one column equal to it ignoring
    case). ValueError for a name no column answers to, or a type a CSV value cannot be read as;
    ``CepSemanticError`` (E0220) for a name several columns answer to."""
    names = ColumnNames(columns)
    for name, type_name in declared.items():
        if declared_family(type_name) not in DECLARED_PATTERNS:
            raise ValueError(
                f"column {name!r}: a CSV value cannot be read as {type_name} "
                f"(types: {', '.join(sorted(DECLARED_PATTERNS))})"
            )
        if names.find_name(name) is None:
            raise ValueError(f"column {name!r}: the input has no column of that name (columns: {', '.join(columns)})")
    return names.by_column(declared)
