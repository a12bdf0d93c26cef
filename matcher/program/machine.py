"""A checked statement + the input's column names -> a ``Machine``: everything the VM needs to run.

The machine is immutable and shared by every partition; per-partition state lives in
``PartitionMatcher``. It is built once per input schema (column names resolve as ``grammar/columns.py``
says: unquoted ones ignoring case, quoted ones exactly).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from dataclasses import dataclass, field

from cep.grammar import ast
from cep.grammar.columns import ColumnNames
from cep.grammar.errors import CepRuntimeError, CepSemanticError
from cep.matcher.program import lowered
from cep.matcher.program.compiler import compile_program
from cep.matcher.program.equivalence import history_reads, make_key_function
from cep.matcher.program.instructions import Program
from cep.matcher.program.lowered import absence_label
from cep.matcher.program.output import OutputBuilder, OutputLayout
from cep.matcher.program.skip import SkipRule
from cep.matcher.sql.expressions import ExpressionCompiler, Scope
from cep.matcher.sql.intervals import interval_to_timedelta
from cep.matcher.sql.running import RunningAggregates


@dataclass
class ColumnPlans:
    """The column-wise engines' analyses of one machine, each made on first ask and kept here, since a
    machine is built once per input schema and asked again on every run: ``(plan, [])`` when the engine
    takes the query, ``(None, reasons)`` when it does not. ``vector/fastpath.plan_for`` fills ``regex``,
    ``vector/sequence_plan.plan_for`` fills ``sequence`` and ``sequence_plan.stream_plan_for`` fills
    ``stream`` (the column-wise stream's plan, for ALL ROWS PER MATCH too); this stage only holds them."""

    regex: tuple | None = None
    sequence: tuple | None = None
    stream: tuple | None = None


@dataclass
class Machine:
    pattern: lowered.Node  # the pattern lowered once (lowered.py): what the program and the column-wise engines compile
    program: Program
    # The program's instructions as three columns, indexed by pc, for the VM's inner loop:
    opcodes: tuple[str, ...]  # the instruction's op (instructions.LABEL, SPLIT, ...)
    operands: tuple[int, ...]  # LABEL's label id; SPLIT's preferred target; JUMP's target
    second_targets: tuple[int, ...]  # SPLIT's less preferred target
    done_pc: int
    closures: tuple  # per pc: the parked pcs its epsilon closure reaches, in priority order, or None
    label_names: tuple[str, ...]
    conditions: tuple
    columns: tuple[str, ...]
    partition_names: tuple[str, ...]
    order_names: tuple[str, ...]  # the input columns of the ORDER BY keys that are columns, in order
    lookahead: int
    lookback: int
    equivalence_key: Callable | None
    # (states, env, position, label) -> the running DEFINE aggregates after a row (running.py); None if none
    advance_running: Callable | None
    history: frozenset  # what the DEFINE conditions read of the match history (equivalence.py)
    lazy_starts: bool  # try one start at a time (vm.py explains when and why)
    within: Within | None
    output: OutputBuilder
    skip: SkipRule  # AFTER MATCH SKIP: where the search goes on after a match
    output_columns: tuple[str, ...]
    # The input's integer column types (name -> INTEGER or BIGINT) that type the clause's integer arithmetic
    # (``Scope.column_types``): the column-wise engines type theirs alike, so both overflow at the same row.
    integer_columns: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    column_plans: ColumnPlans = field(default_factory=ColumnPlans)


def absence_labels(pattern: ast.Pattern) -> set[str]:
    """The internal labels of the pattern's absence terms (a quoted variable may also start with '!')."""
    return set(pattern_labels(pattern)) - set(pattern_labels(pattern, absences=False))


def pattern_labels(pattern: ast.Pattern, *, absences: bool = True) -> list[str]:
    """Pattern variables in order of first appearance, then absence labels (``!B``)."""
    names: list[str] = []
    absent: list[str] = []
    for node in ast.walk(pattern):
        if isinstance(node, ast.PatternVar):
            if node.name.key not in names:
                names.append(node.name.key)
        elif isinstance(node, ast.Absence):
            label = absence_label(node.variable.key)
            if label not in absent:
                absent.append(label)
    return names + [label for label in absent if label not in names] if absences else names


def build_machine(
    statement: ast.Statement, input_columns: tuple[str, ...], integer_columns: dict[str, str] | None = None
) -> Machine:
    """The machine of ``statement`` over these input columns; ``integer_columns`` names the integer columns that
    are not BIGINTs (an INT column: ``a + b`` of two is an INT, which overflows past INT's range)."""
    integer_columns = dict(integer_columns or {})
    mr = statement.match
    label_names = tuple(pattern_labels(mr.pattern))
    absent = absence_labels(mr.pattern)
    label_ids = {name: index for index, name in enumerate(label_names)}
    label_sets: dict[str, frozenset[int]] = {
        name: frozenset({label_ids[name]}) for name in label_names if name not in absent
    }
    for name in absent:  # `B` that appears only as `!B`: its DEFINE speaks of the row under test
        label_sets.setdefault(name[1:], frozenset({label_ids[name]}))
    for subset in mr.subsets:
        label_sets[subset.name.key] = frozenset(label_ids[v.key] for v in subset.variables if v.key in label_ids)
    columns = ColumnNames(input_columns)

    define_scope = Scope(columns, label_sets, in_define=True, column_types=integer_columns)
    measure_scope = Scope(columns, label_sets, in_define=False, column_types=integer_columns)

    defines = {d.variable.key: d for d in mr.defines}
    running = RunningAggregates()
    # A measure may read an aggregate that DEFINE carries, at a match's last row (ExpressionCompiler._final_state).
    measure_compiler = ExpressionCompiler(measure_scope, final_states=running)
    conditions: list = []
    reads: set = set()
    for name in label_names:
        if name in absent:
            # B's condition is evaluated as if the row were labelled B (see _absence_condition).
            tested = label_ids.get(name[1:], label_ids[name])
            scope = define_scope.for_variable(tested)
            conditions.append(
                _absence_condition(ExpressionCompiler(scope, running), defines.get(name[1:]), label_ids, name)
            )
            if name[1:] in defines:
                reads |= history_reads(defines[name[1:]].condition, scope)
            continue
        definition = defines.get(name)
        if definition is None:
            conditions.append(None)  # a variable with no DEFINE matches every row
            continue
        scope = define_scope.for_variable(label_ids[name])
        conditions.append(ExpressionCompiler(scope, running).compile(definition.condition))
        reads |= history_reads(definition.condition, scope)

    measures = tuple(measure_compiler.compile(m.expr) for m in mr.measures)
    pattern = lowered.lower(mr.pattern, label_names)
    program = compile_program(pattern, label_names)

    partition_names = tuple(columns.resolve(ref.column, ref.span) for ref in mr.partition_by)
    order_names = tuple(
        columns.resolve(key.expr.column, key.span) for key in mr.order_by if isinstance(key.expr, ast.ColumnRef)
    )
    all_rows = mr.rows_per_match.mode != "ONE"
    expressions = [d.condition for d in mr.defines] + [m.expr for m in mr.measures]
    referenced = _referenced_columns(expressions, columns)
    within = None
    if mr.within is not None:
        if not order_names:
            raise CepSemanticError(
                "WITHIN needs an ORDER BY column holding the event time", code="E0240", span=mr.within.span
            )
        within = Within(order_names[0], interval_to_timedelta(mr.within))
        referenced.add(order_names[0])
    if all_rows:
        row_columns = order_names + tuple(c for c in input_columns if c not in partition_names and c not in order_names)
        buffered = tuple(dict.fromkeys(row_columns + tuple(sorted(referenced))))
    else:
        row_columns = ()
        buffered = tuple(sorted(referenced))
    if not buffered and input_columns:
        buffered = (input_columns[0],)  # rows must still be counted when no condition reads a column
    layout = OutputLayout(
        mode=mr.rows_per_match.mode,
        show_timeout=mr.rows_per_match.show_timeout,
        status="ABSENCE" if "DEADLINE" in {i.op for i in program.instructions} else "MATCHED",
        partition_count=len(partition_names),
        row_columns=row_columns,
        order_count=len(order_names) if all_rows else 0,
        measures=measures,
    )
    measure_names = tuple(m.name.name for m in mr.measures)
    if all_rows:
        output_columns = partition_names + order_names + measure_names + row_columns[len(order_names) :]
    else:
        output_columns = partition_names + measure_names
    return Machine(
        pattern=pattern,
        program=program,
        opcodes=tuple(i.op for i in program.instructions),
        operands=tuple(i.a for i in program.instructions),
        second_targets=tuple(i.b for i in program.instructions),
        closures=static_closures(program),
        done_pc=len(program.instructions) - 1,
        label_names=label_names,
        conditions=tuple(conditions),
        columns=buffered,
        partition_names=partition_names,
        order_names=order_names,
        lookahead=max((_offset(n, 1) for e in expressions for n in ast.walk(e) if _is_nav(n, "NEXT")), default=0),
        lookback=max((_offset(n, 1) for e in expressions for n in ast.walk(e) if _is_nav(n, "PREV")), default=0),
        equivalence_key=make_key_function(reads, include_start=mr.within is not None),
        advance_running=running.advancer(len(label_names)),
        history=frozenset(reads),
        lazy_starts=bool(reads) or mr.within is not None,
        within=within,
        output=OutputBuilder(layout),
        skip=SkipRule.of(mr.after_match, label_sets),
        output_columns=output_columns,
        integer_columns=integer_columns,
    )


def static_closures(program: Program) -> tuple:
    """For each pc, the LABEL/DONE/DEADLINE pcs its epsilon closure reaches, in priority order.

    Precomputed when the closure passes no anchor or exclusion (those depend on the position or
    record marks); then adding a thread is a loop over a tuple instead of a graph walk. Filtering
    this list by the step's visited set gives exactly what the walk would add: a subtree the walk
    would prune was fully visited, so all its targets are filtered out too.
    """
    parked = {"LABEL", "DONE", "DEADLINE"}
    dynamic = {"AT_START", "AT_END", "EXCL_BEGIN", "EXCL_END"}
    instructions = program.instructions
    out = []
    for root in range(len(instructions)):
        targets: list[int] = []
        seen: set[int] = set()
        stack = [root]
        static = True
        while stack and static:
            pc = stack.pop()
            if pc in seen:
                continue
            seen.add(pc)
            inst = instructions[pc]
            if inst.op in parked:
                targets.append(pc)
            elif inst.op in dynamic:
                static = False
            elif inst.op == "SPLIT":
                stack.append(inst.b)
                stack.append(inst.a)
            else:  # JUMP
                stack.append(inst.a)
        out.append(tuple(targets) if static else None)
    return tuple(out)


def _is_nav(node, kind: str) -> bool:
    return isinstance(node, ast.Navigation) and node.kind == kind


def _offset(node: ast.Navigation, default: int) -> int:
    offset = node.offset
    if offset is None:
        return default
    return offset.value if isinstance(offset, ast.Literal) and isinstance(offset.value, int) else default


def _referenced_columns(expressions, columns: ColumnNames) -> set[str]:
    found = set()
    for expr in expressions:
        for node in ast.walk(expr):
            if isinstance(node, ast.ColumnRef):
                found.add(columns.resolve(node.column, node.span))
    return found


def _absence_condition(compiler: ExpressionCompiler, definition, label_ids: dict[str, int], label: str):
    """A row inside ``!B`` is one for which B's condition does not hold (NULL counts as not holding)."""
    if definition is None:
        return lambda env: False  # B matches every row, so no row can be "not B"
    condition = compiler.compile(definition.condition)
    b_label, own_label = label_ids.get(label[1:]), label_ids[label]

    def not_b(env):
        view = env.view
        # Evaluate B's condition as if the row were labelled B, so `B.x` means this row.
        view.relabel(b_label if b_label is not None else own_label)
        try:
            return condition(env) is not True
        finally:
            view.relabel(own_label)

    return not_b


@dataclass(frozen=True)
class Within:
    """WITHIN (Flink's meaning): a match's last row is less than ``limit`` after its first row."""

    column: str
    limit: _dt.timedelta

    def deadline(self, first):
        """The first event time at which a partial match that began at ``first`` is out of time."""
        if isinstance(first, (int, float)):
            return first + self.limit / _dt.timedelta(milliseconds=1)
        try:
            return first + self.limit
        except OverflowError:  # past the year 9999: a deadline no event time reaches
            return _dt.datetime.max.replace(tzinfo=first.tzinfo)

    def expired(self, first, now) -> bool:
        """Can a row at time ``now`` (or later) no longer join a match whose first row is at ``first``?"""
        if first is None or now is None:
            return False
        try:
            if isinstance(first, (int, float)):
                return now - first >= self.limit / _dt.timedelta(milliseconds=1)  # numeric time = epoch ms
            return now - first >= self.limit
        except TypeError:  # text, or naive and aware times: there is no time between them
            raise CepRuntimeError(
                f"WITHIN measures the time between event times, but {self.column!r} holds "
                f"{type(first).__name__} {first!r} and {type(now).__name__} {now!r}",
                code="E0410",
                hint="give the event time as a TIMESTAMP (or a number of milliseconds)",
            ) from None
