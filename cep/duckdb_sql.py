"""Spark SQL as DuckDB SQL, for the python engine: an exact translation, or a refusal before anything runs.

The SQL around MATCH_RECOGNIZE is Spark SQL on both engines (docs/sql-statements.md). The python engine
hands it to DuckDB after sqlglot translates it; sqlglot's Spark dialect, though, is Spark 3's non-ANSI one
(a CAST that fails is NULL) and its translation of Spark's datetime patterns is approximate. Where the two
engines would give different answers, this module either writes DuckDB SQL that gives Spark's (ANSI mode,
the setting of cep's sessions and Spark 4's default), or refuses with a ``Refusal`` that names the function
and says why, which ``cep/statement.py`` turns into a CepError at its place in the user's text:

- casts follow Spark's ANSI rules: a cast Spark does not allow is refused, an invalid value is an error
  (``TRY_CAST`` alone gives NULL), a fraction is truncated toward zero when cast to an integer (DuckDB
  rounds), a timestamp cast to a number is seconds since the epoch (a number cast to a timestamp is refused),
  text becomes a date or timestamp as Spark reads it, a DOUBLE becomes a DECIMAL through its shortest text,
  ``TIMESTAMP`` is a naive UTC timestamp (cep's times are UTC); a DOUBLE cast to text is refused (Java
  writes ``1.0E10``);
- ``round`` of a DOUBLE rounds half up on its shortest text, ``floor``/``ceil`` are BIGINTs, integer
  ``SUM`` and ``COUNT_IF`` BIGINTs, ``add_months``/``date_add``/``date_sub`` DATEs; ``AVG`` of a DECIMAL
  is refused (Spark's is an exact DECIMAL);
- division, remainder and ``DIV`` by zero are errors, as in Spark's ANSI mode (sqlglot writes NULL);
- ``DATE_FORMAT``, ``TO_CHAR``, ``TO_DATE``, ``TO_TIMESTAMP`` and ``UNIX_TIMESTAMP``: the pattern must be
  a literal, and every field must map exactly to DuckDB's strftime (``grammar/functions.duckdb_strftime``);
  ``TRUNC(date, 'MM')`` and ``DATE_TRUNC('MM', ts)`` with Spark's unit names;
- a function sqlglot does not know is refused (DuckDB may know a function of that name that means
  something else), and so is any construct sqlglot warns it cannot translate.

The rules that depend on a value's type (a cast, ``UNIX_TIMESTAMP(x)``) read it from sqlglot's type
annotation over the tables' schemas; when the type cannot be told, the translation is refused.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping

from cep.duckdb_arrays import empty_collections
from cep.duckdb_catalog import no_such_function, spark_functions_only, spark_separator
from cep.duckdb_column_names import name_unnamed_columns, refuse_unnamed_results
from cep.duckdb_decimals import (
    DECIMAL_META,
    decimal_arithmetic,
    decimal_readings,
    spark_decimal_arithmetic,
    spark_decimal_average,
    spark_decimal_functions,
    spark_decimal_sum,
)
from cep.duckdb_functions import (
    mark_computed_partition_keys,
    mark_counts_of_values_never_null,
    spark_meaning,
    time_values_spark_refuses,
)
from cep.duckdb_intervals import spark_interval
from cep.duckdb_literals import decimal_literals_as_sparks, negative_literals, text_literals_as_numbers
from cep.duckdb_make import make_date
from cep.duckdb_nodes import (
    FRACTIONAL,
    INTEGRAL,
    INTERVAL_FIELDS_META,
    TEXT_TYPES,
    TIME_TYPES,
    TYPED_META,
    Refusal,
    call_duck,
    check_typed_time_literals,
    epoch_seconds,
    fail_with,
    foldable,
    implicit_time_casts,
    java_trimmed,
    keep_places,
    place_of,
    text_to_boolean,
    text_to_fraction,
    text_to_time,
    type_of,
)
from cep.duckdb_regex import spark_regex
from cep.duckdb_try_arithmetic import try_arithmetic
from cep.duckdb_typeof import spark_typeof
from cep.duckdb_types import annotated_types
from cep.duckdb_widths import cast_to_width, int_literals_beside_narrow_integers, spark_width
from cep.duckdb_years import spark_time_text, written_with_years
from cep.grammar.functions import (
    DATETIME_PARSERS,
    DATETIME_PATTERN_ARGUMENT,
    PatternError,
    SparkRefusedPattern,
    duckdb_strftime,
)

# Imported inside functions: sqlglot and pyarrow (heavy; `cep check` of a single clause needs neither).

ENGINE_HINT = "Spark runs it: cep run --engine spark (or cep.sql(spark, text))"

# Spark's functions that this module translates itself: sqlglot's parser would turn their pattern into its
# own strftime approximation first, losing what was written.
OWN_FUNCTIONS = frozenset(
    {"DATE_FORMAT", "TO_CHAR", "TO_DATE", "TO_TIMESTAMP", "UNIX_TIMESTAMP", "TRUNC", "DATE_TRUNC", "FROM_UNIXTIME"}
)
# Spark's unit names for trunc (a date) and date_trunc (a timestamp), as DuckDB's date_trunc spells them;
# another unit gives NULL in Spark.
_TRUNC_UNITS = {
    "YEAR": "year",
    "YYYY": "year",
    "YY": "year",
    "QUARTER": "quarter",
    "MONTH": "month",
    "MM": "month",
    "MON": "month",
    "WEEK": "week",
}
_DATE_TRUNC_UNITS = {
    **_TRUNC_UNITS,
    "DAY": "day",
    "DD": "day",
    "HOUR": "hour",
    "MINUTE": "minute",
    "SECOND": "second",
    "MILLISECOND": "millisecond",
    "MICROSECOND": "microsecond",
}
# Spark's other names of OWN_FUNCTIONS (sqlglot reads to_unix_timestamp(ts) as a parse with no pattern).
_SYNONYMS = {"TO_UNIX_TIMESTAMP": "UNIX_TIMESTAMP"}
_SPARK_DEFAULT_PATTERN = "yyyy-MM-dd HH:mm:ss"
# A typed literal followed by :: (DATE '2021-03-28'::timestamp): Spark casts the DATE, sqlglot the text.
_TYPED_LITERAL_CAST = re.compile(r"\b(date|timestamp(?:_ntz|_ltz)?)\s*'(?:[^'\\]|\\.)*'\s*::", re.I)
# Spark's own functions translated here that cast a text value as its CAST does: the value's argument and type.
_TIME_VALUES = {"DATE_FORMAT": (0, "TIMESTAMP"), "TRUNC": (0, "DATE"), "DATE_TRUNC": (1, "TIMESTAMP")}


def to_duckdb_sql(
    text: str, schema: Mapping[str, Mapping[str, str]] | None = None, *, checking: bool = False, for_spark: bool = False
) -> str:
    """Spark SQL -> DuckDB SQL that gives Spark's answer, or Refusal. ``schema``: table name -> column ->
    Spark SQL type, for the rules that depend on a value's type. ``checking`` (`cep check`, no tables): the
    rules read only the types the statement fixes itself (literals, casts, expressions without a column),
    and a refusal for want of a type is left to the run; ``for_spark`` too: only what Spark refuses as well."""
    import sqlglot
    from sqlglot.errors import UnsupportedError

    typed_then_cast = _TYPED_LITERAL_CAST.search(text)
    if typed_then_cast is not None and not for_spark:
        raise Refusal(
            f"the python engine reads {typed_then_cast.group(1).upper()} '...'::type otherwise than Spark does "
            f"(sqlglot applies :: to the text first); write CAST({typed_then_cast.group(1).upper()} '...' AS type)",
            typed_then_cast.start(),
            typed_then_cast.end() - typed_then_cast.start(),
        )
    check_typed_time_literals(text)
    tree = sqlglot.parse_one(text, dialect=_spark_dialect())
    negative_literals(tree)
    types = annotated_types(tree, schema or {}, checking=checking)
    unnamed = name_unnamed_columns(tree, types, text)
    mark_counts_of_values_never_null(tree)
    mark_computed_partition_keys(tree)
    keep_places(tree)
    # Children first (a reversed pre-order walk), so that a rule sees its operands already translated.
    for node in reversed(list(tree.walk())):
        int_literals_beside_narrow_integers(node, types)
        try:
            time_values_spark_refuses(node, types)
            spark_decimal_functions(node, types)
            new = _translate(node, types)
        except Refusal as refusal:
            if checking and (refusal.untyped or for_spark and not refusal.spark_too):
                continue
            raise
        width = spark_width(node, types)
        if width is not None:
            new = cast_to_width(new.copy() if new is node else new, width)
        if new is not node:
            for key in (TYPED_META, DECIMAL_META):
                if key in node.meta and key not in new.meta:
                    new.meta[key] = node.meta[key]
            node.replace(new)
    if checking and not for_spark:  # `cep check`: the refusal the run gives when the result has such a column
        refuse_unnamed_results(tree, unnamed)
    decimal_literals_as_sparks(tree)
    empty_collections(tree)
    distinct_tuples_counted(tree)
    try:
        return tree.sql(dialect="duckdb", unsupported_level=sqlglot.ErrorLevel.RAISE)
    except UnsupportedError as exc:
        if for_spark:
            return ""
        raise Refusal(
            f"the python engine cannot translate this statement to DuckDB exactly: {exc}", *_untranslatable_place(tree)
        ) from None


def _untranslatable_place(tree) -> tuple[int | None, int]:
    """The place of the smallest part of ``tree`` that sqlglot cannot write as DuckDB SQL (``soundex(s)``),
    children first; (None, 1) when no single part fails alone."""
    import sqlglot
    from sqlglot.errors import UnsupportedError

    for node in reversed(list(tree.walk())):
        try:
            node.sql(dialect="duckdb", unsupported_level=sqlglot.ErrorLevel.RAISE)
        except UnsupportedError:
            return place_of(node)
        except Exception:  # noqa: BLE001, S112 - a part sqlglot cannot write alone (a bare window frame)
            continue
    return None, 1


def parse_spark(text: str):
    """``text`` (Spark SQL) as the translation parses it: sqlglot's tree, each token's place in its meta."""
    import sqlglot

    return sqlglot.parse_one(text, dialect=_spark_dialect())


def spark_text(tree) -> str:
    """A tree of ``parse_spark`` written back as Spark SQL (that ``parse_spark`` reads as the same tree)."""
    return tree.sql(dialect=_spark_dialect())


@functools.lru_cache(maxsize=1)
def _spark_dialect():
    """Spark's dialect, except that the functions in OWN_FUNCTIONS stay calls as written."""
    from sqlglot import exp
    from sqlglot.dialects.spark import Spark

    def keep(name):
        return lambda args: exp.Anonymous(this=name, expressions=args)

    class CepSpark(Spark):
        class Parser(Spark.Parser):
            FUNCTIONS = {
                **spark_functions_only(Spark.Parser.FUNCTIONS),
                **{name: keep(name) for name in OWN_FUNCTIONS},
                **{name: keep(own) for name, own in _SYNONYMS.items()},
                "REGEXP": Spark.Parser.FUNCTIONS["RLIKE"],  # Spark's regexp(s, p) is s RLIKE p
                "ISNULL": lambda args: exp.Paren(this=exp.Is(this=args[0], expression=exp.Null())),
                "ISNOTNULL": lambda args: exp.Paren(this=exp.not_(exp.Is(this=args[0], expression=exp.Null()))),
            }
            FUNCTION_PARSERS = {k: v for k, v in Spark.Parser.FUNCTION_PARSERS.items() if k not in OWN_FUNCTIONS}

            def _parse_interval(self, require_interval: bool = True, parse_function_unit: bool = True):
                # sqlglot keeps no place for an interval (its number becomes a text literal of none), so a
                # refusal of one pointed at the statement's first character: each gets its words' place, and
                # ``INTERVAL 1 DAY 2 HOURS`` (one interval to Spark, a sum to sqlglot) the place of all of them.
                first = self._curr
                node = super()._parse_interval(require_interval, parse_function_unit)
                if node is not None and first is not None and self._prev is not None and "start" not in node.meta:
                    node.meta.update(line=first.line, col=first.col, start=first.start, end=self._prev.end)
                if require_interval and isinstance(node, exp.Add):
                    node.meta[INTERVAL_FIELDS_META] = True  # Spark's one interval, named as one
                return node

    return CepSpark


