"""How long loading a rule set takes: many rules in one file, and many rule files in one directory.

    .venv/bin/python bench/rule_loading.py                        # 1,000 rules in one file; 10,000 files
    .venv/bin/python bench/rule_loading.py --one-file 1000,2000 --files 1000,10000

Loading (``cep.load_rules``, the loader of ``cep check --rules``, ``cep run --rules`` and ``cep stream``)
parses, checks and formats every statement and compiles its summary template. Each statement is parsed
apart from the rest of its file, so the time grows with the number of rules, not with its square: the
aim is 1,000 rules in one file under 2 s and 10,000 files under 30 s. Each rule is a different text (a
fraud rule with its own threshold and a summary line). Reported per case: the wall time, the time per
rule, and the ratio to the smallest case's time per rule (about 1 when loading is linear). Results go to
``bench/results-rule-loading.json`` (``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

RULE = """-- name: card_testing_{i}
-- severity: critical
-- summary: Card {{{{ card_id }}}} tested {{{{ tests }}}} times, then {{{{ big_amount }}}}
SELECT * FROM payments MATCH_RECOGNIZE (
  PARTITION BY card_id ORDER BY ts
  MEASURES FIRST(T.ts) AS first_test, COUNT(T.*) AS tests, LAST(B.amount) AS big_amount
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (T{{3,}} B) WITHIN INTERVAL '10' MINUTE
  DEFINE T AS T.amount < {small}, B AS B.amount > {i} + 100
);
"""


def one_file(directory: Path, count: int) -> Path:
    path = directory / "fraud.sql"
    path.write_text("".join(RULE.format(i=i, small=2 + i % 7) for i in range(count)), encoding="utf-8")
    return directory


def many_files(directory: Path, count: int) -> Path:
    for i in range(count):
        (directory / f"rule_{i:05d}.sql").write_text(RULE.format(i=i, small=2 + i % 7), encoding="utf-8")
    return directory


def measure(kind: str, count: int) -> dict:
    import cep

    with tempfile.TemporaryDirectory(prefix="cep-bench-load-") as folder:
        directory = (one_file if kind == "one_file" else many_files)(Path(folder), count)
        started = time.perf_counter()
        ruleset = cep.load_rules(str(directory))
        wall = time.perf_counter() - started
    assert len(ruleset) == count and not ruleset.errors, [str(e) for e in ruleset.errors[:3]]
    return {"kind": kind, "rules": count, "wall_s": round(wall, 3), "ms_per_rule": round(1000 * wall / count, 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--one-file", default="100,1000", help="rule counts for one file (comma-separated)")
    parser.add_argument("--files", default="1000,10000", help="file counts for one directory (comma-separated)")
    parser.add_argument("--out", default=str(REPO / "bench" / "results-rule-loading.json"))
    args = parser.parse_args(argv)
    measure("one_file", 10)  # warm-up: imports and the first compiled template are nobody's cost
    runs = []
    for kind, counts in (("one_file", args.one_file), ("files", args.files)):
        cases = [measure(kind, int(n)) for n in counts.split(",") if n]
        for case in cases:
            case["per_rule_vs_smallest"] = round(case["ms_per_rule"] / cases[0]["ms_per_rule"], 2)
            print(
                f"{kind:9} {case['rules']:>6} rules: {case['wall_s']:8.2f} s, {case['ms_per_rule']:.2f} ms per rule "
                f"(x{case['per_rule_vs_smallest']} the smallest case's)"
            )
        runs += cases
    machine = {"cpus": os.cpu_count(), "python": platform.python_version(), "load_avg": list(os.getloadavg())}
    result = {"machine": machine, "runs": runs}
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
