"""Input checks for batch runs: bad rows go to a dead letter, duplicates are dropped, the rest is matched.

``Query.run(data, dead_letter=..., schema=..., dedup_key=..., stats=...)`` builds an ``InputChecks`` and
hands it to ``CompiledQuery.run_columns``, which calls ``InputChecks.apply`` before anything is sorted or
matched. ``apply`` returns the input without the bad and duplicate rows, so the matches are exactly those
of running on the good rows alone (``tests/test_reliability_batch.py`` checks that property).

What is a bad row (one reason per row: the first problem found, looking at the event time column first,
then at the other checked columns in input order)
--------------------------------------------------------------------------------------------------------
======================  =====  ==========================================================================
reason                  code   the row
======================  =====  ==========================================================================
``not_a_row``           E0443  is not a mapping (list-of-dicts input only: ``None``, a string, a list ...)
``null_event_time``     E0440  has NULL (or a missing key) in the event time column, the first ORDER BY
                               column
``bad_event_time``      E0441  has an event time of the wrong type, an unparseable time string (with a
                               schema), or NaN
``wrong_type``          E0442  has a value of the wrong type in a checked column, or NaN in another
                               ORDER BY column (NaN cannot be ordered)
``bad_partition_key``   E0444  has a PARTITION BY value that cannot be a key (a list or a dict)
``not_json``            E0445  streaming only: is a line Spark's reader could not read at all (not JSON)
``future_event_time``   E0446  streaming only: has an event time further ahead of the processing time
                               than ``max_future_skew`` (it must not move the watermark)
``not_utf8``            E0447  Kafka only: is a message whose value or key is not valid UTF-8 (and no
                               ``--kafka-encoding`` was declared); its bytes are never guessed at
======================  =====  ==========================================================================

In streaming (``cep.spark_bridge.spark.inputs.mark_bad_rows``) ``wrong_type`` and ``bad_event_time`` are the
rows Spark's PERMISSIVE reader read only in part (``_corrupt_record`` set): the event time unread gives
``bad_event_time``, another value ``wrong_type``. The streaming reasons are in ``cep.spark_bridge.engine.keyed``.

Checked columns: the PARTITION BY and ORDER BY columns, every column named in DEFINE or MEASURES, with
ALL ROWS PER MATCH every column the output rows carry, and every column the schema declares. Other
columns (extra keys ONE ROW PER MATCH never shows) are not looked at. NULL is a value of every type: a
NULL outside the event time column is never bad (a NULL partition key is a partition of its own, as in
SQL).

The expected type of a checked column
-------------------------------------
* With ``schema={'price': 'DOUBLE', ...}`` (or the CLI's text form ``'price DOUBLE, ts TIMESTAMP'``), the
  declared type, by family: BIGINT/INTEGER/DOUBLE/DECIMAL accept any number (int, float, Decimal; not
  bool), VARCHAR a string, BOOLEAN a bool, TIMESTAMP a datetime, DATE a date, ARRAY a list. A string in
  a TIMESTAMP or DATE column is parsed as ISO 8601 (JSON has no time type); a string that does not parse
  is bad. Strings are not parsed into numbers: JSON has numbers. Naive and time-zone-aware datetimes
  cannot be compared: TIMESTAMP_NTZ accepts only naive ones, TIMESTAMP_LTZ only aware ones, and TIMESTAMP
  the one held by most values.
* Without a schema entry, inferred from the column's non-NULL values: the type held by the most values;
  on a tie, the type seen first in input order. So a stray value among good ones is bad; but a column
  whose values are mostly wrong makes the good ones look wrong: declare a schema when that can happen.

Duplicates
----------
``dedup_key='event_id'`` (or a list of columns): a row whose key equals that of an earlier row of the
same partition (the PARTITION BY values) is dropped and counted; the first one in input order is kept.
A key with a NULL in it is never a duplicate (NULL equals nothing, as in SQL). Bad rows are set aside
first, so a bad row never hides a good one. Without ``dedup_key`` every row counts, as in SQL.

Nothing here evaluates query text or data: values are only classified with ``isinstance``.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import numbers
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from typing import Any

from cep.grammar import ast
from cep.grammar.columns import ColumnNames
from cep.grammar.errors import CepRuntimeError
from cep.grammar.parser import parse_schema
from cep.grammar.type_names import normalize_type
from cep.matcher.rows.tables import kind_of, rows_to_columns, to_columns
from cep.matcher.rows.text_types import (
    DECLARED_PATTERNS,
    FIRST_HELD_TIME,
    LAST_HELD_TIME,
    PATTERNS,
    out_of_range,
    parse_timestamp,
    time_is_held,
)

Columns = dict[str, list]

# reason -> error code. The reason strings are the same vocabulary as streaming's late-row reasons
# (``cep.spark_bridge.engine.keyed.LATE_NULL_TIME == "null_event_time"``).
REASONS: dict[str, str] = {
    "null_event_time": "E0440",
    "bad_event_time": "E0441",
    "wrong_type": "E0442",
    "not_a_row": "E0443",
    "bad_partition_key": "E0444",
    "not_json": "E0445",
    "future_event_time": "E0446",
    "not_utf8": "E0447",
}

# Without a dead letter, a value of the wrong kind (a string among numbers, an event time that is not one)
# stops the run with this code on both engines: the python engine when an operator meets it, Spark when its
# reader could not read the row. With a dead letter, each row is set aside with its reason's code above.
WRONG_KIND_WITHOUT_DEAD_LETTER = "E0410"

# The fields a dead-letter record adds to the row (the prefix is reserved: a row's own ``_cep_*`` keys
# are overwritten in its dead-letter record).
ERROR = "_cep_error"  # the reason, one of REASONS
ERROR_CODE = "_cep_error_code"  # its code, E044x
ERROR_DETAIL = "_cep_error_detail"  # a sentence naming the column, the value and what was expected
ROW = "_cep_row"  # 0-based position of the row in the input (iloc for pandas)
ITEM = "_cep_value"  # a not_a_row record holds the offending item here (it has no columns)

# ------------------------------------------------------------------------------------------ value kinds

# Kinds: values of one kind can be compared with each other; values of two kinds cannot (or, like bool
# and number in Python, can but should not in SQL).
_DIRECT_KINDS: dict[type, str | None] = {
    type(None): None,
    bool: "boolean",
    int: "number",
    float: "number",
    Decimal: "number",
    str: "string",
    _dt.date: "date",
    _dt.timedelta: "interval",
    list: "array",
    tuple: "array",
    dict: "map",
    bytes: "bytes",
}

_SCHEMA_KINDS: dict[str, frozenset[str]] = {
    "BIGINT": frozenset({"number"}),
    "INTEGER": frozenset({"number"}),
    "SMALLINT": frozenset({"number"}),
    "TINYINT": frozenset({"number"}),
    "DOUBLE": frozenset({"number"}),
    "DECIMAL": frozenset({"number"}),
    "VARCHAR": frozenset({"string"}),
    "BOOLEAN": frozenset({"boolean"}),
    "TIMESTAMP": frozenset({"timestamp", "timestamp with time zone"}),
    "DATE": frozenset({"date"}),
    "ARRAY": frozenset({"array"}),
    "MAP": frozenset({"map"}),
    "STRUCT": frozenset({"map"}),
    "BINARY": frozenset({"bytes"}),
}


def value_kind(value: Any) -> str | None:
    """The kind of a Python value: 'number', 'string', 'timestamp', ... or None for NULL."""
    kind_type = type(value)
    if kind_type in _DIRECT_KINDS:
        return _DIRECT_KINDS[kind_type]
    if isinstance(value, _dt.datetime):  # datetime, pandas.Timestamp
        return "timestamp with time zone" if value.tzinfo is not None and value.utcoffset() is not None else "timestamp"
    if isinstance(value, bool) or getattr(getattr(value, "dtype", None), "kind", None) == "b":
        return "boolean"  # bool subclasses, numpy.bool_
    if isinstance(value, _dt.date):
        return "date"
    if isinstance(value, _dt.timedelta):
        return "interval"
    if isinstance(value, (numbers.Real, Decimal)):  # numpy numbers, fractions
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, Mapping):
        return "map"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "bytes"
    return type(value).__name__  # some other object: its own kind


def schema_kinds(type_name: str) -> frozenset[str]:
    """The kinds a schema type accepts ('DOUBLE' -> {'number'}); spellings as ``cep check --schema``."""
    match = re.fullmatch(r"\s*([A-Za-z_]+)\s*(.*?)\s*", str(type_name))
    canonical = normalize_type(match.group(1), match.group(2)) if match else None
    if canonical is None:
        raise ValueError(f"unknown type {type_name!r} in schema")
    written = match.group(1).upper()
    if written == "TIMESTAMP_NTZ":
        return frozenset({"timestamp"})
    if written == "TIMESTAMP_LTZ":
        return frozenset({"timestamp with time zone"})
    head = re.match(r"[A-Z_]+", canonical.upper()).group()
    return _SCHEMA_KINDS.get(head, frozenset({head.lower()}))


def _is_nan(value) -> bool:
    try:
        return value != value  # float NaN, Decimal NaN, pandas NaT
    except Exception:  # noqa: BLE001 - an object whose comparison fails is not NaN
        return False


def _hashable(value) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _show(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _parse_time(value: str, kinds: frozenset[str]):
    """A time string of a TIMESTAMP or DATE column, in the forms Spark reads too (``text_types``'s patterns):
    Python's ``fromisoformat`` alone would also take week dates and basic formats (``20240101T0000``)."""
    text = value.strip()
    if "date" in kinds:
        if not _DATE_TEXT.fullmatch(text):
            raise ValueError(f"not a date: {text!r}")
        return _dt.date.fromisoformat(text)
    if not _TIME_TEXT.fullmatch(text):
        raise ValueError(f"not an ISO 8601 time: {text!r}")
    return _dt.datetime.fromisoformat(text)


_TIME_TEXT = re.compile(PATTERNS["timestamp"])
_DATE_TEXT = re.compile(DECLARED_PATTERNS["DATE"])


# --------------------------------------------------------------------------------------------- checks


class InputChecks:
    """The checks of one batch run. Build one per run (it holds the counts of that run)."""

    def __init__(
        self,
        *,
        dead_letter: list | Callable[[dict], Any] | None = None,
        schema: Mapping[str, str] | str | None = None,
        dedup_key: str | Iterable[str] | None = None,
        stats: dict | None = None,
    ) -> None:
        if dead_letter is not None and not (isinstance(dead_letter, list) or callable(dead_letter)):
            raise TypeError(
                f"dead_letter must be a list or a function taking one dict, not {type(dead_letter).__name__}"
            )
        if isinstance(schema, str):
            schema = parse_schema(schema)
        self.schema = {str(name): schema_kinds(type_name) for name, type_name in (schema or {}).items()}
        self.schema_types = dict(schema or {})
        if isinstance(dedup_key, str):
            dedup_key = [dedup_key]
        self.dedup_key = list(dedup_key) if dedup_key is not None else None
        self.sink = dead_letter.append if isinstance(dead_letter, list) else dead_letter
        # Without a dead letter, a schema makes the run strict: the first bad row raises.
        self.validate = dead_letter is not None or schema is not None
        self.stats = stats
        self.counts: dict[str, Any] = {
            "events_in": 0,
            "dead_lettered": 0,
            "duplicates_dropped": 0,
            "events_matched": 0,
            "by_reason": {},
        }
        self._early: list[tuple[int, str, str, dict]] = []  # rows rejected before becoming columns
        self._positions: list[int] | None = None  # column index -> position in the input
        self._rows: list[dict] | None = None  # the input's rows (list-of-dicts input), for the records

    # ------------------------------------------------------------------------------------- input shapes

    def to_columns(self, data: Any) -> tuple[str, Columns]:
        """``cep.matcher.rows.tables.to_columns``, setting aside list items that are not rows (``not_a_row``)."""
        kind = kind_of(data)
        if kind != "rows":
            return to_columns(data)
        rows: list[dict] = []
        positions: list[int] = []
        for position, item in enumerate(data):
            if isinstance(item, Mapping):
                rows.append(item if isinstance(item, dict) else dict(item))
                positions.append(position)
            else:
                detail = f"item {position} of the input is {type(item).__name__} {_show(item)}, not a row (a dict)"
                self._early.append((position, "not_a_row", detail, {ITEM: item}))
        if self._early:
            self._positions = positions
        self._rows = rows
        return kind, rows_to_columns(rows)

    # ------------------------------------------------------------------------------------------ the hook

    def apply(self, plan, columns: Columns) -> Columns:
        """The columns without bad and duplicate rows; dead letters are sent and counts kept on the way."""
        names = tuple(columns)
        count = len(next(iter(columns.values()))) if names else 0
        bad: dict[int, tuple[str, str]] = {}
        replaced: dict[str, list] = {}
        duplicates: list[int] = []
        if names:
            machine = plan.machine(names)  # unknown columns the query needs: CepSemanticError E0220 here
            lookup = ColumnNames(names)
            if self.validate:
                self._check(plan.statement, machine, columns, lookup, bad, replaced)
            if self.dedup_key is not None:
                duplicates = self._duplicates(machine, columns, lookup, bad)
        self._emit(bad, columns)
        dropped = set(bad).union(duplicates)
        self.counts["events_in"] = count + len(self._early)
        self.counts["dead_lettered"] = len(bad) + len(self._early)
        self.counts["duplicates_dropped"] = len(duplicates)
        self.counts["events_matched"] = count - len(dropped)
        if self.stats is not None:
            self.stats.update(self.counts)
        if not dropped and not replaced:
            return columns
        keep = [i for i in range(count) if i not in dropped]
        return {name: [replaced.get(name, values)[i] for i in keep] for name, values in columns.items()}

    # ---------------------------------------------------------------------------------------- validation

    def _check(self, statement: ast.Statement, machine, columns: Columns, lookup: ColumnNames, bad, replaced) -> None:
        mr = statement.match
        order = list(machine.order_names)
        event = order[0] if mr.order_by and isinstance(mr.order_by[0].expr, ast.ColumnRef) else None
        partition = set(machine.partition_names)
        checked = query_columns(statement, machine, lookup)
        declared = lookup.by_column(self.schema)
        declared_types = lookup.by_column(self.schema_types)
        checked.update(declared)
        ordered = ([event] if event is not None else []) + [
            name for name in columns if name in checked and name != event
        ]
        for name in ordered:
            self._check_column(
                name,
                columns[name],
                declared.get(name),
                declared_types.get(name, "?"),
                name == event,
                name in order,
                name in partition,
                bad,
                replaced,
            )

    def _check_column(self, name, values, allowed, type_name, is_event, is_order, is_partition, bad, replaced) -> None:
        what = "event time" if is_event else "column"
        declared = f" (declared {type_name})" if allowed else ""
        if allowed is not None and allowed & {"timestamp", "timestamp with time zone", "date"}:
            values = self._parse_times(name, values, allowed, is_event, bad, replaced)
        types = set(map(type, values))
        kinds_by_type = {t: _DIRECT_KINDS[t] for t in types if t in _DIRECT_KINDS}
        if len(kinds_by_type) == len(types):  # fast: every type has a fixed kind
            present = {k for k in kinds_by_type.values() if k is not None}
            kinds = None
        else:
            kinds = [value_kind(v) for v in values]
            present = set(kinds) - {None}
        if len(present) > 1 or (allowed is not None and present - allowed):
            if kinds is None:
                kinds = [kinds_by_type[type(v)] for v in values]
            tally = Counter(k for k in kinds if k is not None and (allowed is None or k in allowed))
            expected = max(tally, key=tally.__getitem__) if tally else None
            wanted = expected or " or ".join(sorted(allowed or ()))
            reason = "bad_event_time" if is_event else "wrong_type"
            for index, kind in enumerate(kinds):
                if kind is not None and kind != expected and index not in bad:
                    value = values[index]
                    if allowed and isinstance(value, str) and out_of_range(value, type_name):
                        detail = (
                            f"{what} '{name}' holds {_show(value)}, a number too large for its declared {type_name}"
                        )
                    elif expected == "timestamp" and _unheld_time(value):
                        detail = (
                            f"{what} '{name}' holds {_show(value)}, outside the times the engines hold "
                            f"({FIRST_HELD_TIME.date()} to {LAST_HELD_TIME.date()})"
                        )
                    else:
                        detail = f"{what} '{name}' holds {kind} {_show(value)} where {wanted} is expected{declared}"
                    bad[index] = (reason, detail)
        if is_event:
            for index, value in enumerate(values):
                if value is None and index not in bad:
                    bad[index] = ("null_event_time", f"event time '{name}' is NULL")
        if is_order and (float in types or Decimal in types or kinds is not None):
            reason = "bad_event_time" if is_event else "wrong_type"
            for index, value in enumerate(values):
                if value is not None and index not in bad and _is_nan(value):
                    bad[index] = (reason, f"{what} '{name}' is NaN, which cannot be ordered")
        if is_partition and (kinds is not None or {list, dict} & types):
            for index, value in enumerate(values):
                if index not in bad and not _hashable(value):
                    bad[index] = (
                        "bad_partition_key",
                        f"partition key '{name}' holds {type(value).__name__} {_show(value)}, which cannot be a key",
                    )

    def _parse_times(self, name, values, allowed, is_event, bad, replaced) -> list:
        if str not in set(map(type, values)):
            return values
        parsed = list(values)
        for index, value in enumerate(values):
            if isinstance(value, str):
                try:
                    parsed[index] = _parse_time(value, allowed)
                except ValueError:
                    if index not in bad:
                        reason = "bad_event_time" if is_event else "wrong_type"
                        what = "event time" if is_event else "column"
                        bad[index] = (
                            reason,
                            f"{what} '{name}' holds {_show(value)}, which is not an ISO 8601 "
                            f"{'date' if 'date' in allowed else 'timestamp'}",
                        )
                    parsed[index] = None
        replaced[name] = parsed
        return parsed

    # ---------------------------------------------------------------------------------------- duplicates

    def _duplicates(self, machine, columns: Columns, lookup, bad) -> list[int]:
        keys = [lookup.option_column(name, "dedup_key") for name in self.dedup_key]
        if len(keys) == 1:  # the common case, without a tuple per row
            key_values = ((v,) if v is not None else None for v in columns[keys[0]])
        else:
            key_values = (
                None if any(v is None for v in value) else value for value in zip(*(columns[name] for name in keys))
            )
        partition_names = machine.partition_names
        partitions = zip(*(columns[name] for name in partition_names)) if partition_names else itertools.repeat(())
        seen: set = set()
        duplicates: list[int] = []
        for index, (value, partition) in enumerate(zip(key_values, partitions)):
            if value is None or index in bad:
                continue  # NULL equals nothing; bad rows are already set aside
            key = (partition, value)
            try:
                repeated = key in seen
            except TypeError:  # an unhashable key value (a list): compare its text
                key = repr(key)
                repeated = key in seen
            if repeated:
                duplicates.append(index)
            else:
                seen.add(key)
        return duplicates

    # ------------------------------------------------------------------------------------------- output

    def _emit(self, bad: dict[int, tuple[str, str]], columns: Columns) -> None:
        records = [(position, reason, detail, extra) for position, reason, detail, extra in self._early]
        for index, (reason, detail) in bad.items():
            position = self._positions[index] if self._positions is not None else index
            records.append((position, reason, detail, index))
        records.sort(key=lambda record: record[0])
        by_reason: dict[str, int] = {}
        for _, reason, _, _ in records:
            by_reason[reason] = by_reason.get(reason, 0) + 1
        self.counts["by_reason"] = by_reason
        if not records:
            return
        if self.sink is None:  # strict: the first bad row stops the run
            position, reason, detail, _ = records[0]
            others = len(records) - 1
            more = f" (and {others} more bad row{'s' if others > 1 else ''})" if others else ""
            raise CepRuntimeError(
                f"row {position}: {detail}{more}",
                code=REASONS[reason],
                hint="pass dead_letter=[] (a list, or a function taking one dict; cep run --dead-letter FILE) "
                "to set bad rows aside and go on",
            )
        for position, reason, detail, source in records:
            if isinstance(source, dict):
                row = dict(source)
            elif self._rows is not None:
                row = dict(self._rows[source])
            else:
                row = {name: values[source] for name, values in columns.items()}
            row.update({ERROR: reason, ERROR_CODE: REASONS[reason], ERROR_DETAIL: detail, ROW: position})
            self.sink(row)


def query_columns(statement: ast.Statement, machine, lookup: ColumnNames) -> set[str]:
    """The input columns the query reads: PARTITION BY, ORDER BY, every column named in DEFINE or
    MEASURES, and with ALL ROWS PER MATCH every column its output rows carry (a value the output shows is
    read: Spark's typed output could only show an odd one as NULL). Only these decide whether a row is
    bad, on both engines (docs/reliability.md)."""
    checked = set(machine.partition_names) | set(machine.order_names) | set(machine.output.layout.row_columns)
    mr = statement.match
    for expr in [d.condition for d in mr.defines] + [m.expr for m in mr.measures]:
        for node in ast.walk(expr):
            if isinstance(node, ast.ColumnRef):
                checked.add(lookup.resolve(node.column, node.span))
    return checked


def refuse_odd_kinds(plan, data) -> None:
    """Raise E0410 for the first row of ``data`` holding a value of another kind than its column's in a
    column the query reads (``wrong_type``, ``bad_event_time``, ``bad_partition_key``), as Spark's replay
    refuses a row its reader read only in part when there is no dead letter. NULL event times are not
    refused: a run without a dead letter sorts them last, on both engines. Nothing is set aside."""
    found: list[dict] = []
    InputChecks(dead_letter=found.append).apply(plan, to_columns(data)[1])
    odd = [record for record in found if record[ERROR] != "null_event_time"]
    if odd:
        first = odd[0]
        more = f" (and {len(odd) - 1} more)" if len(odd) > 1 else ""
        raise CepRuntimeError(
            f"the input has rows of the wrong kind ({first[ERROR]}), the first: row {first[ROW]}: "
            f"{first[ERROR_DETAIL]}{more}",
            code=WRONG_KIND_WITHOUT_DEAD_LETTER,
            hint="pass dead_letter= (cep run --dead-letter FILE) to set such rows aside and count them",
        )


def input_checks(*, dead_letter=None, schema=None, dedup_key=None, stats=None) -> InputChecks | None:
    """The checks ``Query.run`` asked for, or None when it asked for none (the run checks nothing)."""
    if dead_letter is None and schema is None and dedup_key is None and stats is None:
        return None
    return InputChecks(dead_letter=dead_letter, schema=schema, dedup_key=dedup_key, stats=stats)


def _unheld_time(value) -> bool:
    """``value`` is the text of a valid time that the engines cannot hold (``text_types.FIRST_HELD_TIME``)."""
    parsed = parse_timestamp(value) if isinstance(value, str) else None
    return parsed is not None and not time_is_held(parsed)
