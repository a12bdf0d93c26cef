"""One table of time units (grammar/units.py) behind INTERVAL literals, the python engine's intervals and
the duration options: every unit Spark SQL takes in a day-time interval is read as Spark reads it, the
ones of no fixed length are refused with E0109, and an option's duration agrees with the literal."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

import cep
from cep.grammar import ast
from cep.grammar.errors import CepSyntaxError
from cep.grammar.parser import parse
from cep.grammar.units import MICROS_PER_UNIT
from cep.matcher.sql.intervals import interval_to_timedelta
from cep.spark_bridge.engine.durations import parse_duration

# What one of each unit is, from Python's own calendar arithmetic (not from the table under test).
ONE = {
    "WEEK": dt.timedelta(weeks=1),
    "DAY": dt.timedelta(days=1),
    "HOUR": dt.timedelta(hours=1),
    "MINUTE": dt.timedelta(minutes=1),
    "SECOND": dt.timedelta(seconds=1),
    "MILLISECOND": dt.timedelta(milliseconds=1),
    "MICROSECOND": dt.timedelta(microseconds=1),
}


def within(interval: str) -> ast.IntervalLiteral:
    """The interval of a query's WITHIN clause, as the parser reads it."""
    return parse(
        f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A B) WITHIN {interval} DEFINE A AS true)"
    ).match.within


def test_the_table_holds_every_unit_spark_takes():
    assert set(MICROS_PER_UNIT) == set(ONE)
    assert {unit: dt.timedelta(microseconds=us) for unit, us in MICROS_PER_UNIT.items()} == ONE


@given(st.sampled_from(sorted(ONE)), st.integers(1, 500), st.booleans())
def test_a_literal_of_each_unit_is_its_length(unit, amount, plural):
    word = unit + ("S" if plural else "")
    assert interval_to_timedelta(within(f"INTERVAL '{amount}' {word.lower()}")) == amount * ONE[unit]


@given(st.lists(st.tuples(st.integers(1, 50), st.sampled_from(sorted(ONE))), min_size=1, max_size=4))
def test_units_inside_the_text_add_up(parts):
    text = " ".join(f"{amount} {unit.lower()}s" for amount, unit in parts)
    assert interval_to_timedelta(within(f"INTERVAL '{text}'")) == sum((a * ONE[u] for a, u in parts), dt.timedelta())


@given(st.integers(1, 500), st.sampled_from(sorted(ONE)))
def test_an_option_reads_a_duration_as_the_literal_does(amount, unit):
    literal = interval_to_timedelta(within(f"INTERVAL '{amount}' {unit}"))
    assert parse_duration(f"{amount} {unit.lower()}s") == literal // dt.timedelta(microseconds=1)


def test_short_forms_of_options():
    assert parse_duration("2w") == parse_duration("14 days") == parse_duration(dt.timedelta(weeks=2))
    assert parse_duration("1h 30m") == parse_duration("90 minutes")
    assert parse_duration("250us") * 4 == parse_duration("1ms")


@pytest.mark.parametrize("unit", ["MONTH", "MONTHS", "QUARTER", "YEAR", "FORTNIGHT"])
def test_a_unit_of_no_fixed_length_is_refused_with_its_position(unit):
    with pytest.raises(CepSyntaxError) as raised:
        within(f"INTERVAL '2' {unit}" if unit != "FORTNIGHT" else "INTERVAL '2 fortnights'")
    assert raised.value.code == "E0109"
    assert "WEEK" in raised.value.hint and raised.value.line == 1


def test_within_a_week_matches_on_the_python_engine():
    rows = [{"ts": dt.datetime(2024, 1, 1) + dt.timedelta(days=d), "v": d} for d in (0, 6, 12, 19)]
    query = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(A.v) AS a, LAST(B.v) AS b "
        "ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN (A B) WITHIN INTERVAL '1' WEEK "
        "DEFINE A AS true, B AS true)"
    )
    assert cep.compile(query).run(rows) == [{"a": 0, "b": 6}, {"a": 6, "b": 12}]  # 12 to 19 is a week: not within


@pytest.mark.spark
def test_spark_reads_each_unit_alike(spark):
    """Spark SQL's own INTERVAL literal is the independent answer for every unit of the table."""
    for unit in MICROS_PER_UNIT:
        for plural in ("", "S"):
            literal = f"INTERVAL '3' {unit}{plural}"
            spark_value = spark.sql(f"SELECT {literal} AS i").collect()[0]["i"]
            assert interval_to_timedelta(within(literal)) == spark_value, literal
