"""Many rules over one input stream; rules added, changed and removed while the stream runs.

    stream = AlertStream(spark, "rules/", events_df, checkpoint="ck/", output="alerts/", output_format="json",
                         sinks=[WebhookSink(url, dead_letter_dir="ck/dead-letter")], suppress=["fraud/*=10m"])
    stream.start()
    stream.run()                      # until Ctrl-C: picks up rule changes, writes ck/status.json
    # or, step by step (tests):  stream.refresh_rules(); stream.process_all_available(); stream.stop()

How it maps onto Spark (``docs/alerting.md`` has the measurements behind the choice):

* **One stateful operator for all rules**, not one streaming query per rule. Every input row is
  tagged, once per distinct PARTITION BY of the active rules (``mapInPandas``), with that partition
  key (a JSON object of its values); then ``groupBy(partition spec, key).applyInPandasWithState(...)``
  runs, for that key, every rule with that PARTITION BY, each with its own ``keyed.KeyedStream``
  engine: the same buffering, watermark, timers, sessions and match ids as ``spark_bridge.streaming``.
  Logically the state is keyed by (rule, partition key); physically the rules sharing a PARTITION BY
  share one Spark key, whose state holds one entry per rule, so a key costs one Python call per
  micro-batch however many rules read it. One query, one checkpoint, one watermark, one shuffle.
* **Rule changes between micro-batches, without stopping anything.** The driver publishes each new rule
  set (rules compiled, with their versions) as an immutable file under ``<checkpoint>/rules/sets/`` and
  points ``<checkpoint>/rules/current`` at it. Inside Spark, the first task of micro-batch *n* to ask
  fixes the set for that batch by creating ``<checkpoint>/rules/batches/<n>`` (an atomic, create-once
  link), and every task of the batch reads it from there (the batch id is the task's
  ``streaming.sql.batchId`` property). So a batch sees one rule set, and a batch re-run after a crash
  sees the same one. Workers cache compiled rules by version.
* **Versions and state.** Each rule's entry in a key's state records the rule version that built it.
  A key, when next called (new rows or a timer), drops the entries of changed rules (partial matches and waiting rows,
  counted per old version as ``dropped_live``/``dropped_pending``) and starts fresh; a removed rule's
  keys drop theirs. A key with no deadline of its own sets a housekeeping timer (``housekeeping``, event
  time) so that stale state is reclaimed even for keys that never get another row. An unchanged rule's
  keys keep their state across changes of other rules and across restarts (Spark's state store and
  checkpoint).
* **Output**: ``sinks.ALERT_COLUMNS``: rule_id, rule_version, match_id, match_status ('MATCHED' |
  'TIMEOUT' | 'ABSENCE'), partition_key (JSON), first_event_time, last_event_time, measures (JSON of the
  rule's output columns), emit_time, suppressed. ``match_status``, the first and last event time come from
  measures added to each rule internally (``MATCH_STATUS()`` where the rule can time out or has an
  absence, ``FIRST(ts)``, ``LAST(ts)``); the user's own columns are unchanged.
* **Delivery**: the alerts go to Spark's file sink (exactly once, ``_spark_metadata``) at ``output``;
  when alert sinks are given, a second query reads that directory as a stream and hands each
  micro-batch to them in ``foreachBatch`` (``sinks.deliver_batch``; idempotent by match_id).
* **Metrics and status**: each key call emits one statistics row per rule it ran, collected per micro-batch with
  ``DataFrame.observe`` and summed per rule and version by the driver into ``<checkpoint>/status.json``
  (``cep status`` prints it).

Rules must share the stream's event-time column (the first ORDER BY column; ``time_column`` or the first
rule's). Rules a stream cannot run, or that do not fit the input, are reported with file:line:col and
skipped; the others run. A running rule whose file is edited into one that does not compile keeps
running its last good version (and says so in the status) until the file compiles again. A rule's ``FROM`` name is not read: every rule runs over the one input stream.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json
import logging
import os
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence

from grammar import ast
from grammar.errors import CepError, CepSemanticError, Span
from grammar.format import format_statement
from spark_bridge import rules as rules_mod
from spark_bridge import state_codec as codec
from spark_bridge import suppress as suppress_mod
from spark_bridge.keyed import DEFAULT_MAX_PENDING_ROWS, KeyedStream, spark_timeout_ms
from spark_bridge.sinks import ALERT_COLUMNS, ALERT_NAMES, AlertSink, Delivery, FileSink, deliver_batch, jsonable, rows_to_alerts

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "AlertStream",
    "RuleStore",
    "STAT_NAMES",
    "build_rule_set",
    "check_rule",
    "alert_statement",
    "match_rules",
]

log = logging.getLogger("cep.alerting")

DEFAULT_HOUSEKEEPING = "1 hour"
METRICS_NAME = "cep_rules"
BATCH_ID_PROPERTY = "streaming.sql.batchId"
RULESET_FORMAT = "cep-ruleset-1"
STATUS_FORMAT = "cep-status-1"

ALERT_STATUS = "cep_alert_status"
ALERT_FIRST = "cep_alert_first"
ALERT_LAST = "cep_alert_last"
INTERNAL_MEASURES = (ALERT_STATUS, ALERT_FIRST, ALERT_LAST)

_SPEC = "__cep_spec"
_PKEY = "__cep_pkey"
_EVENT_US = "__cep_event_us"
_MARKER = "__cep_watermark_marker"
_KIND = "__cep_kind"
_STATS = "__cep_stats"
_NULL_TIME = -(2**63)
_WATERMARK_KEY = "spark.watermarkDelayMs"
KIND_MATCH, KIND_STATS = 0, 2

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
)
_GAUGES = {"d_live": "live_partial_matches", "d_pending": "pending_rows", "d_keys": "keys"}

_S = Span()


# ----------------------------------------------------------------------------------- rule checks


def _has_absence(pattern) -> bool:
    if isinstance(pattern, ast.Absence):
        return True
    for name in ("items", "alternatives"):
        for item in getattr(pattern, name, ()) or ():
            if _has_absence(item):
                return True
    for name in ("term", "pattern"):
        inner = getattr(pattern, name, None)
        if inner is not None and not isinstance(inner, (str, ast.Identifier)) and _has_absence(inner):
            return True
    return False


def check_rule(rule: rules_mod.Rule) -> None:
    """What an alert rule may not do on a stream (raises ``CepSemanticError`` at the offending node)."""
    statement = rule.statement
    mr = statement.match
    if statement.order_by or statement.limit is not None:
        span = statement.order_by[0].span if statement.order_by else statement.span
        raise CepSemanticError("ORDER BY and LIMIT after MATCH_RECOGNIZE cannot run on a stream (the output never ends)",
                               code="E0285", span=span, hint="remove them; sort or limit where you read the alerts")
    if mr.rows_per_match.mode != "ONE":
        raise CepSemanticError("an alert rule gives one alert per match: ALL ROWS PER MATCH cannot be used in a rule set",
                               code="E0602", span=mr.rows_per_match.span,
                               hint="use ONE ROW PER MATCH (the default) and put what you need in MEASURES")
    if not mr.order_by:
        raise CepSemanticError("an alert rule needs ORDER BY an event-time column", code="E0280", span=mr.span)
    first = mr.order_by[0]
    if isinstance(first.expr, ast.ProcTime):
        raise CepSemanticError("alert rules run in event time: ORDER BY PROCTIME() cannot be used in a rule set",
                               code="E0603", span=first.span, hint="order by the event-time column")
    if not isinstance(first.expr, ast.ColumnRef) or first.descending:
        raise CepSemanticError("on a stream the first ORDER BY key must be the event-time column, ascending",
                               code="E0281", span=first.span)
    for measure in mr.measures:
        if measure.name.name.lower().startswith("cep_alert_"):
            raise CepSemanticError(f"the name {measure.name.name!r} is reserved for cep's own measures (cep_alert_...)",
                                   code="E0284", span=measure.span, hint="rename it")
    for item in statement.select:
        if item.alias is not None and item.alias.name.lower().startswith("cep_alert_"):
            raise CepSemanticError(f"the name {item.alias.name!r} is reserved for cep's own measures (cep_alert_...)",
                                   code="E0284", span=item.span, hint="rename it")


def alert_statement(statement: ast.Statement) -> tuple[ast.Statement, bool]:
    """The statement with cep's measures added: MATCH_STATUS() (when it can be other than MATCHED),
    FIRST and LAST of the event-time column. Returns (statement, has the status measure)."""
    mr = statement.match
    time_ref = mr.order_by[0].expr
    time_ref = ast.ColumnRef(_S, None, time_ref.column)
    has_status = bool(mr.rows_per_match.show_timeout or _has_absence(mr.pattern))
    extra = []
    if has_status:
        extra.append(ast.Measure(_S, ast.MatchStatus(_S), ast.Identifier(_S, ALERT_STATUS)))
    extra.append(ast.Measure(_S, ast.Navigation(_S, "FIRST", time_ref), ast.Identifier(_S, ALERT_FIRST)))
    extra.append(ast.Measure(_S, ast.Navigation(_S, "LAST", time_ref), ast.Identifier(_S, ALERT_LAST)))
    select = statement.select
    if not any(isinstance(item.expr, ast.Star) for item in select):
        select = select + tuple(ast.SelectItem(_S, ast.ColumnRef(_S, None, ast.Identifier(_S, m.name.name))) for m in extra)
    rewritten = dataclasses.replace(statement, match=dataclasses.replace(mr, measures=mr.measures + tuple(extra)), select=select)
    return rewritten, has_status


def _match_id_text(rule_id: str, canonical: str) -> str:
    """What match ids hash for a rule: its id and canonical text (stable for an unchanged rule)."""
    return f"cep-alert-rule\n{rule_id}\n{canonical}"


def _resolve(name: str, columns: Sequence[str], clause: str) -> str:
    from spark_bridge.batch import resolve_columns

    return resolve_columns([name], list(columns), clause=clause)[0]


def rule_payload(rule: rules_mod.Rule, *, input_types: dict[str, str], time_column: str,
                 specs: Sequence[suppress_mod.SuppressSpec] = (), session_timeout_us: int | None = None,
                 max_pending_rows: int = DEFAULT_MAX_PENDING_ROWS) -> dict:
    """Check ``rule`` against the stream and compile it into what the workers need (raises CepError)."""
    from grammar.parser import parse
    from matcher.plan import CompiledQuery

    check_rule(rule)
    columns = list(input_types)
    first = rule.statement.match.order_by[0]
    try:
        ordered_by = _resolve(first.expr.column.name, columns, "ORDER BY")
    except CepSemanticError as err:
        raise CepSemanticError(err.message, code=err.code, span=first.span) from None
    if ordered_by != time_column:
        raise CepSemanticError(
            f"this rule orders by {ordered_by!r}, but the stream's event time is {time_column!r}: "
            "every rule of a rule set orders by the same event-time column",
            code="E0604", span=first.span, hint=f"ORDER BY {time_column}, or run it in a stream of its own",
        )
    # The input-dependent checks on the rule as written (errors point into its file) ...
    plan = CompiledQuery(rule.statement)
    KeyedStream(plan, columns, query_text=rule.canonical, session_timeout_us=session_timeout_us, max_pending_rows=max_pending_rows)
    plan.output_types(input_types)
    try:
        partition = [_resolve(c, columns, "PARTITION BY") for c in plan.partition_columns]
    except CepSemanticError as err:
        span = rule.statement.match.partition_by[0].span if rule.statement.match.partition_by else _S
        raise CepSemanticError(err.message, code=err.code, span=span) from None
    # ... then the statement the workers run, with cep's measures.
    rewritten, has_status = alert_statement(rule.statement)
    text = format_statement(rewritten)
    try:
        parse(text)
    except CepError as err:  # pragma: no cover - a bug in alert_statement, not in the rule
        raise CepSemanticError(f"internal error preparing the rule for alerting: {err.message}", code="E0609") from None
    return {
        "rule_id": rule.rule_id,
        "version": rule.version,
        "path": rule.path,
        "name": rule.name,
        "line": rule.line,
        "canonical": rule.canonical,
        "text": text,
        "partition": partition,
        "status_column": has_status,
        "suppress_us": suppress_mod.interval_us(rule.rule_id, rule.options, specs),
    }


def event_time_of(rule: rules_mod.Rule, columns: Sequence[str]) -> str | None:
    """The input column a rule orders by first (None if it has no usable ORDER BY)."""
    mr = rule.statement.match
    if not mr.order_by or not isinstance(mr.order_by[0].expr, ast.ColumnRef):
        return None
    try:
        return _resolve(mr.order_by[0].expr.column.name, columns, "ORDER BY")
    except CepSemanticError:
        return None


def build_rule_set(path: str, *, input_types: dict[str, str], time_column: str | None = None,
                   suppress: Sequence[suppress_mod.SuppressSpec] = (), session_timeout_us: int | None = None,
                   max_pending_rows: int = DEFAULT_MAX_PENDING_ROWS) -> tuple[dict, rules_mod.RuleSet]:
    """Load the rules at ``path`` and compile the runnable ones: (rule set payload, RuleSet with errors).

    ``time_column`` None: the first loadable rule's first ORDER BY column.
    """
    columns = list(input_types)
    if time_column is None:
        for rule in rules_mod.load_rules(path):
            time_column = event_time_of(rule, columns)
            if time_column is not None:
                break
    payloads: dict[str, dict] = {}

    def check(rule: rules_mod.Rule) -> None:
        if time_column is None:
            raise CepSemanticError("cannot tell the stream's event-time column: no rule orders by an input column "
                                   "(give the time column explicitly)", code="E0604")
        payloads[rule.rule_id] = rule_payload(rule, input_types=input_types, time_column=time_column, specs=suppress,
                                              session_timeout_us=session_timeout_us, max_pending_rows=max_pending_rows)

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


# ------------------------------------------------------------------------------------ rule store


def _atomic_write(path: str, text: str) -> None:
    tmp = f"{path}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


class RuleStore:
    """Rule sets published by the driver and the set each micro-batch runs with (see the module doc).

    ``<dir>/sets/<id>.json``  an immutable rule set (id: hash of its content)
    ``<dir>/current``         the id of the set new micro-batches take
    ``<dir>/batches/<n>``     the id of the set micro-batch n ran with (created once, by its first task)

    The directory must be readable and writable at the same path by the driver and every executor
    (a local path in local mode; a shared file system on a cluster).
    """

    def __init__(self, directory: str) -> None:
        self.directory = os.path.abspath(directory)
        self.sets_dir = os.path.join(self.directory, "sets")
        self.batches_dir = os.path.join(self.directory, "batches")
        self.current_path = os.path.join(self.directory, "current")
        self._sets: dict[str, dict] = {}

    def publish(self, payload: dict) -> str:
        os.makedirs(self.sets_dir, exist_ok=True)
        os.makedirs(self.batches_dir, exist_ok=True)
        text = json.dumps(payload, sort_keys=True, ensure_ascii=False)
        set_id = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
        path = os.path.join(self.sets_dir, f"{set_id}.json")
        if not os.path.exists(path):
            _atomic_write(path, text)
        if self.current_id() != set_id:
            _atomic_write(self.current_path, set_id)
        return set_id

    def current_id(self) -> str | None:
        try:
            with open(self.current_path, encoding="utf-8") as fh:
                return fh.read().strip() or None
        except FileNotFoundError:
            return None

    def load(self, set_id: str) -> dict:
        found = self._sets.get(set_id)
        if found is None:
            with open(os.path.join(self.sets_dir, f"{set_id}.json"), encoding="utf-8") as fh:
                found = self._sets[set_id] = json.load(fh)
        return found

    def set_for_batch(self, batch_id: int | str | None) -> str:
        """The set micro-batch ``batch_id`` runs with, fixed by whoever asks first."""
        if batch_id is None:
            current = self.current_id()
            if current is None:
                raise RuntimeError(f"no rule set published in {self.directory}")
            return current
        path = os.path.join(self.batches_dir, str(int(batch_id)))
        try:
            with open(path, encoding="utf-8") as fh:
                return fh.read().strip()
        except FileNotFoundError:
            pass
        current = self.current_id()
        if current is None:
            raise RuntimeError(f"no rule set published in {self.directory}")
        os.makedirs(self.batches_dir, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(current)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)  # atomic and create-once: the first task of the batch decides
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
        with open(path, encoding="utf-8") as fh:
            return fh.read().strip()

    def batch_sets(self) -> dict[int, str]:
        if not os.path.isdir(self.batches_dir):
            return {}
        out = {}
        for name in os.listdir(self.batches_dir):
            if name.isdigit():
                with open(os.path.join(self.batches_dir, name), encoding="utf-8") as fh:
                    out[int(name)] = fh.read().strip()
        return out

    def prune(self, keep: int = 200) -> None:
        """Forget the sets of all but the last ``keep`` micro-batches (Spark re-runs at most the last one)."""
        batches = sorted(self.batch_sets())
        for batch in batches[:-keep] if len(batches) > keep else []:
            try:
                os.remove(os.path.join(self.batches_dir, str(batch)))
            except FileNotFoundError:
                pass


# ----------------------------------------------------------------------------- worker side

_COMPILED: dict[str, "_CompiledRule"] = {}
_RUNTIMES: dict[tuple[str, str], "_RuleSetRuntime"] = {}
_BATCH_SETS: dict[tuple[str, str], str] = {}
_STORES: dict[str, RuleStore] = {}


class _CompiledRule:
    """One rule ready to run in a worker: its engine and where its cep columns are in the output."""

    def __init__(self, entry: dict, ruleset: dict) -> None:
        from grammar.parser import parse
        from matcher.plan import CompiledQuery

        self.rule_id = entry["rule_id"]
        self.version = entry["version"]
        statement = parse(entry["text"])
        plan = CompiledQuery(statement)
        columns = list(ruleset["input_columns"])
        self.engine = KeyedStream(
            plan,
            columns,
            query_text=_match_id_text(self.rule_id, entry["canonical"]),
            session_timeout_us=ruleset.get("session_timeout_us"),
            max_pending_rows=ruleset.get("max_pending_rows") or DEFAULT_MAX_PENDING_ROWS,
        )
        names = [n for n, _ in plan.output_types(dict(ruleset["input_types"]))]
        self.status_index = names.index(ALERT_STATUS) if entry.get("status_column") else None
        self.first_index = names.index(ALERT_FIRST)
        self.last_index = names.index(ALERT_LAST)
        self.measures = [(i, n) for i, n in enumerate(names) if n not in INTERNAL_MEASURES]
        self.partition = list(entry["partition"])
        self.throttle = suppress_mod.Throttle(entry.get("suppress_us"))


class _RuleSetRuntime:
    def __init__(self, set_id: str, payload: dict) -> None:
        self.set_id = set_id
        self.payload = payload
        self.entries = {e["rule_id"]: e for e in payload["rules"]}
        self.partitions: dict[str, list[str]] = {}  # spec id -> PARTITION BY columns
        self.rules_by_spec: dict[str, list[str]] = {}  # spec id -> rule ids, in the set's order
        for entry in payload["rules"]:
            spec = _spec_id(entry["partition"])
            self.partitions[spec] = list(entry["partition"])
            self.rules_by_spec.setdefault(spec, []).append(entry["rule_id"])

    def rule(self, rule_id: str) -> _CompiledRule | None:
        entry = self.entries.get(rule_id)
        if entry is None:
            return None
        cache_key = json.dumps([entry, self.payload["input_columns"], self.payload["input_types"],
                                self.payload.get("session_timeout_us"), self.payload.get("max_pending_rows")], sort_keys=True)
        compiled = _COMPILED.get(cache_key)
        if compiled is None:
            compiled = _COMPILED[cache_key] = _CompiledRule(entry, self.payload)
        return compiled


def _task_batch_id() -> str | None:
    try:
        from pyspark import TaskContext
    except ImportError:  # pragma: no cover
        return None
    context = TaskContext.get()
    if context is None:
        return None
    value = context.getLocalProperty(BATCH_ID_PROPERTY)
    return value if value not in (None, "") else None


def runtime_for(store_dir: str, batch_id: str | None = None) -> _RuleSetRuntime:
    """The rule set of the running micro-batch (cached per worker process)."""
    store = _STORES.get(store_dir)
    if store is None:
        store = _STORES[store_dir] = RuleStore(store_dir)
    if batch_id is None:
        batch_id = _task_batch_id()
    set_id = _BATCH_SETS.get((store_dir, batch_id)) if batch_id is not None else None
    if set_id is None:
        set_id = store.set_for_batch(batch_id)
        if batch_id is not None:
            _BATCH_SETS[(store_dir, batch_id)] = set_id
    runtime = _RUNTIMES.get((store_dir, set_id))
    if runtime is None:
        runtime = _RUNTIMES[(store_dir, set_id)] = _RuleSetRuntime(set_id, store.load(set_id))
    return runtime


class _View:
    """Column access to a pandas frame without copying it (what ``pandas_to_columns`` reads)."""

    def __init__(self, frame, names) -> None:
        self.frame = frame
        self.columns = list(names)

    def __getitem__(self, name):
        return self.frame[name]


def _key_strings(pdf, columns: Sequence[str]) -> list[str]:
    """The partition key of each row as a JSON object (``{"card": "c1"}``), the grouping key."""
    if not columns:
        return ["{}"] * len(pdf)
    from matcher.tables import pandas_to_columns

    values = pandas_to_columns(_View(pdf, columns))
    cache: dict[tuple, str] = {}
    out = []
    for row in zip(*[values[c] for c in columns]):
        try:
            text = cache.get(row)
        except TypeError:  # an unhashable value (an array)
            text = None
        if text is None:
            text = json.dumps({c: jsonable(v) for c, v in zip(columns, row)}, ensure_ascii=False)
            try:
                cache[row] = text
            except TypeError:
                pass
        out.append(text)
    return out


def _spec_id(partition: Sequence[str]) -> str:
    """The grouping tag of a partition spec: the JSON list of its PARTITION BY columns."""
    return json.dumps(list(partition))


def _scalar(value: Any) -> Any:
    """One pandas cell as the batch path's Python value (what ``pandas_to_columns`` gives)."""
    if value is None:
        return None
    if hasattr(value, "to_pydatetime"):
        try:
            import pandas as pd

            if value is pd.NaT:
                return None
        except ImportError:  # pragma: no cover
            pass
        return value
    if type(value).__module__ == "numpy":
        if getattr(value, "dtype", None) is not None and value.dtype.kind in "mM":
            import pandas as pd

            return None if pd.isna(value) else pd.Timestamp(value)
        value = value.item()
    if isinstance(value, float) and value != value:
        return None
    return value


