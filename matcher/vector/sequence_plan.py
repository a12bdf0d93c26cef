"""Whether a query runs on the column-wise sequence engine (``sequence.py``), and its plan: the items of the
pattern, the DEFINE conditions as kernels, which runs end without a scan (``first_hit``, ``cumulative``), the
measures as column programs; and ``cep explain``'s lines saying which route each run takes and why.

``analyze`` returns the plan or the reasons the query is not eligible (``NotEligible``); ``plan_for`` keeps
the plan on the machine, built once.
"""

from __future__ import annotations

import numpy as np

from cep.grammar import ast
from cep.grammar.columns import ColumnNames
from cep.matcher.program import lowered
from cep.matcher.program.machine import absence_labels
from cep.matcher.sql.expressions import Scope
from cep.matcher.vector import all_rows, cumulative, first_hit, kernels, sequence_output
from cep.matcher.vector.lane_frame import History, Slot
from cep.matcher.vector.pattern_regex import NotEligible
from cep.matcher.vector.sequence import Item, SequencePlan

# A sequence longer than this goes to the VM (each item is one lockstep scan over the lanes).
MAX_ITEMS = 16
# What a term of the pattern is, when it is not an item of a sequence (``cep explain`` says it).
_NOT_AN_ITEM = {
    lowered.Choice: "an alternation",
    lowered.AnyOrder: "PERMUTE",
    lowered.Excluded: "an exclusion",
    lowered.Edge: "an anchor",
    lowered.Nothing: "an empty pattern ()",
    lowered.Repeat: "a quantified group",
    lowered.Sequence: "a group",
}


def analyze(
    statement: ast.Statement, machine, input_columns: tuple[str, ...], *, stream: bool = False
) -> tuple[SequencePlan | None, list[str]]:
    """(plan, []) or (None, reasons). ``stream``: the plan of the column-wise stream, which also takes ALL
    ROWS PER MATCH (its rows built from each match's items, ``all_rows.measure_columns``); the batch engine
    emits one row per match."""
    try:
        return _build(statement, machine, input_columns, stream), []
    except NotEligible as why:
        return None, [str(why)]


def plan_for(statement: ast.Statement, machine, input_columns: tuple[str, ...]) -> SequencePlan | None:
    """The sequence plan for this machine, built once and kept in ``machine.column_plans``; None when not
    eligible (``reasons_not`` says why)."""
    return _analysis(statement, machine, input_columns)[0]


def reasons_not(statement: ast.Statement, machine, input_columns: tuple[str, ...]) -> list[str]:
    """Why the sequence engine does not take the query (empty: it does), kept as ``plan_for`` keeps the plan."""
    return _analysis(statement, machine, input_columns)[1]


def stream_plan_for(statement: ast.Statement, machine, input_columns: tuple[str, ...]) -> SequencePlan | None:
    """The plan the column-wise stream runs (``plan_for``'s, and for ALL ROWS PER MATCH one of its own)."""
    return _stream_analysis(statement, machine, input_columns)[0]


def stream_reasons_not(statement: ast.Statement, machine, input_columns: tuple[str, ...]) -> list[str]:
    """Why the column-wise stream has no sequence plan for the query (empty: it has)."""
    return _stream_analysis(statement, machine, input_columns)[1]


def _analysis(statement: ast.Statement, machine, input_columns: tuple[str, ...]) -> tuple:
    """``analyze``'s (plan or None, reasons), made on the first ask for this machine."""
    kept = machine.column_plans
    if kept.sequence is None:
        kept.sequence = analyze(statement, machine, input_columns)
    return kept.sequence


def _stream_analysis(statement: ast.Statement, machine, input_columns: tuple[str, ...]) -> tuple:
    if statement.match.rows_per_match.mode == "ONE":  # one row per match: the batch engine's plan
        return _analysis(statement, machine, input_columns)
    kept = machine.column_plans
    if kept.stream is None:
        kept.stream = analyze(statement, machine, input_columns, stream=True)
    return kept.stream


