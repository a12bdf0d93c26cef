"""Generate patterns/data/ticks.csv: a small, deterministic tick file for the shipped V-shape pattern.

Columns: symbol, ts, price, volume. Four made-up symbols, one tick per symbol per minute for an hour
from 2024-01-02 09:30:00, rows interleaved by time (as a feed would deliver them). Prices are random
walks in whole cents (so a step of 0 -- a tie, which is neither "falling" nor "rising" -- happens too),
printed with two decimals; volumes are whole numbers.

Only the standard library's ``random`` with a fixed seed is used, so the output is the same byte for
byte on every machine; tests/test_sample_data.py regenerates the file and compares.

    python patterns/data/make_ticks.py            # rewrites patterns/data/ticks.csv
    python patterns/data/make_ticks.py --out x.csv
"""

from __future__ import annotations

import argparse
import random
from datetime import datetime, timedelta
from pathlib import Path

SEED = 20240102
SYMBOLS = {"ACME": 10_000, "BOLT": 4_250, "CRUX": 23_175, "DYNA": 812}  # starting price in cents
ROWS_PER_SYMBOL = 60
START = datetime(2024, 1, 2, 9, 30, 0)
DEFAULT_OUT = Path(__file__).with_name("ticks.csv")


def generate() -> str:
    """The whole CSV file as text (``\\n`` line endings, header first)."""
    rng = random.Random(SEED)
    cents = dict(SYMBOLS)
    lines = ["symbol,ts,price,volume"]
    for minute in range(ROWS_PER_SYMBOL):
        ts = (START + timedelta(minutes=minute)).strftime("%Y-%m-%d %H:%M:%S")
        for symbol in SYMBOLS:
            if minute > 0:
                # Steps of up to ~0.6% of the price; one in eight is flat.
                scale = max(1, cents[symbol] // 160)
                step = 0 if rng.random() < 0.125 else rng.randint(-scale, scale) or 1
                cents[symbol] = max(1, cents[symbol] + step)
            volume = rng.randint(1, 50) * 100
            lines.append(f"{symbol},{ts},{cents[symbol] // 100}.{cents[symbol] % 100:02d},{volume}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to write (default: %(default)s)")
    args = parser.parse_args(argv)
    args.out.write_bytes(generate().encode("ascii"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
