"""The function catalogue: every function a query may call, with its arity and its result's type family.

One table serves the parser (which names are aggregates), the checker (unknown names, argument counts,
types) and "did you mean" (``suggest``: synonyms first, then spelling). The meaning of each function is
in ``matcher/sql`` (``values.SCALAR_FUNCTIONS``, ``values.aggregate``, ``datetimes``, ``text_patterns``);
docs/language.md lists them with the dialect each follows.

Families: number, string, boolean, time, array, map; ``same`` is the family of the first argument whose
family is known (COALESCE, MIN); None when it cannot be told.
"""

from __future__ import annotations

import difflib
import re
from typing import NamedTuple

import re2


class Signature(NamedTuple):
    least: int  # arguments
    most: int | None  # None: any number
    family: str | None  # the result's type family; "same": the first known argument's; "second": the second's


_ANY = None

# Calls that become ast.Aggregate: the standard set, Trino's extras used by the conformance corpus, the map
# aggregates Trino's tests use, and the list and percentile aggregates of Spark, Snowflake, PostgreSQL, YDB.
AGGREGATES: dict[str, Signature] = {
    "COUNT": Signature(0, 1, "number"), "SUM": Signature(1, 1, "number"), "AVG": Signature(1, 1, "number"),
    "MIN": Signature(1, 2, "same"), "MAX": Signature(1, 2, "same"), "ARRAY_AGG": Signature(1, 1, "array"),
    "ARBITRARY": Signature(1, 1, "same"), "ANY_VALUE": Signature(1, 1, "same"), "MAX_BY": Signature(2, 3, "same"),
    "MIN_BY": Signature(2, 3, "same"), "BOOL_AND": Signature(1, 1, "boolean"), "BOOL_OR": Signature(1, 1, "boolean"),
    "EVERY": Signature(1, 1, "boolean"), "STDDEV": Signature(1, 1, "number"), "STDDEV_SAMP": Signature(1, 1, "number"),
    "VARIANCE": Signature(1, 1, "number"), "VAR_SAMP": Signature(1, 1, "number"), "COUNT_IF": Signature(1, 1, "number"),
    "MAP_AGG": Signature(2, 2, "map"), "MULTIMAP_AGG": Signature(2, 2, "map"), "MAP_UNION": Signature(1, 1, "map"),
    # lists of values (NULLs left out) and text
    "COLLECT_LIST": Signature(1, 1, "array"), "AGGREGATE_LIST": Signature(1, 1, "array"),
    "LISTAGG": Signature(1, 2, "string"), "STRING_AGG": Signature(1, 2, "string"),
    # percentiles: MEDIAN(x), PERCENTILE_CONT(p) WITHIN GROUP (ORDER BY x), APPROX_PERCENTILE(x, p)
    "MEDIAN": Signature(1, 1, "number"), "PERCENTILE_CONT": Signature(1, 1, "number"),
    "PERCENTILE_DISC": Signature(1, 1, "number"), "APPROX_PERCENTILE": Signature(2, 3, "same"),
}
AGGREGATE_FUNCTIONS = frozenset(AGGREGATES)
# Aggregates that take WITHIN GROUP (ORDER BY ...): the percentiles need it, the others may have it.
ORDERED_AGGREGATES = frozenset({"PERCENTILE_CONT", "PERCENTILE_DISC", "LISTAGG", "STRING_AGG", "ARRAY_AGG",
                                "COLLECT_LIST"})
NEEDS_ORDER = frozenset({"PERCENTILE_CONT", "PERCENTILE_DISC"})

