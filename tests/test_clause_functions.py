"""The clause's numeric functions at the edges of their domains give Spark's value and type (math_functions.py).

Spark computes SQRT, LN, EXP, POWER, FLOOR, ROUND ... with Java's Math: NaN, an infinity, or NULL where its
function says so (a logarithm at or below zero), and FLOOR/CEIL of a DOUBLE are BIGINTs converted as Java's
(long) cast (NaN 0, past the range its end). Python's math raised instead (``math domain error``,
``math range error``, ``ZeroDivisionError``) or answered with a complex number.

Expected values are Spark 4.2's: the written-down cases below are compared with Spark SQL over the same rows by
``test_spark_gives_each_written_down_answer``, and the property runs random function applications over edge
values on cep (in MEASURES and in DEFINE, on the Pike VM and the column-wise engines) and in one Spark SQL
SELECT over the same rows an example. ``CLAUSE_FUNCTIONS_EXAMPLES`` sets its examples (``make
test-clause-functions`` runs many; ``make test`` a few, derandomized).

Logarithms, EXP and POWER are Java's ``StrictMath`` (fdlibm) on Spark and the C library's here: the two differ
in the last binary digit for some arguments (EXP(1) is 2.7182818284590455 on Spark, 2.718281828459045 here), so
finite non-zero doubles are compared to a relative 1e-12; NaN, infinities, zeros (their sign too), NULLs and
integers exactly.
"""

from __future__ import annotations

import math
import os
import warnings
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import cep
from tests.test_sql_differential import spark_name_of_arrow

NAN, INF = math.nan, math.inf
# Two rows, as the lead's report: A's x is 1.0, B's -8.0; each measure reads B's row.
LEAD_ROWS = [1.0, -8.0]


