"""The in-process streaming engine (``LocalStream``) on the column-wise path against the per-key path and
``q.run`` on the same rows, for docs/streaming.md ("Measurements").

    .venv/bin/python bench/streaming_columnar.py                       # the numbers in docs/streaming.md
    .venv/bin/python bench/streaming_columnar.py --rows 400000 --symbols 1000 --batches 6 --queries bde
    .venv/bin/python bench/streaming_columnar.py --queries txymp     # SHOW TIMEOUT MATCHES, absence, PREV in a measure
    .venv/bin/python bench/streaming_columnar.py --queries a         # ALL ROWS PER MATCH
    .venv/bin/python bench/streaming_columnar.py --queries p --dedup-key ts   # under a dedup_key

The ticks of bench/data.py (--symbols keys) as Python rows, split into --batches micro-batches in time
order, watermark delay 5 s, session timeout 1 hour, then one empty micro-batch (timers fire). For each of
the bench's queries (bench/run.py) it runs ``LocalStream`` column-wise (where the query allows it),
``LocalStream`` per key (``columnar=False``), and ``q.run`` over all rows, and reports rows per CPU second
(``time.process_time``: robust on a shared machine; best of --repeat) and whether the streams' output (rows
and match ids) is the same. Prints a table (and writes --json if given).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))


def shape(
    title: str,
    pattern: str,
    measures: str,
    defines: str,
    *,
    within: str = "",
    timeouts: bool = False,
    rows: str = "ONE ROW PER MATCH",
):
    shown = " SHOW TIMEOUT MATCHES" if timeouts else ""
    return title, (
        f"SELECT * FROM ticks MATCH_RECOGNIZE (\n  PARTITION BY symbol ORDER BY ts\n  MEASURES {measures}\n"
        f"  {rows}{shown} AFTER MATCH SKIP PAST LAST ROW\n  PATTERN ({pattern}) {within}\n"
        f"  DEFINE {defines})"
    )


# Streaming shapes beside the bench's queries (one tick per key per second; volume 100..5000 in hundreds).
SHAPES = {
    "t": shape(
        "SHOW TIMEOUT MATCHES, A B*? C WITHIN 30 s",
        "A B*? C",
        "A.ts AS a_ts, C.ts AS c_ts, MATCH_STATUS() AS status",
        "A AS A.volume >= 4900, C AS C.price > A.price + 0.20",
        within="WITHIN INTERVAL '30' SECOND",
        timeouts=True,
    ),
    "x": shape(
        "trailing absence A !B WITHIN 30 s (B reads its row)",
        "A !B",
        "A.ts AS a_ts, COUNT(*) AS n, MATCH_STATUS() AS status",
        "A AS A.volume = 5000, B AS B.volume >= 4500",
        within="WITHIN INTERVAL '30' SECOND",
    ),
    "y": shape(
        "trailing absence A !B WITHIN 60 s (B reads A)",
        "A !B",
        "A.ts AS a_ts, COUNT(*) AS n",
        "A AS A.volume = 5000, B AS B.price < A.price - 0.10",
        within="WITHIN INTERVAL '60' SECOND",
    ),
    "m": shape(
        "absence in the middle A !B C WITHIN 60 s",
        "A !B C",
        "A.ts AS a_ts, C.ts AS c_ts, COUNT(*) AS n",
        "A AS A.volume = 5000, B AS B.volume >= 4500, C AS C.price > A.price + 0.10",
        within="WITHIN INTERVAL '60' SECOND",
    ),
    "p": shape(
        "PREV in a measure, UP{5,} (temperature_rising)",
        "UP{5,}",
        "FIRST(UP.ts) AS from_ts, COUNT(UP.*) AS n, ROUND(LAST(UP.price) - PREV(FIRST(UP.price)), 2) AS rise",
        "UP AS UP.price > PREV(UP.price)",
    ),
    "a": shape(
        "ALL ROWS PER MATCH, DOWN{3,} UP (running measures)",
        "DOWN{3,} UP",
        "FIRST(DOWN.ts) AS start_ts, LAST(DOWN.price) AS bottom, CLASSIFIER() AS step, COUNT(*) AS n",
        "DOWN AS DOWN.price < PREV(DOWN.price), UP AS UP.price > PREV(UP.price)",
        rows="ALL ROWS PER MATCH",
    ),
}


def cpu_seconds(work) -> tuple[float, object]:
    started = time.process_time()
    result = work()
    return time.process_time() - started, result


def stream(q, text, columns, rows, batches: int, *, columnar: bool | None, dedup_key: tuple[str, ...] = ()):
    from cep.spark_bridge.engine.keyed import KeyedStream
    from cep.spark_bridge.engine.local import LocalStream

    # a dedup key is remembered for the watermark delay, as ``cep stream --dedup-key`` does
    dedup = {"dedup_key": dedup_key, "dedup_horizon_us": 5_000_000} if dedup_key else {}
    engine = KeyedStream(q.plan, columns, query_text=text, session_timeout_us=3_600_000_000, **dedup)
    local = LocalStream(engine, delay_ms=5_000, columnar=columnar)
    size = -(-len(rows) // batches)

    def work():
        out, ids = [], []
        for index in range(batches + 1):  # the last one empty: timers fire
            got, got_ids, _ = local.run_batch(rows[index * size : (index + 1) * size])
            out += got
            ids += got_ids
        return out, ids

    return local, work


def best_stream(q, text, columns, rows, batches: int, repeat: int, *, columnar: bool | None, dedup_key=()):
    """(rows per CPU second, best of ``repeat``; the stream's (rows, match ids); the last LocalStream)."""
    best = None
    for _ in range(repeat):
        local, work = stream(q, text, columns, rows, batches, columnar=columnar, dedup_key=dedup_key)
        seconds, output = cpu_seconds(work)
        best = seconds if best is None else min(best, seconds)
    return round(len(rows) / best), output, local


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--symbols", type=int, default=1000)
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument(
        "--queries",
        default="abdetxymp",
        help="letters of bench/run.py's queries, and of the streaming shapes here (SHAPES: t x y m p a)",
    )
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--dedup-key", nargs="*", default=[], help="the streams' dedup_key column(s)")
    parser.add_argument("--json", help="also write the results to this JSON file")
    args = parser.parse_args(argv)

    from data import generate
    from run import QUERIES

    import cep

    table = generate(args.rows, symbols=args.symbols)
    rows = table.to_pylist()
    columns = tuple(table.column_names)
    results: dict = {"params": vars(args), "load_average_before": [round(x, 2) for x in os.getloadavg()], "queries": {}}
    for letter in args.queries:
        title, text = SHAPES[letter] if letter in SHAPES else QUERIES[letter]
        q = cep.compile(text)
        entry: dict = {"title": title}
        outputs = {}
        for label, columnar in (("column_wise", None), ("per_key", False)):
            entry[label], outputs[label], local = best_stream(
                q, text, columns, rows, args.batches, args.repeat, columnar=columnar, dedup_key=tuple(args.dedup_key)
            )
            if columnar is None:
                entry["path"] = local.path
                entry["vm_pieces"] = local.step.vm_pieces if local.step is not None else None
        best = min(cpu_seconds(lambda: q.run(rows))[0] for _ in range(args.repeat))
        entry["q_run"] = round(len(rows) / best)
        entry["matches"] = len(outputs["per_key"][0])
        entry["same_output"] = outputs["column_wise"] == outputs["per_key"]
        results["queries"][letter] = entry
    results["load_average_after"] = [round(x, 2) for x in os.getloadavg()]

    print(
        f"{args.rows:,} rows, {args.symbols:,} keys, {args.batches} micro-batches; rows per CPU second (best of "
        f"{args.repeat}); load average {results['load_average_before']} -> {results['load_average_after']} "
        f"on {os.cpu_count()} cores"
    )
    print(f"{'query':<52} {'column-wise':>12} {'per key':>10} {'q.run':>10} {'matches':>8}  same")
    for letter, entry in results["queries"].items():
        wise = f"{entry['column_wise']:,}" if entry["path"].startswith("column-wise") else "(per key)"
        print(
            f"({letter}) {entry['title'][:47]:<48} {wise:>12} {entry['per_key']:>10,} {entry['q_run']:>10,} "
            f"{entry['matches']:>8}  {entry['same_output']}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    return 0 if all(entry["same_output"] for entry in results["queries"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
