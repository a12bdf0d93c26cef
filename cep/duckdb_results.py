"""What comes back from DuckDB, as Spark would give it: a result's columns as Spark's types (its HUGEINT SUMs
as BIGINTs) and DuckDB's errors as a plain sentence placed in the user's Spark SQL (part of the python engine,
beside the translation in cep/duckdb_sql.py)."""

from __future__ import annotations

import re
from collections.abc import Callable

from cep.duckdb_names import mismatched_types, spark_type, spark_type_names, unresolved_name
from cep.duckdb_nodes import ENGINE_ONLY_MARK, PLACE_MARK, Refusal, place_of
from cep.duckdb_sql import parse_spark, spark_text

# Imported inside functions: pyarrow and sqlglot (heavy; `cep check` of a single clause needs none).


def spark_types(frame) -> dict[str, str]:
    """An Arrow table's or pandas DataFrame's columns as Spark SQL type names (those with one)."""
    import pyarrow as pa

    try:
        schema = frame.schema if isinstance(frame, pa.Table) else pa.Schema.from_pandas(frame, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return {}  # mixed values in a column: no type to tell (the typed rules then refuse)
    found = {}
    for field in schema:
        kind = field.type
        name = (
            "BOOLEAN"
            if pa.types.is_boolean(kind)
            else "TINYINT"
            if pa.types.is_int8(kind)
            else "SMALLINT"
            if pa.types.is_int16(kind)
            else "INT"
            if pa.types.is_int32(kind)
            else "BIGINT"
            if pa.types.is_integer(kind)
            else "FLOAT"
            if pa.types.is_float32(kind)
            else "DOUBLE"
            if pa.types.is_floating(kind)
            else "STRING"
            if pa.types.is_string(kind) or pa.types.is_large_string(kind)
            else "DATE"
            if pa.types.is_date(kind)
            else "TIMESTAMP"
            if pa.types.is_timestamp(kind)
            else f"DECIMAL({kind.precision}, {kind.scale})"
            if pa.types.is_decimal(kind)
            else None
        )
        if name is not None:
            found[field.name] = name
    return found


def hugeints_as_bigints(table, kinds: list[str]):
    """``table`` (a DuckDB result, its columns' DuckDB ``kinds``) with its HUGEINT columns as BIGINTs: Spark
    has no wider integer, and DuckDB's HUGEINT (its SUM of integers, and what is computed from one) is Spark's
    BIGINT. The translation casts the SUMs whose argument it can type; this catches the rest (sqlglot cannot
    type every argument: ``sum(decode(...))``), so a column never comes back as Arrow's DECIMAL(38, 0)."""
    import pyarrow as pa

    for index, kind in enumerate(kinds):
        if kind != "HUGEINT":
            continue
        field = table.schema.field(index)
        try:
            column = table.column(index).cast(pa.int64())
        except pa.ArrowInvalid:
            raise Refusal(
                f"integer overflow: column {field.name} does not fit a BIGINT (as on Spark, in ANSI mode)",
                spark_too=True,
                column=field.name,
            ) from None
        table = table.set_column(index, pa.field(field.name, pa.int64()), column)
    return table


def result_column_place(text: str, column: str) -> tuple[int | None, int]:
    """The place (offset, length) in ``text`` (Spark SQL) of the expression a result column named ``column``
    is selected as (``expression AS column``), or (None, 1) when no such alias is written."""
    from sqlglot import exp

    try:
        tree = parse_spark(text)
    except Exception:  # noqa: BLE001 - any sqlglot error: no tree to search
        return None, 1
    for alias in tree.find_all(exp.Alias):
        if alias.alias == column:
            return place_of(alias.this)
    return None, 1


def intervals_as_durations(table):
    """``table`` (a DuckDB result) with its INTERVAL columns as Spark returns a day-time interval (``ts2 - ts1``,
    ``d2 - d1``, ``INTERVAL '1' DAY``): a duration in microseconds (a Python timedelta), not DuckDB's (months,
    days, nanoseconds). A column that holds months is Spark's year-month interval (``INTERVAL '1' MONTH``),
    which PySpark cannot even collect: refused, naming the column."""
    import pyarrow as pa

    for index, field in enumerate(table.schema):
        if not pa.types.is_interval(field.type):
            continue
        values = table.column(index).to_pylist()
        if any(value is not None and value.months for value in values):
            raise Refusal(
                f"column {field.name} holds an interval of months or years (Spark's year-month interval), which "
                "the python engine cannot return as Spark does: add it to a DATE or TIMESTAMP",
                column=field.name,
            )
        micros = [None if v is None else v.days * 86_400_000_000 + v.nanoseconds // 1000 for v in values]
        column = pa.array(micros, pa.int64()).cast(pa.duration("us"))
        table = table.set_column(index, pa.field(field.name, pa.duration("us")), column)
    return table


# The first and last day since 1970 that Python's dates hold (0001-01-01 and 9999-12-31), and a time unit's
# count a day.
_PYTHON_DAYS = (-719162, 2932896)
_PER_DAY = {"s": 86_400, "ms": 86_400_000, "us": 86_400_000_000, "ns": 86_400_000_000_000}


def time_python_cannot_hold(table) -> tuple[str, str] | None:
    """(column, DATE or TIMESTAMP) of the first DATE or TIMESTAMP column of ``table`` (Arrow, any time unit)
    holding a time before year 1 or after 9999, or None. Spark holds them (the year 0 is 1 BC), but cep reads
    results as Python's dates, which hold the years 1 to 9999: Python's OverflowError would be the only answer.
    Both engines' results are checked here (``refuse_times_python_cannot_hold``, and ``cep run`` on Spark)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for index, field in enumerate(table.schema):
        if pa.types.is_date32(field.type):
            kind, per_day, values = "DATE", 1, table.column(index).cast(pa.int32())
        elif pa.types.is_timestamp(field.type):
            kind, per_day, values = "TIMESTAMP", _PER_DAY[field.type.unit], table.column(index).cast(pa.int64())
        else:
            continue
        least, most = pc.min_max(values).values()
        first, last = _PYTHON_DAYS[0] * per_day, (_PYTHON_DAYS[1] + 1) * per_day - 1
        if least.is_valid and (least.as_py() < first or most.as_py() > last):
            return field.name, kind
    return None


def refuse_times_python_cannot_hold(table) -> None:
    """A Refusal where a column of ``table`` (a DuckDB result) holds a time Python's dates cannot
    (``DATE '0001-01-01' - INTERVAL 1 DAY``, ``DATE '9999-12-31' + 14``: ``time_python_cannot_hold``)."""
    found = time_python_cannot_hold(table)
    if found is not None:
        column, kind = found
        raise Refusal(
            f"column {column} holds a {kind} outside the years 1 to 9999, which Spark holds (the year 0 is "
            "1 BC) but the python engine cannot return (its dates are Python's): run it on Spark (cep run "
            "--engine spark), or keep the dates within those years",
            spark_too=True,
            column=column,
        )


_PLACE = re.compile(re.escape(PLACE_MARK) + r"(\d*)\+(\d+)(" + re.escape(ENGINE_ONLY_MARK) + "?): ")
# The end of DuckDB's message for the cast ``_fail`` raises: "Could not convert string '<message>' to INT32".
_FAILED_CAST = re.compile(r"' to INT32\s*$")
# DuckDB's "No function matches ... '+(DATE, DECIMAL(2,1))'": a type's own parentheses inside the list.
_FAILED_CALL = re.compile(r"'(\w+|[-+*/%|&^<>=!~]+)\(((?:[^()']|\([^()']*\))*)\)'")
# An exception a translation's Python function (a UDF) raised: DuckDB prefixes its class and its own words.
_UDF_FAILURE = re.compile(r"Python exception occurred while executing the UDF: \w+: ")
_QUOTED_NAME = re.compile(r'"([^"]+)"')
_SUM_OVERFLOW = re.compile(r"Type INT128 with value -?\d+ can't be cast because the value is out of range")
# sqlglot writes a function DuckDB does not have (substring_index): DuckDB refuses it before running anything.
MISSING_FUNCTION = re.compile(r"Catalog Error: (?:Scalar|Aggregate|Table) Function with name (\w+) does not exist")


# DuckDB's sentence for an operator that Spark refuses as well says so, and then gives no hint to run it on Spark.
SPARK_REFUSES_IT_TOO = "Spark refuses it too"
# A DATE beside a number of these types: no operator on DuckDB, and no date_add on Spark.
_DATE_REFUSES = frozenset({"DECIMAL", "DOUBLE", "FLOAT"})


def explain_duck_error(message: str, spark_text: str) -> tuple[str, int | None, int]:
    """DuckDB's error as (a sentence, the offset in ``spark_text`` of what failed or None, its length).
    DuckDB's own caret points into the translated text, which the user never wrote: the place is found by
    the function or the name the message quotes."""
    first = next((line.strip() for line in message.splitlines() if line.strip()), message.strip())
    first = re.sub(r"\s*You might need to add explicit type casts\.?", "", first)
    first = _UDF_FAILURE.sub("", first)  # the UDF's own sentence is the one for the user
    place = _PLACE.search(first)
    if place is not None:  # an error of Spark's ANSI mode, raised by the translation's error()
        sentence = _FAILED_CAST.sub("", first[place.end() :])
        if not place.group(3):
            sentence += " (as on Spark, in ANSI mode)"
        return sentence, int(place.group(1)) if place.group(1) else None, int(place.group(2))
    if _SUM_OVERFLOW.search(first):  # the cast of DuckDB's HUGEINT SUM to Spark's BIGINT
        found = re.search(r"(?<![\w.])sum\s*\(", spark_text, re.I)
        sentence = "integer overflow: the SUM does not fit a BIGINT (as on Spark, in ANSI mode)"
        return sentence, found.start() if found else None, 3
    missing = MISSING_FUNCTION.search(first)
    if missing is not None:
        name = missing.group(1)
        found = re.search(r"(?<![\w.])" + re.escape(name) + r"\s*\(", spark_text, re.I)
        sentence = f"the python engine cannot run Spark's function {name.upper()}() (DuckDB has none of that name)"
        return sentence, found.start() if found else None, len(name) if found else 1
    named = unresolved_name(message, spark_text) or mismatched_types(first, spark_text)
    if named is not None:
        return named
    call = _FAILED_CALL.search(first)
    if call is not None:
        name, kinds = call.group(1), call.group(2)
        found = re.search(r"(?<![\w.])" + re.escape(name) + r"\s*\(", spark_text, re.I)
        kinds = spark_type_names(kinds)
        if name.lower() in _OPERATORS:  # placed by failing_expression: the text may hold the operator elsewhere
            sentence = f"cannot apply {_OPERATORS[name.lower()]} to {kinds.replace(', ', ' and ')}"
            operands = kinds.split(", ")
            if _OPERATORS[name.lower()] in "+-" and "DATE" in operands and _DATE_REFUSES & {o[:7] for o in operands}:
                # Spark's DATE + n is date_add(d, n), which takes an INT of days: its DATATYPE_MISMATCH as well
                sentence += f" ({SPARK_REFUSES_IT_TOO}: DATE + n takes an INT, SMALLINT or TINYINT of days)"
            return sentence, None, 1
        if found is None:  # a function of the translation's, not the user's
            sentence = (
                f"the python engine cannot compute this for {kinds or 'no arguments'} (DuckDB has no {name}() for them)"
            )
        else:
            sentence = f"the python engine (DuckDB) has no {name}() for {kinds or 'no arguments'}"
        return sentence, found.start() if found else None, len(found.group(0).rstrip("( ")) if found else 1
    run_time = run_time_sentence(first)
    if run_time is not None:  # placed by failing_expression, which runs the statement again
        return run_time, None, 1
    sentence = spark_type_names(_ERROR_KIND.sub("", first))  # DuckDB's kind of error ("Binder Error: ") is no help
    for name in reversed(_QUOTED_NAME.findall(first)):  # the last name quoted is the one at fault
        found = re.search(r"(?<![\w`])`?" + re.escape(name) + r"`?(?![\w`])", spark_text, re.I)
        if found:
            return sentence, found.start(), len(found.group(0))
    return sentence, None, 1


_OPERATORS = {
    "+": "+",
    "-": "-",
    "*": "*",
    "/": "/",
    "%": "%",
    "subtract": "-",
    "add": "+",
    "multiply": "*",
    "divide": "/",
}


# ------------------------------------------------------------------------------------ run-time errors

_ANSI = " (as on Spark, in ANSI mode)"
# DuckDB names the column a failed cast read ("when casting from source column i"); cep places the cast instead.
_SOURCE_COLUMN = r"(?: when casting from source column .+)?$"


# DuckDB's errors at run time (a value out of its type's range), each as Spark's kind of sentence: what
# failed, on which values, of which types (the groups named ``source`` and ``target``, in Spark's names);
# those that say so fail on Spark too (its ANSI mode).
_ENGINE_ONLY = "the python engine cannot compute this"
_OUT_OF_RANGE = "cannot be cast to {target}: it is out of that type's range" + _ANSI
_RUN_TIME: tuple[tuple[str, str], ...] = (
    (
        r"Overflow in (?:addition|subtraction|multiplication|division) of (?P<target>\w+) \((?P<value>.+)\)!?$",
        "integer overflow: {value} does not fit a {target}" + _ANSI,
    ),
    (r"Overflow in division of (?P<value>.+)$", "integer overflow: {value} does not fit a BIGINT" + _ANSI),
    (r"Overflow on abs\((?P<value>.+)\)$", "integer overflow: abs({value}) does not fit its argument's type" + _ANSI),
    (
        r"Overflow in negation of numeric value!?$",
        "integer overflow: the negation does not fit its operand's type" + _ANSI,
    ),
    (
        r"Type (?P<source>.+?) with value (?P<value>.+?) can't be cast because the value is out of range for the "
        r"destination type (?P<target>.+?)" + _SOURCE_COLUMN,
        "the value {value} of type {source} " + _OUT_OF_RANGE,
    ),
    (
        r'Casting value "(?P<value>.+?)" to type (?P<target>.+?) failed: value is out of range',
        "the value {value} " + _OUT_OF_RANGE,
    ),
    (r"Could not cast value (?P<value>.+?) to (?P<target>.+?)" + _SOURCE_COLUMN, "the value {value} " + _OUT_OF_RANGE),
    # Text read as a time where the statement compares or casts it to one (`s IN (ts, ...)`, `CAST(s AS DATE)`).
    (
        r'invalid (?P<target>timestamp|date) field format: "(?P<value>.*?)", expected format is',
        "the text '{value}' cannot be cast to {target}: it is not a {target}" + _ANSI,
    ),
    # Spark gives a value for these (its arithmetic of times wraps around: from_unixtime of a huge number is
    # a time in 1969), which the python engine cannot give: its sentence says so, and points to Spark.
    (r"Epoch seconds out of range for ", _ENGINE_ONLY + ": the seconds since 1970 are out of the TIMESTAMP range"),
    (
        r"Date and time not in timestamp range$|Date out of range$",
        _ENGINE_ONLY + ": the result is out of the range of DuckDB's dates and times",
    ),
)
_ERROR_KIND = re.compile(r"^(?:[A-Z][a-z]+ )+Error: ")


def run_time_sentence(first_line: str) -> str | None:
    """DuckDB's error at run time (the first line of its message) as a sentence, or None."""
    detail = _ERROR_KIND.sub("", first_line)
    for pattern, sentence in _RUN_TIME:
        found = re.search(pattern, detail)
        if found is not None:
            named = found.groupdict()
            return sentence.format(**{key: spark_type(v.upper()) if key != "value" else v for key, v in named.items()})
    return None


def ran_into(exc) -> bool:
    """Whether DuckDB's error ``exc`` came from a value at run time (not from the statement's text)."""
    import duckdb

    return isinstance(exc, (duckdb.OutOfRangeException, duckdb.ConversionException, duckdb.InvalidInputException))


# The value in DuckDB's message of a run-time error: "Could not cast value 1200 to DECIMAL(3,0)", "Could not
# convert string 'abc' to INT32", "field format: "x"". Which row fails first depends on the order DuckDB reads
# them in, and a window reads them by its partitions: with the window replaced by its operand, a failure of
# the same expression can name another row's value.
_VALUE_IN_MESSAGE = re.compile(r"'(?:[^']|'')*'|\"[^\"]*\"|(?<=value )-?[0-9][0-9.eE+-]*")


def same_failure(message: str, other: str) -> bool:
    """Whether two of DuckDB's run-time errors (their first lines) are the same failure, whatever value each
    names."""
    return _VALUE_IN_MESSAGE.sub("?", message) == _VALUE_IN_MESSAGE.sub("?", other)


# Each probe runs the statement again over the whole input, so the search stops after this many: a bisection
# of the statement's expressions (log2 of them, twice), a step down each level of the one that holds the error,
# and the check of its operands find the expression in a statement of a few hundred expressions nested a few
# levels deep; past it the error keeps the smallest expression found so far, or the statement's start.
PROBES_AT_MOST = 32


def failing_expression(text: str, persists: Callable[[str], bool | None]) -> tuple[int, int] | None:
    """The place (offset, length) in ``text`` (Spark SQL) of the expression a run-time error comes from, or
    None. DuckDB's message names neither the expression nor its place (its caret, when it has one, points
    into the translation), so the statement runs again, changed: ``persists(text)`` is True when ``text``
    fails with the same error, False when it fails otherwise or not at all, None when it cannot tell (the
    text no longer translates or binds). First the outermost expressions that hold the error (it goes when
    they are NULL), by halves; then down into the operand that fails alone (the error stays when it stands
    for the expression); the expression found fails itself when the error goes with each of its operands
    standing for it. Otherwise it only passes the failing value on (a column of a subquery) or feeds it, and
    the search goes on among the other expressions. The values are searched before the conditions (a WHERE
    made NULL drops every row, and every error with them)."""
    from sqlglot import exp

    try:
        tree = parse_spark(text)
    except Exception:  # noqa: BLE001 - any sqlglot error: no tree to search
        return None
    search = _Search(tree, persists)
    try:
        if search.probe([], None) is not True:  # the text written back must fail as the original did
            return None
        candidates = _computed(tree)
        conditions = [node for node in candidates if node.find_ancestor(exp.Where, exp.Having, exp.Qualify, exp.Join)]
        values = [node for node in candidates if not any(node is condition for condition in conditions)]
        for group in (values, conditions):
            while group and search.probe(group, None) is not True:  # None: the halves may tell
                outermost = search.bisect(group)
                if outermost is None:
                    break
                if search.descend(outermost):
                    return _span(text, search.found)
                group = [node for node in group if node is not outermost]
    except _OutOfProbes:
        pass
    return _span(text, search.found) if search.found is not None else None


class _OutOfProbes(Exception):
    pass


class _Search:
    def __init__(self, tree, persists: Callable[[str], bool | None]) -> None:
        self.tree, self.persists, self.probes, self.found = tree, persists, 0, None

    def probe(self, nodes: list, stand_in) -> bool | None:
        """Whether the error stays with ``nodes`` replaced by NULL, or the one node by ``stand_in``."""
        from sqlglot import exp

        if self.probes >= PROBES_AT_MOST:
            raise _OutOfProbes
        self.probes += 1
        new = [node.replace(exp.Null() if stand_in is None else stand_in.copy()) for node in nodes]
        try:
            return self.persists(spark_text(self.tree))
        finally:
            for replaced, node in zip(new, nodes):
                replaced.replace(node)

    def bisect(self, group: list):
        """The one expression of ``group`` that holds the error (it goes when they are all NULL), or None."""
        while len(group) > 1:
            half, rest = group[: len(group) // 2], group[len(group) // 2 :]
            # Gone with a part NULL: the part holds the error; still there: the other part holds it.
            without_half = self.probe(half, None)
            if without_half is None:
                without_rest = self.probe(rest, None)
                if without_rest is None:
                    return None  # it cannot be told
                group = rest if without_rest is False else half
            else:
                group = half if without_half is False else rest
        return group[0]

    def failing_within(self, node):
        """The expression under ``node`` that fails alone (the error stays when it stands for ``node``), or
        None. One that cannot stand for it (an aggregate in a window's place) gives way to its own operands."""
        waiting = _computed(node, below=True)
        while waiting:
            inner = waiting.pop(0)
            fails = self.probe([node], inner)
            if fails:
                return inner
            if fails is None:
                waiting[:0] = _computed(inner, below=True)
        return None

    def descend(self, node) -> bool:
        """Down from ``node`` (which holds the error) to the expression that fails: True when found (in
        ``self.found``), False when the error only passes through ``node``."""
        from sqlglot import exp

        self.found = self.found or node  # the place to give if the probes run out
        while True:
            inner = self.failing_within(node)
            if inner is None:
                break
            node = inner
        operands = [x for x in node.iter_expressions() if not isinstance(x, exp.DataType)]
        if any(self.probe([node], operand) is True for operand in operands):
            return False
        self.found = node
        return True


def _computed(root, *, below: bool = False) -> list:
    """The outermost expressions that compute a value (a call, an operator, a CASE) under ``root``."""
    from sqlglot import exp

    found, stack = [], list(reversed(list(root.iter_expressions()))) if below else [root]
    while stack:
        node = stack.pop()
        computes = isinstance(node, (exp.Func, exp.Binary, exp.Unary, exp.Case, exp.Predicate, exp.Window))
        within_case = isinstance(node, exp.If) and isinstance(node.parent, exp.Case)  # a WHEN ... THEN ...
        if computes and not isinstance(node, exp.Paren) and not within_case and node is not root:
            found.append(node)
        else:
            stack.extend(reversed(list(node.iter_expressions())))
    return found


def _span(text: str, node) -> tuple[int, int] | None:
    """The offset and length of ``node`` in ``text``: from its first token to its last, with the keywords,
    signs and parentheses that open it (which have no place in sqlglot's tree) and the closing parentheses
    of the calls it opens."""
    starts = [n.meta["start"] for n in node.walk() if "start" in n.meta]
    ends = [n.meta["end"] for n in node.walk() if "end" in n.meta]
    if not starts:
        return None
    start, end = min(starts), max(ends)
    for opening in reversed(_openings(node)):
        found = re.search(opening + r"\s*$", text[:start], re.I)
        if found is not None:
            start = found.start()
    depth = text.count("(", start, end + 1) - text.count(")", start, end + 1)
    while depth > 0 and end + 1 < len(text):  # a call opened and not closed: to its closing parenthesis
        end += 1
        depth += {"(": 1, ")": -1}.get(text[end], 0)
    return start, end - start + 1


def _openings(node) -> list[str]:
    """What opens ``node`` and its first operands, outermost first, as patterns of their text."""
    from sqlglot import exp

    found = []
    while isinstance(node, exp.Expression):
        if isinstance(node, exp.Case):
            found.append(r"\bcase")
            node = (node.args.get("ifs") or [None])[0]
            continue
        opening = next((text for kind, text in _OPENING.items() if isinstance(node, getattr(exp, kind))), None)
        if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal) and node.this.is_string:
            opening = _TYPED_LITERAL_OR_CAST  # DATE '2020-01-01' is sqlglot's cast of the text
        if opening is not None:
            found.append(opening)
        node = node.args.get("this")
    return found


# The text before a node's first operand, by its kind (sqlglot's class name).
_OPENING = {
    "Neg": "-",
    "Paren": r"\(",
    "Not": r"\bnot",
    "If": r"\bwhen",
    "TryCast": r"\b(?:try_)?cast\s*\(",
    "Cast": r"\bcast\s*\(",
}
# A typed literal's keyword (sqlglot's tree holds it as a CAST of its text, the keyword without a place).
_TYPED_LITERAL_OR_CAST = r"\b(?:(?:try_)?cast\s*\(|date|timestamp(?:_ntz|_ltz)?)"
