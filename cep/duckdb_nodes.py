"""The pieces the translation of Spark SQL to DuckDB SQL is built from (cep/duckdb_sql.py and
cep/duckdb_functions.py): the refusal, the types the rules read, and DuckDB calls written as is."""

from __future__ import annotations

# Imported inside functions: sqlglot (heavy; `cep check` of a single clause needs none of it).


class Refusal(Exception):
    """The python engine cannot run a part of the statement as Spark does. ``start``: the offset of the
    part in the Spark SQL text that was translated (None when it cannot be told). ``spark_too``: Spark
    refuses it as well (a cast its ANSI rules do not allow), so the error is the statement's, not the engine's.
    ``untyped``: refused only because a value's type could not be told, which `cep check` (no tables) leaves
    to the run."""

    def __init__(
        self, message: str, start: int | None = None, length: int = 1, *, spark_too: bool = False, untyped: bool = False
    ) -> None:
        super().__init__(message)
        self.message, self.start, self.length, self.spark_too = message, start, length, spark_too
        self.untyped = untyped


INTEGRAL = ("TINYINT", "SMALLINT", "INT", "BIGINT")


FRACTIONAL = ("FLOAT", "DOUBLE", "DECIMAL")


TEXT_TYPES = ("VARCHAR", "TEXT", "CHAR", "NCHAR", "NVARCHAR")


TIME_TYPES = ("TIMESTAMP", "TIMESTAMPTZ", "TIMESTAMPLTZ", "TIMESTAMPNTZ", "DATETIME")


TYPED_META = "cep_typed"  # the meta key of a node whose type the rules need


def type_of(node, types: dict[int, str]) -> str | None:
    found = types.get(node.meta.get(TYPED_META))
    if found in ("INT", "INTEGER", "UINT"):
        return "INT"
    return found


def place_of(node) -> tuple[int | None, int]:
    """The offset and length of ``node`` in the text sqlglot parsed: its own position, else its first
    descendant's."""
    positions = [n.meta["start"] for n in node.walk() if "start" in n.meta]
    if "start" in node.meta:
        return node.meta["start"], node.meta.get("end", node.meta["start"]) - node.meta["start"] + 1
    return (min(positions), 1) if positions else (None, 1)


def call_duck(name: str, *args):
    """A call of DuckDB's function ``name``, written as is."""
    from sqlglot import exp

    return exp.Anonymous(this=name, expressions=list(args))


PLACE_MARK = "cep@"


def fail_with(message: str, where: tuple[int | None, int]):
    """An expression that raises ``message`` when DuckDB evaluates it (Spark's ANSI errors), with the place
    of the expression for ``explain_duck_error``. Not DuckDB's ``error()``: it is volatile, and DuckDB
    refuses a volatile expression in a window's ORDER BY (``rank() OVER (ORDER BY i % i)``, which Spark
    runs). A cast of the message to an integer fails as surely and is deterministic; DuckDB's constant
    folding leaves an expression that fails for it to run time, so only a row that takes the branch fails.
    Its type is NULL's (``CASE WHEN ... THEN NULL END``), as error()'s is, so it fits a branch of any type."""
    from sqlglot import exp

    start, length = where
    place = f"{PLACE_MARK}{start}+{length}: " if start is not None else ""
    raises = exp.Cast(this=exp.Literal.string(place + message), to=exp.DataType.build("INT"))
    return exp.Case(ifs=[exp.If(this=exp.Is(this=raises, expression=exp.Null()), true=exp.Null())])


def epoch_seconds(value, per_second: int = 1_000_000):
    """Whole seconds since 1970 of a timestamp, rounded down (Spark's CAST(ts AS BIGINT), unix_timestamp,
    unix_seconds); whole milliseconds with ``per_second`` 1000 (unix_millis)."""
    from sqlglot import exp

    micros = call_duck("epoch_us", exp.Cast(this=value, to=exp.DataType.build("TIMESTAMP")))
    million = exp.Literal.number(per_second)
    below = exp.Mod(
        this=exp.Paren(
            this=exp.Add(this=exp.Mod(this=micros.copy(), expression=million.copy()), expression=million.copy())
        ),
        expression=million.copy(),
    )
    return exp.IntDiv(
        this=exp.Paren(this=exp.Sub(this=micros, expression=exp.Paren(this=below))), expression=million.copy()
    )
