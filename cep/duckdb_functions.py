"""Spark functions whose DuckDB form, as sqlglot writes it, means something else: Spark's meaning in DuckDB
SQL, or a refusal (part of the translation in cep/duckdb_sql.py; docs/sql-statements.md lists the rules)."""

from __future__ import annotations

from cep.duckdb_arrays import array_meaning
from cep.duckdb_make import make_timestamp
from cep.duckdb_nodes import (
    FRACTIONAL,
    INTEGRAL,
    TEXT_TYPES,
    TIME_TYPES,
    Refusal,
    call_duck,
    epoch_seconds,
    fail_with,
    foldable,
    place_of,
    spark_reads_as_time,
    text_to_time,
    type_of,
)
from cep.duckdb_typeof import SPARK_TYPEOF, spark_simple_string
from cep.duckdb_years import date_of_unix_day, spark_time_text

# Imported inside functions: sqlglot (heavy; `cep check` of a single clause needs none of it).

# EXTRACT's fields that DuckDB reads as Spark does (DOW and SECOND are translated; others are refused).
_EXTRACT_FIELDS = frozenset({"YEAR", "QUARTER", "MONTH", "WEEK", "DAY", "DOY", "HOUR", "MINUTE"})


# The largest DST shift in the time zone database (Antarctica/Troll's), and the smaller ones: the offsets
# tried, largest first, to find the earlier of two instants with the same local time.
_DST_SHIFTS_MINUTES = (120, 60, 30)


NUMBERS = (*INTEGRAL, *FRACTIONAL, "INTEGER")
COMPARISONS = ("EQ", "NEQ", "LT", "LTE", "GT", "GTE", "NullSafeEQ", "NullSafeNEQ")