# ------------------------------------------------------------------------------------------------ types


# ------------------------------------------------------------------------------------------------ rules


def distinct_tuples_counted(tree) -> None:
    """``count(DISTINCT a, b)`` as Spark counts it (the distinct rows where no value is NULL), written as
    DuckDB's ``count(DISTINCT CASE WHEN a IS NULL THEN NULL ... ELSE (a, b) END)`` here: sqlglot's own rewrite
    parses its DuckDB text again with another dialect, and fails where an operand holds DuckDB's ``//``
    (``count(DISTINCT CAST(ts AS BIGINT), to_date(ts))``; found by the differential, seed 29)."""
    from sqlglot import exp

    for distinct in list(tree.find_all(exp.Distinct)):
        if not isinstance(distinct.parent, exp.Count) or len(distinct.expressions) < 2:
            continue
        values = [value.copy() for value in distinct.expressions]
        nulls = [exp.If(this=exp.Is(this=value.copy(), expression=exp.Null()), true=exp.Null()) for value in values]
        distinct.set("expressions", [exp.Case(ifs=nulls, default=exp.Tuple(expressions=values))])


def _READ_AS_DOUBLE() -> tuple:  # noqa: N802 - a constant, built when sqlglot is imported
    """The aggregates whose text operands Spark reads as DOUBLEs (-'2.5' is one already: the minus reads it)."""
    from sqlglot import exp

    return (exp.Sum, exp.Avg, exp.Variance, exp.VariancePop, exp.Stddev, exp.StddevSamp, exp.StddevPop) + (
        exp.Corr,
        exp.CovarPop,
        exp.CovarSamp,
    )


