"""A compiled query: partition, order, match every partition, then apply the outer query.

``CompiledQuery`` is what ``cep.compile`` wraps and what the Spark bridge ships to executors. It holds
the checked statement; machines (program + compiled expressions) are built per input schema, since
column names resolve against the input.

It also picks the engine, as Go's ``regexp.doExecute`` does, in one function (``choose_route``) from
facts fixed when the query is compiled for an input schema: the regex fast path or the sequence engine
(``vector/``) when the query is eligible, with the Pike VM (``pike/``) for the partitions they decline,
else the Pike VM alone; and, for a stream, the column-wise step (every key of a call at once) or the
per-key VM. The engines never import each other; a ``Route`` says which runs, and why not a faster one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from cep.grammar import ast
from cep.grammar.columns import ColumnNames
from cep.grammar.format import format_expr
from cep.matcher.pike.trace import Tracer
from cep.matcher.pike.vm import PartitionMatcher, match_partition
from cep.matcher.program.machine import Machine, build_machine
from cep.matcher.rows.outer import OuterQuery, build_outer
from cep.matcher.rows.partitioning import partition_indices, unorderable
from cep.matcher.rows.tables import from_columns, from_rows, kind_of, rows_to_columns, to_columns
from cep.matcher.sql.datetimes import query_time
from cep.matcher.sql.types import (
    arrow_type_name,
    decimal_params,
    fit_to_type,
    frame_integer_columns,
    infer,
    narrow_integer_columns,
    value_type_name,
)
from cep.matcher.vector import fastpath, sequence_output, sequence_plan
from cep.matcher.vector.arrays import from_arrow, from_pandas
from cep.matcher.vector.layout import ArrayInput

Columns = dict[str, list]

# Imported inside functions: pyarrow (heavy; only an Arrow result needs it).

# The engines a batch run can take, fastest first (``Route.batch``).
REGEX = "regex fast path"
SEQUENCE = "sequence engine"
PIKE = "Pike VM"
# The ways a stream can run (``Route.stream``): every key of a call at once on the sequence engine
# (spark_bridge/engine/columnar/), or each key on its own Pike VM (spark_bridge/engine/keyed.py).
COLUMN_WISE = "column-wise"
PER_KEY = "per key"


@dataclass(frozen=True)
class Route:
    """Which engine runs a query over one input schema, and why not a faster one: ``choose_route``'s answer,
    fixed once the query is compiled for that schema, asked by every run (batch and stream) and printed by
    ``cep explain``."""

    batch: str  # REGEX, SEQUENCE or PIKE
    stream: str  # COLUMN_WISE or PER_KEY
    batch_reasons: tuple[str, ...]  # why not the regex fast path (and, on the VM, why not the sequence engine)
    stream_reasons: tuple[str, ...]  # why a stream runs per key (empty: column-wise)
    # The batch engine's plan (a ``FastPlan`` or a ``SequencePlan``; None on the Pike VM), and the sequence
    # plan the column-wise stream runs: derived from the facts above, so left out of equality.
    column_plan: object = field(default=None, compare=False, repr=False)
    sequence: object = field(default=None, compare=False, repr=False)

    def lines(self) -> list[str]:
        """The route as ``cep explain`` prints it."""
        batch = self.batch + (f" (not faster: {'; '.join(self.batch_reasons)})" if self.batch_reasons else "")
        stream = self.stream + (f" ({'; '.join(self.stream_reasons)})" if self.stream_reasons else "")
        return [f"route: batch on the {batch}", f"       stream {stream}"]


def choose_route(
    statement: ast.Statement,
    machine: Machine,
    input_columns: tuple[str, ...],
    *,
    one_key_per_call: str | None = None,
    column_wise: bool = True,
) -> Route:
    """The one place an engine is chosen. Batch: the regex fast path, else the sequence engine, else the
    Pike VM. Stream: column-wise when the sequence engine takes the query and every start's outcome is
    final once the rows after it are known, else per key; ``one_key_per_call`` (why the caller calls one
    key at a time, if it does) is the stream's fact.
    ``column_wise=False`` (``cep.compile(text, column_wise=False)``) sends everything to the Pike VM: the
    reference the column-wise engines are tested against."""
    if not column_wise:
        off = ("the column-wise engines are turned off (column_wise=False)",)
        why = (one_key_per_call,) if one_key_per_call is not None else ()
        return Route(batch=PIKE, stream=PER_KEY, batch_reasons=off, stream_reasons=why + off)
    regex = fastpath.plan_for(statement, machine, input_columns)
    sequence = sequence_plan.plan_for(statement, machine, input_columns)
    batch_reasons: tuple[str, ...] = ()
    if regex is None:
        batch_reasons = tuple(machine.column_plans.regex[1])  # plan_for above kept (plan, reasons)
        if sequence is None:
            batch_reasons += tuple(
                "not the sequence engine: " + why
                for why in sequence_plan.reasons_not(statement, machine, input_columns)
            )
    batch = REGEX if regex is not None else SEQUENCE if sequence is not None else PIKE
    stream_sequence = sequence_plan.stream_plan_for(statement, machine, input_columns)
    why_per_key = _why_per_key(statement, machine, stream_sequence, input_columns)
    if one_key_per_call is not None:
        why_per_key.insert(0, one_key_per_call)
    return Route(
        batch=batch,
        stream=PER_KEY if why_per_key else COLUMN_WISE,
        batch_reasons=batch_reasons,
        stream_reasons=tuple(why_per_key),
        column_plan=regex or sequence,
        sequence=stream_sequence,
    )


def _why_per_key(statement: ast.Statement, machine: Machine, sequence, input_columns) -> list[str]:
    """Why the column-wise stream step cannot run the query (empty: it can)."""
    mr = statement.match
    if any(isinstance(key.expr, ast.ProcTime) for key in mr.order_by):
        return ["ORDER BY PROCTIME() (rows are matched on arrival, one by one)"]
    why: list[str] = []
    if sequence is None:
        reasons = sequence_plan.stream_reasons_not(statement, machine, input_columns)
        return ["not the sequence engine" + (f" ({'; '.join(reasons)})" if reasons else "")]
    if sequence_output.reads_after(mr.measures):
        why.append("NEXT in a measure (a match waits for the rows after it)")
    if sequence.within is not None and machine.within.column != machine.order_names[0]:
        why.append("WITHIN over another column than the event time")
    # Runs anywhere in the sequence (the V shape ``A B+ C+``, the W shape) stream column-wise: a start whose
    # scan wanted a row past the rows given is carried (``decisions.py``); one whose run has more ends than
    # the sequence engine tries (``sequence.MAX_RUN_ENDS``) is decided on the Pike VM, resumed there from
    # the carried rows, so the answer is the per-key path's either way (docs/streaming.md).
    return why


class CompiledQuery:
    def __init__(self, statement: ast.Statement, *, column_wise: bool = True) -> None:
        self.statement = statement
        # False: every partition on the Pike VM, the reference the column-wise engines are checked against
        self.column_wise = column_wise
        mr = statement.match
        self.partition_columns = [ref.column.name for ref in mr.partition_by]
        self.order_columns = [key.expr.column.name for key in mr.order_by if isinstance(key.expr, ast.ColumnRef)]
        self.proctime = any(isinstance(key.expr, ast.ProcTime) for key in mr.order_by)
        self.limit = statement.limit
        # (input columns, their INT columns) -> the machine and the outer query, built once
        self._machines: dict[tuple, tuple[Machine, OuterQuery]] = {}
        self._routes: dict[tuple, Route] = {}  # (input columns, stream facts) -> the route, chosen once

    # ------------------------------------------------------------------------------------ compiling

    def machine(self, input_columns: Iterable[str], integer_columns: dict[str, str] | None = None) -> Machine:
        """The machine for these input columns; ``integer_columns`` (``types.narrow_integer_columns``) names
        the INT columns among them, whose arithmetic is an INT's (every other integer column is a BIGINT)."""
        return self._compiled(tuple(input_columns), integer_columns)[0]

    def outer(self, input_columns: Iterable[str]) -> OuterQuery:
        return self._compiled(tuple(input_columns))[1]

    def _compiled(
        self, input_columns: tuple[str, ...], integer_columns: dict[str, str] | None = None
    ) -> tuple[Machine, OuterQuery]:
        key = (input_columns, tuple(sorted((integer_columns or {}).items())))
        found = self._machines.get(key)
        if found is None:
            machine = build_machine(self.statement, input_columns, integer_columns)
            found = (machine, build_outer(self.statement, machine.output_columns))
            self._machines[key] = found
        return found

    def route(
        self,
        input_columns: Iterable[str],
        *,
        one_key_per_call: str | None = None,
        integer_columns: dict[str, str] | None = None,
    ) -> Route:
        """The engines that run this query over these input columns (``choose_route``), chosen once."""
        columns = tuple(input_columns)
        facts = (columns, one_key_per_call, tuple(sorted((integer_columns or {}).items())))
        found = self._routes.get(facts)
        if found is None:
            found = self._routes[facts] = choose_route(
                self.statement,
                self.machine(columns, integer_columns),
                columns,
                one_key_per_call=one_key_per_call,
                column_wise=self.column_wise,
            )
        return found

    def partition_names(self, input_columns: Iterable[str]) -> tuple[str, ...]:
        """The input columns PARTITION BY names (``grammar/columns.py`` resolves them), for engines that group."""
        return self.machine(input_columns).partition_names

    def order_names(self, input_columns: Iterable[str]) -> tuple[str, ...]:
        """The input columns of the ORDER BY keys that are columns, in order."""
        return self.machine(input_columns).order_names

    def condition_columns(self, input_columns: Iterable[str]) -> list[str]:
        """The input columns the DEFINE conditions read, in input order (what a trace or a report shows)."""
        names = ColumnNames(input_columns)
        read = {
            names.lookup(node.column, node.span)
            for define in self.statement.match.defines
            for node in ast.walk(define.condition)
            if isinstance(node, ast.ColumnRef)
        }
        return [name for name in names.names if name in read]

    def output_names(self, input_columns: Iterable[str]) -> tuple[str, ...]:
        return self.outer(input_columns).names

    def sort_keys(self, input_columns: Iterable[str]) -> list[tuple[str, bool, bool]]:
        """The outer ORDER BY as (column, descending, nulls_first), for engines that sort themselves: an
        output column, or a key column that ``run_frame(..., outer_order_and_limit=False)`` appends to
        each row (``sort_column_types``), to be dropped after sorting."""
        return list(self.outer(input_columns).sort_names)

    def output_types(self, input_types: dict[str, str]) -> list[tuple[str, str]]:
        """(name, SQL type) of every output column, for an input with these column types. The machine is compiled
        with those types, so what Spark refuses of them (DIV of a DOUBLE column) is refused here, on the driver,
        with its place in the query, before the Spark engine ships the clause to its executors."""
        machine, outer = self._compiled(tuple(input_types), narrow_integer_columns(input_types))
        mr = self.statement.match
        inputs = ColumnNames(input_types)

        def input_type(ref: ast.ColumnRef) -> str:
            return input_types[inputs.resolve(ref.column, ref.span)]

        measure_types = [infer(m.expr, input_type) for m in mr.measures]
        layout = machine.output.layout
        mr_types = [input_types[name] for name in machine.partition_names]
        mr_types += [input_types[name] for name in layout.row_columns[: layout.order_count]]
        mr_types += measure_types
        mr_types += [input_types[name] for name in layout.row_columns[layout.order_count :]]
        outputs = ColumnNames(machine.output_columns)

        def output_type(ref: ast.ColumnRef) -> str:
            return mr_types[machine.output_columns.index(outputs.resolve(ref.column, ref.span))]

        types: list[str] = []
        for item in self.statement.select:
            if isinstance(item.expr, ast.Star):
                types.extend(mr_types)
            else:
                types.append(infer(item.expr, output_type))
        self._sort_types = [(name, infer(expr, output_type)) for name, expr in outer.sort_exprs]
        return list(zip(outer.names, types))

    def fit_to_types(self, result, input_types: dict[str, str]):
        """``result`` (a run's output, of any kind) with each value made what Spark gives for its output
        column's type (``types.fit_to_type``: a ``Decimal`` rounded half up to a DECIMAL's scale, E0410
        when it overflows; a float in a DOUBLE column; a DATE in a TIMESTAMP column its midnight), as the Spark
        engine's output is (``batch.conform_arrow``). Arrow output columns of a DECIMAL type get that Arrow type,
        and a DOUBLE, BIGINT or INT column of NULLs alone has that type."""
        output_types = self.output_types(input_types)
        wanted = {
            name: type_name
            for name, type_name in output_types
            if decimal_params(type_name) is not None or type_name in ("DOUBLE", "TIMESTAMP")
        }
        kind = kind_of(result)
        if kind == "arrow":
            result = _typed_integer_nulls(result, dict(output_types))
        if kind == "rows":
            return [
                {name: fit_to_type(value, wanted[name]) if name in wanted else value for name, value in row.items()}
                for row in result
            ]
        names = [str(n) for n in result.columns] if kind == "pandas" else list(result.column_names)
        for index, name in enumerate(names):
            if name not in wanted:
                continue
            if kind == "pandas":
                if result[name].dtype == object:
                    result[name] = [fit_to_type(value, wanted[name]) for value in result[name]]
                continue
            import pyarrow as pa  # the result is an Arrow table, so pyarrow is there

            size = decimal_params(wanted[name])
            found = result.schema.field(index).type
            if wanted[name] == "TIMESTAMP":  # a DATE as its midnight; NULLs alone (no Arrow type) a TIMESTAMP
                if pa.types.is_date(found) or pa.types.is_null(found):
                    field = result.schema.field(index)
                    widened = result.column(index).cast(pa.timestamp("us"))
                    result = result.set_column(index, field.with_type(pa.timestamp("us")), widened)
                continue
            if size is None and not (pa.types.is_decimal(found) or pa.types.is_null(found)):
                continue  # a DOUBLE column of floats already (an all-NULL one has no type: Spark's is DOUBLE)
            values = [fit_to_type(value, wanted[name]) for value in result.column(index).to_pylist()]
            arrow_type = pa.decimal128(*size) if size is not None else pa.float64()
            result = result.set_column(
                index, result.schema.field(index).with_type(arrow_type), pa.array(values, arrow_type)
            )
        return result

    def typed_nulls(self, result, input_types: dict[str, str]):
        """``result`` (an Arrow run's output over an input of these column types) with each all-NULL column of
        its output's type, as Spark's (``fit_to_types`` does it too, with the rest of its typing)."""
        if kind_of(result) != "arrow":
            return result
        return _typed_integer_nulls(result, dict(self.output_types(input_types)))

    def sort_column_types(self, input_types: dict[str, str]) -> list[tuple[str, str]]:
        """(name, SQL type) of the outer ORDER BY keys that are not output columns (``sort_keys``)."""
        self.output_types(input_types)
        return list(self._sort_types)

    # -------------------------------------------------------------------------------------- running

    def run_frame(self, frame, *, outer_order_and_limit: bool = True, progress=None, clock=None, integer_columns=None):
        """``integer_columns``: INT columns the frame's own types do not say (a declared schema), as for ``machine``."""
        with query_time():  # CURRENT_TIMESTAMP: one instant for the whole run
            return self._run_frame(
                frame,
                outer_order_and_limit=outer_order_and_limit,
                progress=progress,
                clock=clock,
                integer_columns=integer_columns,
            )

    def _run_frame(self, frame, *, outer_order_and_limit: bool, progress, clock, integer_columns=None):
        """Run over a pandas DataFrame or a pyarrow Table; the result has the same kind.

        A query the fast path takes reads the frame as numpy columns (``matcher/vector/arrays.py``) and, when
        its measures are computed column-wise, builds the result from typed columns: no Python object
        per input row. Anything else converts the frame to Python columns and runs ``run_columns``.
        Either way the result equals ``from_rows(kind, *run_columns(to_columns(frame)))``; ``clock`` as
        for ``run_columns`` (only queries with WITHIN read it, and those run on the Pike VM).
        """
        kind = kind_of(frame)
        names = tuple(str(name) for name in frame.columns) if kind == "pandas" else tuple(frame.column_names)
        integers = {**frame_integer_columns(frame), **(integer_columns or {})}
        machine, outer = self._compiled(names, integers) if names else (None, None)
        fast = self.route(names, integer_columns=integers).column_plan if names else None
        if fast is None or len(set(names)) != len(names):
            names, rows = self.run_columns(
                to_columns(frame)[1],
                outer_order_and_limit=outer_order_and_limit,
                progress=progress,
                clock=clock,
                integer_columns=integers,
            )
            return from_rows(kind, names, rows)
        arrays = from_pandas(frame) if kind == "pandas" else from_arrow(frame)
        total = len(frame) if kind == "pandas" else frame.num_rows
        plain = (
            outer.is_identity
            and outer.where is None
            and (not outer.sort_keys and outer.limit is None if outer_order_and_limit else not outer.sort_getters)
        )
        source = ArrayInput(arrays, total, kind)
        if machine.within is not None and clock is None:
            clock = _latest(arrays[machine.within.column])
        matched = fast.run(source, fallback=_on_vm(machine, clock), typed=plain, clock=clock)
        if progress is not None:
            progress(total, total)
        if isinstance(matched, fastpath.MatchColumns):
            return from_columns(kind, outer.names, matched.columns)
        names = outer.names if outer_order_and_limit else outer.unsorted_names
        return from_rows(kind, names, outer.apply(matched, order_and_limit=outer_order_and_limit))

    def run_columns(
        self,
        columns: Columns,
        *,
        outer_order_and_limit: bool = True,
        checks=None,
        clock=None,
        progress=None,
        integer_columns=None,
    ) -> tuple[tuple[str, ...], list[tuple]]:
        with query_time():  # CURRENT_TIMESTAMP: one instant for the whole run
            return self._run_columns(
                columns,
                outer_order_and_limit=outer_order_and_limit,
                checks=checks,
                clock=clock,
                progress=progress,
                integer_columns=integer_columns,
            )

    def _run_columns(self, columns: Columns, *, outer_order_and_limit: bool, checks, clock, progress, integer_columns):
        """Run over a whole input given as columns (name -> list of Python values, None for NULL).

        ``checks`` (a ``cep.matcher.rows.validate.InputChecks``) first sets bad rows aside (to its dead letter, or
        raising on the first one) and drops duplicates; the rest is matched as if it were the whole input.
        ``progress(done, total)`` is called as rows are matched (after each partition on the Pike VM).
        """
        if checks is not None:
            columns = checks.apply(self, columns)
        names = tuple(columns)
        if not names:
            return (), []  # no rows and so no columns to resolve: nothing can match
        machine, outer = self._compiled(names, integer_columns)
        # In a replay, the clock at end of input is the largest event time in the input, so WITHIN
        # deadlines and timeouts are decided as the stream would decide them when it got that far.
        if machine.within is None:
            clock = None
        elif clock is None:
            clock = replay_clock(machine, columns)
        total = len(columns[names[0]])
        fast = self.route(names, integer_columns=integer_columns).column_plan
        out_names = outer.names if outer_order_and_limit else outer.unsorted_names
        if (
            fast is not None
        ):  # column-wise: numpy + re (vector/fastpath.py), or the sequence engine (vector/sequence.py)
            matched = fast.run(columns, fallback=_on_vm(machine, clock), clock=clock)
            if progress is not None:
                progress(total, total)
            return out_names, outer.apply(matched, order_and_limit=outer_order_and_limit)
        rows: list[tuple] = []
        done = 0
        for key, indices in self.partitions(machine, columns):
            part = {name: [columns[name][i] for i in indices] for name in machine.columns}
            rows.extend(match_partition(machine, key, part, clock))
            if progress is not None:  # (rows done, rows in all), after each partition
                done += len(indices)
                progress(done, total)
        return out_names, outer.apply(rows, order_and_limit=outer_order_and_limit)

    def trace_columns(self, columns: Columns, partition: dict | None = None) -> list[dict]:
        """Run with a tracer attached; ``partition`` (column -> value) restricts the trace to one partition."""
        machine = self.machine(tuple(columns))
        texts = {d.variable.key: format_expr(d.condition) for d in self.statement.match.defines}
        wanted = None
        if partition:
            given = ColumnNames(partition)
            wanted = tuple(partition[given.resolve(ref.column, ref.span)] for ref in self.statement.match.partition_by)
        texts.update({"!" + name: f"NOT ({text})" for name, text in texts.items()})
        records: list[dict] = []
        order = machine.order_names[0] if machine.order_names else None
        clock = replay_clock(machine, columns) if machine.within is not None else None
        for key, indices in self.partitions(machine, columns):
            if wanted is not None and tuple(key) != wanted:
                continue
            tracer = Tracer(machine, texts)
            matcher = PartitionMatcher(machine, key)
            matcher.tracer = tracer
            matcher.feed({name: [columns[name][i] for i in indices] for name in machine.columns})
            if clock is not None:
                matcher.advance(clock)  # as run does: the replay's clock decides deadlines and timeouts
            matcher.finish()
            for record in tracer.records:
                if order is not None and record["row"] < len(indices):
                    record["order_key"] = columns[order][indices[record["row"]]]
                records.append(record)
        return records

    def partitions(self, machine: Machine, columns: Columns) -> list[tuple[tuple, list[int]]]:
        """Row indices per partition (in order of first appearance), each sorted by ORDER BY."""
        return partition_indices(self.statement, machine, columns)