def spark_meaning(node, types: dict[int, str]):
    """Functions whose DuckDB form, as sqlglot writes it, means something else than Spark's: Spark's form,
    a Refusal, or None (the node as it is)."""
    from sqlglot import exp

    if isinstance(node, exp.Extract):
        return _extract(node)
    library = _library_meaning(node, types)
    if library is not None:
        return library
    arrays = array_meaning(node, types)
    if arrays is not None:
        return arrays
    if isinstance(node, exp.TimestampFromParts):
        return make_timestamp(node)
    if isinstance(node, exp.AnyValue):  # Spark's any_value keeps a NULL (DuckDB's skips it): first()'s meaning
        return call_duck("first", node.this.copy())
    if node.meta.get(NEVER_NULL):
        return _never_null_unevaluated(node)
    if isinstance(node, (exp.Ln, exp.Log)):  # Spark: NULL for a value (or base) of 0 or below (DuckDB: -inf, NaN)
        operands = [node.this] if isinstance(node, exp.Ln) else [node.this, node.expression]
        below = [exp.LTE(this=exp.Paren(this=side.copy()), expression=exp.Literal.number(0)) for side in operands]
        return exp.Case(ifs=[exp.If(this=exp.or_(*below), true=exp.Null())], default=node.copy())
    if isinstance(node, (exp.Add, exp.Sub)) and _days_added_to_a_date(node, types):
        # Spark's DATE + n (date_add): an INT of days, which DuckDB adds only as an INTEGER (not a BIGINT).
        new = node.copy()
        key = "expression" if type_of(node.this, types) == "DATE" else "this"
        new.set(key, exp.Cast(this=node.args[key].copy(), to=exp.DataType.build("INT")))
        return new
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Neg)) and _int_arithmetic(node, types):
        return _checked_int(node)
    if isinstance(node, (exp.TimestampDiff, exp.DateDiff)) and node.args.get("unit") is not None:
        return _whole_units_between(node)
    if isinstance(node, (exp.Left, exp.Right)):  # Spark: '' for a length below 1 (DuckDB counts from the end)
        positive = exp.GT(this=exp.Paren(this=node.expression.copy()), expression=exp.Literal.number(0))
        empty = node.copy()  # '' of a length below 1; NULL of a NULL text or length
        empty.set("expression", exp.Mul(this=exp.Paren(this=node.expression.copy()), expression=exp.Literal.number(0)))
        return exp.Case(ifs=[exp.If(this=positive, true=node.copy())], default=empty)
    if isinstance(node, exp.SplitPart):  # Spark: part 0 is an error (DuckDB: '')
        zero = exp.EQ(this=exp.Paren(this=node.args["part_index"].copy()), expression=exp.Literal.number(0))
        failed = fail_with("SPLIT_PART's part number must not be 0", place_of(node), "VARCHAR")
        return exp.Case(ifs=[exp.If(this=zero, true=failed)], default=node.copy())
    if isinstance(node, exp.UnixSeconds):  # rounded down, as Spark does (sqlglot's cast of epoch() rounds)
        return epoch_seconds(node.this.copy())
    if isinstance(node, exp.UnixMillis):
        return epoch_seconds(node.this.copy(), per_second=1000)
    if isinstance(node, (exp.ArgMin, exp.ArgMax)):  # Spark's min_by keeps a NULL value; DuckDB's arg_min skips it
        name = "arg_min_null" if isinstance(node, exp.ArgMin) else "arg_max_null"
        if node.args.get("count") is not None:
            raise Refusal(f"the python engine runs {name[:7].upper()}_BY only with two arguments", *place_of(node))
        return call_duck(name, node.this.copy(), node.expression.copy())
    if (
        isinstance(node, exp.Median)
        or isinstance(node, exp.WithinGroup)
        and isinstance(node.this, (exp.PercentileCont, exp.PercentileDisc))
    ):  # Spark's MEDIAN, PERCENTILE_CONT and PERCENTILE_DISC are DOUBLEs (DuckDB keeps an integer or DECIMAL)
        return _double(node, node)
    if isinstance(node, exp.Sub) and type_of(node.this, types) == type_of(node.expression, types) == "DATE":
        # Spark's DATE - DATE is an INTERVAL DAY (so ROUND(d1 - d2) is refused, as Oracle's number of days is not
        # Spark's); DuckDB's is a number of days.
        return call_duck("to_days", exp.Cast(this=node.copy(), to=exp.DataType.build("INTEGER")))
    if isinstance(node, (exp.Add, exp.Sub)) and _whole_days_from_date(node, types):
        return exp.Cast(this=node.copy(), to=exp.DataType.build("DATE"))
    if isinstance(node, exp.Length) and _is_time(node.this, types):  # its text's, written alike; DuckDB has none
        return exp.Length(this=exp.Cast(this=node.this.copy(), to=exp.DataType.build("VARCHAR")))
    if isinstance(node, exp.IsNan):  # Spark's isnan(NULL) is FALSE (DuckDB's: NULL)
        return exp.Coalesce(this=node.copy(), expressions=[exp.false()])
    if isinstance(node, exp.Sign):
        return _java_signum(node)
    if isinstance(node, exp.DateFromUnixDate):  # a DATE, not sqlglot's DATE + INTERVAL (a TIMESTAMP)
        return date_of_unix_day(node)
    if isinstance(node, exp.Format):  # sqlglot writes DuckDB's format(), whose {} placeholders leave '%s' as text
        raise Refusal(
            "the python engine cannot run FORMAT_STRING as Spark does (Java's %s and %d specifiers)", *place_of(node)
        )
    if isinstance(node, exp.MonthsBetween):
        raise Refusal(
            "the python engine cannot run MONTHS_BETWEEN as Spark does (Spark counts the time of day and rounds "
            "to 8 digits)",
            *place_of(node),
        )
    if isinstance(node, exp.ApproxQuantile):
        raise Refusal(
            "the python engine cannot run PERCENTILE_APPROX as Spark does (another algorithm)", *place_of(node)
        )
    if isinstance(node, exp.Quantile):  # Spark's percentile interpolates (DuckDB's quantile picks a value)
        if not (isinstance(node.args.get("quantile"), exp.Literal) and node.args["quantile"].is_number):
            raise Refusal(
                "the python engine runs PERCENTILE only with one fraction written as a number", *place_of(node)
            )
        return _double(node, call_duck("quantile_cont", node.this.copy(), node.args["quantile"].copy()))
    if isinstance(node, exp.Window) and node.this.meta.get(_DOUBLE_OVER_A_WINDOW):
        return exp.Cast(this=_without_constant_partitions(node), to=exp.DataType.build("DOUBLE"))
    if isinstance(node, exp.Window) and any(foldable(key) for key in node.args.get("partition_by") or ()):
        return _without_constant_partitions(node)
    if isinstance(node, exp.AtTimeZone):  # Spark's from_utc_timestamp: the UTC instant's local time
        zone = node.args["zone"].copy()
        return call_duck("timezone", zone, call_duck("timezone", exp.Literal.string("UTC"), node.this.copy()))
    if isinstance(node, exp.FromTimeZone):
        return _to_utc(node)
    if isinstance(node, (exp.Concat, exp.DPipe, exp.ConcatWs)):
        operands = node.expressions if isinstance(node, (exp.Concat, exp.ConcatWs)) else [node.this, node.expression]
        if any(type_of(operand, types) in ("DOUBLE", "FLOAT") for operand in operands):
            raise Refusal(
                "the python engine cannot write a DOUBLE as text as Spark does in a concatenation (Java's "
                "notation, 1.0E10); cast it to DECIMAL first",
                *place_of(node),
            )
        return _times_as_spark_text(node, operands, types)
    if type(node).__name__ in COMPARISONS:
        return _text_comparison(node, types)
    if isinstance(node, (exp.Between, exp.In)):
        return _times_beside_literals(node, types)
    if isinstance(node, exp.Coalesce):
        return _coalesced_time_literals(node, types)
    if isinstance(node, (exp.Upper, exp.Lower, exp.Initcap)) or (
        isinstance(node, exp.Reverse) and type_of(node.this, types) in (None, *TEXT_TYPES)
    ):
        return _java_text(node)
    return None


def _times_as_spark_text(node, operands: list, types: dict[int, str]):
    """A concatenation with its DATE and TIMESTAMP operands written as Spark's CAST writes them (the years
    outside 1-9999 too: +10183-09-21), not as DuckDB's implicit cast does; None when it has none."""
    timed = [index for index, operand in enumerate(operands) if type_of(operand, types) in ("DATE", *TIME_TYPES)]
    if not timed:
        return None
    new = node.copy()
    copied = [new.this, new.expression] if len(operands) == 2 and operands[0] is node.this else new.expressions
    for index in timed:
        copied[index].replace(spark_time_text(copied[index].copy()))
    return new


