"""A delivery lane killed with SIGKILL at every commit point of a micro-batch, then restarted: the sink's
delivered count in ``status.json`` equals what the receiver holds, exactly (tests/lane_crash_driver.py).

A micro-batch delivered again after a kill goes to a sink idempotent by match_id (SQLite here, a Kafka
transaction skipped by its batch id in tests/kafka_tests/test_kafka_lane_crash.py); the status counts each
micro-batch's journal record once, by its name.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests import lane_crash_driver

ROOT = Path(__file__).resolve().parents[1]
POINTS = ("delivered", "journaled", "taken_out", "status_written")
BATCHES = 3


def run_driver(checkpoint: Path, kind: str, argument: str, point: str) -> subprocess.CompletedProcess:
    driver = str(ROOT / "tests" / "lane_crash_driver.py")
    return subprocess.run(
        [sys.executable, driver, str(checkpoint), kind, argument, point, str(BATCHES)],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )


def kill_then_restart(checkpoint: Path, kind: str, argument: str, point: str) -> dict:
    """The sink's status entry after a run killed at ``point`` (a child process: SIGKILL ends a process) and its
    restart, which runs in the test's process: the restart's own code is what it checks, not a process start
    (a Python child that imports cep costs more than a second of CPU)."""
    killed = run_driver(checkpoint, kind, argument, point)
    assert killed.returncode == -9, killed.stdout + killed.stderr  # it did reach the point
    return lane_crash_driver.main(str(checkpoint), kind, argument, "none", BATCHES)


@pytest.mark.parametrize("point", POINTS)
def test_the_sqlite_count_is_exact_after_a_kill_at_each_commit_point(point, tmp_path):
    database = tmp_path / "alerts.db"
    entry = kill_then_restart(tmp_path / "ck", "sqlite", str(database), point)
    with sqlite3.connect(database) as db:
        held = db.execute("SELECT COUNT(*) FROM alerts").fetchone()[0]
    assert held == 3 * BATCHES
    assert entry["delivered"] == held, entry
    assert not list((tmp_path / "ck" / "journal").glob("*.json"))
