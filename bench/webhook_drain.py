"""How fast a webhook lane drains the alerts that waited through a receiver outage, to a real local receiver.

    .venv/bin/python bench/webhook_drain.py                                   # this checkout: "after"
    ../main/.venv/bin/python bench/webhook_drain.py --label before --no-report  # another checkout's sink

A backlog of ``--alerts`` alerts (the outbox after an outage) is delivered by one ``WebhookSink`` in micro-batches
of ``--micro-batch`` alerts, as its lane delivers them, to an HTTP/1.1 receiver on 127.0.0.1 (Python's
``ThreadingHTTPServer``, keeping connections alive; it parses each body, as a receiver must). Per body format:
alerts per second of wall time, requests and TCP connections the receiver saw. Run by another checkout's
interpreter (its editable install), it measures that checkout's ``WebhookSink`` (an older commit: the *before*)
with the same receiver and backlog. Results:
bench/results-webhook-drain.json (one entry per ``--label``); bench/run.py's report writes their section of
docs/performance.md (``webhook_drain_report``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results-webhook-drain.json"
# The backlog the on-call engineer's stream had after its receiver outage, rounded up.
DEFAULT_ALERTS = 3_000
DEFAULT_MICRO_BATCH = 100
# (label, format, batch size: None = the format's default)
SCENARIOS = (
    ("json, one alert per request", "json", None),
    ("pagerduty (one event per request)", "pagerduty", None),
    ("alertmanager (default batch)", "alertmanager", None),
    ("json, --webhook-batch 100", "json", 100),
)


class Receiver:
    """Counts connections and requests; answers 200 with a small JSON body."""

    def __init__(self) -> None:
        self.connections = 0
        self.requests = 0
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Its status line and headers, then its body, go out in two writes: with Nagle's algorithm on, the
            # second waits for the client's delayed ACK (40 ms on Linux) on a kept connection. Receivers built for
            # keep-alive set TCP_NODELAY (Go's net/http, which Alertmanager uses, does by default).
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def setup(self):
                super().setup()
                with receiver.lock:
                    receiver.connections += 1

            def do_POST(self):  # noqa: N802 - http.server's name
                json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with receiver.lock:
                    receiver.requests += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def backlog(count: int) -> list[dict]:
    start = dt.datetime(2024, 1, 1)
    return [
        {
            "rule_id": "fraud/card_testing",
            "rule_version": "3a10c574d2458489",
            "match_id": f"{i:032x}",
            "match_status": "MATCHED",
            "partition_key": json.dumps({"card": f"c{i % 500}"}),
            "first_event_time": start + dt.timedelta(seconds=i),
            "last_event_time": start + dt.timedelta(seconds=i + 5),
            "measures": json.dumps({"card": f"c{i % 500}", "smalls": 3, "big": 900.5}),
            "emit_time": start + dt.timedelta(seconds=i + 6),
            "suppressed": False,
        }
        for i in range(count)
    ]


def drain(fmt: str, batch: int | None, alerts: list[dict], micro_batch: int) -> dict:
    from cep.spark_bridge.sinks.payloads import BodyFormat
    from cep.spark_bridge.sinks.webhook import WebhookSink

    receiver = Receiver()
    options: dict = {"body_format": BodyFormat(fmt, routing_key="R" * 32 if fmt == "pagerduty" else None)}
    if batch is not None:
        options["batch_size"] = batch
    with tempfile.TemporaryDirectory() as dead:
        sink = WebhookSink(receiver.url, dead_letter_dir=dead, **options)
        started = time.perf_counter()
        delivered = 0
        for batch_id, at in enumerate(range(0, len(alerts), micro_batch)):
            report = sink.deliver(alerts[at : at + micro_batch], batch_id)
            delivered += sum(report.delivered.values())
        seconds = time.perf_counter() - started
    receiver.stop()
    assert delivered == len(alerts), f"{delivered} of {len(alerts)} delivered"
    return {
        "alerts": len(alerts),
        "seconds": round(seconds, 3),
        "alerts_per_s": round(len(alerts) / seconds, 1),
        "requests": receiver.requests,
        "connections": receiver.connections,
    }


def _rate(run: dict) -> float:
    return run["alerts_per_s"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--alerts", type=int, default=DEFAULT_ALERTS)
    parser.add_argument("--micro-batch", type=int, default=DEFAULT_MICRO_BATCH)
    parser.add_argument("--repeats", type=int, default=3, help="runs per format; the median is kept")
    parser.add_argument("--label", default="after", help="the name of this run in the results (before, after)")
    parser.add_argument("--no-report", action="store_true", help="do not rewrite docs/performance.md")
    args = parser.parse_args(argv)
    alerts = backlog(args.alerts)
    runs = {}
    for label, fmt, batch in SCENARIOS:
        tries = sorted((drain(fmt, batch, alerts, args.micro_batch) for _ in range(args.repeats)), key=_rate)
        runs[label] = {**tries[len(tries) // 2], "repeats": args.repeats}  # the median run
        print(f"{args.label}: {label}: {runs[label]}", flush=True)
    found = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    found[args.label] = {
        "when": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}",
        "micro_batch": args.micro_batch,
        "runs": runs,
    }
    RESULTS.write_text(json.dumps(found, indent=2) + "\n")
    if not args.no_report:
        sys.path.insert(0, str(HERE.parent))
        from bench import run as bench_run  # noqa: PLC0415 - the report needs the whole bench

        if bench_run.RESULTS.exists():
            bench_run.main(["--report-only"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