def _java_signum(node):
    """Spark's sign (signum): a DOUBLE, whatever the argument; Java's signum keeps -0.0 and NaN as they are
    (DuckDB's sign gives 0 for both)."""
    from sqlglot import exp

    value = exp.Cast(this=node.this.copy(), to=exp.DataType.build("DOUBLE"))
    kept = exp.or_(call_duck("isnan", value.copy()), exp.EQ(this=value.copy(), expression=exp.Literal.number(0)))
    signed = exp.Cast(this=call_duck("sign", value.copy()), to=exp.DataType.build("DOUBLE"))
    return exp.Case(ifs=[exp.If(this=kept, true=value)], default=signed)


# Spark functions DuckDB has under the same name with another meaning, refused wherever they stand: why.
_REFUSED_FUNCTIONS = {
    "BitwiseLeftShift": "SHIFTLEFT (Spark shifts a 32-bit INT in Java's way: it wraps, and takes the shift "
    "modulo 32; DuckDB fails)",
    "BitwiseRightShift": "SHIFTRIGHT (Spark shifts in Java's way, the shift taken modulo the width)",
    "Skewness": "SKEWNESS (Spark's is the population skewness, DuckDB's the sample one)",
    "Kurtosis": "KURTOSIS (Spark's is the population excess kurtosis, DuckDB's the sample one)",
}
# Spark's three-letter names of days and months (dayname, monthname), as DuckDB's strftime writes them.
_SHORT_NAMES = {"Dayname": "%a", "Monthname": "%b"}


def _positive_number(node) -> bool:
    from sqlglot import exp

    return isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit() and int(node.this) >= 1


def _library_meaning(node, types: dict[int, str]):
    """Spark's string, date and numeric library functions whose DuckDB namesakes mean something else:
    Spark's meaning, a Refusal, or None."""
    from sqlglot import exp

    name = type(node).__name__
    if name in _REFUSED_FUNCTIONS:
        raise Refusal(f"the python engine cannot run {_REFUSED_FUNCTIONS[name]}", *place_of(node))
    if isinstance(node, exp.RegexpSplit) and node.args.get("limit") is not None:
        raise Refusal("the python engine runs SPLIT only without a limit (DuckDB has none)", *place_of(node))
    if isinstance(node, exp.Overlay) and not _positive_number(node.args.get("from_")):
        # Spark's FROM below 1 counts from the text's end (its substring's rule); DuckDB's keeps the whole text
        raise Refusal(
            "the python engine runs OVERLAY only FROM a position of 1 or more, written as a number", *place_of(node)
        )
    if isinstance(node, exp.Chr):  # Spark: '' below 0, else the character of the code modulo 256
        code = node.expressions[0] if node.expressions else None
        if code is None or len(node.expressions) > 1 or type_of(code, types) not in INTEGRAL:
            raise Refusal("the python engine runs CHR only of an integer", *place_of(node))
        negative = exp.LT(this=exp.Paren(this=code.copy()), expression=exp.Literal.number(0))
        low_byte = exp.BitwiseAnd(this=exp.Paren(this=code.copy()), expression=exp.Literal.number(255))
        return exp.Case(
            ifs=[exp.If(this=negative, true=exp.Literal.string(""))],
            default=call_duck("chr", exp.Cast(this=low_byte, to=exp.DataType.build("INTEGER"))),
        )
    if name in _SHORT_NAMES:  # Spark: 'Sun', 'Mar' (DuckDB: 'Sunday', 'March')
        if type_of(node.this, types) not in ("DATE", *TIME_TYPES):
            raise Refusal(f"the python engine runs {name.upper()} only of a DATE or TIMESTAMP", *place_of(node))
        return call_duck("strftime", node.this.copy(), exp.Literal.string(_SHORT_NAMES[name]))
    if isinstance(node, (exp.Corr, exp.RegrSlope, exp.RegrIntercept)):
        return _null_over_no_variance(node)
    if isinstance(node, exp.ToBase64):  # of text: its UTF-8 bytes (DuckDB's to_base64 takes a BLOB only)
        if type_of(node.this, types) not in TEXT_TYPES:
            raise Refusal("the python engine runs BASE64 only of text", *place_of(node))
        return call_duck("to_base64", call_duck("encode", node.this.copy()))
    return None


