"""The two SQL engines a whole statement runs on (``cep/statement.py`` drives them), and their errors as CepErrors.

``SparkEngine`` runs the statement's SQL as Spark SQL and each clause with ``Query.on_spark``; ``DuckEngine`` runs
it in DuckDB, translated from Spark SQL by ``cep/duckdb_sql.py`` (or refused before anything runs), and each clause
with ``Query.run``. Both answer the same calls (register a table, run a piece of SQL, match a clause, count what it
read and found, put its rows in the query's order), so the statement's run (``statement._Run``) is one piece of
code for either engine. An engine's error becomes a CepError at its place in the user's text (``sql_error``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

from cep.duckdb_column_names import refuse_unnamed_columns
from cep.duckdb_functions import calls_own_functions, register_functions
from cep.duckdb_names import aliases_read_in_where, scope_probe, unresolved_name
from cep.duckdb_optimizer import disabled_optimizers
from cep.duckdb_results import (
    MISSING_FUNCTION,
    SPARK_REFUSES_IT_TOO,
    explain_duck_error,
    failing_expression,
    hugeints_as_bigints,
    intervals_as_durations,
    ran_into,
    refuse_times_python_cannot_hold,
    result_column_place,
    same_failure,
    spark_types,
)
from cep.duckdb_sql import ENGINE_HINT, Refusal, to_duckdb_sql
from cep.grammar.errors import CepError, CepSemanticError, CepSyntaxError, error_from_text
from cep.grammar.statement import SPARK, Rendered
from cep.grammar.suggestions import names_hint
from cep.grammar.tokens import span_of
from cep.matcher.rows.tables import kind_of
from cep.matcher.rows.validate import refuse_odd_kinds
from cep.matcher.vector.arrays import groupers
from cep.query import Query
from cep.spark_bridge.spark.types import normalize_type_name

# Imported inside functions: pyspark, duckdb, pyarrow and pandas (heavy or optional; `cep check` needs none).

MATCH_NUMBER_COLUMN = "_cep_match"  # a hidden measure: which match a row belongs to (for the match count)
ORDINAL_COLUMN = "_cep_ord"  # a hidden column: the row's place in the matcher's output (for the defined order)


@dataclasses.dataclass
class ClauseStats:
    """What matching one clause read and found (``cep run``'s summary line)."""

    events: int = 0
    partitions: int = 0
    matches: int = 0


# ---------------------------------------------------------------------------------------- errors


def sql_error(
    message: str,
    rendered: Rendered,
    text: str,
    offset: int | None,
    *,
    syntax: bool,
    length: int = 1,
    hint: str | None = None,
    code: str | None = None,
) -> CepError:
    """An engine's error as a CepError pointing into the user's text."""
    start = rendered.position(offset) if offset is not None else rendered.anchor
    start = min(max(start, 0), max(len(text) - 1, 0))
    span = span_of(text, start, min(len(text), start + max(length, 1)))
    kind = CepSyntaxError if syntax else CepSemanticError
    if hint is None and re.search(r"column|cannot be resolved|not found", message, re.I) and '"' in text:
        hint = "double quotes name columns (as in the SQL standard); write text in single quotes: 'ACME'"
    return kind(message, code=code or ("E0130" if syntax else "E0250"), span=span, source=text, hint=hint)


def refuse_trailing_comma(text: str) -> None:
    """A Refusal where a SELECT list ends in a comma (``SELECT a, FROM t``): Spark refuses it ("Trailing comma
    detected in SELECT clause"), and sqlglot reads the list without it, so the python engine answered."""
    import sqlglot
    from sqlglot.tokens import TokenType

    tokens = sqlglot.tokenize(text, read="spark")
    for before, after in zip(tokens, tokens[1:]):
        if before.token_type == TokenType.COMMA and after.token_type == TokenType.FROM:
            sentence = "a SELECT list ends in a comma before FROM, which Spark refuses"
            raise Refusal(sentence, before.start, spark_too=True)


# Words of a DuckDB error's sentence that say Spark fails alike: no hint to run the statement on Spark.
_SPARK_FAILS_ALIKE = ("ANSI mode", "cannot be resolved", SPARK_REFUSES_IT_TOO)


def refusal_error(refusal: Refusal, rendered: Rendered, text: str) -> CepError:
    """The python engine's refusal to translate a part of the statement, at its place in the user's text:
    E0252 with the way to Spark, or the statement's own error where Spark refuses it as well."""
    if refusal.spark_too:
        return sql_error(refusal.message, rendered, text, refusal.start, syntax=False, length=refusal.length)
    return sql_error(
        f"the python engine refuses this before running: {refusal.message}",
        rendered,
        text,
        refusal.start,
        syntax=False,
        length=refusal.length,
        code="E0252",
        hint=ENGINE_HINT,
    )


# sqlglot's words for a clause or operator whose operand is missing (``WHERE`` at the end, ``a >``): its
# class names are no help to the user.
_MISSING_PART = re.compile(r"Required keyword: '\w+' missing for <class '[\w.]+'>")


def sqlglot_error(exc, rendered: Rendered, text: str) -> CepError:
    """A sqlglot parse error (line and column in ``rendered``) as a CepError in the user's text."""
    first = (exc.errors or [{}])[0]
    line, col = first.get("line"), first.get("col")
    highlight = first.get("highlight") or " "
    offset = None
    if line:
        lines = rendered.text.split("\n")
        offset = sum(len(part) + 1 for part in lines[: line - 1]) + max(col - len(highlight), 0)
    description = first.get("description") or first_line(str(exc))
    if description.startswith("Invalid expression / Unexpected token"):
        description = f"unexpected {highlight.strip()!r}"
    elif _MISSING_PART.match(description):  # "Required keyword: 'this' missing for <class '...Where'>"
        description = f"{highlight.strip()!r} is incomplete: something must follow it"
    return sql_error(
        f"syntax error in the SQL around MATCH_RECOGNIZE: {description}",
        rendered,
        text,
        offset,
        syntax=True,
        length=len(highlight),
    )


def first_line(text: str) -> str:
    return next((line.strip() for line in str(text).splitlines() if line.strip()), str(text).strip())


# ------------------------------------------------------------------------------------------ Spark

# What a failure inside Spark is raised as on the driver (a task's Python error arrives as PythonException).
SPARK_FAILURES = ("PythonException", "Py4JJavaError", "SparkRuntimeException", "AnalysisException", "PySparkException")


def spark_cep_error(exc: BaseException) -> CepError | None:
    """The CepError a Spark task raised (``spark_bridge.spark.batch._shipped``: a DEFINE that overflows, a
    CAST that fails), raised again on the driver with its class, code, sentence and span, to be rendered
    against the user's file as the python engine's; None for any other failure. ``collect()`` and the other
    actions raise Spark's exception: ``raise cep.spark_cep_error(exc) or exc`` gives the CepError."""
    if isinstance(exc, CepError):
        return None
    name, module = type(exc).__name__, type(exc).__module__
    if name not in SPARK_FAILURES and not module.startswith(("pyspark", "py4j")):
        return None
    return error_from_text(str(exc))


def spark_reader(spark) -> Callable:
    def read(path: str):
        kind = path.rsplit(".", 1)[-1].lower() if "." in path else "parquet"
        if kind == "csv":
            return spark.read.option("header", True).option("inferSchema", True).csv(path)
        if kind in ("json", "jsonl", "ndjson"):
            return spark.read.json(path)
        return spark.read.parquet(path)

    return read


class SparkEngine:
    dialect = SPARK

    def __init__(self, spark, read_path: Callable) -> None:
        self.spark, self.read_path = spark, read_path
        self.registered: list[str] = []
        self.persisted: list = []

    def table(self, data):
        return data

    def register(self, name: str, frame) -> None:
        frame.createOrReplaceTempView(name)
        self.registered.append(name)

    def release(self) -> None:
        # A DataFrame made from a view keeps the view's plan: the views can go once the statement is analysed.
        for name in self.registered:
            self.spark.catalog.dropTempView(name)

    def sql(self, rendered: Rendered):
        # PySpark logs every SQL error it raises as JSON on stderr; cep turns it into a CepError instead.
        # The logger must be PySpark's own class: made by logging.getLogger it would be a plain Logger, and
        # PySpark's next SQL error in this process would fail inside its logging call (errorClass=...).
        from pyspark.logger import PySparkLogger  # Spark's: imported only when Spark runs the statement

        logger = PySparkLogger.getLogger("SQLQueryContextLogger")
        disabled, logger.disabled = logger.disabled, True
        try:
            return self.spark.sql(rendered.text)
        finally:
            logger.disabled = disabled

    def columns(self, frame) -> list[str]:
        return list(frame.columns)

    def drop(self, frame, names: list[str]):
        return frame.drop(*names) if names else frame

    def missing_table(self, exc) -> str | None:
        if getattr(exc, "getCondition", lambda: None)() != "TABLE_OR_VIEW_NOT_FOUND":
            return None
        name = (exc.getMessageParameters() or {}).get("relationName", "")
        return name.replace("`", "") or None

    def error(self, exc, rendered: Rendered, text: str) -> CepError:
        if isinstance(exc, CepError):
            return exc
        name = type(exc).__name__
        if name not in ("ParseException", "AnalysisException") and not type(exc).__module__.startswith(
            ("pyspark", "py4j")
        ):
            raise exc
        message = first_line(getattr(exc, "getMessage", lambda: str(exc))() or str(exc))
        message = re.sub(r"\s*SQLSTATE: \w+", "", message)
        message = re.sub(r"^\[[A-Z_.]+\] ", "", message)
        offset, length = None, 1
        contexts = getattr(exc, "getQueryContext", lambda: [])() or []
        for context in contexts:
            try:
                offset, length = context.startIndex(), context.stopIndex() - context.startIndex() + 1
                break
            except Exception:  # noqa: BLE001 - a DataFrame context has no indices
                continue
        found = re.search(r"\(line (\d+), pos (\d+)\)", str(exc))
        if offset is None and found:
            line, pos = int(found.group(1)), int(found.group(2))
            lines = rendered.text.split("\n")
            offset = sum(len(part) + 1 for part in lines[: line - 1]) + pos
        message = re.sub(r"\s*\(line \d+, pos \d+\)", "", message)
        return sql_error(
            f"Spark SQL: {message}", rendered, text, offset, syntax=name == "ParseException", length=length
        )

    def column_values(self, frame, subquery, text: str) -> list:
        if len(frame.columns) != 1:
            raise CepSemanticError(
                f"an IN subquery must give one column, not {len(frame.columns)}",
                code="E0251",
                span=span_of(text, subquery.start, subquery.end),
                source=text,
            )
        return [row[0] for row in frame.distinct().collect()]

    def match(self, query: Query, frame, options: dict, *, ordered: bool):
        if ordered and not frame.isStreaming:
            return query.on_spark(frame, ordinal=ORDINAL_COLUMN, **options)
        return query.on_spark(frame, **options)

    def clause_stats(self, query: Query, frame, out) -> ClauseStats:
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        out.persist(StorageLevel.MEMORY_AND_DISK)
        self.persisted.append(out)
        partition = list(query.plan.partition_names(frame.columns))
        keys = [F.col(SPARK.quote(c)) for c in partition]
        if keys:
            row = frame.groupBy(*keys).count().agg(F.sum("count"), F.count(F.lit(1))).first()
            events, partitions = int(row[0] or 0), int(row[1] or 0)
        else:
            events = frame.count()
            partitions = 1 if events else 0
        numbered = out.where(F.col(MATCH_NUMBER_COLUMN).isNotNull())
        matches = numbered.select(*keys, F.col(MATCH_NUMBER_COLUMN)).distinct().count()
        return ClauseStats(events, partitions, matches)

    def in_order(self, query: Query, frame, out):
        if frame.isStreaming:
            return out
        from pyspark.sql import functions as F

        partition = list(query.plan.partition_names(frame.columns))
        order = [F.col(SPARK.quote(c)).asc_nulls_first() for c in partition] + [F.col(ORDINAL_COLUMN)]
        return out.orderBy(*order).drop(ORDINAL_COLUMN)


# ------------------------------------------------------------------------------------------ DuckDB


def arrow_reader(path: str):
    import pyarrow.csv as pcsv
    import pyarrow.json as pjson
    import pyarrow.parquet as pq

    kind = path.rsplit(".", 1)[-1].lower() if "." in path else "parquet"
    if kind == "csv":
        return pcsv.read_csv(path)
    if kind in ("json", "jsonl", "ndjson"):
        return pjson.read_json(path)
    return pq.read_table(path)


class DuckEngine:
    dialect = SPARK  # the statement is Spark SQL; duckdb_sql.to_duckdb_sql translates it

    def __init__(self, read_path: Callable) -> None:
        import duckdb

        self.read_path = read_path
        self.con = duckdb.connect()
        # Never read a Python variable or a file the statement names: only the tables cep registers.
        self.con.execute("SET python_enable_replacements = false")
        self.con.execute("SET enable_external_access = false")
        # Spark's sessions run in UTC (spark_bridge/spark/session.py); DuckDB's zone is the machine's.
        self.con.execute("SET TimeZone = 'UTC'")
        self.own_functions = False  # registered when a translation first calls one (it costs ~25 ms)
        self.disabled_optimizers = ""  # DuckDB's default: every optimizer on
        self.frames: dict[str, Any] = {}

    def close(self) -> None:
        self.con.close()

    def release(self) -> None:
        pass

    def table(self, data):
        """Arrow and pandas as they are (a clause that reads a table directly gets it unchanged, so the
        matcher's own checks and dead letter see the values as read); rows as an Arrow table."""
        import pyarrow as pa

        if kind_of(data) != "rows":
            return data
        try:
            return pa.Table.from_pylist(data)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise CepSemanticError(f"the rows cannot be read as a table: {exc}", code="E0251") from None

    def register(self, name: str, frame) -> None:
        import duckdb

        self.frames[name.casefold()] = frame
        try:
            self.con.register(name, frame)
        except duckdb.Error:
            pass  # a column DuckDB cannot type (text among numbers): only a clause reading the table whole can use it

    def sql(self, rendered: Rendered):
        text = rendered.text.strip()
        simple = re.fullmatch(r"SELECT \* FROM (?:`((?:[^`]|``)+)`|(\w+))", text)
        name = simple and (simple.group(2) or simple.group(1).replace("``", "`")).casefold()
        if name in self.frames:  # a clause reading a table as it is: no copy, no conversion
            return self.frames[name]
        return self.run(rendered.text)

    def run(self, text: str):
        """The result of ``text`` (Spark SQL) run in DuckDB, as an Arrow table."""
        relation = self.bound(text)
        refuse_unnamed_columns(relation.columns)  # before running: a header Spark would not give
        table = relation.to_arrow_table()
        try:
            table = hugeints_as_bigints(table, [str(kind) for kind in relation.types])
            table = intervals_as_durations(table)
            refuse_times_python_cannot_hold(table)
        except Refusal as refusal:  # about a result column: placed at the expression that gives it
            raise refusal.placed(*result_column_place(text, refusal.column)) from None
        return table

    def bound(self, text: str):
        """``text`` (Spark SQL) translated and bound by DuckDB, not run yet (a relation)."""
        refuse_trailing_comma(text)
        translated = to_duckdb_sql(text, self.schema())
        aliases_read_in_where(text, self.cannot_find)
        return self.bind(translated)

    def bind(self, translated: str):
        """``translated`` (DuckDB SQL) bound, with cep's functions and the optimizers it may use."""
        if not self.own_functions and calls_own_functions(translated):
            register_functions(self.con)
            self.own_functions = True
        disabled = disabled_optimizers(translated)  # none that would hide Spark's overflow errors
        if disabled != self.disabled_optimizers:
            self.con.execute(f"SET disabled_optimizers = '{disabled}'")
            self.disabled_optimizers = disabled
        return self.con.sql(translated)

    def fails_alike(self, text: str, message: str) -> bool | None:
        """Whether ``text`` (Spark SQL) fails at run time with DuckDB's error ``message`` (None: it no
        longer translates or binds, so it cannot be told)."""
        import duckdb
        import sqlglot

        try:
            self.run(text)
        except (Refusal, sqlglot.errors.SqlglotError):
            return None
        except duckdb.Error as exc:
            if not ran_into(exc):
                return None
            return same_failure(first_line(str(exc)), first_line(message))
        except CepError:
            return None
        return False

    def columns_hint(self, sentence: str, text: str, offset: int | None) -> str | None:
        """For a name no engine can find: the columns the name may name there (the clause's errors list the
        input's columns alike), bound from ``scope_probe``; None where they cannot be told. No engine hint:
        Spark refuses the name as well."""
        import duckdb
        import sqlglot

        probe = scope_probe(text, offset) if offset is not None else None
        if probe is None:
            return None
        try:
            columns = self.bound(probe).columns
        except (Refusal, sqlglot.errors.SqlglotError, CepError, duckdb.Error):
            return None
        written = re.search(r"name (`(?:[^`]|``)+`(?:\.`(?:[^`]|``)+`)*)", sentence)
        name = written.group(1).rsplit("`.`", 1)[-1].strip("`") if written else ""
        return names_hint(name, columns, "the columns there")

    def cannot_find(self, text: str, name: str) -> bool:
        """Whether DuckDB, binding ``text`` (Spark SQL) translated, cannot find the column ``name``."""
        import duckdb
        import sqlglot

        try:
            self.bind(to_duckdb_sql(text, self.schema()))
        except duckdb.BinderException as exc:
            return re.search(f'column "{re.escape(name)}" not found', str(exc), re.I) is not None
        except (Refusal, sqlglot.errors.SqlglotError, CepError, duckdb.Error):
            return False
        return False

    def binds_alike(self, text: str, message: str) -> bool | None:
        """Whether ``text`` (Spark SQL) fails to bind with DuckDB's error ``message`` (None: it no longer
        translates, so it cannot be told)."""
        import duckdb
        import sqlglot

        try:
            self.bound(text)
        except (Refusal, sqlglot.errors.SqlglotError, CepError):
            return None
        except duckdb.BinderException as exc:
            return first_line(str(exc)) == first_line(message)
        except duckdb.Error:
            return False
        return False

    def schema(self) -> dict[str, dict[str, str]]:
        """The registered tables' columns and Spark SQL types (for the translation's typed rules)."""
        return {name: spark_types(frame) for name, frame in self.frames.items()}

    def columns(self, frame) -> list[str]:
        return [str(name) for name in (frame.columns if kind_of(frame) == "pandas" else frame.column_names)]

    def drop(self, frame, names: list[str]):
        return frame.drop_columns(names) if names else frame

    def missing_table(self, exc) -> str | None:
        found = re.match(r"Catalog Error: Table with name (.+?) does not exist", str(exc))
        return found.group(1) if found else None

    def error(self, exc, rendered: Rendered, text: str) -> CepError:
        import duckdb
        import sqlglot

        if isinstance(exc, CepError):
            return exc
        if isinstance(exc, sqlglot.errors.ParseError):
            return sqlglot_error(exc, rendered, text)
        if isinstance(exc, Refusal):
            return refusal_error(exc, rendered, text)
        if isinstance(exc, sqlglot.errors.SqlglotError):
            return sql_error(
                f"the python engine cannot translate this statement: {first_line(str(exc))}",
                rendered,
                text,
                None,
                syntax=False,
                code="E0252",
                hint=ENGINE_HINT,
            )
        if isinstance(exc, duckdb.Error):
            sentence, offset, length = explain_duck_error(str(exc), rendered.text)
            if offset is None and (ran_into(exc) or isinstance(exc, duckdb.BinderException)):
                # DuckDB names no place: find the expression that fails (to bind: no need to run it)
                alike = self.fails_alike if ran_into(exc) else self.binds_alike
                place = failing_expression(rendered.text, lambda probe: alike(probe, str(exc)))
                offset, length = place if place is not None else (None, 1)
            if MISSING_FUNCTION.search(str(exc)):  # DuckDB refuses it before running: a refusal, as E0252 is
                refused = f"the python engine refuses this before running: {sentence}"
                return sql_error(
                    refused, rendered, text, offset, syntax=False, length=length, code="E0252", hint=ENGINE_HINT
                )
            said = "--engine spark" in sentence  # the sentence (a translation's own) names Spark already
            if unresolved_name(str(exc), rendered.text) is not None:  # Spark refuses it as well
                hint = self.columns_hint(sentence, rendered.text, offset)
            elif "must appear in the GROUP BY clause" in sentence:  # Spark's MISSING_AGGREGATION: no engine hint
                hint = "group by it, or read it through an aggregate (first(x), max(x))"
            elif said or any(words in sentence for words in _SPARK_FAILS_ALIKE):  # Spark fails alike
                hint = None
            else:
                hint = "Spark may run it: cep run --engine spark"
            return sql_error(
                sentence,
                rendered,
                text,
                offset,
                syntax=isinstance(exc, duckdb.ParserException),
                length=length,
                hint=hint,
            )
        raise exc

    def column_values(self, frame, subquery, text: str) -> list:
        if frame.num_columns != 1:
            raise CepSemanticError(
                f"an IN subquery must give one column, not {frame.num_columns}",
                code="E0251",
                span=span_of(text, subquery.start, subquery.end),
                source=text,
            )
        return list(dict.fromkeys(frame.column(0).to_pylist()))

    def match(self, query: Query, frame, options: dict, *, ordered: bool):
        import pyarrow as pa

        options = dict(options)
        checked = {"dead_letter", "schema", "dedup_key", "stats"} & set(options)
        if options.pop("refuse_odd_kinds", False) and not checked:
            refuse_odd_kinds(query.plan, frame)
        if kind_of(frame) == "pandas" and not checked:
            # Arrow in, Arrow out: an integer column with NULLs stays integer (pandas would make it float).
            try:
                frame = pa.Table.from_pandas(frame, preserve_index=False)
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                pass  # mixed values in a column: the matcher reads the frame as it is
        out = query.run(frame, **options)
        out = out if kind_of(out) == "arrow" else pa.Table.from_pandas(out, preserve_index=False)
        return typed_as_on_spark(typed_like(out, frame), query, frame)

    def clause_stats(self, query: Query, frame, out) -> ClauseStats:
        import pyarrow.compute as pc

        partition = list(query.plan.partition_names(self.columns(frame)))
        events = len(frame) if kind_of(frame) == "pandas" else frame.num_rows
        if kind_of(frame) == "pandas":
            partitions = (
                int(frame.groupby(groupers(frame, partition), dropna=False, sort=False).ngroups)
                if partition and events
                else int(events > 0)
            )
        else:
            partitions = (frame.group_by(partition).aggregate([]).num_rows if partition else 1) if events else 0
        numbered = out.filter(pc.is_valid(out.column(MATCH_NUMBER_COLUMN))) if out.num_rows else out
        keys = [c for c in partition if c in out.column_names] + [MATCH_NUMBER_COLUMN]
        matches = numbered.group_by(keys).aggregate([]).num_rows if numbered.num_rows else 0
        return ClauseStats(events, partitions, matches)

    def in_order(self, query: Query, frame, out):
        import pyarrow.compute as pc

        partition = [c for c in query.plan.partition_names(self.columns(frame)) if c in out.column_names]
        if not partition or out.num_rows < 2:
            return out
        indices = pc.sort_indices(out, sort_keys=[(c, "ascending", "at_start") for c in partition])
        return out.take(indices)


def typed_like(out, frame):
    """``out`` with a column that has no type (all its values NULL) typed as the input's column of that name:
    the SQL around the clause sees the input's types (DuckDB cannot pick hour() for a NULL column, and a cast's
    translation depends on its operand's type)."""
    import pyarrow as pa

    if kind_of(frame) != "arrow" or not any(pa.types.is_null(field.type) for field in out.schema):
        return out
    types = {field.name: field.type for field in frame.schema}
    for index, field in enumerate(out.schema):
        kind = types.get(field.name)
        if pa.types.is_null(field.type) and kind is not None and not pa.types.is_null(kind):
            out = out.set_column(index, pa.field(field.name, kind), out.column(index).cast(kind))
    return out


# The matcher's integer types narrower than a BIGINT (its output columns' SQL types, ``Plan.output_types``) and
# their Arrow widths: an INT, a SMALLINT or a TINYINT (an input column of that type passed through, arithmetic
# over such columns, a CAST to one: Spark's IntegerType, ShortType, ByteType); the matcher itself returns every
# integer column as 64 bits, as Python's ints would be typed.
_MATCHER_NARROW_INTEGERS = {"INTEGER": "int32", "SMALLINT": "int16", "TINYINT": "int8"}


def typed_as_on_spark(out, query: Query, frame):
    """``out`` (the matcher's Arrow output on the python engine) with each DECIMAL and DOUBLE column of the
    Spark engine's type (``Plan.fit_to_types``), and each integer column that Spark's clause gives as an INT
    (an INT input column passed through, ``FIRST(A.i)``) made an INT here too: the SQL around
    the clause then computes in Spark's types (INT arithmetic overflows past INT's range, an INT beside a
    DECIMAL is a DECIMAL(10,0)), and a result column has Spark's type. The types are the Spark engine's own
    (``Plan.output_types`` over the input's types); an input whose types the matcher cannot name is left as
    it is."""
    import pyarrow as pa

    if kind_of(out) != "arrow":
        return out
    try:
        input_types = {name: normalize_type_name(kind) for name, kind in spark_types(frame).items()}
        wanted = dict(query.plan.output_types(input_types))
    except (CepError, ValueError, KeyError):  # a column of a type the matcher has no name for
        return out
    # DECIMAL and DOUBLE columns as the Spark engine types them (a measure ``1.5`` is Spark's DECIMAL(2,1), a
    # CASE of DECIMALs their common DECIMAL), not as Arrow reads the matcher's values.
    out = query.plan.fit_to_types(out, input_types)
    for index, field in enumerate(out.schema):
        narrow = _MATCHER_NARROW_INTEGERS.get(wanted.get(field.name, ""))
        if narrow is not None and pa.types.is_int64(field.type):
            width = pa.type_for_alias(narrow)
            try:
                column = out.column(index).cast(width)
            except pa.ArrowInvalid:
                continue  # a value past the type's range (a measure computed wider): left as the matcher gives it
            out = out.set_column(index, field.with_type(width), column)
    return out
