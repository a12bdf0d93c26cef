"""The SQL around MATCH_RECOGNIZE gives Spark's answer on the python engine, or a refusal before it runs.

A generator (hypothesis) builds typed expressions from the functions and operators docs/sql-statements.md and
docs/language.md list: casts among every type pair (``CAST``, ``TRY_CAST`` and ``::``, to SMALLINT, FLOAT and
DECIMAL without a precision too), date and time functions with their datetime patterns (every pattern letter, quoted
text, letters Spark refuses; written and read back with the same random pattern), time zone conversions, string
functions over unicode (case mappings that change the length, combining accents, characters outside the BMP; trims,
overlays, hashes, regular expressions), numeric (bitwise, trigonometric, rounding to tens) and conditional
functions, comparisons that convert text (literal date texts in Spark's loose forms, its special values 'today' and
'epoch', DuckDB's 'infinity'), arrays read by index (in and out of bounds), maps read by key, regular expressions
and LIKE with Java's escapes (``$1``, ``\\_``), names of other dialects' functions that Spark does not have
(``strpos``: an error on both), aggregates (percentiles, ``min_by``, ``FILTER``, ``WITHIN GROUP``, ``DISTINCT``,
statistics, bitwise, collected arrays), and window functions in a subquery (ranks, offsets with defaults, frames,
ranges of an interval, ``IGNORE NULLS``). They run inside whole statements (the input through a MATCH_RECOGNIZE
clause in a CTE) over random rows with NULLs, dates and timestamps next to DST changes and year boundaries (and at
the ends of the engines' range), numbers at the edges of their types, decimals, empty strings and unicode, on real
Spark SQL (the independent source) and on the python engine (DuckDB through cep's translation). For every
expression, one of:

- both engines give the same value, of the same type: Spark's exact type (its ``simpleString``: ``int``,
  ``decimal(12,2)``, ``array<smallint>``) against the Spark type of the python engine's Arrow column;
- the python engine refuses before running (E0252, or E0247 for a datetime pattern) with a CepError that
  names the function and points to ``--engine spark``;
- both raise an error (Spark's ANSI mode: a bad cast, a division by zero).

Anything else, a silent difference, fails. In the rounds of ``make test-sql-differential`` (``NAMES_COMPARED``),
the columns written without AS have the same names too: Spark's, or a name the python engine refuses to give.
The python engine runs each expression alone (a run-time error in
a statement of many costs its search for the failing expression, a probe a step). Spark runs the expressions
the python engine answered as one statement (the aggregates' row joined to each row), split in halves while
it fails to find the ones it fails on; of those the python engine fails on, ``ERRORS_CHECKED`` per example run
alone on Spark SQL over the input itself (a query each, with no clause: a failed query costs Spark's next
query a new Python worker, and the clause's match job is a Python worker's). ``make test`` runs
``SQL_DIFFERENTIAL_EXAMPLES`` examples (default 6); ``make test-sql-differential`` runs many more.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import re
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import cep
from cep.matcher.rows.text_types import FIRST_HELD_TIME, LAST_HELD_TIME

# make test's gate: 6 derandomized examples, 6 of the 12 it ran before (the same seed: each drawn case compared
# by its repr, 12 against 6); `make test-sql-differential` explores 300 new ones.
EXAMPLES = int(os.environ.get("SQL_DIFFERENTIAL_EXAMPLES", "6"))
EXPRESSIONS = 24  # per example: Spark runs those the python engine answers in two queries (rows, aggregates)
# Expressions the python engine fails on (an ANSI error: a bad cast, a division by zero) must fail on Spark
# too; each costs a Spark query of its own, so a few per example are checked.
ERRORS_CHECKED = 2
# Shrinking a failure costs minutes of Spark queries, and the message already names each expression that
# differs (the statements are split until each error is one expression's): the few examples of `make test`
# report the example as found; `make test-sql-differential` (more than SHRINK_FROM) shrinks it too.
SHRINK_FROM = 50
# SQL_DIFFERENTIAL_SHRINK=0: an exploration round that reports its first difference at once (on a loaded
# machine shrinking can take longer than the round).
SHRINK = EXAMPLES > SHRINK_FROM and os.environ.get("SQL_DIFFERENTIAL_SHRINK", "1") != "0"
PHASES = tuple(Phase) if SHRINK else tuple(p for p in Phase if p is not Phase.shrink)
# The few examples of `make test` are the same on every run (a gate: a red CI names a difference that anyone
# can reproduce); `make test-sql-differential` explores new random examples on each run.
DERANDOMIZE = EXAMPLES <= SHRINK_FROM
TABLE = "sqld_events"
# The names of the columns written without AS, compared in the rounds of `make test-sql-differential` (more
# than SHRINK_FROM examples): a name costs Spark an analysis and the python engine a translation of each
# example's expressions together, about as much as the example's own queries (51 s more for `make test`'s 12
# examples at a load average of 18-20), so `make test` holds the names to Spark's in
# tests/test_output_column_names.py instead. SQL_DIFFERENTIAL_NAMES=1 or 0 decides otherwise.
NAMES_COMPARED = os.environ.get("SQL_DIFFERENTIAL_NAMES", "1" if EXAMPLES > SHRINK_FROM else "0") == "1"

COLUMNS = (
    ("id", "INT"),
    ("i", "INT"),
    ("b", "BIGINT"),
    ("x", "DOUBLE"),
    ("dec", "DECIMAL(10,2)"),
    ("s", "STRING"),
    ("ns", "STRING"),
    ("d", "DATE"),
    ("ts", "TIMESTAMP"),
    ("flag", "BOOLEAN"),
)
ARROW = pa.schema(
    [
        ("id", pa.int32()),
        ("i", pa.int32()),
        ("b", pa.int64()),
        ("x", pa.float64()),
        ("dec", pa.decimal128(10, 2)),
        ("s", pa.string()),
        ("ns", pa.string()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us")),
        ("flag", pa.bool_()),
    ]
)
STATEMENT_HEAD = (
    f"WITH m AS (SELECT * FROM {TABLE} MATCH_RECOGNIZE (ORDER BY id ALL ROWS PER MATCH "
    "PATTERN (A) DEFINE A AS TRUE) r)\n"
)

# Instants next to the edges where time arithmetic goes wrong: DST changes (Europe, US), year and month
# ends, a leap day, the epoch.
EDGES = [
    dt.datetime(2021, 3, 28, 0, 59, 59),
    dt.datetime(2021, 3, 28, 1, 30),
    dt.datetime(2021, 10, 31, 0, 30),
    dt.datetime(2021, 3, 14, 7, 0, 0, 500000),
    dt.datetime(2021, 11, 7, 6, 30),
    dt.datetime(2020, 12, 31, 23, 59, 59, 999999),
    dt.datetime(2021, 1, 1),
    dt.datetime(2020, 2, 29, 12, 0, 0, 123456),
    dt.datetime(1970, 1, 1),
    dt.datetime(1969, 12, 31, 23, 59, 59, 500000),
    dt.datetime(2019, 12, 30, 8, 15),
    dt.datetime(2024, 12, 31, 15, 4, 5),
    # Local times the clocks skip or pass twice (Europe/Berlin, America/New_York), for the time zone functions.
    dt.datetime(2021, 3, 28, 2, 30),
    dt.datetime(2021, 10, 31, 2, 30),
    dt.datetime(2021, 3, 14, 2, 30),
    dt.datetime(2021, 11, 7, 1, 30),
    # The ends of the range the Spark engine's clause holds (pandas' nanoseconds: a time outside is a bad row
    # there), and a time before the zones' standard offsets (local mean time).
    FIRST_HELD_TIME,
    LAST_HELD_TIME,
    dt.datetime(1890, 6, 30, 12, 0),
]
# Dates at the ends of both engines' range (a DATE holds them on both engines).
FAR_DATES = [dt.date(1, 1, 1), dt.date(9999, 12, 31), dt.date(1582, 10, 10)]
# Numbers at the edges of their types (an INT's and a BIGINT's range, DECIMAL(10,2)'s largest) and doubles
# whose text or rounding trips translations (a negative zero, a half at the last digit, exponents). An INT
# column read through the clause is an INT on both engines, so its arithmetic overflows at INT's range on both.
INT_EDGES = [0, 1, -1, 2147483647, -2147483648]
BIGINT_EDGES = [9223372036854775807, -9223372036854775808, 2147483648]
DOUBLE_EDGES = [-0.0, 0.5, 2.675, 1e-05, 12345678901234.5, -1.5e16, 0.1]
DECIMAL_EDGES = [Decimal("99999999.99"), Decimal("-99999999.99"), Decimal("0.00"), Decimal("-0.01")]
# Texts that trip translations: case mappings that change the length (ß, İ), a character outside the BMP
# (Java counts it as two chars, Spark's functions as one), a combining accent, texts that read as numbers,
# booleans, dates and timestamps in Spark's loose forms.
TEXTS = [
    "",
    "a",
    "abc",
    "Ab-12,x",
    "ÄÖü",
    "日本",
    "naïve café",
    " padded ",
    "12",
    "-7",
    "0",
    "3.5",
    "2021-03-28",
    "ß",
    "İx",
    "😀b",
    "e\u0301",
    "true",
    "1.5e3",
    "NaN",
    "2021-03-28 01:30:00",
    "2021-3-2",
    "28/03/2021",
    "20210328",
    "\t7\n",
    "yes",
    " N ",
    "Infinity",
    "-inf",
    "1.5d",
    " 2.50 ",
    "+.5",
    "a_b",
    "x\\y%",
    "b2_a1",
]
NUMERIC_TEXTS = ["0", "12", "-7", " 42 ", "+5", "2147483647", "-0", "007", "9999999999", "1e2", ""]

timestamps = st.one_of(st.sampled_from(EDGES), st.datetimes(dt.datetime(1999, 12, 25), dt.datetime(2031, 1, 5)))
rows = st.lists(
    st.fixed_dictionaries(
        {
            "i": st.none() | st.integers(-1000, 1000) | st.sampled_from(INT_EDGES),
            "b": st.none() | st.integers(-(10**12), 10**12) | st.sampled_from(BIGINT_EDGES),
            "x": st.none()
            | st.floats(-1e6, 1e6, allow_nan=False).map(lambda v: round(v, 3))
            | st.sampled_from(DOUBLE_EDGES),
            "dec": st.none()
            | st.decimals(-(10**6), 10**6, places=2, allow_nan=False, allow_infinity=False)
            | st.sampled_from(DECIMAL_EDGES),
            "s": st.none() | st.sampled_from(TEXTS),
            "ns": st.none() | st.sampled_from(NUMERIC_TEXTS),
            "d": st.none() | timestamps.map(lambda t: t.date()) | st.sampled_from(FAR_DATES),
            "ts": st.none() | timestamps,
            "flag": st.none() | st.booleans(),
        }
    ),
    min_size=1,
    max_size=6,
)

# ------------------------------------------------------------------------------------------ expressions

TYPES = ("INT", "BIGINT", "DOUBLE", "DECIMAL(10,2)", "STRING", "DATE", "TIMESTAMP", "BOOLEAN")
FORMAT_FIELDS = [
    "yyyy",
    "yy",
    "y",
    "MM",
    "M",
    "MMM",
    "MMMM",
    "dd",
    "d",
    "D",
    "DDD",
    "HH",
    "H",
    "hh",
    "h",
    "mm",
    "m",
    "ss",
    "s",
    "SSS",
    "SSSSSS",
    "a",
    "E",
    "EEE",
    "EEEE",
    "DD",
    "k",
    "SS",
    "YYYY",
    "u",
    "LLL",
    "Q",
    "G",
    "w",
    "e",
    "K",
    "z",
    "X",
    "VV",
    "MMMMM",
    "EEEEE",
    "QQQ",
    "W",
    "F",
    "\\'T\\'",
]
SEPARATORS = ["-", ":", " ", "/", ".", ""]
PARSE_PATTERNS = ["yyyy-MM-dd HH:mm:ss", "yyyy-MM-dd", "dd/MM/yyyy HH:mm", "yyyyMMdd", "MM/dd/yyyy", "yyyy-MM-dd HH:mm"]
# make_date's and make_timestamp's fields. A field out of its range is an ANSI error on both engines, and each
# error the python engine gives costs a Spark query of its own (and Spark's next Python worker): one field in
# OUT_OF_RANGE_ONE_IN is out of range, where any of -2..40 made most such calls fail.
DATE_FIELDS = {"month": (1, 12), "day": (1, 31), "hour": (0, 23), "minute": (0, 59)}
OUT_OF_RANGE_ONE_IN = 8
TRUNC_UNITS = ["YEAR", "yyyy", "YY", "QUARTER", "MONTH", "MM", "MON", "WEEK", "DAY", "DD", "HOUR"]
DATE_TRUNC_UNITS = TRUNC_UNITS + ["MINUTE", "SECOND", "MILLISECOND"]
# Texts a DATE or TIMESTAMP is compared with, or cast from as a literal: Spark's loose forms, its special
# values (in any case, with spaces; 'now' only in comparisons, where seconds between the engines' runs cannot
# change the answer for rows years away), DuckDB's special values that Spark does not read, zones.
DATE_TEXTS = [
    "2021",
    "2021-03",
    "2021-3-28",
    "2021-03-28 01:30:00",
    "2020-12-31T23:59:59.5",
    " 2021-01-01 ",
    "epoch",
    "today",
    "Yesterday",
    " TOMORROW ",
    "infinity",
    "-infinity",
    "today UTC",
    "2021-03-28 01:30:00Z",
    "2021-03-28T01:30+01:00",
    "abc",
    "",
    "-0044-03-15",  # a year before 1: Spark reads it (45 BC), the python engine refuses
    "0000-12-31 23:59",
]
COMPARED_DATE_TEXTS = DATE_TEXTS + ["now", "NOW"]

# The templates of each type: ``{T}`` is an expression of type T (INT, NUM: any number, ANY: any type).
TEMPLATES: dict[str, list[str]] = {
    "INT": [
        "i",
        "id",
        "{lit_int}",
        "length({STRING})",
        "year({DATE})",
        "month({TIMESTAMP})",
        "day({DATE})",
        "hour({TIMESTAMP})",
        "minute({TIMESTAMP})",
        "second({TIMESTAMP})",
        "dayofweek({DATE})",
        "dayofyear({DATE})",
        "weekofyear({DATE})",
        "quarter({TIMESTAMP})",
        "datediff({DATE}, {DATE})",
        "abs({INT})",
        "({INT} + {INT})",
        "({INT} - {INT})",
        "({INT} * {INT})",
        "({INT} % {INT})",
        "({INT} div {INT})",
        "coalesce({INT}, {INT})",
        "nvl({INT}, {INT})",
        "CASE WHEN {BOOLEAN} THEN {INT} ELSE {INT} END",
        "if({BOOLEAN}, {INT}, {INT})",
        "greatest({INT}, {INT})",
        "least({INT}, {INT})",
        "instr({STRING}, 'a')",
        "CAST({ANY} AS INT)",
        "{ANY}::int",
        "extract(MONTH FROM {DATE})",
        "ascii({STRING})",
        "mod({INT}, {INT})",
        "-{INT}",
        "pmod({INT}, {INT})",
        "char_length({STRING})",
        "octet_length({STRING})",
        "locate('a', {STRING})",
        "position('b' IN {STRING})",
        "dayofmonth({DATE})",
        "weekday({DATE})",
        "extract(DOW FROM {TIMESTAMP})",
        "date_part('hour', {TIMESTAMP})",
        "unix_date({DATE})",
        "nullif({INT}, {INT})",
        "ifnull({INT}, {INT})",
        "nvl2({ANY}, {INT}, {INT})",
        "CASE {INT} WHEN 1 THEN {INT} WHEN 2 THEN {INT} ELSE {INT} END",
        "decode({INT}, 1, {INT}, 2, {INT}, {INT})",
        "CAST({ANY} AS SMALLINT)",
        "TRY_CAST({ANY} AS INT)",
        "{ANY}::smallint",
        "sign({INT})",
        "element_at(array({INT}, {INT}, {INT}), {index})",
        "array({INT}, {INT})[{index}]",
        "try_element_at(array({INT}, {INT}), {index})",
        "size({ARRAY})",
        "{ARRAY}[{index}]",
        "CAST({ANY} AS TINYINT)",
        "locate('a', {STRING}, {small})",
        "levenshtein({STRING}, 'abc')",
        "bit_length({STRING})",
        "regexp_count({STRING}, '[a-z]')",
        "regexp_instr({STRING}, '[0-9]+')",
        "({INT} & {INT})",
        "({INT} | 7)",
        "({INT} ^ {INT})",
        "~{INT}",
        "shiftleft({INT}, {lit_int})",
        "shiftright({INT}, 1)",
        "round({INT}, -1)",
        "factorial({lit_int} + 3)",
        "len({STRING})",
        "coalesce({INT}, {INT}, {lit_int})",
        "array_max(array({INT}, {INT}))",
        "array_min(array({INT}, {INT}, {INT}))",
        "cardinality({ARRAY})",
        "array_size({ARRAY})",
        "date_diff({DATE}, {DATE})",
        "map('a', {INT}, 'b', {INT})['b']",
        "element_at(map(1, {INT}, 2, {INT}), {index})",
        "strpos({STRING}, 'b')",
        "iff({BOOLEAN}, {INT}, {INT})",
        "try_add({INT}, {INT})",
        "try_subtract({INT}, {INT})",
        "try_multiply({INT}, {INT})",
    ],
    "BIGINT": [
        "b",
        "CAST({ANY} AS BIGINT)",
        "{ANY}::bigint",
        "unix_timestamp({TIMESTAMP})",
        "unix_timestamp({DATE})",
        "unix_timestamp({PARSED})",
        "unix_timestamp({STRING}, '{parse}')",
        "unix_timestamp(date_format({TIMESTAMP}, '{written}'), '{written}')",
        "to_unix_timestamp({TIMESTAMP})",
        "({BIGINT} + {INT})",
        "floor({DOUBLE})",
        "ceil({DOUBLE})",
        "unix_timestamp(date_format({TIMESTAMP}, '{parse}'), '{parse}')",
        "unix_seconds({TIMESTAMP})",
        "unix_millis({TIMESTAMP})",
        "({BIGINT} * {BIGINT})",
        "round({BIGINT}, -2)",
        "timestampdiff(HOUR, {TIMESTAMP}, {TIMESTAMP})",
        "timestampdiff(MONTH, {TIMESTAMP}, {TIMESTAMP})",
        "datediff(MINUTE, {TIMESTAMP}, {TIMESTAMP})",
        "ceiling({NUM})",
        "TRY_CAST({ANY} AS BIGINT)",
        "({BIGINT} DIV {INT})",
        "nvl({INT}, {BIGINT})",
        "abs({BIGINT})",
        "({BIGINT} % {INT})",
        "date_diff(HOUR, {TIMESTAMP}, {TIMESTAMP})",
        "try_multiply({BIGINT}, {INT})",
        "try_add({BIGINT}, {BIGINT})",
        "decode({INT}, 1, {INT})",  # without a default: Spark's ELSE is a STRING's NULL, so a BIGINT
        "decode({STRING}, {lit_str}, {INT}, 'x', 2)",
    ],
    "DOUBLE": [
        "x",
        "({NUM} / {NUM})",
        "sqrt(abs({NUM}))",
        "ln(abs({NUM}) + 1)",
        "power({DOUBLE}, 2)",
        "round({DOUBLE}, 2)",
        "CAST({ANY} AS DOUBLE)",
        "{ANY}::double",
        "({DOUBLE} * {INT})",
        "exp({lit_int})",
        "abs({DOUBLE})",
        "nvl({DOUBLE}, 0.5D)",
        "sign({NUM})",
        "log10(abs({NUM}) + 1)",
        "log2(abs({NUM}) + 1)",
        "log(2, abs({NUM}) + 1)",
        "cbrt({DOUBLE})",
        "months_between({TIMESTAMP}, {TIMESTAMP})",
        "CAST({ANY} AS FLOAT)",
        "{ANY}::float",
        "pow({INT}, 2)",
        "({DOUBLE} % 2.5)",
        "({DOUBLE} - {DECIMAL(10,2)})",
        "extract(SECOND FROM {TIMESTAMP})",
        "TRY_CAST({ANY} AS DOUBLE)",
        "-{STRING}",
        "({STRING} + {INT})",
        "sin({DOUBLE})",
        "atan2({NUM}, 1)",
        "degrees({DOUBLE})",
        "radians({NUM})",
        "pi()",
        "round({DOUBLE})",
        "round({DOUBLE}, -1)",
        "try_divide({NUM}, {INT})",
        "coalesce({INT}, {DOUBLE})",
        "CASE WHEN {BOOLEAN} THEN {INT} ELSE {DOUBLE} END",
        "CAST({ANY} AS REAL)",
        "signum({NUM})",
        "signum(-0.0D)",
        "signum({DOUBLE} * -0.0D)",
        "try_multiply({DOUBLE}, {INT})",
        "decode({INT}, 1, {DECIMAL(10,2)})",
    ],
    "DECIMAL(10,2)": [
        "dec",
        "({DECIMAL(10,2)} + {DECIMAL(10,2)})",
        "({DECIMAL(10,2)} * 2)",
        "round({DECIMAL(10,2)}, 1)",
        "abs({DECIMAL(10,2)})",
        "CAST({ANY} AS DECIMAL(10,2))",
        "{ANY}::decimal(12,3)",
        "-{DECIMAL(10,2)}",
        "({DECIMAL(10,2)} - {INT})",
        "({DECIMAL(10,2)} * {DECIMAL(10,2)})",
        "floor({DECIMAL(10,2)})",
        "ceil({DECIMAL(10,2)})",
        "({DECIMAL(10,2)} % 3)",
        "coalesce({DECIMAL(10,2)}, 0)",
        "greatest({DECIMAL(10,2)}, {DECIMAL(10,2)})",
        "CAST({ANY} AS DECIMAL(5,1))",
        "TRY_CAST({ANY} AS DECIMAL(4,2))",
        "{ANY}::numeric",
        "CAST({ANY} AS DECIMAL(38,10))",
        "CAST({ANY} AS DECIMAL(3,0))",
        "round({DECIMAL(10,2)}, -1)",
        "greatest({INT}, {DECIMAL(10,2)})",
        "nvl({DECIMAL(10,2)}, {INT})",
        "({DECIMAL(10,2)} + 1.005)",
        "to_number({STRING}, '999.99')",
        "try_add({DECIMAL(10,2)}, {INT})",
    ],
    "STRING": [
        "s",
        "{lit_int}::string",
        "ns",
        "{lit_str}",
        "upper({STRING})",
        "lower({STRING})",
        "trim({STRING})",
        "ltrim({STRING})",
        "concat({STRING}, {STRING})",
        "concat_ws('-', {STRING}, {STRING})",
        "substr({STRING}, {small}, {small})",
        "substring({STRING}, {small})",
        "replace({STRING}, 'a', 'b')",
        "lpad({STRING}, 5, '*')",
        "rpad({STRING}, 4, '.')",
        "reverse({STRING})",
        "date_format({TIMESTAMP}, '{pattern}')",
        "date_format({DATE}, '{pattern}')",
        "to_char({DATE}, '{pattern}')",
        "to_char({TIMESTAMP}, '{pattern}')",
        "CAST({ANY} AS STRING)",
        "{ANY}::string",
        "nvl({STRING}, '')",
        "({STRING} || {STRING})",
        "left({STRING}, {small})",
        "right({STRING}, {small})",
        "initcap({STRING})",
        "repeat({STRING}, 2)",
        "substring_index({STRING}, '-', 1)",
        "translate({STRING}, 'ab', 'x')",
        "regexp_replace({STRING}, '[0-9]', '#')",
        "regexp_extract({STRING}, '([a-z]+)', 1)",
        "regexp_extract({STRING}, '[0-9]+')",  # Spark's default group 1, which the pattern lacks: an error
        "regexp_substr({STRING}, '[0-9]+')",
        "split_part({STRING}, '-', {small})",
        "lcase({STRING})",
        "from_unixtime(unix_timestamp({TIMESTAMP}))",
        "from_unixtime({INT}, 'yyyy-MM-dd')",
        "concat({STRING}, {ANY})",
        "({STRING} || {ANY})",
        "lpad({STRING}, {small}, 'xy')",
        "substr({STRING}, -3)",
        "CASE WHEN {BOOLEAN} THEN {STRING} END",
        "TRY_CAST({ANY} AS STRING)",
        "date_format({TIMESTAMP}, '{parse}')",
        "split({STRING}, '-')[{index}]",
        "element_at(split({STRING}, '2'), {index})",
        "array_join(array({STRING}, {STRING}), '/')",
        "rtrim({STRING})",
        "trim(BOTH 'a' FROM {STRING})",
        "trim(LEADING ' ' FROM {STRING})",
        "ltrim('a', {STRING})",
        "overlay({STRING} PLACING 'zz' FROM {small} FOR {lit_int})",
        "char({INT})",
        "chr({INT})",
        "space({lit_int})",
        "repeat({STRING}, {lit_int})",
        "md5({STRING})",
        "sha1({STRING})",
        "sha2({STRING}, 256)",
        "hex({STRING})",
        "hex({INT})",
        "base64({STRING})",
        "ucase({STRING})",
        "concat_ws(',', {STRING}, NULL, {STRING})",
        "split({STRING}, 'b', 2)[{index}]",
        "CAST({ANY} AS VARCHAR(5))",
        "CAST({ANY} AS CHAR(3))",
        "dayname({DATE})",
        "monthname({TIMESTAMP})",
        "({STRING} LIKE 'a!%' ESCAPE '!')::string",
        "nvl({STRING}, {ANY})",
        "from_unixtime({BIGINT}, '{pattern}')",
        "date_format({STRING}, '{parse}')",
        "date_format(to_timestamp({STRING}, '{parse}'), '{pattern}')",
        "date_format({TIMESTAMP}, '{pattern} {pattern}')",
        "regexp_replace({STRING}, '([a-z])([0-9])', '$2\\\\$1')",
        "regexp_replace({STRING}, '[.|_]', '\\\\$')",
        "upper({NUM})",
        "lower({DATE})",
        "reverse({INT})",
        "initcap({BOOLEAN})",
        "upper({TIMESTAMP})",
        "typeof({ANY})",
        "typeof({ARRAY})",
        "soundex({STRING})",
        "regexp_replace({STRING}, '(?<=a)b', 'X')",
        "regexp_extract({STRING}, '(a)(?=b)', 1)",
        "CAST(date_from_unix_date({INT}) AS STRING)",
        "concat('d', date_from_unix_date({INT} * 3))",
        "date_format(date_from_unix_date({INT} * 7), '{pattern}')",
    ],
    "DATE": [
        "d",
        "to_date({TIMESTAMP})",
        "date_add({DATE}, {small})",
        "date_sub({DATE}, {small})",
        "trunc({DATE}, '{trunc}')",
        "trunc({TIMESTAMP}, '{trunc}')",
        "CAST({ANY} AS DATE)",
        "{ANY}::date",
        "last_day({DATE})",
        "add_months({DATE}, {small})",
        "to_date(date_format({DATE}, '{parse_date}'), '{parse_date}')",
        "coalesce({DATE}, DATE '2000-01-01')",
        "make_date(year({DATE}), month({DATE}), 1)",  # never out of range: no failing Spark query
        "DATE '2021-03-28'",
        "next_day({DATE}, 'MON')",
        "make_date(2021, {month}, {day})",
        "date_from_unix_date({INT})",
        "({DATE} + {small})",
        "({DATE} - INTERVAL 1 DAY)",
        "least({DATE}, {DATE})",
        "to_date({STRING})",
        "to_date({STRING}, '{parse_date}')",
        "TRY_CAST({ANY} AS DATE)",
        "CAST('{date_text}' AS DATE)",
        "DATE '{date_text}'",
        "to_date('{date_text}')",
        "TRY_CAST('{date_text}' AS DATE)",
        "coalesce({DATE}, '{date_text}')",
        "to_date(date_format({TIMESTAMP}, '{written}'), '{written}')",
        "to_date({DATE}, '{parse_date}')",
        "dateadd({DATE}, {small})",
    ],
    "TIMESTAMP": [
        "ts",
        "CAST({ANY} AS TIMESTAMP)",
        "{ANY}::timestamp",
        "date_trunc('{date_trunc}', {TIMESTAMP})",
        "({TIMESTAMP} + INTERVAL 1 HOUR)",
        "({TIMESTAMP} - INTERVAL '30' MINUTE)",
        "{PARSED}",
        "to_timestamp({STRING})",
        "TIMESTAMP '2021-03-28 01:30:00'",
        "greatest({TIMESTAMP}, {TIMESTAMP})",
        "make_timestamp(2021, 3, 28, {hour}, 30, 0)",
        "make_timestamp(2020, {month}, {day}, {hour}, {minute}, {minute})",
        "timestamp_seconds({INT})",
        "from_utc_timestamp({TIMESTAMP}, 'Europe/Berlin')",
        "to_utc_timestamp({TIMESTAMP}, 'America/New_York')",
        "to_utc_timestamp({TIMESTAMP}, 'Europe/Berlin')",
        "({TIMESTAMP} + INTERVAL 1 DAY)",
        "({DATE} + INTERVAL 2 HOUR)",
        "timestampadd(MINUTE, {small}, {TIMESTAMP})",
        "to_timestamp({STRING}, '{parse}')",
        "TRY_CAST({ANY} AS TIMESTAMP)",
        "CAST('{date_text}' AS TIMESTAMP)",
        "to_timestamp('{date_text}')",
        "to_timestamp(date_format({TIMESTAMP}, '{written}'), '{written}')",
        "to_timestamp({STRING}, '{written}')",
        "dateadd(HOUR, {small}, {TIMESTAMP})",
        "({TIMESTAMP} + INTERVAL '1-2' YEAR TO MONTH)",
        "({TIMESTAMP} - INTERVAL '3 04:05:06.5' DAY TO SECOND)",
        "({TIMESTAMP} + INTERVAL '-1 02:03' DAY TO MINUTE)",
        "({TIMESTAMP} + INTERVAL '10:20' HOUR TO MINUTE)",
        "({TIMESTAMP} + make_interval(0, {lit_int}, 0, {small}, 0, 0, 1.5))",
        "({TIMESTAMP} + make_interval({lit_int}, 0, 1, 0, {lit_int}, 30, 0))",
    ],
    "BOOLEAN": [
        "flag",
        "{lit_int}::boolean",
        "({NUM} < {NUM})",
        "({STRING} = {STRING})",
        "({ANY} IS NULL)",
        "isnotnull({ANY})",
        "regexp({STRING}, 'a.b|^$')",
        "({DATE} <= {DATE})",
        "({TIMESTAMP} > {TIMESTAMP})",
        "({STRING} LIKE 'a%')",
        "({STRING} RLIKE '[0-9]')",
        "(NOT {BOOLEAN})",
        "({BOOLEAN} AND {BOOLEAN})",
        "({BOOLEAN} OR {BOOLEAN})",
        "({INT} IN (1, 2, 3))",
        "({NUM} BETWEEN -10 AND 10)",
        "({ANY} <=> {ANY})",
        "CAST({ANY} AS BOOLEAN)",
        "startswith({STRING}, 'a')",
        "({DATE} = {TIMESTAMP})",
        "({STRING} ILIKE 'A%')",
        "isnan({DOUBLE})",
        "({STRING} NOT LIKE '%b%')",
        "({ANY} IN ({ANY}, NULL))",
        "({INT} NOT IN (1, 2))",
        "({STRING} RLIKE '^\\d+$')",
        "(({BOOLEAN}) IS NOT TRUE)",
        "({ANY} IS DISTINCT FROM {ANY})",
        "endswith({STRING}, 'c')",
        "contains({STRING}, 'b')",
        "regexp_like({STRING}, '^[a-z]+$')",
        "({ANY} IS NOT NULL)",
        "({NUM} <> {NUM})",
        "({STRING} < {STRING})",
        "({INT} = {STRING})",
        "({DATE} < {STRING})",
        "({STRING} IN ('a', 'abc', ''))",
        "isnull({ANY})",
        "({TIMESTAMP} BETWEEN {TIMESTAMP} AND {TIMESTAMP})",
        "({DECIMAL(10,2)} > {DOUBLE})",
        "{ANY}::boolean",
        "TRY_CAST({ANY} AS BOOLEAN)",
        "({DATE} < '{compared_date_text}')",
        "('{compared_date_text}' >= {TIMESTAMP})",
        "({TIMESTAMP} = '{compared_date_text}')",
        "({DATE} BETWEEN '{compared_date_text}' AND '{compared_date_text}')",
        "({TIMESTAMP} IN ('{compared_date_text}', '2021-03-28 01:30:00'))",
        "array_contains({ARRAY}, {INT})",
        "starts_with({STRING}, 'a')",
        "({STRING} LIKE '%\\_%')",
        "({STRING} NOT ILIKE 'A\\%%')",
        "({STRING} LIKE 'a!%' ESCAPE '!')",
        "({STRING} RLIKE '(?<!a)b')",
    ],
}
# Arrays (not among ANY's types: a cast of one is another matter), read by index and whole.
TEMPLATES["ARRAY"] = [
    "array({INT}, {INT})",
    "array({INT}, {INT}, {INT})",
    "sort_array(array({INT}, {INT}, {INT}))",
    "array(1, 2)",
]
# Bare intervals (a result column of its own: Spark's day-time interval is a timedelta; its year-month one,
# which PySpark cannot collect, is refused by the python engine).
TEMPLATES["INTERVAL"] = [
    "({TIMESTAMP} - {TIMESTAMP})",
    "({DATE} - {DATE})",
    "INTERVAL '{small}' DAY",
    "INTERVAL '3 04:05:06.5' DAY TO SECOND",
    "INTERVAL '1-2' YEAR TO MONTH",
    "INTERVAL {small} DAY 2 HOURS",
]
ROW_TEMPLATES = ["{ANY}"] * 9 + ["{ARRAY}", "{INTERVAL}"]  # a row's value: an array or an interval now and then
AGGREGATES = [
    "count(*)",
    "count({ANY})",
    "sum({INT})",
    "sum({DECIMAL(10,2)})",
    "avg({INT})",
    "avg({DOUBLE})",
    "min({ANY})",
    "max({ANY})",
    "count(DISTINCT {ANY})",
    "sum({DOUBLE})",
    "max(coalesce({DATE}, DATE '9999-12-31'))",
    "bool_and({BOOLEAN})",
    "count_if({BOOLEAN})",
    "stddev({DOUBLE})",
    "first({ANY})",
    "last({ANY})",
    "any_value({ANY})",
    "max_by({INT}, id)",
    "min_by({STRING}, id)",
    "bool_or({BOOLEAN})",
    "every({BOOLEAN})",
    "variance({DOUBLE})",
    "var_samp({INT})",
    "stddev_pop({DOUBLE})",
    "stddev_samp({DECIMAL(10,2)})",
    "median({DOUBLE})",
    "percentile({INT}, 0.5)",
    "percentile_cont(0.5) WITHIN GROUP (ORDER BY {DOUBLE})",
    "percentile_disc(0.25) WITHIN GROUP (ORDER BY {INT})",
    "avg({DECIMAL(10,2)})",
    "sum({BIGINT})",
    "min({STRING})",
    "sum(DISTINCT {INT})",
    "count(*) FILTER (WHERE {BOOLEAN})",
    "max({ANY}) FILTER (WHERE {BOOLEAN})",
    "(sum({INT}) / count(*))",
    "avg({BIGINT})",
    "listagg({STRING}, ',') WITHIN GROUP (ORDER BY id)",
    "sum(decode({INT}, 1, {INT}, {INT}))",
    "count({lit_int}::{cast_type})",
    "sort_array(collect_set({INT}))",
    "size(collect_list({ANY}))",
    "kurtosis({DOUBLE})",
    "skewness({NUM})",
    "corr({DOUBLE}, {INT})",
    "covar_pop({DOUBLE}, {NUM})",
    "covar_samp({INT}, {INT})",
    "count(DISTINCT {ANY}, {ANY})",
    "avg(DISTINCT {INT})",
    "max(DISTINCT {STRING})",
    "bit_and({INT})",
    "bit_or({BIGINT})",
    "bit_xor({INT})",
    "first({ANY}, true)",
    "regr_count({DOUBLE}, {INT})",
    "regr_slope({DOUBLE}, {INT})",
    "var_pop({NUM})",
    "sum({DOUBLE}) FILTER (WHERE {BOOLEAN})",
    "min({DATE})",
    "max({TIMESTAMP})",
    "sum({DECIMAL(10,2)} * {INT})",
    "avg({NUM}) FILTER (WHERE {BOOLEAN})",
    "listagg({STRING}) WITHIN GROUP (ORDER BY id)",
    "string_agg({STRING}, '-') WITHIN GROUP (ORDER BY id DESC)",
    "sort_array(array_agg({INT}))",
    "sort_array(collect_set(DISTINCT {INT}) FILTER (WHERE {BOOLEAN}))",
    "size(collect_list(DISTINCT {ANY}) FILTER (WHERE {BOOLEAN}))",
    "approx_percentile({DOUBLE}, 0.5)",
    "regr_intercept({DOUBLE}, {INT})",
]
WINDOWS = [
    "row_number() OVER (ORDER BY id)",
    "sum({INT}) OVER (ORDER BY id)",
    "lag({ANY}) OVER (ORDER BY id)",
    "lead({ANY}, 1) OVER (ORDER BY id)",
    "rank() OVER (PARTITION BY flag ORDER BY id)",
    "count(*) OVER (PARTITION BY flag)",
    "max({ANY}) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)",
    "first_value({ANY}) OVER (ORDER BY id)",
    "dense_rank() OVER (ORDER BY {INT})",
    "ntile(2) OVER (ORDER BY id)",
    "percent_rank() OVER (ORDER BY {INT})",
    "cume_dist() OVER (ORDER BY {ANY})",
    "rank() OVER (ORDER BY {ANY})",
    "dense_rank() OVER (ORDER BY {INT} DESC)",
    "lag({INT}, 1, 0) OVER (ORDER BY id)",
    "last_value({ANY}) OVER (ORDER BY id)",
    "nth_value({ANY}, 2) OVER (ORDER BY id)",
    "avg({INT}) OVER (PARTITION BY flag)",
    "sum({DOUBLE}) OVER (ORDER BY {DATE})",
    "count({ANY}) OVER (ORDER BY {INT} RANGE BETWEEN 1 PRECEDING AND CURRENT ROW)",
    "min({ANY}) OVER (PARTITION BY {BOOLEAN} ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 FOLLOWING)",
    "first_value({ANY}) IGNORE NULLS OVER (ORDER BY id)",
    "count({ANY}) OVER (PARTITION BY flag ORDER BY id)",
    "sum({INT}) OVER (PARTITION BY {BOOLEAN} ORDER BY id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING)",
    "max({ANY}) OVER (PARTITION BY {STRING})",
    "lag({ANY}, 2) OVER (ORDER BY id)",
    "lead({INT}, 1, -1) OVER (ORDER BY id)",
    "lag({STRING}, 1, 'z') OVER (PARTITION BY flag ORDER BY id DESC)",
    "ntile(3) OVER (ORDER BY id)",
    "sum({NUM}) OVER (ORDER BY id ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING)",
    "count(*) OVER (ORDER BY {TIMESTAMP} RANGE BETWEEN INTERVAL 1 DAY PRECEDING AND CURRENT ROW)",
    "nth_value({ANY}, 2) IGNORE NULLS OVER (ORDER BY id)",
    "last_value({ANY}) IGNORE NULLS OVER (ORDER BY id)",
    "rank() OVER (PARTITION BY {STRING} ORDER BY {NUM} DESC NULLS LAST)",
    "stddev({DOUBLE}) OVER (PARTITION BY flag)",
    "row_number() OVER (PARTITION BY flag ORDER BY id DESC)",
    "sum({INT}) OVER (ORDER BY i RANGE BETWEEN 2 PRECEDING AND 2 FOLLOWING)",
    "size(collect_list({ANY}) OVER (ORDER BY id))",
    "(sum({INT}) OVER (ORDER BY id) - {INT})",
    "avg({DOUBLE}) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)",
    "min({STRING}) OVER (ORDER BY {DATE} DESC, id)",
]

KINDS = (*TEMPLATES, "ANY", "NUM", "PARSED")
HOLES_OF_A_TYPE = re.compile(r"\{(?:" + "|".join(re.escape(kind) for kind in KINDS) + r")\}")
# Three levels down, an expression is a leaf: a column or a literal.
LEAVES = {kind: [t for t in templates if not HOLES_OF_A_TYPE.search(t)] for kind, templates in TEMPLATES.items()}


@st.composite
def expressions(draw, kind: str, depth: int = 0) -> str:
    """An expression of SQL type ``kind`` (or NUM, ANY), at most a few levels deep."""
    if kind == "ANY":
        kind = draw(st.sampled_from(TYPES))
    if kind == "NUM":
        kind = draw(st.sampled_from(("INT", "BIGINT", "DOUBLE", "DECIMAL(10,2)")))
    if kind == "PARSED":
        pattern = draw(st.sampled_from(PARSE_PATTERNS))
        return f"to_timestamp(date_format({draw(expressions('TIMESTAMP', depth + 1))}, '{pattern}'), '{pattern}')"
    templates = TEMPLATES[kind]
    template = draw(st.sampled_from(LEAVES[kind] if depth >= 3 else templates))
    return _fill(draw, template, depth)


def _fill(draw, template: str, depth: int) -> str:
    """The template with its holes drawn; a parse or written pattern drawn once (it writes and reads the
    same text)."""
    out, position, drawn = [], 0, {}
    while True:
        start = template.find("{", position)
        if start < 0:
            out.append(template[position:])
            return "".join(out)
        end = template.index("}", start)
        out.append(template[position:start])
        name = template[start + 1 : end]
        if name in ("parse", "parse_date", "written"):
            drawn.setdefault(name, _hole(draw, name, depth))
            out.append(drawn[name])
        else:
            out.append(_hole(draw, name, depth))
        position = end + 1


def _hole(draw, name: str, depth: int) -> str:
    if name == "lit_int":
        return str(draw(st.integers(-3, 3)))
    if name == "small":
        return str(draw(st.integers(-2, 40)))
    if name == "lit_str":
        return "'" + draw(st.sampled_from(TEXTS)).replace("'", "\\'") + "'"
    if name in ("pattern", "written"):  # a written pattern is read back with the same pattern
        fields = draw(st.lists(st.sampled_from(FORMAT_FIELDS), min_size=1, max_size=4))
        return "".join(field + draw(st.sampled_from(SEPARATORS)) for field in fields)
    if name in ("parse", "parse_date"):
        return draw(st.sampled_from(PARSE_PATTERNS if name == "parse" else ["yyyy-MM-dd", "dd/MM/yyyy", "yyyyMMdd"]))
    if name in DATE_FIELDS:  # in its range but now and then (an ANSI error on both engines, a Spark query each)
        low, high = DATE_FIELDS[name]
        if draw(st.integers(0, OUT_OF_RANGE_ONE_IN - 1)):
            return str(draw(st.integers(low, high)))
        return str(draw(st.sampled_from([low - 1, high + 1, 40])))
    if name == "cast_type":
        return draw(st.sampled_from(("string", "boolean", "double", "decimal(4,1)", "smallint", "date", "int")))
    if name == "trunc":
        return draw(st.sampled_from(TRUNC_UNITS))
    if name == "index":  # an array's index: in bounds, out of them, 0, below 0
        return str(draw(st.integers(-3, 3)))
    if name in ("date_text", "compared_date_text"):
        return draw(st.sampled_from(DATE_TEXTS if name == "date_text" else COMPARED_DATE_TEXTS))
    if name == "date_trunc":
        return draw(st.sampled_from(DATE_TRUNC_UNITS))
    return draw(expressions(name, depth + 1))


@st.composite
def cases(draw) -> tuple[list[dict], list[tuple[str, str]]]:
    """(rows, [(kind, expression)]): kind is 'row' (one value per row), 'aggregate' or 'window'."""
    data = draw(rows)
    picked = []
    for _ in range(EXPRESSIONS):
        shape = draw(st.sampled_from(("row", "row", "row", "row", "aggregate", "window")))
        if shape == "row":
            template = draw(st.sampled_from(ROW_TEMPLATES))
        else:
            template = draw(st.sampled_from(AGGREGATES if shape == "aggregate" else WINDOWS))
        picked.append((shape, _fill(draw, template, 1)))
    return data, picked


def statement(shape: str, items: list[tuple[str, str]], source: str = "m") -> str:
    """A whole statement computing ``items`` ((column, expression)) over the clause's rows: one row in all
    ('aggregate'), or one per row, the window functions in a subquery ('row'). ``source`` TABLE reads the
    input itself, without the clause."""
    select = ", ".join(f"{expression} AS {name}" for name, expression in items)
    head = STATEMENT_HEAD if source == "m" else ""
    if shape == "aggregate":
        return head + f"SELECT {select} FROM {source}"
    return head + f"SELECT * FROM (SELECT id AS _id, {select} FROM {source}) w ORDER BY _id"


def both_shapes(rows: list[tuple[str, str]], aggregates: list[tuple[str, str]]) -> str:
    """One statement computing the row items and the aggregate items: the aggregates' one row joined to each
    row (on Spark, a query costs its planning and the clause's match job, whatever it selects)."""
    if not aggregates:
        return statement("row", rows)
    if not rows:
        return statement("aggregate", aggregates)
    select = ", ".join(f"{expression} AS {name}" for name, expression in rows)
    totals = ", ".join(f"{expression} AS {name}" for name, expression in aggregates)
    return STATEMENT_HEAD + (
        f"SELECT * FROM (SELECT id AS _id, {select} FROM m) w CROSS JOIN (SELECT {totals} FROM m) a ORDER BY _id"
    )


# ------------------------------------------------------------------------------------------ comparing


def spark_name_of_arrow(kind: pa.DataType) -> str:
    """The Spark type (its ``simpleString``) that a column of Arrow type ``kind`` stands for on the python
    engine: the exact type, width and precision included (Spark's TIMESTAMP is the naive UTC timestamp)."""
    for test, name in (
        (pa.types.is_int8, "tinyint"),
        (pa.types.is_int16, "smallint"),
        (pa.types.is_int32, "int"),
        (pa.types.is_int64, "bigint"),
        (pa.types.is_float32, "float"),
        (pa.types.is_float64, "double"),
        (pa.types.is_string, "string"),
        (pa.types.is_large_string, "string"),
        (pa.types.is_date32, "date"),
        (pa.types.is_timestamp, "timestamp"),
        (pa.types.is_boolean, "boolean"),
        (pa.types.is_null, "void"),
        (pa.types.is_duration, "interval"),  # Spark's day-time intervals, whichever their fields
    ):
        if test(kind):
            return name
    if pa.types.is_decimal(kind):
        return f"decimal({kind.precision},{kind.scale})"
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return f"array<{spark_name_of_arrow(kind.value_type)}>"
    return str(kind)


def without_void(name: str) -> str | None:
    """A type name with NULL's own type (``void``, alone or as an array's element) as None: a column of
    NULLs only (``CASE WHEN ... THEN NULL END``) has no type to compare on either engine."""
    return None if "void" in name else name


def same_value(left, right) -> bool:
    if left is None or right is None:
        return left is None and right is None
    if isinstance(left, dt.datetime) and left.tzinfo is not None:
        left = left.astimezone(dt.UTC).replace(tzinfo=None)
    if isinstance(right, dt.datetime) and right.tzinfo is not None:
        right = right.astimezone(dt.UTC).replace(tzinfo=None)
    if isinstance(left, (float, Decimal)) or isinstance(right, (float, Decimal)):
        if isinstance(left, bool) or isinstance(right, bool):
            return False
        a, b = float(left), float(right)
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(same_value(a, b) for a, b in zip(left, right))
    return type(left) is type(right) and left == right


def python_engine(text: str, table: pa.Table):
    """(rows, {column: Spark's type name}) or the CepError."""
    try:
        out = cep.compile_sql(text).run({TABLE: table}, kind="arrow")
    except cep.CepError as error:
        return error
    return out.to_pylist(), {field.name: spark_name_of_arrow(field.type) for field in out.schema}


def spark_engine(spark, text: str):
    """(rows, {column: type name}) or Spark's error; a statement without the clause runs on Spark SQL alone."""
    try:
        frame = cep.sql(spark, text) if "MATCH_RECOGNIZE" in text else spark.sql(text)
        collected = [row.asDict() for row in frame.collect()]
    except Exception as error:  # noqa: BLE001 - any Spark error: the expression has no Spark answer
        return error
    return collected, {field.name: field.dataType.simpleString() for field in frame.schema.fields}


def python_answers(shape: str, items: list[tuple[str, str]], table: pa.Table) -> list[tuple[str, str, object]]:
    """(name, expression, answer) for each item, each run alone: a statement costs the python engine a few
    hundred milliseconds, but a run-time error in a statement of many expressions costs its search for the
    expression that fails (a probe a step, each probe the whole statement again), so the items of an example
    alone cost about half of them together, split until each error is one item's."""
    return [
        (name, expression, python_engine(statement(shape, [(name, expression)]), table)) for name, expression in items
    ]


def is_refusal(error: cep.CepError) -> bool:
    """A refusal before running: E0252 or E0247, which points to Spark. Or one at run time for a value the
    python engine cannot hold where Spark gives one (a date of DuckDB's infinities, a time past DuckDB's
    range): it cannot be told before the row is read, and it says so at the expression, pointing to Spark."""
    if error.code == "E0250" and str(error).count("the python engine cannot compute this"):
        return "--engine spark" in str(error)
    return error.code in ("E0252", "E0247") and "--engine spark" in str(error)


def check_case(spark, data: list[dict], picked: list[tuple[str, str]]) -> list[str]:
    """The silent differences of one example (an empty list when there are none)."""
    from pyspark.sql.types import _parse_datatype_string

    table = pa.Table.from_pylist([{"id": n, **row} for n, row in enumerate(data)], schema=ARROW)
    spark_rows = [tuple([n] + [row[c] for c, _ in COLUMNS[1:]]) for n, row in enumerate(data)]
    schema = _parse_datatype_string(", ".join(f"{name} {kind}" for name, kind in COLUMNS))
    spark.createDataFrame(spark_rows, schema).createOrReplaceTempView(TABLE)
    answered, failed = [], []  # (shape, name, expression, python's answer)
    for shape in ("row", "aggregate"):
        items = [
            (f"c{n}", expression)
            for n, (kind, expression) in enumerate(picked)
            if (kind == "aggregate") == (shape == "aggregate")
        ]
        for name, expression, answer in python_answers(shape, items, table) if items else []:
            if not isinstance(answer, cep.CepError):
                answered.append((shape, name, expression, answer))
            elif not is_refusal(answer) and len(failed) < ERRORS_CHECKED:
                failed.append((shape, name, expression, answer))
    both = spark_answers(spark, answered)
    problems = [compare(name, expression, answer, theirs) for name, expression, answer, theirs in both]
    shapes = {name: shape for shape, name, _expression, _answer in answered}
    for shape in ("row", "aggregate") if NAMES_COMPARED else ():
        written = [e for name, e, _ours, theirs in both if shapes[name] == shape and not isinstance(theirs, Exception)]
        problems.extend(names_differ(spark, table, written))
    for shape, name, expression, answer in failed:
        # Spark's error over the input itself: the same rows and types without the clause, whose Python worker a
        # failed query would cost (Spark does not reuse a failed task's worker; a new one imports pandas, pyarrow
        # and cep, about 1.3 CPU-seconds)
        alone = spark_engine(spark, statement(shape, [(name, expression)], source=TABLE))
        problems.append(compare(name, expression, answer, alone))
    return [problem for problem in problems if problem]


def names_differ(spark, table: pa.Table, expressions: list[str]) -> list[str]:
    """Where the python engine names a column written without AS (``expressions``, all rows or all aggregates,
    which both engines answered), the name is Spark's: Spark's analyser names them (no job runs), the python
    engine's translation binds them in DuckDB (not run); a column whose Spark name it does not know has a
    marked name there, and is refused when it reaches a result (tests/test_output_column_names.py)."""
    from cep.duckdb_column_names import UNNAMED_MARK
    from cep.statement_engines import DuckEngine

    if not expressions:
        return []
    text = f"SELECT {', '.join(expressions)} FROM {TABLE}"
    engine = DuckEngine(read_path=None)
    try:
        engine.register(TABLE, table)
        try:
            ours = engine.bound(text).columns
        except Exception:  # noqa: BLE001 - a translation that fails beside others (each ran alone): not compared
            return []
    finally:
        engine.close()
    theirs = spark.sql(text).columns
    return [
        f"{expression}: named {mine!r} on python, {spark_name!r} on Spark"
        for expression, mine, spark_name in zip(expressions, ours, theirs, strict=True)
        if not mine.startswith(UNNAMED_MARK) and mine != spark_name
    ]


# Aggregates that pick a row without an order: on Spark the row depends on the order after a shuffle (its
# documentation calls them non-deterministic), so Spark's answer is some row's value. Spark computes the
# values they may pick instead (every row's, NULL too; the non-NULL ones for `ignoreNulls` true), and the
# python engine's answer must be one of them.
ANY_ROW_AGGREGATE = re.compile(r"(first|last|any_value)\((.*?)(, true)?\)", re.S)


def picked_row(expression: str) -> re.Match | None:
    return ANY_ROW_AGGREGATE.fullmatch(expression)


def spark_expression(expression: str) -> str:
    """What Spark computes for ``expression``: itself, or the values an aggregate of ANY_ROW_AGGREGATE may
    pick, as an array (collect_list skips NULLs: a struct around each value keeps them)."""
    found = picked_row(expression)
    if found is None:
        return expression
    if found.group(3):
        return f"collect_list({found.group(2)})"
    return f"transform(collect_list(named_struct('v', {found.group(2)})), e -> e.v)"


def spark_answers(spark, answered: list) -> list:
    """(name, expression, python's answer, Spark's answer) for the expressions the python engine answered
    ((shape, name, expression, answer)): one Spark query for them all (``both_shapes``), split in halves while
    Spark fails, to find the ones it fails on. An aggregate's answer is its first row (the join repeats it)."""
    if not answered:
        return []
    rows, aggregates = (
        [(name, spark_expression(expression)) for kind, name, expression, _ in answered if kind == shape]
        for shape in ("row", "aggregate")
    )
    together = spark_engine(spark, both_shapes(rows, aggregates))
    if not isinstance(together, Exception) or len(answered) == 1:
        return [
            (name, expression, answer, first_row(together) if kind == "aggregate" else together)
            for kind, name, expression, answer in answered
        ]
    half = len(answered) // 2
    return spark_answers(spark, answered[:half]) + spark_answers(spark, answered[half:])


def first_row(answer):
    """An aggregate's answer from a statement of several rows: its first (the value it has on each)."""
    if isinstance(answer, Exception):
        return answer
    rows, types = answer
    return rows[:1], types


def compare(name: str, expression: str, python_answer, spark_answer) -> str | None:
    if isinstance(spark_answer, Exception):
        if isinstance(python_answer, cep.CepError):
            return None  # both refuse (Spark's ANSI errors, or a type error on both)
        return f"{expression}: Spark fails ({str(spark_answer).splitlines()[0][:160]}), python gives a value"
    if isinstance(python_answer, cep.CepError):
        return f"{expression}: Spark gives a value, python fails without refusing first:\n{python_answer}"
    (python_rows, python_types), (spark_rows, spark_types) = python_answer, spark_answer
    spark_type = spark_types[name]
    spark_values = [row[name] for row in spark_rows]
    python_values = [row[name] for row in python_rows]
    if picked_row(expression) is not None:  # Spark gave the values it may pick (the row is its choice)
        spark_type = spark_type[len("array<") : -1]
        spark_values = spark_values[0]
        if python_values[0] is not None and not any(same_value(python_values[0], v) for v in spark_values):
            return f"{expression}: python {python_values[0]!r} is none of Spark's values {spark_values!r}"
        if python_values[0] is None and not (None in spark_values or not spark_values):
            return f"{expression}: python NULL, where every value Spark may pick is one: {spark_values!r}"
        python_values = spark_values = []
    python_type = python_types[name]
    if re.fullmatch(r"interval (day|hour|minute|second)( to \w+)?", spark_type):  # Arrow has no fields
        spark_type = "interval"
    if None not in (without_void(python_type), without_void(spark_type)) and python_type != spark_type:
        return f"{expression}: type {python_type} on python, {spark_type} on Spark"
    if len(spark_values) != len(python_values) or not all(map(same_value, python_values, spark_values)):
        return f"{expression}: python {python_values!r} != Spark {spark_values!r}"
    return None


# pyproject's 600 s per test is for one example's worth of work; a round of many examples on a loaded machine
# takes longer (each example: a few Spark queries), so the limit grows with the round.
SECONDS_PER_EXAMPLE = 30


@pytest.mark.spark
@pytest.mark.timeout(max(600, EXAMPLES * SECONDS_PER_EXAMPLE))
@settings(
    max_examples=EXAMPLES,
    phases=PHASES,
    derandomize=DERANDOMIZE,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=cases())
def test_the_python_engine_gives_sparks_answer_or_refuses(spark, case) -> None:
    data, picked = case
    problems = check_case(spark, data, picked)
    assert not problems, "silent differences between the engines:\n" + "\n".join(problems)


# No Spark here: milliseconds an example, so never fewer than the 12 of before.
@settings(max_examples=max(EXAMPLES, 12), suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=cases(), cut=st.integers(0, 400), junk=st.sampled_from(["", ")", "'", "(", ",", "::", " AS ", "`", "\\"]))
def test_the_python_engine_raises_nothing_but_cep_errors(case, cut, junk) -> None:
    """Every generated expression, whole or with a piece of junk pasted in: rows, or a CepError (never a
    Python traceback, never DuckDB's or sqlglot's own exception). The whole expression's error is a sentence
    of cep's (none of DuckDB's text: "Out of Range Error: ...") at a place inside the expression, not at the
    statement's start (DuckDB's errors at run time name no place: cep finds it)."""
    data, picked = case
    table = pa.Table.from_pylist([{"id": n, **row} for n, row in enumerate(data)], schema=ARROW)
    for shape, expression in picked[:6]:
        broken = expression[:cut] + junk + expression[cut:]
        for text in (expression, broken):
            whole = statement("aggregate" if shape == "aggregate" else "row", [("c0", text)])
            try:
                cep.compile_sql(whole).run({TABLE: table}, kind="arrow")
            except cep.CepError as error:
                assert "Traceback" not in str(error)
                if text is expression:
                    assert not DUCKDBS_OWN_TEXT.search(error.message), str(error)
                    assert whole.index(expression) <= error.span.start < whole.index(expression) + len(expression), str(
                        error
                    )


DUCKDBS_OWN_TEXT = re.compile(r"\b(?:[A-Z][a-z]+ )+Error: ")  # "Binder Error: ", "Out of Range Error: "


def test_an_aggregate_that_picks_any_row_must_give_a_value_spark_may_pick() -> None:
    """first, last and any_value (aggregates): the python engine's answer is one of the values Spark gives
    for the rows (its own answer depends on the order after a shuffle), of the same type."""
    assert spark_expression("first(i + 1)") == "transform(collect_list(named_struct('v', i + 1)), e -> e.v)"
    assert spark_expression("first(nvl(i, 2), true)") == "collect_list(nvl(i, 2))"
    assert spark_expression("max(i)") == "max(i)"
    values = ([{"c0": [1, None, 3]}], {"c0": "array<int>"})
    assert compare("c0", "first(i)", ([{"c0": 3}], {"c0": "int"}), values) is None
    assert compare("c0", "any_value(i)", ([{"c0": None}], {"c0": "int"}), values) is None
    assert "none of Spark's values" in compare("c0", "last(i)", ([{"c0": 2}], {"c0": "int"}), values)
    assert "type string on python" in compare("c0", "last(i)", ([{"c0": None}], {"c0": "string"}), values)
    non_null = ([{"c0": [1, 3]}], {"c0": "array<int>"})
    python_null = ([{"c0": None}], {"c0": "int"})
    assert "every value Spark may pick" in compare("c0", "first(i, true)", python_null, non_null)
    nothing = ([{"c0": []}], {"c0": "array<int>"})
    assert compare("c0", "first(i, true)", ([{"c0": None}], {"c0": "int"}), nothing) is None


def test_a_window_over_a_cast_that_fails_is_placed_at_the_cast() -> None:
    """Found by the property above: the window reads its partitions (base64(NULL) first, so the BIGINT's
    largest first), the cast alone reads the rows in their order; DuckDB's two messages name two values, and
    the error was placed at the whole window, or at the statement's start (1:1) where the probes ran out."""
    rows = [{"id": 0, "b": 9223372036854775807, "ns": None}, {"id": 1, "b": 2147483648, "ns": "1e2"}]
    table = pa.Table.from_pylist(rows, schema=pa.schema([f for f in ARROW if f.name in ("id", "b", "ns")]))
    expression = "max(CAST(b AS DECIMAL(3,0))) OVER (PARTITION BY base64(ns))"
    whole = statement("row", [("c0", expression)])
    with pytest.raises(cep.CepError) as caught:
        cep.compile_sql(whole).run({TABLE: table}, kind="arrow")
    error = caught.value
    assert error.code == "E0250" and "cannot be cast to DECIMAL(3,0)" in error.message, str(error)
    assert whole[error.span.start : error.span.end] == "CAST(b AS DECIMAL(3,0))", str(error)