def _null_over_no_variance(node):
    """REGR_SLOPE(y, x), REGR_INTERCEPT(y, x): NULL where the pairs' x does not vary, as Spark's division
    gives (DuckDB's is NaN); CORR(y, x): NULL for fewer than two pairs, and where x or y does not vary
    Spark's division by zero (ANSI mode). The pairs are the rows where neither is NULL."""
    from sqlglot import exp

    if isinstance(node.parent, (exp.Window, exp.Filter)):
        raise Refusal(
            f"the python engine runs {type(node).__name__.upper()} only as a plain aggregate (no OVER or FILTER)",
            *place_of(node),
        )
    y, x = node.this, node.expression
    both = exp.and_(
        exp.Not(this=exp.Is(this=y.copy(), expression=exp.Null())),
        exp.Not(this=exp.Is(this=x.copy(), expression=exp.Null())),
    )

    def no_variance(side):
        paired = exp.Case(ifs=[exp.If(this=both.copy(), true=side.copy())])
        return exp.EQ(this=exp.VariancePop(this=paired), expression=exp.Literal.number(0))

    if not isinstance(node, exp.Corr):
        return exp.Case(ifs=[exp.If(this=no_variance(x), true=exp.Null())], default=node.copy())
    pairs = exp.Count(this=exp.Case(ifs=[exp.If(this=both.copy(), true=exp.Literal.number(1))]))
    failed = fail_with("division by zero (CORR of a value that does not vary)", place_of(node), "DOUBLE")
    return exp.Case(
        ifs=[
            exp.If(this=exp.LT(this=pairs, expression=exp.Literal.number(2)), true=exp.Null()),
            exp.If(this=exp.or_(no_variance(x), no_variance(y)), true=failed),
        ],
        default=node.copy(),
    )


_DOUBLE_OVER_A_WINDOW = "cep_double_over_a_window"  # the meta key of an aggregate whose window is cast
NEVER_NULL = "cep_never_null"  # the meta key of a COUNT whose argument Spark knows is never NULL


COMPUTED_KEY = "cep_computed_key"  # the meta key of a window with a constant PARTITION BY key Spark may compute


def mark_computed_partition_keys(tree) -> None:
    """Mark each window with a constant PARTITION BY key made of more than the parts Spark is known to drop
    unevaluated (``_DROPPED_KEY_PARTS``), read on the statement before it is translated: the key's place."""
    from sqlglot import exp

    for window in tree.find_all(exp.Window):
        for key in window.args.get("partition_by") or ():
            if foldable(key) and any(type(part).__name__ not in _DROPPED_KEY_PARTS for part in key.walk()):
                window.meta[COMPUTED_KEY] = place_of(key)


def mark_counts_of_values_never_null(tree) -> None:
    """Mark each COUNT (not DISTINCT), IS NULL and NVL2 whose argument Spark's analyser types as never NULL, read on the
    statement before it is translated (the translation of the argument brings NULL branches of its own)."""
    from sqlglot import exp

    for count in tree.find_all(exp.Count):
        argument = count.this
        if argument is not None and not isinstance(argument, (exp.Star, exp.Distinct)) and _never_null(argument):
            count.meta[NEVER_NULL] = True
    for test in tree.find_all(exp.Is):  # `e IS NULL` of such an argument: FALSE, unevaluated, as in Spark
        if isinstance(test.expression, exp.Null) and _never_null(test.this):
            test.meta[NEVER_NULL] = True
    for choice in tree.find_all(exp.Nvl2):  # nvl2(e, a, b) of such an `e`: `a`, `e` unevaluated, as in Spark
        if _never_null(choice.this):
            choice.meta[NEVER_NULL] = True


def _never_null_unevaluated(node):
    """A COUNT, IS NULL or NVL2 marked by ``mark_counts_of_values_never_null``, without its argument evaluated,
    as Spark's NullPropagation rule leaves it."""
    from sqlglot import exp

    if isinstance(node, exp.Is):
        return exp.false()
    if isinstance(node, exp.Nvl2):  # the test TRUE: the result's type stays the common one
        chosen = node.copy()
        chosen.set("this", exp.true())
        return chosen
    # COUNT: the rows, so an argument that would fail (make_timestamp(2021, 3, 28, 40, 0, 0)) does not
    counted = node.copy()
    counted.set("this", exp.Star())
    return counted


def _never_null(node) -> bool:
    """Whether Spark (ANSI mode) deems ``node`` never NULL without evaluating it: a literal that is not NULL,
    and the operations that are NULL only when an operand is (arithmetic but division, make_timestamp), or
    COALESCE with such an operand. Anything else (columns, divisions, casts: Spark deems a cast of text
    nullable, other functions) counts as nullable, so the rule errs towards evaluating the argument, as
    Spark then does too."""
    from sqlglot import exp

    if isinstance(node, exp.Paren):
        return _never_null(node.this)
    if isinstance(node, exp.Literal) or isinstance(node, exp.Boolean):
        return True
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul)):
        return _never_null(node.this) and _never_null(node.expression)
    if isinstance(node, exp.Neg):
        return _never_null(node.this)
    if isinstance(node, exp.TimestampFromParts):
        return all(_never_null(part) for key, part in node.args.items() if part is not None and key != "zone")
    if type(node) is exp.Cast and isinstance(node.this, exp.Literal) and node.this.is_string:
        return node.to.is_type("date", "timestamp", "timestamptz")  # DATE '...', TIMESTAMP '...': Spark's literals
    if isinstance(node, exp.Interval):  # INTERVAL 1 HOUR
        return isinstance(node.this, exp.Literal)
    if isinstance(node, exp.TsOrDsToDate) and node.args.get("format") is not None:
        return False  # to_date(s, pattern): nullable on Spark
    if type(node).__name__ in _NULL_INTOLERANT_TIMES:
        operands = [part for key, part in node.args.items() if key != "unit" and isinstance(part, exp.Expression)]
        return all(_never_null(part) and not _is_text_literal(part) for part in operands)
    if isinstance(node, exp.Coalesce):
        return any(_never_null(part) for part in (node.this, *node.expressions))
    return False


