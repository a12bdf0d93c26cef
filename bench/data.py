"""Deterministic tick data for the benchmarks: symbol, ts, price, volume; Parquet.

    python bench/data.py --rows 1000000 --out bench/data/ticks_1m.parquet

100 symbols (``S000`` .. ``S099``), one tick per symbol per second, rows interleaved by time (as a feed
delivers them) with the symbols of each second in a shuffled order. Prices are per-symbol random walks
in whole cents (one step in eight is flat: a tie is neither falling nor rising); volumes are whole
hundreds. numpy's PCG64 with a fixed seed, so the same row count gives the same file on every machine.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

SEED = 20240102
SYMBOLS = 100
START = np.datetime64("2024-01-02T09:30:00", "ms")


def generate(rows: int, symbols: int = SYMBOLS, seed: int = SEED):
    """The ticks as a pyarrow Table with columns symbol (string), ts (timestamp[ms]), price (double), volume (int64)."""
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    seconds = -(-rows // symbols)
    # Symbol order inside each second: a fixed shuffle per second (argsort of random keys).
    order = np.argsort(rng.random((seconds, symbols)), axis=1).reshape(-1)[:rows]
    second = np.repeat(np.arange(seconds), symbols)[:rows]
    start_cents = rng.integers(500, 50_000, size=symbols)
    steps = rng.integers(-8, 9, size=(seconds, symbols))
    steps[rng.random((seconds, symbols)) < 0.125] = 0
    steps[0] = 0
    cents = np.maximum(start_cents + np.cumsum(steps, axis=0), 1)  # a walk per symbol
    price = cents[second, order] / 100.0
    volume = rng.integers(1, 51, size=rows) * 100
    names = np.array([f"S{i:03d}" for i in range(symbols)])
    ts = START + second.astype("timedelta64[s]")
    return pa.table(
        {
            "symbol": pa.array(names[order]),
            "ts": pa.array(ts.astype("datetime64[ms]")),
            "price": pa.array(price),
            "volume": pa.array(volume.astype(np.int64)),
        }
    )


def write(rows: int, out: Path) -> Path:
    import pyarrow.parquet as pq

    out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(generate(rows), out)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    write(args.rows, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
