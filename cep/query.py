"""``Query``: a compiled MATCH_RECOGNIZE statement, runnable on Python data or on Spark."""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from typing import Any

from cep.grammar import ast
from cep.grammar.columns import ColumnNames
from cep.grammar.errors import CepError
from cep.grammar.format import format_expr, format_pattern
from cep.grammar.parser import parse, parse_all, parse_schema
from cep.matcher.explain.text import explain, query_columns, stream_line
from cep.matcher.plan import CompiledQuery, declared_types
from cep.matcher.rows.tables import from_rows, kind_of, to_columns
from cep.matcher.rows.validate import input_checks
from cep.matcher.sql.types import arrow_type_name, frame_integer_columns, narrow_integer_columns
from cep.spark_bridge.alerting import rules as rules_mod
from cep.spark_bridge.alerting import suppress as suppress_mod
from cep.spark_bridge.alerting.rule_set import (
    ALERT_FIRST,
    ALERT_LAST,
    ALERT_STATUS,
    INTERNAL_MEASURES,
    alert_statement,
    check_rule,
    match_id_text,
)
from cep.spark_bridge.engine import state_codec
from cep.spark_bridge.engine.durations import session_timeout_us
from cep.spark_bridge.engine.keyed import KeyedStream
from cep.spark_bridge.engine.match_ids import statement_text
from cep.spark_bridge.engine.replay import Replay
from cep.spark_bridge.sinks.alerts import ALERT_NAMES, jsonable
from cep.spark_bridge.spark.batch import match_dataframe
from cep.spark_bridge.spark.streaming import match_stream

# Imported inside functions: pandas (heavy; a run on a list of dicts never needs it).


