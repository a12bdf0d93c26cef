"""The function catalogue: every function a query may call, with its arity and its result's type family.

One table serves the parser (which names are aggregates), the checker (unknown names, argument counts,
types) and "did you mean" (``suggest``: synonyms first, then spelling). The meaning of each function is
in ``matcher/sql`` (``values.SCALAR_FUNCTIONS``, ``values.aggregate``, ``datetimes``, ``text_patterns``);
docs/language.md lists them with the dialect each follows.

Each entry carries the result's SQL type, or the rule that derives it from the arguments' types: the
checker reads its family (number, string, boolean, time, array, map; ``same`` is the family of the first
argument whose family is known; None when it cannot be told), matcher/sql/types.py the type itself.
"""

from __future__ import annotations

import difflib
import re
from typing import NamedTuple

import re2


class Signature(NamedTuple):
    least: int  # arguments
    most: int | None  # None: any number
    # The result's SQL type (a name of ``RESULT_FAMILIES``), or the rule in ``RULE_FAMILIES`` that derives it
    # from the arguments (matcher/sql/types.py applies the rules: Spark's types, for the output schema).
    result: str

    @property
    def family(self) -> str | None:
        """The checker's type family of the result; "same": the first known argument's; "second": the second's."""
        return RESULT_FAMILIES[self.result] if self.result in RESULT_FAMILIES else RULE_FAMILIES[self.result]


_ANY = None
S = Signature

# The result types a call can have, and their families.
RESULT_FAMILIES = {
    "VARCHAR": "string",
    "INTEGER": "number",
    "BIGINT": "number",
    "DOUBLE": "number",
    "DECIMAL": "number",
    "BOOLEAN": "boolean",
    "TIMESTAMP": "time",
    "DATE": "time",
}
# Results derived from the arguments, and the family the checker knows of each before types are known.
RULE_FAMILIES: dict[str, str | None] = {
    "same": "same",  # the first argument's type (ABS, COALESCE, MIN)
    "second": "second",  # the second argument's (IF, NVL2)
    "widest": "same",  # the first argument's, a TIMESTAMP where DATE meets TIMESTAMP (COALESCE, GREATEST)
    "third": None,  # the third argument's (DECODE)
    "element": None,  # an element of the first argument, an array (ELEMENT_AT, ARRAY_MAX)
    "array_of": "array",  # an array of the argument's type (ARRAY_AGG)
    "remainder": "number",  # MOD: the type of a % b
    "truncated": "same",  # TRUNC: a DATE for a date or timestamp, else the number's type
    "date_or_timestamp": "time",  # DATE_ADD: DATE_ADD(d, n) a DATE, Trino's DATE_ADD(unit, n, ts) a TIMESTAMP
    "field": "number",  # EXTRACT/DATE_PART: an INT, a DECIMAL(8,6) for SECOND (it has a fraction)
    "days_or_units": "number",  # DATEDIFF: an INT of days (Spark's two arguments), a BIGINT of units (three)
    "sum": "number",  # SUM: BIGINT of integers, DECIMAL(p+10, s), else DOUBLE
    "average": "number",  # AVG: DECIMAL(p+4, s+4) of a DECIMAL, else DOUBLE
    "extreme": "same",  # MIN/MAX/MIN_BY/MAX_BY: the argument's type; with n, an array of the n extremes
    "same_or_array": "same",  # APPROX_PERCENTILE: the argument's type (an array for an array of percentages)
    "map": "map",  # MAP, MAP_AGG: no output column holds a map (Spark's output schema has no MAP here), so
    # the first argument's type stands in for the column's type
}