def lead_measure(measure: str) -> tuple[object, str]:
    """``measure`` of the one match of (A B) over LEAD_ROWS on the python engine (as ``cep run`` runs a statement):
    its value and Spark type name."""
    table = pa.table({"ts": pa.array([1, 2], pa.int32()), "x": pa.array(LEAD_ROWS, pa.float64())})
    text = (
        f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES {measure} AS v ONE ROW PER MATCH "
        "PATTERN (A B) DEFINE B AS true) r"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = cep.compile_sql(text).run({"t": table})
    return out.column("v").to_pylist()[0], spark_name_of_arrow(out.schema.field("v").type)


def lead_measure_error(measure: str, code: str, words: str) -> cep.CepError:
    """The CepError ``lead_measure(measure)`` raises, checked for its ``code`` and ``words``."""
    with pytest.raises(cep.CepError) as caught:
        lead_measure(measure)
    assert caught.value.code == code and words in caught.value.message, str(caught.value)
    return caught.value


# (measure over B.x = -8.0, Spark 4.2's value, Spark's type), from a Spark SQL SELECT over the same row
# (``test_spark_gives_each_written_down_answer`` asks Spark again).
LEAD_CASES = [
    # math domain error
    ("sqrt(B.x)", NAN, "double"),
    ("ln(B.x + 8)", None, "double"),  # ln(0): NULL, not -Infinity
    ("floor(sqrt(B.x))", 0, "bigint"),  # (long) NaN
    ("log10(B.x)", None, "double"),
    # math range error
    ("exp(-B.x * 100)", INF, "double"),
    ("ceil(exp(-B.x * 100))", 2**63 - 1, "bigint"),  # (long) Infinity
    ("floor(-exp(-B.x * 100))", -(2**63), "bigint"),
    ("round(exp(-B.x * 100))", INF, "double"),
    ("round(exp(-B.x * 100), 2)", INF, "double"),
    ("round(B.x * 1e300, -1)", -8e300, "double"),  # 301 digits: no rounding to do
    # a complex number, silently
    ("power(B.x, 1.0 / 3)", NAN, "double"),
    # ZeroDivisionError
    ("power(0.0, B.x)", INF, "double"),
    ("power(0.0, B.x + 7)", INF, "double"),
    # Java's pow, not C's: 1 to NaN, and +-1 to an infinity, are NaN
    ("power(1, sqrt(B.x))", NAN, "double"),
    ("power(-1, exp(-B.x * 100))", NAN, "double"),
    # an infinite dividend: Java's % gives NaN (Python's fmod raised)
    ("mod(exp(-B.x * 100), 3)", NAN, "double"),
    # LOG in base 1 divides ln(x) by 0.0: Infinity (ln(2) > 0), where it was NULL
    ("log(1, B.x + 10)", INF, "double"),
    # LOG2 is ln(x) / ln(2) on Spark, one digit off C's log2 at 10
    ("log2(B.x + 18)", 3.3219280948873626, "double"),
    # ROUND's zero has no sign (a BigDecimal's), where Python's Decimal kept -0.0
    ("round(B.x / 20)", 0.0, "double"),
    # A number with an exponent is a DOUBLE literal: its value the nearest double (a DECIMAL's exact 0.3 and
    # unsigned 0 before), its zero signed
    ("1e0", 1.0, "double"),
    ("2.5E-3", 0.0025, "double"),
    ("-0e0", -0.0, "double"),
    ("0.1e0 + 0.2e0", 0.30000000000000004, "double"),
    ("B.x * 1e-1", -0.8, "double"),
    # NaN and the infinities cast to a DECIMAL are NULL, in ANSI mode too (were Decimal('NaN'))
    ("CAST(sqrt(B.x) AS DECIMAL(5,2))", None, "decimal(5,2)"),
    ("CAST(exp(-B.x * 100) AS DECIMAL(5,2))", None, "decimal(5,2)"),
    ("CAST(-exp(-B.x * 100) AS DECIMAL(5,2))", None, "decimal(5,2)"),
    # COALESCE past 38 digits keeps the integer digits and gives up scale, with no floor of 6 (was (38,6))
    ("coalesce(CAST(B.x AS DECIMAL(38,10)), CAST(2 AS DECIMAL(38,0)))", Decimal("-8"), "decimal(38,0)"),
    ("coalesce(CAST(NULL AS DECIMAL(38,37)), CAST(B.x AS DECIMAL(10,0)))", Decimal("-8"), "decimal(38,28)"),
    # a DECIMAL alone is DECIMAL(10,0); TRY_CAST past the type is NULL (CAST is an error: DECIMAL_OVERFLOWS)
    ("CAST(B.x AS DECIMAL)", Decimal("-8"), "decimal(10,0)"),
    ("try_cast(B.x * 1e10 AS DECIMAL(5,2))", None, "decimal(5,2)"),
    # DIV of DECIMALs is Spark's (of DOUBLEs it is not: DIV_OF_DOUBLES), truncated toward zero
    ("2.5 DIV 2", 1, "bigint"),
    ("CAST(B.x AS DECIMAL(3,1)) DIV 3", -2, "bigint"),
]


def same_double(found, expected) -> bool:
    """Equal as Spark's doubles are told apart: NaN equals NaN, a zero's sign counts."""
    if isinstance(expected, float) and isinstance(found, float):
        if math.isnan(expected):
            return math.isnan(found)
        return found == expected and math.copysign(1.0, found) == math.copysign(1.0, expected)
    return found == expected and type(found) is type(expected)


@pytest.mark.parametrize(("measure", "expected", "type_name"), LEAD_CASES)
def test_a_function_at_its_domains_edge_gives_sparks_value(measure, expected, type_name) -> None:
    value, found_type = lead_measure(measure)
    assert same_double(value, expected), (measure, value)
    assert found_type == type_name


@pytest.mark.spark
def test_spark_gives_each_written_down_answer(spark) -> None:
    """The written-down answers, from Spark SQL over the same row (B.x as the column x), in one query."""
    spark.createDataFrame([(LEAD_ROWS[1],)], "x DOUBLE").createOrReplaceTempView("cf_lead")
    columns = ", ".join(f"{measure.replace('B.x', 'x')} AS c{n}" for n, (measure, _, _) in enumerate(LEAD_CASES))
    frame = spark.sql(f"SELECT {columns} FROM cf_lead")
    row = frame.collect()[0]
    for n, (measure, expected, type_name) in enumerate(LEAD_CASES):
        assert same_double(row[n], expected), (measure, row[n])
        assert frame.schema.fields[n].dataType.simpleString() == type_name, measure


INT_MAX = 2**31 - 1


@pytest.mark.parametrize("measure", ["round(A.i, -1)", "round(-A.i - 1, -1)"])
def test_round_of_an_int_past_its_range_is_an_overflow_error(measure) -> None:
    """Spark 4.2 (ANSI): round(2147483647, -1) is ARITHMETIC_OVERFLOW (the INT 2147483650 it would be), and so
    is round(-2147483648, -1); cep's E0410 at the function (it answered 2147483650 in an INT column)."""
    table = pa.table({"ts": pa.array([1], pa.int32()), "i": pa.array([INT_MAX], pa.int32())})
    text = (
        f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES {measure} AS v ONE ROW PER MATCH "
        "PATTERN (A) DEFINE A AS true) r"
    )
    with pytest.raises(cep.CepError) as caught:
        cep.compile(text).run(table)
    assert caught.value.code == "E0410"
    assert caught.value.message.startswith("integer overflow")
    assert text[caught.value.span.start : caught.value.span.end] == measure


@pytest.mark.spark
def test_spark_overflows_on_round_of_an_int(spark) -> None:
    spark.createDataFrame([(INT_MAX,)], "i INT").createOrReplaceTempView("cf_int")
    for expression in ["round(i, -1)", "round(-i - 1, -1)"]:
        with pytest.raises(Exception, match="ARITHMETIC_OVERFLOW"):
            spark.sql(f"SELECT {expression} FROM cf_int").collect()


# ------------------------------------------------------------------------------------------------ the property

EXAMPLES = int(os.environ.get("CLAUSE_FUNCTIONS_EXAMPLES", "4"))
DOUBLE_EDGES = [NAN, INF, -INF, -0.0, 0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -8.0, 10.0, 1e300, -1e300, 5e-324, 1e-320]
INT_EDGES = [0, 1, -1, 2, 7, -8, 2**31 - 1, -(2**31)]
BIGINT_EDGES = [0, 1, -1, 3, 2**62, 2**63 - 1, -(2**63)]
UNARY = ["abs", "sqrt", "ln", "exp", "floor", "ceil", "ceiling", "sign", "log10", "log2", "log", "round", "-"]
BINARY = ["power", "log"]
COLUMNS = {"x": pa.float64(), "y": pa.float64(), "i": pa.int32(), "b": pa.int64()}
SPARK_SCHEMA = "id INT, x DOUBLE, y DOUBLE, i INT, b BIGINT"


def expressions(depth: int):
    """A function application over the columns (each read as ``{q}col``: ``A.x`` in the clause, ``x`` in Spark)
    and small integer literals."""
    leaves = st.one_of(st.sampled_from(["{q}x", "{q}y", "{q}i", "{q}b"]), st.sampled_from(["0", "1", "-1", "2", "3"]))
    if depth == 0:
        return leaves
    inner = expressions(depth - 1)
    return st.one_of(
        st.sampled_from(["{q}x", "{q}y"]),
        st.builds(lambda f, a: f"-({a})" if f == "-" else f"{f}({a})", st.sampled_from(UNARY), inner),
        st.builds(lambda f, a, b: f"{f}({a}, {b})", st.sampled_from(BINARY), inner, inner),
        st.builds(lambda a, k: f"round({a}, {k})", inner, st.sampled_from(["-2", "-1", "1", "3"])),
        st.builds(lambda a, k: f"mod({a}, {k})", inner, st.sampled_from(["2", "-3"])),
        st.builds(lambda a, b, op: f"({a} {op} {b})", inner, inner, st.sampled_from(["+", "*"])),
    )


rows_strategy = st.lists(
    st.tuples(
        st.sampled_from([*DOUBLE_EDGES, None]),
        st.sampled_from(DOUBLE_EDGES),
        st.sampled_from([*INT_EDGES, None]),
        st.sampled_from(BIGINT_EDGES),
    ),
    min_size=1,
    max_size=4,
)


def table_of(rows) -> pa.Table:
    data = {"id": pa.array(range(len(rows)), pa.int32())}
    for n, (name, kind) in enumerate(COLUMNS.items()):
        data[name] = pa.array([row[n] for row in rows], kind)
    return pa.table(data)


def close(found, expected) -> bool:
    """Spark's value and type, a finite non-zero double to a relative 1e-12 (StrictMath against the C library)."""
    if found is None or expected is None:
        return found is expected
    if isinstance(expected, float) and isinstance(found, float):
        if math.isfinite(expected) and math.isfinite(found) and expected != 0 and found != 0:
            return math.isclose(found, expected, rel_tol=1e-12)
    return same_double(found, expected)


def cep_answer(text: str, table: pa.Table, column: str):
    """``column``'s values and Spark type name on the column-wise engines and on the Pike VM (asserted equal),
    warnings as errors (a numpy RuntimeWarning fails the test); a CepError as (code, message)."""
    found = []
    for column_wise in (True, False):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            try:
                out = cep.compile(text, column_wise=column_wise).run(table)
                found.append((out.column(column).to_pylist(), spark_name_of_arrow(out.schema.field(column).type)))
            except cep.CepError as error:
                found.append((error.code, error.message))
    assert repr(found[0]) == repr(found[1]), text
    return found[1]


def sql_type(text: str, table: pa.Table) -> str:
    """The Spark type of the column ``v`` of the statement ``text`` on the python engine (as ``cep run`` runs it:
    a column of NULLs alone has its measure's type there, where ``cep.compile``'s Arrow output has none)."""
    out = cep.compile_sql(text).run({"t": table})
    return spark_name_of_arrow(out.schema.field("v").type)


def measures_statement(measure: str) -> str:
    return (
        f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES A.id AS id, {measure.format(q='A.')} AS v ONE ROW "
        "PER MATCH "
        "PATTERN (A) DEFINE A AS TRUE) r"
    )


def define_statement(condition: str) -> str:
    return (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES A.id AS id ONE ROW PER MATCH "
        f"PATTERN (A) DEFINE A AS {condition.format(q='A.')}) r"
    )


def spark_columns(spark, expressions_: list[str]) -> list:
    """Each expression's (values, type, values of ``e > 0``) from Spark SQL over the view ``cf_rows``, or the
    exception Spark raised for it: one SELECT of all of them when none fails, else one an expression."""
    items = [e.format(q="") for e in expressions_]
    select = ", ".join(f"{e} AS v{n}, ({e}) > 0 AS d{n}" for n, e in enumerate(items))
    try:
        frame = spark.sql(f"SELECT {select} FROM cf_rows ORDER BY id")
        rows = frame.collect()
    except Exception as error:  # noqa: BLE001 - Spark's errors at collect() are its own classes
        if len(items) == 1:
            return [error]
        return [spark_columns(spark, [e])[0] for e in expressions_]
    types = [field.dataType.simpleString() for field in frame.schema.fields]
    return [([r[2 * n] for r in rows], types[2 * n], [r[2 * n + 1] for r in rows]) for n in range(len(items))]


@pytest.mark.spark
@pytest.mark.timeout(max(600, EXAMPLES * 60))
@settings(
    max_examples=EXAMPLES,
    derandomize=EXAMPLES <= 20,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],  # no shrinking: each step is a Spark query
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(measures=st.lists(expressions(2), min_size=1, max_size=8), rows=rows_strategy)
def test_functions_give_sparks_values_in_measures_and_define(spark, measures, rows) -> None:
    """Each measure on cep (MEASURES, and ``measure > 0`` as a DEFINE) against Spark SQL's SELECT over the same
    rows: the same values and type, the same rows matched, or an overflow error where Spark raises one."""
    table = table_of(rows)
    spark.createDataFrame(table.to_pylist(), SPARK_SCHEMA).createOrReplaceTempView("cf_rows")
    for measure, answer in zip(measures, spark_columns(spark, measures)):
        shown = measure.format(q="")
        found = cep_answer(measures_statement(measure), table, "v")
        matched = cep_answer(define_statement(f"({measure}) > 0"), table, "id")
        if isinstance(answer, Exception):
            assert "ARITHMETIC_OVERFLOW" in str(answer), (shown, str(answer)[:300])
            assert found[0] == "E0410" and found[1].startswith("integer overflow"), (shown, found)
            assert matched[0] == "E0410", (shown, matched)
            continue
        expected, type_name, condition = answer
        values = found[0]
        assert sql_type(measures_statement(measure), table) == type_name, (shown, found)
        assert len(values) == len(expected) and all(map(close, values, expected)), (shown, values, expected)
        assert matched[0] == [n for n, holds in enumerate(condition) if holds], (shown, matched, condition)


@settings(max_examples=60, derandomize=True, deadline=None)
@given(measure=expressions(2), rows=rows_strategy)
def test_functions_never_raise_a_python_error_on_either_engine(measure, rows) -> None:
    """Without Spark, many more applications: the VM and the column-wise engines agree (``cep_answer``), give a
    value of a type Spark has (an int or a float, never a complex number) or cep's overflow error E0410, and
    no Python exception escapes (one would fail the test)."""
    table = table_of(rows)
    found = cep_answer(measures_statement(measure), table, "v")
    matched = cep_answer(define_statement(f"({measure}) > 0"), table, "id")
    if found[0] == "E0410":
        assert matched[0] == "E0410", (measure, matched)
        return
    assert all(value is None or type(value) in (int, float) for value in found[0]), (measure, found)
    assert found[1] in ("int", "bigint", "double", "void"), (measure, found)


# TRUNC(x, d) is Snowflake's (Spark has no numeric TRUNC), so these are written down by hand: to more decimals than
# a double has (1e308 is its largest power of ten) the value stays as it is; to a unit coarser than every finite
# double it is 0. Both raised Python's OverflowError and ZeroDivisionError.
@pytest.mark.parametrize(
    ("measure", "expected"),
    [
        ("trunc(B.x, 400)", -8.0),
        ("trunc(B.x, -400)", 0.0),
        ("trunc(B.x, -1)", 0.0),
        ("trunc(B.x * 1e300, 309)", -8e300),
    ],
)
def test_trunc_to_digits_past_a_doubles_keeps_or_zeroes_it(measure, expected) -> None:
    value, found_type = lead_measure(measure)
    assert same_double(value, expected), (measure, value)
    assert found_type == "double"


# DIV of a DOUBLE: Spark 4.2 refuses each at analysis (DATATYPE_MISMATCH: DIV takes BIGINT, DECIMAL or an
# interval; ``test_spark_refuses_div_of_a_double`` asks it). cep refuses it before reading a row (E0235), the
# DOUBLE told by a literal, a CAST, a function or the input column's type (B.x, an Arrow float64).
DIV_OF_DOUBLES = [
    "sqrt(B.x) DIV 2",
    "exp(-B.x * 100) DIV 2",
    "7 DIV sqrt(B.x)",
    "1e0 DIV 2",
    "CAST(B.x AS DOUBLE) DIV 2",
    "B.x DIV 2",
    "B.x DIV 2.0",
]


@pytest.mark.parametrize("measure", DIV_OF_DOUBLES)
def test_div_of_a_double_is_refused_as_spark_refuses_it(measure) -> None:
    """Was a truncated quotient (``B.x DIV 2`` -4, ``1e0 DIV 2`` 0), or for NaN an error at the operation."""
    error = lead_measure_error(measure, "E0235", "DIV takes integers and DECIMALs")
    assert error.span.line == 1 and error.span.column > 1


def test_div_of_decimals_truncates_the_exact_quotient() -> None:
    """n DIV 10^11, n = 922337203685477580 * 10^11 + (10^11 - 1): by hand the quotient is 922337203685477580
    and the remainder 10^11 - 1, so truncated toward zero it is 922337203685477580 (-922337203685477580 for
    -n). A quotient rounded to Decimal's 28 digits first (922337203685477580.99999999999 has 29) gave ...581."""
    query = cep.compile("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES A.x DIV A.y AS v PATTERN (A))")
    n = 922337203685477580 * 10**11 + 10**11 - 1
    for x, y, quotient in ((n, 10**11, 922337203685477580), (-n, 10**11, -922337203685477580)):
        assert query.run([{"id": 1, "x": Decimal(x), "y": Decimal(y)}])[0]["v"] == quotient


def test_div_of_a_double_whose_type_only_its_value_tells_is_refused_at_it() -> None:
    """Rows of Python values have no declared types: the float is refused where DIV meets it (E0410, the row
    said), not truncated (-8.0 DIV 3 was -2)."""
    query = cep.compile("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES A.x DIV 3 AS v PATTERN (A))")
    with pytest.raises(cep.CepError) as caught:
        query.run([{"id": 1, "x": -8.0}])
    assert caught.value.code == "E0410" and "DIV takes integers and DECIMALs" in caught.value.message
    assert query.run([{"id": 1, "x": -8}])[0]["v"] == -2


# A CAST to a DECIMAL too narrow for the value's integer digits, before or after rounding half up: Spark 4.2's
# NUMERIC_VALUE_OUT_OF_RANGE in ANSI mode (``test_spark_fails_each_decimal_overflow``); it was the wider value.
DECIMAL_OVERFLOWS = [
    "CAST(B.x * 1e10 AS DECIMAL(5,2))",
    "CAST(B.x AS DECIMAL(3,3))",
    "CAST(B.x - 991.995 AS DECIMAL(5,2))",
    "CAST(B.x * 1e10 AS DECIMAL)",
]


@pytest.mark.parametrize("measure", DECIMAL_OVERFLOWS)
def test_a_cast_past_a_decimals_digits_is_an_error_as_on_spark(measure) -> None:
    lead_measure_error(measure, "E0410", "cannot be represented as DECIMAL")


@pytest.mark.spark
def test_spark_fails_each_decimal_overflow(spark) -> None:
    """Each DECIMAL_OVERFLOWS measure over B.x = -8.0 (a literal, which Spark folds, so no job runs)."""
    for measure in DECIMAL_OVERFLOWS:
        with pytest.raises(Exception, match="NUMERIC_VALUE_OUT_OF_RANGE"):
            spark.sql(f"SELECT {measure.replace('B.x', 'CAST(-8.0 AS DOUBLE)')}").collect()


def test_the_spark_engine_refuses_div_of_a_double_column_before_shipping_the_clause() -> None:
    """The Spark engine types the output on the driver (``plan.output_types`` of the input's Spark types): the
    refusal is made there, with its caret, not in an executor, whose error lost its place in the query."""
    query = cep.compile("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES A.x DIV 3 AS v PATTERN (A))")
    with pytest.raises(cep.CepError) as caught:
        query.plan.output_types({"id": "INTEGER", "x": "DOUBLE"})
    assert caught.value.code == "E0235" and (caught.value.span.line, caught.value.span.column) == (1, 55)
    assert query.plan.output_types({"id": "INTEGER", "x": "DECIMAL(5,1)"})[-1] == ("v", "BIGINT")


@pytest.mark.spark
def test_spark_refuses_div_of_a_double(spark) -> None:
    """Each DIV_OF_DOUBLES measure, B.x as a DOUBLE column, is Spark's analysis error (no job runs)."""
    from pyspark.errors import AnalysisException

    spark.createDataFrame([(LEAD_ROWS[1],)], "x DOUBLE").createOrReplaceTempView("cf_div")
    for measure in DIV_OF_DOUBLES:
        with pytest.raises(AnalysisException, match="DATATYPE_MISMATCH"):
            spark.sql(f"SELECT {measure.replace('B.x', 'x')} FROM cf_div")


# Measures over a variable that matched no row, and Spark's types of them (its rules, for any value: INT + INT is
# an INT, an INT times a DOUBLE a DOUBLE, a SMALLINT column read as it is a SMALLINT, NOT a BOOLEAN, a STRING's
# upper() a STRING; as ``SELECT i + 1, ... FROM`` a view of these columns types them on Spark 4.2).
NULL_MEASURES = {
    "B.i + 1": "int",
    "B.i * B.x": "double",
    "B.s": "smallint",
    "NOT B.ok": "boolean",
    "upper(B.name)": "string",
    "CAST(B.i AS DECIMAL(5,1))": "decimal(5,1)",
}


@pytest.mark.parametrize("how", ["statement", "query"])
def test_a_measure_of_nulls_alone_has_sparks_type(how) -> None:
    """``B`` never matches, so each measure is NULL in every row: Arrow gives such a column no type (null), and
    the SQL around the clause then typed ``B.i + 1`` as nothing (an INTEGER measure was missing from the integer
    types), and ``cep.compile(...).run(table)`` typed no such column at all."""
    table = pa.table(
        {
            "ts": pa.array([1, 2], pa.int32()),
            "i": pa.array([1, 2], pa.int32()),
            "x": pa.array([1.5, 2.5]),
            "s": pa.array([1, 2], pa.int16()),
            "ok": pa.array([True, False]),
            "name": pa.array(["a", "b"]),
        }
    )
    measures = ", ".join(f"{expr} AS m{n}" for n, expr in enumerate(NULL_MEASURES))
    clause = f"MATCH_RECOGNIZE (ORDER BY ts MEASURES {measures} ONE ROW PER MATCH PATTERN (A B?) DEFINE B AS false)"
    if how == "statement":
        out = cep.compile_sql(f"SELECT * FROM t {clause} r").run({"t": table})
    else:
        out = cep.compile(f"SELECT * FROM t {clause}").run(table)
    for n, type_name in enumerate(NULL_MEASURES.values()):
        assert out.column(f"m{n}").to_pylist() == [None, None]
        assert spark_name_of_arrow(out.schema.field(f"m{n}").type) == type_name, list(NULL_MEASURES)[n]


@pytest.mark.spark
def test_spark_types_each_null_measure_so(spark) -> None:
    """NULL_MEASURES' types, from Spark's analyser over a view of those columns (no job runs)."""
    spark.createDataFrame([], "i INT, x DOUBLE, s SMALLINT, ok BOOLEAN, name STRING").createOrReplaceTempView(
        "cf_nulls"
    )
    columns = ", ".join(expr.replace("B.", "") for expr in NULL_MEASURES)
    found = [field.dataType.simpleString() for field in spark.sql(f"SELECT {columns} FROM cf_nulls").schema.fields]
    assert found == list(NULL_MEASURES.values())


@pytest.mark.parametrize(
    ("arrow_type", "spark_type"),
    [(pa.timestamp("us"), "timestamp"), (pa.float64(), "double"), (pa.int64(), "bigint"), (pa.int32(), "int")],
)
def test_a_column_of_nulls_alone_keeps_its_type_through_the_clause(arrow_type, spark_type) -> None:
    """An input column whose rows are all NULL comes out of ALL ROWS PER MATCH with its own type, as Spark's does
    (the input's type, by construction): typing NULL-only DOUBLE outputs once made a TIMESTAMP one a DOUBLE, and
    the SQL around the clause then refused `ts < make_timestamp(...)` (found by the differential test)."""
    table = pa.table({"id": pa.array([1, 2], pa.int32()), "v": pa.array([None, None], arrow_type)})
    text = "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id ALL ROWS PER MATCH PATTERN (A+) DEFINE A AS true) r"
    out = cep.compile_sql(text).run({"t": table})
    assert spark_name_of_arrow(out.schema.field("v").type) == spark_type
    assert out.column("v").to_pylist() == [None, None]
