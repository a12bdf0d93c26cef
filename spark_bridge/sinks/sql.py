"""SQL alert sinks: SQLite (stdlib ``sqlite3``) and PostgreSQL (``psycopg`` 3, or ``psycopg2``).

Both write a micro-batch in one transaction of ``INSERT ... ON CONFLICT (match_id) DO UPDATE``: one
row per match however often a micro-batch is delivered. A locked database (SQLite's busy timeout, or
PostgreSQL's ``lock_timeout``, per attempt) and a lost connection are retried within the sink's
``RetryPolicy``; what still fails is raised as a ``CepSinkError`` naming the sink. Never dead-lettered:
see ``cep.spark_bridge.sinks.webhook``.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import sqlite3
import time
from collections.abc import Callable, Sequence

from cep.spark_bridge.sinks.base import AlertSink, Delivery, RetryPolicy, with_retries
from cep.spark_bridge.sinks.safe_text import file_safe, scrub, url_key, visible

# Imported inside functions: psycopg or psycopg2 (optional: only the PostgreSQL sink needs a driver).

__all__ = ["PostgresSink", "SQLiteSink"]

DEFAULT_RETRY = RetryPolicy()  # frozen: one default shared by every sink, as a default argument would be
_TABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$")


def _check_table(table: str) -> str:
    if not _TABLE_NAME.match(table):
        raise ValueError(f"table name {table!r}: use letters, digits and underscores (optionally schema.table)")
    return table


def _sql_row(alert: dict, batch_id: int) -> tuple:
    def ts(value):
        if value is None:
            return None
        if hasattr(value, "to_pydatetime"):
            value = value.to_pydatetime()
        return value

    return (
        alert["match_id"],
        alert["rule_id"],
        alert["rule_version"],
        alert["match_status"],
        alert["partition_key"],
        ts(alert["first_event_time"]),
        ts(alert["last_event_time"]),
        alert["measures"],
        ts(alert["emit_time"]),
        bool(alert.get("suppressed")),
        int(batch_id),
    )


_SQL_COLUMNS = (
    "match_id",
    "rule_id",
    "rule_version",
    "match_status",
    "partition_key",
    "first_event_time",
    "last_event_time",
    "measures",
    "emit_time",
    "suppressed",
    "batch_id",
)


class SQLiteSink(AlertSink):
    """Upsert alerts into a SQLite table keyed by ``match_id`` (times as ISO 8601 UTC text)."""

    name = "sqlite"

    def __init__(
        self,
        path: str,
        *,
        table: str = "alerts",
        include_suppressed: bool = False,
        timeout: float = 5.0,
        retry: RetryPolicy = DEFAULT_RETRY,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path
        self.table = _check_table(table)
        self.include_suppressed = include_suppressed
        self.timeout = timeout  # SQLite's own busy wait per attempt, before "database is locked"
        self.retry, self.sleep, self.clock = retry, sleep, clock

    def describe(self) -> str:
        return f"sqlite {visible(self.path)}"

    def key(self) -> str:
        digest = url_key("", os.path.abspath(self.path)).rsplit("-", 1)[-1]
        return f"sqlite-{file_safe(os.path.basename(self.path), 40)}-{digest}"

    def connect(self) -> sqlite3.Connection:
        parent = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(parent, exist_ok=True)
        return sqlite3.connect(self.path, timeout=self.timeout)

    def create(self, connection) -> None:
        connection.execute(
            f"CREATE TABLE IF NOT EXISTS {self.table} ("
            "match_id TEXT PRIMARY KEY, rule_id TEXT NOT NULL, rule_version TEXT NOT NULL, match_status TEXT, "
            "partition_key TEXT, first_event_time TEXT, last_event_time TEXT, measures TEXT, emit_time TEXT, "
            "suppressed INTEGER, batch_id INTEGER)"
        )

    def deliver(self, alerts: Sequence[dict], batch_id: int) -> Delivery:
        report = Delivery(self.name)
        rows = [_sql_row(a, batch_id) for a in alerts]
        rows = [tuple(v.isoformat(sep=" ") if isinstance(v, _dt.datetime) else v for v in row) for row in rows]
        names = ", ".join(_SQL_COLUMNS)
        updates = ", ".join(f"{c} = excluded.{c}" for c in _SQL_COLUMNS[1:])
        statement = (
            f"INSERT INTO {self.table} ({names}) VALUES ({', '.join('?' * len(_SQL_COLUMNS))}) "
            f"ON CONFLICT(match_id) DO UPDATE SET {updates}"
        )

        def write() -> None:
            connection = self.connect()
            try:
                with connection:  # one transaction per micro-batch
                    self.create(connection)
                    connection.executemany(statement, rows)
            finally:
                connection.close()

        report.retries = with_retries(self, write, _sqlite_transient, batch_id)
        for alert in alerts:
            report.delivered[alert["rule_id"]] += 1
        return report


def _sqlite_transient(exc: BaseException) -> bool:
    """Another connection holds the lock (SQLITE_BUSY / SQLITE_LOCKED): worth waiting for."""
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    name = getattr(exc, "sqlite_errorname", "") or ""
    return name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in str(exc) or "busy" in str(exc)


def postgres_description(conninfo: str, parse) -> tuple[str, list[str]]:
    """(how the sink is shown, the secrets to scrub from errors) for a libpq connection string in any
    form, read by libpq's own parser (``parse``): a URL (password in the user info, with or without
    ``@`` or ``%40`` in it, or as ``?password=``) or ``key=value`` pairs. ``ValueError`` if libpq cannot
    read it (its message can quote the text, so it is not passed on)."""
    try:
        params = dict(parse(conninfo))
    except Exception:  # noqa: BLE001 - psycopg.ProgrammingError or psycopg2.ProgrammingError
        raise ValueError(
            "the PostgreSQL connection string cannot be read by libpq (a postgresql:// URL or "
            "'host=... dbname=...' pairs; its text is not shown: it may hold a password)"
        ) from None
    secrets = [params.get("password") or "", params.get("sslpassword") or ""]
    host = params.get("host") or params.get("hostaddr") or "localhost"
    if "://" in conninfo:
        head = conninfo.split("://", 1)[1].split("?", 1)[0]
        if "@" in head:  # everything up to the last @ is user info, whatever libpq made of it
            userinfo = head[: head.rfind("@")]
            password = userinfo.split(":", 1)[1] if ":" in userinfo else ""
            # An unencoded @ in it makes libpq read the rest as part of the host, which errors quote.
            pieces = password.split("@")
            secrets += [userinfo, password] + [
                tail for tail in ("@".join(pieces[i:]) for i in range(1, len(pieces))) if len(tail) >= 3
            ]
            host = host.rsplit("@", 1)[-1]
    user = params.get("user")
    port = params.get("port")
    label = (
        f"postgres {user + '@' if user else ''}{host}{':' + port if port else ''}/{params.get('dbname') or user or ''}"
    )
    return visible(label), [s for s in secrets if s]


def _postgres_driver():
    try:
        import psycopg  # type: ignore[import-not-found]

        return "psycopg", psycopg
    except ImportError:
        pass
    try:
        import psycopg2  # type: ignore[import-not-found]

        return "psycopg2", psycopg2
    except ImportError:
        return None, None


def _conninfo_parser(kind: str, module):
    if kind == "psycopg":
        from psycopg.conninfo import conninfo_to_dict

        return conninfo_to_dict
    from psycopg2.extensions import parse_dsn

    return parse_dsn


class PostgresSink(AlertSink):
    """Upsert alerts into a PostgreSQL table keyed by ``match_id`` (measures as JSONB)."""

    name = "postgres"

    def __init__(
        self,
        url: str,
        *,
        table: str = "alerts",
        include_suppressed: bool = False,
        connect_timeout: int = 10,
        lock_timeout: float = 5.0,
        retry: RetryPolicy = DEFAULT_RETRY,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        kind, module = _postgres_driver()
        if module is None:
            raise RuntimeError(
                "the postgres sink needs a PostgreSQL driver for Python, and neither psycopg nor psycopg2 is "
                "installed: pip install 'psycopg[binary]'"
            )
        self.url = url
        self.label, self._secrets = postgres_description(url, _conninfo_parser(kind, module))
        self.table = _check_table(table)
        self.include_suppressed = include_suppressed
        self.connect_timeout = connect_timeout
        self.lock_timeout = lock_timeout  # per attempt: without it an INSERT waits for a lock forever
        self.retry, self.sleep, self.clock = retry, sleep, clock
        self._kind, self._module = kind, module

    def describe(self) -> str:
        return self.label  # host, port, database and user: never a password

    def key(self) -> str:
        host = self.label.split("@")[-1].split("/")[0].split(":")[0]
        return f"postgres-{file_safe(host, 40)}-{url_key('', self.url).rsplit('-', 1)[-1]}"

    def redact(self, text: str) -> str:
        return scrub(text, self._secrets + [self.url])

    def connect(self):
        return self._module.connect(self.url, connect_timeout=self.connect_timeout)

    def _transient(self, exc: BaseException) -> bool:
        """A lock not granted in time, a lost connection, a deadlock or serialization failure: retry."""
        code = getattr(exc, "sqlstate", None) or getattr(exc, "pgcode", None)
        return isinstance(exc, self._module.OperationalError) or code in ("40001", "40P01", "55P03")

    def deliver(self, alerts: Sequence[dict], batch_id: int) -> Delivery:
        report = Delivery(self.name)
        names = ", ".join(_SQL_COLUMNS)
        updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in _SQL_COLUMNS[1:])
        values = ", ".join(["%s"] * 7 + ["%s::jsonb"] + ["%s"] * 3)
        statement = (
            f"INSERT INTO {self.table} ({names}) VALUES ({values}) ON CONFLICT (match_id) DO UPDATE SET {updates}"
        )
        rows = [_sql_row(a, batch_id) for a in alerts]

        def write() -> None:
            connection = self.connect()
            try:
                with connection.cursor() as cursor:
                    cursor.execute(f"SET LOCAL lock_timeout = {int(self.lock_timeout * 1000)}")
                    cursor.execute(
                        f"CREATE TABLE IF NOT EXISTS {self.table} ("
                        "match_id TEXT PRIMARY KEY, rule_id TEXT NOT NULL, rule_version TEXT NOT NULL, "
                        "match_status TEXT, "
                        "partition_key TEXT, first_event_time TIMESTAMP, last_event_time TIMESTAMP, measures JSONB, "
                        "emit_time TIMESTAMP, suppressed BOOLEAN, batch_id BIGINT)"
                    )
                    cursor.executemany(statement, rows)
                connection.commit()
            except Exception:
                connection.rollback()
                raise
            finally:
                connection.close()

        report.retries = with_retries(self, write, self._transient, batch_id)
        for alert in alerts:
            report.delivered[alert["rule_id"]] += 1
        return report
