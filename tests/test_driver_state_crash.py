"""The driver layout (``--state driver``) killed with SIGKILL at every point of a micro-batch, then restarted:
nothing lost, nothing twice (tests/driver_state_crash_driver.py kills its own process group, JVM included).

One driver after another on the same checkpoint, each killed in micro-batch 1: right after the rules' state was
saved, right after everything of the micro-batch was written (alerts, bad rows, outbox, SQLite, journal), right
after Spark committed it. The stream is then finished from its checkpoint in this process: the alerts equal each
rule's batch replay with no duplicate match id, the SQLite table holds each unsuppressed alert once, each bad row
is in the dead letter once, and the state directory holds two manifests.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from tests import driver_state_crash_driver
from tests.test_alerting import HIGH, SENTINEL, SPAN, ev, price_batches, price_walk, replay, streamed, write_batch
from tests.test_alerting import write_rule as write_rule_file
from tests.test_crash_points import run_driver_until_killed

KILLS = (("after_state", 1), ("after_write", 1), ("after_commit", 1))
BAD_LINE = '{"symbol": "a", "ts": "2024-01-01T00:00:31", "price": "abc"}'


def stopped_at(checkpoint: Path, output: Path, batch: int) -> dict[str, bool]:
    return {
        "state": (checkpoint / "driver-state" / f"m-{batch:012d}.json").exists(),
        "written": (output / "_spark_metadata" / str(batch)).exists(),
        "commit": (checkpoint / "match" / "commits" / str(batch)).exists(),
        "next_written": (output / "_spark_metadata" / str(batch + 1)).exists(),
    }


EXPECTED_STOP = {
    "after_state": {"state": True, "written": False, "commit": False},
    "after_write": {"state": True, "written": True, "commit": False},
    "after_commit": {"commit": True, "next_written": False},
}


@pytest.mark.long
@pytest.mark.spark
def test_sigkill_after_the_state_save_the_writes_and_the_commit_then_restart(spark, tmp_path):
    rules, source, output, checkpoint = tmp_path / "rules", tmp_path / "in", tmp_path / "out", tmp_path / "ck"
    database = tmp_path / "alerts.db"
    write_rule_file(rules, "prices.sql", HIGH)
    write_rule_file(rules, "span.sql", SPAN)
    batches = price_batches() + [
        [ev("a", 85, 105), ev("a", 125, 106), ev("b", 130, 101), ev("s", 95, 25)]
        + price_walk(["c", "d"], 90, 140, 3, seed=5),
        [ev(SENTINEL, 10_000, 0)],
    ]
    for index, rows in enumerate(batches):
        write_batch(source, index, rows)
    path = source / "batch-0001.json"
    stamp = path.stat().st_mtime
    with path.open("a", encoding="utf-8") as fh:
        fh.write(BAD_LINE + "\n")
    os.utime(path, (stamp, stamp))
    args = [str(rules), str(source), str(output), str(checkpoint), str(database)]
    for point, batch in KILLS:
        run_driver_until_killed(tmp_path, args, point, batch, script="driver_state_crash_driver.py")
        where = stopped_at(checkpoint, output, batch)
        assert {k: where[k] for k in EXPECTED_STOP[point]} == EXPECTED_STOP[point], (point, where)

    stream = driver_state_crash_driver.make_stream(spark, *args)
    stream.run_available_now()
    out = stream.alerts().toPandas()
    events = [e for b in batches for e in b]
    assert out["match_id"].is_unique
    assert streamed(out, "prices/high") == replay(HIGH, events) and streamed(out, "span") == replay(SPAN, events)
    with sqlite3.connect(database) as db:
        delivered = sorted(r[0] for r in db.execute("SELECT match_id FROM alerts"))
    assert delivered == sorted(out[~out["suppressed"]]["match_id"])
    letters = spark.read.json(str(checkpoint / "dead-letter" / "bad-rows")).toPandas()
    assert list(letters["_cep_input"]) == [BAD_LINE]
    assert len(list((checkpoint / "driver-state").glob("m-*.json"))) == 2
