"""Hostile patterns over 10k and 100k rows where nothing matches: the time must grow about tenfold.

    .venv/bin/python bench/hostile.py

Prints one line per pattern: seconds for 10k and 100k rows and their ratio (linear => ~10).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import cep  # noqa: E402

PATTERNS = ["(A*)*B", "(A|A)*B", "(A+)+B", "A*A*A*A*B", "(A|B)*C"]


def seconds(query: cep.Query, rows: int, repeats: int = 3) -> float:
    columns = {"id": list(range(rows)), "v": [0] * rows}  # A and B hold everywhere, C nowhere
    timings = []
    for _ in range(repeats):
        began = time.perf_counter()
        query.plan.run_columns(columns)
        timings.append(time.perf_counter() - began)
    return statistics.median(timings)


def main(column_wise: bool = True) -> list[dict]:
    """Each pattern over 10k and 100k rows; ``column_wise=False``: on the Pike VM alone."""
    results = []
    for pattern in PATTERNS:
        defines = {"A": "A AS v = 0", "B": "B AS v = 0", "C": "C AS v = 1"}
        used = ", ".join(text for name, text in defines.items() if name in pattern)
        query = cep.compile(
            f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS n PATTERN ({pattern}) DEFINE {used})",
            column_wise=column_wise,
        )
        small, large = seconds(query, 10_000), seconds(query, 100_000)
        results.append({"pattern": pattern, "10k_s": small, "100k_s": large, "ratio": large / small})
        print(f"{pattern:12s} 10k {small:.3f}s  100k {large:.3f}s  ratio {large / small:.1f}")
    return results


if __name__ == "__main__":
    main()