def _items(pattern: lowered.Node, labels: tuple[str, ...]) -> tuple[Item, ...]:
    """The machine's lowered pattern (``Machine.pattern``) as a sequence of items, or ``NotEligible``."""
    parts = pattern.items if isinstance(pattern, lowered.Sequence) else (pattern,)
    items = []
    for part in parts:
        if isinstance(part, lowered.Label):
            items.append(Item(part.label, 1, 1, True))
        elif isinstance(part, lowered.Absent):
            name = labels[part.label][1:]
            if name in labels:
                raise NotEligible(f"'{name}' is both a term and an absence of the pattern")
            # as the compiler runs it: ``A !B C`` takes as few rows that are not B as C allows (a
            # reluctant run); a trailing ``!B`` takes every row before the deadline (greedy, DEADLINE)
            items.append(Item(part.label, 0, None, part.trailing))
        elif isinstance(part, lowered.Repeat) and isinstance(part.body, lowered.Label):
            if part.high == 0:
                raise NotEligible("a variable quantified zero times")
            items.append(Item(part.body.label, part.low, part.high, part.greedy))
        else:
            raise NotEligible(f"the pattern is not a sequence of variables ({_NOT_AN_ITEM[type(part)]})")
    for item, following in zip(items, items[1:]):
        if item.low != item.high and following.low == 0:
            raise NotEligible("a run followed by an optional item (where it ends depends on the items after)")
    if len({item.label for item in items}) != len(items):
        raise NotEligible("a variable appears twice in the pattern")
    if len(items) > MAX_ITEMS:
        raise NotEligible(f"more than {MAX_ITEMS} items")
    if sum(item.low for item in items) == 0:
        raise NotEligible("the pattern can match no row (empty matches)")
    return tuple(items)


def _build(statement: ast.Statement, machine, input_columns: tuple[str, ...], stream: bool = False) -> SequencePlan:
    mr = statement.match
    every_row = mr.rows_per_match.mode != "ONE"
    if every_row and not stream:
        raise NotEligible("ALL ROWS PER MATCH")
    if getattr(mr, "seek", False):
        raise NotEligible("SEEK")
    if mr.subsets:
        raise NotEligible("SUBSET")
    labels = machine.label_names
    label_ids = {name: index for index, name in enumerate(labels)}
    items = _items(machine.pattern, labels)
    absent = {label_ids[name]: name[1:] for name in absence_labels(mr.pattern)}
    for label, name in absent.items():  # `B` that appears only as `!B` names the rows inside the absence
        label_ids.setdefault(name, label)
    names = ColumnNames(input_columns)
    scope = Scope(
        names,
        {name: frozenset({i}) for name, i in label_ids.items()},
        in_define=True,
        column_types=machine.integer_columns,
    )

    def label_of(qualifier: ast.Identifier) -> int:
        if qualifier.key not in label_ids:
            raise kernels.NotVectorizable(f"'{qualifier.name}' is not a pattern variable")
        return label_ids[qualifier.key]

    slots: list[Slot] = []
    history = History(label_of, slots)
    defines = {d.variable.key: d for d in mr.defines}
    tested = dict(defines)  # a row inside `!B` is tested with B's condition, as if it were labelled B
    tested.update({labels[label]: defines[name] for label, name in absent.items() if name in defines})
    try:
        conditions, used = kernels.compile_defines(
            tested,
            labels,
            scope.column,
            {name: frozenset({i}) for name, i in label_ids.items()},
            history,
            scope.column_type,
        )
    except kernels.NotVectorizable as why:
        raise NotEligible(str(why)) from None
    for label in absent:
        conditions[label] = _absent(conditions[label])
    used |= {slot.column for slot in slots if slot.column is not None}
    within = machine.within.limit if machine.within is not None else None
    item_index = {item.label: index for index, item in enumerate(items)}

    def item_of(qualifier: ast.Identifier) -> int:
        if qualifier.key not in label_ids:
            raise sequence_output.NotColumnar(f"'{qualifier.name}' is not a pattern variable")
        return item_index[label_ids[qualifier.key]]

    hits = {} if slots else _first_hits(items, defines, conditions, labels, label_ids, scope, label_of)
    thresholds = {}
    for index, (item, following) in enumerate(zip(items, items[1:])):
        definition = defines.get(labels[item.label])
        if index + 2 == len(items) and following.low == following.high == 1 and definition is not None:
            found = cumulative.threshold(definition.condition, item.label, label_of, scope.column, slots)
            if found is not None:
                thresholds[index] = found
    quiet = None
    if items[-1].label in absent and absent[items[-1].label] not in defines:
        quiet = lambda frame: np.ones(frame.n, dtype=bool)  # noqa: E731 (no DEFINE: every row is a B)
    elif items[-1].label in absent:
        try:
            quiet = kernels.compile_condition(
                defines[absent[items[-1].label]].condition,
                scope.column,
                lambda qualifier: label_ids.get(qualifier.key) == items[-1].label,
                column_type=scope.column_type,
            )
        except kernels.NotVectorizable:  # B reads the match so far: its rows are scanned from every start
            pass
    measure_scope = Scope(
        names,
        {name: frozenset({i}) for name, i in label_ids.items()},
        in_define=False,
        column_types=machine.integer_columns,
    )
    all_rows_measures = None
    if every_row:
        all_rows_measures = _all_rows_measures(mr, items, absent, measure_scope, label_ids)
    measures = (
        None
        if every_row
        else sequence_output.compile_measures(
            mr.measures,
            measure_scope.column,
            item_of,
            machine.output.layout.status,
            machine.output.layout.measures,
            tuple(item.label for item in items),
            machine.label_names,
            measure_scope.column_type,
        )
    )
    if measures is None and not every_row and not sequence_output.reads_after(mr.measures):  # PREV: rows before it too
        layout = machine.output.layout
        measures = sequence_output.reading_before(
            layout.measures, tuple(item.label for item in items), machine.label_names, layout.status, machine.lookback
        )
    return SequencePlan(
        machine=machine,
        statement=statement,
        items=items,
        conditions=conditions,
        slots=slots,
        columns=tuple(sorted(used)),
        within=within,
        show_timeout=mr.rows_per_match.show_timeout,
        measures=measures,
        hits=hits,
        cumulative=thresholds,
        deadline=items[-1].label in absent,
        quiet=quiet,
        all_rows=all_rows_measures,
    )


