"""A rule set for the stream: what an alert rule may do, the measures cep adds to it, and the payload the
driver publishes for the executors (``store.RuleStore``); the names the driver and the workers share.

``alerting/stream.py`` says how the whole maps onto Spark.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

from cep.grammar import ast
from cep.grammar.columns import ColumnNames
from cep.grammar.errors import CepError, CepSemanticError, Span
from cep.grammar.parser import parse
from cep.matcher.plan import CompiledQuery
from cep.matcher.sql.types import narrow_integer_columns
from cep.spark_bridge.alerting import rules as rules_mod
from cep.spark_bridge.alerting import suppress as suppress_mod
from cep.spark_bridge.engine.keyed import DEFAULT_MAX_PENDING_ROWS, KeyedStream

DEFAULT_HOUSEKEEPING = "1 hour"
METRICS_NAME = "cep_rules"
BAD_ROWS_METRICS = "cep_bad_rows"  # one count per reason of the bad input rows, per micro-batch
BATCH_ID_PROPERTY = "streaming.sql.batchId"
RULESET_FORMAT = "cep-ruleset-1"
STATUS_FORMAT = "cep-status-1"

ALERT_STATUS = "cep_alert_status"
ALERT_FIRST = "cep_alert_first"
ALERT_LAST = "cep_alert_last"
INTERNAL_MEASURES = (ALERT_STATUS, ALERT_FIRST, ALERT_LAST)

# The columns of the rule set's operator (spark/columns.py has those every operator adds).
SPEC = "__cep_spec"
PKEY = "__cep_pkey"
BUCKET = "__cep_bucket"  # the grouping column of a bucket of partition keys (spark/buckets.py)
FILE = "__cep_file"  # the input file of a bad row (NULL on good rows: they need none)
KIND_MATCH, KIND_BAD, KIND_STATS, KIND_LATE = 0, 1, 2, 3
# A rule that failed on a key (laid out as a late row: rule id, version, the key, the error in ``measures``);
# the driver quarantines the rule from the next micro-batch on (rule_watch.RuleWatch.quarantine).
KIND_FAILED = 4
FAILURE_TEXT_LIMIT = 2000  # characters of a failure's message kept: the first lines name the cause
ROW_ID = "__cep_row_id"  # an input row's id within its micro-batch: a row late for several rules counts once
# The group bad input rows travel in (``inputs.mark_bad_rows``): not a JSON list, so no partition spec.
BAD_SPEC = "bad-rows"

STAT_NAMES = (
    "events_in",  # rows received by the rule's keys (late ones included)
    "late_rows",  # rows not matched because late (behind the watermark, no event time, forced release)
    "matched",  # alerts with match_status MATCHED
    "timeouts",  # ... TIMEOUT
    "absences",  # ... ABSENCE
    "suppressed",  # alerts marked suppressed (throttled)
    "d_live",  # change in live partial matches (summed over calls: the rule's total)
    "d_pending",  # change in rows waiting for the watermark
    "d_keys",  # change in keys with state
    "dropped_live",  # partial matches dropped because the rule changed or was removed
    "dropped_pending",  # waiting rows dropped for the same reason
    "timers_fired",  # calls made by a timer
    "cap_hits",  # rows released early by max_pending_rows
    "sessions_closed",
    "duplicates_dropped",  # rows dropped as repeats of the stream's dedup key (keyed.KeyedStream)
)
GAUGES = {"d_live": "live_partial_matches", "d_pending": "pending_rows", "d_keys": "keys"}

_S = Span()


def check_rule(rule: rules_mod.Rule) -> None:
    """What an alert rule may not do on a stream (raises ``CepSemanticError`` at the offending node)."""
    statement = rule.statement
    mr = statement.match
    if statement.order_by or statement.limit is not None:
        span = statement.order_by[0].span if statement.order_by else statement.span
        raise CepSemanticError(
            "ORDER BY and LIMIT after MATCH_RECOGNIZE cannot run on a stream (the output never ends)",
            code="E0285",
            span=span,
            hint="remove them; sort or limit where you read the alerts",
        )
    if mr.rows_per_match.mode != "ONE":
        raise CepSemanticError(
            "an alert rule gives one alert per match: ALL ROWS PER MATCH cannot be used in a rule set",
            code="E0602",
            span=mr.rows_per_match.span,
            hint="use ONE ROW PER MATCH (the default) and put what you need in MEASURES",
        )
    if not mr.order_by:
        raise CepSemanticError("an alert rule needs ORDER BY an event-time column", code="E0280", span=mr.span)
    first = mr.order_by[0]
    if isinstance(first.expr, ast.ProcTime):
        raise CepSemanticError(
            "alert rules run in event time: ORDER BY PROCTIME() cannot be used in a rule set",
            code="E0603",
            span=first.span,
            hint="order by the event-time column",
        )
    if not isinstance(first.expr, ast.ColumnRef) or first.descending:
        raise CepSemanticError(
            "on a stream the first ORDER BY key must be the event-time column, ascending", code="E0281", span=first.span
        )
    for measure in mr.measures:
        if measure.name.name.lower().startswith("cep_alert_"):
            raise CepSemanticError(
                f"the name {measure.name.name!r} is reserved for cep's own measures (cep_alert_...)",
                code="E0284",
                span=measure.span,
                hint="rename it",
            )
    for item in statement.select:
        if item.alias is not None and item.alias.name.lower().startswith("cep_alert_"):
            raise CepSemanticError(
                f"the name {item.alias.name!r} is reserved for cep's own measures (cep_alert_...)",
                code="E0284",
                span=item.span,
                hint="rename it",
            )


def alert_statement(statement: ast.Statement) -> tuple[ast.Statement, bool]:
    """The statement with cep's measures added: MATCH_STATUS() (when it can be other than MATCHED),
    FIRST and LAST of the event-time column. Returns (statement, has the status measure)."""
    mr = statement.match
    time_ref = mr.order_by[0].expr
    time_ref = ast.ColumnRef(_S, None, time_ref.column)
    has_status = bool(mr.rows_per_match.show_timeout or any(isinstance(n, ast.Absence) for n in ast.walk(mr.pattern)))
    extra = []
    if has_status:
        extra.append(ast.Measure(_S, ast.MatchStatus(_S), ast.Identifier(_S, ALERT_STATUS)))
    extra.append(ast.Measure(_S, ast.Navigation(_S, "FIRST", time_ref), ast.Identifier(_S, ALERT_FIRST)))
    extra.append(ast.Measure(_S, ast.Navigation(_S, "LAST", time_ref), ast.Identifier(_S, ALERT_LAST)))
    select = statement.select
    if not any(isinstance(item.expr, ast.Star) for item in select):
        select = select + tuple(
            ast.SelectItem(_S, ast.ColumnRef(_S, None, ast.Identifier(_S, m.name.name))) for m in extra
        )
    rewritten = dataclasses.replace(
        statement, match=dataclasses.replace(mr, measures=mr.measures + tuple(extra)), select=select
    )
    return rewritten, has_status


def rule_source(entry: dict) -> str:
    """A rule's statement as written, at its line and column of its file (blank lines and spaces before it):
    parsed in a worker, its positions, and so those of its run-time errors, are the file's."""
    return rules_mod.at_place(entry["source"], entry["line"], entry["column"])


