"""Delta tables on Spark: a version of a table read through Delta's own connector, a table followed as a stream.

``DeltaSnapshot`` names what to read (a path, and a version or a timestamp for time travel); ``check_snapshot``
refuses, before any engine runs, a folder that is not a Delta table and a version the table does not have,
with the same sentence on both engines (it reads the ``_delta_log`` folder's listing, nothing else).
``read_delta`` reads it on Spark (``format("delta")`` with ``versionAsOf``/``timestampAsOf``), with the
``PushedFilter`` conditions the statement puts on every row it reads (``cep.delta_io.pushed_filters``) applied
in the read, so that Delta skips the files of the partitions they exclude; ``applicable`` keeps the same ones
on both engines;
``read_delta_stream`` follows it (Delta's streaming source, its options passed through as given:
``startingVersion``, ``maxFilesPerTrigger``, ``ignoreChanges``, ...). The connector's jars come from
``delta_connector`` (``get_spark(delta=True)``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import operator
import os
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cep.grammar.columns import ColumnNames
from cep.spark_bridge.spark.files import text_times

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

# Imported inside functions: pyspark (optional: the "spark" extra).

PREFIX = "delta:"
LOG_FOLDER = "_delta_log"
_COMMIT = re.compile(r"(\d{20})\.json")


def is_delta(spec: str) -> bool:
    """``delta:PATH``: a Delta table (an input, an output or a sink)."""
    return spec.lower().startswith(PREFIX)


def delta_path(spec: str) -> str:
    return spec[len(PREFIX) :] if is_delta(spec) else spec


class CepDeltaError(ValueError):
    """A Delta input that cannot be read as asked: not a Delta table, no such version, a schema it cannot follow."""


@dataclasses.dataclass(frozen=True)
class DeltaSnapshot:
    """A Delta table as of one version: the latest (both None), ``version`` N, or the latest committed at or
    before ``timestamp`` (ISO 8601, UTC when it names no zone)."""

    path: str
    version: int | None = None
    timestamp: str | None = None

    def __post_init__(self) -> None:
        if self.version is not None and self.timestamp is not None:
            raise CepDeltaError("give a Delta version or a timestamp, not both")
        if self.version is not None and self.version < 0:
            raise CepDeltaError(f"a Delta version is 0 or more, not {self.version}")

    def describe(self) -> str:
        at = (
            f" at version {self.version}"
            if self.version is not None
            else f" as of {self.timestamp}"
            if self.timestamp is not None
            else ""
        )
        return f"Delta table {self.path}{at}"


def table_versions(path: str) -> list[int] | None:
    """The versions whose commits the table's log still holds (None: ``path`` is not a local Delta table)."""
    log = os.path.join(path, LOG_FOLDER)
    if not os.path.isdir(log):
        return None
    return sorted(int(found.group(1)) for name in os.listdir(log) if (found := _COMMIT.fullmatch(name)))


def check_snapshot(snapshot: DeltaSnapshot) -> None:
    """Refuse a local folder that is not a Delta table, or a version it does not hold, in one plain sentence.
    A remote table (``s3://...``) is left to the engine's reader, whose first line is reported."""
    path = snapshot.path
    if re.match(r"^[a-z][a-z0-9+.-]*://", path) and not path.startswith("file://"):
        return
    path = path.removeprefix("file://")
    if not os.path.exists(path):
        raise CepDeltaError(f"Delta table not found: {path}")
    versions = table_versions(path)
    if versions is None:
        hint = " (it holds Parquet files: read them with --input PATH)" if _has_parquet(path) else ""
        raise CepDeltaError(f"{path} is not a Delta table: it has no {LOG_FOLDER} folder{hint}")
    if not versions:
        raise CepDeltaError(f"{path} is not a Delta table yet: its {LOG_FOLDER} folder holds no commit")
    if snapshot.version is not None and snapshot.version not in versions:
        raise CepDeltaError(
            f"the Delta table {path} has no version {snapshot.version}: its log holds versions {_ranges(versions)}"
        )
    if snapshot.timestamp is not None:
        first = _commit_time(path, versions[0])
        if first is not None and as_of(snapshot.timestamp) < first:
            # Spark refuses such a read; delta-rs would give the first version: both say this instead
            raise CepDeltaError(
                f"cannot read the {snapshot.describe()}: its first commit in the log, version "
                f"{versions[0]}, is at {first.isoformat().replace('+00:00', 'Z')}"
            )


def as_of(timestamp: str) -> dt.datetime:
    """A time-travel instant as an aware UTC datetime (a time that names no zone is UTC)."""
    try:
        instant = dt.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        raise CepDeltaError(f"not a timestamp: {timestamp!r} (e.g. 2026-01-05T00:00:00, UTC)") from None
    return instant if instant.tzinfo else instant.replace(tzinfo=dt.UTC)


