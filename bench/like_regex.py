"""LIKE and regular expressions on hostile patterns: time per row, linear engines against Python's ``re``.

    python bench/like_regex.py [--out bench/results-like-regex.json]

Issue 16 measured ``note LIKE '%a%a%a%a%a%a%a%a%a%a%b'`` on three 40-character rows of ``a`` at 70 s with
LIKE translated to Python's ``re`` (exponential backtracking). cep now matches LIKE segment by segment
(``cep.matcher.sql.text_patterns``) and regular expressions with RE2. This runs the query on 1,000 such
rows, with the pattern written in the query and read from a column, and times each engine on single
strings of growing length, so that linear growth can be seen (the backtracking column stops at 24
characters: 40 took 250 s on this machine, November 2026).
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

import cep
from cep.matcher.sql.text_patterns import like, regexp_like

LIKE_PATTERN = "%a%a%a%a%a%a%a%a%a%a%b"
REGEX = "(a+)+b"


def _seconds(function, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - started)
    return best


def run() -> dict:
    rows = [{"id": i, "note": "a" * 40, "p": LIKE_PATTERN} for i in range(1000)]
    results: dict = {"rows": len(rows)}
    for name, condition in (
        ("like_literal", f"note LIKE '{LIKE_PATTERN}'"),
        ("like_column", "note LIKE p"),
        ("rlike_literal", f"note RLIKE '{REGEX}'"),
    ):
        query = cep.compile(
            f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS n PATTERN (A) DEFINE A AS {condition})"
        )
        results[f"{name}_seconds_per_1000_rows"] = round(_seconds(lambda q=query: q.run(rows)), 4)
    growth = []
    backtracking = re.compile(LIKE_PATTERN.replace("%", ".*"), re.DOTALL)
    backtracking_alive = True
    for length in (10, 14, 18, 22, 24, 40, 1000, 10000):
        text = "a" * length
        entry = {
            "length": length,
            "like_seconds": round(_seconds(lambda: like(text, LIKE_PATTERN)), 6),
            "re2_seconds": round(_seconds(lambda: regexp_like(text, REGEX)), 6),
        }
        entry["like_unanchored_seconds"] = round(_seconds(lambda: like(text, LIKE_PATTERN + "%")), 6)
        if backtracking_alive and length <= 24:  # each 4 more characters cost about 5x more (40 took 250 s here)
            seconds = _seconds(lambda: backtracking.fullmatch(text), repeat=1)
            entry["python_re_seconds"] = round(seconds, 4)
            backtracking_alive = seconds < 1.0
        growth.append(entry)
    results["growth"] = growth
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="bench/results-like-regex.json")
    args = parser.parse_args()
    results = run()
    Path(args.out).write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
