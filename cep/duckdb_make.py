"""Spark's ``make_timestamp`` and ``make_date`` in DuckDB SQL, as in ANSI mode: a field out of its range (hour
24, February 30, month 13) is an error at the call, where DuckDB would carry it over to the next day or fail
without a place (part of the translation in cep/duckdb_sql.py, through cep/duckdb_functions.py)."""

from __future__ import annotations

from cep.duckdb_nodes import INTEGRAL, Refusal, call_duck, fail_with, place_of, type_of

# Imported inside functions: sqlglot (heavy; `cep check` of a single clause needs none of it).

_MAKE_TIMESTAMP_RANGES = (("month", 1, 12), ("day", 1, 31), ("hour", 0, 23), ("min", 0, 59))


def make_timestamp(node):
    """Spark's make_timestamp(y, mo, d, h, mi, s) in ANSI mode: a field out of range (hour 24, February 30,
    seconds 60.5) is an error at the call; seconds of exactly 60 are the next minute, as in DuckDB's, which
    would also read hour 24 as the next day."""
    from sqlglot import exp

    if node.args.get("zone") is not None or any(node.args.get(key) is not None for key in ("nano", "milli")):
        raise Refusal("the python engine runs MAKE_TIMESTAMP only with its six fields (no time zone)", *place_of(node))
    fields = {key: node.args.get(key) for key in ("year", "month", "day", "hour", "min", "sec")}
    if any(value is None for value in fields.values()):
        raise Refusal("MAKE_TIMESTAMP takes six fields: year, month, day, hour, minute, seconds", *place_of(node))

    def field(key):
        return exp.Paren(this=fields[key].copy())

    in_range = [
        exp.Between(this=field(key), low=exp.Literal.number(low), high=exp.Literal.number(high))
        for key, low, high in _MAKE_TIMESTAMP_RANGES
    ]
    seconds = exp.or_(
        exp.and_(
            exp.GTE(this=field("sec"), expression=exp.Literal.number(0)),
            exp.LT(this=field("sec"), expression=exp.Literal.number(60)),
        ),
        exp.EQ(this=field("sec"), expression=exp.Literal.number(60)),
    )
    made = call_duck("make_timestamp", *(field(key) for key in fields))
    return _checked(
        node,
        [field(key) for key in fields],
        in_range + [seconds],
        field("year"),
        field("month"),
        field("day"),
        made,
        "MAKE_TIMESTAMP",
        "TIMESTAMP",
    )


def make_date(node, types: dict[int, str]):
    """Spark's make_date(y, m, d) in ANSI mode: a DATE, NULL where a field is NULL, and a month or day out of
    its range (month 13, February 30) an error at the call (DuckDB's make_date fails without a place). Spark
    casts each field to an INT; a field of another type than an integer (a DOUBLE, text) is refused."""
    from sqlglot import exp

    fields = list(node.expressions)
    if len(fields) != 3:
        raise Refusal("MAKE_DATE takes three fields: year, month, day", *place_of(node))
    for field in fields:
        kind = type_of(field, types)
        if kind not in (*INTEGRAL, "INTEGER"):
            told = kind or "of a type it cannot tell"
            raise Refusal(
                f"the python engine runs MAKE_DATE of integer fields only (this one is {told}; Spark casts it to "
                "an INT by its own rules): cast it to INT",
                *place_of(field),
                untyped=kind is None,
            )
    year, month, day = (exp.Paren(this=field.copy()) for field in fields)
    in_range = [
        exp.Between(this=month.copy(), low=exp.Literal.number(1), high=exp.Literal.number(12)),
        exp.Between(this=day.copy(), low=exp.Literal.number(1), high=exp.Literal.number(31)),
    ]
    made = call_duck("make_date", year.copy(), month.copy(), day.copy())
    return _checked(node, [year, month, day], in_range, year, month, day, made, "MAKE_DATE", "DATE")


def _checked(node, fields, in_range, year, month, day, made, name: str, kind: str):
    """``made`` where no field is NULL and every one is within its range (the day within its month's length:
    read only for a month in range, as DuckDB's make_date fails on month 13); NULL where a field is NULL;
    else Spark's ANSI error at ``node``."""
    from sqlglot import exp

    month_start = call_duck("make_date", year.copy(), month.copy(), exp.Literal.number(1))
    fits_month = exp.LTE(this=day.copy(), expression=call_duck("day", call_duck("last_day", month_start)))
    invalid = fail_with(f"{name}: a field is out of its range (an invalid date or time)", place_of(node), kind)
    return exp.Case(
        ifs=[
            exp.If(this=exp.or_(*(exp.Is(this=f.copy(), expression=exp.Null()) for f in fields)), true=exp.Null()),
            exp.If(
                this=exp.and_(*in_range),
                true=exp.Case(ifs=[exp.If(this=fits_month, true=made)], default=invalid.copy()),
            ),
        ],
        default=invalid,
    )
