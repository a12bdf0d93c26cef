"""The driver layout of ``cep stream`` (``--state driver``): the rules run in the query's ``foreachBatch``, on the
driver, with their state in files of the checkpoint, instead of in Spark's stateful operator.

Why (``docs/streaming.md``, "State on the driver"): on one machine (``local[*]``) the keyed layout pays, per
micro-batch, for a shuffle, the state store, and the round trip of every bucket's state through a Python worker,
and its watermark is the one from the micro-batch before, so an alert waits for one more micro-batch. Here the
micro-batch's rows come to the driver once (Arrow) and every rule runs there, on the same ``AlertStep`` the
keyed layout runs in Spark's workers, so the alerts, match ids, late rows and counts are the same.

Each micro-batch runs as Spark would run it and then its no-data micro-batch: first with Spark's watermark
(max event time of the micro-batches before, minus the delay), which decides which rows are late, exactly as in
the keyed layout; then, for the buckets whose timer it passed, with the watermark including this micro-batch,
which is Spark's next watermark. A row at or below that one that comes later is late in either layout, so
nothing changes but the time: an alert leaves in the micro-batch that reads the row that passes the watermark.

State, exactly once across ``kill -9`` (``StateFiles``): after micro-batch *n* runs, the buckets it changed go to
one segment file and a manifest ``<n>`` names every bucket's segment and timer, with the watermark; both are
written whole (fsync, rename) before the micro-batch's outputs. A micro-batch Spark runs again after a crash
starts from the newest manifest below its id, so it computes what it computed the first time. The two newest
manifests are kept (the newest may belong to a micro-batch still to be committed).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import uuid
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from cep.grammar.errors import CepSemanticError
from cep.spark_bridge.alerting.rule_set import FILE, KIND_BAD, KIND_MATCH, PKEY, SPEC
from cep.spark_bridge.alerting.worker import AlertStep, Explode, batch_on_driver
from cep.spark_bridge.engine import state_codec as codec
from cep.spark_bridge.engine.durations import parse_duration
from cep.spark_bridge.sinks.alerts import ALERT_COLUMNS, ALERT_NAMES, alert_schema, rows_to_alerts
from cep.spark_bridge.sinks.base import atomic_write
from cep.spark_bridge.spark.columns import EVENT_US, KIND, NULL_TIME, RAW, REJECT, STATS, quote
from cep.spark_bridge.spark.inputs import CLOCK_ROW, dead_letter_columns, with_watermark

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from pyspark.sql import Column, DataFrame

__all__ = [
    "DRIVER",
    "LAYOUTS",
    "SPARK",
    "DriverState",
    "LayoutChoice",
    "StateFiles",
    "check_layout",
    "choose_layout",
    "driver_input",
    "for_stream",
    "is_local_master",
    "layout_of",
    "spark_master",
]

# Imported inside functions: pyspark (optional, slow to import) and pandas.

SPARK = "spark"  # Spark's keyed state: applyInPandasWithState (alerting/query.py)
DRIVER = "driver"  # this module
LAYOUTS = (SPARK, DRIVER)
LAYOUT_NAMES = {SPARK: "Spark's keyed state", DRIVER: "rules on the driver"}  # as the start line says them
_OTHER_WAY = {SPARK: "--state spark for Spark's state store", DRIVER: "--state driver to run the rules on the driver"}
STATE_DIR = "driver-state"  # under the stream's checkpoint
STATE_FORMAT = "cep-driver-state-2"  # the manifest names its bucket count
# Read and written on: a checkpoint of this format keeps its V1_BUCKETS buckets (a key's bucket is its hash
# modulo the count, so the count is fixed by the checkpoint, as key_buckets is for the keyed layout).
V1_FORMAT, V1_BUCKETS = "cep-driver-state-1", 8
_PASSTHROUGH = (REJECT, RAW, FILE)
_BUCKET = "__cep_driver_bucket"
_MANIFESTS_KEPT = 2  # micro-batch n re-runs from n-1's state; n+1 starts only once n is committed
# Buckets of keys on the driver, for a new checkpoint. Each costs a call per micro-batch (and a second when the
# watermark moves past its timer), with a fixed cost per call (frames, the bucket's state decoded and encoded);
# with keys spread by hash, a micro-batch of a few thousand keys touches every bucket anyway, so more buckets
# would not write less state per micro-batch, only make more calls (bench/driver_state_scale.py,
# bench/driver_batch_cost.py).
DRIVER_BUCKETS = 1


def checkpoint_layout(checkpoint: str) -> str | None:
    """The layout whose state ``checkpoint`` holds (``SPARK`` or ``DRIVER``), or None for a new checkpoint: a
    restart without ``--state`` goes on as the stream was started."""
    for layout, path in (
        (DRIVER, os.path.join(checkpoint, STATE_DIR)),
        (SPARK, os.path.join(checkpoint, "match", "state")),
    ):
        if os.path.isdir(path) and os.listdir(path):
            return layout
    return None


# Spark's local masters: one JVM runs the driver and the executors (``local``, ``local[N]``, ``local[*]``, and the
# same with a count of task retries, ``local[N, F]``); ``local-cluster[...]`` starts separate executor processes.
_LOCAL_MASTER = re.compile(r"local(\[(\d+|\*)(\s*,\s*\d+)?\])?")


def is_local_master(master: str | None) -> bool:
    """Whether ``master`` (a Spark master URL) runs the whole stream in one process on one machine."""
    return master is not None and _LOCAL_MASTER.fullmatch(master.strip()) is not None


@dataclass(frozen=True)
class LayoutChoice:
    """The layout a stream runs in, why, and how to have the other one: the start line and ``status.json``."""

    layout: str  # SPARK or DRIVER
    reason: str
    other_way: str

    @property
    def why(self) -> str:
        return f"{self.reason}; {self.other_way}"

    def describe(self) -> str:
        return f"{LAYOUT_NAMES[self.layout]}: {self.why}"


def choose_layout(
    master: str | None, held: str | None, asked: str | None, *, checkpoint: str, key_buckets: int | None = None
) -> LayoutChoice:
    """The layout of a stream, from what is known before it starts: Spark's ``master`` URL, the layout whose state
    the checkpoint ``held`` (``checkpoint_layout``; None: a new checkpoint), the layout ``asked`` for (``--state``;
    None: not given) and the ``--key-buckets`` given (None: not given).

    A checkpoint keeps the layout it was started with: its rules' state is where that layout looks, and another
    layout would start with none (E0288). A new checkpoint takes the layout asked for, else the driver layout on a
    local master (one machine: about one micro-batch less latency, docs/streaming.md) and Spark's keyed state on any
    other (state spread over the executors, bounded per key by the state store). ``--key-buckets`` sets Spark's
    keyed state's buckets: given with the driver layout, it is refused (E0289) rather than silently unused."""
    if asked is not None and asked not in LAYOUTS:
        raise ValueError(f"state must be one of {', '.join(LAYOUTS)}, not {asked!r}")
    if held is not None and asked is not None and asked != held:
        raise layout_conflict(checkpoint, held, asked)
    if held is not None:
        choice = LayoutChoice(held, "the checkpoint's own layout", f"a new checkpoint for --state {_other(held)}")
    elif asked is not None:
        choice = LayoutChoice(asked, f"--state {asked}", _OTHER_WAY[_other(asked)])
    elif is_local_master(master):
        choice = LayoutChoice(DRIVER, f"a local master ({master})", _OTHER_WAY[SPARK])
    else:
        where = f"a cluster master ({master})" if master else "no Spark master known"
        choice = LayoutChoice(SPARK, where, _OTHER_WAY[DRIVER])
    if choice.layout == DRIVER and key_buckets is not None:
        raise CepSemanticError(
            f"--key-buckets {key_buckets} (or the count --expected-keys chooses) sets how Spark's keyed state "
            f"(--state spark) spreads its keys; this stream runs its rules on the driver ({choice.reason}), which "
            "keeps their state in buckets of its own: add --state spark (on a new checkpoint) to use Spark's keyed "
            "state, or drop the option",
            code="E0289",
        )
    return choice


