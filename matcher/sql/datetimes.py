"""Date and time functions, with Spark SQL's meaning (cep runs inside Spark, and ``cep.sql`` hands the SQL
around MATCH_RECOGNIZE to Spark: a function must mean the same on both sides of the clause).

Times are naive ``datetime`` values in UTC (Spark's session runs in UTC, ``spark_bridge/spark/session``);
an aware value is converted to UTC first. Dates are ``date`` values. Where a function exists in Spark it
follows Spark, tested against Spark's own answers (tests/test_functions.py); IFF-like dialect extras
(Snowflake's DATEADD with a unit) are Spark's TIMESTAMPADD, which Spark also spells DATEADD.

Datetime patterns (DATE_FORMAT, TO_CHAR, TO_TIMESTAMP, TO_DATE, UNIX_TIMESTAMP) are Spark's
(java.time's letters): ``yyyy yy MM M MMM MMMM dd d D HH H hh h mm m ss s S... a E EEEE`` and quoted text;
what Spark refuses (``YYYY``, ``u``...) is refused by ``cep check`` (grammar/functions.datetime_pattern).

CURRENT_TIMESTAMP is one instant per query run (``query_time``): the start of ``run``, the moment a
Spark batch job is planned, and in a stream each micro-batch's processing time (as Spark's
current_timestamp() is there).
"""

from __future__ import annotations

import calendar
import contextlib
import datetime as _dt
import math
import re
from collections.abc import Iterator
from contextvars import ContextVar
from decimal import Decimal

from cep.grammar.errors import CepRuntimeError
from cep.grammar.functions import PatternError, datetime_pattern

_EPOCH = _dt.datetime(1970, 1, 1)

# ------------------------------------------------------------------------------------------- the clock

_QUERY_TIME: ContextVar[_dt.datetime | None] = ContextVar("cep_query_time", default=None)


def utc_now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC).replace(tzinfo=None)


@contextlib.contextmanager
def query_time(now: _dt.datetime | None = None) -> Iterator[None]:
    """CURRENT_TIMESTAMP inside: ``now`` if given, else the time an enclosing caller set, else the clock now."""
    if now is None and _QUERY_TIME.get() is not None:
        yield
        return
    token = _QUERY_TIME.set(now if now is not None else utc_now())
    try:
        yield
    finally:
        _QUERY_TIME.reset(token)


def current_timestamp() -> _dt.datetime:
    return _QUERY_TIME.get() or utc_now()


def current_date() -> _dt.date:
    return current_timestamp().date()


# ------------------------------------------------------------------------------------------ conversions


def _time_error(message: str) -> CepRuntimeError:
    return CepRuntimeError(message, code="E0411")


def as_datetime(value) -> _dt.datetime:
    """A timestamp, date or ISO text as a naive UTC datetime (what Spark casts to TIMESTAMP)."""
    if isinstance(value, _dt.datetime):
        return value.astimezone(_dt.UTC).replace(tzinfo=None) if value.tzinfo else value
    if isinstance(value, _dt.date):
        return _dt.datetime(value.year, value.month, value.day)
    if isinstance(value, str):
        try:
            return as_datetime(_dt.datetime.fromisoformat(value.strip().replace("T", " ", 1)))
        except ValueError:
            raise _time_error(
                f"{value!r} is not a timestamp (write it as 'YYYY-MM-DD HH:MM:SS', or give a pattern)"
            ) from None
    raise CepRuntimeError(f"{type(value).__name__} {value!r} is not a time", code="E0410")


def as_date(value) -> _dt.date:
    if isinstance(value, _dt.date) and not isinstance(value, _dt.datetime):
        return value
    return as_datetime(value).date()


# -------------------------------------------------------------------------------------------- fields