# Calls that become ast.Aggregate: the standard set, Trino's extras used by the conformance corpus, the map
# aggregates Trino's tests use, and the list and percentile aggregates of Spark, Snowflake, PostgreSQL, YDB.
AGGREGATES: dict[str, Signature] = {
    "COUNT": S(0, 1, "BIGINT"),
    "SUM": S(1, 1, "sum"),
    "AVG": S(1, 1, "average"),
    "MIN": S(1, 2, "extreme"),
    "MAX": S(1, 2, "extreme"),
    "ARRAY_AGG": S(1, 1, "array_of"),
    "ARBITRARY": S(1, 1, "same"),
    "ANY_VALUE": S(1, 1, "same"),
    "MAX_BY": S(2, 3, "extreme"),
    "MIN_BY": S(2, 3, "extreme"),
    "BOOL_AND": S(1, 1, "BOOLEAN"),
    "BOOL_OR": S(1, 1, "BOOLEAN"),
    "EVERY": S(1, 1, "BOOLEAN"),
    "STDDEV": S(1, 1, "DOUBLE"),
    "STDDEV_SAMP": S(1, 1, "DOUBLE"),
    "VARIANCE": S(1, 1, "DOUBLE"),
    "VAR_SAMP": S(1, 1, "DOUBLE"),
    "COUNT_IF": S(1, 1, "BIGINT"),
    "MAP_AGG": S(2, 2, "map"),
    "MULTIMAP_AGG": S(2, 2, "map"),
    "MAP_UNION": S(1, 1, "map"),
    # lists of values (NULLs left out) and text
    "COLLECT_LIST": S(1, 1, "array_of"),
    "AGGREGATE_LIST": S(1, 1, "array_of"),
    "LISTAGG": S(1, 2, "VARCHAR"),
    "STRING_AGG": S(1, 2, "VARCHAR"),
    # percentiles: MEDIAN(x), PERCENTILE_CONT(p) WITHIN GROUP (ORDER BY x), APPROX_PERCENTILE(x, p)
    "MEDIAN": S(1, 1, "DOUBLE"),
    "PERCENTILE_CONT": S(1, 1, "DOUBLE"),
    "PERCENTILE_DISC": S(1, 1, "DOUBLE"),
    "APPROX_PERCENTILE": S(2, 3, "same_or_array"),
}
AGGREGATE_FUNCTIONS = frozenset(AGGREGATES)
# Aggregates that take WITHIN GROUP (ORDER BY ...): the percentiles need it, the others may have it.
ORDERED_AGGREGATES = frozenset(
    {"PERCENTILE_CONT", "PERCENTILE_DISC", "LISTAGG", "STRING_AGG", "ARRAY_AGG", "COLLECT_LIST"}
)
NEEDS_ORDER = frozenset({"PERCENTILE_CONT", "PERCENTILE_DISC"})

