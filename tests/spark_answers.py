"""Spark's answers for many expressions over the same rows, from a few Spark queries instead of one a case.

A parametrized SQL test compares the python engine's answer for one expression with Spark's. Each Spark query
pays Spark's planning, code generation and job scheduling (and the clause's match job), about 0.3-1 s here,
against a few milliseconds for the python engine; run once per case, that was most of the SQL files' time. So
a module asks for all its expressions at once: they are selected side by side, in chunks of
``EXPRESSIONS_A_QUERY``, by one statement over the same rows, and each case then reads its own column
(its values, and its type from the batched frame's schema: the type a query of that expression alone has).

A failing expression always gets its answer from its own query, in exactly the statement a single case would
run, so that a case's error (its class, its message, the fragment Spark's query context names) is the one
Spark gives for that expression alone. When a chunk fails, the error names its expression where it can (cep's
analysis error by its place in the statement, Spark's run-time error by its query context's fragment, found
in one expression of the chunk): that expression runs alone and the rest of the chunk together again, one
query more per failing expression. An error that names none splits the chunk in halves, down to the
expressions that fail. Expressions a module expects Spark to refuse go straight to their own query
(``expected_to_fail``): a failed chunk costs a query and, at run time, the Python worker of its task.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

import cep

# Wide enough that a file's cases need a handful of queries; narrow enough that Spark's generated code stays
# small (a few hundred columns make its planning slower than the queries they replace) and that a failing
# chunk costs few halvings.
EXPRESSIONS_A_QUERY = 40


@dataclass(frozen=True)
class SparkAnswer:
    """One expression's column: its values in the statement's row order and Spark's type name
    (``simpleString``), or the exception Spark raised for that expression alone."""

    expression: str
    column: tuple | None
    type_name: str | None
    error: Exception | None

    def values(self) -> list:
        """The column's values; Spark's own exception, raised again, where Spark failed."""
        if self.error is not None:
            raise self.error
        return list(self.column)

    def typed(self) -> tuple[list, str]:
        """The values and Spark's type name, as a case compares them with the python engine's."""
        return self.values(), self.type_name


def select_list(columns: list[tuple[str, str]]) -> str:
    """``expression AS name, ...``: the select list of a statement that gives each expression its column."""
    return ", ".join(f"{expression} AS {name}" for name, expression in columns)


# statement(columns) -> the SQL text that selects each (name, expression) of ``columns`` as a column ``name``
Statement = Callable[[list[tuple[str, str]]], str]
# run(spark, text) -> the DataFrame of a statement: cep.sql (the MATCH_RECOGNIZE run on Spark) or spark.sql
Runner = Callable[[Any, str], Any]


def rows_as_view(spark, rows: list[dict], schema: str, view: str):
    """``rows`` (dicts in the schema's column order) as Spark's temporary view ``view``; returns the session."""
    spark.createDataFrame([tuple(row.values()) for row in rows], schema).createOrReplaceTempView(view)
    return spark


def spark_sql(spark, text: str):
    """Spark SQL alone, for a statement over ``matched_rows``'s view (no MATCH_RECOGNIZE left to run)."""
    return spark.sql(text)


def matched_rows(spark, head: str, view: str) -> str:
    """Run the one-line ``head`` (``WITH m AS (SELECT * FROM t MATCH_RECOGNIZE (...) r)``, then a newline)
    once with ``cep.sql``, hold its rows as the temporary view ``view`` (a local checkpoint: Spark's rows, no
    plan to run again), and return the head that reads them: ``WITH m AS (SELECT * FROM view)`` and the same
    newline, so the select list keeps its line and columns in Spark's query context.

    Each query a SQL file asks Spark for its answers otherwise runs the clause's match again: a Python worker
    for the matcher, and, where the expression fails at run time, a new worker for the next query (a failed
    task's worker is not reused). The answers are Spark's evaluation of the SQL around the clause, which
    ``cep.sql`` hands to Spark as written (the clause replaced by a view of its rows): the same over these
    rows. A file that uses this keeps one test comparing a chunk of its answers, and a failure, with the
    whole statement's (``SparkAnswers`` with ``cep.sql``)."""
    if "\n" in head.rstrip("\n") or not head.startswith("WITH m AS ("):
        raise ValueError("matched_rows takes a one-line head that defines m")
    cep.sql(spark, head + "SELECT * FROM m").localCheckpoint().createOrReplaceTempView(view)
    return f"WITH m AS (SELECT * FROM {view})\n"


def answers_over_matched_rows(spark, head: str, view: str, statement, expressions, **options) -> SparkAnswers:
    """``SparkAnswers`` for ``statement(columns, head=...)`` over ``matched_rows(spark, head, view)``."""
    over = partial(statement, head=matched_rows(spark, head, view))
    return SparkAnswers(spark, over, expressions, run=spark_sql, **options)


def assert_the_whole_statement_agrees(spark, statement: Statement, answers: SparkAnswers, expressions) -> None:
    """The whole statement (``cep.sql``: the clause run on Spark) gives each expression the values and type
    ``answers`` read over ``matched_rows``'s view: one query for a file's check that the view is faithful."""
    whole = SparkAnswers(spark, statement, expressions)
    for expression in expressions:
        assert whole[expression].typed() == answers[expression].typed(), expression


class SparkAnswers:
    """Spark's answer for each expression given, computed on first use: ``answers[expression]``.

    ``statement`` builds the query from (name, expression) pairs; an expression alone is named ``alone_name``
    (the name a case's own query gave it). ``expected_to_fail`` expressions run alone, once each. ``run`` runs a
    statement: ``cep.sql``, or ``spark_sql`` for a statement over ``matched_rows``'s view."""

    def __init__(
        self,
        spark,
        statement: Statement,
        expressions: Iterable[str],
        *,
        expected_to_fail: Iterable[str] = (),
        alone_name: str = "v",
        run: Runner = cep.sql,
    ) -> None:
        self.spark, self.statement, self.alone_name, self.run = spark, statement, alone_name, run
        self.pending = list(dict.fromkeys(expressions))
        self.alone = list(dict.fromkeys(expected_to_fail))
        self.answers: dict[str, SparkAnswer] = {}
        self.queries = 0

    def __getitem__(self, expression: str) -> SparkAnswer:
        if expression not in self.answers:
            if expression in self.pending or expression in self.alone:
                self.compute()
            if expression not in self.answers:  # not given up front: its own query
                self.answers[expression] = self.run_alone(expression)
        return self.answers[expression]

    def compute(self) -> None:
        pending, alone = self.pending, self.alone
        self.pending, self.alone = [], []
        for start in range(0, len(pending), EXPRESSIONS_A_QUERY):
            self.run_together(pending[start : start + EXPRESSIONS_A_QUERY])
        for expression in alone:
            self.answers[expression] = self.run_alone(expression)

    def run_together(self, expressions: list[str]) -> None:
        if len(expressions) == 1:
            self.answers[expressions[0]] = self.run_alone(expressions[0])
            return
        names = [f"v{n}" for n in range(len(expressions))]
        columns = list(zip(names, expressions))
        try:
            rows, types = self.collect(columns)
        except Exception as error:  # noqa: BLE001 - Spark's errors are its own classes: find the expressions that fail
            named = self.named_by(error, columns)
            if named is not None:  # the error names its expression: that one alone, the others together again
                self.answers[named] = self.run_alone(named)
                self.run_together([expression for expression in expressions if expression != named])
                return
            half = len(expressions) // 2
            self.run_together(expressions[:half])
            self.run_together(expressions[half:])
            return
        for name, expression in zip(names, expressions):
            self.answers[expression] = SparkAnswer(expression, tuple(row[name] for row in rows), types[name], None)

    def named_by(self, error: Exception, columns: list[tuple[str, str]]) -> str | None:
        """The one expression of ``columns`` that ``error`` places itself in, else None (then the chunk is
        halved). cep's CepError (an analysis error) has a span in the statement's text; Spark's error at run
        time names the fragment of the query that failed, found in exactly one expression or in none."""
        span = getattr(error, "span", None)
        if span is not None and span.line > 0:
            text = self.statement(columns)
            start = text.find(select_list(columns))
            if start < 0:
                return None
            for name, expression in columns:  # select_list's pieces, in order, ", " between them
                if start <= span.start < start + len(expression):
                    return expression
                start += len(f"{expression} AS {name}, ")
            return None
        contexts = getattr(error, "getQueryContext", lambda: [])() or []
        fragments = {context.fragment() for context in contexts} - {""}
        holding = {expression for fragment in fragments for _, expression in columns if fragment in expression}
        return holding.pop() if len(holding) == 1 else None

    def run_alone(self, expression: str) -> SparkAnswer:
        try:
            rows, types = self.collect([(self.alone_name, expression)])
        except Exception as error:  # noqa: BLE001 - kept, and raised again by the case that reads it
            return SparkAnswer(expression, None, None, error)
        return SparkAnswer(expression, tuple(row[self.alone_name] for row in rows), types[self.alone_name], None)

    def collect(self, columns: list[tuple[str, str]]) -> tuple[list, dict[str, str]]:
        self.queries += 1
        frame = self.run(self.spark, self.statement(columns))
        rows = frame.collect()
        return rows, {field.name: field.dataType.simpleString() for field in frame.schema.fields}


def assert_refused_at_the_expression(python_typed, expression: str, words: str) -> None:
    """``python_typed(expression)`` is the python engine's refusal (E0252, the way to Spark, ``words`` in it) at the
    expression on the statement's second line, past ``SELECT``, not at 1:1."""
    import pytest

    with pytest.raises(cep.CepError) as caught:
        python_typed(expression)
    error = caught.value
    assert error.code == "E0252" and "--engine spark" in str(error), str(error)
    assert words in str(error), str(error)
    assert error.span.line == 2 and error.span.column > len("SELECT "), str(error)


def assert_sparks_or_refused(spark, statement: Statement, python_typed, expressions: Iterable[str]) -> None:
    """Each expression's python value and type (``python_typed``) is Spark's, from a few queries side by side
    (each alone where Spark fails), unless the python engine refuses it (E0252); an expression the python engine
    fails on otherwise must fail on Spark too."""
    import pytest

    answered, failed = {}, []
    for expression in expressions:
        try:
            answered[expression] = python_typed(expression)
        except cep.CepError as error:
            if error.code != "E0252":
                failed.append(expression)
    answers = SparkAnswers(spark, statement, answered, expected_to_fail=failed)
    for expression in failed:
        with pytest.raises(Exception):  # noqa: B017 - any Spark error: Spark fails too
            answers[expression].values()
    for expression, python in answered.items():
        assert python == answers[expression].typed(), expression