# Spark's expressions over times that are NULL only where an operand is (NullIntolerant, nullable as their
# operands), so Spark's NullPropagation counts them unevaluated when their operands are never NULL
# (count(datediff(MINUTE, make_timestamp(2020, 7, 35, 1, 1, 1), TIMESTAMP '2021-01-01 00:00:00')) is the count
# of rows on Spark, the invalid day never computed); checked one by one against Spark in
# tests/test_sql_spark_library.py. Not DATE_TRUNC: Spark deems it nullable, and evaluates it.
_NULL_INTOLERANT_TIMES = frozenset(
    ("DateDiff", "TimestampDiff", "TimestampAdd", "TsOrDsToDate", "Year", "Month", "Hour")
    + ("GT", "GTE", "LT", "LTE", "EQ", "NEQ")
)


def _is_text_literal(node) -> bool:
    """Text Spark would cast to a time first: its cast may be nullable, so such an operand is left to run."""
    from sqlglot import exp

    return isinstance(node, exp.Literal) and node.is_string


def _double(node, new):
    """``new`` (the translation of the aggregate ``node``) as a DOUBLE: cast, or marked for its window to be
    cast (DuckDB refuses ``CAST(median(x)) OVER ()``)."""
    from sqlglot import exp

    if isinstance(node.parent, exp.Window):
        new.meta[_DOUBLE_OVER_A_WINDOW] = True
        return new
    return exp.Cast(this=new.copy() if new is node else new, to=exp.DataType.build("DOUBLE"))


def _whole_days_from_date(node, types: dict[int, str]) -> bool:
    """A DATE plus or minus an interval of days, months or years: a DATE in Spark (DuckDB: a TIMESTAMP)."""
    from sqlglot import exp

    interval = node.expression
    return (
        isinstance(interval, exp.Interval)
        and type_of(node.this, types) == "DATE"
        and interval.unit is not None
        and interval.unit.name.upper().rstrip("S") in ("DAY", "WEEK", "MONTH", "YEAR")
    )


def _days_added_to_a_date(node, types: dict[int, str]) -> bool:
    """DATE + an INT, an INT + DATE, DATE - an INT (Spark refuses a BIGINT of days, as DuckDB does)."""
    from sqlglot import exp

    days = ("TINYINT", "SMALLINT", "INT")
    left, right = type_of(node.this, types), type_of(node.expression, types)
    if left == "DATE" and right in days:
        return True
    return isinstance(node, exp.Add) and right == "DATE" and left in days


def _int_arithmetic(node, types: dict[int, str]) -> bool:
    """Whether Spark's ``node`` (+, -, *, unary -) is an INT, whose overflow is an error (DuckDB may compute
    it wider): INTs, or an INT with a narrower integer (sqlglot calls Spark's INT year() a TINYINT)."""
    kinds = {type_of(side, types) for side in (node.this, node.args.get("expression") or node.this)}
    return "INT" in kinds and kinds <= {"TINYINT", "SMALLINT", "INT"}


_INT_RANGE = (-(2**31), 2**31 - 1)  # Spark's INT


def _checked_int(node):
    """``node`` computed as a BIGINT, then an INT, its overflow Spark's ANSI error at its place. Only the
    outermost of nested INT arithmetic gets this check (it repeats its operand: checking each level so would
    grow the text exponentially); the steps inside stay DuckDB's INT arithmetic, which fails on an overflow
    itself (DuckDB's "Overflow in addition of INT32", said as Spark's), so an overflow that a later step
    would undo fails, as on Spark."""
    from sqlglot import exp

    outer = node.parent
    while isinstance(outer, exp.Paren):
        outer = outer.parent
    if isinstance(outer, (exp.Add, exp.Sub, exp.Mul, exp.Neg)):
        return node
    wide = node.copy()
    wide.set("this", exp.Cast(this=node.this.copy(), to=exp.DataType.build("BIGINT")))
    within = exp.Between(
        this=wide.copy(), low=exp.Literal.number(_INT_RANGE[0]), high=exp.Literal.number(_INT_RANGE[1])
    )
    return exp.Case(
        ifs=[
            exp.If(this=exp.Is(this=wide.copy(), expression=exp.Null()), true=exp.Null()),
            exp.If(this=within, true=exp.Cast(this=wide, to=exp.DataType.build("INT"))),
        ],
        default=fail_with("integer overflow: the result does not fit an INT", place_of(node), "INT"),
    )


_DIFF_UNITS = frozenset(
    {"MICROSECOND", "MILLISECOND", "SECOND", "MINUTE", "HOUR", "DAY", "WEEK", "MONTH", "QUARTER", "YEAR"}
)


