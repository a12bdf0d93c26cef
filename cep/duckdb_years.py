"""Dates and timestamps of any year as Spark writes them, and Spark's day numbers as DuckDB's dates (part of
the translation in cep/duckdb_sql.py; docs/sql-statements.md lists the rules).

Spark's DATE holds any day of an INT (``date_from_unix_date(3000000)`` is in the year 10183, ``DATE '0001-01-01'
- INTERVAL 1 DAY`` in the year 0, 1 BC) and writes the year as java.time does: ``+10183-09-21``, ``0000-12-31``,
``-0221-09-04`` (astronomical years, a sign past four digits). DuckDB's dates hold nearly as many days, but its
text of them is ``10183-09-21`` and ``0222-09-04 (BC)``, and its ``%Y`` writes ``0004`` where Spark's ``y``
writes ``4``. The year part is written here from DuckDB's ``year()`` (astronomical, as Spark's); the rest of
the text is DuckDB's, which agrees."""

from __future__ import annotations

from cep.duckdb_nodes import call_duck, fail_with, place_of
from cep.grammar.functions import datetime_pattern, duckdb_strftime

# Imported inside functions: sqlglot (heavy; `cep check` of a single clause needs none of it).

# The years whose text DuckDB writes as Spark does: a CAST to text outside them takes Spark's form.
_FOUR_DIGIT_YEARS = (1, 9999)
# Spark's year fields, written from the year itself (DuckDB's %Y and %y differ outside 1000-9999).
YEAR_FIELDS = ("y", "yy", "yyyy")
# The day numbers a DuckDB DATE holds: its largest and smallest INT days stand for infinity and -infinity
# (and -2^31 for neither), which Spark reads as days of the years 5881580 and -5877641.
DUCKDB_DAYS = (-2147483646, 2147483646)


def _text(value):
    from sqlglot import exp

    return exp.Cast(this=value, to=exp.DataType.build("VARCHAR"))


def _number(value: int):
    from sqlglot import exp

    return exp.Literal.number(value)


def year_text(year, field: str):
    """Spark's text of the (astronomical) ``year`` for the pattern field ``field``: ``y`` the number (``-221``,
    ``10183``), ``yy`` its last two digits (``21``), ``yyyy`` at least four digits, signed past four or
    below 0 (``+10183``, ``-0221``, ``0000``)."""
    from sqlglot import exp

    def paren(value):
        return exp.Paren(this=value.copy())

    if field == "y":
        return _text(year)
    unsigned = call_duck("abs", paren(year))
    if field == "yy":
        return call_duck(
            "lpad", _text(exp.Mod(this=unsigned, expression=_number(100))), _number(2), exp.Literal.string("0")
        )
    sign = exp.Case(
        ifs=[
            exp.If(this=exp.GT(this=paren(year), expression=_number(9999)), true=exp.Literal.string("+")),
            exp.If(this=exp.LT(this=paren(year), expression=_number(0)), true=exp.Literal.string("-")),
        ],
        default=exp.Literal.string(""),
    )
    # printf, not lpad: DuckDB's lpad cuts a longer text to the width
    return exp.DPipe(this=sign, expression=call_duck("printf", exp.Literal.string("%04d"), unsigned))


def spark_time_text(value):
    """``CAST(value AS STRING)`` of a DATE or TIMESTAMP as Spark writes it, for any year: DuckDB's own text
    within the years 1 to 9999, else Spark's year before the rest of DuckDB's text (its month, day and time;
    its year digits and its `` (BC)``, after the date or its time, removed)."""
    from sqlglot import exp

    year = call_duck("year", value.copy())
    rest = call_duck(
        "regexp_replace",
        _text(value.copy()),
        exp.Literal.string(r"^[0-9]+| \(BC\)"),
        exp.Literal.string(""),
        exp.Literal.string("g"),
    )
    low, high = _FOUR_DIGIT_YEARS
    return exp.Case(
        ifs=[
            exp.If(this=exp.Between(this=year.copy(), low=_number(low), high=_number(high)), true=_text(value.copy()))
        ],
        default=exp.DPipe(this=year_text(year, "yyyy"), expression=rest),
    )


def written_with_years(moment, pattern: str):
    """DuckDB's text of the TIMESTAMP ``moment`` written with Spark's datetime ``pattern`` when it has a year
    field (None when it has none: strftime alone writes it): strftime for the runs of other fields and text,
    the years from ``year()``, joined with ``||`` (NULL where ``moment`` is)."""
    from sqlglot import exp

    pieces = datetime_pattern(pattern)
    if not any(kind == "field" and text in YEAR_FIELDS for kind, text in pieces):
        return None
    parts, run = [], []

    def flush() -> None:
        if run:
            parts.append(call_duck("strftime", moment.copy(), exp.Literal.string("".join(run))))
            run.clear()

    for kind, text in pieces:
        if kind == "field" and text in YEAR_FIELDS:
            flush()
            parts.append(year_text(call_duck("year", moment.copy()), text))
        else:
            run.append(text.replace("%", "%%") if kind == "text" else duckdb_strftime(text))
    flush()
    joined = parts[0]
    for part in parts[1:]:
        joined = exp.DPipe(this=joined, expression=part)
    return _text(joined)  # typed as text where the translation reads its type (EXTRACT of text casts it)


def date_of_unix_day(node):
    """Spark's date_from_unix_date(n): the DATE ``n`` days after 1970-01-01, a DuckDB DATE plus an integer
    (a DATE of DuckDB's whole range, not sqlglot's DATE + INTERVAL, a TIMESTAMP that ends in the year 294247).
    The three day numbers DuckDB keeps for its infinities fail at the call, saying that Spark gives a date."""
    from sqlglot import exp

    day = exp.Paren(this=node.this.copy())
    low, high = DUCKDB_DAYS
    beyond = fail_with(
        f"the python engine cannot compute this: a DATE holds the days {low} to {high} after 1970-01-01 in DuckDB "
        "(Spark's dates go one or two days further)",
        place_of(node),
        "DATE",
        spark_fails=False,
    )
    # An INTEGER: DuckDB adds no BIGINT to a DATE (Spark casts the argument to its INT)
    whole = exp.Cast(this=day.copy(), to=exp.DataType.build("INTEGER"))
    days = exp.Add(
        this=exp.Cast(this=exp.Literal.string("1970-01-01"), to=exp.DataType.build("DATE")), expression=whole
    )
    return exp.Case(
        ifs=[
            exp.If(this=exp.Is(this=day.copy(), expression=exp.Null()), true=exp.Null()),
            exp.If(this=exp.Between(this=day.copy(), low=_number(low), high=_number(high)), true=days),
        ],
        default=beyond,
    )