class _Explode:
    """``mapInPandas``: each input row once per partition spec of the micro-batch's rule set, tagged with
    the spec and the row's partition key under it. Rules with the same PARTITION BY share the copy."""

    def __init__(self, store_dir: str, columns: Sequence[str]) -> None:
        self.store_dir = store_dir
        self.columns = list(columns)

    def __call__(self, frames: Iterator["Any"]) -> Iterator["Any"]:
        import pandas as pd

        runtime = None
        for pdf in frames:
            if not len(pdf):
                continue
            if runtime is None:
                runtime = runtime_for(self.store_dir)
            pieces = []
            for spec, partition in runtime.partitions.items():
                piece = pdf[self.columns].copy(deep=False)
                piece.insert(0, _PKEY, _key_strings(pdf, partition))
                piece.insert(0, _SPEC, spec)
                pieces.append(piece)
            if pieces:
                yield pieces[0] if len(pieces) == 1 else pd.concat(pieces, ignore_index=True)


# One key's state (a dict by rule id, encoded with state_codec into the one binary state column):
_VERSION, _BLOB, _LIVE, _PENDING, _LAST_ALERT, _TIMER = range(6)


class _AlertStep:
    """``applyInPandasWithState``: one (partition spec, partition key) in one micro-batch, for every rule
    of the micro-batch's set with that PARTITION BY: each rule's ``KeyedStream`` gets the key's rows (or,
    on a timer call, the rules whose own deadline the watermark reached are called)."""

    def __init__(self, store_dir: str, housekeeping_us: int) -> None:
        self.store_dir = store_dir
        self.housekeeping_us = housekeeping_us

    def __call__(self, key, frames, state):
        import pandas as pd

        from matcher.tables import pandas_to_columns

        spec, pkey = str(key[0]), str(key[1])
        runtime = runtime_for(self.store_dir)
        watermark_ms = state.getCurrentWatermarkMs()
        watermark_us = watermark_ms * 1000
        parts = [frame for frame in frames if len(frame)]
        old: dict = codec.decode(state.get[0]) if state.exists else {}
        new: dict = {}
        alerts: list[tuple] = []
        stats_rows: list[tuple[str, str, dict]] = []

        wanted = runtime.rules_by_spec.get(spec, [])
        for rule_id, entry in old.items():  # rules removed, or changed: their state here goes
            rule = runtime.rule(rule_id) if rule_id in wanted else None
            if rule is None or rule.version != entry[_VERSION]:
                dropped = dict.fromkeys(STAT_NAMES, 0)
                dropped["dropped_live"], dropped["dropped_pending"] = entry[_LIVE], entry[_PENDING]
                dropped["d_live"], dropped["d_pending"], dropped["d_keys"] = -entry[_LIVE], -entry[_PENDING], -1
                stats_rows.append((rule_id, entry[_VERSION], dropped))

        pdf = columns_cache = times = None
        if parts:
            pdf = parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)
            times = [None if us == _NULL_TIME else us for us in pdf[_EVENT_US].tolist()]
            columns_cache = {}
        emitted = _dt.datetime.now(_dt.timezone.utc).replace(tzinfo=None)
        for rule_id in wanted:
            rule = runtime.rule(rule_id)
            entry = old.get(rule_id)
            if entry is not None and entry[_VERSION] != rule.version:
                entry = None
            if pdf is None:
                if entry is None:
                    continue
                timer = entry[_TIMER]
                if timer is None or watermark_us < timer:  # not this rule's turn: keep it as it is
                    new[rule_id] = entry
                    continue
            engine = rule.engine
            columns = key_values = None
            if pdf is not None:
                missing = [c for c in engine.pending_columns if c not in columns_cache]
                if missing:
                    columns_cache.update(pandas_to_columns(_View(pdf, missing)))
                columns = columns_cache
                key_values = tuple(_scalar(pdf[c].iat[0]) for c in rule.partition)
            result = engine.process(entry[_BLOB] if entry is not None else None, key_values, columns,
                                    times if pdf is not None else None, watermark_us, timed_out=pdf is None)
            stats = dict.fromkeys(STAT_NAMES, 0)
            last_alert = entry[_LAST_ALERT] if entry is not None else None
            for row, match_id in zip(result.rows, result.match_ids):
                status = (row[rule.status_index] if rule.status_index is not None else None) or "MATCHED"
                first_time, last_time = row[rule.first_index], row[rule.last_index]
                moment = last_time if last_time is not None else first_time
                event_us = codec.datetime_to_micros(moment) if moment is not None else None
                suppressed, last_alert = rule.throttle.decide(last_alert, event_us)
                measures = json.dumps({name: jsonable(row[i]) for i, name in rule.measures}, ensure_ascii=False)
                alerts.append((rule_id, rule.version, match_id, status, pkey, first_time, last_time, measures, emitted, suppressed))
                stats[_STATUS_STAT.get(status, "matched")] += 1
                stats["suppressed"] += int(suppressed)
            engine_stats = result.stats
            live = int(engine_stats.get("live_matches", 0)) if result.state is not None else 0
            pending = int(engine_stats.get("pending_rows", 0)) if result.state is not None else 0
            for name in ("events_in", "late_rows", "timers_fired", "cap_hits", "sessions_closed"):
                stats[name] = int(engine_stats.get(name, 0))
            stats["d_live"] = live - (entry[_LIVE] if entry is not None else 0)
            stats["d_pending"] = pending - (entry[_PENDING] if entry is not None else 0)
            remember_until = rule.throttle.open_until(last_alert)
            if result.state is not None or (remember_until is not None and remember_until > watermark_us):
                timer = result.timer_us if result.state is not None else remember_until
                new[rule_id] = [rule.version, result.state, live, pending, last_alert, timer]
                stats["d_keys"] = 0 if entry is not None else 1
            else:
                stats["d_keys"] = -1 if entry is not None else 0
            stats_rows.append((rule_id, rule.version, stats))

        if new:
            state.update((codec.encode(new),))
            timers = [e[_TIMER] for e in new.values() if e[_TIMER] is not None]
            # No deadline of its own: wake up once per housekeeping interval, so that the state of a
            # rule changed or removed later is reclaimed even if the key never gets another row.
            timer = min(timers) if timers else watermark_us + self.housekeeping_us
            state.setTimeoutTimestamp(spark_timeout_ms(timer, watermark_ms))
        elif state.exists:
            state.remove()
        yield self._frame(alerts, stats_rows)

    @staticmethod
    def _frame(alerts: list[tuple], stats_rows: list[tuple[str, str, dict]]):
        import numpy as np
        import pandas as pd

        stats_rows = [s for s in stats_rows if any(s[2].values())]
        n_alerts, n_stats = len(alerts), len(stats_rows)

        def objects(values):
            column = np.empty(len(values), dtype=object)
            column[:] = values
            return column

        def times(values):
            return np.array(values, dtype="datetime64[us]").astype("datetime64[ns]")

        pad = [None] * n_stats
        if n_alerts:
            columns = list(zip(*alerts))
            data = {name: objects(list(values) + pad) for name, values in zip(ALERT_NAMES, columns)}
            for name in ("first_event_time", "last_event_time", "emit_time"):
                data[name] = times(list(columns[ALERT_NAMES.index(name)]) + pad)
            data["suppressed"] = np.array([bool(v) for v in columns[-1]] + [False] * n_stats, dtype=bool)
            data["rule_id"] = objects(list(columns[0]) + [s[0] for s in stats_rows])
            data["rule_version"] = objects(list(columns[1]) + [s[1] for s in stats_rows])
        else:
            nothing = objects(pad)
            no_time = np.full(n_stats, np.datetime64("NaT"), dtype="datetime64[ns]")
            data = {name: nothing for name in ALERT_NAMES}
            data.update({name: no_time for name in ("first_event_time", "last_event_time", "emit_time")})
            data["suppressed"] = np.zeros(n_stats, dtype=bool)
            data["rule_id"] = objects([s[0] for s in stats_rows])
            data["rule_version"] = objects([s[1] for s in stats_rows])
        data[_KIND] = np.array([KIND_MATCH] * n_alerts + [KIND_STATS] * n_stats, dtype="int32")
        data[_STATS] = objects([None] * n_alerts + [[int(s[2][name]) for name in STAT_NAMES] for s in stats_rows])
        return pd.DataFrame(data, copy=False)