def _translate(node, types: dict[int, str]):
    from sqlglot import exp

    implicit_time_casts(node, types)
    if isinstance(node, exp.Cast):
        cast = _cast(node, types)
        readings = decimal_readings(node, types)  # the cast's type, which the DuckDB form may not show
        if readings is not None:
            cast.meta[DECIMAL_META] = readings
        return cast
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.IntDiv)) and any(
        type_of(side, types) in TEXT_TYPES for side in (node.this, node.expression)
    ):
        return _text_arithmetic(node, types)
    if isinstance(node, exp.Neg) and type_of(node.this, types) in TEXT_TYPES:
        # Spark's minus of text (-'7', and -1::string, which is -(1::string)) reads the text as a DOUBLE.
        as_double = _cast(exp.Cast(this=node.this.copy(), to=exp.DataType.build("DOUBLE")), types)
        return exp.Neg(this=exp.Paren(this=as_double))
    decimal = spark_decimal_arithmetic(node, types, _nonzero_divisor)
    if decimal is not None:
        return decimal
    if isinstance(node, exp.IntDiv) and type_of(node.this, types) in ("DOUBLE", "FLOAT"):
        raise Refusal("the python engine cannot run DIV of a DOUBLE as Spark does; cast it to BIGINT", *place_of(node))
    if isinstance(node, exp.IntDiv) and "DECIMAL" in (type_of(node.this, types), type_of(node.expression, types)):
        raise Refusal(
            "the python engine cannot run DIV of a DECIMAL as Spark does (Spark's exact quotient truncated to "
            "a BIGINT; DuckDB divides a DOUBLE); cast both operands to BIGINT",
            *place_of(node),
        )
    if isinstance(node, exp.SafeDivide) and decimal_arithmetic(node, types):
        raise Refusal(
            "the python engine cannot divide a DECIMAL with try_divide as Spark does (Spark's quotient is an "
            "exact DECIMAL rounded to its own scale, DuckDB's a DOUBLE); cast an operand to DOUBLE",
            *place_of(node),
        )
    if isinstance(node, (exp.Div, exp.Mod, exp.IntDiv)):
        return _nonzero_divisor(node)
    library = _library_calls(node, types)
    if library is not None:
        return library
    if isinstance(node, exp.Anonymous):
        name = str(node.this).upper()
        if name in OWN_FUNCTIONS:
            return _own_function(name, node, types)
        if name == "MAKE_DATE":  # sqlglot's Spark dialect has no node of its own for it
            return make_date(node, types)
        unknown_to_spark = no_such_function(name, node)
        if unknown_to_spark is not None:
            raise unknown_to_spark
        raise Refusal(
            f"the python engine does not know Spark's function {name}() (DuckDB may know another "
            f"function of that name)",
            *place_of(node),
        )
    if isinstance(node, exp.GroupConcat):
        spark_separator(node)
    regex = spark_regex(node)
    if regex is not None:
        return regex
    if isinstance(node, exp.DayOfWeek):  # Spark: 1 = Sunday ... 7 = Saturday; DuckDB: 0 = Sunday
        return exp.Add(this=exp.Paren(this=node.copy()), expression=exp.Literal.number(1))
    if isinstance(node, exp.Round) and type_of(node.this, types) in ("DOUBLE", "FLOAT"):
        # Spark rounds the double's shortest decimal text half up (round(2.675, 2) = 2.68); DuckDB the binary value.
        text = exp.Cast(
            this=exp.Cast(this=node.this.copy(), to=exp.DataType.build("VARCHAR")),
            to=exp.DataType.build("DECIMAL(38, 18)"),
        )
        rounded = exp.Round(this=text, decimals=(node.args.get("decimals") or exp.Literal.number(0)).copy())
        return exp.Cast(this=rounded, to=exp.DataType.build("DOUBLE"))
    if isinstance(node, (exp.Floor, exp.Ceil)) and not node.args.get("decimals") and _floor_or_ceil(node, types):
        return _floor_or_ceil(node, types)
    if isinstance(node, _READ_AS_DOUBLE()) and any(
        type_of(node.args.get(key), types) in TEXT_TYPES for key in ("this", "expression") if node.args.get(key)
    ):
        # Spark's SUM, AVG and statistics of text read it as a DOUBLE (its cast: an invalid text is an error);
        # DuckDB has none of them for text (variance('2'): found by the differential, seed 37).
        new = node.copy()
        for key in ("this", "expression"):
            operand = node.args.get(key)
            if operand is not None and type_of(operand, types) in TEXT_TYPES and not isinstance(operand, exp.Neg):
                new.set(key, _cast(exp.Cast(this=operand.copy(), to=exp.DataType.build("DOUBLE")), types))
        return new
    if isinstance(node, exp.Avg):
        average = spark_decimal_average(node, types)
        if average is not None:
            return average
    if isinstance(node, (exp.Sum, exp.Window, exp.Filter)):
        summed = spark_decimal_sum(node, types)
        if summed is not None:
            return summed
    as_numbers = text_literals_as_numbers(node, types, _cast)
    if as_numbers is not None:
        return as_numbers
    if isinstance(node, (exp.BitwiseOrAgg, exp.BitwiseAndAgg, exp.BitwiseXorAgg)):
        # Spark's bit_or takes an integer only; sqlglot's DuckDB form casts an operand it types otherwise (its
        # round(b, -2) is a DOUBLE) to INT, which fails past INT's range where Spark's BIGINT does not.
        name = {"BitwiseOrAgg": "bit_or", "BitwiseAndAgg": "bit_and", "BitwiseXorAgg": "bit_xor"}[type(node).__name__]
        return call_duck(name, node.this.copy())
    meant = spark_meaning(node, types)
    if meant is not None:
        return meant
    if isinstance(node, exp.CountIf):  # Spark's COUNT_IF is 0 where no row is TRUE (DuckDB's: NULL), a BIGINT
        return exp.Count(this=exp.Case(ifs=[exp.If(this=node.this.copy(), true=exp.Literal.number(1))]))
    if isinstance(node, exp.AddMonths):  # Spark's add_months is a DATE; sqlglot's DuckDB form a TIMESTAMP
        return exp.Cast(this=node.copy(), to=exp.DataType.build("DATE"))
    if isinstance(node, exp.TsOrDsAdd):
        # Spark's date_add(date, n) and date_sub are DATEs; sqlglot's DuckDB form adds an interval, a TIMESTAMP.
        return exp.Cast(this=node.copy(), to=exp.DataType.build("DATE"))
    if (
        _integral_sum(node, types)
        and not isinstance(node.parent, (exp.Window, exp.Filter))
        or isinstance(node, (exp.Window, exp.Filter))
        and _integral_sum(node.this, types)
    ):
        # Spark's SUM of integers and COUNT_IF are BIGINTs (an overflow is an error); DuckDB's are HUGEINTs.
        # Over a window or with FILTER, the cast wraps the whole call.
        return exp.Cast(this=node.copy(), to=exp.DataType.build("BIGINT"))
    return node


