"""The hostile queries of tests/test_hostile_queries.py, timed precisely: refused or run over 10k rows.

    .venv/bin/python bench/hostile_queries.py [--kill-after SECONDS] [--json out.json] [NAME_SUBSTRING ...]

Each case runs in a forked child (a hang is killed after --kill-after seconds, default 60). Prints one
line per case: outcome, wall and CPU seconds (compile + 10,000 rows), the ratio of 10,000 to 2,500 rows
(linear => ~4), and the error code when refused. The issue's target is one second per case.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.test_hostile_queries import CASES, run_case  # noqa: E402


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="run only the cases whose name contains one of these")
    parser.add_argument("--kill-after", type=float, default=60.0)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    results = []
    for name, case in CASES.items():
        if args.names and not any(part in name for part in args.names):
            continue
        report = run_case(case, kill_after=args.kill_after)
        ratio = ""
        if report.get("outcome") == "ran" and report.get("small_cpu_s"):
            ratio = f"x{report['large_cpu_s'] / max(report['small_cpu_s'], 1e-3):.1f}"
        seconds = (
            f"{report['seconds']:.3f}s wall {report['cpu_s']:.3f}s cpu"
            if "seconds" in report
            else f"{report['wall_s']:.1f}s"
        )
        extra = report.get("code") or report.get("kind") or ""
        gap = "  (known gap)" if case.known_gap else ""
        print(f"{name[:55]:55s} {report['outcome']:8s} {seconds:28s} {ratio:6s} {extra}{gap}", flush=True)
        results.append(
            {
                "case": name,
                "known_gap": bool(case.known_gap),
                **{k: v for k, v in report.items() if k not in ("traceback",)},
            }
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str) + "\n", encoding="utf-8")
    return results


if __name__ == "__main__":
    main()
