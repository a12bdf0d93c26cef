"""The cost of running a statement's arithmetic as Spark does: DuckDB's expression rewriter off (issue #28).

    python bench/duckdb_rewriter.py [--rows 1000000] [--out bench/results-duckdb-rewriter.json]

The python engine turns DuckDB's expression rewriter off for a statement that computes arithmetic (so that
``v + 1 > 0`` overflows where Spark's does: cep/duckdb_optimizer.py) and leaves it on for the others. This
times statements whose SQL around the clause reads ``--rows`` rows (the clause reads a few hundred) with the
setting cep picks against every optimizer on, alternated (ABAB) so that a loaded machine's drift falls on both.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import pyarrow as pa

import cep
import cep.statement_engines as engines

CLAUSE = (
    " MATCH_RECOGNIZE (ORDER BY sym MEASURES A.sym AS sym, A.n AS n, A.total AS total ONE ROW PER MATCH "
    "PATTERN (A) DEFINE A AS TRUE) r"
)
STATEMENTS = {
    "no arithmetic (rewriter on in both)": "SELECT sym, count(*) AS n, max(v) AS total FROM big "
    "WHERE v > 500 AND sym LIKE 'k1%' GROUP BY sym",
    "arithmetic in WHERE, with LIKE": "SELECT sym, count(*) AS n, max(v) AS total FROM big "
    "WHERE v + 1 > 500 AND sym LIKE 'k1%' GROUP BY sym",
    "arithmetic in SELECT": "SELECT sym, count(*) AS n, sum(v * 2 + 1) AS total FROM big WHERE v > 500 GROUP BY sym",
}


def table(rows: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(rows), pa.int64()),
            "v": pa.array([(i * 7919) % 1000 for i in range(rows)], pa.int64()),
            "sym": pa.array([f"k{i % 397}" for i in range(rows)]),
        }
    )


def seconds(text: str, data: pa.Table) -> float:
    started = time.perf_counter()
    cep.compile_sql(text).run({"big": data}, kind="arrow")
    return time.perf_counter() - started


def run(rows: int, rounds: int) -> dict:
    data = table(rows)
    picked = engines.disabled_optimizers
    results: dict = {"rows": rows, "rounds": rounds, "load_average_at_start": os.getloadavg()[0], "statements": {}}
    for name, inner in STATEMENTS.items():
        text = f"WITH f AS ({inner})\nSELECT * FROM f" + CLAUSE
        times: dict[str, list[float]] = {"every optimizer on": [], "as cep picks": []}
        for _ in range(rounds):  # A B A B
            engines.disabled_optimizers = lambda _text: ""
            times["every optimizer on"].append(seconds(text, data))
            engines.disabled_optimizers = picked
            times["as cep picks"].append(seconds(text, data))
        results["statements"][name] = {key: [round(t, 3) for t in value] for key, value in times.items()}
    results["load_average_at_end"] = os.getloadavg()[0]
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("results-duckdb-rewriter.json"))
    args = parser.parse_args()
    results = run(args.rows, args.rounds)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