_FIELDS = {
    "YEAR": "YEAR",
    "Y": "YEAR",
    "YEARS": "YEAR",
    "YR": "YEAR",
    "YRS": "YEAR",
    "YEAROFWEEK": "YEAROFWEEK",
    "QUARTER": "QUARTER",
    "QTR": "QUARTER",
    "MONTH": "MONTH",
    "MON": "MONTH",
    "MONS": "MONTH",
    "MONTHS": "MONTH",
    "WEEK": "WEEK",
    "W": "WEEK",
    "WEEKS": "WEEK",
    "DAY": "DAY",
    "D": "DAY",
    "DAYS": "DAY",
    "DAYOFMONTH": "DAY",
    "DAYOFWEEK": "DAYOFWEEK",
    "DOW": "DAYOFWEEK",
    "DAYOFWEEK_ISO": "DAYOFWEEK_ISO",
    "DOW_ISO": "DAYOFWEEK_ISO",
    "DOY": "DOY",
    "DAYOFYEAR": "DOY",
    "HOUR": "HOUR",
    "H": "HOUR",
    "HOURS": "HOUR",
    "HR": "HOUR",
    "HRS": "HOUR",
    "MINUTE": "MINUTE",
    "M": "MINUTE",
    "MIN": "MINUTE",
    "MINS": "MINUTE",
    "MINUTES": "MINUTE",
    "SECOND": "SECOND",
    "S": "SECOND",
    "SEC": "SECOND",
    "SECONDS": "SECOND",
    "SECS": "SECOND",
}


def extract(field: str, value):
    """EXTRACT(field FROM x) / DATE_PART('field', x), Spark's fields: SECOND has its fraction (a decimal),
    DAYOFWEEK counts from Sunday = 1, WEEK is the ISO week."""
    name = _FIELDS.get(str(field).upper())
    if name is None:
        raise _time_error(
            f"EXTRACT cannot take the field {field!r}: use YEAR, QUARTER, MONTH, WEEK, DAY, "
            "DAYOFWEEK, DOY, HOUR, MINUTE or SECOND"
        )
    moment = as_datetime(value)
    if name == "SECOND":
        return Decimal(moment.second) + Decimal(moment.microsecond).scaleb(-6).quantize(Decimal("0.000001"))
    return _FIELD_VALUES[name](moment)


_FIELD_VALUES = {
    "YEAR": lambda t: t.year,
    "YEAROFWEEK": lambda t: t.isocalendar()[0],
    "QUARTER": lambda t: (t.month - 1) // 3 + 1,
    "MONTH": lambda t: t.month,
    "WEEK": lambda t: t.isocalendar()[1],
    "DAY": lambda t: t.day,
    "DAYOFWEEK": lambda t: t.isoweekday() % 7 + 1,
    "DAYOFWEEK_ISO": lambda t: t.isoweekday(),
    "DOY": lambda t: t.timetuple().tm_yday,
    "HOUR": lambda t: t.hour,
    "MINUTE": lambda t: t.minute,
    "SECOND": lambda t: t.second,
}


def field_function(name: str):
    """YEAR(x), HOUR(x), DAYOFWEEK(x) ...: Spark's functions of one field (SECOND() is a whole number)."""
    field = {"DAYOFMONTH": "DAY", "DAYOFYEAR": "DOY", "WEEKOFYEAR": "WEEK"}.get(name, name)
    if name == "WEEKDAY":
        return lambda value: as_datetime(value).weekday()  # Monday = 0
    return lambda value: _FIELD_VALUES[field](as_datetime(value))


# ------------------------------------------------------------------------------------ truncation, arithmetic

_TRUNC_UNITS = {
    "YEAR": "YEAR",
    "YYYY": "YEAR",
    "YY": "YEAR",
    "QUARTER": "QUARTER",
    "MONTH": "MONTH",
    "MM": "MONTH",
    "MON": "MONTH",
    "WEEK": "WEEK",
    "DAY": "DAY",
    "DD": "DAY",
    "HOUR": "HOUR",
    "MINUTE": "MINUTE",
    "SECOND": "SECOND",
    "MILLISECOND": "MILLISECOND",
    "MICROSECOND": "MICROSECOND",
}