def _whole_units_between(node):
    """Spark's timestampdiff(unit, a, b) and datediff(unit, a, b): the whole units from a to b, time of day
    included (DuckDB's date_sub; sqlglot writes date_diff, which counts the boundaries crossed, and casts
    datediff's operands to DATEs)."""
    from sqlglot import exp

    unit = node.args["unit"].name.upper().rstrip("S")
    if unit not in _DIFF_UNITS:
        raise Refusal(f"the python engine cannot count {unit} units between two times as Spark does", *place_of(node))
    start, end = node.expression, node.this
    if isinstance(node, exp.DateDiff):  # sqlglot's operands are casts to DATE; Spark's are the timestamps
        start, end = (side.this if isinstance(side, exp.TsOrDsToDate) else side for side in (start, end))
    moments = [exp.Cast(this=side.copy(), to=exp.DataType.build("TIMESTAMP")) for side in (start, end)]
    return call_duck("date_sub", exp.Literal.string(unit.lower()), *moments)


def _extract(node):
    """Spark's EXTRACT: DOW counts from 1 = Sunday (DuckDB's from 0), SECOND is a DECIMAL(8, 6) with the
    fraction (DuckDB's an integer), the other fields an INT; a field not checked against Spark is refused."""
    from sqlglot import exp

    field = node.this.name.upper()
    integer = exp.DataType.build("INT")  # Spark's type; DuckDB's EXTRACT of a NULL it folded is a DOUBLE
    if field in ("DOW", "DAYOFWEEK"):
        return exp.Cast(this=exp.Add(this=exp.Paren(this=node.copy()), expression=exp.Literal.number(1)), to=integer)
    if field in ("SECOND", "SECONDS", "SEC", "SECS", "S"):
        micros = call_duck("microsecond", exp.Cast(this=node.expression.copy(), to=exp.DataType.build("TIMESTAMP")))
        exact = exp.Mul(
            this=exp.Cast(this=micros, to=exp.DataType.build("DECIMAL(18, 0)")),
            expression=exp.Cast(this=exp.Literal.string("0.000001"), to=exp.DataType.build("DECIMAL(7, 6)")),
        )
        return exp.Cast(this=exact, to=exp.DataType.build("DECIMAL(8, 6)"))
    if field not in _EXTRACT_FIELDS:
        raise Refusal(f"the python engine cannot run EXTRACT({field} FROM ...) as Spark does", *place_of(node))
    return exp.Cast(this=node.copy(), to=integer)


def _without_constant_partitions(window):
    """``window`` without the PARTITION BY keys Spark computes before running: its optimizer drops them
    unevaluated (they put every row in one partition), so one that would fail (``make_timestamp(2020, 30,
    ...)``) fails on neither engine."""
    if COMPUTED_KEY in window.meta:
        # Spark drops the keys it deems constant while analysing; a function it replaces later
        # (to_timestamp('abc')) is computed before running instead, and may fail there.
        raise Refusal(
            "the python engine cannot tell whether Spark computes this constant PARTITION BY key (it computes "
            "some constant functions before running, and fails on them; others it drops); partition by a column",
            *window.meta[COMPUTED_KEY],
        )
    new = window.copy()
    keys = [key for key in new.args.get("partition_by") or () if not foldable(key)]
    new.set("partition_by", keys or None)
    return new


# The parts of a constant PARTITION BY key Spark drops unevaluated (checked against Spark: a failing cast,
# division or make_timestamp in the key fails on neither engine).
_DROPPED_KEY_PARTS = frozenset(
    {
        "Literal",
        "Null",
        "Boolean",
        "Paren",
        "Cast",
        "TryCast",
        "DataType",
        "Add",
        "Sub",
        "Mul",
        "Div",
        "Mod",
        "Neg",
        "In",
        "EQ",
        "NEQ",
        "LT",
        "LTE",
        "GT",
        "GTE",
        "And",
        "Or",
        "Not",
        "TimestampFromParts",
        "Tuple",
    }
)


def _to_utc(node):
    """Spark's to_utc_timestamp(ts, zone): the instant whose local time in ``zone`` is ``ts``; of two (a
    local time the clocks pass twice), Java's earlier one, where DuckDB takes the later."""
    from sqlglot import exp

    local, zone = node.this, node.args["zone"]

    def instant(shift_minutes: int):
        moment = call_duck("timezone", zone.copy(), local.copy())
        if shift_minutes:
            shift = exp.Interval(this=exp.Literal.string(str(shift_minutes)), unit=exp.Var(this="MINUTE"))
            moment = exp.Sub(this=moment, expression=shift)
        return moment

    def same_local(shift_minutes: int):
        return exp.EQ(this=call_duck("timezone", zone.copy(), instant(shift_minutes)), expression=local.copy())

    chosen = exp.Case(
        ifs=[exp.If(this=same_local(shift), true=instant(shift)) for shift in _DST_SHIFTS_MINUTES],
        default=instant(0),
    )
    return call_duck("timezone", exp.Literal.string("UTC"), chosen)


