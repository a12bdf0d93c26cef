"""``cep explain``: the compiled program, the conditions, and how the query will run."""

from __future__ import annotations

from cep.grammar import ast
from cep.matcher.sql.expressions import walk
from cep.matcher.program.machine import absence_labels, pattern_labels


def _format_expr(expr) -> str:
    try:
        from cep.grammar.format import format_expr

        return format_expr(expr)
    except ImportError:  # the formatter is optional for explain
        return type(expr).__name__


def explain(plan) -> str:
    statement: ast.Statement = plan.statement
    mr = statement.match
    columns = sorted({node.column.name for e in [d.condition for d in mr.defines] + [m.expr for m in mr.measures]
                      for node in walk(e) if isinstance(node, ast.ColumnRef)}
                     | {ref.column.name for ref in mr.partition_by}
                     | set(plan.order_columns))
    machine = plan.machine(tuple(columns))
    lines = ["program:"]
    lines += ["  " + line for line in machine.program.dump().splitlines()]
    lines.append("conditions:")
    defines = {d.variable.key: d for d in mr.defines}
    absent = absence_labels(mr.pattern)
    for name in pattern_labels(mr.pattern):
        base = name[1:] if name in absent else name
        text = _format_expr(defines[base].condition) if base in defines else "TRUE (no DEFINE)"
        lines.append(f"  {name}: {'NOT (' + text + ')' if name in absent else text}")
    lines.append("execution:")
    from cep.matcher.vector import fastpath

    lines += ["  " + line for line in fastpath.explain_lines(statement, machine, tuple(columns))]
    if machine.equivalence_key is None:
        lines.append("  Pike VM (when it runs): conditions read only the current row and fixed PREV/NEXT offsets,")
        lines.append("        so threads merge by instruction and live threads stay within the program size")
    elif not machine.history:
        lines.append("  Pike VM, one start row at a time: WITHIN ties each partial match to its first row")
    else:
        lines.append("  Pike VM, one start row at a time, with history-aware thread merging; the conditions")
        lines.append("        read the match history:")
        for read in sorted(machine.history, key=repr):
            lines.append(f"        {read[0]}{'' if len(read) < 3 else f' (offset {read[2]})'}")
    lines.append(f"  rows kept before a match start (PREV reach): {machine.lookback}")
    lines.append(f"  rows read ahead (NEXT reach): {machine.lookahead}")
    if mr.within is not None:
        lines.append(f"  WITHIN: partial matches are dropped once {mr.within.text} {mr.within.unit} pass after their first row")
    return "\n".join(lines)
