"""How `cep run` chooses its engine: start-up and throughput of the python engine and of a local Spark.

    .venv/bin/python bench/engine_choice.py [--rows 1000000] [--spark]

Writes a V-shape ticks CSV of ROWS rows (400 symbols, a random walk), runs `cep run patterns/v_shape.sql`
on it with each engine (in this process: the command as a user runs it, reading included), and prints
seconds, rows per second, the file's size and the python process's peak memory. docs/cli.md ("Which
engine") quotes the result; PYTHON_MAX_BYTES in cep/run_cli.py is chosen from it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np
import pandas as pd

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ticks(rows: int, path: str) -> None:
    rng = np.random.default_rng(7)
    symbols = 400
    per = rows // symbols
    frames = []
    for s in range(symbols):
        prices = 100 + np.cumsum(rng.normal(0, 0.2, per)).round(2)
        frames.append(
            pd.DataFrame(
                {
                    "symbol": f"S{s:03d}",
                    "ts": pd.date_range("2024-01-02", periods=per, freq="s"),
                    "price": prices,
                    "volume": rng.integers(1, 1000, per),
                }
            )
        )
    pd.concat(frames).to_csv(path, index=False)


def run(engine: str, path: str) -> float:
    started = time.perf_counter()
    code = subprocess.run(
        [
            sys.executable,
            "-m",
            "cep.cli",
            "run",
            os.path.join(REPO, "patterns", "v_shape.sql"),
            "-i",
            path,
            "--engine",
            engine,
            "-o",
            path + f".{engine}.parquet",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    if code.returncode:
        raise SystemExit(code.stderr)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--spark", action="store_true", help="also time --engine spark")
    args = parser.parse_args()
    folder = tempfile.mkdtemp()
    path = os.path.join(folder, "ticks.csv")
    ticks(args.rows, path)
    size = os.path.getsize(path)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import cep.cli"], check=True, cwd=REPO)
    print(f"start-up (import of the command): {time.perf_counter() - started:.2f} s")
    seconds = run("python", path)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(
        f"python engine: {args.rows} rows, {size / 2**20:.1f} MiB: {seconds:.1f} s "
        f"({args.rows / seconds:,.0f} rows/s), peak memory {peak:.0f} MiB"
    )
    if args.spark:
        seconds = run("spark", path)
        print(f"spark engine (local[*], start included): {seconds:.1f} s ({args.rows / seconds:,.0f} rows/s)")


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