def _truncate(moment: _dt.datetime, unit: str) -> _dt.datetime:
    if unit == "YEAR":
        return _dt.datetime(moment.year, 1, 1)
    if unit == "QUARTER":
        return _dt.datetime(moment.year, (moment.month - 1) // 3 * 3 + 1, 1)
    if unit == "MONTH":
        return _dt.datetime(moment.year, moment.month, 1)
    if unit == "WEEK":  # the Monday of the week
        day = moment.date() - _dt.timedelta(days=moment.weekday())
        return _dt.datetime(day.year, day.month, day.day)
    if unit == "DAY":
        return _dt.datetime(moment.year, moment.month, moment.day)
    keep = {
        "HOUR": dict(minute=0, second=0, microsecond=0),
        "MINUTE": dict(second=0, microsecond=0),
        "SECOND": dict(microsecond=0),
        "MILLISECOND": dict(microsecond=moment.microsecond // 1000 * 1000),
        "MICROSECOND": {},
    }[unit]
    return moment.replace(**keep)


def date_trunc(unit: str, value) -> _dt.datetime:
    """DATE_TRUNC('unit', x): a timestamp at the start of the unit (Spark; a week starts on Monday)."""
    found = _TRUNC_UNITS.get(str(unit).upper())
    if found is None:
        raise _time_error(
            f"DATE_TRUNC cannot truncate to {unit!r}: use YEAR, QUARTER, MONTH, WEEK, DAY, HOUR, "
            "MINUTE, SECOND or MILLISECOND"
        )
    return _truncate(as_datetime(value), found)


# The largest power of ten a double holds (1e308; 1e309 is an infinity): TRUNC to more decimals than that
# keeps a double as it is, to fewer than its negative truncates every finite double to zero.
DOUBLE_DECIMAL_EXPONENT = 308


def trunc(value, unit=None):
    """TRUNC: a number toward zero to ``unit`` decimals (Snowflake, Oracle), or a date to the start of its
    YEAR, QUARTER, MONTH or WEEK (Spark's trunc(date, fmt), a date)."""
    if isinstance(value, (_dt.date, _dt.datetime)):
        found = _TRUNC_UNITS.get(str(unit).upper()) if unit is not None else None
        if found not in ("YEAR", "QUARTER", "MONTH", "WEEK"):
            raise _time_error(f"TRUNC(date, unit) takes YEAR, QUARTER, MONTH or WEEK, not {unit!r}")
        return _truncate(as_datetime(value), found).date()
    digits = 0 if unit is None else int(unit)
    if isinstance(value, float):
        if digits > DOUBLE_DECIMAL_EXPONENT:  # more decimals than a double has: as it is
            return value
        if digits < -DOUBLE_DECIMAL_EXPONENT and math.isfinite(value):  # coarser than every finite double
            return 0.0
        scale = 10.0**digits
        if not math.isfinite(value * scale):  # NaN, an infinity, or digits past a double's: as it is
            return value
        return math.trunc(value * scale) / scale if digits else float(math.trunc(value))
    if isinstance(value, Decimal):
        if not value.is_finite() or digits >= -value.as_tuple().exponent:  # no more decimals than asked for
            return value
        return (
            value.quantize(Decimal(1).scaleb(-digits), rounding="ROUND_DOWN")
            if digits >= 0
            else Decimal(math.trunc(value / Decimal(10) ** -digits)) * Decimal(10) ** -digits
        )
    if isinstance(value, int) and not isinstance(value, bool):
        step = 10**-digits  # whole integers, not a float quotient, which loses a BIGINT's last digits
        return value if digits >= 0 else (abs(value) // step * step) * (1 if value >= 0 else -1)
    raise CepRuntimeError(f"TRUNC cannot take {type(value).__name__} {value!r}", code="E0410")


_ADD_UNITS = {
    "YEAR": ("months", 12),
    "QUARTER": ("months", 3),
    "MONTH": ("months", 1),
    "WEEK": ("days", 7),
    "DAY": ("days", 1),
    "DAYOFYEAR": ("days", 1),
    "HOUR": ("micros", 3_600_000_000),
    "MINUTE": ("micros", 60_000_000),
    "SECOND": ("micros", 1_000_000),
    "MILLISECOND": ("micros", 1000),
    "MICROSECOND": ("micros", 1),
}
_UNIT_SPELLINGS = {
    "YEARS": "YEAR",
    "YY": "YEAR",
    "YYYY": "YEAR",
    "QUARTERS": "QUARTER",
    "MONTHS": "MONTH",
    "MM": "MONTH",
    "MON": "MONTH",
    "WEEKS": "WEEK",
    "DAYS": "DAY",
    "DD": "DAY",
    "D": "DAY",
    "HOURS": "HOUR",
    "HH": "HOUR",
    "MINUTES": "MINUTE",
    "MI": "MINUTE",
    "MIN": "MINUTE",
    "SECONDS": "SECOND",
    "SS": "SECOND",
    "SEC": "SECOND",
    "MILLISECONDS": "MILLISECOND",
    "MS": "MILLISECOND",
    "MICROSECONDS": "MICROSECOND",
    "US": "MICROSECOND",
}


def _add_unit(unit: str) -> str:
    name = str(unit).upper()
    name = _UNIT_SPELLINGS.get(name, name)
    if name not in _ADD_UNITS:
        raise _time_error(
            f"unknown unit {unit!r}: use YEAR, QUARTER, MONTH, WEEK, DAY, HOUR, MINUTE, SECOND, "
            "MILLISECOND or MICROSECOND"
        )
    return name


def _add_months(moment: _dt.datetime, months: int) -> _dt.datetime:
    year, month = divmod(moment.year * 12 + moment.month - 1 + months, 12)
    return moment.replace(year=year, month=month + 1, day=min(moment.day, calendar.monthrange(year, month + 1)[1]))


def timestamp_add(unit: str, amount, value) -> _dt.datetime:
    """TIMESTAMPADD / DATEADD(unit, n, x): Spark's; adding months keeps the day, or the month's last day."""
    if isinstance(amount, float) or isinstance(amount, Decimal) or isinstance(amount, bool):
        raise CepRuntimeError(f"DATEADD needs a whole number of units, not {amount!r}", code="E0410")
    kind, size = _ADD_UNITS[_add_unit(unit)]
    moment = as_datetime(value)
    if kind == "months":
        return _add_months(moment, amount * size)
    if kind == "days":
        return moment + _dt.timedelta(days=amount * size)
    return moment + _dt.timedelta(microseconds=amount * size)


def _micros(moment: _dt.datetime) -> int:
    delta = moment - _EPOCH
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def timestamp_diff(unit: str, start, end) -> int:
    """TIMESTAMPDIFF / DATEDIFF(unit, a, b): whole units from a to b, truncated toward zero (Spark; Snowflake's
    DATEDIFF counts unit boundaries crossed instead, docs/language.md)."""
    kind, size = _ADD_UNITS[_add_unit(unit)]
    first, last = as_datetime(start), as_datetime(end)
    if kind == "months":
        months = (last.year - first.year) * 12 + (last.month - first.month)
        rest_first = (first.day, first.time())
        rest_last = (last.day, last.time())
        if months > 0 and rest_last < rest_first:
            months -= 1
        elif months < 0 and rest_last > rest_first:
            months += 1
        return int(months / size)
    micros = _micros(last) - _micros(first)
    step = size * (86_400_000_000 if kind == "days" else 1)
    return int(micros / step) if abs(micros) < 2**52 else (abs(micros) // step) * (1 if micros >= 0 else -1)


def date_add(value, days) -> _dt.date:
    """DATE_ADD(x, n) / DATE_SUB: Spark's two-argument forms, a date."""
    return as_date(value) + _dt.timedelta(days=days)


def date_diff(end, start) -> int:
    """DATEDIFF(end, start) / DATE_DIFF(end, start): days between the two dates (Spark)."""
    return (as_date(end) - as_date(start)).days


# ------------------------------------------------------------------------------------ Spark's patterns

_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def _pattern_tokens(pattern: str) -> list[tuple[str, str]]:
    """('field', 'yyyy') and ('text', '-') pieces of a Spark datetime pattern (one rule with ``cep check``:
    grammar/functions.datetime_pattern); a pattern read from a column that Spark refuses is E0411."""
    try:
        return datetime_pattern(pattern)
    except PatternError as error:
        raise _time_error(str(error)) from None


def format_datetime(value, pattern: str) -> str:
    """DATE_FORMAT(x, pattern) / TO_CHAR(x, pattern) with Spark's pattern letters."""
    moment = as_datetime(value)
    parts = []
    for kind, text in _pattern_tokens(pattern):
        if kind == "text":
            parts.append(text)
            continue
        letter, width = text[0], len(text)
        if letter == "y":
            parts.append(f"{moment.year % 100:02d}" if width == 2 else f"{moment.year:0{width}d}")
        elif letter in "ML":
            parts.append(
                _MONTHS[moment.month - 1]
                if width >= 4
                else _MONTHS[moment.month - 1][:3]
                if width == 3
                else f"{moment.month:0{width}d}"
            )
        elif letter == "d":
            parts.append(f"{moment.day:0{width}d}")
        elif letter == "D":
            parts.append(f"{moment.timetuple().tm_yday:0{width}d}")
        elif letter in "Hk":
            parts.append(f"{moment.hour if letter == 'H' else (moment.hour or 24):0{width}d}")
        elif letter in "hK":
            hour = moment.hour % 12
            parts.append(f"{(hour or 12) if letter == 'h' else hour:0{width}d}")
        elif letter == "m":
            parts.append(f"{moment.minute:0{width}d}")
        elif letter == "s":
            parts.append(f"{moment.second:0{width}d}")
        elif letter == "S":
            parts.append(f"{moment.microsecond:06d}"[:width].ljust(width, "0"))
        elif letter == "a":
            parts.append("AM" if moment.hour < 12 else "PM")
        else:  # E
            parts.append(_DAYS[moment.weekday()] if width >= 4 else _DAYS[moment.weekday()][:3])
    return "".join(parts)


_PARSE_CACHE: dict[str, re.Pattern] = {}


def _parser(pattern: str) -> re.Pattern:
    found = _PARSE_CACHE.get(pattern)
    if found is not None:
        return found
    pieces = []
    for kind, text in _pattern_tokens(pattern):
        if kind == "text":
            pieces.append(re.escape(text))
            continue
        letter, width = text[0], len(text)
        name = {
            "y": "year",
            "M": "month",
            "L": "month",
            "d": "day",
            "D": "doy",
            "H": "hour",
            "k": "hour",
            "h": "hour12",
            "K": "hour12",
            "m": "minute",
            "s": "second",
            "S": "fraction",
            "a": "ampm",
            "E": "dayname",
        }[letter]
        if letter in "ML" and width >= 3:
            pieces.append("(?P<monthname>[A-Za-z]{3,9})")
        elif letter == "a":
            pieces.append("(?P<ampm>[AaPp][Mm])")
        elif letter == "E":
            pieces.append("(?P<dayname>[A-Za-z0-9]+)")
        elif letter == "S":
            pieces.append(f"(?P<fraction>\\d{{{width}}})")
        else:
            pieces.append(
                f"(?P<{name}>\\d{{{width}}})"
                if width > 1 and letter != "y" or (letter == "y" and width == 2)
                else f"(?P<{name}>\\d{{{width},4}})"
                if letter == "y"
                else f"(?P<{name}>\\d{{1,2}})"
            )
    compiled = re.compile("".join(pieces))
    _PARSE_CACHE[pattern] = compiled
    return compiled


def parse_datetime(text: str, pattern: str) -> _dt.datetime:
    """TO_TIMESTAMP(text, pattern): the text read with Spark's pattern letters (all of it)."""
    found = _parser(pattern).fullmatch(text.strip())
    if found is None:
        raise _time_error(f"{text!r} does not fit the datetime pattern {pattern!r}")
    fields = {k: v for k, v in found.groupdict().items() if v is not None}
    year = int(fields.get("year", 1970))
    if len(fields.get("year", "")) == 2:
        year += 2000
    month = (
        int(fields["month"])
        if "month" in fields
        else (
            [m[:3].lower() for m in _MONTHS].index(fields["monthname"][:3].lower()) + 1 if "monthname" in fields else 1
        )
    )
    hour = int(fields.get("hour", 0))
    if "hour12" in fields:
        hour = int(fields["hour12"]) % 12 + (12 if fields.get("ampm", "AM").upper() == "PM" else 0)
    try:
        moment = _dt.datetime(
            year,
            month,
            int(fields.get("day", 1)),
            hour,
            int(fields.get("minute", 0)),
            int(fields.get("second", 0)),
            int((fields.get("fraction", "") + "000000")[:6]),
        )
        if "doy" in fields:
            moment = moment.replace(month=1, day=1) + _dt.timedelta(days=int(fields["doy"]) - 1)
    except ValueError:
        raise _time_error(f"{text!r} read with {pattern!r} is not a valid time") from None
    return moment


def to_timestamp(value, pattern: str | None = None) -> _dt.datetime:
    if pattern is None or not isinstance(value, str):
        return as_datetime(value)
    return parse_datetime(value, pattern)


def to_date(value, pattern: str | None = None) -> _dt.date:
    return to_timestamp(value, pattern).date()


def unix_timestamp(value=None, pattern: str = "yyyy-MM-dd HH:mm:ss") -> int:
    """Seconds since 1970-01-01 00:00:00 UTC (Spark); with no argument, of CURRENT_TIMESTAMP."""
    moment = current_timestamp() if value is None else to_timestamp(value, pattern if isinstance(value, str) else None)
    return _micros(moment) // 1_000_000