def _latest(column):
    """The largest value of an event-time column (``arrays.ArrayColumn``), as the Python value ``replay_clock``
    would find: read at the row whose ticks are largest, when the ticks order as the values do."""
    if column.kind in ("int", "time") and column.data is not None:
        present = np.flatnonzero(~column.nulls) if column.nulls is not None else None
        if present is None or len(present):
            data = column.data if present is None else column.data[present]
            row = int(np.argmax(data)) if present is None else int(present[np.argmax(data)])
            return column.python(np.array([row], dtype=np.int64))[0]
        return None
    return max((v for v in column.python() if v is not None), default=None)


def _on_vm(machine: Machine, clock):
    """Matches one partition (key, its columns) on the Pike VM, its clock at ``clock``."""
    return lambda key, columns: match_partition(machine, key, columns, clock)


def replay_clock(machine: Machine, columns: Columns):
    """The clock at the end of a replay: the largest event time in the input (None without WITHIN)."""
    values = columns[machine.within.column]
    try:
        return max(values, default=None)  # no NULL (the usual case): no Python step per value
    except TypeError:
        pass
    try:
        return max((v for v in values if v is not None), default=None)
    except TypeError:
        raise unorderable(machine.within.column, values) from None


# The Arrow type of an output column that holds NULLs alone (Arrow reads it as having no type), by its SQL type.
_NULL_ARROW_TYPES = {
    "BIGINT": "int64",
    "INT": "int32",
    "INTEGER": "int32",
    "SMALLINT": "int16",
    "TINYINT": "int8",
    "DOUBLE": "float64",
    "BOOLEAN": "bool",
    "VARCHAR": "string",
    "DATE": "date32",
}