def _text_comparison(node, types: dict[int, str]):
    """A DATE, TIMESTAMP or number compared with text that is not a literal: Spark converts one side by its
    own rules (DuckDB refuses the comparison, or casts the text and fails on 'abc'); refused. A literal
    beside a DATE or TIMESTAMP is Spark's cast of it (DuckDB's own cast refuses '2021' and reads 'infinity';
    Spark reads '2021', and its special values, 'yesterday'); beside a number it is cast alike on both."""
    from sqlglot import exp

    sides = (node.this, node.expression)
    kinds = [type_of(side, types) for side in sides]
    _refuse_a_boolean_beside_a_number(node, kinds)
    for key, side, kind, other in zip(("this", "expression"), sides, kinds, reversed(kinds)):
        is_literal = isinstance(side, exp.Literal) and side.is_string
        if kind in TEXT_TYPES and not is_literal and (other in ("DATE", *TIME_TYPES, *NUMBERS)):
            target = {"DATE": "DATE", **dict.fromkeys(TIME_TYPES, "TIMESTAMP")}.get(other, other)
            raise Refusal(
                f"the python engine cannot compare a {other} with text as Spark does (Spark converts by its "
                f"own rules); convert it yourself: CAST(text AS {target})",
                *place_of(node),
            )
        if is_literal and (other == "DATE" or other in TIME_TYPES):
            new = node.copy()
            new.set(key, literal_as_time(side, other))
            return new
    return None


def _refuse_a_boolean_beside_a_number(node, kinds: list) -> None:
    """Spark's type error where a BOOLEAN is compared with a number, DATE or TIMESTAMP (``=``, ``IN``,
    ``BETWEEN``): Spark finds no common type; DuckDB compares TRUE as 1, or casts."""
    other = next((kind for kind in kinds if kind in ("DATE", *TIME_TYPES, *NUMBERS)), None)
    if "BOOLEAN" in kinds and other is not None:
        raise Refusal(
            f"cannot compare a BOOLEAN with {'an' if other[0] in 'AEIOU' else 'a'} {other} (Spark's type rules "
            "do not allow it)",
            *place_of(node),
            spark_too=True,
        )


def literal_as_time(literal, kind: str):
    """Text literal ``literal`` as Spark casts it beside a DATE or TIMESTAMP ``kind`` (a comparison, BETWEEN,
    IN): Spark's reading of the text, its special values ('today') included."""
    target = "DATE" if kind == "DATE" else "TIMESTAMP"
    return text_to_time(literal.copy(), target, False, place_of(literal), foldable=True)


def _refuse_an_unreadable_listed_literal(node, kind: str) -> None:
    """``ts IN ('', '2021-03-28 01:30:00')``: Spark casts each text literal of the list before running and
    fails on one it cannot read; DuckDB's IN may drop the failing item beside one that matches. Inside a
    conditional branch (CASE, IF, COALESCE, AND, OR) Spark leaves the cast to run time, as the python engine
    does."""
    from sqlglot import exp

    target = "DATE" if kind == "DATE" else "TIMESTAMP"
    if node.find_ancestor(exp.Case, exp.If, exp.Coalesce, exp.Nvl2, exp.And, exp.Or) is not None:
        return
    for item in node.expressions:
        if isinstance(item, exp.Literal) and item.is_string and not spark_reads_as_time(item.this, target):
            raise Refusal(
                f"the text {item.this!r} cannot be cast to {target}: Spark casts a text literal in IN beside a "
                f"{target} before running, and fails",
                *place_of(item),
                spark_too=True,
            )


def _coalesced_time_literals(node, types: dict[int, str]):
    """``coalesce(d, '2021')``, ``nvl(ts, 'epoch')``: beside a DATE or TIMESTAMP, each text literal as Spark
    casts it (DuckDB's own cast refuses '2021' and 'today', and reads 'infinity'). Text that is not a
    literal beside another type (``nvl(s, 1)``): refused, as Spark converts it by its own rules (DuckDB
    refuses to mix the types)."""
    from sqlglot import exp

    parts = [node.this, *node.expressions]
    kinds = [type_of(part, types) for part in parts]
    other = next((k for k in kinds if k is not None and k not in TEXT_TYPES and k != "NULL"), None)
    literal = [isinstance(part, exp.Literal) and part.is_string for part in parts]
    computed_text = any(kind in TEXT_TYPES and not text for kind, text in zip(kinds, literal))
    if other is not None and computed_text:
        raise Refusal(
            f"the python engine cannot mix text with {'a TIMESTAMP' if other in TIME_TYPES else other} in "
            f"COALESCE or NVL as Spark does (Spark converts "
            f"the text by its own rules); cast the text yourself",
            *place_of(node),
        )
    kind = next((k for k in kinds if k == "DATE" or k in TIME_TYPES), None)
    if kind is None or not any(literal):
        return None
    first, *rest = (literal_as_time(part, kind) if text else part.copy() for part, text in zip(parts, literal))
    return exp.Coalesce(this=first, expressions=rest)