def _commit_time(path: str, version: int) -> dt.datetime | None:
    """When ``version`` was committed: its commitInfo's timestamp (what Delta's time travel compares with)."""
    try:
        with open(os.path.join(path, LOG_FOLDER, f"{version:020d}.json"), encoding="utf-8") as log:
            for line in log:
                info = json.loads(line).get("commitInfo") if line.strip() else None
                if info and "timestamp" in info:
                    return dt.datetime.fromtimestamp(info["timestamp"] / 1000, dt.UTC)
    except (OSError, ValueError):
        return None
    return None


def _has_parquet(path: str) -> bool:
    return os.path.isdir(path) and any(name.endswith(".parquet") for name in os.listdir(path))


def _ranges(versions: Sequence[int]) -> str:
    return (
        f"{versions[0]} to {versions[-1]}"
        if versions == list(range(versions[0], versions[-1] + 1))
        else ", ".join(map(str, versions))
    )


@dataclasses.dataclass(frozen=True)
class PushedFilter:
    """``column op value`` (or ``column IN values``): a condition that every row a statement reads from one
    input must meet to reach its result, so it may be applied in the read (``cep.delta_io.pushed_filters``)."""

    column: str
    op: str  # =, !=, <, <=, >, >= or in
    values: tuple[str | int, ...]  # one value, or the list of IN


_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def applicable(filters: Sequence[PushedFilter], kinds: Mapping[str, str]) -> list[PushedFilter]:
    """The filters that compare a column of the table with values of its own kind, their column names as the
    table spells them and a DATE's values as dates. ``kinds``: the table's columns -> ``string``, ``integer``,
    ``date`` or anything else (never pushed). A string compared with a number or a time, a float or a
    timestamp column: the engines' casts differ there, so such a condition stays in the statement alone
    (which applies every condition anyway: pushing is only about what is read)."""
    by_key: dict[str, list[str]] = {}
    for name in kinds:
        by_key.setdefault(name.lower(), []).append(name)
    kept = []
    for found in filters:
        names = by_key.get(found.column.lower(), [])
        if len(names) != 1:
            continue
        kind, values = kinds[names[0]], found.values
        if kind == "string" and all(isinstance(v, str) for v in values):
            kept.append(dataclasses.replace(found, column=names[0]))
        elif kind == "integer" and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            kept.append(dataclasses.replace(found, column=names[0]))
        elif kind == "date" and all(isinstance(v, str) and _ISO_DATE.fullmatch(v) for v in values):
            try:
                dates = tuple(dt.date.fromisoformat(str(v)) for v in values)
            except ValueError:
                continue
            kept.append(dataclasses.replace(found, column=names[0], values=dates))
    return kept