def _typed_integer_nulls(result, output_types: dict[str, str]):
    """``result`` with each all-NULL column typed as Spark types its output (an INT, BIGINT, DOUBLE, BOOLEAN,
    STRING, DATE, TIMESTAMP or DECIMAL measure whose every match gave NULL)."""
    import pyarrow as pa  # the result is an Arrow table, so pyarrow is there

    for index, column in enumerate(result.schema):
        type_name = output_types.get(column.name, "")
        if not pa.types.is_null(column.type):
            continue
        size = decimal_params(type_name)
        if size is not None:
            kind = pa.decimal128(*size)
        elif type_name == "TIMESTAMP":
            kind = pa.timestamp("us")
        elif type_name in _NULL_ARROW_TYPES:
            kind = pa.type_for_alias(_NULL_ARROW_TYPES[type_name])
        else:
            continue
        result = result.set_column(index, column.with_type(kind), result.column(index).cast(kind))
    return result


def declared_types(data, schema: dict[str, str] | None = None) -> dict[str, str] | None:
    """The SQL type of every column of ``data`` when one of them is declared a DECIMAL or a TIMESTAMP (an Arrow
    column of that type, a pandas column of such an Arrow type, or ``schema``: the run's ``{column: type}``),
    else None. With it the Python engine gives Spark's result types (``CompiledQuery.fit_to_types``);
    undeclared columns are typed by their values, and one holding ``Decimal`` values (no precision
    known) leaves the whole run exact (None)."""
    kind = kind_of(data)
    declared = {
        str(k): str(v).upper().replace(" ", "")
        for k, v in (schema or {}).items()
        if decimal_params(str(v).upper().replace(" ", "")) is not None or str(v).strip().upper() == "TIMESTAMP"
    }
    if kind == "arrow":
        types = {name: arrow_type_name(field.type) for name, field in zip(data.column_names, data.schema)}
    elif kind == "pandas":
        types = {}
        for name in data.columns:
            arrow_type = getattr(data[name].dtype, "pyarrow_dtype", None)
            types[str(name)] = arrow_type_name(arrow_type) if arrow_type is not None else None
    elif declared:
        types = {name: None for name in _row_columns(data)}
    else:
        return None
    types.update(ColumnNames(types).by_column(declared))
    # A TIMESTAMP column too: a DATE meeting it (COALESCE(ts, DATE '9999-12-31')) is widened in the output,
    # even where every match gave the DATE.
    if not any(decimal_params(t) is not None or t == "TIMESTAMP" for t in types.values() if t is not None):
        return None
    if any(t is None for t in types.values()):
        columns = _row_columns(data) if kind == "rows" else to_columns(data)[1]
        for name, type_name in types.items():
            if type_name is None:
                types[name] = value_type_name(columns[name])
        if any(t is None for t in types.values()):
            return None
    return types


def _row_columns(rows: list) -> dict[str, list]:
    """The columns of the items of a list that are rows (the others are bad rows, set aside by the checks)."""
    return rows_to_columns([row for row in rows if isinstance(row, dict)])