def _other(layout: str) -> str:
    return DRIVER if layout == SPARK else SPARK


def spark_master(spark: Any) -> str | None:
    """The master URL of the Spark session ``spark`` (None without one)."""
    return None if spark is None else spark.conf.get("spark.master", None)


def layout_of(master: str | None, checkpoint: str, asked: str | None, key_buckets: int | None = None) -> LayoutChoice:
    """``choose_layout`` for the checkpoint directory ``checkpoint`` (the layout its state files say it holds)."""
    return choose_layout(master, checkpoint_layout(checkpoint), asked, checkpoint=checkpoint, key_buckets=key_buckets)


def layout_conflict(checkpoint: str, held: str, asked: str) -> CepSemanticError:
    """E0288: ``checkpoint`` keeps its rules' state in the ``held`` layout, and the ``asked`` one would not find it."""
    found = os.path.join(checkpoint, STATE_DIR) if held == DRIVER else os.path.join(checkpoint, "match", "state")
    return CepSemanticError(
        f"the checkpoint {checkpoint} keeps its rules' state in {found}, written with --state {held}; run it "
        f"with --state {held} (or without --state), or start a new checkpoint to use --state {asked} (the alerts so "
        "far stay in the old one; partial matches do not move between the two layouts)",
        code="E0288",
    )