def _floor_or_ceil(node, types: dict[int, str]):
    """Spark's floor and ceil (no digits) of an integer, DOUBLE or FLOAT: a BIGINT; None for another type."""
    from sqlglot import exp

    if type_of(node.this, types) in INTEGRAL:
        # the integer itself (DuckDB's goes through a DOUBLE, which past 2^53 is another number, and at
        # BIGINT's largest one that does not fit back)
        return exp.Cast(this=exp.Paren(this=node.this.copy()), to=exp.DataType.build("BIGINT"))
    if type_of(node.this, types) in ("DOUBLE", "FLOAT"):
        return exp.Cast(this=node.copy(), to=exp.DataType.build("BIGINT"))
    return None


def _library_calls(node, types: dict[int, str]):
    """Spark's try_* arithmetic, interval literals and make_interval, typeof, and its text functions given
    another type: their DuckDB form; None for another node."""
    from sqlglot import exp

    for rule in (try_arithmetic, spark_interval, spark_typeof):
        new = rule(node, types)
        if new is not None:
            return new
    if isinstance(node, (exp.Upper, exp.Lower, exp.Initcap, exp.Reverse)) and type_of(node.this, types) in (
        *INTEGRAL,
        *FRACTIONAL,
        *TIME_TYPES,
        "DATE",
        "BOOLEAN",
    ):
        # Spark casts a number, time or BOOLEAN given to a text function to STRING (upper(1.5) is '1.5'), with
        # CAST's rules (a DOUBLE's Java text is refused there); DuckDB has no upper() of a number.
        as_text, to_text = node.copy(), exp.Cast(this=node.this.copy(), to=exp.DataType.build("VARCHAR"))
        decimal_literal = isinstance(node.this, exp.Literal) and not re.search("[eEdD]", node.this.this)
        # sqlglot calls 1.5 a DOUBLE; it is Spark's DECIMAL(2,1), and DuckDB's, which both write as '1.5'
        as_text.set("this", to_text if decimal_literal else _cast(to_text, types))
        return spark_meaning(as_text, types)
    return None