SCALARS: dict[str, Signature] = {
    # numbers
    "ABS": Signature(1, 1, "same"), "ROUND": Signature(1, 2, "same"), "FLOOR": Signature(1, 1, "number"),
    "CEIL": Signature(1, 1, "number"), "CEILING": Signature(1, 1, "number"), "SQRT": Signature(1, 1, "number"),
    "LN": Signature(1, 1, "number"), "EXP": Signature(1, 1, "number"), "POWER": Signature(2, 2, "number"),
    "SIGN": Signature(1, 1, "number"), "MOD": Signature(2, 2, "number"), "LOG10": Signature(1, 1, "number"),
    "LOG2": Signature(1, 1, "number"), "LOG": Signature(1, 2, "number"), "TRUNC": Signature(1, 2, "same"),
    # text
    "LOWER": Signature(1, 1, "string"), "UPPER": Signature(1, 1, "string"), "LENGTH": Signature(1, 1, "number"),
    "TRIM": Signature(1, 1, "string"), "SUBSTR": Signature(2, 3, "string"), "SUBSTRING": Signature(2, 3, "string"),
    "CONCAT": Signature(1, _ANY, "string"), "CONCAT_WS": Signature(1, _ANY, "string"),
    "REPLACE": Signature(2, 3, "string"), "SPLIT_PART": Signature(3, 3, "string"),
    "STRPOS": Signature(2, 2, "number"), "POSITION": Signature(2, 3, "number"),
    "STARTS_WITH": Signature(2, 2, "boolean"), "STARTSWITH": Signature(2, 2, "boolean"),
    "ENDS_WITH": Signature(2, 2, "boolean"), "ENDSWITH": Signature(2, 2, "boolean"),
    "CONTAINS": Signature(2, 2, "boolean"),
    "REGEXP_LIKE": Signature(2, 2, "boolean"), "RLIKE": Signature(2, 2, "boolean"),
    "REGEXP_SUBSTR": Signature(2, 4, "string"), "REGEXP_REPLACE": Signature(3, 3, "string"),
    # NULLs and choices
    "COALESCE": Signature(1, _ANY, "same"), "NULLIF": Signature(2, 2, "same"), "NVL": Signature(2, 2, "same"),
    "IFNULL": Signature(2, 2, "same"), "NVL2": Signature(3, 3, "second"), "IF": Signature(2, 3, "second"),
    "IFF": Signature(3, 3, "second"), "DECODE": Signature(3, _ANY, None), "GREATEST": Signature(1, _ANY, "same"),
    "LEAST": Signature(1, _ANY, "same"),
    # dates and times
    "EXTRACT": Signature(2, 2, "number"), "DATE_PART": Signature(2, 2, "number"), "YEAR": Signature(1, 1, "number"),
    "QUARTER": Signature(1, 1, "number"), "MONTH": Signature(1, 1, "number"), "DAY": Signature(1, 1, "number"),
    "DAYOFMONTH": Signature(1, 1, "number"), "DAYOFWEEK": Signature(1, 1, "number"),
    "DAYOFYEAR": Signature(1, 1, "number"), "WEEKOFYEAR": Signature(1, 1, "number"),
    "WEEKDAY": Signature(1, 1, "number"), "HOUR": Signature(1, 1, "number"), "MINUTE": Signature(1, 1, "number"),
    "SECOND": Signature(1, 1, "number"), "DATE_TRUNC": Signature(2, 2, "time"), "DATEADD": Signature(3, 3, "time"),
    "TIMESTAMPADD": Signature(3, 3, "time"), "DATE_ADD": Signature(2, 3, "time"), "DATE_SUB": Signature(2, 2, "time"),
    "DATEDIFF": Signature(2, 3, "number"), "DATE_DIFF": Signature(2, 3, "number"),
    "TIMESTAMPDIFF": Signature(3, 3, "number"), "DATE": Signature(1, 1, "time"), "TO_DATE": Signature(1, 2, "time"),
    "TO_TIMESTAMP": Signature(1, 2, "time"), "DATE_FORMAT": Signature(2, 2, "string"),
    "TO_CHAR": Signature(1, 2, "string"), "UNIX_TIMESTAMP": Signature(0, 2, "number"),
    "CURRENT_TIMESTAMP": Signature(0, 0, "time"), "CURRENT_DATE": Signature(0, 0, "time"), "NOW": Signature(0, 0, "time"),
    # arrays and maps
    "ARRAY_JOIN": Signature(2, 3, "string"), "ELEMENT_AT": Signature(2, 2, None), "ARRAY_MAX": Signature(1, 1, None),
    "ARRAY_MIN": Signature(1, 1, None), "CARDINALITY": Signature(1, 1, "number"), "MAP": Signature(2, 2, "map"),
}
SCALAR_FUNCTIONS = frozenset(SCALARS)
ROW_PATTERN_CALLS = ("PREV", "NEXT", "FIRST", "LAST", "LAG", "LEAD", "CLASSIFIER", "MATCH_NUMBER",
                     "MATCH_SEQUENCE_NUMBER", "MATCH_STATUS", "PROCTIME")