SCALARS: dict[str, Signature] = {
    # numbers
    "ABS": S(1, 1, "same"),
    "ROUND": S(1, 2, "same"),
    "FLOOR": S(1, 1, "BIGINT"),
    "CEIL": S(1, 1, "BIGINT"),
    "CEILING": S(1, 1, "BIGINT"),
    "SQRT": S(1, 1, "DOUBLE"),
    "LN": S(1, 1, "DOUBLE"),
    "EXP": S(1, 1, "DOUBLE"),
    "POWER": S(2, 2, "DOUBLE"),
    "SIGN": S(1, 1, "DOUBLE"),
    "MOD": S(2, 2, "remainder"),
    "LOG10": S(1, 1, "DOUBLE"),
    "LOG2": S(1, 1, "DOUBLE"),
    "LOG": S(1, 2, "DOUBLE"),
    "TRUNC": S(1, 2, "truncated"),
    # text
    "LOWER": S(1, 1, "VARCHAR"),
    "UPPER": S(1, 1, "VARCHAR"),
    "LENGTH": S(1, 1, "INTEGER"),
    "TRIM": S(1, 1, "VARCHAR"),
    "SUBSTR": S(2, 3, "VARCHAR"),
    "SUBSTRING": S(2, 3, "VARCHAR"),
    "CONCAT": S(1, _ANY, "VARCHAR"),
    "CONCAT_WS": S(1, _ANY, "VARCHAR"),
    "REPLACE": S(2, 3, "VARCHAR"),
    "SPLIT_PART": S(3, 3, "VARCHAR"),
    "STRPOS": S(2, 2, "INTEGER"),
    "POSITION": S(2, 3, "INTEGER"),
    "STARTS_WITH": S(2, 2, "BOOLEAN"),
    "STARTSWITH": S(2, 2, "BOOLEAN"),
    "ENDS_WITH": S(2, 2, "BOOLEAN"),
    "ENDSWITH": S(2, 2, "BOOLEAN"),
    "CONTAINS": S(2, 2, "BOOLEAN"),
    "REGEXP_LIKE": S(2, 2, "BOOLEAN"),
    "RLIKE": S(2, 2, "BOOLEAN"),
    "REGEXP_SUBSTR": S(2, 4, "VARCHAR"),
    "REGEXP_REPLACE": S(3, 3, "VARCHAR"),
    # NULLs and choices
    "COALESCE": S(1, _ANY, "widest"),
    "NULLIF": S(2, 2, "same"),
    "NVL": S(2, 2, "widest"),
    "IFNULL": S(2, 2, "widest"),
    "NVL2": S(3, 3, "second"),
    "IF": S(2, 3, "second"),
    "IFF": S(3, 3, "second"),
    "DECODE": S(3, _ANY, "third"),
    "GREATEST": S(1, _ANY, "widest"),
    "LEAST": S(1, _ANY, "widest"),
    # dates and times
    "EXTRACT": S(2, 2, "field"),
    "DATE_PART": S(2, 2, "field"),
    "YEAR": S(1, 1, "INTEGER"),
    "QUARTER": S(1, 1, "INTEGER"),
    "MONTH": S(1, 1, "INTEGER"),
    "DAY": S(1, 1, "INTEGER"),
    "DAYOFMONTH": S(1, 1, "INTEGER"),
    "DAYOFWEEK": S(1, 1, "INTEGER"),
    "DAYOFYEAR": S(1, 1, "INTEGER"),
    "WEEKOFYEAR": S(1, 1, "INTEGER"),
    "WEEKDAY": S(1, 1, "INTEGER"),
    "HOUR": S(1, 1, "INTEGER"),
    "MINUTE": S(1, 1, "INTEGER"),
    "SECOND": S(1, 1, "INTEGER"),
    "DATE_TRUNC": S(2, 2, "TIMESTAMP"),
    "DATEADD": S(3, 3, "TIMESTAMP"),
    "TIMESTAMPADD": S(3, 3, "TIMESTAMP"),
    "DATE_ADD": S(2, 3, "date_or_timestamp"),
    "DATE_SUB": S(2, 2, "DATE"),
    "DATEDIFF": S(2, 3, "days_or_units"),
    "DATE_DIFF": S(2, 3, "days_or_units"),
    "TIMESTAMPDIFF": S(3, 3, "BIGINT"),
    "DATE": S(1, 1, "DATE"),
    "TO_DATE": S(1, 2, "DATE"),
    "TO_TIMESTAMP": S(1, 2, "TIMESTAMP"),
    "DATE_FORMAT": S(2, 2, "VARCHAR"),
    "TO_CHAR": S(1, 2, "VARCHAR"),
    "UNIX_TIMESTAMP": S(0, 2, "BIGINT"),
    "CURRENT_TIMESTAMP": S(0, 0, "TIMESTAMP"),
    "CURRENT_DATE": S(0, 0, "DATE"),
    "NOW": S(0, 0, "TIMESTAMP"),
    # arrays and maps
    "ARRAY_JOIN": S(2, 3, "VARCHAR"),
    "ELEMENT_AT": S(2, 2, "element"),
    "ARRAY_MAX": S(1, 1, "element"),
    "ARRAY_MIN": S(1, 1, "element"),
    "CARDINALITY": S(1, 1, "INTEGER"),
    "MAP": S(2, 2, "map"),
}
SCALAR_FUNCTIONS = frozenset(SCALARS)
ROW_PATTERN_CALLS = (
    "PREV",
    "NEXT",
    "FIRST",
    "LAST",
    "LAG",
    "LEAD",
    "CLASSIFIER",
    "MATCH_NUMBER",
    "MATCH_SEQUENCE_NUMBER",
    "MATCH_STATUS",
    "PROCTIME",
)

