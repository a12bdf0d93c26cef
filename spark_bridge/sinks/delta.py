"""``DeltaSink``: alerts appended to a Delta table, exactly once across restarts, through Delta's own idempotent writes.

Each micro-batch is one Delta commit that also records an application transaction (``txn`` action:
``appId`` = the stream's id for this table, ``version`` = the micro-batch id), the mechanism Spark's
``txnAppId``/``txnVersion`` writer options use. Before writing, the sink reads the table's last recorded
version for its id: a micro-batch at or below it was committed before a crash (``kill -9`` after the commit,
before the stream noted the delivery) and is skipped. The commit and the record of it are one atomic step,
so no window lets a batch land twice or not at all. The id is made once per checkpoint and kept beside it
(``kafka.stable_transactional_id``), so a restarted stream continues the same sequence; a new checkpoint is a
new writer whose batch ids start again at 0.

The table: the ``ALERT_COLUMNS`` schema plus ``emit_date`` (the UTC date of ``emit_time``), partitioned by
``emit_date`` so that "today's alerts" reads one folder. Written with ``deltalake`` (delta-rs, no JVM): the
sink runs in the delivery lanes of the driver, as the SQL and webhook sinks do.

``write_once(path, table, app_id, version)`` is the same write for any Arrow table (``cep run --output
delta:PATH`` writes a backtest's matches with it).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Sequence
from typing import Any

from cep.spark_bridge.sinks.alerts import ALERT_COLUMNS
from cep.spark_bridge.sinks.base import AlertSink, Delivery, with_retries
from cep.spark_bridge.sinks.kafka import stable_transactional_id
from cep.spark_bridge.sinks.safe_text import url_key
from cep.spark_bridge.spark.delta import delta_path

# Imported inside functions: pyarrow and deltalake (the "delta" part of the dev extra; only this sink needs it).

PARTITION_COLUMN = "emit_date"


def deltalake_module():
    try:
        import deltalake
    except ImportError as exc:
        raise RuntimeError("Delta tables need the deltalake package: pip install deltalake") from exc
    return deltalake


def committed_version(path: str, app_id: str) -> int | None:
    """The last version recorded for ``app_id`` in the Delta table at ``path`` (None: no table, or never)."""
    deltalake = deltalake_module()
    if not deltalake.DeltaTable.is_deltatable(path):
        return None
    return deltalake.DeltaTable(path).transaction_version(app_id)


def write_once(path: str, table: Any, app_id: str, version: int, *, partition_by: Sequence[str] | None = None) -> bool:
    """Append ``table`` (Arrow) to the Delta table at ``path`` (created when missing) in one commit that records
    ``(app_id, version)``; nothing when that version (or a later one) is recorded already. True if written."""
    deltalake = deltalake_module()
    done = committed_version(path, app_id)
    if done is not None and done >= version:
        return False
    commit = deltalake.CommitProperties(app_transactions=[deltalake.Transaction(app_id=app_id, version=version)])
    deltalake.write_deltalake(
        path, table, mode="append", partition_by=list(partition_by) if partition_by else None, commit_properties=commit
    )
    return True


def alert_arrow_schema():
    import pyarrow as pa

    kinds = {"string": pa.string(), "timestamp": pa.timestamp("us"), "boolean": pa.bool_()}
    return pa.schema([(name, kinds[kind]) for name, kind in ALERT_COLUMNS] + [(PARTITION_COLUMN, pa.date32())])


def alerts_table(alerts: Sequence[dict]):
    """The alerts (dicts of ``ALERT_NAMES``) as an Arrow table of the sink's schema (timestamps naive UTC)."""
    import pyarrow as pa

    schema = alert_arrow_schema()
    columns: dict[str, list] = {name: [] for name in schema.names}
    for alert in alerts:
        for name, _kind in ALERT_COLUMNS:
            columns[name].append(_naive(alert.get(name)))
        emitted = columns["emit_time"][-1]
        columns[PARTITION_COLUMN].append(emitted.date() if emitted is not None else None)
    return pa.table(columns, schema=schema)


def _naive(value: Any) -> Any:
    if hasattr(value, "to_pydatetime"):
        value = value.to_pydatetime()
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    return value


class DeltaSink(AlertSink):
    """Every alert into a Delta table, one commit per micro-batch, exactly once (module docstring)."""

    name = "delta"
    include_suppressed = True  # a table of record: suppressed alerts too, with their flag, as the file sink keeps

    def __init__(self, path: str, *, app_id: str | None = None, state_dir: str | None = None) -> None:
        self.path = delta_path(path)
        deltalake_module()
        if app_id is None:
            if state_dir is None:
                raise ValueError(f"delta:{self.path}: the Delta sink needs an app id or a state_dir to keep one in")
            app_id = stable_transactional_id(state_dir, self.describe(), kind="delta")
        self.app_id = app_id

    def describe(self) -> str:
        return f"delta:{self.path}"

    def key(self) -> str:
        return url_key("delta", self.path)

    def deliver(self, alerts: Sequence[dict], batch_id: int) -> Delivery:
        report = Delivery(self.name)
        table = alerts_table(alerts)
        written: list[bool] = []

        def write() -> None:
            written.append(write_once(self.path, table, self.app_id, batch_id, partition_by=[PARTITION_COLUMN]))

        report.retries = with_retries(self, write, _transient, batch_id)
        if written and written[-1]:
            report.delivered = Counter(str(a.get("rule_id")) for a in alerts)
        return report


def _transient(exc: BaseException) -> bool:
    """A concurrent commit to the same table (another writer won the race for the next version): try again."""
    text = str(exc).lower()
    return "conflict" in type(exc).__name__.lower() or ("commit" in text and "conflict" in text)
