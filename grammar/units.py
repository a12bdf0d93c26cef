"""Units of time: the one table behind INTERVAL literals, the python engine's intervals and duration options.

An INTERVAL in a query takes the day-time units Spark SQL takes: WEEK, DAY, HOUR, MINUTE, SECOND,
MILLISECOND and MICROSECOND, singular or plural (``INTERVAL '2' WEEKS`` is Spark's 14 days). MONTH,
QUARTER and YEAR are refused: they have no fixed length, and Spark keeps them in a year-month interval
that cannot be added to a duration. Inside the text (``INTERVAL '1 hour 30 mins'``) cep also reads the
abbreviations PostgreSQL writes (``TEXT_ABBREVIATIONS``).

Duration options outside a query (``--watermark 30s``, ``session_timeout="5 minutes"``) read the same
units, with the short forms people type on a command line (``OPTION_ABBREVIATIONS``).
"""

from __future__ import annotations

# Microseconds in one of each unit, longest first (the order of the fields of `INTERVAL '1 2:30' DAY TO MINUTE`).
MICROS_PER_UNIT: dict[str, int] = {
    "WEEK": 604_800_000_000,
    "DAY": 86_400_000_000,
    "HOUR": 3_600_000_000,
    "MINUTE": 60_000_000,
    "SECOND": 1_000_000,
    "MILLISECOND": 1_000,
    "MICROSECOND": 1,
}
UNIT_NAMES = tuple(MICROS_PER_UNIT)

# Spelled inside an INTERVAL's text: PostgreSQL's abbreviations (Spark refuses them; cep reads them alike).
TEXT_ABBREVIATIONS: dict[str, str] = {
    "MS": "MILLISECOND",
    "MSEC": "MILLISECOND",
    "MSECS": "MILLISECOND",
    "SEC": "SECOND",
    "SECS": "SECOND",
    "MIN": "MINUTE",
    "MINS": "MINUTE",
    "HR": "HOUR",
    "HRS": "HOUR",
}
# Typed as an option's value: the one-letter forms as well (``30s``, ``5m``, ``2h``, ``1d``, ``1w``).
OPTION_ABBREVIATIONS: dict[str, str] = {
    **TEXT_ABBREVIATIONS,
    "US": "MICROSECOND",
    "MILLI": "MILLISECOND",
    "MILLIS": "MILLISECOND",
    "S": "SECOND",
    "M": "MINUTE",
    "H": "HOUR",
    "D": "DAY",
    "W": "WEEK",
}
UNIT_HINT = "use WEEK, DAY, HOUR, MINUTE, SECOND, MILLISECOND or MICROSECOND (or their plurals)"


def unit_name(word: str, abbreviations: dict[str, str] | None = None) -> str | None:
    """'minutes' -> 'MINUTE': a unit's name in ``MICROS_PER_UNIT``, singular or plural, any case, or one of
    ``abbreviations``; None for a word that is no unit of a fixed length (MONTH, YEAR, a typo)."""
    upper = word.upper()
    if abbreviations is not None and upper in abbreviations:
        return abbreviations[upper]
    if upper.endswith("S") and upper[:-1] in MICROS_PER_UNIT:
        return upper[:-1]
    return upper if upper in MICROS_PER_UNIT else None
