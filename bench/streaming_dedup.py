"""The in-process cost of ``dedup_key`` in the streaming engine (``keyed.KeyedStream`` via ``LocalStream``).

    .venv/bin/python bench/streaming_dedup.py [ROWS]

ROWS rows (default 50,000) of 20 keys, 10 rows a second of event time, in micro-batches of 5,000, through
the V-shape query with a 10 s watermark delay, with and without ``dedup_key="id"``; prints the best of
three runs and the state kept after the last micro-batch (the remembered keys of one delay).
"""

from __future__ import annotations

import datetime as dt
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import cep  # noqa: E402 (after the sys.path line above)
from cep.spark_bridge.engine.keyed import KeyedStream  # noqa: E402
from cep.spark_bridge.engine.local import LocalStream  # noqa: E402

DELAY_MS = 10_000
BATCH_ROWS = 5_000
RUNS = 3


def main(rows_wanted: int) -> None:
    query = cep.compile((REPO / "patterns" / "v_shape.sql").read_text(encoding="utf-8"))
    rnd = random.Random(1)
    t0 = dt.datetime(2024, 1, 1)
    rows = [
        {
            "id": i,
            "symbol": f"S{i % 20}",
            "ts": t0 + dt.timedelta(milliseconds=100 * i),
            "price": float(rnd.randint(1, 9)),
        }
        for i in range(rows_wanted)
    ]
    batches = [rows[i : i + BATCH_ROWS] for i in range(0, len(rows), BATCH_ROWS)]
    for dedup_key in (None, "id"):
        best = float("inf")
        for _ in range(RUNS):
            engine = KeyedStream(
                query.plan,
                ("id", "symbol", "ts", "price"),
                query_text=query.text,
                dedup_key=dedup_key,
                dedup_horizon_us=DELAY_MS * 1000,
            )
            stream = LocalStream(engine, delay_ms=DELAY_MS)
            started = time.perf_counter()
            for batch in batches:
                stream.run_batch(batch)
            best = min(best, time.perf_counter() - started)
        state = sum(len(blob) for blob in stream.states.values())
        print(
            f"dedup_key={dedup_key!r}: {len(rows):,} rows in {best:.2f} s ({len(rows) / best:,.0f} rows/s); "
            f"state after the last micro-batch {state:,} bytes"
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 50_000)