def _text_arithmetic(node, types: dict[int, str]):
    """``s + 1``: Spark casts the text to BIGINT beside an integer ('2.5' + 1 is an error), to DOUBLE beside
    a DECIMAL or a DOUBLE; the rest (text and text, a quotient, an operand whose type cannot be told) is
    refused rather than guessed."""
    from sqlglot import exp

    sides = (node.this, node.expression)
    kinds = [type_of(side, types) for side in sides]
    other = next((kind for kind in kinds if kind not in TEXT_TYPES), None)
    if other == "DATE" or other in TIME_TYPES:
        return _text_beside_a_time(node, types, other)
    if isinstance(node, (exp.Div, exp.Mod, exp.IntDiv)) or other not in INTEGRAL + FRACTIONAL:
        raise Refusal(
            "the python engine cannot compute arithmetic on text as Spark does (Spark casts the text by its "
            "own rules); cast the text yourself: CAST(s AS BIGINT) or CAST(s AS DOUBLE)",
            *place_of(node),
            untyped=None in kinds,
        )
    target = "BIGINT" if other in INTEGRAL else "DOUBLE"
    new = node.copy()
    for key, side, kind in zip(("this", "expression"), sides, kinds):
        if kind in TEXT_TYPES:
            new.set(key, exp.Paren(this=_cast(exp.Cast(this=side.copy(), to=exp.DataType.build(target)), types)))
    return new


def _text_beside_a_time(node, types: dict[int, str], kind: str):
    """Text in arithmetic with a DATE or TIMESTAMP ``kind``, as Spark reads it: ``d - '2021-01-05'`` and
    ``'2021-01-05' - d`` cast the text to ``kind`` (Spark's cast, its special values too) and subtract, an
    INTERVAL; ``d + s`` and any other operator is an error on Spark too (its DATE + n takes an INT of days)."""
    from sqlglot import exp

    target = "DATE" if kind == "DATE" else "TIMESTAMP"
    if not isinstance(node, exp.Sub):
        verb = {exp.Add: "add", exp.Mul: "multiply", exp.Div: "divide", exp.Mod: "divide", exp.IntDiv: "divide"}
        raise Refusal(
            f"cannot {verb[type(node)]} a {target} and text: Spark's ANSI rules do not allow it (a DATE plus a "
            f"number of days takes an INT: CAST(s AS INT); a TIMESTAMP, an INTERVAL)",
            *place_of(node),
            spark_too=True,
        )
    new = node.copy()
    for key, side in (("this", node.this), ("expression", node.expression)):
        if type_of(side, types) in TEXT_TYPES:
            new.set(key, _cast(exp.Cast(this=side.copy(), to=exp.DataType.build(target)), types))
    if target == "DATE":  # Spark's DATE - DATE: an INTERVAL DAY (DuckDB's a number of days)
        return call_duck("to_days", exp.Cast(this=new, to=exp.DataType.build("INTEGER")))
    return new


