"""What an analyst pastes around a MATCH_RECOGNIZE clause (from Spark's, Oracle's or Snowflake's docs), run with
the ``cep`` command on both engines: Spark's answer, or the same refusal with a caret on both, never a raw error.
Expected values come from Spark's documentation (its datetime patterns) or the standard library."""

from __future__ import annotations

import pytest

from cep.cli import main

TICKER = "symbol,day,price\n" + "".join(
    f"ACME,2020-10-{day:02d},{price}\n" for day, price in enumerate([12, 17, 19, 21, 25, 12, 15, 20, 24, 25], 1)
)
V_SHAPE = """FROM Ticker MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY day
  MEASURES FIRST(day) AS start_date ONE ROW PER MATCH
  PATTERN (A B+ C+) DEFINE B AS price < PREV(price), C AS price > PREV(price))"""


@pytest.fixture
def ticker(tmp_path):
    (tmp_path / "ticker.csv").write_text(TICKER, encoding="utf-8")
    return tmp_path


def _engines():
    return ["python", pytest.param("spark", marks=pytest.mark.spark)]


def _run(ticker, capsys, engine: str, select: str, request) -> tuple[int, str, str]:
    """``cep run`` of ``SELECT <select>`` around the V shape over the ticker file: (exit code, stdout, stderr)."""
    if engine == "spark":
        request.getfixturevalue("spark")  # the suite's one session (with its connectors), started before cep's
    query = ticker / "q.sql"
    query.write_text(f"SELECT {select}\n{V_SHAPE}\n", encoding="utf-8")
    code = main(["run", str(query), "-i", f"Ticker={ticker / 'ticker.csv'}", "--engine", engine])
    out, err = capsys.readouterr()
    return code, out, err


# Spark 3+ refuses the week-based year 'YYYY' (its DateTimeFormatterHelper: "Fail to recognize 'YYYY-MM-DD'
# pattern"), and only when a row reaches the function; DuckDB would write a week-year and a day of the year.
@pytest.mark.parametrize("engine", _engines())
def test_a_pattern_spark_refuses_is_refused_by_check_and_both_engines_alike(ticker, capsys, engine, request):
    if engine == "spark":
        request.getfixturevalue("spark")  # the suite's one session (with its connectors), started before cep's
    query = ticker / "q.sql"
    query.write_text(f"SELECT symbol, DATE_FORMAT(start_date, 'YYYY-MM-DD') AS s\n{V_SHAPE}\n", encoding="utf-8")
    assert main(["check", str(query)]) == 1
    checked = capsys.readouterr().err
    argv = ["run", str(query), "-i", f"Ticker={ticker / 'ticker.csv'}", "--engine", engine]
    assert main(argv) == 1
    ran = capsys.readouterr().err
    assert "error[E0247]: DATE_FORMAT: the datetime pattern 'YYYY-MM-DD' uses 'YYYY' (week-based year" in checked
    assert ran == checked  # the same place, words and hint: no "Spark runs it", no Spark message
    assert "1:40:" in ran and "^^^^^^^^^^^^" in ran


@pytest.mark.parametrize("engine", _engines())
def test_patterns_both_engines_write_alike(ticker, capsys, engine, request):
    select = (
        "TO_CHAR(start_date, 'yyyy-MM-dd') AS s, DATE_FORMAT(start_date, 'dd/MM/yyyy EEE') AS f,\n"
        "  TO_DATE('05.10.2020', 'dd.MM.yyyy') AS td"
    )
    code, out, err = _run(ticker, capsys, engine, select, request)
    assert code == 0, err
    rows = [line.split() for line in out.splitlines()[2:-1]]
    assert rows == [["2020-10-05", "05/10/2020", "Mon", "2020-10-05"]]  # 2020-10-05 was a Monday


# An Oracle date format: 'MON' holds N and 'YYYY' a week-based year, which Spark refuses (its message:
# DATETIME_WEEK_BASED_PATTERN), so no engine runs it; the refusal is that one, not "the python engine cannot".
@pytest.mark.parametrize("engine", _engines())
def test_an_oracle_date_format_is_refused_as_spark_refuses_it(ticker, capsys, engine, request):
    code, _out, err = _run(ticker, capsys, engine, "TO_CHAR(start_date, 'DD-MON-YYYY') AS d", request)
    assert code == 1
    assert "error[E0247]: TO_CHAR: the datetime pattern 'DD-MON-YYYY' uses" in err and "which Spark refuses" in err
    assert "Spark runs it" not in err and "spark:" not in err


# Spark's DATE - DATE is an INTERVAL DAY (Spark 3.2+, ANSI intervals), which prints as a duration and which
# ROUND refuses ("requires the NUMERIC type, however ... has the type INTERVAL DAY"); Oracle's is a number.
@pytest.mark.parametrize("engine", _engines())
def test_a_date_minus_a_date_is_an_interval_of_days(ticker, capsys, engine, request):
    select = "LAST_DAY(start_date) - start_date AS to_month_end, start_date - DATE '2020-10-01' AS since"
    code, out, err = _run(ticker, capsys, engine, select, request)
    assert code == 0, err
    rows = [line.split() for line in out.splitlines()[2:-1]]
    assert rows == [["26", "days", "00:00:00", "4", "days", "00:00:00"]]  # 2020-10-05: 26 days to the 31st
    code, _out, err = _run(ticker, capsys, engine, "ROUND(start_date - DATE '2020-10-01') AS days", request)
    assert code == 1
    assert "error[E0250]" in err and "1:8:" in err and "INTERVAL" in err and "Traceback" not in err


# sqlglot writes FORMAT_STRING as DuckDB's format(), which reads {} placeholders and printed '%s#%d' as it is,
# where Spark prints ACME#1 (Java's Formatter): the python engine refuses it, Spark runs it.
def test_format_string_is_refused_by_the_python_engine(ticker, capsys, request):
    code, _out, err = _run(ticker, capsys, "python", "format_string('%s#%d', symbol, 1) AS id", request)
    assert code == 1
    assert "error[E0252]" in err and "FORMAT_STRING" in err and "1:8:" in err and "--engine spark" in err


# date_add of 3,000,000 days: Spark's answer is a DATE in the year 10233, which Python's dates cannot hold;
# the python engine refuses it naming the column (E0250), and the Spark engine printed a Python traceback
# ("ValueError: year 10233 is out of range"; date_add(d, 2147483647), year -5877591, alike). Both refuse it.
@pytest.mark.parametrize("engine", _engines())
def test_a_date_past_the_years_python_holds_is_an_error_naming_the_column(ticker, capsys, engine, request):
    code, out, err = _run(ticker, capsys, engine, "date_add(start_date, 3000000) AS far", request)
    assert code == 1, out
    assert "error[E0250]: column far holds a DATE outside the years 1 to 9999" in err and "Traceback" not in err