def statement_to_run(entry: dict) -> ast.Statement:
    """The statement the workers run for a rule: the rule as written, with cep's measures (``alert_statement``).
    A rule kept from a set stored by an earlier version of cep carries that statement formatted (``text``)."""
    if "source" not in entry:
        return parse(entry["text"])
    return alert_statement(parse(rule_source(entry)))[0]


def match_id_text(rule_id: str, canonical: str) -> str:
    """What match ids hash for a rule: its id and canonical text (stable for an unchanged rule)."""
    return f"cep-alert-rule\n{rule_id}\n{canonical}"


def rule_payload(
    rule: rules_mod.Rule,
    *,
    input_types: dict[str, str],
    time_column: str,
    specs: Sequence[suppress_mod.SuppressSpec] = (),
    session_timeout_us: int | None = None,
    max_pending_rows: int = DEFAULT_MAX_PENDING_ROWS,
) -> dict:
    """Check ``rule`` against the stream and compile it into what the workers need (raises CepError)."""
    check_rule(rule)
    columns = list(input_types)
    first = rule.statement.match.order_by[0]
    ordered_by = ColumnNames(columns).resolve(first.expr.column, first.span)
    if ordered_by != time_column:
        raise CepSemanticError(
            f"this rule orders by {ordered_by!r}, but the stream's event time is {time_column!r}: "
            "every rule of a rule set orders by the same event-time column",
            code="E0604",
            span=first.span,
            hint=f"ORDER BY {time_column}, or run it in a stream of its own",
        )
    # The input-dependent checks on the rule as written (errors point into its file) ...
    plan = CompiledQuery(rule.statement)
    KeyedStream(
        plan,
        columns,
        query_text=rule.canonical,
        session_timeout_us=session_timeout_us,
        max_pending_rows=max_pending_rows,
        integer_columns=narrow_integer_columns(input_types),
    )
    plan.output_types(input_types)
    partition = list(plan.partition_names(columns))
    # ... then the statement the workers run, with cep's measures.
    rewritten, has_status = alert_statement(rule.statement)
    try:
        CompiledQuery(rewritten).output_types(input_types)
    except CepError as err:  # pragma: no cover - a bug in alert_statement, not in the rule
        raise CepSemanticError(f"internal error preparing the rule for alerting: {err.message}", code="E0609") from None
    return {
        "rule_id": rule.rule_id,
        "version": rule.version,
        "path": rule.path,
        "name": rule.name,
        "line": rule.line,
        "column": rule.statement.span.column or 1,
        "canonical": rule.canonical,
        "source": rule.text,
        "partition": partition,
        "status_column": has_status,
        "suppress_us": suppress_mod.interval_us(rule.rule_id, rule.options, specs),
        "options": dict(rule.options),  # severity, summary: what the delivery lanes read (sinks/payloads.py)
    }


