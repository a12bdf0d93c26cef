"""Whole SQL statements: MATCH_RECOGNIZE clauses anywhere a table reference may stand, the rest run by an SQL engine.

    s = cep.compile_sql(text)            # find, parse and check every clause (raises CepError)
    s.on_spark(spark)                    # Spark SQL runs the statement -> DataFrame (cep.sql(spark, text))
    s.run({"ticks": rows, ...})          # DuckDB runs it (the python engine) -> rows, pandas or Arrow

How (``grammar/statement.py`` finds the clauses): for each clause, in text order, the engine runs the SQL
of its input relation (with the CTEs the clause sees, and its scalar subqueries as extra columns), the
matcher matches that relation (``Query.on_spark`` or ``Query.run``), and its output becomes a temporary
view with a generated name. The statement, each clause replaced by its view, then runs in the engine.
IN subqueries inside a clause are run first and become lists of constants.

The python engine's SQL is Spark SQL too: ``cep/duckdb_sql.py`` translates it to DuckDB's dialect exactly,
or refuses what it cannot translate before anything runs (docs/sql-statements.md). Errors of either engine
come back as CepError with their position in the user's text.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import re
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from cep.duckdb_sql import Refusal, check_patterns, to_duckdb_sql
from cep.grammar import ast
from cep.grammar.checks import check
from cep.grammar.columns import ColumnNames
from cep.grammar.errors import CepError, CepSemanticError
from cep.grammar.parser import parse_unchecked
from cep.grammar.statement import SPARK, Clause, Rendered, WholeStatement, split
from cep.matcher.rows.tables import arrow_to_pandas, kind_of
from cep.query import Query
from cep.statement_engines import (
    MATCH_NUMBER_COLUMN,
    DuckEngine,
    SparkEngine,
    arrow_reader,
    refusal_error,
    refuse_trailing_comma,
    spark_reader,
    sql_error,
    sqlglot_error,
)

# Imported inside functions: pyspark, duckdb, sqlglot, pyarrow and pandas (heavy or optional; `cep check`
# needs none of them).


class SqlStatement:
    """A whole SQL statement with one or more MATCH_RECOGNIZE clauses, checked and ready to run."""

    def __init__(self, text: str, filename: str | None = None) -> None:
        self.text = text
        self.filename = filename
        self.whole: WholeStatement = split(text, filename=filename)
        self.single = _single_clause_span(text) if len(self.whole.clauses) == 1 else None
        # What match ids hash instead of the statement's text: set for a statement run as a rule of
        # ``cep stream`` (``cep run QUERY --rule-id``), so its ids are that rule's alerts' ids.
        self.match_id_text: str | None = None

    @property
    def clauses(self) -> tuple[Clause, ...]:
        return self.whole.clauses

    def query(self, clause: Clause, statement: ast.Statement | None = None) -> Query:
        """The clause (or ``statement``, the clause rewritten) as a Query: SELECT * FROM <its input>
        MATCH_RECOGNIZE (...). A statement that is nothing but one clause keeps its own span, so that its
        match ids (a hash of the statement's text) are those ``cep.compile(text)`` and its ``on_spark`` stream
        give; with ``match_id_text`` set, those of ``cep stream``'s rule (``rule_set.match_id_text``)."""
        statement = clause.statement if statement is None else statement
        if self.single is not None:
            statement = dataclasses.replace(statement, span=self.single)
        return Query(statement, self.text, self.filename, match_id_text=self.match_id_text)

    def check_types(self, schema: dict[str, str] | None, tables: dict[str, dict] | None = None) -> None:
        """Type-check the clauses that read a table or file directly (no SQL in between to change its
        columns) against ``schema``, the input's columns and SQL types (``tables``: a named table's, for the
        clauses that read that table): a comparison of a time with text is an error with a caret before any
        row is read, not a failure in the middle of the run."""
        named = ColumnNames(tables or {})  # a table's name resolves as a column's does (cli_io.Inputs)
        for clause in self.clauses:
            relation = self.text[clause.relation[0] : clause.relation[1]]
            if not clause.subqueries and re.fullmatch(r"[\w.`\"']+", relation):
                name = named.find_name(relation.strip("`\"'"))
                columns = schema if name is None else (tables or {})[name]
                if columns is not None:
                    check(clause.statement, schema=columns, source=self.text, filename=self.filename)

    # ------------------------------------------------------------------------------------------ Spark

    def on_spark(
        self,
        spark,
        *,
        tables: dict | None = None,
        default=None,
        read_path: Callable | None = None,
        ordered: bool = False,
        clause_stats: list | None = None,
        **options,
    ):
        """Run on Spark SQL; returns a DataFrame (streaming when an input is a stream).

        ``tables``: name -> DataFrame, registered as temporary views for the statement (besides the
        session's catalog). ``default``: a DataFrame for the first table the statement names that Spark
        does not know (or for the file of a ``FROM 'file'`` clause). ``read_path(path)``: reads a
        ``FROM 'file'`` (default: by the file's extension). ``ordered``: rows in the order the query
        defines when it has no ORDER BY (partitions in key order, matches in order; static inputs only).
        ``clause_stats``: a list that gets one ``ClauseStats`` per clause (costs a job each). ``options``:
        those of ``Query.on_spark`` (``watermark``, ``session_timeout``, ``match_ids``...).
        """
        refuse_spark_refused_patterns(self)
        engine = SparkEngine(spark, read_path or spark_reader(spark))
        return _Run(self, engine, tables or {}, default, ordered, clause_stats, options).result()

    # ------------------------------------------------------------------------------------------ python

    def clause_input(
        self, tables: dict | None = None, *, default: Any = None, read_path: Callable | None = None, position: int = 0
    ):
        """(the Query of the clause at ``position``, the rows it reads as a pandas frame), on the python engine:
        what ``cep trace`` and ``cep report`` look at when the clause reads the result of other SQL (a
        subquery, a WITH, a join). ``tables``, ``default`` and ``read_path`` as for ``run``."""
        engine = DuckEngine(read_path or arrow_reader)
        try:
            query, frame = _Run(self, engine, dict(tables or {}), default, True, None, {}).clause_input(position)
        finally:
            engine.close()
        return query, frame if kind_of(frame) == "pandas" else arrow_to_pandas(frame)

    def run(
        self,
        tables: Any = None,
        *,
        default: Any = None,
        read_path: Callable | None = None,
        ordered: bool = True,
        clause_stats: list | None = None,
        kind: str | None = None,
        **options,
    ):
        """Run on the python engine (DuckDB for the SQL around the clauses, the matcher for each clause).

        ``tables``: name -> rows (list of dicts), pandas DataFrame or pyarrow Table; or one such table
        (the same as ``default=``). ``default``: the table for the first name the statement reads that
        ``tables`` lacks (or for the file of ``FROM 'file'``). The result has the kind of the first table
        given (a pyarrow Table when none is), or ``kind`` ("rows", "pandas", "arrow"). ``ordered``: rows
        in the order the query defines when it has no ORDER BY (partitions in key order, then matches in
        order). ``options``: those of ``Query.run``
        (``dead_letter``, ``stats``, ``schema``, ``progress``, ``session_timeout``, ``match_ids``...),
        applied to every clause; and ``refuse_odd_kinds=True`` (``cep run`` over JSON without a dead letter):
        a row of another kind in a column a clause reads stops the run with E0410, as the Spark engine
        stops (``validate.refuse_odd_kinds``).
        """
        named = tables if isinstance(tables, dict) else {}
        if tables is not None and not isinstance(tables, dict):
            default = tables
        first = next(iter(named.values()), default)
        kind = kind or (kind_of(first) if first is not None else "arrow")
        refuse_spark_refused_patterns(self)
        engine = DuckEngine(read_path or arrow_reader)
        try:
            table = _Run(self, engine, named, default, ordered, clause_stats, options).result()
        finally:
            engine.close()
        if kind == "rows":
            return table.to_pylist()
        if kind == "pandas":
            return arrow_to_pandas(table)
        return table


ENGINES = ("python", "spark")


def check_sql(
    text: str,
    *,
    filename: str | None = None,
    schema: dict[str, str] | None = None,
    engine: str = "python",
    tables: dict[str, dict] | None = None,
) -> SqlStatement:
    """Check a whole statement without running it: every clause (against ``schema`` too, for the clauses
    that read a table or file directly), and the SQL around them, parsed as Spark SQL (sqlglot's parser,
    the python engine's), with every datetime pattern checked: one Spark refuses, or (``engine`` python)
    one the python engine cannot run exactly, is E0247. ``tables``: the columns of named tables, for the
    clauses that read them (``check_types``). The SQL around the clauses is translated too, without
    running: what the translation refuses whatever the tables' columns is the error ``cep run`` would raise,
    at the same place: for the python engine, E0252 (a function DuckDB cannot run as Spark does) or E0250
    (a cast Spark does not allow either); for Spark, only the latter. Raises CepError pointing into ``text``."""
    import sqlglot

    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, not {engine!r}")

    statement = SqlStatement(text, filename)
    if schema is not None or tables:
        statement.check_types(schema, tables)
    for rendered in _spark_parts(statement):
        try:
            sqlglot.parse_one(rendered.text, read="spark")
        except sqlglot.errors.ParseError as exc:
            raise sqlglot_error(exc, rendered, text).with_source(text, filename) from None
        _check_datetime_patterns(statement, rendered, spark_refused_only=engine == "spark")
        try:
            refuse_trailing_comma(rendered.text)
            to_duckdb_sql(rendered.text, checking=True, for_spark=engine == "spark")
        except Refusal as refusal:
            raise refusal_error(refusal, rendered, text).with_source(text, filename) from None
        except sqlglot.errors.SqlglotError:
            pass  # not a refusal: the run reports it, with the tables' types at hand
    return statement


def _spark_parts(statement: SqlStatement) -> list[Rendered]:
    """Every piece of SQL around the clauses, as Spark SQL: the statement and each clause's input."""
    whole = statement.whole
    views = {clause.index: f"_cep_mr{clause.index}" for clause in whole.clauses}
    paths = {path: f"_cep_file{number}" for number, (_s, _e, path) in enumerate(whole.paths)}
    parts = [whole.render(SPARK, views, paths)]
    for clause in whole.clauses:
        columns = {
            sub.column: whole.subquery_text(sub, SPARK, views, paths) for sub in clause.subqueries if sub.kind != "in"
        }
        parts.append(whole.input_sql(clause, SPARK, views, paths, columns))
        parts += [whole.subquery_sql(clause, sub, SPARK, views, paths) for sub in clause.subqueries if sub.kind == "in"]
    return parts


def _check_datetime_patterns(statement: SqlStatement, rendered: Rendered, *, spark_refused_only: bool) -> None:
    """E0247 at a datetime pattern of ``rendered`` that Spark refuses or (unless ``spark_refused_only``) that
    the python engine cannot run exactly: the one message of `cep check` and of both engines' runs."""
    try:
        check_patterns(rendered.text, spark_refused_only=spark_refused_only)
    except Refusal as refusal:
        raise sql_error(
            refusal.message,
            rendered,
            statement.text,
            refusal.start,
            syntax=False,
            length=refusal.length,
            code="E0247",
            hint="the letters both engines write alike: yyyy MM dd HH mm ss SSS a EEE, "
            "text in quotes ('T'); docs/sql-statements.md lists them",
        ).with_source(statement.text, statement.filename) from None


def refuse_spark_refused_patterns(statement: SqlStatement) -> None:
    """E0247, before either engine runs, for a datetime pattern Spark refuses (``DATE_FORMAT(d, 'YYYY')``):
    Spark itself would fail only when a row reaches it, with its own words, and DuckDB would run it."""
    for rendered in _spark_parts(statement):
        _check_datetime_patterns(statement, rendered, spark_refused_only=True)


def compile_sql(text: str, *, filename: str | None = None) -> SqlStatement:
    """Find, parse and check every MATCH_RECOGNIZE clause of a whole SQL statement."""
    return SqlStatement(text, filename)


def sql(spark, text: str, **options):
    """Run a Spark SQL statement with MATCH_RECOGNIZE clauses (anywhere a table reference may stand) over
    the session's tables and views, static or streaming; returns a DataFrame. ``FROM 'path/file.parquet'``
    reads a file. ``options``: as for ``SqlStatement.on_spark`` and ``Query.on_spark``."""
    return SqlStatement(text).on_spark(spark, **options)


# ------------------------------------------------------------------------------------------ the run


class _Run:
    """One execution: views for files and clauses, each clause matched, then the statement."""

    def __init__(
        self, statement: SqlStatement, engine, tables: dict, default, ordered: bool, stats: list | None, options: dict
    ) -> None:
        self.statement, self.engine, self.default = statement, engine, default
        self.ordered, self.stats, self.options = ordered, stats, options
        self.token = uuid.uuid4().hex[:8]
        self.views: dict[int, str] = {}
        self.path_views: dict[str, str] = {}
        self.names = itertools.count(1)
        for name, data in tables.items():
            engine.register(name, engine.table(data))

    def generated(self, what: str) -> str:
        return f"_cep_{what}{next(self.names)}_{self.token}"

    def result(self):
        try:
            whole = self.statement.whole
            self.register_paths()
            for clause in whole.clauses:
                self.views[clause.index] = self.match(clause)
            return self.sql(whole.render(self.engine.dialect, self.views, self.path_views))
        finally:
            self.engine.release()

    def clause_input(self, position: int):
        """(the Query of the clause at ``position``, the rows it reads): the clauses before it matched, the
        SQL that feeds it run, the clause itself not."""
        try:
            whole = self.statement.whole
            self.register_paths()
            for clause in whole.clauses[:position]:
                self.views[clause.index] = self.match(clause)
            query, frame, _columns = self.prepared(whole.clauses[position])
            return query, frame
        finally:
            self.engine.release()

    def register_paths(self) -> None:
        """A view for each file the statement names (``FROM 'file'``); the default input is the first's."""
        whole = self.statement.whole
        default_path = next((c.path for c in whole.clauses if c.path is not None), None)
        for _start, _end, path in whole.paths:
            if path in self.path_views:
                continue
            name = self.generated("file")
            if path == default_path and self.default is not None:
                frame, self.default = self.engine.table(self.default), None
            else:
                frame = self.engine.read_path(path)
            self.engine.register(name, frame)
            self.path_views[path] = name

    def sql(self, rendered: Rendered):
        """The engine's relation for ``rendered``; a table the engine does not know is the default input."""
        while True:
            try:
                return self.engine.sql(rendered)
            except Exception as exc:  # noqa: BLE001 - engine errors have many types; converted below
                missing = self.engine.missing_table(exc)
                if missing is not None and self.default is None:
                    raise self.missing(missing, rendered) from None
                if missing is None:
                    raise self.engine.error(exc, rendered, self.statement.text) from None
                self.engine.register(missing, self.engine.table(self.default))
                self.default = None

    def missing(self, name: str, rendered: Rendered) -> CepError:
        text = self.statement.text
        found = re.search(
            r"(?<![\w`\".])[`\"]?" + re.escape(name.split(".")[-1]) + r"[`\"]?(?![\w`\"])", rendered.text, re.I
        )
        return sql_error(
            f"there is no table {name}",
            rendered,
            text,
            found.start() if found else None,
            syntax=False,
            length=len(name),
            code="E0291",
            hint=f"give its rows: cep run ... --input PATH (or --input {name}=PATH), "
            f"or tables={{'{name}': ...}} (on Spark: a table or temporary view); "
            "a file is named in single quotes: FROM 'data/ticks.parquet'",
        )

    def prepared(self, clause: Clause):
        """(the clause's Query, its input relation, the columns its subqueries add to that input)."""
        whole, engine = self.statement.whole, self.engine
        dialect = engine.dialect
        columns = {
            sub.column: whole.subquery_text(sub, dialect, self.views, self.path_views)
            for sub in clause.subqueries
            if sub.kind != "in"
        }
        constants = {}
        for sub in clause.subqueries:
            if sub.kind == "in":
                rendered = whole.subquery_sql(clause, sub, dialect, self.views, self.path_views)
                constants[sub.column] = engine.column_values(self.sql(rendered), sub, self.statement.text)
        statement = _with_constants(clause.statement, constants)
        if self.stats is not None:
            statement = _with_match_number(statement)
        query = self.statement.query(clause, statement)
        frame = self.sql(whole.input_sql(clause, dialect, self.views, self.path_views, columns))
        kept = ColumnNames(columns)
        clashes = {
            kept.find_name(c) for c in engine.columns(frame) if c not in columns and kept.has_name_ignoring_case(c)
        }
        if clashes:
            raise CepSemanticError(
                f"the input of MATCH_RECOGNIZE has a column named {sorted(clashes)[0]}, a name cep "
                "keeps for the subqueries inside the clause; rename it",
                code="E0251",
                span=clause.statement.span,
                source=self.statement.text,
            )
        return query, frame, columns

    def match(self, clause: Clause) -> str:
        engine = self.engine
        query, frame, columns = self.prepared(clause)
        try:
            out = engine.match(query, frame, self.options, ordered=self.ordered)
        except CepError as error:
            raise error.with_source(self.statement.text, self.statement.filename) from None
        if self.stats is not None:
            self.stats.append(engine.clause_stats(query, frame, out))
            columns = {**columns, MATCH_NUMBER_COLUMN: ""}
        if self.ordered:
            out = engine.in_order(query, frame, out)
        out = engine.drop(out, [name for name in columns if name in engine.columns(out)])
        name = self.generated("mr")
        engine.register(name, out)
        return name


def _single_clause_span(text: str):
    """The span of ``text`` as one plain ``SELECT ... FROM t MATCH_RECOGNIZE (...)`` (what ``cep.compile``
    takes), or None for anything more (a whole statement)."""
    try:
        return parse_unchecked(text).span
    except CepError:
        return None


def _with_match_number(statement: ast.Statement) -> ast.Statement:
    span = statement.match.span
    measure = ast.Measure(span, ast.MatchNumber(span), ast.Identifier(span, MATCH_NUMBER_COLUMN, quoted=True))
    return dataclasses.replace(
        statement, match=dataclasses.replace(statement.match, measures=statement.match.measures + (measure,))
    )


def _literal(value, span) -> ast.Literal:
    if value is None:
        return ast.Literal(span, "null", None, "NULL")
    if isinstance(value, bool):
        return ast.Literal(span, "boolean", value, str(value).upper())
    if isinstance(value, int):
        return ast.Literal(span, "integer", value, str(value))
    if isinstance(value, float):
        return ast.Literal(span, "decimal", value, repr(value))  # a DOUBLE, as the subquery gave it
    if isinstance(value, Decimal):
        return ast.Literal(span, "decimal", value, format(value, "f"))
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return ast.Literal(span, "timestamp", value, value.isoformat(" "))
    if isinstance(value, dt.date):
        return ast.Literal(span, "date", value, value.isoformat())
    if isinstance(value, str):
        return ast.Literal(span, "string", value, value)
    raise CepSemanticError(
        f"an IN subquery gives a {type(value).__name__} value, which cep cannot compare", code="E0251", span=span
    )


def _with_constants(node, constants: dict[str, list]):
    """``x IN (placeholder)`` -> ``x IN (v1, v2, ...)`` (or FALSE / TRUE for NOT IN, when the subquery is empty)."""
    if not constants:
        return node
    if (
        isinstance(node, ast.InList)
        and len(node.items) == 1
        and isinstance(node.items[0], ast.ColumnRef)
        and node.items[0].qualifier is None
        and node.items[0].column.name in constants
    ):
        values = constants[node.items[0].column.name]
        if not values:
            return ast.Literal(node.span, "boolean", node.negated, str(node.negated).upper())
        items = tuple(_literal(value, node.items[0].span) for value in values)
        return dataclasses.replace(node, operand=_with_constants(node.operand, constants), items=items)
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        changes = {}
        for f in dataclasses.fields(node):
            value = getattr(node, f.name)
            if f.name == "span":
                continue
            if isinstance(value, tuple):
                new = tuple(_with_constants(item, constants) for item in value)
                if any(a is not b for a, b in zip(new, value)):
                    changes[f.name] = new
            elif dataclasses.is_dataclass(value):
                new = _with_constants(value, constants)
                if new is not value:
                    changes[f.name] = new
        return dataclasses.replace(node, **changes) if changes else node
    return node
