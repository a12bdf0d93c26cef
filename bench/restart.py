"""Where the first micro-batch after a restart of ``cep stream --rules`` spends its time.

    .venv/bin/python bench/restart.py --json bench/results-restart.json
    .venv/bin/python bench/restart.py --files 2000 --runs 2

A rule set (patterns/card_testing.sql and a second rule) over a directory of --files JSON files of
card charges. A first ``cep stream --once --state STATE`` builds the checkpoint (``--state spark`` by default,
the layout of the runs on record, named whatever ``cep stream``'s default; the restarts go on in the
checkpoint's). Then, per run, the same ``cep stream`` command (not --once) is started again, one new file is
added, and the JSON log lines and the status file give the phases, from the process start:

* ``spark``: the Spark session is up (the line naming Spark's log);
* ``ready_to_start``: the input's columns known and the rules loaded (the start-up line);
* ``queries``: both queries started (``running``);
* ``first_batch``: the first micro-batch after the restart has run (``status.json``'s ``last_batch``
  newer than the start), and how long Spark says that batch took (``durationMs``);

once with the input's schema kept in the checkpoint (what cep does now) and once without it (the
schema inferred again from the files at each start), to show what the cache saves. Each run
is stopped with SIGTERM. The machine is shared: run it more than once and compare phases, not totals.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RULES = {
    "card_testing.sql": (REPO / "patterns" / "card_testing.sql").read_text(encoding="utf-8"),
    "big.sql": "SELECT * FROM charges MATCH_RECOGNIZE (PARTITION BY card_id ORDER BY ts\n"
    "  MEASURES A.amount AS amount PATTERN (A) DEFINE A AS amount > 700)\n",
}


def charges(count: int, start: dt.datetime, seed: int) -> list[dict]:
    rnd = random.Random(seed)
    return [
        {
            "card_id": f"C{rnd.randrange(40):03d}",
            "ts": (start + dt.timedelta(seconds=7 * i)).isoformat(),
            "merchant": rnd.choice(["books", "pharmacy", "electronics", "games"]),
            "amount": round(rnd.choice([rnd.uniform(0.5, 4.5), rnd.uniform(5, 900)]), 2),
        }
        for i in range(count)
    ]


def write_file(folder: Path, index: int, rows: list[dict]) -> None:
    tmp = folder / f".{index}.tmp"
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tmp.rename(folder / f"charges-{index:05d}.json")


def command(root: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "cep.cli",
        "stream",
        "--rules",
        str(root / "rules"),
        "--input",
        str(root / "in"),
        "--checkpoint",
        str(root / "ck"),
        "--sink",
        "sqlite",
        str(root / "alerts.db"),
        "--watermark",
        "1m",
        "--trigger",
        "1s",
        "--max-future-skew",
        "off",
        "--log-format",
        "json",
        "--master",
        "local[2]",
        *extra,
    ]


def timed_restart(root: Path, index: int, keep_schema: bool, timeout: float) -> dict:
    if not keep_schema:
        (root / "ck" / "source-schema.json").unlink(missing_ok=True)
    log = root / f"restart-{index}.log"
    started = time.time()
    with log.open("w") as out:
        process = subprocess.Popen(
            command(root),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=dict(os.environ, PYTHONPATH=str(REPO)),
        )
    phases: dict[str, float] = {}
    added = False
    try:
        while time.time() - started < timeout:
            for line in log.read_text(errors="replace").splitlines():
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                stamp = dt.datetime.fromisoformat(record["time"].replace("Z", "+00:00")).timestamp()
                message = record.get("message", "")
                for name, marker in (
                    ("spark", "Spark's own log"),
                    ("ready_to_start", "rule(s) over"),
                    ("queries", "running;"),
                ):
                    if marker in message and name not in phases:
                        phases[name] = round(stamp - started, 2)
            if "queries" in phases and not added:
                write_file(
                    root / "in",
                    100_000 + index,
                    charges(50, dt.datetime(2024, 3, 6) + dt.timedelta(hours=index), index),
                )
                added = True
            try:
                status = json.loads((root / "ck" / "status.json").read_text())
            except (OSError, ValueError):
                status = {}
            last = status.get("last_batch") or {}
            moment = last.get("time")
            if (
                added
                and moment
                and dt.datetime.fromisoformat(moment.replace("Z", "+00:00")).timestamp() > started
                and last.get("input_rows")
            ):
                phases["first_batch"] = round(time.time() - started, 2)
                phases["first_batch_spark_ms"] = last.get("duration_ms")
                break
            time.sleep(0.25)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        phases["exit_code"] = process.wait(120)
    phases["schema_kept"] = keep_schema
    return phases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000, help="input files already processed (default: %(default)s)")
    parser.add_argument("--rows", type=int, default=20, help="rows per file (default: %(default)s)")
    parser.add_argument("--runs", type=int, default=2, help="restarts per variant (default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument(
        "--state", choices=("spark", "driver"), default="spark", help="the stream's layout (default: %(default)s)"
    )
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="cep-restart-"))
    try:
        (root / "rules").mkdir()
        for name, text in RULES.items():
            (root / "rules" / name).write_text(text)
        (root / "in").mkdir()
        start = dt.datetime(2024, 3, 4)
        for index in range(args.files):
            write_file(
                root / "in", index, charges(args.rows, start + dt.timedelta(minutes=index * args.rows // 8), index)
            )
        first = time.time()
        subprocess.run(
            command(root, "--once", "--state", args.state),
            check=True,
            capture_output=True,
            env=dict(os.environ, PYTHONPATH=str(REPO)),
        )
        results = {
            "state": args.state,
            "files": args.files,
            "rows_per_file": args.rows,
            "first_run_once_s": round(time.time() - first, 1),
            "load_average": os.getloadavg(),
            "restarts": [],
        }
        for _run in range(args.runs):
            for keep in (True, False):
                phases = timed_restart(root, len(results["restarts"]), keep, args.timeout)
                results["restarts"].append(phases)
                print(json.dumps(phases), flush=True)
        results["load_average_after"] = os.getloadavg()
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