class Query:
    """A checked, compiled query. ``run`` matches Python data; ``on_spark`` matches a Spark DataFrame."""

    def __init__(
        self,
        statement: ast.Statement,
        text: str,
        filename: str | None = None,
        *,
        match_id_text: str | None = None,
        column_wise: bool = True,
    ) -> None:
        self.statement = statement
        self.text = text
        self.filename = filename
        self.match_id_text = match_id_text  # what match ids hash, when not the statement's text (a rule of a set)
        self.plan = CompiledQuery(statement, column_wise=column_wise)

    @property
    def name(self) -> str | None:
        return self.statement.name

    def run(
        self,
        data: Any,
        *,
        dead_letter=None,
        schema=None,
        dedup_key=None,
        stats: dict | None = None,
        progress=None,
        session_timeout=None,
        match_ids: bool = False,
    ):
        """Match a list of dicts, a pandas DataFrame or a pyarrow Table; the result has the same kind.

        Bad input (docs/reliability.md; ``matcher/rows/validate.py`` has the rules):

        * ``dead_letter``: a list, or a function taking one dict. Bad rows (NULL or unparseable event
          time, a value of the wrong type, a list item that is not a dict, an unusable partition key)
          are left out of the matching and each is sent there as ``{**row, '_cep_error': reason,
          '_cep_error_code': 'E044x', '_cep_error_detail': sentence, '_cep_row': position}``.
        * ``schema``: ``{'price': 'DOUBLE', ...}`` or ``'price DOUBLE, ts TIMESTAMP'``: the expected
          types (else inferred from each column's values). Without ``dead_letter`` the first bad row
          raises ``CepRuntimeError``.
        * ``dedup_key``: a column (or list of columns); a later row with the same key in the same
          partition is dropped.
        * ``stats``: a dict filled with ``events_in``, ``dead_lettered``, ``duplicates_dropped``,
          ``events_matched`` and ``by_reason``.

        With none of these, the input is trusted as a typed SQL table is (nothing is checked or set aside), and a
        DataFrame or Table goes to the matcher as numpy columns when the query takes the fast path
        (``CompiledQuery.run_frame``): the same result, without a Python object per input value.
        ``progress(done, total)`` is called with row counts as the matching goes on.

        A backtest that gives the live stream's matches (docs/streaming.md, "Backtesting with the live
        stream's ids"; ``spark_bridge/engine/replay.py`` has the rules):

        * ``session_timeout``: as on a stream ("30 minutes", "90s", a ``timedelta``): a partition's rows
          more than this apart (event time) start a new session, matched on its own; each session ends
          at its last row + the timeout, its trailing matches emitted. A bad value raises
          ``CepSemanticError`` (E0286).
        * ``match_ids=True``: a last column ``match_id``, the id the stream gives the same match of the
          same statement text (all rows of one match share it).

        With either, rows tied on ORDER BY are ordered as the stream orders them, the event time
        reaches the output as a naive UTC ``datetime``, and every query runs on the Pike VM.
        """
        try:
            return self._run(
                data,
                dead_letter=dead_letter,
                schema=schema,
                dedup_key=dedup_key,
                stats=stats,
                progress=progress,
                session_timeout=session_timeout,
                match_ids=match_ids,
            )
        except CepError as error:  # a run-time error points into the query: show it with a caret
            raise (error if error.source is not None else error.with_source(self.text, self.filename)) from None

    def _run(self, data, *, dead_letter, schema, dedup_key, stats, progress, session_timeout, match_ids):
        checks = input_checks(dead_letter=dead_letter, schema=schema, dedup_key=dedup_key, stats=stats)
        replay = session_timeout is not None or match_ids
        # An input that declares DECIMAL types gets Spark's decimal result types (docs/semantics.md).
        declared = parse_schema(schema) if isinstance(schema, str) else schema
        typed = declared_types(data, declared)
        # Columns straight to the fast path when it applies.
        if checks is None and not replay and kind_of(data) != "rows":
            result = self.plan.run_frame(data, progress=progress)
            return self._typed(result, data, typed)
        kind, columns = to_columns(data) if checks is None else checks.to_columns(data)
        # The INT columns (the frame's int32 ones, those the schema declares INT): their arithmetic is an INT's.
        integers = frame_integer_columns(data) if kind_of(data) != "rows" else {}
        integers.update(ColumnNames(tuple(columns)).by_column(narrow_integer_columns(declared or {})))
        if replay:
            names, rows = self._replay(columns, checks, session_timeout, match_ids, progress, integers)
        else:
            names, rows = self.plan.run_columns(columns, checks=checks, progress=progress, integer_columns=integers)
        result = from_rows(kind, names, rows)
        return self._typed(result, data, typed)

    def _typed(self, result, data, typed: dict[str, str] | None):
        """``result`` in Spark's types: all of them with ``typed`` (``declared_types``); else, for an Arrow
        input, whose columns' types are known, at least a column of NULLs alone has its type, not Arrow's null."""
        if typed is not None:
            return self.plan.fit_to_types(result, typed)
        if kind_of(data) == "arrow":
            try:
                return self.plan.typed_nulls(
                    result, {n: arrow_type_name(f.type) for n, f in zip(data.column_names, data.schema)}
                )
            except (CepError, KeyError, ValueError):  # a column the matcher has no type for: as it is
                return result
        return result

    def _replay(self, columns, checks, session_timeout, match_ids: bool, progress, integer_columns=None):
        gap = session_timeout_us(session_timeout)
        if checks is not None:
            columns = checks.apply(self.plan, columns)
        if not columns:
            return (), []  # no rows and so no columns to resolve: nothing can match
        replay = Replay(
            self.plan,
            tuple(columns),
            query_text=statement_text(self),
            session_timeout_us=gap,
            match_ids=bool(match_ids),
            integer_columns=integer_columns,
        )
        return replay.run(columns, progress=progress)

    def on_spark(
        self,
        df,
        *,
        watermark=None,
        session_timeout=None,
        late="output",
        match_ids: bool = False,
        dead_letter=None,
        stats: dict | None = None,
        ordinal: str | None = None,
        **streaming,
    ):
        """Match a Spark DataFrame; returns a Spark DataFrame of the matches (Arrow-based, per partition).

        A streaming ``df`` gives a streaming DataFrame in append mode with a ``match_id`` column (and,
        with ``late="output"``, the late and bad input rows with ``cep_late_reason``): see
        ``cep.spark_bridge.spark.streaming.match_stream`` for ``watermark``, ``session_timeout``, ``late`` and the
        other keyword arguments (``max_pending_rows``, ``max_match_rows``, ``metrics_name``, ``dedup_key``,
        ``max_future_skew``, ``key_buckets``).

        A static ``df`` is a replay: ``session_timeout`` and ``match_ids=True`` act as in ``run`` (the
        same sessions, and a last column ``match_id`` with the ids the stream gives); the other
        streaming keyword arguments are ignored there. ``dead_letter`` and ``stats`` act as in ``run``:
        bad rows (NULL or NaN event time, NaN in another ORDER BY column, lines Spark's reader could not
        read) are set aside, to a list (the dead-letter DataFrame is appended), a function (called with
        it) or a directory path (written as JSON lines now); ``stats`` is filled now
        (``cep.spark_bridge.spark.batch.match_dataframe``).
        ``ordinal`` (static only): a last column with each row's place in its task's output, by which
        ``cep.statement`` sorts rows in the order the query defines.
        """
        if df.isStreaming:
            if dead_letter is not None or stats is not None:
                raise ValueError(
                    "a stream routes its bad rows itself: late='output' gives them with cep_late_reason, "
                    "and the metrics count them; dead_letter and stats are for a static DataFrame"
                )
            return match_stream(
                self.plan,
                df,
                query_text=statement_text(self),
                watermark=watermark,
                session_timeout=session_timeout,
                late=late,
                **streaming,
            )

        checks = {"dead_letter": dead_letter, "stats": stats, "source": (self.text, self.filename)}
        if session_timeout is None and not match_ids:
            return match_dataframe(self.plan, df, ordinal=ordinal, **checks)
        return match_dataframe(
            self.plan,
            df,
            query_text=statement_text(self),
            session_timeout_us=session_timeout_us(session_timeout),
            match_ids=bool(match_ids),
            ordinal=ordinal,
            **checks,
        )

    def trace(self, data: Any, partition: dict | None = None):
        """Why did (or didn't) rows match? One record per condition test, live partial match, drop and match.

        Returns a pandas DataFrame with columns partition, row (position within the partition),
        order_key, event (tested / dropped / alive / match), match_start and detail.
        """
        import pandas as pd

        _, columns = to_columns(data)
        records = self.plan.trace_columns(columns, partition)
        frame = pd.DataFrame.from_records(
            records, columns=["partition", "row", "order_key", "event", "match_start", "detail"]
        )
        return frame

    def output_columns(self, input_columns):
        """The output columns for an input with these columns.

        Given column names, returns the output names; given a mapping of column name to SQL type
        (``{'ts': 'TIMESTAMP', 'price': 'DOUBLE', ...}``), returns ``[(name, type), ...]``.
        """
        if isinstance(input_columns, dict):
            return self.plan.output_types(dict(input_columns))
        return self.plan.output_names(tuple(input_columns))

    def explain(self) -> str:
        try:  # the stream's own rules (ORDER BY an event time, say) first
            engine = KeyedStream(self.plan, tuple(query_columns(self.plan)), query_text=self.text or "")
        except CepError as why:
            streaming = f"streaming: not possible as written ({why.message})"
        else:
            streaming = stream_line(engine.route())
        return explain(self.plan) + "\n  " + streaming

    # ---------------------------------------------------------------------- how a query shows itself

    def describe(self) -> list[tuple[str, str]]:
        """The query clause by clause, as (clause, text) pairs: what ``repr`` and notebooks show."""
        mr = self.statement.match
        pattern = f"({format_pattern(mr.pattern)})"
        if mr.within is not None:
            pattern += f" WITHIN INTERVAL '{mr.within.text}' {mr.within.unit}"
        order = [format_expr(key.expr) + (" DESC" if key.descending else "") for key in mr.order_by]
        rows = {
            "ONE": "ONE ROW PER MATCH",
            "ALL_SHOW_EMPTY": "ALL ROWS PER MATCH",
            "ALL_OMIT_EMPTY": "ALL ROWS PER MATCH OMIT EMPTY MATCHES",
            "ALL_WITH_UNMATCHED": "ALL ROWS PER MATCH WITH UNMATCHED ROWS",
        }[mr.rows_per_match.mode]
        if mr.rows_per_match.show_timeout:
            rows += " SHOW TIMEOUT MATCHES"
        clauses = [
            ("PARTITION BY", ", ".join(ref.column.name for ref in mr.partition_by)),
            ("ORDER BY", ", ".join(order)),
            ("MEASURES", ", ".join(m.name.name for m in mr.measures)),
            ("ROWS", rows),
            ("AFTER MATCH", _skip_text(mr.after_match)),
            ("PATTERN", pattern),
        ]
        clauses += [(f"DEFINE {d.variable.name}", format_expr(d.condition)) for d in mr.defines]
        return [(clause, text) for clause, text in clauses if text]

    def __repr__(self) -> str:
        clauses = dict(self.describe())
        head = " ".join(filter(None, [self.name, f"({self.filename})" if self.filename else None]))
        body = " ".join(f"{c} {clauses[c]}" for c in ("PARTITION BY", "ORDER BY", "PATTERN") if c in clauses)
        if "MEASURES" in clauses:
            body += f" -> {clauses['MEASURES']}"
        return f"<cep.Query {head + ': ' if head else ''}{body}>"

    def _repr_html_(self) -> str:
        """Jupyter's rich display: the query's clauses as a table, then the text as written."""
        title = html.escape(" ".join(filter(None, ["cep.Query", self.name, self.filename])))
        rows = "".join(
            f"<tr><th style='text-align:left'>{html.escape(clause)}</th><td style='text-align:left'>"
            f"<code>{html.escape(text)}</code></td></tr>"
            for clause, text in self.describe()
        )
        return (
            f"<div class='cep-query'><strong>{title}</strong><table>{rows}</table>"
            f"<details><summary>query text</summary><pre>{html.escape(self.text.strip())}</pre></details></div>"
        )


