"""What a supervisor and Prometheus see of a running rule set: ``/metrics``, ``/healthz``, ``/readyz``.

``cep stream --metrics-port PORT`` serves Prometheus' text format (the ``prometheus-client`` library)
and ``--health-port PORT`` the two probes; one port may serve all three. Every series is read at scrape
time from what ``cep status`` reads (``status.json``'s book and the lanes), so the metrics and the
status never disagree, and counters go on from their value across restarts (they are kept in the
checkpoint, exactly once: ``status.py``). Names follow Prometheus' conventions (``cep_`` prefix,
``_total`` counters, base units):

==============================================  =========  ================================================
series                                          type       labels, meaning
==============================================  =========  ================================================
``cep_alerts_total``                            counter    ``rule``, ``status`` (matched, timeout, absence)
``cep_alerts_suppressed_total``                 counter    ``rule``: alerts throttled (written, not sent)
``cep_late_rows_total``                         counter    ``rule``: rows too late for the rule
``cep_late_input_rows_total``                   counter    input rows late for at least one rule
``cep_bad_rows_total``                          counter    ``reason``: input rows set aside (dead letter)
``cep_live_partial_matches``                    gauge      ``rule``
``cep_pending_rows``                            gauge      ``rule``: rows waiting for the watermark
``cep_state_bytes``                             gauge      the bytes of the rules' state (any state store)
``cep_state_memory_bytes``                      gauge      the memory the state store takes for it
``cep_watermark_lag_seconds``                   gauge      now minus the event-time watermark
``cep_batch_duration_seconds``                  histogram  micro-batches of the matching query
``cep_batches_total``                           counter    micro-batches committed
``cep_last_batch_timestamp_seconds``            gauge      when the last micro-batch with data ran
``cep_sink_delivered_total``                    counter    ``sink``: alerts delivered (redelivered included)
``cep_sink_dead_lettered_total``                counter    ``sink``: alerts that became dead letters
``cep_sink_redelivered_total``                  counter    ``sink``: alerts delivered from dead letters
``cep_sink_failures_total``                     counter    ``sink``: failed attempts (retries, deliveries that raised)
``cep_sink_queue_alerts``                       gauge      ``sink``: alerts waiting in the sink's outbox
``cep_sink_dead_letters``                       gauge      ``sink``: dead letters waiting (refused ones included)
``cep_sink_failing``                            gauge      ``sink``: 1 while its deliveries fail
``cep_rules``                                   gauge      ``state`` (active, error, failed: quarantined at run time)
``cep_rule_failed``                             gauge      ``rule``, ``reason``: 1 while quarantined
``cep_rules_outage``                            gauge      1 while the rules directory cannot be read
==============================================  =========  ================================================

``/healthz`` answers 200 while the process's control loop runs (it last went round less than
``LIVENESS_S`` ago: a JVM frozen for minutes is not alive) and the matching query has not failed.
``/readyz`` answers 200 when the stream is running, its control loop is current, and Spark's last
trigger (a micro-batch, or an idle look for new data) is less than ``ready_window`` seconds old
(default: 10 triggers, at least 60 s); otherwise 503 with the reason as text.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, HTTPServer

from cep.spark_bridge.alerting.status import epoch_seconds, rule_rows
from cep.spark_bridge.engine.keyed import BAD_REASONS

# Imported inside functions: prometheus_client (optional, the "service" extra: only --metrics-port needs it).

__all__ = ["HealthCheck", "ServiceServer", "StreamMetrics", "BATCH_BUCKETS"]

log = logging.getLogger("cep.http")
# The endpoints answer a supervisor and a Prometheus scraper, a few requests a minute: a small pool is plenty,
# and it bounds what a flood of idle connections can hold (one thread each, for ever, before).
SERVICE_WORKERS = 4
SERVICE_QUEUE = 16  # connections accepted and waiting for a worker; past it a new one is closed at once
REQUEST_TIMEOUT_S = 5.0  # a peer that sends no whole request within this is dropped
LIVENESS_S = 300.0  # a control loop stuck this long (a frozen JVM) is not alive
LOOP_CURRENT_S = 15.0  # the control loop goes round about once a second
BATCH_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
_STATUS_LABELS = (("matched", "matched"), ("timeouts", "timeout"), ("absences", "absence"))


class HealthCheck:
    """Liveness and readiness of one ``AlertStream`` (its ``health`` and ``status``)."""

    def __init__(self, stream, *, ready_window: float = 60.0, clock: Callable[[], float] = time.time) -> None:
        self.stream = stream
        self.ready_window = ready_window
        self.clock = clock

    def alive(self) -> tuple[bool, str]:
        if self.stream is None:
            return True, "starting"
        health, now = self.stream.health, self.clock()
        if self.stream.status.get("state") == "failed":
            return False, "the matching query failed (cep status shows why)"
        loop = health.get("loop_at")
        if loop is not None and now - loop > LIVENESS_S:
            return False, f"the control loop has not gone round for {int(now - loop)}s"
        return True, "alive"

    def ready(self) -> tuple[bool, str]:
        if self.stream is None:
            return False, "starting"
        health, status, now = self.stream.health, self.stream.status, self.clock()
        alive, why = self.alive()
        if not alive:
            return False, why
        if health.get("stopping"):
            return False, "stopping"
        if status.get("state") != "running" or not health.get("query_active"):
            return False, f"the stream is {status.get('state', 'starting')}"
        loop = health.get("loop_at")
        if loop is None or now - loop > LOOP_CURRENT_S:
            return False, f"the control loop is behind ({'never ran' if loop is None else f'{int(now - loop)}s'})"
        last = health.get("last_progress_at")
        if last is None:
            return False, "no micro-batch has completed yet"
        if now - last > self.ready_window:
            return False, f"Spark's last trigger was {int(now - last)}s ago (more than {self.ready_window:g}s)"
        return True, "ready"


class StreamMetrics:
    """A Prometheus collector over one ``AlertStream``; ``registry()`` gives a registry holding it."""

    def __init__(self, stream, clock: Callable[[], float] = time.time) -> None:
        from prometheus_client import CollectorRegistry, Histogram

        self.stream = stream
        self.clock = clock
        self._registry = CollectorRegistry(auto_describe=False)
        self.batch_duration = Histogram(
            "cep_batch_duration_seconds",
            "Duration of the matching query's micro-batches",
            buckets=BATCH_BUCKETS,
            registry=self._registry,
        )
        self._registry.register(self)
        stream.observers.append(self._observe)

    def registry(self):
        return self._registry

    def _observe(self, batch: dict) -> None:
        if batch.get("duration_ms") is not None:
            self.batch_duration.observe(float(batch["duration_ms"]) / 1000.0)

    def describe(self):  # an unchecked collector (auto_describe off): nothing to declare up front
        return []

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        status = self.stream.status
        rows = rule_rows(status)
        alerts = CounterMetricFamily(
            "cep_alerts", "Alerts emitted, by rule and match status", labels=["rule", "status"]
        )
        suppressed = CounterMetricFamily("cep_alerts_suppressed", "Alerts throttled by suppression", labels=["rule"])
        late = CounterMetricFamily("cep_late_rows", "Rows too late for a rule", labels=["rule"])
        live = GaugeMetricFamily("cep_live_partial_matches", "Partial matches in state", labels=["rule"])
        pending = GaugeMetricFamily("cep_pending_rows", "Rows waiting for the watermark", labels=["rule"])
        for rule_id, rule in sorted(status.get("rules", {}).items()):
            versions = rule.get("versions", {}).values()
            for key, label in _STATUS_LABELS:
                alerts.add_metric([rule_id, label], sum(v.get(key, 0) for v in versions))
            suppressed.add_metric([rule_id], sum(v.get("suppressed", 0) for v in versions))
            late.add_metric([rule_id], sum(v.get("late_rows", 0) for v in versions))
            live.add_metric([rule_id], sum(max(0, v.get("live_partial_matches", 0)) for v in versions))
            pending.add_metric([rule_id], sum(max(0, v.get("pending_rows", 0)) for v in versions))
        yield from (alerts, suppressed, late, live, pending)
        yield CounterMetricFamily(
            "cep_late_input_rows", "Input rows late for at least one rule", value=status.get("late_rows", 0)
        )
        bad = CounterMetricFamily("cep_bad_rows", "Input rows set aside as bad, by reason", labels=["reason"])
        counts = {reason: 0 for reason in BAD_REASONS}  # every reason from the start, so that rate() sees its first row
        counts.update(status.get("bad_rows") or {})
        for reason, count in sorted(counts.items()):
            bad.add_metric([reason], count)
        yield bad
        last = status.get("last_batch") or {}
        yield GaugeMetricFamily(
            "cep_state_bytes",
            "Bytes of the rules' state: the HDFS-backed store's current version, RocksDB's SST files and "
            "memtables, or the driver's buckets",
            value=last.get("state_bytes", 0),
        )
        yield GaugeMetricFamily(
            "cep_state_memory_bytes",
            "Memory the state store takes: the HDFS-backed store's loaded versions on the heap, RocksDB's "
            "native memory (under its cap), or the driver's buckets",
            value=last.get("state_memory_bytes", 0),
        )
        watermark = epoch_seconds(last.get("watermark"))
        if watermark is not None and watermark > 0:
            yield GaugeMetricFamily(
                "cep_watermark_lag_seconds",
                "Now minus the event-time watermark",
                value=max(0.0, self.clock() - watermark),
            )
        yield CounterMetricFamily("cep_batches", "Micro-batches committed", value=status.get("batches", 0))
        moment = epoch_seconds(last.get("time"))
        if moment is not None:
            yield GaugeMetricFamily(
                "cep_last_batch_timestamp_seconds", "When the last micro-batch with data ran", value=moment
            )
        families = {
            "delivered": CounterMetricFamily("cep_sink_delivered", "Alerts delivered", labels=["sink"]),
            "dead_lettered": CounterMetricFamily(
                "cep_sink_dead_lettered", "Alerts that became dead letters", labels=["sink"]
            ),
            "redelivered": CounterMetricFamily(
                "cep_sink_redelivered", "Alerts delivered from dead letters", labels=["sink"]
            ),
            "failures": CounterMetricFamily("cep_sink_failures", "Failed delivery attempts", labels=["sink"]),
            "queue_alerts": GaugeMetricFamily(
                "cep_sink_queue_alerts", "Alerts waiting in the sink's outbox", labels=["sink"]
            ),
            "dead_letters_waiting": GaugeMetricFamily("cep_sink_dead_letters", "Dead letters waiting", labels=["sink"]),
            "failing": GaugeMetricFamily("cep_sink_failing", "1 while the sink's deliveries fail", labels=["sink"]),
        }
        for key, sink in sorted((status.get("sinks") or {}).items()):
            values = {
                "delivered": sink.get("delivered", 0),
                "dead_lettered": sink.get("dead_lettered", 0),
                "redelivered": sink.get("redelivered", 0),
                "failures": sink.get("retries", 0) + sink.get("failures", 0),
                "queue_alerts": sink.get("queue_alerts", 0),
                "dead_letters_waiting": sink.get("dead_letters_waiting", 0),
                "failing": 1 if sink.get("failing_since") else 0,
            }
            for name, family in families.items():
                family.add_metric([key], values[name])
        yield from families.values()
        states = GaugeMetricFamily("cep_rules", "Rules by state", labels=["state"])
        for state in ("active", "error", "failed"):
            states.add_metric([state], sum(1 for r in rows if r["state"] == state))
        yield states
        failed = GaugeMetricFamily(
            "cep_rule_failed",
            "1 for a rule quarantined after failing at run time (until its "
            "file changes), with the error's type and code",
            labels=["rule", "reason"],
        )
        for rule_id, rule in sorted(status.get("rules", {}).items()):
            record = rule.get("failed")
            if record and not rule.get("active"):
                failed.add_metric([rule_id, str(record.get("error") or "").split(":", 1)[0][:100]], 1)
        yield failed
        yield GaugeMetricFamily(
            "cep_rules_outage", "1 while the rules cannot be read", value=1 if status.get("rules_outage") else 0
        )


class _BoundedHTTPServer(HTTPServer):
    """An HTTP server with a fixed pool of threads: an idle or slow peer holds a worker for at most
    ``REQUEST_TIMEOUT_S``; past ``SERVICE_WORKERS`` + ``SERVICE_QUEUE`` peers at once, a new connection is
    closed at once (the probes of a supervisor come again). A peer that hangs up early is a debug line,
    never a traceback on stderr (which would break ``--log-format json``)."""

    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], handler) -> None:
        super().__init__(address, handler)
        self.pool = ThreadPoolExecutor(SERVICE_WORKERS, thread_name_prefix=f"cep-http-{self.server_address[1]}")
        self.slots = threading.BoundedSemaphore(SERVICE_WORKERS + SERVICE_QUEUE)

    def process_request(self, request, client_address) -> None:
        if not self.slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        self.pool.submit(self._serve, request, client_address)

    def _serve(self, request, client_address) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception as exc:  # noqa: BLE001 - a peer that hung up or sent garbage: its problem, not the stream's
            log.debug("HTTP peer %s: %s: %s", client_address[0], type(exc).__name__, exc)
        finally:
            self.shutdown_request(request)
            self.slots.release()

    def handle_error(self, request, client_address) -> None:
        log.debug("HTTP peer %s: request failed", client_address[0])

    def server_close(self) -> None:
        super().server_close()
        self.pool.shutdown(wait=False, cancel_futures=True)


class ServiceServer:
    """A small HTTP server on its own thread: ``/metrics`` (with ``metrics``), ``/healthz`` and ``/readyz``
    (with ``health``); anything else is a 404. ``host`` is where it listens: ``cep stream`` gives 127.0.0.1
    unless the option names a host."""

    def __init__(
        self, host: str, port: int, *, metrics: StreamMetrics | None = None, health: HealthCheck | None = None
    ) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            timeout = REQUEST_TIMEOUT_S  # a peer that sends nothing is dropped after this

            def log_message(self, *args):  # no access log on stderr
                pass

            def do_GET(self):  # noqa: N802 - http.server's name
                path = self.path.split("?", 1)[0]
                if path == "/metrics" and server.metrics is not None:
                    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

                    body, code, kind = generate_latest(server.metrics.registry()), 200, CONTENT_TYPE_LATEST
                elif path in ("/healthz", "/readyz") and server.health is not None:
                    ok, why = server.health.alive() if path == "/healthz" else server.health.ready()
                    body, code, kind = (why + "\n").encode("utf-8"), 200 if ok else 503, "text/plain; charset=utf-8"
                else:
                    body, code, kind = b"not found\n", 404, "text/plain; charset=utf-8"
                self.send_response(code)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.metrics = metrics
        self.health = health
        self.httpd = _BoundedHTTPServer((host, port), Handler)
        self.host = host
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, name=f"cep-http-{self.port}", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)