def spark_kind(data_type: Any) -> str:
    """A Spark column type as ``applicable`` names its kinds."""
    from pyspark.sql import types as T

    if isinstance(data_type, T.StringType):
        return "string"
    if isinstance(data_type, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        return "integer"
    return "date" if isinstance(data_type, T.DateType) else "other"


_COMPARE = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def condition(column: Any, found: PushedFilter) -> Any:
    """``found`` over ``column``: a Spark Column or a pyarrow field expression (both overload the operators
    and have ``isin``), so that both engines filter by the same code."""
    if found.op == "in":
        return column.isin(list(found.values))
    return _COMPARE[found.op](column, found.values[0])


def read_delta(
    spark: SparkSession,
    snapshot: DeltaSnapshot,
    columns: Sequence[str] | None = None,
    filters: Sequence[PushedFilter] = (),
) -> DataFrame:
    """The snapshot as a static DataFrame, through Delta's connector, its text columns of times typed as the
    python engine types them (``files.text_times``); ``columns``: only those (Delta reads only their Parquet
    columns); ``filters``: only the rows that meet them (``applicable`` ones; Delta skips
    the files whose partition values fail them). Raises ``CepDeltaError`` with Spark's first line when Spark
    refuses."""
    from pyspark.sql import functions as F

    check_snapshot(snapshot)
    reader = spark.read.format("delta")
    if snapshot.version is not None:
        reader = reader.option("versionAsOf", snapshot.version)
    if snapshot.timestamp is not None:
        reader = reader.option("timestampAsOf", snapshot.timestamp)
    try:
        df = reader.load(snapshot.path)
        kinds = {field.name: spark_kind(field.dataType) for field in df.schema.fields}
        for found in applicable(filters, kinds):
            df = df.where(condition(F.col("`" + found.column.replace("`", "``") + "`"), found))
        kept = list(df.columns) if columns is None else ColumnNames(df.columns).among(columns)
        return text_times(df.select(*kept) if kept else df)
    except Exception as exc:  # noqa: BLE001 - pyspark's errors have many types; the message is what matters
        raise CepDeltaError(f"cannot read the {snapshot.describe()}: {_first_line(exc)}") from None


def read_delta_stream(spark: SparkSession, path: str, options: Mapping[str, str] | None = None) -> DataFrame:
    """A streaming DataFrame of the rows appended to the Delta table at ``path`` (Delta's streaming source;
    ``options`` passed through)."""
    check_snapshot(DeltaSnapshot(path))
    reader = spark.readStream.format("delta")
    for key, value in (options or {}).items():
        reader = reader.option(key, value)
    try:
        return utc_timestamps(reader.load(path))
    except Exception as exc:  # noqa: BLE001 - as in read_delta
        raise CepDeltaError(f"cannot follow the Delta table {path}: {_first_line(exc)}") from None


def utc_timestamps(df: DataFrame) -> DataFrame:
    """TIMESTAMP_NTZ columns as TIMESTAMP: delta-rs, pandas and most non-Spark writers store naive times so,
    and a stream's watermark needs a TIMESTAMP. cep's sessions run in UTC, so the values read are unchanged
    (the naive time is taken as UTC, as every other input's naive times are)."""
    from pyspark.sql import types as T

    if not any(isinstance(f.dataType, T.TimestampNTZType) for f in df.schema.fields):
        return df
    return df.select(
        *[
            df[f.name].cast("timestamp").alias(f.name) if isinstance(f.dataType, T.TimestampNTZType) else df[f.name]
            for f in df.schema.fields
        ]
    )


def parse_delta_options(items: Sequence[str] | None) -> dict[str, str]:
    """``--delta-option KEY=VALUE`` items -> the options of Delta's streaming source, passed to it as given
    (Delta checks their names and values itself when the stream starts)."""
    options: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CepDeltaError(
                f"--delta-option: expected KEY=VALUE, e.g. startingVersion=5 or maxFilesPerTrigger=10; got {item!r}"
            )
        options[key.strip()] = value.strip()
    return options


def _first_line(exc: Any) -> str:
    text = str(exc).strip()
    return next((line.strip() for line in text.splitlines() if line.strip()), type(exc).__name__)


# What Delta's streaming source says when the table changed in a way it does not follow on its own, and what a
# user of `cep stream` does about it: (error classes or words of Delta's message, the sentence cep adds).
_STREAM_CHANGES = (
    (
        ("DELTA_STREAMING_INCOMPATIBLE_SCHEMA_CHANGE", "DELTA_STREAMING_CANNOT_CONTINUE_PROCESSING_POST_SCHEMA"),
        "a column was dropped or renamed, or its type changed (a non-additive schema change): Delta's streaming "
        "source stops there. To go on, give it a schema log and allow the change: --delta-option "
        "schemaTrackingLocation=CHECKPOINT/_delta_schema --delta-option allowSourceColumnDrop=true (or "
        "allowSourceColumnRename / allowSourceColumnTypeChange), or start a new checkpoint at a later "
        "--delta-option startingVersion=N",
    ),
    (
        ("DELTA_SCHEMA_CHANGED", "Detected schema change", "DELTA_STREAMING_RESTART_REQUIRED"),
        "its schema changed since the stream started (a column added, or a type changed): Delta's streaming "
        "source stops at the version that changed it. Run the same command again: it resumes from the "
        "checkpoint and reads the table with its new schema (a rule that reads a new column then sees NULL in "
        "the rows written before it)",
    ),
    (
        (
            "DELTA_SOURCE_TABLE_IGNORE_CHANGES",
            "DELTA_SOURCE_IGNORE_DELETE",
            "Detected a data update",
            "Detected deleted data",
        ),
        "a commit rewrote or removed rows it had already read (an overwrite, a DELETE, an UPDATE or a MERGE): "
        "Delta's streaming source follows appends only. --delta-option skipChangeCommits=true skips such "
        "commits (their new rows are not read), or start a new checkpoint at a later --delta-option "
        "startingVersion=N",
    ),
)


def stream_change_hint(message: str, path: str) -> str | None:
    """What a failed ``cep stream --input delta:PATH`` tells its user when Delta's streaming source stopped
    because the table changed under it (None: the failure is something else)."""
    for words, sentence in _STREAM_CHANGES:
        if any(word in message for word in words):
            return f"the Delta table {path} cannot be followed further: {sentence}"
    return None