def check_layout(checkpoint: str, layout: str) -> None:
    """Refuse a checkpoint written by the other layout: its state is not where this one looks, and starting
    with none would silently lose every partial match (and repeat or miss alerts)."""
    held = checkpoint_layout(checkpoint)
    if held is not None and held != layout:
        raise layout_conflict(checkpoint, held, layout)


def driver_input(
    df: DataFrame, time_column: str, watermark: Any = None, source_location: Column | None = None
) -> tuple[DataFrame, int, list[str]]:
    """What a micro-batch brings to the driver from a ``mark_bad_rows`` frame: the input columns, the event
    time in µs (``EVENT_US``) and the bad rows' columns; with the watermark delay (ms) and the rules' columns.
    The watermark is declared, as the keyed layout declares it, for its checks and its default delay; no
    operator here reads Spark's."""
    from pyspark.sql import functions as F

    columns = [c for c in df.columns if c not in (REJECT, RAW)]
    if time_column not in columns:
        raise ValueError(f"time column {time_column!r} is not in the input (columns: {', '.join(columns)})")
    df, delay_ms = with_watermark(df, time_column, watermark)
    location = F.input_file_name() if source_location is None else source_location
    df = df.select(
        *[F.col(quote(c)) for c in columns],
        F.coalesce(F.unix_micros(F.col(quote(time_column))), F.lit(NULL_TIME)).alias(EVENT_US),
        F.col(REJECT),
        F.col(RAW),
        F.when(F.col(REJECT).isNotNull(), location).alias(FILE),
    )
    return df, delay_ms, columns


def for_stream(stream: Any, source: DataFrame) -> tuple[DataFrame, DriverState]:
    """The query of an ``AlertStream`` (``stream``) in the driver layout: what its ``foreachBatch`` reads from
    the ``mark_bad_rows`` frame ``source``, and the ``DriverState`` that runs its rules there."""
    source, delay_ms, columns = driver_input(source, stream.time_column, stream.watermark, stream.source_location)
    driver = DriverState(
        stream.checkpoint,
        stream.store.directory,
        columns=columns,
        delay_ms=delay_ms,
        housekeeping_us=parse_duration(stream.housekeeping, what="housekeeping"),
    )
    return source, driver


@dataclass(frozen=True)
class Held:
    """The state of the rules at the end of a micro-batch: each bucket's bytes and Spark-style timeout (ms),
    the watermark the next micro-batch's rows are judged by, and the newest event time seen."""

    buckets: dict[tuple[str, int], bytes]
    timeouts: dict[tuple[str, int], int]
    watermark_ms: int = 0
    max_event_ms: int | None = None
    key_buckets: int = DRIVER_BUCKETS  # the count of buckets keys are hashed to


class _GroupState:
    """What ``AlertStep`` reads and sets of Spark's ``GroupState``, for one bucket on the driver."""

    def __init__(self, blob: bytes | None, watermark_ms: int) -> None:
        self.blob = blob
        self.watermark_ms = watermark_ms
        self.timeout_ms: int | None = None

    @property
    def exists(self) -> bool:
        return self.blob is not None

    @property
    def get(self) -> tuple[bytes]:
        return (self.blob,)

    def update(self, value: tuple[bytes]) -> None:
        self.blob = value[0]

    def remove(self) -> None:
        self.blob = None

    def setTimeoutTimestamp(self, ms: int) -> None:  # noqa: N802 - Spark's name
        self.timeout_ms = int(ms)

    def getCurrentWatermarkMs(self) -> int:  # noqa: N802 - Spark's name
        return self.watermark_ms


