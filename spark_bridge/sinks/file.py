"""``FileSink``: every alert, suppressed ones too, through Spark's exactly-once file sink."""

from __future__ import annotations

import datetime as _dt
import json
import os
import uuid
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cep.spark_bridge.sinks.alerts import ALERT_COLUMNS, FILE_FORMATS, alert_schema
from cep.spark_bridge.sinks.base import atomic_write
from cep.spark_bridge.spark.session import on_local_disk

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

# How long Spark's file sink keeps its log's entries that a newer compaction holds (those before the batches
# ``spark.sql.streaming.minBatchesToRetain`` keeps), 10 minutes by default: on an eventually consistent store (S3) a
# reader may not see the newest compaction yet. The sink lists its whole log folder at every commit to find them, so
# on a stream of two micro-batches a second the folder holds 1,200 entries and their checksums, and every commit of
# every sink lists them, a cost that grows for the first ten minutes of a stream. On a local disk a reader reads the
# newest compaction and the entries after it, never one before it, so a stream whose file sinks are all local deletes
# them at once (``local_log_settings``).
LOG_CLEANUP_CONF = "spark.sql.streaming.fileSink.log.cleanupDelay"
LOCAL_LOG_CLEANUP_MS = 0


@dataclass(frozen=True)
class _SessionLog:
    """A sink's ``FileStreamSinkLog`` in one JVM session, and the JVM objects a commit of a file needs, looked up
    once: each name of a Java package or class that Py4J resolves is a round trip, and the local file system's
    Hadoop configuration, which ``getFileSystem`` needs, is a copy of the session's whole configuration."""

    log: Any  # Spark's FileStreamSinkLog of the sink's ``_spark_metadata``
    nothing: Any  # an empty SinkFileStatus[]: the entry of a batch without a file
    file_system: Any  # the Hadoop file system of local paths, as Spark's sink gets it from the session
    path_class: Any  # org.apache.hadoop.fs.Path
    status_class: Any  # SinkFileStatus (its companion's ``apply`` makes one of a Hadoop FileStatus)
    status_type: Any  # SinkFileStatus's java.lang.Class, for arrays of it
    array_class: Any  # java.lang.reflect.Array

    @classmethod
    def of(cls, spark: SparkSession, path: str) -> _SessionLog:
        jvm = spark._jvm
        sinks = jvm.org.apache.spark.sql.execution.streaming.sinks
        status = jvm.java.lang.Class.forName("org.apache.spark.sql.execution.streaming.sinks.SinkFileStatus")
        log = sinks.FileStreamSinkLog(
            sinks.FileStreamSinkLog.VERSION(),
            spark._jsparkSession,
            os.path.join(path, "_spark_metadata"),
            jvm.scala.Option.apply(None),
        )
        path_class = jvm.org.apache.hadoop.fs.Path
        file_system = path_class("file:///").getFileSystem(spark._jsparkSession.sessionState().newHadoopConf())
        array_class = jvm.java.lang.reflect.Array
        nothing = array_class.newInstance(status, 0)
        return cls(log, nothing, file_system, path_class, sinks.SinkFileStatus, status, array_class)

    def entries(self, uri: str) -> Any:
        """The log's entry for one file written whole at ``uri`` (``file:/dir/part-...``): its Hadoop status."""
        entry = self.status_class.apply(self.file_system.getFileStatus(self.path_class(uri)))
        entries = self.array_class.newInstance(self.status_type, 1)
        entries[0] = entry
        return entries