# What an analyst from another dialect writes -> what cep calls it (for "did you mean"). Only names cep
# does not also accept: the ones it accepts are in the tables above.
SYNONYMS: dict[str, str] = {
    "FIRST_VALUE": "FIRST", "LAST_VALUE": "LAST", "ISNULL": "COALESCE", "ZEROIFNULL": "COALESCE",
    "IIF": "IFF", "LEN": "LENGTH", "CHAR_LENGTH": "LENGTH", "CHARACTER_LENGTH": "LENGTH", "CHARINDEX": "STRPOS",
    "INSTR": "STRPOS", "LOCATE": "POSITION", "DATEPART": "DATE_PART", "GETDATE": "CURRENT_TIMESTAMP",
    "SYSDATE": "CURRENT_TIMESTAMP", "SYSTIMESTAMP": "CURRENT_TIMESTAMP", "LOCALTIMESTAMP": "CURRENT_TIMESTAMP",
    "STDEV": "STDDEV", "VAR": "VARIANCE", "ROW_NUMBER": "MATCH_SEQUENCE_NUMBER", "GROUP_CONCAT": "LISTAGG",
    "ARRAY_CONCAT_AGG": "ARRAY_AGG", "REGEXP_MATCHES": "REGEXP_LIKE", "REGEXP_INSTR": "REGEXP_SUBSTR",
    "DATETIME_ADD": "DATEADD", "TIMESTAMP_ADD": "DATEADD", "DATETIME_DIFF": "DATEDIFF", "TIMESTAMP_DIFF": "DATEDIFF",
    "TRUNCATE": "TRUNC", "POW": "POWER", "FORMAT_DATETIME": "DATE_FORMAT",
    "STRFTIME": "DATE_FORMAT", "PARSE_TIMESTAMP": "TO_TIMESTAMP", "STR_TO_DATE": "TO_DATE",
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


def like_segments(pattern: str, escape: str | None) -> list[list]:
    """A LIKE pattern split at its unescaped ``%``: each segment a list of characters and ``ANY_CHAR``
    markers (an unescaped ``_``, as the object ``ANY``). ``escape`` must be one character and may precede
    only ``%``, ``_`` or itself (SQL, Spark)."""
    if escape is not None and len(escape) != 1:
        raise PatternError(f"the ESCAPE character must be one character, not {escape!r}")
    segments: list[list] = [[]]
    chars = iter(pattern)
    for char in chars:
        if char == escape:
            following = next(chars, None)
            if following is None:
                raise PatternError(f"the LIKE pattern {pattern!r} ends with its escape character {escape!r}")
            if following not in ("%", "_", escape):
                raise PatternError(f"in the LIKE pattern {pattern!r} the escape character {escape!r} may only "
                                   f"precede %, _ or itself, not {following!r}")
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

_REGEX_LIMITS = (("(?=", "lookahead"), ("(?!", "negative lookahead"), ("(?<=", "lookbehind"),
                 ("(?<!", "negative lookbehind"), ("(?>", "atomic groups"))


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
        raise PatternError(f"the regular expression {pattern!r} is not supported: {why} "
                           "(cep uses RE2 syntax, linear in the text)") from None


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
    "Y": "week-based year; the calendar year is yyyy", "w": "week of week-based year", "W": "week of month",
    "u": "day-of-week number; EEE is its name", "e": "localized day of week", "c": "localized day of week",
    "A": "milli of day", "n": "nano of second", "N": "nano of day", "p": "pad modifier",
}
# The letters cep formats and reads (matcher/sql/datetimes.py); Spark knows a few more (G, Q, F, V, z, O, X,
# x, Z: eras, quarters, zones), which cep refuses rather than guess.
DATETIME_LETTERS = "yMLdDHhkKmsSaE"
# Spark pattern fields that DuckDB's strftime writes exactly (same text for every value), and those its
# strptime reads exactly (the same strings accepted, the same value).
_STRFTIME = {
    "y": "%Y", "yyyy": "%Y", "yy": "%y", "M": "%-m", "MM": "%m", "MMM": "%b", "MMMM": "%B", "d": "%-d",
    "dd": "%d", "D": "%-j", "DDD": "%j", "H": "%-H", "HH": "%H", "h": "%-I", "hh": "%I", "m": "%-M", "mm": "%M",
    "s": "%-S", "ss": "%S", "SSS": "%g", "SSSSSS": "%f", "a": "%p", "E": "%a", "EE": "%a", "EEE": "%a",
    "EEEE": "%A",
}
_STRPTIME = {"yyyy": "%Y", "MM": "%m", "dd": "%d", "HH": "%H", "mm": "%M", "ss": "%S"}


def datetime_pattern(pattern: str) -> list[tuple[str, str]]:
    """A Spark datetime pattern as ('field', 'yyyy') and ('text', '-') pieces; PatternError when Spark
    refuses it or cep cannot run it."""
    out = []
    for found in _DATETIME_TOKEN.finditer(pattern):
        text = found.group(0)
        if text.startswith("'"):
            out.append(("text", text[1:-1].replace("''", "'") if len(text) > 2 else "'"))
        elif found.group(1):
            letter = text[0]
            if letter in _SPARK_REFUSED:
                raise PatternError(f"the datetime pattern {pattern!r} uses {text!r} ({_SPARK_REFUSED[letter]}), "
                                   "which Spark refuses")
            if letter not in DATETIME_LETTERS:
                raise PatternError(f"the datetime pattern {pattern!r} uses {text!r}, which cep does not support "
                                   "(yyyy MM MMM dd D HH hh mm ss SSS a EEE and quoted text are; quote other letters)")
            out.append(("field", text))
        elif text in "[]{}#":
            raise PatternError(f"the datetime pattern {pattern!r} uses {text!r}, which Spark reserves "
                               "(quote it to write it as text)")
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
            raise PatternError(f"the datetime pattern {pattern!r} uses {text!r}, which the python engine cannot "
                               f"{'read' if parsing else 'write'} exactly as Spark does (it can: {known})")
    return "".join(parts)
