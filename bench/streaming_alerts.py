"""The two alert rules of patterns/ (brute force, card testing) streamed by ``LocalStream``, column-wise
against per key, over the logs of bench/alert_data.py, for docs/streaming.md ("Measurements").

    .venv/bin/python bench/streaming_alerts.py                     # 200,000 rows of each log, 6 micro-batches
    .venv/bin/python bench/streaming_alerts.py --rows 400000 --batches 12 --repeat 1

The rules are patterns/login_burst.sql and patterns/card_testing.sql with the logs' column names; the logs
have no source address nor merchant, so ``ip`` (one of 7 per row) and ``merchant`` (one of 13) are added,
deterministic. Their measures (COUNT(DISTINCT FAIL.ip), ROUND(SUM(SMALL.amount), 2)) are computed per
match by the VM's own measure code on the column-wise path (``sequence_output._per_match``). Reports rows
per CPU second (best of --repeat) and whether both paths gave the same rows and match ids.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

RULES = {
    "login_burst": """SELECT * FROM logins MATCH_RECOGNIZE (
  PARTITION BY user_id ORDER BY ts
  MEASURES FIRST(FAIL.ts) AS first_failure_ts, COUNT(FAIL.*) AS failures,
           COUNT(DISTINCT FAIL.ip) AS addresses, OK.ts AS success_ts, OK.ip AS success_ip
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (FAIL{5,} OK) WITHIN INTERVAL '5' MINUTE
  DEFINE FAIL AS status = 'FAIL', OK AS status = 'OK')""",
    "card_testing": """SELECT * FROM payments MATCH_RECOGNIZE (
  PARTITION BY card_id ORDER BY ts
  MEASURES FIRST(SMALL.ts) AS first_test_ts, COUNT(SMALL.*) AS tests, ROUND(SUM(SMALL.amount), 2) AS tested_total,
           BIG.ts AS big_ts, BIG.amount AS big_amount, BIG.merchant AS big_merchant
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (SMALL{3,} BIG) WITHIN INTERVAL '10' MINUTE
  DEFINE SMALL AS amount < 5, BIG AS amount >= 200)""",
}


def rows_of(rule: str, count: int) -> tuple[tuple[str, ...], list[dict]]:
    from alert_data import generate_logins, generate_payments

    if rule == "login_burst":
        rows = generate_logins(count).to_pylist()
        for index, row in enumerate(rows):
            row["ip"] = f"10.0.0.{index % 7}"
    else:
        rows = generate_payments(count).to_pylist()
        for index, row in enumerate(rows):
            row["merchant"] = f"m{index % 13}"
    return tuple(rows[0]), rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)

    from streaming_columnar import best_stream

    import cep

    load_before = [round(x, 2) for x in os.getloadavg()]
    lines, same_everywhere = [], True
    for rule, text in RULES.items():
        columns, rows = rows_of(rule, args.rows)
        q = cep.compile(text)
        speeds, outputs, path = {}, {}, ""
        for label, columnar in (("column_wise", None), ("per_key", False)):
            speeds[label], outputs[label], local = best_stream(
                q, text, columns, rows, args.batches, args.repeat, columnar=columnar
            )
            if columnar is None:
                path = local.path
        same = outputs["column_wise"] == outputs["per_key"]
        same_everywhere &= same
        lines.append(
            f"{rule:<14} {speeds['column_wise']:>12,} {speeds['per_key']:>10,} "
            f"{len(outputs['per_key'][0]):>8}  {same}  {path[:60]}"
        )
    print(
        f"{args.rows:,} rows per log, {args.batches} micro-batches; rows per CPU second (best of {args.repeat}); "
        f"load average {load_before} -> {[round(x, 2) for x in os.getloadavg()]} on {os.cpu_count()} cores"
    )
    print(f"{'rule':<14} {'column-wise':>12} {'per key':>10} {'matches':>8}  same  path")
    print("\n".join(lines))
    return 0 if same_everywhere else 1


if __name__ == "__main__":
    sys.exit(main())