def _times_beside_literals(node, types: dict[int, str]):
    """``d BETWEEN 'a' AND 'b'`` and ``d IN ('a', 'b')`` of a DATE or TIMESTAMP ``d``: each text literal as
    Spark casts it (see ``_text_comparison``)."""
    from sqlglot import exp

    kind = type_of(node.this, types)
    if node.args.get("query") is None:
        operands = (node.args.get("low"), node.args.get("high")) if isinstance(node, exp.Between) else node.expressions
        _refuse_a_boolean_beside_a_number(node, [kind, *(type_of(operand, types) for operand in operands)])
    if not (kind == "DATE" or kind in TIME_TYPES):
        return None
    new = node.copy()
    if isinstance(node, exp.Between):
        for key in ("low", "high"):
            bound = node.args.get(key)
            if isinstance(bound, exp.Literal) and bound.is_string:
                new.set(key, literal_as_time(bound, kind))
        return new
    if node.args.get("query") is not None:
        return None
    _refuse_an_unreadable_listed_literal(node, kind)
    new.set(
        "expressions",
        [
            literal_as_time(item, kind) if isinstance(item, exp.Literal) and item.is_string else item.copy()
            for item in node.expressions
        ],
    )
    return new


def _java_text(node):
    """UPPER, LOWER, INITCAP and REVERSE: DuckDB's own for ASCII text; other text as Spark does, through Java's
    full case mapping (``ß`` upper is ``SS``, ``İ`` lower is ``i̇``), which DuckDB's simple mapping does not
    follow, and by code point (DuckDB reverses ``e`` + a combining accent as one character)."""
    from sqlglot import exp

    if isinstance(node, exp.Initcap) and not (
        node.expression is None or isinstance(node.expression, exp.Literal) and node.expression.this == " "
    ):
        raise Refusal("the python engine runs INITCAP only with Spark's word separator, a space", *place_of(node))
    name = {exp.Upper: "upper", exp.Lower: "lower", exp.Initcap: "initcap", exp.Reverse: "reverse"}[type(node)]
    ascii_only = call_duck("regexp_full_match", node.this.copy(), exp.Literal.string("[\\x00-\\x7f]*"))
    return exp.Case(
        ifs=[exp.If(this=ascii_only, true=node.copy())],
        default=call_duck(f"{JAVA_CASE_PREFIX}{name}", node.this.copy()),
    )


JAVA_CASE_PREFIX = "cep_java_"


def java_case_mappings() -> dict[str, object]:
    """The functions the translation calls for non-ASCII text (``register_functions`` gives them to DuckDB):
    Java's full case mappings, as Spark's UPPER, LOWER and INITCAP apply them, and REVERSE by code point."""

    def initcap(text: str) -> str:
        # Spark lower-cases the text, then title-cases the first letter of each word (words split at spaces).
        out, start = [], True
        for char in text.lower():
            out.append(char.title() if start else char)  # full title case, as Spark's: 'ß' becomes 'Ss'
            start = char == " "
        return "".join(out)

    def reverse(text: str) -> str:
        return text[::-1]

    return {"upper": str.upper, "lower": str.lower, "initcap": initcap, "reverse": reverse}


def calls_own_functions(translated: str) -> bool:
    """Whether DuckDB SQL ``translated`` calls a function ``register_functions`` gives the connection."""
    lowered = translated.lower()
    return JAVA_CASE_PREFIX in lowered or SPARK_TYPEOF in lowered


def register_functions(con) -> None:
    """Give DuckDB connection ``con`` the functions the translation calls by cep's own names."""
    for name, function in java_case_mappings().items():
        con.create_function(f"{JAVA_CASE_PREFIX}{name}", function, ["VARCHAR"], "VARCHAR", side_effects=False)
    con.create_function(SPARK_TYPEOF, spark_simple_string, ["VARCHAR"], "VARCHAR", side_effects=False)


# The functions and operators Spark 4.2 runs over a TIME value (checked on Spark in tests/test_sql_time_values.py):
# a cast to text, comparisons, concat, length, max, min, greatest, least, array, count, typeof. Any other (hour,
# minute, second, EXTRACT, coalesce, if, + INTERVAL, a date function) Spark refuses: "The data type TIME is not
# supported", or it cannot cast TIME(6) to the DATE or TIMESTAMP the function takes.
_TIME_TAKERS = ("Cast", "TryCast", "Concat", "Length", "Max", "Min", "Greatest", "Least", "Array", "Count", "Typeof")


def _is_time(node, types: dict[int, str]) -> bool:
    """Whether ``node`` is a TIME value (Spark 4.2's ``TIME '...'`` literal is a cast to TIME by then)."""
    from sqlglot import exp

    return isinstance(node, exp.Cast) and node.to.is_type("time") or type_of(node, types) == "TIME"


def time_values_spark_refuses(node, types: dict[int, str]) -> None:
    """Refusal (Spark's too) where ``node``, a function or arithmetic, takes a TIME value Spark 4.2 refuses
    there (the python engine's DuckDB has ``hour(TIME)`` and would answer)."""
    from sqlglot import exp

    arithmetic = isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.Neg))
    if not (isinstance(node, exp.Func) or arithmetic) or type(node).__name__ in _TIME_TAKERS:
        return
    for argument in node.iter_expressions():
        if _is_time(argument, types):
            name = node.sql_name() if isinstance(node, exp.Func) else "arithmetic"
            raise Refusal(
                f"Spark 4.2 does not run {name} of a TIME value (as on Spark: the data type TIME is not supported "
                "there); cast the TIME to STRING, or use a TIMESTAMP",
                *place_of(node),
                spark_too=True,
            )
