"""Dead letters on a disk that fills mid-batch, on a real small file system (a tmpfs).

Found running the on-call walkthrough with `--dead-letter` on a 256 KiB tmpfs and a receiver answering 500:
the delivery wrote letters until the disk was full, then raised (the micro-batch stays in the outbox, as it
must). Once there was space again, the micro-batch was delivered whole and then the letters written before
the disk filled were redelivered too: 61 alerts sent twice, `cep_sink_redelivered_total` 61 while
`cep_sink_dead_lettered_total` stayed 0. Now a delivery that cannot write a letter takes back the letters it
wrote: the outbox alone holds the micro-batch. Real parts: a tmpfs (mounting one needs root), a real HTTP
receiver (tests/test_sinks.py's `Receiver`), the webhook sink. No Spark.
"""

from __future__ import annotations

import os
import subprocess
from collections import Counter

import pytest

from cep.spark_bridge.sinks.base import CepSinkError
from tests.test_sinks import alert, receiver_factory, webhook  # noqa: F401 - the fixture


@pytest.fixture()
def small_disk(tmp_path):
    """A 64 KiB tmpfs: room for a few dozen dead letters."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"mount -t tmpfs failed: {done.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_batch_stopped_by_a_full_disk_takes_back_its_letters_and_each_alert_goes_once(receiver_factory, small_disk):
    receiver = receiver_factory(plan=["500"] * 1000)  # down for the first delivery
    sink = webhook(receiver.url, small_disk, max_attempts=1)
    batch = [alert(i) for i in range(300)]  # about 1 KiB a letter: far more than the disk holds
    with pytest.raises(CepSinkError, match="No space left on device"):
        sink.deliver(batch, batch_id=7)
    assert len(receiver.requests) > 1  # several letters were written before the disk was full
    assert not list(sink.dead_letters.letters())  # taken back: the outbox keeps the micro-batch
    receiver.plan.clear()  # the receiver answers again; the outbox delivers the micro-batch again
    report = sink.deliver(batch, batch_id=7)
    assert sum(report.delivered.values()) == 300 and not report.dead_lettered
    assert sink.replay_dead_letters() == (0, 0)  # nothing left to send twice
    taken = Counter(key for key, action in receiver.requests if action == "ok")
    assert sorted(taken) == sorted(a["match_id"] for a in batch) and set(taken.values()) == {1}
