"""What every stage of a column-wise call reads of the query: its compiled facts, fixed once per stream."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, replace

from cep.matcher.plan import COLUMN_WISE
from cep.matcher.program.machine import Machine
from cep.matcher.rows.outer import OuterQuery
from cep.spark_bridge.engine.keyed import KeyedStream
from cep.spark_bridge.engine.match_ids import SessionIds

_ONE_US = _dt.timedelta(microseconds=1)


@dataclass(frozen=True)
class ColumnarRules:
    """The query as the column-wise step runs it: the per-key engine's rules, the sequence plan its route
    chose, and the outer query split so that WHERE keeps each kept row's match id with it."""

    engine: KeyedStream
    base: Machine  # the machine the per-key path compiles (lookback, lookahead, AFTER MATCH SKIP)
    plan: object  # the route's ``SequencePlan``
    columns: tuple[str, ...]  # the columns a key's pending and carried rows keep
    within_us: int | None  # WITHIN in microseconds
    session_ids: SessionIds
    where: object  # the outer WHERE (a callable on a row), or None
    select: OuterQuery  # the select list alone: ``output.measure`` applies WHERE itself

    @classmethod
    def of(cls, engine: KeyedStream) -> ColumnarRules:
        route = engine.route()
        if route.stream != COLUMN_WISE:
            raise ValueError("the column-wise step runs only a column-wise route: " + "; ".join(route.stream_reasons))
        plan = route.sequence
        return cls(
            engine=engine,
            base=engine.plan.machine(engine.input_columns, engine.integer_columns),
            plan=plan,
            columns=tuple(engine.pending_columns),
            within_us=None if plan.within is None else int(plan.within // _ONE_US),
            session_ids=SessionIds(engine.query_fp),
            where=engine.outer.where,
            select=replace(engine.outer, where=None),
        )

    @property
    def lookback(self) -> int:
        return self.base.lookback

    @property
    def measures(self):
        """The measures' column programs (PREV in a measure: ``sequence_output.reading_before``'s)."""
        return self.plan.measures