def event_time_of(rule: rules_mod.Rule, columns: Sequence[str]) -> str | None:
    """The input column a rule orders by first (None if it has no usable ORDER BY)."""
    mr = rule.statement.match
    if not mr.order_by or not isinstance(mr.order_by[0].expr, ast.ColumnRef):
        return None
    try:
        return ColumnNames(columns).lookup(mr.order_by[0].expr.column)
    except CepSemanticError:  # ambiguous
        return None


def _first_event_time(path: str, columns: Sequence[str]) -> str | None:
    """The first ORDER BY column of the first loadable rule that has one, its files loaded one at a time until
    then: a rule set is not loaded whole once more only to read one rule's time column."""
    try:
        files = rules_mod.rule_files(path) if os.path.exists(path) else []
    except OSError:
        return None  # the load that follows says why
    for file_path in files:
        for rule in rules_mod.load_rules(path, files=[file_path]):
            time_column = event_time_of(rule, columns)
            if time_column is not None:
                return time_column
    return None


def build_rule_set(
    path: str,
    *,
    input_types: dict[str, str],
    time_column: str | None = None,
    suppress: Sequence[suppress_mod.SuppressSpec] = (),
    session_timeout_us: int | None = None,
    max_pending_rows: int = DEFAULT_MAX_PENDING_ROWS,
) -> tuple[dict, rules_mod.RuleSet]:
    """Load the rules at ``path`` and compile the runnable ones: (rule set payload, RuleSet with errors).

    ``time_column`` None: the first loadable rule's first ORDER BY column.
    """
    columns = list(input_types)
    if time_column is None:
        time_column = _first_event_time(path, columns)
    payloads: dict[str, dict] = {}

    def check(rule: rules_mod.Rule) -> None:
        if time_column is None:
            raise CepSemanticError(
                "cannot tell the stream's event-time column: no rule orders by an input column "
                "(give the time column explicitly)",
                code="E0604",
            )
        payloads[rule.rule_id] = rule_payload(
            rule,
            input_types=input_types,
            time_column=time_column,
            specs=suppress,
            session_timeout_us=session_timeout_us,
            max_pending_rows=max_pending_rows,
        )

    ruleset = rules_mod.load_rules(path, check=check)
    payload = {
        "format": RULESET_FORMAT,
        "input_columns": columns,
        "input_types": dict(input_types),
        "time_column": time_column,
        "session_timeout_us": session_timeout_us,
        "max_pending_rows": max_pending_rows,
        "rules": [payloads[r] for r in ruleset.rules],
    }
    return payload, ruleset
