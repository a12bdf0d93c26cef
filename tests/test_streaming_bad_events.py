"""Bad events, duplicates and clock skew in streaming (issue #9, streaming half).

* In-process (``LocalStream``, many hypothesis examples): ``dedup_key`` drops repeats within a key and
  the watermark delay; streaming with dedup equals ``q.run(..., dedup_key=...)``; remembered keys are
  forgotten once the watermark passes them, so the state does not grow.
* On Spark (``@pytest.mark.spark``): a file source of JSON lines, one file per micro-batch,
  ``trigger(availableNow=True)``; lines that are not JSON, values of the wrong type, unparseable, NULL
  and far-future event times, extra columns and repeated events, mixed with good rows. The matches must
  equal the batch replay of the good, unique rows; every bad row comes out with its reason and text,
  and is counted in the metrics. ``cep stream --once`` writes them to the dead-letter directory and
  shows the counts in its summary and in ``cep status``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cep
from cep.matcher.rows.validate import REASONS
from cep.spark_bridge.engine import state_codec
from cep.spark_bridge.engine.keyed import BAD_REASONS, STAT_NAMES, KeyedStream
from cep.spark_bridge.engine.local import LocalStream
from cep.spark_bridge.engine.ordering import canonical_order
from tests.codegen_count import compilations_per_micro_batch
from tests.test_streaming import (
    few_partitions,  # noqa: F401 - a fixture: one shuffle partition
    metric_sums,
)

REPO = Path(__file__).resolve().parent.parent
T0 = dt.datetime(2024, 1, 1)
VSHAPE = (REPO / "patterns" / "v_shape.sql").read_text(encoding="utf-8")
COLUMNS = ("id", "symbol", "ts", "price")
SENTINEL = "ZZZ"
# Every test's events of a key form one session (gaps are far shorter); the sentinel, far ahead, closes
# it, so the stream emits trailing matches as a batch run does at the end of its input.
SESSION_US = 60_000_000


def tick(i: int, symbol: str, seconds: float, price: float) -> dict:
    return {"id": f"{symbol}-{i}", "symbol": symbol, "ts": T0 + dt.timedelta(seconds=seconds), "price": price}


def random_ticks(rnd: random.Random, symbols: int, per_symbol: int) -> list[dict]:
    rows = []
    for s in range(symbols):
        symbol = chr(ord("A") + s)
        for i in range(per_symbol):
            rows.append(tick(i, symbol, i + rnd.choice([0, 0.25, 0.5]), float(rnd.randint(1, 6))))
    return sorted(rows, key=lambda r: r["ts"])


def normalize(rows) -> list[tuple]:
    """Output rows (tuples, or the dicts ``q.run`` gives) in a comparable order."""
    return sorted(tuple(r.values()) if isinstance(r, dict) else tuple(r) for r in rows)


# -------------------------------------------------------------------------------- dedup, in-process


def run_local(query, batches: list[list[dict]], *, delay_ms: int, dedup_key="id"):
    engine = KeyedStream(
        query.plan,
        COLUMNS,
        query_text=query.text,
        dedup_key=dedup_key,
        dedup_horizon_us=delay_ms * 1000,
        session_timeout_us=SESSION_US,
    )
    stream = LocalStream(engine, delay_ms=delay_ms)
    out, late = [], []
    for batch in batches + [[]]:
        rows, _, rejected = stream.run_batch(batch)
        out += rows
        late += rejected
    return out, late, stream


def test_dedup_drops_repeats_within_a_key_and_counts_them():
    query = cep.compile(VSHAPE)
    rows = [tick(0, "A", 1, 5.0), tick(1, "A", 2, 3.0), tick(2, "A", 3, 4.0)]
    twin_in_b = {**rows[1], "symbol": "B"}  # the same id under another partition key: not a duplicate
    batches = [[rows[0], rows[1], dict(rows[1])], [dict(rows[0]), rows[2], twin_in_b], [tick(9, SENTINEL, 100, 1.0)]]
    out, late, stream = run_local(query, batches, delay_ms=5_000)
    assert normalize(out) == normalize(query.run(rows))
    assert late == []
    assert stream.stats["duplicates_dropped"] == 2
    # Without a dedup key the repeats are rows of their own, as in SQL: here they break the V.
    plain = LocalStream(
        KeyedStream(query.plan, COLUMNS, query_text=query.text, session_timeout_us=SESSION_US), delay_ms=5_000
    )
    plain_out = [r for b in batches + [[]] for r in plain.run_batch(b)[0]]
    assert normalize(plain_out) == normalize(query.run([r for b in batches for r in b if r["symbol"] == "A"]))
    assert plain.stats["duplicates_dropped"] == 0


def test_dedup_forgets_keys_once_the_watermark_passes_them():
    query = cep.compile(VSHAPE)
    engine = KeyedStream(query.plan, COLUMNS, query_text=query.text, dedup_key="id", dedup_horizon_us=5_000_000)
    stream = LocalStream(engine, delay_ms=5_000)
    stream.run_batch([tick(i, "A", i, 1.0) for i in range(50)])

    def remembered() -> int:
        seen = state_codec.decode(stream.states[("A",)]).get("seen")
        return len(seen["keys"]) if seen else 0

    assert remembered() == 50
    stream.run_batch([tick(100, "A", 1000, 1.0)])  # the watermark moves to 44 s: ids at or after 39 s stay
    assert remembered() == 12  # 39 s ... 49 s, and the new one
    stream.run_batch([])  # watermark 995 s: every earlier id is forgotten, only the newest one stays
    assert remembered() == 1
    # A repeat that arrives after its key was forgotten is behind the watermark: late, never matched twice.
    _, _, late = stream.run_batch([tick(3, "A", 3, 1.0)])
    assert [reason for reason, _ in late] == ["behind_watermark"]
    assert stream.stats["duplicates_dropped"] == 0


def test_dedup_key_is_checked():
    query = cep.compile(VSHAPE)
    with pytest.raises(cep.CepSemanticError, match="unknown column 'nope'"):
        KeyedStream(query.plan, COLUMNS, query_text="", dedup_key="nope")
    engine = KeyedStream(
        query.plan, COLUMNS, query_text="", dedup_key=["ID", "price"]
    )  # case-insensitive, several columns
    assert engine.dedup_columns == ("id", "price")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), delay_s=st.sampled_from([2, 5, 30]), copies=st.integers(0, 12))
def test_streaming_with_dedup_equals_batch_with_dedup(seed, delay_s, copies):
    """Repeats that arrive within the watermark delay are dropped exactly as the batch ``dedup_key`` does."""
    rnd = random.Random(seed)
    query = cep.compile(VSHAPE)
    events = random_ticks(rnd, symbols=2, per_symbol=rnd.randint(3, 15))
    arrivals = list(events)
    for _ in range(copies):  # a copy of an event, delivered again a little later (never past the delay)
        original = rnd.randrange(len(events))
        later = min(len(arrivals), arrivals.index(events[original]) + rnd.randint(1, 4))
        arrivals.insert(later, dict(events[original]))
    # Micro-batches of arrival order; times within a batch may be out of order by less than the delay.
    cuts = sorted(rnd.sample(range(1, len(arrivals)), min(3, len(arrivals) - 1)))
    batches = [arrivals[a:b] for a, b in zip([0] + cuts, cuts + [len(arrivals)])]
    late_free = all(
        max(r["ts"] for b in batches[:n] for r in b) - dt.timedelta(seconds=delay_s) < min(r["ts"] for r in batches[n])
        for n in range(1, len(batches))
    )
    batches.append([tick(0, SENTINEL, 10_000, 1.0)])
    out, late, stream = run_local(query, batches, delay_ms=delay_s * 1000)
    got = normalize(r for r in out if r[0] != SENTINEL)
    expected = query.run(canonical_order(arrivals, query.plan, COLUMNS), dedup_key="id")
    if late_free:
        assert late == []
        assert got == normalize(expected)
        assert stream.stats["duplicates_dropped"] == len(arrivals) - len(events)
    assert stream.stats["duplicates_dropped"] + len(late) >= len(arrivals) - len(events)


def test_bad_reasons_have_batch_codes_and_stats():
    assert set(BAD_REASONS) <= set(REASONS)
    assert REASONS["not_json"] == "E0445" and REASONS["future_event_time"] == "E0446"
    assert {"bad_rows", "duplicates_dropped", *BAD_REASONS} <= set(STAT_NAMES)


# ------------------------------------------------------------------------------------------ on Spark


def write_lines(directory: Path, batches: list[list[str]]) -> None:
    """One JSON-lines file per micro-batch, in order (increasing modification times)."""
    directory.mkdir(parents=True, exist_ok=True)
    for index, lines in enumerate(batches):
        path = directory / f"batch-{index:04d}.json"
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        stamp = 1_700_000_000 + 10 * index
        os.utime(path, (stamp, stamp))


def as_line(row: dict) -> str:
    return json.dumps({**row, "ts": row["ts"].isoformat() if isinstance(row["ts"], dt.datetime) else row["ts"]})


# Bad lines, each with the reason it must come out with.
BAD_LINES = [
    ("this is not json", "not_json"),
    ('{"id": "t1", "symbol": "A", "ts": "2024-01-01T00:', "not_json"),
    ('{"id": "w1", "symbol": "A", "ts": "2024-01-01T00:00:03", "price": "abc"}', "wrong_type"),
    ('{"id": "b1", "symbol": "B", "ts": "yesterday", "price": 3.0}', "bad_event_time"),
    ('{"id": "n1", "symbol": "B", "ts": null, "price": 3.0}', "null_event_time"),
    ('{"id": "f1", "symbol": "A", "ts": "2090-01-01T00:00:00", "price": 1.0}', "future_event_time"),
    # Past the times pandas holds (2262) too: the reason says it is ahead of the clock, not only unheld.
    ('{"id": "f2", "symbol": "A", "ts": "2999-01-01T00:00:00", "price": 1.0}', "future_event_time"),
    # A time Spark reads but the stateful operator's pandas cannot hold: it failed the micro-batch, every time.
    ('{"id": "o1", "symbol": "B", "ts": "1600-01-01T00:00:00", "price": 2.0}', "bad_event_time"),
]


# Lines only cep's own readers (``cep stream``, Kafka) can tell apart: Spark's JSON reader takes a quoted
# "NaN" or "Infinity" as a number in a DOUBLE column (``allowNonNumericNumbers``), where cep run sees a string.
QUOTED_NUMBER_LINES = [
    ('{"id": "q1", "symbol": "A", "ts": "2024-01-01T00:00:05", "price": "NaN"}', "wrong_type"),
    ('{"id": "q2", "symbol": "B", "ts": "2024-01-01T00:00:06", "price": "-Infinity"}', "wrong_type"),
]


def spark_schema(with_corrupt: bool = True):
    from pyspark.sql import types as T

    fields = [
        T.StructField("id", T.StringType()),
        T.StructField("symbol", T.StringType()),
        T.StructField("ts", T.TimestampType()),
        T.StructField("price", T.DoubleType()),
    ]
    if with_corrupt:
        fields.append(T.StructField("_corrupt_record", T.StringType()))
    return T.StructType(fields)


def hostile_batches(rnd: random.Random, events: list[dict], *, batches: int = 3, repeats: int = 4, bad=BAD_LINES):
    """``events`` cut into micro-batches in time order, with BAD_LINES, an extra column and repeated
    events (each repeat within its own micro-batch: within the delay) mixed in; then a sentinel."""
    size = -(-len(events) // batches)
    lines: list[list[str]] = [[as_line(r) for r in events[i : i + size]] for i in range(0, len(events), size)]
    lines[0][0] = as_line({**events[0], "extra": 42})  # an extra column: ignored
    for _ in range(repeats):
        chunk = rnd.randrange(len(lines))
        lines[chunk].insert(rnd.randint(0, len(lines[chunk])), rnd.choice(lines[chunk]))
    for line, _ in bad:
        chunk = rnd.randrange(len(lines))
        lines[chunk].insert(rnd.randint(0, len(lines[chunk])), line)
    lines.append([as_line(tick(0, SENTINEL, 10_000, 1.0))])
    return lines


def run_to_the_end(spark, out, name: str, checkpoint: Path):
    """Run the streaming result ``out`` over the files there now into a memory table: (query, rows as pandas)."""
    stream = (
        out.writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    stream.awaitTermination()
    return stream, spark.sql(f"SELECT * FROM {name}").toPandas()


def good_matches(result, query) -> list[tuple]:
    """The matches of a streaming result (not the late or bad rows, not the sentinel's), comparable."""
    matches = result[result["cep_late_reason"].isna()]
    names = list(query.output_columns(COLUMNS))
    return normalize(r for r in matches[names].itertuples(index=False, name=None) if r[0] != SENTINEL)


# A fall then a rise: the column-wise stream path (its dedup_key included), beside VSHAPE's.
FALL_RISE = """SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts
  MEASURES FIRST(DOWN.ts) AS start_ts, LAST(DOWN.price) AS bottom, UP.ts AS up_ts, COUNT(*) AS n
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (DOWN{2,} UP)
  DEFINE DOWN AS DOWN.price < PREV(DOWN.price), UP AS UP.price > PREV(UP.price))"""


@pytest.mark.spark
@pytest.mark.parametrize("text", [VSHAPE, FALL_RISE], ids=["vshape", "fall_rise"])
def test_spark_bad_events_are_routed_with_reasons_counted_and_the_rest_matches(spark, few_partitions, tmp_path, text):
    rnd = random.Random(7)
    query = cep.compile(text)
    events = random_ticks(rnd, symbols=2, per_symbol=20)
    batches = hostile_batches(rnd, events, batches=2, repeats=4)
    write_lines(tmp_path / "in", batches)
    df = spark.readStream.schema(spark_schema()).option("maxFilesPerTrigger", 1).json(str(tmp_path / "in"))
    with pytest.raises(cep.CepSemanticError, match="before the watermark"):  # too late to guard it
        query.on_spark(df.withWatermark("ts", "5 seconds"), max_future_skew="1 day")
    with pytest.raises(cep.CepSemanticError, match="unknown column 'nope'"):
        query.on_spark(df, dedup_key="nope")
    out = query.on_spark(
        df, watermark="5 seconds", session_timeout="60 seconds", max_future_skew="1 day", dedup_key="id"
    )
    assert "_corrupt_record" not in out.columns
    stream, result = run_to_the_end(spark, out, "bad_events", tmp_path / "ck")
    assert good_matches(result, query) == normalize(query.run(events))
    rejected = result[result["cep_late_reason"].notna()]
    assert sorted(zip(rejected["cep_late_reason"], map(_payload_key, rejected["cep_late_row"]))) == sorted(
        (reason, _payload_key(line)) for line, reason in BAD_LINES
    )
    sums = metric_sums(stream.recentProgress)
    assert sums["bad_rows"] == len(BAD_LINES) and sums["late_rows"] == 0 and sums["duplicates_dropped"] == 4
    assert Counter({r: sums[r] for r in BAD_REASONS}) == Counter(reason for _, reason in BAD_LINES)


def _payload_key(text: str) -> str:
    """A rejected row's payload: the line Spark could not read, as it was; a row Spark read, as the JSON
    of its columns (the event time as read, also when it was rejected for being in the future)."""
    try:
        row = json.loads(text)
    except ValueError:
        return text
    return f"{row.get('id')}|{row.get('symbol')}|{str(row.get('ts'))[:19]}|{row.get('price')}"


@pytest.mark.spark
def test_cli_stream_dead_letters_bad_rows_and_counts_them(spark, few_partitions, tmp_path, capsys):
    """``cep stream --once --dedup-key id``: bad rows land in CHECKPOINT/dead-letter/bad-rows/ with their
    reasons, repeats are dropped, the summary and ``cep status`` count both, and the alerts are the batch
    replay's matches over the good, unique rows."""
    from cep import cli
    from cep.spark_bridge.sinks.file import FileSink

    rnd = random.Random(3)
    events = random_ticks(rnd, symbols=2, per_symbol=12)
    bad = BAD_LINES + QUOTED_NUMBER_LINES
    write_lines(tmp_path / "in", hostile_batches(rnd, events, repeats=3, bad=bad))
    query_file = tmp_path / "vshape.sql"
    query_file.write_text(VSHAPE, encoding="utf-8")
    checkpoint = tmp_path / "ck"
    code = cli.main(
        [
            "stream",
            str(query_file),
            "--input",
            str(tmp_path / "in"),
            "--checkpoint",
            str(checkpoint),
            "--schema",
            "id STRING, symbol STRING, ts TIMESTAMP, price DOUBLE",
            "--watermark",
            "5s",
            "--session-timeout",
            "60s",
            "--dedup-key",
            "id",
            "--once",
            "--master",
            "local[2]",
        ]
    )
    summary = capsys.readouterr().err
    assert code == 0
    expected_reasons = Counter(reason for _, reason in bad)
    assert f"bad rows {len(bad)} | duplicates 3 |" in summary

    dead = spark.read.json(str(checkpoint / "dead-letter" / "bad-rows")).toPandas()
    assert Counter(dead["_cep_error"]) == expected_reasons
    assert all(REASONS[r] == c for r, c in zip(dead["_cep_error"], dead["_cep_error_code"]))
    assert sorted(map(_payload_key, dead["_cep_input"])) == sorted(_payload_key(line) for line, _ in bad)
    assert all(str(f).endswith(".json") for f in dead["_cep_file"])

    alerts = FileSink(str(checkpoint / "matches"), "json").read(spark).toPandas()
    measures = [json.loads(m) for m in alerts["measures"]]
    replay = cep.compile(VSHAPE).run(events)
    assert sorted((m["bottom"], m["n"]) for m in measures) == sorted((r["bottom"], r["n"]) for r in replay) and replay

    assert cli.main(["status", "--checkpoint", str(checkpoint)]) == 3  # a --once run ends stopped (docs/cli.md: exit 3)
    shown = capsys.readouterr().out
    line = next(line for line in shown.splitlines() if line.startswith("bad rows:"))
    assert line.startswith(f"bad rows: {len(bad)} (") and all(f"{r} {n}" in line for r, n in expected_reasons.items())
    assert "duplicates dropped: 3 " in shown


@pytest.mark.spark
def test_stream_source_inferred_schema_marks_lines_it_cannot_read(spark, tmp_path):
    """``cep stream`` without --schema: the columns come from the files there at start (ISO 8601 text
    becomes a timestamp); a later line whose time does not parse, or that is not JSON, is marked bad."""
    from cep.spark_bridge.spark.columns import REJECT
    from cep.spark_bridge.spark.inputs import dead_letter_rows, mark_bad_rows
    from cep.stream_cli import stream_source

    good = [as_line(tick(i, "A", i, 1.0)) for i in range(3)]
    write_lines(tmp_path / "in", [good])
    source = stream_source(spark, str(tmp_path / "in"), "json")
    assert dict(source.dtypes)["ts"] == "timestamp" and dict(source.dtypes)["_corrupt_record"] == "string"
    later = [as_line({**tick(9, "A", 9, 1.0), "ts": "yesterday"}), "not json at all", as_line(tick(10, "A", 10, 2.0))]
    (tmp_path / "in" / "batch-0001.json").write_text("".join(line + "\n" for line in later), encoding="utf-8")
    marked = mark_bad_rows(source, "ts", null_time=True)
    stream = (
        dead_letter_rows(marked)
        .writeStream.format("memory")
        .queryName("inferred_bad")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    stream.awaitTermination()
    dead = spark.sql("SELECT * FROM inferred_bad").toPandas()
    assert sorted(dead["_cep_error"]) == ["bad_event_time", "not_json"]
    assert json.loads(dead[dead["_cep_error"] == "bad_event_time"]["_cep_input"].iloc[0])["ts"] == "yesterday"
    assert REJECT not in dead.columns


# ------------------------------------------------------------------------------------- CSV input

# Bad CSV lines (columns id,symbol,ts,price), each with the reason it must come out with. A line with
# the wrong number of fields is not read at all (its values may sit in the wrong columns): not_json.
BAD_CSV_LINES = [
    ("this is not csv at all", "not_json"),
    ("s1,A,2024-01-01T00:00:03", "not_json"),  # a field short
    ("l1,A,2024-01-01T00:00:03,4.0,extra", "not_json"),  # a field too many
    ("w1,A,2024-01-01T00:00:03,abc", "wrong_type"),
    ("b1,B,yesterday,3.0", "bad_event_time"),
    ("n1,B,,3.0", "null_event_time"),  # read whole: the event time is empty (NULL)
]
CSV_SCHEMA = "id STRING, symbol STRING, ts TIMESTAMP, price DOUBLE"


def write_csv(directory: Path, batches: list[list[str]]) -> None:
    """One CSV file per micro-batch, with a header, in order (increasing modification times)."""
    directory.mkdir(parents=True, exist_ok=True)
    for index, lines in enumerate(batches):
        path = directory / f"batch-{index:04d}.csv"
        path.write_text("".join(line + "\n" for line in ["id,symbol,ts,price", *lines]), encoding="utf-8")
        stamp = 1_700_000_000 + 10 * index
        os.utime(path, (stamp, stamp))


def csv_batches(rnd: random.Random, events: list[dict], *, batches: int = 2) -> list[list[str]]:
    """``events`` as CSV lines cut into micro-batches in time order, BAD_CSV_LINES mixed in, then a sentinel."""

    def line(row: dict) -> str:
        return f"{row['id']},{row['symbol']},{row['ts'].isoformat()},{row['price']}"

    size = -(-len(events) // batches)
    lines = [[line(r) for r in events[i : i + size]] for i in range(0, len(events), size)]
    for text, _ in BAD_CSV_LINES:
        chunk = rnd.randrange(len(lines))
        lines[chunk].insert(rnd.randint(0, len(lines[chunk])), text)
    lines.append([line(tick(0, SENTINEL, 10_000, 1.0))])
    return lines


def _csv_payload(text: str) -> str:
    """A rejected CSV row's payload as its line: the text Spark could not read is kept as it was; a row
    it read whole (a NULL event time) is the JSON of its columns."""
    try:
        row = json.loads(text)
    except ValueError:
        return text
    return ",".join("" if row.get(c) is None else str(row[c]) for c in COLUMNS)


@pytest.mark.spark
def test_spark_bad_csv_lines_are_routed_with_reasons_and_text_and_counted(spark, few_partitions, tmp_path):
    """CSV through ``cep stream``'s source (``stream_source``): a line with the wrong number of fields, an
    unparseable number or time comes out with its reason and its text, is counted, and the rest matches."""
    from cep.stream_cli import stream_source

    rnd = random.Random(11)
    query = cep.compile(VSHAPE)
    events = random_ticks(rnd, symbols=2, per_symbol=16)
    write_csv(tmp_path / "in", csv_batches(rnd, events))
    source = stream_source(spark, str(tmp_path / "in"), "csv", CSV_SCHEMA)
    assert dict(source.dtypes)["_corrupt_record"] == "string"
    out = query.on_spark(source, watermark="5 seconds", session_timeout="60 seconds")
    stream, result = run_to_the_end(spark, out, "bad_csv", tmp_path / "ck")
    assert good_matches(result, query) == normalize(query.run(events))
    rejected = result[result["cep_late_reason"].notna()]
    assert sorted(zip(rejected["cep_late_reason"], map(_csv_payload, rejected["cep_late_row"]))) == sorted(
        (reason, text) for text, reason in BAD_CSV_LINES
    )
    sums = metric_sums(stream.recentProgress)
    assert sums["bad_rows"] == len(BAD_CSV_LINES) and sums["late_rows"] == 0
    assert {r: sums[r] for r in BAD_REASONS if sums[r]} == Counter(reason for _, reason in BAD_CSV_LINES)


@pytest.mark.spark
def test_cli_stream_dead_letters_bad_csv_lines(spark, few_partitions, tmp_path, capsys):
    """``cep stream --once`` over CSV files: bad lines land in the dead letter with reason, code and text,
    the summary counts them, and the alerts are the batch replay's matches over the good rows."""
    from cep import cli
    from cep.spark_bridge.sinks.file import FileSink

    rnd = random.Random(5)
    events = random_ticks(rnd, symbols=2, per_symbol=12)
    write_csv(tmp_path / "in", csv_batches(rnd, events))
    query_file = tmp_path / "vshape.sql"
    query_file.write_text(VSHAPE, encoding="utf-8")
    checkpoint = tmp_path / "ck"
    code = cli.main(
        [
            "stream",
            str(query_file),
            "--input",
            str(tmp_path / "in"),
            "--checkpoint",
            str(checkpoint),
            "--schema",
            CSV_SCHEMA,
            "--watermark",
            "5s",
            "--session-timeout",
            "60s",
            "--once",
            "--master",
            "local[2]",
        ]
    )
    assert code == 0
    assert f"bad rows {len(BAD_CSV_LINES)} |" in capsys.readouterr().err

    dead = spark.read.json(str(checkpoint / "dead-letter" / "bad-rows")).toPandas()
    assert sorted(zip(dead["_cep_error"], map(_csv_payload, dead["_cep_input"]))) == sorted(
        (reason, text) for text, reason in BAD_CSV_LINES
    )
    assert all(REASONS[r] == c for r, c in zip(dead["_cep_error"], dead["_cep_error_code"]))
    assert all(str(f).endswith(".csv") for f in dead["_cep_file"])
    alerts = FileSink(str(checkpoint / "matches"), "json").read(spark).toPandas()
    replay = cep.compile(VSHAPE).run(events)
    assert (
        sorted((m["bottom"], m["n"]) for m in map(json.loads, alerts["measures"]))
        == sorted((r["bottom"], r["n"]) for r in replay)
        and replay
    )


@pytest.mark.spark
def test_stream_schema_keeps_a_decimals_size(spark, tmp_path):
    """``cep stream --schema 'x DECIMAL(10,2)'``: Spark reads the column as decimal(10,2), as ``cep run``
    reads a CSV with it: 1.235 is 1.24 (rounded half up), 123456789.5 does not fit and is a bad row
    (``wrong_type``), as a quoted "1.5" is."""
    from pyspark.sql import functions as F

    from cep.spark_bridge.spark.columns import REJECT
    from cep.spark_bridge.spark.inputs import dead_letter_rows, mark_bad_rows
    from cep.stream_cli import stream_source

    lines = [
        '{"ts": "2024-01-01T00:00:00", "x": 1.235}',
        '{"ts": "2024-01-01T00:00:01", "x": 123456789.5}',
        '{"ts": "2024-01-01T00:00:02", "x": "1.5"}',
        '{"ts": "2024-01-01T00:00:03", "x": 10.005}',
    ]
    write_lines(tmp_path / "in", [lines])
    source = stream_source(spark, str(tmp_path / "in"), "json", "ts TIMESTAMP, x DECIMAL(10,2)")
    assert dict(source.dtypes)["x"] == "decimal(10,2)"
    marked = mark_bad_rows(source, "ts", null_time=True)
    for name, frame in (("dec_bad", dead_letter_rows(marked)), ("dec_good", marked.where(F.col(REJECT).isNull()))):
        stream = (
            frame.writeStream.format("memory")
            .queryName(name)
            .option("checkpointLocation", str(tmp_path / name))
            .trigger(availableNow=True)
            .start()
        )
        stream.awaitTermination()
    dead = spark.sql("SELECT * FROM dec_bad").toPandas()
    assert list(dead["_cep_error"]) == ["wrong_type", "wrong_type"]
    assert sorted(str(json.loads(text)["x"]) for text in dead["_cep_input"]) == ["1.5", "123456789.5"]
    assert [row["x"] for row in spark.sql("SELECT x FROM dec_good ORDER BY ts").collect()] == [
        Decimal("1.24"),
        Decimal("10.01"),
    ]


@pytest.mark.spark
def test_the_micro_batch_time_is_read_not_compiled_into_the_first_stage(spark, tmp_path):
    """The future-skew check compares each row with the micro-batch's time. Spark writes ``current_timestamp()``
    into the code it generates as a number, so a stage that used it was compiled again at every micro-batch;
    ``inputs.batch_time_us`` reads it instead: after the first micro-batch no code is compiled, and a row two
    days ahead of the micro-batch's time is still a future_event_time bad row while the others are good."""
    from pyspark.sql import functions as F

    from cep.spark_bridge.spark.columns import REJECT
    from cep.spark_bridge.spark.inputs import mark_bad_rows, prepare_input

    source = tmp_path / "in"
    source.mkdir()
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    for index in range(4):
        rows = [tick(i, "A", 0, 1.0) | {"ts": (now + dt.timedelta(minutes=i)).isoformat()} for i in range(3)]
        rows.append(tick(9, "A", 0, 1.0) | {"ts": (now + dt.timedelta(days=2)).isoformat()})
        path = source / f"batch-{index}.json"
        path.write_text("\n".join(json.dumps(row) for row in rows) + "\n", encoding="utf-8")
        os.utime(path, (1_000 + index, 1_000 + index))  # read in this order, one file per micro-batch
    schema = "id STRING, symbol STRING, ts TIMESTAMP, price DOUBLE"
    df = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(source))
    marked = mark_bad_rows(prepare_input(df), "ts", max_future_skew_us=86_400_000_000, null_time=True)
    reasons: list[list] = []

    def read(batch):
        reasons.append(sorted(r[0] or "" for r in batch.select(F.col(REJECT)).collect()))

    compiled = compilations_per_micro_batch(spark, marked, tmp_path / "ck", read)
    assert reasons == [["", "", "", "future_event_time"]] * 4
    assert compiled[0] > 0 and compiled[1:] == [0, 0, 0], compiled