# What an analyst from another dialect writes -> what cep calls it (for "did you mean"). Only names cep
# does not also accept: the ones it accepts are in the tables above.
SYNONYMS: dict[str, str] = {
    "FIRST_VALUE": "FIRST",
    "LAST_VALUE": "LAST",
    "ISNULL": "COALESCE",
    "ZEROIFNULL": "COALESCE",
    "IIF": "IFF",
    "LEN": "LENGTH",
    "CHAR_LENGTH": "LENGTH",
    "CHARACTER_LENGTH": "LENGTH",
    "CHARINDEX": "STRPOS",
    "INSTR": "STRPOS",
    "LOCATE": "POSITION",
    "DATEPART": "DATE_PART",
    "GETDATE": "CURRENT_TIMESTAMP",
    "SYSDATE": "CURRENT_TIMESTAMP",
    "SYSTIMESTAMP": "CURRENT_TIMESTAMP",
    "LOCALTIMESTAMP": "CURRENT_TIMESTAMP",
    "STDEV": "STDDEV",
    "VAR": "VARIANCE",
    "ROW_NUMBER": "MATCH_SEQUENCE_NUMBER",
    "GROUP_CONCAT": "LISTAGG",
    "ARRAY_CONCAT_AGG": "ARRAY_AGG",
    "REGEXP_MATCHES": "REGEXP_LIKE",
    "REGEXP_INSTR": "REGEXP_SUBSTR",
    "DATETIME_ADD": "DATEADD",
    "TIMESTAMP_ADD": "DATEADD",
    "DATETIME_DIFF": "DATEDIFF",
    "TIMESTAMP_DIFF": "DATEDIFF",
    "TRUNCATE": "TRUNC",
    "POW": "POWER",
    "FORMAT_DATETIME": "DATE_FORMAT",
    "STRFTIME": "DATE_FORMAT",
    "PARSE_TIMESTAMP": "TO_TIMESTAMP",
    "STR_TO_DATE": "TO_DATE",
}

KNOWN = SCALAR_FUNCTIONS | AGGREGATE_FUNCTIONS | frozenset(ROW_PATTERN_CALLS)


def suggest(name: str) -> str | None:
    """A hint for an unknown function: its synonym, else a close spelling among the known names (only a
    close one: LAG is not AVG)."""
    upper = name.upper()
    if upper in SYNONYMS:
        return f"did you mean {SYNONYMS[upper]}()? ({upper} is another dialect's name for it)"
    close = difflib.get_close_matches(upper, sorted(KNOWN), n=1, cutoff=0.8)
    return f"did you mean {close[0]}()?" if close else None


# ------------------------------------------------------------------------- LIKE and regular expressions
# The syntax of the patterns a query writes (checked at compile time when they are literals, with a
# position); matcher/sql/text_patterns.py matches them.


class PatternError(ValueError):
    """A LIKE pattern, ESCAPE character or regular expression that is not valid (the message says why)."""


class SparkRefusedPattern(PatternError):
    """A datetime pattern Spark itself refuses (a week-based field such as YYYY): no engine runs it."""


