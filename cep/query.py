"""``Query``: a compiled MATCH_RECOGNIZE statement, runnable on Python data or on Spark."""

from __future__ import annotations

from typing import Any

from grammar import ast
from matcher.plan import CompiledQuery
from matcher.tables import from_rows, to_columns


class Query:
    """A checked, compiled query. ``run`` matches Python data; ``on_spark`` matches a Spark DataFrame."""

    def __init__(self, statement: ast.Statement, text: str, filename: str | None = None) -> None:
        self.statement = statement
        self.text = text
        self.filename = filename
        self.plan = CompiledQuery(statement)

    @property
    def name(self) -> str | None:
        return self.statement.name

    def run(self, data: Any):
        """Match a list of dicts, a pandas DataFrame or a pyarrow Table; the result has the same kind."""
        kind, columns = to_columns(data)
        names, rows = self.plan.run_columns(columns)
        return from_rows(kind, names, rows)

    def on_spark(self, df, *, watermark=None, session_timeout=None, late="output", **streaming):
        """Match a Spark DataFrame; returns a Spark DataFrame of the matches (Arrow-based, per partition).

        A streaming ``df`` gives a streaming DataFrame in append mode with a ``match_id`` column (and,
        with ``late="output"``, the late input rows): see ``spark_bridge.streaming.match_stream`` for
        ``watermark``, ``session_timeout``, ``late`` and the other keyword arguments
        (``max_pending_rows``, ``metrics_name``). They are ignored for a static ``df``.
        """
        if df.isStreaming:
            from spark_bridge.streaming import match_stream, statement_text

            return match_stream(
                self.plan,
                df,
                query_text=statement_text(self),
                watermark=watermark,
                session_timeout=session_timeout,
                late=late,
                **streaming,
            )
        from spark_bridge.batch import match_dataframe

        return match_dataframe(self.plan, df)

    def trace(self, data: Any, partition: dict | None = None):
        """Why did (or didn't) rows match? One record per condition test, live partial match, drop and match.

        Returns a pandas DataFrame with columns partition, row (position within the partition),
        order_key, event (tested / dropped / alive / match), match_start and detail.
        """
        import pandas as pd

        _, columns = to_columns(data)
        records = self.plan.trace_columns(columns, partition)
        frame = pd.DataFrame.from_records(records, columns=["partition", "row", "order_key", "event", "match_start", "detail"])
        return frame

    def output_columns(self, input_columns):
        """The output columns for an input with these columns.

        Given column names, returns the output names; given a mapping of column name to SQL type
        (``{'ts': 'TIMESTAMP', 'price': 'DOUBLE', ...}``), returns ``[(name, type), ...]``.
        """
        if isinstance(input_columns, dict):
            return self.plan.output_types(dict(input_columns))
        return self.plan.output_names(tuple(input_columns))

    def explain(self) -> str:
        from matcher.explain import explain

        return explain(self.plan)

    def __repr__(self) -> str:
        first = " ".join(self.text.split())
        return f"<cep.Query {self.name or ''}{' ' if self.name else ''}{first[:80]!r}>"
