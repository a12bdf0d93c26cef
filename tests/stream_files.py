"""Micro-batches for a stream's file source: one JSON-lines file each, in the order their stamps give.

Spark's file source reads the files it lists in the order of their modification times; each file here is
stamped ``EPOCH_STAMP + 10 * index`` seconds, so a test fixes the order (and can add files while a stream runs).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

# 2023-11-14: a fixed past stamp, so that a run's files sort the same on every machine and every day.
EPOCH_STAMP = 1_700_000_000


def write_batch(directory: Path, index: int, rows: Iterable[dict]) -> Path:
    """``directory/batch-{index:04d}.json``: one JSON line per row (``ts`` as ISO text, or null), stamped.

    Written under a hidden name, stamped, then renamed: a running stream's file source that listed the file
    between its creation and its stamp would read a half-written file, or take the wall clock as the newest
    time it has seen and then skip the next files, stamped years before it, as older than its maxFileAge."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"batch-{index:04d}.json"
    hidden = directory / f".{path.name}"  # Spark's file source skips names that start with a dot
    with hidden.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps({**row, "ts": None if row["ts"] is None else row["ts"].isoformat()}) + "\n")
    stamp = EPOCH_STAMP + 10 * index
    os.utime(hidden, (stamp, stamp))
    hidden.rename(path)
    return path
