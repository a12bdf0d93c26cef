"""Turning a finished match into output rows: ONE ROW PER MATCH and the ALL ROWS PER MATCH modes.

Column layout, as the standard's ``SELECT *`` gives it:
    ONE ROW PER MATCH   partition columns, measures
    ALL ROWS PER MATCH  partition columns, ORDER BY columns, measures, the other input columns
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from cep.matcher.sql.context import MatchView


@dataclass(frozen=True)
class OutputLayout:
    """Which values make up an output row, and how the row mode treats empty and unmatched rows."""

    mode: str  # ONE, ALL_SHOW_EMPTY, ALL_OMIT_EMPTY, ALL_WITH_UNMATCHED
    show_timeout: bool  # SHOW TIMEOUT MATCHES: expired partial matches become TIMEOUT rows
    status: str  # MATCH_STATUS() of a complete match: MATCHED, or ABSENCE for a trailing `!B`
    partition_count: int  # values taken from the partition key
    row_columns: tuple[str, ...]  # ALL ROWS: ORDER BY columns then the other input columns, by buffered name
    order_count: int  # how many of row_columns come before the measures
    measures: tuple[Callable, ...]

    @property
    def all_rows(self) -> bool:
        return self.mode != "ONE"


class OutputBuilder:
    def __init__(self, layout: OutputLayout) -> None:
        self.layout = layout
        self.wants_unmatched = layout.mode == "ALL_WITH_UNMATCHED"
        self.show_empty = layout.mode in ("ONE", "ALL_SHOW_EMPTY", "ALL_WITH_UNMATCHED")
        self.show_timeout = layout.show_timeout
        self.all_rows = layout.all_rows
        self.measures = layout.measures

    def match(self, matcher, number: int, start: int, end: int, labels: list[int], excluded) -> list[tuple]:
        """The output rows of a match (``matcher.match_states``: the running DEFINE aggregates after its
        last row, which measures read there instead of folding; see ``ExpressionCompiler._final_state``)."""
        layout = self.layout
        env = matcher.env
        saved_view, saved_row, saved_number = env.view, env.row, env.match_number
        env.match_number = number
        env.match_status = layout.status
        try:
            if end < start:  # an empty match
                if not self.show_empty:
                    return []
                env.row = None
                env.view = MatchView(start, labels, None)
                measures = tuple(measure(env) for measure in layout.measures)
                if not layout.all_rows:
                    return [matcher.key + measures]
                return [self._row(matcher, start, measures)]
            if not self.all_rows:
                env.row = end
                env.view = MatchView(start, labels, end, matcher.match_states)
                return [matcher.key + tuple([measure(env) for measure in self.measures])]
            rows = []
            for position in range(start, end + 1):
                if excluded and any(begin <= position < finish for begin, finish in excluded):
                    continue
                env.row = position
                env.view = MatchView(start, labels, position)
                rows.append(self._row(matcher, position, tuple([measure(env) for measure in self.measures])))
            return rows
        finally:
            env.view, env.row, env.match_number = saved_view, saved_row, saved_number

    def timeout(self, matcher, start: int, end: int, labels: list[int]) -> list[tuple]:
        """A partial match that WITHIN expired: one row, measures over its rows, MATCH_STATUS 'TIMEOUT'.

        It uses up no match number (MATCH_NUMBER() is NULL): it is not a match.
        """
        env = matcher.env
        saved = env.view, env.row, env.match_number, env.match_status
        env.view, env.row, env.match_number, env.match_status = MatchView(start, labels, end), end, None, "TIMEOUT"
        try:
            return [matcher.key + tuple(measure(env) for measure in self.layout.measures)]
        finally:
            env.view, env.row, env.match_number, env.match_status = saved

    def unmatched(self, matcher, position: int) -> list[tuple]:
        return [self._row(matcher, position, (None,) * len(self.layout.measures))]

    def _row(self, matcher, position: int, measures: tuple) -> tuple:
        layout = self.layout
        env = matcher.env
        values = tuple(env.value(column, position) for column in layout.row_columns)
        return matcher.key + values[: layout.order_count] + measures + values[layout.order_count :]