def _all_rows_measures(mr: ast.MatchRecognize, items, absent: dict, scope: Scope, label_ids: dict) -> list:
    """ALL ROWS PER MATCH's measures for the column-wise stream (``all_rows.measures``' specs), or
    ``NotEligible``. Each item is one variable, so a match row's label is its item's."""
    if mr.rows_per_match.mode not in all_rows.MODES:
        raise NotEligible("ALL ROWS PER MATCH WITH UNMATCHED ROWS")
    if mr.rows_per_match.show_timeout:
        raise NotEligible("ALL ROWS PER MATCH with SHOW TIMEOUT MATCHES")
    if absent:
        raise NotEligible("ALL ROWS PER MATCH over an absence")
    specs = all_rows.measures(mr, {name: frozenset({i}) for name, i in label_ids.items()}, [], scope)
    if specs is None:
        raise NotEligible("ALL ROWS PER MATCH with a measure not computed column-wise")
    return specs


def _absent(condition):
    """The condition of a row inside ``!B``: B's condition does not hold (NULL does not hold); with no
    DEFINE for B every row is a B, so none is inside."""
    if condition is None:
        return lambda frame: np.zeros(frame.n, dtype=bool)
    return lambda frame: ~condition(frame)


def _first_hits(items, defines, conditions, labels, label_ids, scope, label_of) -> dict:
    """The runs whose end ``first_hit`` finds: a run with no condition before the last item, a single row
    whose condition compares its row with items finished before the run."""
    hits = {}
    for index, (item, following) in enumerate(zip(items, items[1:])):
        if index + 2 != len(items) or following.low != 1 or following.high != 1 or conditions[item.label] is not None:
            continue
        definition = defines.get(labels[following.label])
        if definition is None:
            continue
        earlier = {items[k].label for k in range(index)}

        def current(qualifier: ast.Identifier, own=following.label) -> bool:
            return label_ids.get(qualifier.key) == own

        def finished(qualifier: ast.Identifier, earlier=earlier) -> bool:
            return label_ids.get(qualifier.key) in earlier

        comparison = first_hit.split(definition.condition, current, finished)
        if comparison is None:
            continue
        try:
            row = kernels.compile_value(comparison.row, scope.column, current, column_type=scope.column_type)
            start = kernels.compile_value(
                comparison.start, scope.column, current, History(label_of, []), scope.column_type
            )
        except kernels.NotVectorizable:
            continue
        hits[index] = (comparison.op, row, start)
    return hits