def _integral_sum(node, types: dict[int, str]) -> bool:
    from sqlglot import exp

    return isinstance(node, exp.Sum) and _integral_kind(node.this, types)


def _integral_kind(node, types: dict[int, str]) -> bool:
    """Whether Spark types ``node`` as an integer: sqlglot's type, or for ROUND and ABS their argument's
    (sqlglot says DOUBLE or cannot tell)."""
    from sqlglot import exp

    if isinstance(node, (exp.Round, exp.Abs)):
        return _integral_kind(node.this, types)
    return type_of(node, types) in INTEGRAL


def _nonzero_divisor(node):
    from sqlglot import exp

    divisor = node.expression.copy()
    if isinstance(divisor, exp.Nullif):  # sqlglot's own guard, NULLIF(d, 0): Spark's ANSI mode raises instead
        divisor = divisor.this
    if isinstance(divisor, exp.Literal) and divisor.is_number and float(divisor.this) != 0:
        guarded = divisor
    else:
        what = "remainder" if isinstance(node, exp.Mod) else "division"
        # Spark fails only where the dividend is not NULL: NULL / 0 is NULL.
        zero = exp.and_(
            exp.EQ(this=divisor.copy(), expression=exp.Literal.number(0)),
            exp.Not(this=exp.Is(this=exp.Paren(this=node.this.copy()), expression=exp.Null())),
        )
        guarded = exp.Case(
            ifs=[exp.If(this=zero, true=fail_with(f"{what} by zero", place_of(node)))],
            default=divisor,
        )
    new = node.copy()
    new.set("expression", guarded)
    if "safe" in new.args:
        new.set("safe", None)
    return new


def _cast(node, types: dict[int, str]):
    """Spark's ANSI CAST (TRY_CAST: NULL instead of the error) in DuckDB."""
    from sqlglot import exp

    safe = bool(node.args.get("safe")) if isinstance(node, exp.TryCast) else False
    target = node.to.this.name.upper().replace("_", "")
    operand = node.this.copy()
    source = type_of(node.this, types)
    if target in TIME_TYPES:
        to = exp.DataType.build("TIMESTAMP")
    elif target == "DECIMAL" and not node.to.expressions:  # Spark's DECIMAL is DECIMAL(10, 0), DuckDB's (18, 3)
        to = exp.DataType.build("DECIMAL(10, 0)")
    else:
        to = node.to.copy()

    def cast(value):
        return exp.TryCast(this=value, to=to.copy(), safe=True) if safe else exp.Cast(this=value, to=to.copy())

    if source is not None and source == target.replace("INTEGER", "INT"):
        return cast(operand)
    if target == "TIME" and _written_as_cast(node):  # Spark 4.2 reads TIME '01:02:03', casts to TIME it refuses
        raise Refusal("the data type TIME is not supported (as on Spark)", *place_of(node), spark_too=True)
    if _spark_refuses_cast(source, target):
        start, length = place_of(node)
        raise Refusal(
            f"cannot cast {source} to {target} (Spark's ANSI rules do not allow it)", start, length, spark_too=True
        )
    if source in ("DOUBLE", "FLOAT") and target == "DECIMAL":
        # Spark reads the double as its shortest decimal text (2.675, not 2.67499...) and rounds half up;
        # DuckDB's own cast rounds the binary value.
        return cast(exp.Cast(this=operand, to=exp.DataType.build("VARCHAR")))
    if source is None and target in ("DATE", "BOOLEAN") + TIME_TYPES + FRACTIONAL:
        raise Refusal(
            f"the python engine cannot tell the type of the value cast to {target} (Spark refuses some "
            "types and reads a time as seconds, DuckDB casts a NULL of any type)",
            *place_of(node),
            untyped=True,
        )
    if target in INTEGRAL or target == "INTEGER":
        if source is None:
            raise Refusal(
                f"the python engine cannot tell the type of the value cast to {target} (Spark truncates "
                f"fractions and reads timestamps as seconds; DuckDB rounds)",
                *place_of(node),
                untyped=True,
            )
        if source in FRACTIONAL:
            return cast(call_duck("trunc", operand))
        if source in TIME_TYPES:
            return cast(epoch_seconds(operand))
        if source in TEXT_TYPES:
            trimmed = java_trimmed(operand)  # Spark trims control characters too ('\t7\n' is 7), DuckDB's trim spaces
            whole = call_duck("regexp_full_match", trimmed.copy(), exp.Literal.string("[+-]?[0-9]+"))
            invalid = exp.Null() if safe else fail_with(f"the text cannot be cast to {target}", place_of(node), to)
            return exp.Case(
                ifs=[exp.If(this=whole, true=cast(trimmed.copy()))],
                default=exp.Case(
                    ifs=[exp.If(this=exp.Is(this=operand.copy(), expression=exp.Null()), true=exp.Null())],
                    default=invalid,
                ),
            )
    if target == "BOOLEAN" and source in TEXT_TYPES:
        return text_to_boolean(operand, safe, place_of(node))
    if target in TIME_TYPES + ("DATE",) and source in TEXT_TYPES:
        kind = "DATE" if target == "DATE" else "TIMESTAMP"
        return text_to_time(operand, kind, safe, place_of(node), foldable=foldable(operand))
    if target in ("DOUBLE", "FLOAT") and source in TIME_TYPES:
        return cast(exp.Div(this=call_duck("epoch_us", operand), expression=exp.Literal.number("1e6")))
    if target in FRACTIONAL and source in TEXT_TYPES:
        return text_to_fraction(operand, to, target, safe, place_of(node))
    if target in TEXT_TYPES + ("STRING",) and (source == "DATE" or source in TIME_TYPES):
        return cast(spark_time_text(operand))  # Spark's text of the years outside 1-9999 (+10183-09-21)
    if target in TEXT_TYPES + ("STRING",) and source in ("DOUBLE", "FLOAT"):
        raise Refusal(
            f"the python engine cannot write a {source} as text as Spark does (Java's notation, "
            f"1.0E10); cast to DECIMAL first",
            *place_of(node),
        )
    if target == "DECIMAL" and source in TIME_TYPES:
        raise Refusal(
            f"the python engine cannot cast a {source} to DECIMAL as Spark does (seconds since 1970, rounded to the "
            "decimal's scale); cast to DOUBLE or BIGINT instead",
            *place_of(node),
        )
    if target in TIME_TYPES and source in INTEGRAL + FRACTIONAL + ("INTEGER",):
        raise Refusal(
            f"the python engine cannot cast a {source} to TIMESTAMP as Spark does (seconds since 1970)", *place_of(node)
        )
    return cast(operand)