def like_segments(pattern: str, escape: str | None) -> list[list]:
    """A LIKE pattern split at its unescaped ``%``: each segment a list of characters and ``ANY_CHAR``
    markers (an unescaped ``_``, as the object ``ANY``). ``escape`` must be one character and may precede
    only ``%``, ``_`` or itself (SQL, Spark). Without ``ESCAPE`` (None) it is Spark's default, ``\\``, as for
    a LIKE outside the clause (``'a\\_b'`` matches ``a_b`` only)."""
    if escape is None:
        escape = "\\"
    if len(escape) != 1:
        raise PatternError(f"the ESCAPE character must be one character, not {escape!r}")
    segments: list[list] = [[]]
    chars = iter(pattern)
    for char in chars:
        if char == escape:
            following = next(chars, None)
            if following is None:
                raise PatternError(f"the LIKE pattern {pattern!r} ends with its escape character {escape!r}")
            if following not in ("%", "_", escape):
                raise PatternError(
                    f"in the LIKE pattern {pattern!r} the escape character {escape!r} may only "
                    f"precede %, _ or itself, not {following!r}"
                )
            segments[-1].append(following)
        elif char == "%":
            segments.append([])
        else:
            segments[-1].append(ANY if char == "_" else char)
    return segments


class _AnyChar:
    __slots__ = ()

    def __repr__(self) -> str:
        return "ANY"


ANY = _AnyChar()

_REGEX_LIMITS = (
    ("(?=", "lookahead"),
    ("(?!", "negative lookahead"),
    ("(?<=", "lookbehind"),
    ("(?<!", "negative lookbehind"),
    ("(?>", "atomic groups"),
)


def compile_regex(pattern: str):
    """A regular expression compiled with RE2 (linear in the text); PatternError names what RE2 cannot do."""
    options = re2.Options()
    options.log_errors = False  # RE2 would print every bad pattern to stderr; the error says it instead
    try:
        return re2.compile(pattern, options)
    except re2.error as error:
        detail = error.args[0].decode() if error.args and isinstance(error.args[0], bytes) else str(error)
        construct = next((name for token, name in _REGEX_LIMITS if token in pattern), None)
        if construct is None and any(f"\\{digit}" in pattern for digit in "123456789"):
            construct = "backreferences"
        why = f"{construct} need a backtracking engine, which can take exponential time" if construct else detail
        raise PatternError(
            f"the regular expression {pattern!r} is not supported: {why} (cep uses RE2 syntax, linear in the text)"
        ) from None


# ------------------------------------------------------------------------------------ datetime patterns
# Spark's datetime patterns (java.time's letters) in DATE_FORMAT, TO_CHAR, TO_DATE, TO_TIMESTAMP and
# UNIX_TIMESTAMP. One rule for both engines and for `cep check`: a pattern Spark refuses (week-based fields
# such as YYYY, letters it does not know) is refused here with its position; inside MATCH_RECOGNIZE the
# matcher runs the rest (matcher/sql/datetimes.py); around it, on the python engine, DuckDB's strftime runs
# a pattern only where every field maps to one of its specifiers exactly (``duckdb_strftime``).

# The functions whose argument at that index (0-based) is a datetime pattern.
DATETIME_PATTERN_ARGUMENT = {"DATE_FORMAT": 1, "TO_CHAR": 1, "TO_DATE": 1, "TO_TIMESTAMP": 1, "UNIX_TIMESTAMP": 1}
DATETIME_PARSERS = frozenset({"TO_DATE", "TO_TIMESTAMP", "UNIX_TIMESTAMP"})