def explain_lines(statement: ast.Statement, machine, input_columns: tuple[str, ...], regex_line: str) -> list[str]:
    """``cep explain``'s lines when the regex fast path declines (``regex_line`` says why)."""
    plan, reasons = analyze(statement, machine, input_columns)
    # regex_line is "path: Pike VM (not eligible for the fast path: REASONS)": keep REASONS, to say it once.
    why_not_regex = regex_line.partition("(")[2].rstrip(")").removeprefix("not eligible for the fast path: ")
    if plan is None:
        return [regex_line.rstrip(")") + "; not the sequence engine: " + "; ".join(reasons) + ")"]
    return [
        "path: column-wise sequence engine (matcher/vector/sequence.py): every start row at once, item by item,",
        "      with numpy; WITHIN, timeouts and what the conditions read of the match so far, per start",
        f"      (not the regex fast path: {why_not_regex})",
        "      a batch the kernels cannot evaluate exactly, and a partition where a start's preferred match",
        "      depends on backtracking, run on the Pike VM",
    ] + route_lines(plan)


def route_lines(plan: SequencePlan) -> list[str]:
    """How each run is ended and how the output is made, and why not faster (``cep explain``)."""
    labels = plan.machine.label_names
    lines = []
    for index, item in enumerate(plan.items):
        if item.low == item.high:
            continue
        name = labels[item.label]
        if item.label == plan.items[-1].label and plan.deadline:
            if plan.quiet is not None:
                lines.append(
                    f"      {name}: no {name[1:]} row before WITHIN's deadline, found for every start at once "
                    f"(the first {name[1:]} row"
                )
                lines.append(
                    "        after each row, a reversed running minimum); "
                    "the match is done when time reaches the deadline"
                )
            else:
                lines.append(
                    f"      {name}: rows scanned from every start until a {name[1:]} row or WITHIN's deadline"
                    f" ({name[1:]}'s condition reads the match so far)"
                )
            continue
        if index in plan.hits:
            which = "last" if item.greedy else "first"
            lines.append(
                f"      {name}'s runs: end at the {which} row where {labels[plan.items[index + 1].label]}'s comparison"
                " holds, for every start at once (range minima/maxima and a binary descent, first_hit.py),"
            )
            lines.append("        on batches whose compared values are numbers (no NaN, no infinity); else row by row")
        elif index in plan.cumulative:
            route = plan.cumulative[index]
            slot = plan.slots[route.slot]
            lines.append(
                f"      {name}'s runs: end where the running {slot.name} crosses {route.limit}, by cumulative sums"
                " (cumulative.py),"
            )
            lines.append("        on batches whose addends are integers, never negative nor NULL; else row by row")
        else:
            lines.append(f"      {name}'s runs: scanned row by row from every start ({_scan_reason(plan, index)})")
    if plan.measures is not None:
        lines.append("      measures: computed for all matches at once; AFTER MATCH SKIP walked once per emitted match")
        per_match = sequence_output.per_match_names(plan.statement.match.measures, plan.measures)
        reads_before = sequence_output.reads_before(plan.statement.match.measures)
        before = " and the rows PREV reads before it" if reads_before else ""
        if per_match:
            lines.append(
                f"        ({', '.join(per_match)}: the Pike VM's measure code, called once per match over its"
                f" rows{before})"
            )
    else:
        lines.append(
            "      measures: one match at a time as the Pike VM computes them, through PartitionOutput (NEXT in"
            " a measure reads rows after the match)"
        )
    return lines


def _scan_reason(plan: SequencePlan, index: int) -> str:
    items, labels = plan.items, plan.machine.label_names
    if labels[items[index].label] in absence_labels(plan.statement.match.pattern):
        return f"rows that are not {labels[items[index].label][1:]}, until the next item"
    if index + 2 != len(items) or items[index + 1].low != 1 or items[index + 1].high != 1:
        return "the range search and cumulative sums take a run followed by the pattern's last item, one row"
    if plan.conditions[items[index].label] is None:
        if plan.slots:
            return "the conditions carry running aggregates"
        return (
            f"{labels[items[index + 1].label]}'s condition is not a comparison of its row with an item before the run"
        )
    return f"{labels[items[index].label]}'s condition is not a running SUM or COUNT below a constant integer"