@dataclass
class FileSink:
    """Spark's file sink (exactly once with a checkpoint): JSON lines, Parquet or CSV files under ``path``."""

    path: str
    format: str = "json"
    # Spark's log of the committed files, and what ``commit_alerts`` needs to add to it, made once per JVM session
    # (``_SessionLog``), as Spark's own sink keeps its log: a new log object lists the whole log folder again
    _logs: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    _local: dict = field(default_factory=dict, init=False, repr=False, compare=False)  # ``is_local``, per session
    # One thread for ``commit_nothing_meanwhile``, kept: Py4J gives each Python thread a connection of its own
    _writer: ThreadPoolExecutor | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.format not in FILE_FORMATS:
            raise ValueError(f"file sink format must be one of {', '.join(FILE_FORMATS)}, not {self.format!r}")

    def prepare(self) -> None:
        """Create ``path/_spark_metadata`` before anything runs, so that a stream reading ``path`` knows
        from its first look that only committed files count."""
        os.makedirs(os.path.join(self.path, "_spark_metadata"), exist_ok=True)

    def start(
        self,
        df: DataFrame,
        *,
        checkpoint: str,
        trigger: str | None = None,
        available_now: bool = False,
        query_name: str | None = None,
    ):
        self.prepare()
        writer = df.writeStream.format(self.format).outputMode("append").option("path", self.path)
        writer = writer.option("checkpointLocation", checkpoint)
        if self.format == "csv":
            writer = writer.option("header", True)
        if query_name:
            writer = writer.queryName(query_name)
        if available_now:
            writer = writer.trigger(availableNow=True)
        elif trigger:
            writer = writer.trigger(processingTime=trigger)
        return writer.start()

    def commit(self, batch_id: int, df: DataFrame) -> None:
        """Write ``df`` as micro-batch ``batch_id`` of a query that hands its batches to ``foreachBatch``,
        with the guarantee of ``start``: this is Spark's own file sink (``FileStreamSink``, through the
        JVM), which writes the files, then records the batch in ``path/_spark_metadata``, and skips a
        batch id already recorded there. So a micro-batch re-run after a crash is written once, and
        several of these sinks fed from one ``foreachBatch`` each commit it once, whichever had
        committed it before the crash (``AlertStream`` writes alerts and bad rows so, from one query).
        """
        spark = df.sparkSession  # the session foreachBatch hands over
        jvm = spark._jvm
        formats = jvm.org.apache.spark.sql.execution.datasources
        file_format = {
            "json": formats.json.JsonFileFormat,
            "parquet": formats.parquet.ParquetFileFormat,
            "csv": formats.csv.CSVFileFormat,
        }[self.format]()
        options = {"header": "true"} if self.format == "csv" else {}
        sink = jvm.org.apache.spark.sql.execution.streaming.sinks.FileStreamSink(
            spark._jsparkSession, self.path, file_format, jvm.PythonUtils.toSeq([]), jvm.PythonUtils.toScalaMap(options)
        )
        sink.addBatch(batch_id, df._jdf)  # reads the log from disk: skips batch_id if committed

    def commit_nothing(self, batch_id: int, spark: SparkSession) -> None:
        """Record micro-batch ``batch_id`` in ``path/_spark_metadata`` with no file: a batch with nothing to
        write leaves no empty file behind, and the log still holds every batch id. Spark's sink log
        compacts itself every tenth batch from the entries of the batches before, and fails a compaction
        that misses one, so an id skipped here would fail a later micro-batch. Recorded once, as ``commit``."""
        session_log = self._log(spark)
        session_log.log.add(batch_id, session_log.nothing)  # False: recorded before

    def commit_nothing_meanwhile(self, batch_id: int, spark: SparkSession) -> Future:
        """``commit_nothing`` on a thread of this sink's, while the caller makes its other writes of the
        micro-batch (the log's write is the JVM's and the disk's, not Python's); ``result()`` waits for it and
        raises what it raised. Recorded once per batch id as ever, so a crash at any point leaves what
        ``commit_nothing`` leaves: the id recorded or not, and a run again records it."""
        if self._writer is None:
            self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cep-sink-log")
        return self._writer.submit(self.commit_nothing, batch_id, spark)

    def _log(self, spark: SparkSession) -> _SessionLog:
        """Spark's ``FileStreamSinkLog`` of ``path`` (it compacts itself every tenth batch, as for Spark's sink),
        with what a commit needs beside it (``_SessionLog``). ``foreachBatch`` hands a new Python object of the same
        JVM session every micro-batch: the JVM's identity of the session tells whether it is the one the log was
        made with."""
        jvm = spark._jvm
        key = jvm.System.identityHashCode(spark._jsparkSession)
        if key not in self._logs:
            self._logs.clear()  # a new session (a restart in this process): its own log object
            self._logs[key] = _SessionLog.of(spark, self.path)
        return self._logs[key]

    def is_local(self, spark: SparkSession) -> bool:
        """Is ``path`` on this machine's file system (a bare path is on Hadoop's default file system). Asked of
        every micro-batch (``writes_on_driver``), answered once per JVM session: the answer reads the session's
        default file system from a copy of its whole Hadoop configuration."""
        key = spark._jvm.System.identityHashCode(spark._jsparkSession)
        if key not in self._local:
            self._local.clear()
            self._local[key] = on_local_disk(spark, self.path)
        return self._local[key]

    def writes_on_driver(self, spark: SparkSession) -> bool:
        """Can ``commit_alerts`` write here without Spark: JSON lines, a local directory, timestamps in UTC (the
        session's zone is the one Spark's JSON writer writes them in)."""
        zone = spark.conf.get("spark.sql.session.timeZone", "UTC")
        return self.format == "json" and zone in _UTC_NAMES and self.is_local(spark)

    def commit_alerts(self, batch_id: int, alerts: Sequence[dict], spark: SparkSession) -> None:
        """``commit`` for alerts already on the driver (``writes_on_driver`` must hold): one file of JSON lines
        as Spark's JSON writer lays them out (fields in schema order, NULL fields left out, timestamps to the
        millisecond with ``Z``), written whole, then recorded in Spark's own log (``_spark_metadata``) by
        Spark's ``FileStreamSinkLog``, and skipped if that log holds ``batch_id`` already. No Spark job: the
        readers (Spark's file source, ``read``) see exactly what ``commit`` would have given them."""
        if self.has_batch(batch_id):
            return
        if not alerts:
            self.commit_nothing(batch_id, spark)
            return
        os.makedirs(self.path, exist_ok=True)
        name = os.path.join(self.path, f"part-00000-{uuid.uuid4()}-c000.json")
        atomic_write(name, "".join(_json_line(alert) + "\n" for alert in alerts))
        session_log = self._log(spark)
        session_log.log.add(batch_id, session_log.entries(f"file:{name}"))  # as Spark's sink names it: file:/dir/…

    def as_stored(self, alerts: list[dict]) -> list[dict]:
        """``alerts`` (collected from the DataFrame ``commit`` writes) as a read of the files gives them back:
        JSON and CSV keep a timestamp to the millisecond (Spark's default ``timestampFormat``), Parquet to
        the microsecond. So the sinks fed from the same micro-batch get what the output holds."""
        if self.format == "parquet":
            return alerts
        for alert in alerts:
            for name in _TIME_NAMES:
                value = alert.get(name)
                if isinstance(value, _dt.datetime) and value.microsecond % 1000:
                    alert[name] = value.replace(microsecond=value.microsecond - value.microsecond % 1000)
        return alerts

    def has_batch(self, batch_id: int) -> bool:
        """Did ``commit`` record micro-batch ``batch_id`` (``_spark_metadata/<id>``, or its compacted log)?"""
        log = os.path.join(self.path, "_spark_metadata", str(batch_id))
        return os.path.exists(log) or os.path.exists(f"{log}.compact")

    def _reader(self, reader):
        reader = reader.schema(alert_schema())
        if self.format == "csv":
            reader = reader.option("header", True)
        return reader.format(self.format)

    def read(self, spark: SparkSession) -> DataFrame:
        """Everything committed so far (through ``_spark_metadata``: no orphan files of a killed batch)."""
        return self._reader(spark.read).load(self.path)

    def read_stream(self, spark: SparkSession) -> DataFrame:
        """The committed alerts as a stream (what the two-query layout's delivery query read)."""
        return self._reader(spark.readStream).load(self.path)