def _written_as_cast(node) -> bool:
    """Whether ``node`` was written as ``CAST``, ``TRY_CAST`` or ``::``, not as a typed literal (``TIME '...'``,
    which sqlglot's Spark parser makes a bare Cast of the text, where the others carry their own arguments)."""
    from sqlglot import exp

    return type(node) is not exp.Cast or "requires_string" in node.args


def _spark_refuses_cast(source: str | None, target: str) -> bool:
    """Spark's ANSI mode refuses these casts when it analyses the statement (DuckDB would fail only on a
    value that is not NULL, or not at all)."""
    numeric = INTEGRAL + FRACTIONAL + ("INTEGER",)
    if source == "DATE":
        return target in numeric or target == "BOOLEAN"
    if source in TIME_TYPES:
        return target == "BOOLEAN"
    if source in numeric or source == "BOOLEAN":
        return target == "DATE" or (source == "BOOLEAN" and target in TIME_TYPES)
    return False


def _check_pattern(name: str, patterns: list, where: tuple[int | None, int]) -> str | None:
    """DuckDB's form of the datetime pattern in ``patterns`` (none or one), or the Refusal of a pattern
    the python engine cannot run as Spark does (not written as text, a field it cannot map)."""
    from sqlglot import exp

    if not patterns:
        return None
    pattern = patterns[0]
    if not (isinstance(pattern, exp.Literal) and pattern.is_string):
        raise Refusal(
            f"the python engine runs {name} only with a pattern written as text ('yyyy-MM-dd'), "
            f"which it checks against Spark's",
            *where,
        )
    try:
        return duckdb_strftime(pattern.this, parsing=name in DATETIME_PARSERS)
    except PatternError as error:
        raise Refusal(f"{name}: {error}", *place_of(pattern) if "start" in pattern.meta else where) from None


