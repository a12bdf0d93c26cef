"""Whether a streaming query runs on the column-wise path (``columnar.py``) or per key on the Pike VM,
and why: decided once per query from its plan, and said by ``cep explain``'s last line."""

from __future__ import annotations

from cep.grammar.errors import CepError
from cep.matcher.vector import sequence_output
from cep.matcher.vector import sequence_plan
from cep.spark_bridge.engine.keyed import KeyedStream


def reasons_not(engine: KeyedStream) -> list[str]:
    """Why the column-wise path cannot run ``engine``'s query (empty: it can). Decided once per query."""
    if engine.proctime:
        return ["ORDER BY PROCTIME() (rows are matched on arrival, one by one)"]
    why = []
    if engine.dedup_columns:
        why.append("dedup_key")
    if not engine.plan.column_wise:
        return why + ["the column-wise engines are turned off (column_wise=False)"]
    base = engine.plan.machine(engine.input_columns)
    plan = sequence_plan.plan_for(engine.plan.statement, base, engine.input_columns)
    if plan is None:
        reasons = sequence_plan.reasons_not(engine.plan.statement, base, engine.input_columns)
        return why + ["not the sequence engine" + (f" ({'; '.join(reasons)})" if reasons else "")]
    if sequence_output.reads_after(engine.plan.statement.match.measures):
        why.append("NEXT in a measure (a match waits for the rows after it)")
    if plan.within is not None and base.within.column != engine.time_column:
        why.append("WITHIN over another column than the event time")
    # The plan's items, compiled from the machine's lowered pattern, are variables, quantified variables
    # and absences: the shapes whose runs say which starts reached the end of the rows (``Lanes.reached``).
    items = plan.items
    for index, item in enumerate(items):
        last = index + 1 == len(items)
        before_last_row = index + 2 == len(items) and items[-1].low == items[-1].high == 1
        if item.low != item.high and not (last or before_last_row):
            why.append("a run whose end depends on the items after the next one (backtracking)")
            break
    return why


def explain_line(plan, input_columns, query_text: str) -> str:
    """``cep explain``'s line on the streaming path this query takes (``LocalStream.path`` says the same)."""
    try:
        engine = KeyedStream(plan, tuple(input_columns), query_text=query_text)
    except CepError as why:
        return f"streaming: not possible as written ({why.message})"
    why = reasons_not(engine)
    if not why:
        plan = sequence_plan.plan_for(engine.plan.statement, engine.plan.machine(engine.input_columns),
                                      engine.input_columns)
        timed = " and ".join(text for flag, text in ((plan.show_timeout, "TIMEOUT rows"), (plan.deadline, "absences")) if flag)
        extra = f"; {timed} come out once the watermark (or a later row) passes their WITHIN deadline" if timed else ""
        if sequence_output.reads_before(plan.statement.match.measures):
            extra += "; measures with PREV: the Pike VM's measure code per match, over the rows before it too"
        if plan.machine.lookahead:
            extra += "; NEXT in DEFINE: a session's last rows are tested once the rows after them come (or it ends)"
        return ("streaming: column-wise (spark_bridge/engine/columnar.py): every key of a micro-batch (or of a "
                "bucket of keys on Spark) at once on the sequence engine, undecided starts carried" + extra)
    return "streaming: per key on the Pike VM (" + "; ".join(why) + ")"