def local_log_settings(spark: SparkSession, sinks: Sequence[FileSink]) -> dict[str, str]:
    """The settings for a query that writes ``sinks`` (``session.starting_with``): their logs delete at once what
    a newer compaction holds, when every one is on the local disk (``LOG_CLEANUP_CONF``)."""
    return {LOG_CLEANUP_CONF: str(LOCAL_LOG_CLEANUP_MS)} if all(sink.is_local(spark) for sink in sinks) else {}


_UTC_NAMES = ("UTC", "Z", "GMT", "Etc/UTC", "+00:00", "UTC+00:00")
_KINDS = tuple((name, kind, f'"{name}":') for name, kind in ALERT_COLUMNS)
_TIME_NAMES = tuple(name for name, kind in ALERT_COLUMNS if kind == "timestamp")  # an alert's only datetimes
_QUOTE = json.encoder.encode_basestring  # json.dumps(ensure_ascii=False) of a string, one call less per value


def _json_line(alert: dict) -> str:
    """One alert as Spark's JSON writer writes it (``ignoreNullFields``, ``yyyy-MM-dd'T'HH:mm:ss.SSSXXX`` in UTC)."""
    parts = []
    for name, kind, label in _KINDS:
        value = alert.get(name)
        if value is None:
            continue
        if kind == "timestamp":
            parts.append(f'{label}"{value.isoformat(timespec="milliseconds")}Z"')
        elif kind == "boolean":
            parts.append(label + ("true" if value else "false"))
        else:
            parts.append(label + _QUOTE(value))
    return "{" + ",".join(parts) + "}"
