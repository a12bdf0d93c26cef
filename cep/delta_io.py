"""Delta tables for ``cep run``: ``--input delta:PATH[@vN|@TIMESTAMP]`` read by the python engine, the columns a
statement reads, and ``--output delta:PATH`` written once.

The python engine reads a Delta table with ``deltalake`` (delta-rs: no JVM), the Spark engine with Delta's own
connector (``spark_bridge.spark.delta``); both read the same snapshot (``DeltaSnapshot``) and only the columns
``columns_read`` names, so both match the same rows. Time travel: ``delta:PATH@v12`` (version 12),
``delta:PATH@2026-01-05T00:00:00`` (the latest version committed at or before that instant, UTC), or
``--delta-version``/``--delta-timestamp`` for every Delta input that names none.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cep.grammar.columns import ColumnNames
from cep.spark_bridge.sinks.delta import deltalake_module, write_once
from cep.spark_bridge.spark.delta import (
    CepDeltaError,
    DeltaSnapshot,
    as_of,
    check_snapshot,
    delta_path,
    is_delta,
    table_versions,
)

if TYPE_CHECKING:  # pragma: no cover
    from cep.statement import SqlStatement

# Imported inside functions: deltalake and pyarrow (only a Delta input or output needs them).

_AT_VERSION = re.compile(r"v(\d+)")
_AT_TIME = re.compile(r"\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?")
# A star in a select list (SELECT *, t.*, , *): the statement may show every column of what it reads.
_SELECT_STAR = re.compile(r"(?:\bSELECT\s+(?:ALL\s+|DISTINCT\s+)?|,\s*|\.)\*", re.I)
_WORD = re.compile(r"`((?:[^`]|``)+)`|\"([^\"]+)\"|([A-Za-z_][A-Za-z0-9_]*)")


def snapshot_of(spec: str, *, version: int | None = None, timestamp: str | None = None) -> DeltaSnapshot:
    """``delta:PATH``, ``delta:PATH@v3`` or ``delta:PATH@2026-01-05T00:00:00`` as a snapshot; ``version`` and
    ``timestamp`` (the command's flags) apply when the spec names neither."""
    path = delta_path(spec)
    head, at, tail = path.rpartition("@")
    if at and _AT_VERSION.fullmatch(tail):
        return DeltaSnapshot(head, version=int(tail[1:]))
    if at and _AT_TIME.fullmatch(tail):
        return DeltaSnapshot(head, timestamp=tail)
    return DeltaSnapshot(path, version=version, timestamp=timestamp)


def read_delta_arrow(snapshot: DeltaSnapshot, columns: Sequence[str] | None = None) -> Any:
    """The snapshot as an Arrow table (``columns``: only those, matched without case, read from their Parquet
    columns alone; all when none of the table's columns is among them)."""
    check_snapshot(snapshot)
    deltalake = deltalake_module()
    try:
        table = deltalake.DeltaTable(snapshot.path, version=snapshot.version)
        if snapshot.timestamp is not None:
            table.load_as_version(as_of(snapshot.timestamp))
        names = [field.name for field in table.schema().fields]
        return table.to_pyarrow_table(columns=kept_columns(names, columns))
    except CepDeltaError:
        raise
    except Exception as exc:  # noqa: BLE001 - delta-rs raises several types; its first line says what
        line = next((s.strip() for s in str(exc).splitlines() if s.strip()), type(exc).__name__)
        raise CepDeltaError(f"cannot read the {snapshot.describe()}: {line}") from None


def kept_columns(names: Sequence[str], columns: Sequence[str] | None) -> list[str] | None:
    """``names`` (a table's columns, in order) that ``columns`` holds, without case (None: read them all)."""
    if columns is None:
        return None
    return ColumnNames(names).among(columns) or None


def columns_read(statement: SqlStatement) -> list[str] | None:
    """The names that ``statement`` may read as columns of its input (None: every column). A name counts when
    it appears anywhere in the statement's text (a word, or a quoted name): over-keeping is harmless, and
    a word that is a column in one place and a keyword or alias in another only costs its read. Nothing is
    pruned when the output can show every input column: ALL ROWS PER MATCH, or a star in a select list other
    than a MATCH_RECOGNIZE's own (whose ONE ROW PER MATCH output is its PARTITION BY and MEASURES) or one
    inside its input."""
    if any(clause.statement.match.rows_per_match.mode != "ONE" for clause in statement.clauses):
        return None
    text = statement.text
    inputs = [clause.relation for clause in statement.clauses]
    for star in _SELECT_STAR.finditer(text):
        of_a_clause = any(
            re.fullmatch(r"\s*FROM\s*", text[star.end() : clause.start], re.I) for clause in statement.clauses
        )  # SELECT * FROM t MATCH_RECOGNIZE: the clause's output
        if not of_a_clause and not any(start <= star.start() < end for start, end in inputs):
            return None
    return sorted(
        {next(g for g in found.groups() if g is not None).replace("``", "`") for found in _WORD.finditer(text)}
    )


def input_identity(spec: str) -> str:
    """What a backtest read from one input, for its output's application id: a Delta table's resolved version
    (the latest when none is named: a table appended to since is another input), a file's size and time."""
    if is_delta(spec):
        snapshot = snapshot_of(spec)
        if snapshot.version is None and snapshot.timestamp is None:
            versions = table_versions(snapshot.path) or [-1]
            return f"delta:{snapshot.path}@v{versions[-1]}"
        return spec
    try:
        found = os.stat(spec)
    except OSError:
        return spec
    return f"{spec}@{found.st_size}:{found.st_mtime_ns}"


def app_id_of(statement_text: str, inputs: Sequence[str]) -> str:
    """The application id of a backtest's output: the same statement over the same inputs (and versions) is
    the same writer, so running it again appends nothing."""
    digest = hashlib.sha256("\0".join([statement_text, *inputs]).encode("utf-8")).hexdigest()[:20]
    return f"cep-run-{digest}"


def write_matches(table: Any, spec: str, app_id: str) -> bool:
    """``cep run --output delta:PATH``: the matches (Arrow) appended once under ``app_id`` (``write_once``)."""
    return write_once(delta_path(spec), table, app_id, 0)


__all__ = [
    "snapshot_of",
    "read_delta_arrow",
    "columns_read",
    "kept_columns",
    "input_identity",
    "app_id_of",
    "write_matches",
    "is_delta",
    "CepDeltaError",
]
