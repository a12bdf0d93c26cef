"""What comes back from DuckDB, as Spark would give it: a result's columns as Spark's types (its HUGEINT SUMs
as BIGINTs) and DuckDB's errors as a plain sentence placed in the user's Spark SQL (part of the python engine,
beside the translation in cep/duckdb_sql.py)."""

from __future__ import annotations

import re

from cep.duckdb_nodes import ENGINE_ONLY_MARK, PLACE_MARK, Refusal

# Imported inside functions: pyarrow (heavy; `cep check` of a single clause needs none).


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
            ) from None
        table = table.set_column(index, pa.field(field.name, pa.int64()), column)
    return table


# The days and microseconds since 1970 of the first and last times Python's dates hold (0001-01-01 and
# 9999-12-31 23:59:59.999999), which the python engine's results are read as.
_PYTHON_DAYS = (-719162, 2932896)
_PYTHON_MICROSECONDS = (_PYTHON_DAYS[0] * 86_400_000_000, (_PYTHON_DAYS[1] + 1) * 86_400_000_000 - 1)


def refuse_times_python_cannot_hold(table) -> None:
    """A Refusal where a DATE or TIMESTAMP column of ``table`` (a DuckDB result) holds a time before year 1
    (``DATE '0001-01-01' - INTERVAL 1 DAY``, 1 BC) or after 9999 (``DATE '9999-12-31' + 14``): Spark holds
    them, but the python engine's results are read as Python's dates, which hold the years 1 to 9999; a
    Python OverflowError would be the user's only answer."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for index, field in enumerate(table.schema):
        if pa.types.is_date32(field.type):
            kind, (first, last), values = "DATE", _PYTHON_DAYS, table.column(index).cast(pa.int32())
        elif pa.types.is_timestamp(field.type) and field.type.unit == "us":
            kind, (first, last), values = "TIMESTAMP", _PYTHON_MICROSECONDS, table.column(index).cast(pa.int64())
        else:
            continue
        least, most = pc.min_max(values).values()
        if least.is_valid and (least.as_py() < first or most.as_py() > last):
            raise Refusal(
                f"column {field.name} holds a {kind} outside the years 1 to 9999, which Spark holds (the year 0 is "
                "1 BC) but the python engine cannot return (its dates are Python's): run it on Spark (cep run "
                "--engine spark), or keep the dates within those years",
                spark_too=True,
            )


_PLACE = re.compile(re.escape(PLACE_MARK) + r"(\d+)\+(\d+)(" + re.escape(ENGINE_ONLY_MARK) + "?): ")
# The end of DuckDB's message for the cast ``_fail`` raises: "Could not convert string '<message>' to INT32".
_FAILED_CAST = re.compile(r"' to INT32\s*$")
_FAILED_CALL = re.compile(r"'(\w+)\(([^)']*)\)'")
_QUOTED_NAME = re.compile(r'"([^"]+)"')
_SUM_OVERFLOW = re.compile(r"Type INT128 with value -?\d+ can't be cast because the value is out of range")
# sqlglot writes a function DuckDB does not have (substring_index): DuckDB refuses it before running anything.
MISSING_FUNCTION = re.compile(r"Catalog Error: (?:Scalar|Aggregate|Table) Function with name (\w+) does not exist")


def explain_duck_error(message: str, spark_text: str) -> tuple[str, int | None, int]:
    """DuckDB's error as (a sentence, the offset in ``spark_text`` of what failed or None, its length).
    DuckDB's own caret points into the translated text, which the user never wrote: the place is found by
    the function or the name the message quotes."""
    first = next((line.strip() for line in message.splitlines() if line.strip()), message.strip())
    first = re.sub(r"\s*You might need to add explicit type casts\.?", "", first)
    place = _PLACE.search(first)
    if place is not None:  # an error of Spark's ANSI mode, raised by the translation's error()
        sentence = _FAILED_CAST.sub("", first[place.end() :])
        if not place.group(3):
            sentence += " (as on Spark, in ANSI mode)"
        return sentence, int(place.group(1)), int(place.group(2))
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
    call = _FAILED_CALL.search(first)
    if call is not None:
        name, kinds = call.group(1), call.group(2)
        found = re.search(r"(?<![\w.])" + re.escape(name) + r"\s*\(", spark_text, re.I)
        if found is None and name.lower() in _OPERATORS:
            found = re.search(re.escape(_OPERATORS[name.lower()]), spark_text)
        sentence = f"the python engine (DuckDB) has no {name}() for {kinds or 'no arguments'}" if kinds else first
        return sentence, found.start() if found else None, len(found.group(0).rstrip("( ")) if found else 1
    for name in reversed(_QUOTED_NAME.findall(first)):  # the last name quoted is the one at fault
        found = re.search(r"(?<![\w`])`?" + re.escape(name) + r"`?(?![\w`])", spark_text, re.I)
        if found:
            return first, found.start(), len(found.group(0))
    return first, None, 1


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
