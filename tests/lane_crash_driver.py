"""Delivery lanes that SIGKILL themselves at one commit point of a micro-batch (used by test_lane_crash_points.py).

    python tests/lane_crash_driver.py CHECKPOINT SINK_KIND SINK_ARGUMENT POINT BATCHES

Spools BATCHES micro-batches of 3 alerts into the sink's outbox (on the first run only, as the stream's
delivery query would), then delivers and folds the journal into ``status.json`` with the stream's own code
(``AlertStream._fold_journal`` and ``write_status``), and kills its own process right after POINT of
micro-batch 1:

* ``delivered``: the sink took the micro-batch (a transaction committed), its journal record not written;
* ``journaled``: the journal record written, the outbox entry still there;
* ``taken_out``: the outbox entry removed, the record not folded yet;
* ``status_written``: the status written with the record folded, the record not deleted yet;
* ``none``: no kill (the restart, which finishes the work). The tests run the restart in their own process
  (``main`` returns the sink's status entry): only the kill needs a process of its own.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import sys
import time

from cep.spark_bridge.alerting.status import StatusBook
from cep.spark_bridge.alerting.stream import AlertStream
from cep.spark_bridge.sinks.fanout import make_sink
from cep.spark_bridge.sinks.lanes import DeliveryLanes, Journal

KILL_BATCH = 1


def alerts(batch: int) -> list[dict]:
    return [
        {
            "rule_id": "r",
            "rule_version": "v1",
            "match_id": f"{batch:04d}{i:028d}",
            "match_status": "MATCHED",
            "partition_key": json.dumps({"k": i}),
            "first_event_time": dt.datetime(2024, 1, 1, 0, 0, i),
            "last_event_time": dt.datetime(2024, 1, 1, 0, 1, i),
            "measures": json.dumps({"n": i}),
            "emit_time": dt.datetime(2026, 1, 1, 0, 0, batch),
            "suppressed": False,
        }
        for i in range(3)
    ]


def die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def main(checkpoint: str, kind: str, argument: str, point: str, batches: int) -> dict:
    """The lanes' run to POINT (``none``: to the end); returns the sink's entry in the status."""
    sink = make_sink(kind, None if argument == "-" else argument, state_dir=os.path.join(checkpoint, "sinks"))
    stream = AlertStream.__new__(AlertStream)  # the stream's bookkeeping only: no Spark
    stream.checkpoint, stream.on_event, stream._to_remove = checkpoint, None, []
    stream.book = StatusBook(os.path.join(checkpoint, "status.json"))
    stream.journal = Journal(os.path.join(checkpoint, "journal"))
    stream.lanes = DeliveryLanes([sink], os.path.join(checkpoint, "outbox"), stream.journal)
    marker = os.path.join(checkpoint, "spooled")
    if not os.path.exists(marker):
        for batch in range(batches):
            stream.lanes.outbox.put(sink.key(), batch, alerts(batch))
        open(marker, "w").close()

    deliver, write, remove = sink.deliver, stream.journal.write, stream.lanes.outbox.remove
    book_write = stream.book.write

    def deliver_then(alerts_, batch_id):
        report = deliver(alerts_, batch_id)
        if point == "delivered" and batch_id == KILL_BATCH:
            die()
        return report

    def write_then(name, record):
        write(name, record)
        if point == "journaled" and record.get("batch") == KILL_BATCH:
            die()

    def remove_then(key, batch_id):
        remove(key, batch_id)
        if point == "taken_out" and batch_id == KILL_BATCH:
            die()

    def book_write_then():
        book_write()
        if point == "status_written" and any(name.endswith(f".{KILL_BATCH:012d}") for name in stream._to_remove):
            die()

    sink.deliver, stream.journal.write, stream.lanes.outbox.remove = deliver_then, write_then, remove_then
    stream.book.write = book_write_then
    stream.lanes.start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        stream.lanes.drain(5)
        stream._fold_journal()
        stream.write_status()
        if not stream.lanes.outbox.entries(sink.key()) and not stream.journal.pending():
            break
        time.sleep(0.05)  # the next round of the stream's poll loop
    stream.lanes.stop(10)
    return stream.status["sinks"][sink.key()]


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))))
