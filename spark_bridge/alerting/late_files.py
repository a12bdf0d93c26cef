"""A rule set's late rows on disk: ``<dead letter>/late/batch-<id>.jsonl``, one file per micro-batch.

``AlertStream``'s ``foreachBatch`` writes a micro-batch's file whole (a re-run of the batch replaces it), one
JSON line per rule and late row; ``read_late_rows`` reads them all back (``AlertStream.late_rows``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from cep.spark_bridge.sinks.alerts import iso_utc
from cep.spark_bridge.sinks.base import atomic_write

__all__ = ["read_late_rows", "write_late_rows"]


def write_late_rows(late_dir: str, batch_id: int, rows: Sequence[Any]) -> None:
    """One JSON line per (rule, late row) of micro-batch ``batch_id`` (the stateful step's KIND_LATE rows)."""
    lines = []
    for row in rows:
        try:
            values = json.loads(row["measures"]) if row["measures"] else None
        except ValueError:
            values = row["measures"]
        lines.append(
            json.dumps(
                {
                    "rule_id": row["rule_id"],
                    "rule_version": row["rule_version"],
                    "partition_key": row["partition_key"],
                    "reason": row["match_status"],
                    "event_time": iso_utc(row["first_event_time"]),
                    "batch_id": batch_id,
                    "row": values,
                },
                ensure_ascii=False,
                sort_keys=True,
            )
        )
    os.makedirs(late_dir, exist_ok=True)
    atomic_write(os.path.join(late_dir, f"batch-{batch_id:012d}.jsonl"), "\n".join(lines) + "\n")


def read_late_rows(late_dir: str) -> list[dict]:
    """Every late row written so far under ``late_dir``, as dicts, micro-batch by micro-batch."""
    rows = []
    if os.path.isdir(late_dir):
        for name in sorted(os.listdir(late_dir)):
            if name.endswith(".jsonl") and not name.startswith("."):
                with open(os.path.join(late_dir, name), encoding="utf-8") as fh:
                    rows += [json.loads(line) for line in fh if line.strip()]
    return rows
