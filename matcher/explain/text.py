"""``cep explain``: the compiled program, the conditions, and how the query will run."""

from __future__ import annotations

from cep.grammar import ast
from cep.grammar.columns import ColumnNames
from cep.matcher.explain.dot import condition_texts
from cep.matcher.plan import COLUMN_WISE, Route
from cep.matcher.vector import fastpath, sequence_output, sequence_plan


def query_columns(plan) -> list[str]:
    """The input ``explain`` assumes: just the columns the query names."""
    mr = plan.statement.match
    named = [
        node.column
        for e in [d.condition for d in mr.defines] + [m.expr for m in mr.measures]
        for node in ast.walk(e)
        if isinstance(node, ast.ColumnRef)
    ]
    named += [ref.column for ref in mr.partition_by]
    named += [key.expr.column for key in mr.order_by if isinstance(key.expr, ast.ColumnRef)]
    return _input_columns(named)


def explain(plan) -> str:
    statement: ast.Statement = plan.statement
    mr = statement.match
    columns = query_columns(plan)
    machine = plan.machine(tuple(columns))
    lines = ["program:"]
    lines += ["  " + line for line in machine.program.dump().splitlines()]
    lines.append("conditions:")
    lines += [f"  {name}: {text}" for name, text in condition_texts(statement).items()]
    lines.append("execution:")
    lines += ["  " + line for line in plan.route(tuple(columns)).lines()]
    path = fastpath.explain_lines(statement, machine, tuple(columns))
    if path[0].startswith("path: Pike VM"):  # the regex path declines: maybe the sequence engine takes it
        path = sequence_plan.explain_lines(statement, machine, tuple(columns), path[0])
    lines += ["  " + line for line in path]
    if machine.equivalence_key is None:
        lines.append("  Pike VM (when it runs): conditions read only the current row and fixed PREV/NEXT offsets,")
        lines.append("        so threads merge by instruction and live threads stay within the program size")
    elif not machine.history:
        lines.append("  Pike VM, one start row at a time: WITHIN ties each partial match to its first row")
    else:
        lines.append("  Pike VM, one start row at a time, with history-aware thread merging; the conditions")
        lines.append("        read the match history:")
        for read in sorted(machine.history, key=repr):
            lines.append(f"        {read[0]}{f' (offset {read[2]})' if read[0] in ('first', 'last') else ''}")
    lines.append(f"  rows kept before a match start (PREV reach): {machine.lookback}")
    lines.append(f"  rows read ahead (NEXT reach): {machine.lookahead}")
    if mr.within is not None:
        lines.append(
            f"  WITHIN: partial matches are dropped once {mr.within.text} {mr.within.unit} pass after their first row"
        )
    return "\n".join(lines)


def stream_line(route: Route) -> str:
    """``cep explain``'s last line: how a stream runs the query (``LocalStream.path`` says the same)."""
    if route.stream != COLUMN_WISE:
        return "streaming: per key on the Pike VM (" + "; ".join(route.stream_reasons) + ")"
    plan = route.sequence
    timed = " and ".join(
        text for flag, text in ((plan.show_timeout, "TIMEOUT rows"), (plan.deadline, "absences")) if flag
    )
    extra = f"; {timed} come out once the watermark (or a later row) passes their WITHIN deadline" if timed else ""
    if sequence_output.reads_before(plan.statement.match.measures):
        extra += "; measures with PREV: the Pike VM's measure code per match, over the rows before it too"
    if plan.all_rows is not None:
        extra += "; ALL ROWS PER MATCH: a match's rows, each with its match's id, once the match is final"
    if plan.machine.lookahead:
        extra += "; NEXT in DEFINE: a session's last rows are tested once the rows after them come (or it ends)"
    return (
        "streaming: column-wise (spark_bridge/engine/columnar/): every key of a micro-batch (or of a "
        "bucket of keys on Spark) at once on the sequence engine, undecided starts carried" + extra
    )


def _input_columns(named: list[ast.Identifier]) -> list[str]:
    """An input with just the columns the query names: each quoted spelling, and one column for every
    unquoted name no such spelling already matches (``ts``, ``TS`` and ``"Ts"`` need one column, Ts)."""
    columns = list(dict.fromkeys(ident.name for ident in named if ident.quoted))
    for ident in named:
        if not ident.quoted and not ColumnNames(columns).has_name_ignoring_case(ident.name):
            columns.append(ident.name)
    return sorted(columns)