class StateFiles:
    """``<checkpoint>/driver-state/``: ``m-<batch>.json`` manifests and ``s-<batch>-<id>.bin`` segments.

    A manifest lists every bucket with state: the segment holding its bytes (offset, length) and its timer. A
    micro-batch writes one segment with the buckets it changed; the others keep pointing at older segments."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.places: dict[tuple[str, int], list] = {}  # bucket -> [segment, offset, length]

    def _manifests(self) -> list[int]:
        if not os.path.isdir(self.directory):
            return []
        return sorted(int(n[2:-5]) for n in os.listdir(self.directory) if n.startswith("m-") and n.endswith(".json"))

    def load_before(self, batch_id: int, new_buckets: int = DRIVER_BUCKETS) -> Held:
        """The state micro-batch ``batch_id`` starts from: the newest manifest below it (none: empty, its keys
        to be hashed to ``new_buckets`` buckets)."""
        older = [n for n in self._manifests() if n < batch_id]
        self.places = {}
        if not older:
            return Held({}, {}, key_buckets=new_buckets)
        with open(os.path.join(self.directory, f"m-{older[-1]:012d}.json"), encoding="utf-8") as fh:
            manifest = json.load(fh)
        if manifest.get("format") == V1_FORMAT:
            key_buckets = V1_BUCKETS
        elif manifest.get("format") == STATE_FORMAT:
            key_buckets = int(manifest["key_buckets"])
        else:
            raise CepSemanticError(
                f"{self.directory}: state format {manifest.get('format')!r} is not {STATE_FORMAT} or {V1_FORMAT} "
                "(written by another version of cep: run that version, or start a new checkpoint)",
                code="E0288",
            )
        buckets: dict[tuple[str, int], bytes] = {}
        timeouts: dict[tuple[str, int], int] = {}
        segments: dict[str, bytes] = {}
        for spec, bucket, segment, offset, length, timeout in manifest["buckets"]:
            if segment not in segments:
                with open(os.path.join(self.directory, segment), "rb") as fh:
                    segments[segment] = fh.read()
            buckets[(spec, bucket)] = segments[segment][offset : offset + length]
            timeouts[(spec, bucket)] = timeout
            self.places[(spec, bucket)] = [segment, offset, length]
        return Held(buckets, timeouts, manifest["watermark_ms"], manifest["max_event_ms"], key_buckets)

    def save(self, batch_id: int, held: Held, changed: Sequence[tuple[str, int]]) -> None:
        """Micro-batch ``batch_id``'s state: its changed buckets in a new segment, then the manifest (each whole)."""
        os.makedirs(self.directory, exist_ok=True)
        written = [key for key in changed if key in held.buckets]
        if written:
            segment = f"s-{batch_id:012d}-{uuid.uuid4().hex[:8]}.bin"
            offset = 0
            with open(os.path.join(self.directory, segment), "wb") as fh:
                for key in written:
                    blob = held.buckets[key]
                    fh.write(blob)
                    self.places[key] = [segment, offset, len(blob)]
                    offset += len(blob)
                fh.flush()
                os.fsync(fh.fileno())
        for key in [k for k in self.places if k not in held.buckets]:
            del self.places[key]
        rows = [
            [spec, bucket, *self.places[(spec, bucket)], held.timeouts[(spec, bucket)]] for spec, bucket in held.buckets
        ]
        manifest = {
            "format": STATE_FORMAT,
            "batch": batch_id,
            "key_buckets": held.key_buckets,
            "watermark_ms": held.watermark_ms,
            "max_event_ms": held.max_event_ms,
            "buckets": sorted(rows),
        }
        atomic_write(os.path.join(self.directory, f"m-{batch_id:012d}.json"), json.dumps(manifest))
        self._prune(batch_id)

    def _prune(self, batch_id: int) -> None:
        """Drop manifests older than the kept ones, and segments no kept manifest names."""
        kept = [n for n in self._manifests() if n <= batch_id][-_MANIFESTS_KEPT:]
        names: set[str] = set()
        for n in self._manifests():
            path = os.path.join(self.directory, f"m-{n:012d}.json")
            if n not in kept:
                os.remove(path)
                continue
            with open(path, encoding="utf-8") as fh:
                names.update(row[2] for row in json.load(fh)["buckets"])
        for name in os.listdir(self.directory):
            if name.startswith("s-") and name not in names:
                os.remove(os.path.join(self.directory, name))

    def size_bytes(self) -> int:
        return sum(os.path.getsize(os.path.join(self.directory, n)) for n in os.listdir(self.directory))