_STATUS_STAT = {"TIMEOUT": "timeouts", "ABSENCE": "absences", "MATCHED": "matched"}


# ------------------------------------------------------------------------------------ the query


def _duration_us(value: Any, what: str) -> int:
    from spark_bridge.streaming import parse_duration

    return parse_duration(value, what=what)


def input_types_of(df: "DataFrame") -> dict[str, str]:
    """``{column: SQL type}`` of a DataFrame as the rules see it (types the matcher cannot take are text)."""
    from spark_bridge.types import needs_string_cast, spark_to_sql

    return {f.name: ("VARCHAR" if needs_string_cast(f.dataType) else spark_to_sql(f.dataType)) for f in df.schema.fields}


def match_rules(
    df: "DataFrame",
    store: RuleStore | str,
    *,
    time_column: str,
    watermark: Any = None,
    housekeeping: Any = DEFAULT_HOUSEKEEPING,
    metrics_name: str | None = METRICS_NAME,
) -> "DataFrame":
    """The alerts of the rule sets published in ``store`` over the streaming DataFrame ``df``.

    Returns a streaming DataFrame (append mode) with ``sinks.ALERT_COLUMNS``. The rule set a micro-batch
    runs with is the one current in ``store`` when the micro-batch starts (``RuleStore``); publish a
    first one before starting the query. ``watermark``: the allowed lateness (default: the delay ``df``
    declares on ``time_column``, else ``streaming.DEFAULT_WATERMARK``).
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T
    from pyspark.sql.streaming.state import GroupStateTimeout

    from spark_bridge.batch import quote
    from spark_bridge.streaming import DEFAULT_WATERMARK
    from spark_bridge.types import needs_string_cast

    if not df.isStreaming:
        raise ValueError("match_rules needs a streaming DataFrame (spark.readStream...)")
    store_dir = store.directory if isinstance(store, RuleStore) else os.path.abspath(store)
    for name in [f.name for f in df.schema.fields if needs_string_cast(f.dataType)]:
        df = df.withColumn(name, F.col(quote(name)).cast("string"))
    columns = list(df.columns)
    taken = [c for c in columns if c.startswith("__cep_")]
    if taken:
        raise CepSemanticError(f"input columns may not start with '__cep_' (found {', '.join(taken)})", code="E0284")
    if time_column not in columns:
        raise ValueError(f"time column {time_column!r} is not in the input (columns: {', '.join(columns)})")
    field = df.schema[time_column]
    if not isinstance(field.dataType, T.TimestampType):
        raise CepSemanticError(f"the event-time column {time_column!r} is {field.dataType.simpleString()}, not timestamp; cast it first",
                               code="E0282")
    declared = [f.name for f in df.schema.fields if _WATERMARK_KEY in (f.metadata or {})]
    if declared and declared != [time_column]:
        raise CepSemanticError(f"the DataFrame declares its watermark on {', '.join(declared)}, not on the event time {time_column!r}",
                               code="E0283")
    if declared:
        delay_ms = int(field.metadata[_WATERMARK_KEY])
        if watermark is not None and _duration_us(watermark, "watermark") != delay_ms * 1000:
            raise CepSemanticError(f"watermark={watermark!r} differs from the delay declared on {time_column!r} ({delay_ms} ms)",
                                   code="E0283")
    else:
        delay_ms = _duration_us(watermark if watermark is not None else DEFAULT_WATERMARK, "watermark") // 1000
        df = df.withWatermark(time_column, f"{delay_ms} milliseconds")
    housekeeping_us = _duration_us(housekeeping, "housekeeping")
    if housekeeping_us <= 0:
        raise ValueError("housekeeping must be positive")

    df = df.select(*[F.col(quote(c)) for c in columns],
                   F.coalesce(F.unix_micros(F.col(quote(time_column))), F.lit(_NULL_TIME)).alias(_EVENT_US))
    # The watermark marker (metadata) does not survive mapInPandas: the stateful operator finds it on
    # an all-NULL column added after it, so Spark's own late-row filter drops nothing (streaming.py).
    in_fields = [T.StructField(f.name, f.dataType, True) for f in df.schema.fields]
    exploded_schema = T.StructType([T.StructField(_SPEC, T.StringType(), False), T.StructField(_PKEY, T.StringType(), False)] + in_fields)
    exploded = df.mapInPandas(_Explode(store_dir, columns + [_EVENT_US]), exploded_schema)
    exploded = exploded.select("*", F.lit(None).cast("timestamp").alias(_MARKER, metadata={_WATERMARK_KEY: delay_ms}))

    out_fields = [T.StructField(name, {"string": T.StringType(), "timestamp": T.TimestampType(), "boolean": T.BooleanType()}[kind], True)
                  for name, kind in ALERT_COLUMNS]
    out_schema = T.StructType(out_fields + [T.StructField(_KIND, T.IntegerType(), False),
                                            T.StructField(_STATS, T.ArrayType(T.LongType()), True)])
    state_schema = T.StructType([T.StructField("cep_rules_state", T.BinaryType(), False)])
    step = _AlertStep(store_dir, housekeeping_us)

    def cep_alert_rules(key, frames, state):
        return step(key, frames, state)

    out = exploded.groupBy(F.col(_SPEC), F.col(_PKEY)).applyInPandasWithState(
        cep_alert_rules, out_schema, state_schema, "append", GroupStateTimeout.EventTimeTimeout
    )
    if metrics_name:
        calls = F.when(F.col(_KIND) == KIND_STATS, F.struct(F.col("rule_id"), F.col("rule_version"), F.col(_STATS).alias("stats")))
        out = out.observe(metrics_name, F.collect_list(calls).alias("calls"))
    return out.where(F.col(_KIND) == KIND_MATCH).select(*[F.col(name) for name in ALERT_NAMES])


# ----------------------------------------------------------------------------------- the driver


def _now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _progress_get(progress: Any, name: str, default=None):
    if isinstance(progress, dict):
        return progress.get(name, default)
    value = getattr(progress, name, None)
    if value is None and hasattr(progress, "get"):
        try:
            value = progress.get(name)
        except Exception:  # noqa: BLE001
            value = None
    return default if value is None else value


def _row_dict(row: Any) -> dict:
    if row is None:
        return {}
    if hasattr(row, "asDict"):
        return row.asDict(recursive=True)
    if isinstance(row, dict):
        return row
    return dict(row)


class AlertStream:
    """A rule set running over one input stream, with its sinks, status file and rule reloading.

    ``rules``: a directory of ``*.sql`` files, or one ``.sql`` file. ``source``: a streaming DataFrame.
    ``checkpoint``: the directory for everything that must survive a restart:

        <checkpoint>/match/        Spark checkpoint of the matching query
        <checkpoint>/deliver/      Spark checkpoint of the delivery query (when there are alert sinks)
        <checkpoint>/rules/        rule sets and the set of each micro-batch (RuleStore)
        <checkpoint>/status.json   per rule: version, counts, gauges, errors (``cep status``)

    ``output``: the file sink's directory (default ``<checkpoint>/matches``), ``output_format`` json |
    parquet | csv. ``sinks``: alert sinks (``spark_bridge.sinks``). ``suppress``: ``'rule=10m'`` specs.
    """

    def __init__(
        self,
        spark: "SparkSession",
        rules: str,
        source: "DataFrame",
        *,
        checkpoint: str,
        output: str | None = None,
        output_format: str = "json",
        sinks: Sequence[AlertSink] = (),
        suppress: Iterable[str | suppress_mod.SuppressSpec] = (),
        watermark: Any = None,
        session_timeout: Any = None,
        time_column: str | None = None,
        trigger: str | None = None,
        max_pending_rows: int = DEFAULT_MAX_PENDING_ROWS,
        housekeeping: Any = DEFAULT_HOUSEKEEPING,
        name: str = "cep",
        on_event: Callable[[str], None] | None = None,
    ) -> None:
        self.spark = spark
        self.rules_path = rules
        self.source = source
        self.checkpoint = os.path.abspath(checkpoint)
        self.file_sink = FileSink(output or os.path.join(self.checkpoint, "matches"), output_format)
        self.sinks = list(sinks)
        self.specs = [s if isinstance(s, suppress_mod.SuppressSpec) else suppress_mod.parse_spec(s) for s in suppress]
        self.watermark = watermark
        self.session_timeout_us = _duration_us(session_timeout, "session_timeout") if session_timeout is not None else None
        self.time_column = time_column
        self.trigger = trigger
        self.max_pending_rows = max_pending_rows
        self.housekeeping = housekeeping
        self.name = name
        self.on_event = on_event
        self.store = RuleStore(os.path.join(self.checkpoint, "rules"))
        self.status_path = os.path.join(self.checkpoint, "status.json")
        self.match_query = None
        self.deliver_query = None
        self.ruleset: rules_mod.RuleSet | None = None
        self.payload: dict | None = None
        self._signature: tuple | None = None
        self._lock = threading.Lock()
        self._seen_batches: set[int] = set()
        self._deliver_failures = 0
        self._deliver_restart_at = 0.0
        self.status = self._load_status()
        if self.time_column is None:  # a restarted stream keeps the event time it ran with
            self.time_column = self.status.get("time_column")
            current = self.store.current_id()
            if self.time_column is None and current is not None:
                try:
                    self.time_column = self.store.load(current).get("time_column")
                except (OSError, ValueError):
                    pass
        self.input_types = input_types_of(source)

    # ----------------------------------------------------------------------------- events, status

    def _event(self, message: str) -> None:
        log.info(message)
        with self._lock:
            events = self.status.setdefault("events", [])
            events.append({"time": _now_iso(), "message": message})
            del events[:-50]
        if self.on_event is not None:
            self.on_event(message)

    def _load_status(self) -> dict:
        try:
            with open(self.status_path, encoding="utf-8") as fh:
                status = json.load(fh)
            if status.get("format") == STATUS_FORMAT:
                status["seen_batches"] = status.get("seen_batches", [])
                return status
        except (OSError, ValueError):
            pass
        return {"format": STATUS_FORMAT, "rules": {}, "errors": [], "events": [], "sinks": {}}

    def write_status(self) -> None:
        os.makedirs(self.checkpoint, exist_ok=True)
        with self._lock:
            self.status["updated_at"] = _now_iso()
            text = json.dumps(self.status, indent=1, sort_keys=True, default=str)
        _atomic_write(self.status_path, text)

    def _rule_status(self, rule_id: str) -> dict:
        return self.status["rules"].setdefault(rule_id, {"versions": {}, "errors": [], "active": False})

    @staticmethod
    def _version_status(rule: dict, version: str) -> dict:
        found = rule["versions"].get(version)
        if found is None:
            found = rule["versions"][version] = {name: 0 for name in STAT_NAMES if not name.startswith("d_")}
            found.update({"live_partial_matches": 0, "pending_rows": 0, "keys": 0, "since": _now_iso(),
                          "last_batch_time": None, "delivered": 0, "dead_lettered": 0})
        return found

    # ------------------------------------------------------------------------------------ rules

    def _files_signature(self) -> tuple:
        files = rules_mod.rule_files(self.rules_path) if os.path.exists(self.rules_path) else []
        signature = []
        for path in files:
            try:
                st = os.stat(path)
                signature.append((path, st.st_mtime_ns, st.st_size))
            except FileNotFoundError:
                continue
        return tuple(signature)

    def refresh_rules(self, *, force: bool = False) -> rules_mod.RuleChanges:
        """Reload the rules if their files changed; publish the new set for the next micro-batches."""
        signature = self._files_signature()
        if not force and signature == self._signature and self.payload is not None:
            return rules_mod.RuleChanges()
        payload, ruleset = build_rule_set(
            self.rules_path, input_types=self.input_types, time_column=self.time_column, suppress=self.specs,
            session_timeout_us=self.session_timeout_us, max_pending_rows=self.max_pending_rows,
        )
        if self.time_column is None:
            self.time_column = payload["time_column"]
        if payload["time_column"] is None:
            raise CepSemanticError("cannot tell the stream's event-time column: no rule orders by an input column; "
                                   "give it explicitly (--time-column)", code="E0604")
        # Compare with what ran last, also across a restart (the status file remembers it).
        old_versions = dict(self.status.get("active_versions") or {}) if self.ruleset is None else self.ruleset.versions()
        kept = self._keep_last_good(payload, ruleset)
        previous = rules_mod.RuleSet()
        previous.rules = {r: _VersionOnly(v) for r, v in old_versions.items()}  # type: ignore[assignment]
        changes = previous.diff(ruleset)
        self._signature = signature
        self.ruleset, self.payload = ruleset, payload
        set_id = self.store.publish(payload)
        self._record_rules(ruleset, changes, set_id, old_versions)
        for rule_id in kept:
            self._event(f"rule {rule_id}: its file has errors (see cep status); version {ruleset[rule_id].version} keeps running")
        self.write_status()
        return changes

    def _keep_last_good(self, payload: dict, ruleset: rules_mod.RuleSet) -> list[str]:
        """A rule that ran and whose file now fails to compile keeps running its last good version
        (a typo must not silently switch an alert off). Returns the ids kept."""
        previous = self.payload
        if previous is None:
            current = self.store.current_id()
            if current is None:
                return []
            try:
                previous = self.store.load(current)
            except (OSError, ValueError):
                return []
        if previous.get("input_columns") != payload["input_columns"] or previous.get("time_column") != payload["time_column"]:
            return []
        broken_ids = {e.rule_id for e in ruleset.errors if e.rule_id}
        broken_files = {os.path.abspath(e.path) for e in ruleset.errors if not e.rule_id}
        kept = []
        for entry in previous.get("rules", []):
            rule_id = entry["rule_id"]
            if rule_id in ruleset.rules:
                continue
            if rule_id in broken_ids or os.path.abspath(entry["path"]) in broken_files:
                payload["rules"].append(entry)
                ruleset.rules[rule_id] = _KeptRule(rule_id, entry["version"], entry["path"], entry["line"])  # type: ignore[assignment]
                kept.append(rule_id)
        return kept

    def _record_rules(self, ruleset: rules_mod.RuleSet, changes: rules_mod.RuleChanges, set_id: str,
                      old_versions: dict[str, str]) -> None:
        old_errors = {e["rendered"] for e in self.status.get("errors", [])}
        with self._lock:
            for rule_status in self.status["rules"].values():
                rule_status["active"] = False
            for rule in ruleset:
                entry = self._rule_status(rule.rule_id)
                entry.update({"active": True, "version": rule.version, "path": rule.path, "line": rule.line,
                              "suppress_us": next((r["suppress_us"] for r in self.payload["rules"] if r["rule_id"] == rule.rule_id), None)})
                entry["errors"] = []
                self._version_status(entry, rule.version)
                _prune_versions(entry, rule.version)
            for error in ruleset.errors:
                if error.rule_id:
                    entry = self._rule_status(error.rule_id)
                    entry["errors"] = [error.rendered]
                    if error.rule_id in ruleset.rules:
                        entry["errors"][0] += "\n  (the last good version keeps running)"
            self.status["errors"] = [e.as_dict() for e in ruleset.errors]
            self.status["rule_set"] = set_id
            self.status["active_versions"] = ruleset.versions()
            self.status["time_column"] = self.time_column
        for rule_id in changes.added:
            self._event(f"rule {rule_id} added (version {ruleset[rule_id].version})")
        for rule_id in changes.changed:
            old_version = old_versions.get(rule_id)
            gauges = self.status["rules"][rule_id]["versions"].get(old_version or "", {})
            self._event(
                f"rule {rule_id} changed ({old_version} -> {ruleset[rule_id].version}): it starts with fresh state; "
                f"its {gauges.get('live_partial_matches', 0)} live partial matches and {gauges.get('pending_rows', 0)} "
                f"waiting rows on {gauges.get('keys', 0)} keys are dropped"
            )
        for rule_id in changes.removed:
            self._event(f"rule {rule_id} removed; its state is dropped")
        for error in ruleset.errors:
            if error.rendered not in old_errors:
                self._event(f"rule skipped: {error.rendered}")

    # ----------------------------------------------------------------------------------- queries

    def build(self) -> "DataFrame":
        """The alerts DataFrame (publishes the rule set first if needed)."""
        if self.payload is None:
            self.refresh_rules(force=True)
        return match_rules(self.source, self.store, time_column=self.time_column, watermark=self.watermark,
                           housekeeping=self.housekeeping)

    def start(self, *, available_now: bool = False) -> "AlertStream":
        """Start the matching query (and the delivery query when there are alert sinks)."""
        alerts = self.build()
        with self._lock:
            self.status.update({"state": "running", "started_at": _now_iso(), "output": self.file_sink.path,
                                "output_format": self.file_sink.format, "sinks": {s.describe(): self.status.get("sinks", {}).get(s.describe(), {})
                                                                               for s in self.sinks}})
        self.match_query = self.file_sink.start(alerts, checkpoint=os.path.join(self.checkpoint, "match"), trigger=self.trigger,
                                                available_now=available_now, query_name=None)
        if self.sinks and not available_now:
            self._start_deliver(available_now=False)
        self.write_status()
        return self

    def _start_deliver(self, *, available_now: bool) -> None:
        stream = self.file_sink.read_stream(self.spark)
        writer = stream.writeStream.foreachBatch(self._deliver).option("checkpointLocation", os.path.join(self.checkpoint, "deliver"))
        if available_now:
            writer = writer.trigger(availableNow=True)
        elif self.trigger:
            writer = writer.trigger(processingTime=self.trigger)
        self.deliver_query = writer.start()

    def _deliver(self, batch_df, batch_id: int) -> None:
        alerts = rows_to_alerts(batch_df.collect())
        if not alerts:
            return
        try:
            reports = deliver_batch(alerts, batch_id, self.sinks)
        except Exception as exc:
            self._record_delivery([], error=f"batch {batch_id}: {type(exc).__name__}: {exc}")
            raise
        self._record_delivery(reports, alerts=alerts)

    def _record_delivery(self, reports: list[Delivery], *, alerts: Sequence[dict] = (), error: str | None = None) -> None:
        versions = {a["rule_id"]: a["rule_version"] for a in alerts}
        with self._lock:
            sinks = self.status.setdefault("sinks", {})
            if error is not None:
                for sink in self.sinks:
                    entry = sinks.setdefault(sink.describe(), {})
                    entry.setdefault("errors", []).append({"time": _now_iso(), "error": error})
                    del entry["errors"][:-10]
            for sink, report in zip(self.sinks, reports):
                entry = sinks.setdefault(sink.describe(), {})
                entry["delivered"] = entry.get("delivered", 0) + sum(report.delivered.values())
                entry["dead_lettered"] = entry.get("dead_lettered", 0) + sum(report.dead_lettered.values())
                entry["retries"] = entry.get("retries", 0) + report.retries
                if report.errors:
                    entry.setdefault("errors", []).extend({"time": _now_iso(), "error": e} for e in report.errors[-10:])
                    del entry["errors"][:-10]
                for rule_id, count in report.delivered.items():
                    version = self._version_status(self._rule_status(rule_id), versions.get(rule_id, "?"))
                    version["delivered"] = version.get("delivered", 0) + count
                for rule_id, count in report.dead_lettered.items():
                    rule = self._rule_status(rule_id)
                    version = self._version_status(rule, versions.get(rule_id, "?"))
                    version["dead_lettered"] = version.get("dead_lettered", 0) + count
                    rule.setdefault("delivery_errors", []).extend(e for e in report.errors if e)
                    del rule["delivery_errors"][:-5]

    # ------------------------------------------------------------------------------------ progress

    def poll(self) -> dict:
        """Fold the micro-batches finished since the last call into the status, and write it."""
        query = self.match_query
        if query is not None:
            seen = set(self.status.get("seen_batches", []))
            for progress in list(query.recentProgress):
                batch = _progress_get(progress, "batchId")
                metrics = _progress_get(progress, "observedMetrics", {}) or {}
                row = metrics.get(METRICS_NAME) if hasattr(metrics, "get") else None
                if batch is None or int(batch) in seen or row is None:
                    continue
                seen.add(int(batch))
                self._fold(int(batch), progress, _row_dict(row))
            self.status["seen_batches"] = sorted(seen)[-200:]
            self.store.prune()
        self.write_status()
        return self.status

    def _fold(self, batch: int, progress: Any, metrics: dict) -> None:
        timestamp = _progress_get(progress, "timestamp")
        events: list[str] = []
        dropped: dict[tuple[str, str], list[int]] = {}
        with self._lock:
            for call in metrics.get("calls") or []:
                call = _row_dict(call)
                rule = self._rule_status(call["rule_id"])
                version = self._version_status(rule, call["rule_version"])
                values = dict(zip(STAT_NAMES, call["stats"]))
                for name, value in values.items():
                    if name in _GAUGES:
                        version[_GAUGES[name]] = version.get(_GAUGES[name], 0) + int(value)
                    else:
                        version[name] = version.get(name, 0) + int(value)
                if values.get("events_in") or values.get("matched") or values.get("timeouts") or values.get("absences"):
                    version["last_batch_time"] = timestamp
                    rule["last_batch_time"] = timestamp
                if values.get("dropped_live") or values.get("dropped_pending"):
                    total = dropped.setdefault((call["rule_id"], call["rule_version"]), [0, 0, 0])
                    total[0] += int(values["dropped_live"])
                    total[1] += int(values["dropped_pending"])
                    total[2] += 1
            for (rule_id, version_id), (live, pending, keys) in sorted(dropped.items()):
                left = self.status["rules"][rule_id]["versions"][version_id]
                remaining = f"; {left['keys']} keys still to drop theirs" if left.get("keys", 0) > 0 else "; none left"
                events.append(f"rule {rule_id} version {version_id} (changed or removed): dropped {live} partial matches and "
                              f"{pending} waiting rows on {keys} keys in micro-batch {batch}{remaining}")
            self.status["last_batch"] = {
                "id": batch,
                "time": timestamp,
                "input_rows": _progress_get(progress, "numInputRows", 0),
                "duration_ms": (_progress_get(progress, "durationMs", {}) or {}).get("triggerExecution"),
                "watermark": (_progress_get(progress, "eventTime", {}) or {}).get("watermark"),
            }
            self.status["batches"] = self.status.get("batches", 0) + 1
        for message in events:
            self._event(message)

    # ------------------------------------------------------------------------------------ running

    def process_all_available(self) -> None:
        """Wait until every input file so far is matched and delivered (tests; no sleeping)."""
        if self.match_query is not None:
            self.match_query.processAllAvailable()
        if self.deliver_query is not None:
            self.deliver_query.processAllAvailable()
        self.poll()

    def run_available_now(self) -> dict:
        """Process what the input holds now, deliver it, and stop (``cep stream --once``)."""
        self.start(available_now=True)
        self.match_query.awaitTermination()
        self.poll()
        if self.sinks:
            self._start_deliver(available_now=True)
            self.deliver_query.awaitTermination()
        self.stop()
        return self.status

    def check(self) -> None:
        """Raise if the matching query failed; restart a failed delivery query after a backoff."""
        if self.match_query is not None and not self.match_query.isActive:
            error = self.match_query.exception()
            if error is not None:
                with self._lock:
                    self.status["state"] = "failed"
                    self.status.setdefault("query_errors", []).append({"time": _now_iso(), "error": str(error)[:2000]})
                self.write_status()
                raise RuntimeError(f"the matching query failed: {str(error).splitlines()[0] if str(error) else error}") from None
        if self.deliver_query is not None and not self.deliver_query.isActive:
            error = self.deliver_query.exception()
            now = time.monotonic()
            if self._deliver_restart_at == 0.0:
                self._deliver_failures += 1
                wait = min(60.0, 2.0 ** min(self._deliver_failures, 6))
                self._deliver_restart_at = now + wait
                self._event(f"delivery stopped ({str(error).splitlines()[0] if error else 'no error'}); retrying in {wait:g}s")
            elif now >= self._deliver_restart_at:
                self._deliver_restart_at = 0.0
                self._start_deliver(available_now=False)

    def run(self, *, poll_interval: float = 1.0, on_tick: Callable[[dict], None] | None = None,
            stop: threading.Event | None = None) -> None:
        """Run until ``stop`` is set or Ctrl-C: reload rules, fold progress, write status, restart delivery."""
        stop = stop or threading.Event()
        try:
            while not stop.is_set():
                stop.wait(poll_interval)
                try:
                    self.refresh_rules()
                except CepError as err:  # e.g. no rule left to take the event time from: keep the last set
                    self._event(f"rules not reloaded: {err}")
                self.check()
                status = self.poll()
                if on_tick is not None:
                    on_tick(status)
        finally:
            self.stop()

    def stop(self) -> None:
        for query in (self.deliver_query, self.match_query):
            if query is not None and query.isActive:
                query.stop()
        if self.match_query is not None:
            try:
                self.poll()
            except Exception:  # noqa: BLE001 - stopping must not fail on a status write
                pass
        with self._lock:
            if self.status.get("state") != "failed":
                self.status["state"] = "stopped"
            self.status["stopped_at"] = _now_iso()
        self.write_status()

    def alerts(self) -> "DataFrame":
        """Every alert committed so far, read through Spark (honours the file sink's log)."""
        return self.file_sink.read(self.spark)


def _prune_versions(entry: dict, current: str, keep: int = 3) -> None:
    """Keep the status file small: the current version, versions whose state is still being dropped,
    and the ``keep`` most recent others."""
    versions = entry.get("versions", {})
    old = [(v.get("since") or "", k) for k, v in versions.items() if k != current
           and not (v.get("live_partial_matches") or v.get("pending_rows") or v.get("keys"))]
    for _, key in sorted(old)[:-keep] if len(old) > keep else []:
        del versions[key]


@dataclasses.dataclass(frozen=True)
class _VersionOnly:
    version: str


@dataclasses.dataclass(frozen=True)
class _KeptRule:
    """A rule whose file no longer compiles, still running the version that last did."""

    rule_id: str
    version: str
    path: str
    line: int


# ---------------------------------------------------------------------------------- status view


def read_status(checkpoint: str) -> dict:
    path = os.path.join(checkpoint, "status.json")
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def rule_rows(status: dict) -> list[dict]:
    """One row per rule for ``cep status``: the current version's numbers."""
    rows = []
    for rule_id, rule in sorted(status.get("rules", {}).items()):
        version = rule.get("version") or (list(rule.get("versions", {}))[-1] if rule.get("versions") else None)
        numbers = rule.get("versions", {}).get(version or "", {})
        stale = sum(v.get("live_partial_matches", 0) for k, v in rule.get("versions", {}).items() if k != version)
        errors = list(rule.get("errors", [])) + list(rule.get("delivery_errors", []))
        earlier = sum(v.get("matched", 0) + v.get("timeouts", 0) + v.get("absences", 0)
                      for k, v in rule.get("versions", {}).items() if k != version)
        rows.append({
            "rule": rule_id,
            "earlier_matches": earlier,
            "state": "active" if rule.get("active") else ("error" if rule.get("errors") else "removed"),
            "version": version or "-",
            "matches": numbers.get("matched", 0) + numbers.get("timeouts", 0) + numbers.get("absences", 0),
            "timeouts": numbers.get("timeouts", 0),
            "absences": numbers.get("absences", 0),
            "suppressed": numbers.get("suppressed", 0),
            "live": numbers.get("live_partial_matches", 0),
            "stale_live": stale,
            "pending": numbers.get("pending_rows", 0),
            "late": numbers.get("late_rows", 0),
            "events": numbers.get("events_in", 0),
            "delivered": numbers.get("delivered", 0),
            "dead_lettered": numbers.get("dead_lettered", 0),
            "last_batch_time": rule.get("last_batch_time"),
            "errors": errors,
        })
    return rows