_DATETIME_TOKEN = re.compile(r"'(?:[^']|'')*'|([A-Za-z])\1*|.", re.DOTALL)
# Letters Spark 3+ refuses (DateTimeFormatterHelper: week-based fields and java.time's unsupported ones),
# with what to write instead.
_SPARK_REFUSED = {
    "Y": "week-based year; the calendar year is yyyy",
    "w": "week of week-based year",
    "W": "week of month",
    "u": "day-of-week number; EEE is its name",
    "e": "localized day of week",
    "c": "localized day of week",
    "A": "milli of day",
    "n": "nano of second",
    "N": "nano of day",
    "p": "pad modifier",
}
# The letters java.time's DateTimeFormatter knows; Spark refuses any other (and those above).
_JAVA_LETTERS = "GuyDMLdQqYwWEecFaBhKkHmsSAnNVvzOXxZp"
# The letters cep formats and reads (matcher/sql/datetimes.py); Spark knows a few more (G, Q, F, V, z, O, X,
# x, Z: eras, quarters, zones), which cep refuses rather than guess.
DATETIME_LETTERS = "yMLdDHhkKmsSaE"
# Spark pattern fields that DuckDB's strftime writes exactly (same text for every value), and those its
# strptime reads exactly (the same strings accepted, the same value).
_STRFTIME = {
    "y": "%Y",
    "yyyy": "%Y",
    "yy": "%y",
    "M": "%-m",
    "MM": "%m",
    "MMM": "%b",
    "MMMM": "%B",
    "d": "%-d",
    "dd": "%d",
    "D": "%-j",
    "DDD": "%j",
    "H": "%-H",
    "HH": "%H",
    "h": "%-I",
    "hh": "%I",
    "m": "%-M",
    "mm": "%M",
    "s": "%-S",
    "ss": "%S",
    "SSS": "%g",
    "SSSSSS": "%f",
    "a": "%p",
    "E": "%a",
    "EE": "%a",
    "EEE": "%a",
    "EEEE": "%A",
}
_STRPTIME = {"yyyy": "%Y", "MM": "%m", "dd": "%d", "HH": "%H", "mm": "%M", "ss": "%S"}


def datetime_pattern(pattern: str) -> list[tuple[str, str]]:
    """A Spark datetime pattern as ('field', 'yyyy') and ('text', '-') pieces; PatternError when Spark
    refuses it or cep cannot run it."""
    tokens = list(_DATETIME_TOKEN.finditer(pattern))
    # What Spark refuses first, wherever it stands: then no engine runs the pattern, whatever else it holds.
    for found in tokens:
        text = found.group(0)
        if found.group(1) and text[0] in _SPARK_REFUSED:
            raise SparkRefusedPattern(
                f"the datetime pattern {pattern!r} uses {text!r} ({_SPARK_REFUSED[text[0]]}), which Spark refuses"
            )
        if found.group(1) and text[0] not in _JAVA_LETTERS:
            raise SparkRefusedPattern(
                f"the datetime pattern {pattern!r} uses {text!r}, a letter Spark does not know (quote text: '{text}')"
            )
    out = []
    for found in tokens:
        text = found.group(0)
        if text.startswith("'"):
            out.append(("text", text[1:-1].replace("''", "'") if len(text) > 2 else "'"))
        elif found.group(1):
            letter = text[0]
            if letter not in DATETIME_LETTERS:
                raise PatternError(
                    f"the datetime pattern {pattern!r} uses {text!r}, which cep does not support "
                    "(yyyy MM MMM dd D HH hh mm ss SSS a EEE and quoted text are; quote other letters)"
                )
            out.append(("field", text))
        elif text in "[]{}#":
            raise PatternError(
                f"the datetime pattern {pattern!r} uses {text!r}, which Spark reserves (quote it to write it as text)"
            )
        else:
            out.append(("text", text))
    return out


def duckdb_strftime(pattern: str, *, parsing: bool = False) -> str:
    """The DuckDB strftime (or, ``parsing``, strptime) format that writes (reads) what Spark's ``pattern``
    does; PatternError naming the field that has no exact equivalent."""
    table = _STRPTIME if parsing else _STRFTIME
    parts = []
    for kind, text in datetime_pattern(pattern):
        if kind == "text":
            parts.append(text.replace("%", "%%"))
        elif text in table:
            parts.append(table[text])
        else:
            known = " ".join(table)
            raise PatternError(
                f"the datetime pattern {pattern!r} uses {text!r}, which the python engine cannot "
                f"{'read' if parsing else 'write'} exactly as Spark does (it can: {known})"
            )
    if parsing and "%Y" not in parts:  # a text read without its year: Spark takes 1970's, DuckDB's strptime 1900's
        raise PatternError(
            f"the datetime pattern {pattern!r} reads no year (yyyy), which Spark takes as 1970 and the python "
            "engine would take as 1900"
        )
    return "".join(parts)