class DriverState:
    """The rules of a stream on the driver: ``run(batch_df, batch_id)`` is the micro-batch's rows in, and the
    keyed layout's operator output out (``alerting/query.match_rules(..., with_stats=True)``'s columns)."""

    def __init__(
        self,
        checkpoint: str,
        store_dir: str,
        *,
        columns: Sequence[str],
        delay_ms: int,
        housekeeping_us: int,
        buckets: int = DRIVER_BUCKETS,
    ) -> None:
        """``buckets``: for a new checkpoint; one with state keeps the count it was written with."""
        self.files = StateFiles(os.path.join(checkpoint, STATE_DIR))
        self.delay_ms = delay_ms
        self.new_buckets = self.buckets = buckets
        self.store_dir, self.housekeeping_us = store_dir, housekeeping_us
        carried = [*columns, EVENT_US, *_PASSTHROUGH]
        self.explode = Explode(store_dir, carried, REJECT, row_ids=True)
        self.step = self._step_for(buckets)
        self.held: Held | None = None
        self.done_through: int | None = None  # the micro-batch ``held`` is the state after

    def gauges(self) -> dict[str, Any]:
        """The state held now, as the status reports Spark's state operator: bytes and rows (buckets); and the
        watermark the timers last ran at. That is Spark's next one: a stateless query runs no no-data micro-batch
        to report it, so Spark's own progress shows it only with the next micro-batch that reads rows."""
        held = self.held or Held({}, {})
        state_bytes = sum(len(blob) for blob in held.buckets.values())
        gauges: dict[str, Any] = {
            "state_bytes": state_bytes,
            "state_memory_bytes": state_bytes,  # the driver holds those bytes themselves, between micro-batches
            "state_rows": len(held.buckets),
        }
        if held.watermark_ms > 0:  # in the form of Spark's progress (eventTime.watermark)
            moment = dt.datetime.fromtimestamp(held.watermark_ms / 1000, dt.UTC)
            gauges["watermark"] = moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{held.watermark_ms % 1000:03d}Z"
        return gauges

    def run(self, batch: DataFrame, batch_id: int) -> DriverRows:
        """The micro-batch on the driver; its state saved before anything is written; the operator's rows,
        split by kind for the writes of ``foreachBatch``, which need no Spark job for them (``DriverRows``)."""
        return DriverRows.of(self.run_frame(batch.toPandas(), batch_id))

    def run_frame(self, pdf: pd.DataFrame, batch_id: int) -> pd.DataFrame:
        """``run`` on the micro-batch's rows as pandas (``driver_input``'s columns); returns pandas."""
        import pandas as pd

        held = self.held if self.done_through == batch_id - 1 and self.held is not None else None
        if held is None:
            held = self.files.load_before(batch_id, self.new_buckets)
            if held.key_buckets != self.buckets:
                self.buckets, self.step = held.key_buckets, self._step_for(held.key_buckets)
        buckets, timeouts = dict(held.buckets), dict(held.timeouts)
        max_event_ms = held.max_event_ms
        times = pdf[EVENT_US].to_numpy() if len(pdf) else None
        if times is not None:
            known = times[times != NULL_TIME]
            if len(known):
                newest = int(known.max()) // 1000
                max_event_ms = newest if max_event_ms is None else max(max_event_ms, newest)
            pdf = pdf[pdf[REJECT].ne(CLOCK_ROW) | pdf[REJECT].isna()]
        after_ms = held.watermark_ms if max_event_ms is None else max(held.watermark_ms, max_event_ms - self.delay_ms)
        outputs: list[pd.DataFrame] = []
        changed: set[tuple[str, int]] = set()
        with batch_on_driver(batch_id):
            groups = self._groups(pdf)
            due = [key for key, ms in timeouts.items() if held.watermark_ms > ms and key not in groups]
            for key in [*groups, *due]:  # Spark's micro-batch: rows judged by the watermark before it
                outputs += self._call(key, groups.get(key), buckets, timeouts, held.watermark_ms)
                changed.add(key)
            if after_ms > held.watermark_ms:  # then its no-data micro-batch, at the watermark including it
                for key in [key for key, ms in timeouts.items() if after_ms > ms]:
                    outputs += self._call(key, None, buckets, timeouts, after_ms)
                    changed.add(key)
        # A bucket's bytes stay uncompressed between its calls of the micro-batch (its no-data call reads them
        # again at once); they are kept and saved as ``AlertStep``'s keyed layout writes them, compressed.
        buckets.update({key: codec.compressed(buckets[key]) for key in changed if key in buckets})
        held = Held(buckets, timeouts, after_ms, max_event_ms, self.buckets)
        self.files.save(batch_id, held, sorted(changed))
        self.held, self.done_through = held, batch_id  # only once saved: a failed save runs again from the files
        outputs = [o for o in outputs if len(o)]
        if not outputs:
            return pd.DataFrame({name: [] for name in operator_schema().names})
        return concat_frames(outputs)

    def _step_for(self, buckets: int) -> AlertStep:
        return AlertStep(
            self.store_dir, self.housekeeping_us, buckets, _PASSTHROUGH, late_rows=True, compress_state=False
        )

    def _groups(self, pdf: pd.DataFrame) -> dict[tuple[str, int], pd.DataFrame]:
        """The micro-batch's rows, once per partition spec (``Explode``), by (spec, bucket of partition keys)."""
        if not len(pdf):
            return {}
        exploded = [frame for frame in self.explode(iter([pdf])) if len(frame)]
        if not exploded:
            return {}
        frame = exploded[0]
        specs = frame[SPEC]
        if self.buckets == 1 and (specs.to_numpy() == specs.iat[0]).all():
            return {(str(specs.iat[0]), 0): frame}  # one partition spec in one bucket: the group is the frame
        codes = {key: zlib.crc32(key.encode()) % self.buckets for key in frame[PKEY].unique().tolist()}
        frame = frame.assign(**{_BUCKET: frame[PKEY].map(codes)})
        return {
            (str(spec), int(bucket)): part.drop(columns=[_BUCKET])
            for (spec, bucket), part in frame.groupby([SPEC, _BUCKET], sort=False)
        }

    def _call(self, key, rows, buckets: dict, timeouts: dict, watermark_ms: int) -> list:
        """One bucket's call, as Spark makes it; its new bytes and timer kept."""
        state = _GroupState(buckets.get(key), watermark_ms)
        frames = iter([rows]) if rows is not None else iter([])
        out = list(self.step((key[0], key[1]), frames, state))
        if state.blob is None:
            buckets.pop(key, None)
            timeouts.pop(key, None)
        else:
            buckets[key] = state.blob
            timeouts[key] = state.timeout_ms if state.timeout_ms is not None else watermark_ms
        return out