def _own_function(name: str, node, types: dict[int, str]):
    from sqlglot import exp

    args = [arg.copy() for arg in node.expressions]
    where = place_of(node)
    index, kind = _TIME_VALUES.get(name, (len(args), ""))
    if index < len(args) and type_of(node.expressions[index], types) in TEXT_TYPES:  # Spark's implicit cast
        args[index] = text_to_time(args[index], kind, False, place_of(args[index]), foldable=foldable(args[index]))
    if name in ("TRUNC", "DATE_TRUNC"):
        return _truncation(name, args, where)
    if name == "FROM_UNIXTIME" and 1 <= len(args) <= 2:
        # sqlglot's own reading of the pattern is approximate ('EEEEE', which Spark refuses, became '%A%a'):
        # the pattern checked field by field, then sqlglot's DuckDB form of the call.
        spark_pattern = args[1] if len(args) > 1 else exp.Literal.string(_SPARK_DEFAULT_PATTERN)
        pattern = _check_pattern(name, [spark_pattern], where)
        moment = exp.Cast(this=exp.UnixToTime(this=args[0]), to=exp.DataType.build("TIMESTAMP"))
        with_years = written_with_years(moment, spark_pattern.this)
        return with_years or exp.UnixToStr(this=args[0], format=exp.Literal.string(pattern))
    if name == "UNIX_TIMESTAMP" and not args:
        return epoch_seconds(exp.CurrentTimestamp())
    if name == "TO_CHAR" and len(args) != 2:
        raise Refusal("TO_CHAR takes a value and a datetime pattern: TO_CHAR(d, 'yyyy-MM-dd')", *where)
    if name == "TO_CHAR" and type_of(node.expressions[0], types) in INTEGRAL + FRACTIONAL:
        raise Refusal("the python engine cannot run TO_CHAR of a number (Spark's number patterns)", *where)
    if not args or len(args) > 2:
        raise Refusal(f"{name}() takes one or two arguments, not {len(args)}", *where)
    value = args[0]
    source = type_of(node.expressions[0], types)
    if name in DATETIME_PARSERS and (source in TIME_TYPES or source == "DATE"):
        # A DATE or TIMESTAMP is no text to read: Spark leaves the pattern unused (after checking it, below)
        _check_pattern(name, args[1:], where)
        if name == "TO_DATE":
            return exp.Cast(this=value, to=exp.DataType.build("DATE"))
        if name == "TO_TIMESTAMP":
            return exp.Cast(this=value, to=exp.DataType.build("TIMESTAMP"))
        return exp.IntDiv(  # Spark divides the microseconds: toward zero, not down
            this=call_duck("epoch_us", exp.Cast(this=value, to=exp.DataType.build("TIMESTAMP"))),
            expression=exp.Literal.number(1_000_000),
        )
    if name == "UNIX_TIMESTAMP" and len(args) == 1:
        if source not in TEXT_TYPES:
            raise Refusal("the python engine cannot tell the type of UNIX_TIMESTAMP's argument", *where, untyped=True)
        args.append(exp.Literal.string(_SPARK_DEFAULT_PATTERN))
    if len(args) == 1:  # TO_DATE(x), TO_TIMESTAMP(x): Spark's cast
        return _cast(exp.Cast(this=value, to=exp.DataType.build("DATE" if name == "TO_DATE" else "TIMESTAMP")), types)
    pattern = args[1]
    parsing = name in DATETIME_PARSERS
    duck_pattern = _check_pattern(name, args[1:], where)
    if not parsing:
        moment = exp.Cast(this=value, to=exp.DataType.build("TIMESTAMP"))
        with_years = written_with_years(moment, pattern.this)
        return with_years or call_duck("strftime", moment, exp.Literal.string(duck_pattern))
    # Spark's fields are fixed-width (MM is two digits); DuckDB's strptime also reads '1' for %m: the text
    # must be what the pattern writes of the value read. try_strptime: a text that does not parse at all
    # meets the same error as one that does not fit, with its place (strptime's own names neither).
    fitted = call_duck("try_strptime", value.copy(), exp.Literal.string(duck_pattern))
    written = call_duck("strftime", fitted.copy(), exp.Literal.string(duck_pattern))
    moment = exp.Case(
        ifs=[
            exp.If(this=exp.Is(this=value.copy(), expression=exp.Null()), true=exp.Null()),
            exp.If(this=exp.EQ(this=written, expression=value.copy()), true=fitted),
        ],
        default=fail_with(f"the text does not fit the datetime pattern {pattern.this!r}", where, "TIMESTAMP"),
    )
    if name == "TO_DATE":
        return exp.Cast(this=moment, to=exp.DataType.build("DATE"))
    if name == "UNIX_TIMESTAMP":
        return epoch_seconds(moment)
    return moment


def _truncation(name: str, args: list, where: tuple[int | None, int]):
    from sqlglot import exp

    if len(args) != 2:
        raise Refusal(f"{name}() takes two arguments, not {len(args)}", *where)
    unit, value = (args[1], args[0]) if name == "TRUNC" else (args[0], args[1])
    if not (isinstance(unit, exp.Literal) and unit.is_string):
        raise Refusal(f"the python engine runs {name} only with its unit written as text ('MM', 'YEAR'): ", *where)
    units = _TRUNC_UNITS if name == "TRUNC" else _DATE_TRUNC_UNITS
    kind = exp.DataType.build("DATE" if name == "TRUNC" else "TIMESTAMP")
    duck_unit = units.get(unit.this.strip().upper())
    if duck_unit is None:  # Spark's answer to a unit it does not know
        return exp.Cast(this=exp.Null(), to=kind)
    truncated = call_duck("date_trunc", exp.Literal.string(duck_unit), exp.Cast(this=value, to=kind.copy()))
    return exp.Cast(this=truncated, to=kind)


# ------------------------------------------------------------------------------------------ check time


def check_patterns(text: str, *, spark_refused_only: bool = False) -> None:
    """Refusal for every datetime pattern of ``text`` (Spark SQL) that the python engine cannot run exactly,
    at the pattern's place: what `cep check` says before any engine runs. ``spark_refused_only``: only the
    patterns Spark refuses too (what both engines refuse before running)."""
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(text, dialect=_spark_dialect())
    except sqlglot.errors.SqlglotError:
        return  # the syntax error is reported by the Spark parser's check
    for node in tree.find_all(exp.Anonymous):
        name = str(node.this).upper()
        index = DATETIME_PATTERN_ARGUMENT.get(name)
        if index is None or len(node.expressions) <= index:
            continue
        pattern = node.expressions[index]
        if isinstance(pattern, exp.Literal) and pattern.is_string:
            try:
                duckdb_strftime(pattern.this, parsing=name in DATETIME_PARSERS)
            except PatternError as error:
                refused_by_spark = isinstance(error, SparkRefusedPattern)
                if spark_refused_only and not refused_by_spark:
                    continue
                where = place_of(pattern) if "start" in pattern.meta else place_of(node)
                raise Refusal(f"{name}: {error}", *where, spark_too=refused_by_spark) from None