def _skip_text(skip) -> str:
    if skip is None or skip.mode == "PAST_LAST_ROW":
        return "SKIP PAST LAST ROW"
    if skip.mode == "TO_NEXT_ROW":
        return "SKIP TO NEXT ROW"
    where = "" if skip.plain else ("FIRST " if skip.mode == "TO_FIRST" else "LAST ")
    return f"SKIP TO {where}{skip.variable.name}"


def compile(text: str, *, filename: str | None = None, column_wise: bool = True) -> Query:  # noqa: A001
    """Parse, check and compile one statement. ``column_wise=False`` runs it on the Pike VM alone, never on
    the column-wise engines (the same rows, slower): the reference to compare with when chasing a difference."""
    return Query(parse(text, filename=filename), text, filename, column_wise=column_wise)


def compile_all(text: str, *, filename: str | None = None) -> list[Query]:
    """Parse, check and compile every statement of a file (statements separated by ';')."""
    return [Query(statement, text, filename) for statement in parse_all(text, filename=filename)]


def load_rules(path: str) -> rules_mod.RuleSet:
    """The rules of a rule set (a directory of ``*.sql`` files, or one file), with their ids and versions
    as ``cep stream --rules`` gives them, checked as it checks them (``ruleset.errors`` holds the others)."""
    return rules_mod.load_rules(path, check=check_rule)