def concat_frames(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """``pd.concat(frames, ignore_index=True)`` of the buckets' output frames, column by column with numpy when they
    have the same columns of the same dtypes (as ``AlertStep._frame`` makes them): pandas' concat checks every
    value of a column that is all NULL in one frame (the passthrough and statistics columns) one by one."""
    import pandas as pd

    if len(frames) == 1:
        return frames[0]
    first = frames[0]
    if any(not frame.dtypes.equals(first.dtypes) for frame in frames[1:]) or not all(
        isinstance(dtype, np.dtype) for dtype in first.dtypes
    ):
        return pd.concat(frames, ignore_index=True)
    return pd.DataFrame(
        {name: np.concatenate([frame[name].to_numpy() for frame in frames]) for name in first.columns}, copy=False
    )


@dataclass(frozen=True)
class DriverRows:
    """The rows the rules gave for a micro-batch on the driver, as ``foreachBatch`` writes them: the alerts (as
    Spark's ``collect`` gives them: a dict of Python values per alert), the statistics, late and failed rows
    (dicts of ``KIND``, ``ALERT_NAMES`` and ``STATS``), and the bad input rows (pandas, ``operator_schema``)."""

    alerts: list[dict]
    small: list[dict]
    bad: pd.DataFrame

    @classmethod
    def of(cls, frame: pd.DataFrame) -> DriverRows:
        kinds = frame[KIND].to_numpy()
        alerts = _records(frame[kinds == KIND_MATCH], ALERT_NAMES)
        small = frame[(kinds != KIND_MATCH) & (kinds != KIND_BAD)]  # statistics, late and failed rows
        return cls(alerts, _records(small, (KIND, *ALERT_NAMES, STATS)), frame[kinds == KIND_BAD])

    def write(self, batch_id: int, cost, spark, file_sink, bad_rows_sink, lanes) -> tuple[list[dict], dict[str, int]]:
        """``foreachBatch``'s writes of these rows (``AlertStream._write_batch``, timed by ``cost``): the same files,
        sink logs and outboxes as the keyed layout's, with no Spark job but the dead letter's when a micro-batch
        has bad rows (``FileSink.commit_alerts``); the statistics, late and failed rows, and bad rows per reason.
        Without bad rows the dead letter's log takes the batch id while the alerts are written: the two outputs
        are independent, each skips a batch id it holds, so a crash between them leaves what it left in series."""
        meanwhile = None if len(self.bad) else bad_rows_sink.commit_nothing_meanwhile(batch_id, spark)
        try:
            self._write_alerts(batch_id, cost, spark, file_sink, lanes)
        except BaseException:
            if meanwhile is not None:
                meanwhile.exception()  # waited for, not raised: the alerts' error is the one to see
            raise
        with cost.step("bad_rows_commit"):  # without bad rows: what is left of the wait for the log
            if meanwhile is not None:
                meanwhile.result()
            else:
                bad_rows_sink.commit(batch_id, self.dead_letters(spark).coalesce(1))
        return self.small, self.bad_reasons()

    def _write_alerts(self, batch_id: int, cost, spark, file_sink, lanes) -> None:
        """The alerts into each sink's outbox, to ``--output``, then handed to the lanes."""
        alerts = file_sink.as_stored(rows_to_alerts(self.alerts))
        staged = None
        if lanes is not None:  # written before the output's commit, handed to the lanes after it
            with cost.step("outbox_stage"):
                staged = lanes.stage(batch_id, alerts, keep_written=file_sink.has_batch(batch_id))
        with cost.step("alerts_commit"):
            if file_sink.writes_on_driver(spark):
                file_sink.commit_alerts(batch_id, alerts, spark)
            else:  # Parquet, CSV, a URI, another time zone: Spark's writer
                values = [tuple(alert[name] for name in ALERT_NAMES) for alert in alerts]
                file_sink.commit(batch_id, spark.createDataFrame(values, alert_schema()).coalesce(1))
        if staged is not None:
            with cost.step("outbox_seal"):
                lanes.seal(staged)

    def bad_reasons(self) -> dict[str, int]:
        """Bad rows per reason."""
        return {str(k): int(v) for k, v in self.bad[REJECT].value_counts(sort=False).items()}

    def dead_letters(self, spark) -> DataFrame:
        """The bad rows as the dead letter's records (``inputs.DEAD_LETTER_NAMES``), for its file sink."""
        from pyspark.sql import functions as F

        return spark.createDataFrame(self.bad, operator_schema()).select(*dead_letter_columns(file=F.col(FILE)))


def _records(frame: pd.DataFrame, names: Sequence[str]) -> list[dict]:
    """``frame``'s rows as dicts of Python values (timestamps as naive UTC ``datetime``s, NULL as None)."""
    import pandas as pd

    if not len(frame):
        return []
    columns = []
    for name in names:
        column = frame[name]
        if pd.api.types.is_datetime64_any_dtype(column.dtype):
            values = [None if v is pd.NaT else v for v in column.array.to_pydatetime().tolist()]
        else:
            values = [None if v is None or v != v else v for v in column.tolist()]  # v != v: a NaN
        columns.append(values)
    return [dict(zip(names, row)) for row in zip(*columns)]


def operator_schema():
    """The rows ``AlertStep`` gives, as a Spark schema."""
    from pyspark.sql import types as T

    kinds = {"string": T.StringType(), "timestamp": T.TimestampType(), "boolean": T.BooleanType()}
    return T.StructType(
        [T.StructField(name, kinds[kind], True) for name, kind in ALERT_COLUMNS]
        + [T.StructField(KIND, T.IntegerType(), False), T.StructField(STATS, T.ArrayType(T.LongType()), True)]
        + [T.StructField(name, T.StringType(), True) for name in _PASSTHROUGH]
    )
