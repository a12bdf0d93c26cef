"""``FileSink``: every alert, suppressed ones too, through Spark's exactly-once file sink."""

from __future__ import annotations

import datetime as _dt
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cep.spark_bridge.sinks.alerts import FILE_FORMATS, alert_schema

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession


@dataclass
class FileSink:
    """Spark's file sink (exactly once with a checkpoint): JSON lines, Parquet or CSV files under ``path``."""

    path: str
    format: str = "json"

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
        jvm = spark._jvm
        sinks = jvm.org.apache.spark.sql.execution.streaming.sinks
        log = sinks.FileStreamSinkLog(
            sinks.FileStreamSinkLog.VERSION(),
            spark._jsparkSession,
            os.path.join(self.path, "_spark_metadata"),
            jvm.scala.Option.apply(None),
        )
        status = jvm.java.lang.Class.forName("org.apache.spark.sql.execution.streaming.sinks.SinkFileStatus")
        log.add(batch_id, jvm.java.lang.reflect.Array.newInstance(status, 0))  # False: recorded before

    def as_stored(self, alerts: list[dict]) -> list[dict]:
        """``alerts`` (collected from the DataFrame ``commit`` writes) as a read of the files gives them back:
        JSON and CSV keep a timestamp to the millisecond (Spark's default ``timestampFormat``), Parquet to
        the microsecond. So the sinks fed from the same micro-batch get what the output holds."""
        if self.format == "parquet":
            return alerts
        for alert in alerts:
            for name, value in alert.items():
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