def compile_rule(rule: rules_mod.Rule, *, alert_columns: bool = False) -> Query:
    """One rule of a set as a query whose match ids are those ``cep stream --rules`` gives the same matches
    (with ``run(..., session_timeout=<the stream's>, match_ids=True)``). ``alert_columns`` adds the measures
    the stream adds to a rule: the match status (when it can be other than MATCHED) and the first and last
    event time (``cep_alert_status``, ``cep_alert_first``, ``cep_alert_last``)."""
    statement = alert_statement(rule.statement)[0] if alert_columns else rule.statement
    return Query(statement, rule.placed_text, rule.path, match_id_text=match_id_text(rule.rule_id, rule.canonical))


def rule_alerts(rule: rules_mod.Rule, matches, *, suppress: Sequence[suppress_mod.SuppressSpec] = ()) -> list[dict]:
    """The alerts the stream gives for ``rule``, from ``matches`` (the rows of ``compile_rule(rule,
    alert_columns=True).run(..., match_ids=True)``, a list of dicts or a pandas DataFrame): the alert
    columns of ``cep stream``'s ``--output`` without ``emit_time``, suppression decided per partition key
    in event-time order as the stream decides it."""
    records = matches.to_dict("records") if hasattr(matches, "to_dict") else list(matches)
    partition = [ref.column.name for ref in rule.statement.match.partition_by]
    throttle = suppress_mod.Throttle(suppress_mod.interval_us(rule.rule_id, rule.options, suppress))
    last_alert: dict[str, int | None] = {}
    alerts = []

    def event_us(row: dict) -> int | None:
        moment = row.get(ALERT_LAST) if row.get(ALERT_LAST) is not None else row.get(ALERT_FIRST)
        if moment is None:
            return None
        if hasattr(moment, "to_pydatetime"):
            moment = moment.to_pydatetime()
        return state_codec.datetime_to_micros(moment)

    for row in sorted(records, key=lambda r: (event_us(r) or 0, r.get("match_id") or "")):
        row_columns = ColumnNames(row)
        keys = [row_columns.find_name(c) or c for c in partition]
        key = json.dumps({name: jsonable(row[name]) for name in keys}, ensure_ascii=False)
        suppressed, last_alert[key] = throttle.decide(last_alert.get(key), event_us(row))
        measures = {k: jsonable(v) for k, v in row.items() if k not in INTERNAL_MEASURES and k != "match_id"}
        alerts.append(
            {
                "rule_id": rule.rule_id,
                "rule_version": rule.version,
                "match_id": row.get("match_id"),
                "match_status": row.get(ALERT_STATUS) or "MATCHED",
                "partition_key": key,
                "first_event_time": row.get(ALERT_FIRST),
                "last_event_time": row.get(ALERT_LAST),
                "measures": json.dumps(measures, ensure_ascii=False),
                "suppressed": bool(suppressed),
            }
        )
    return alerts


ALERT_REPLAY_NAMES = tuple(name for name in ALERT_NAMES if name != "emit_time")
