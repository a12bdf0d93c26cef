"""How many of the differential's generated expressions the python engine names as Spark does (issue #28).

    python bench/output_names.py [--examples 80] [--out bench/results-output-names.json] [--show 40]

A column written without ``AS`` is named by Spark after its own text of the expression; the python engine gives
the same name (cep/duckdb_column_names.py) or refuses the column before running. This draws the expressions of
tests/test_sql_differential.py's generator (``cases``: 24 an example, the same examples on every run), and for
each that both engines accept (Spark's analyser and the python engine's translation bound in DuckDB; neither
runs), counts: named as Spark names it, refused (a marked name), or named differently (must stay 0). The
expressions are asked together, a query per shape and example, split one by one when one of them fails.
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402

from tests import test_sql_differential as differential  # noqa: E402


def drawn_cases(examples: int) -> list[list[tuple[str, str]]]:
    """The generator's expressions ((shape, expression)) of ``examples`` examples, the same on every run."""
    found: list[list[tuple[str, str]]] = []

    @settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        phases=(Phase.generate,),
        suppress_health_check=list(HealthCheck),
        deadline=None,
    )
    @given(differential.cases())
    def collect(case) -> None:
        found.append(case[1])

    collect()
    return found


def names(ask, expressions: list[str]) -> list[str | None]:
    """``ask(expressions)`` (their column names), or each alone when that fails (None: it fails alone)."""
    try:
        return list(ask(expressions))
    except Exception:  # noqa: BLE001 - any error of either engine: ask each alone
        if len(expressions) == 1:
            return [None]
    return [name for expression in expressions for name in names(ask, [expression])]


def measure(examples: int) -> dict:
    import pyarrow as pa

    from cep.duckdb_column_names import UNNAMED_MARK
    from cep.spark_bridge.spark.session import get_spark
    from cep.statement_engines import DuckEngine

    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)  # each failed analysis's stack trace
    spark = get_spark("local[1]", app_name="cep-output-names")
    schema = ", ".join(f"{name} {kind}" for name, kind in differential.COLUMNS)
    spark.createDataFrame([], schema).createOrReplaceTempView(differential.TABLE)
    engine = DuckEngine(read_path=None)
    engine.register(differential.TABLE, pa.Table.from_pylist([], schema=differential.ARROW))

    def select(expressions: list[str]) -> str:
        return f"SELECT {', '.join(expressions)} FROM {differential.TABLE}"

    counts = collections.Counter()
    refused, different = [], []
    started = time.perf_counter()
    try:
        for picked in drawn_cases(examples):
            for shape in ("row", "aggregate"):
                written = [e for kind, e in picked if (kind == "aggregate") == (shape == "aggregate")]
                if not written:
                    continue
                ours = names(lambda e: engine.bound(select(e)).columns, written)
                theirs = names(lambda e: spark.sql(select(e)).columns, written)
                for expression, mine, spark_name in zip(written, ours, theirs, strict=True):
                    if mine is None or spark_name is None:
                        counts["not compared (an error on either engine)"] += 1
                    elif mine.startswith(UNNAMED_MARK):
                        counts["refused"] += 1
                        refused.append((expression, spark_name))
                    elif mine == spark_name:
                        counts["named as Spark names it"] += 1
                    else:
                        counts["named differently"] += 1
                        different.append((expression, mine, spark_name))
    finally:
        engine.close()
    return {
        "examples": examples,
        "load_average_at_start": os.getloadavg()[0],
        "seconds": round(time.perf_counter() - started, 1),
        "counts": dict(counts),
        "refused": refused,
        "different": different,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=80)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--show", type=int, default=0, help="print this many refused expressions")
    args = parser.parse_args()
    results = measure(args.examples)
    print(json.dumps(results["counts"], indent=1))
    for expression, mine, spark_name in results["different"]:
        print(f"DIFFERENT {expression}: {mine!r} against Spark's {spark_name!r}")
    for expression, spark_name in results["refused"][: args.show]:
        print("refused", " ".join(expression.split()), " -> ", spark_name)
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
