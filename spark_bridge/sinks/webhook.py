"""``WebhookSink``: alerts as HTTP POSTs with idempotency keys, retried, and dead-lettered when they still
fail (the package docstring, ``sinks/__init__.py``, has the rules; ``payloads.py`` the bodies).

Two things an HTTP client does by default that an alert sink must not:

* **follow redirects**: urllib re-sends a 301/302 as a GET without the body, to whatever host the
  answer names (``ftp://`` included), with our headers, and reports success. Here a 3xx is a failed
  attempt (retried, then dead-lettered) whose error names where it pointed (scheme and host);
* **time out per read**: a socket timeout bounds each read, so a server sending one byte a second
  holds a request for ever. Here ``timeout`` is a deadline for the whole request (connect, send,
  answer): when it passes, the socket is shut down under the waiting read.

And one thing it does by default that costs an alert sink its speed: urllib opens a connection per
request and asks the server to close it (``Connection: close``), a TCP (and TLS) handshake per alert. Here
each sink (one per delivery lane) keeps **one persistent HTTP/1.1 connection** (``_KeptConnection``),
reused request after request, closed and opened again after any failure, a deadline, or an answer that
says it closes. A request on a reused connection that the server had already closed while it sat idle
(nothing answered: the connection reset, or closed before the status line) is sent once more at once on
a new connection, without counting as an attempt: the same request with the same idempotency key.
``HTTP_PROXY``/``HTTPS_PROXY``/``NO_PROXY`` are honoured as urllib honours them (a ``CONNECT`` tunnel for
https).
"""

from __future__ import annotations

import base64
import contextlib
import datetime as _dt
import hashlib
import http.client
import json
import os
import socket
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence

from cep.spark_bridge.sinks.alerts import alert_payload
from cep.spark_bridge.sinks.base import (
    AlertSink,
    Attempt,
    CepSinkError,
    Delivery,
    DeliveryError,
    RetryPolicy,
    not_committed,
)
from cep.spark_bridge.sinks.dead_letters import DeadLetter, DeadLetterBox
from cep.spark_bridge.sinks.payloads import SIGNATURE_HEADER, BodyFormat, RuleNotes, enrich, signature
from cep.spark_bridge.sinks.safe_text import check_url, scrub, url_key, url_label, visible

__all__ = ["WebhookSink", "check_headers"]

_RETRY_STATUS = {408, 425, 429}
ANSWER_LIMIT = 65536  # bytes of an answer read (and thrown away): a receiver cannot make us read for ever
USER_AGENT = "cep-webhook/1"
_TOKEN = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_RESERVED_HEADERS = {"content-length", "host", "idempotency-key", SIGNATURE_HEADER.lower()}


def check_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Header names must be HTTP tokens and values one line (no header injection); returns them."""
    for name, value in headers.items():
        if not name or any(c not in _TOKEN for c in name):
            raise ValueError(f"header name {visible(name)!r} is not a valid HTTP header name")
        if name.lower() in _RESERVED_HEADERS:
            raise ValueError(f"header {name} is set by cep itself")
        if any(c in value for c in "\r\n\0"):
            raise ValueError(f"the value of header {name} holds a line break")
    return dict(headers)


class _Deadline:
    """Shuts the request's socket down when the time is up, so a trickling server cannot hold it."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.expired = False
        self._connections: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def watch(self, connection: http.client.HTTPConnection) -> None:
        with self._lock:
            self._connections.append(connection)

    def _fire(self) -> None:
        with self._lock:
            self.expired = True
            for connection in self._connections:
                sock = getattr(connection, "sock", None)
                if sock is not None:
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

    def cancel(self) -> None:
        self._timer.cancel()


# Failures of a request on a reused connection that mean the server closed it while it was idle (nothing
# of the request was answered): sent again at once on a fresh connection (``_KeptConnection.post``).
_STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


class _KeptConnection:
    """One persistent HTTP/1.1 connection to a webhook's host (through its proxy, if the environment names
    one), used by one lane at a time (a lock: ``cep deliver`` may share the sink)."""

    def __init__(self, url: str) -> None:
        parts = urllib.parse.urlsplit(url)
        self.url = url
        self.https = parts.scheme == "https"
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if self.https else 80)
        self.netloc = parts.netloc.rpartition("@")[2]
        self.path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.proxy = _proxy_for(url, parts.scheme, self.host)
        self.lock = threading.Lock()
        self.connection: http.client.HTTPConnection | None = None
        self.opened = 0  # connections opened (the tests and bench count them)

    def _open(self, timeout: float) -> http.client.HTTPConnection:
        proxy_headers = {}
        if self.proxy is not None:
            host, port, authorization = self.proxy
            if authorization:
                proxy_headers["Proxy-Authorization"] = authorization
        else:
            host, port = self.host, self.port
        if self.https:
            connection = http.client.HTTPSConnection(host, port, timeout=timeout, context=ssl.create_default_context())
            if self.proxy is not None:
                connection.set_tunnel(self.host, self.port, headers=proxy_headers)
        else:
            connection = http.client.HTTPConnection(host, port, timeout=timeout)
        self.opened += 1
        return connection

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    def post(
        self, headers: dict[str, str], body: bytes, deadline: _Deadline, timeout: float
    ) -> tuple[int, str, http.client.HTTPMessage]:
        """(status, reason, headers) of one POST; at most ``ANSWER_LIMIT`` bytes of the answer are read."""
        with self.lock:
            for fresh in (self.connection is None, True):
                if self.connection is None:
                    self.connection = self._open(timeout)
                deadline.watch(self.connection)
                try:
                    return self._exchange(headers, body)
                except _STALE:
                    self.close()
                    if fresh or deadline.expired:
                        raise
                except BaseException:
                    self.close()
                    raise
            raise AssertionError("unreachable: the second pass is on a fresh connection")

    def _exchange(self, headers: dict[str, str], body: bytes) -> tuple[int, str, http.client.HTTPMessage]:
        connection = self.connection
        assert connection is not None
        target = self.path
        if self.proxy is not None and not self.https:  # a plain-http proxy takes the absolute URL
            target = f"http://{self.netloc}{self.path}"
            headers = {**headers, "Host": self.netloc}
            if self.proxy[2]:
                headers["Proxy-Authorization"] = self.proxy[2]
        connection.request("POST", target, body=body, headers=headers)
        response = connection.getresponse()
        response.read(ANSWER_LIMIT)
        if response.will_close or not response.isclosed():  # it closes, or its answer was too long to finish
            self.close()
        return response.status, response.reason, response.headers


def _proxy_for(url: str, scheme: str, host: str) -> tuple[str, int, str | None] | None:
    """(host, port, Proxy-Authorization) of the proxy the environment names for ``url``, as urllib picks it."""
    proxy = urllib.request.getproxies().get(scheme)
    if not proxy or urllib.request.proxy_bypass(host):
        return None
    parts = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    authorization = None
    if parts.username is not None:
        user = urllib.parse.unquote(parts.username)
        password = urllib.parse.unquote(parts.password or "")
        authorization = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return parts.hostname or "", parts.port or 80, authorization


class _Permanent(Exception):
    """An answer that retrying cannot fix (a 4xx other than 408/425/429), or a body that cannot be made."""


class WebhookSink(AlertSink):
    """POST alerts with an ``Idempotency-Key``; retries with backoff; dead letters, never drops.

    ``body_format``: a ``payloads.BodyFormat`` (default: ``{"alerts": [...]}``). ``batch_size``: alerts per
    request (default: the format's ``default_batch``: 64 for Alertmanager, else 1). ``headers``: sent with
    every request, never written anywhere. ``secret``: signs every request (``X-Cep-Signature``).
    ``rule_notes(rule_id, version)``: the rule's severity and summary (the stream sets it).
    """

    name = "webhook"

    def __init__(
        self,
        url: str,
        *,
        dead_letter_dir: str,
        timeout: float = 10.0,
        max_attempts: int = 5,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        retry_budget: float = 120.0,
        batch_size: int | None = None,
        headers: Mapping[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        retry: RetryPolicy | None = None,
        body_format: BodyFormat | None = None,
        secret: str | bytes | None = None,
        rule_notes: Callable[[str, str], RuleNotes] | None = None,
    ) -> None:
        check_url(url)
        if batch_size is not None and batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if timeout <= 0:
            raise ValueError("the webhook timeout must be positive")
        # One retry policy for every sink (base.RetryPolicy): the keyword arguments are its fields,
        # spelled one by one; ``retry`` replaces them all. Per request: max_attempts; per micro-batch: budget.
        try:
            self.retry = retry or RetryPolicy(
                max_attempts=max_attempts, backoff=backoff, max_backoff=max_backoff, budget=retry_budget
            )
        except ValueError as exc:
            raise ValueError(f"webhook retries: {exc}") from None
        self.url = url
        self.body_format = body_format or BodyFormat("json")
        batch_size = batch_size if batch_size is not None else self.body_format.default_batch
        limit = self.body_format.max_batch
        if limit is not None and batch_size > limit:
            raise ValueError(
                f"the {self.body_format.name} format takes at most {limit} alert(s) per request (--webhook-batch)"
            )
        self.dead_letter_dir = dead_letter_dir
        self.dead_letters = DeadLetterBox(dead_letter_dir, sink=self.key(), sink_label=self.describe())
        self.timeout = timeout
        self.batch_size = batch_size
        self.headers = check_headers(dict(headers or {}))
        self.secret = secret.encode("utf-8") if isinstance(secret, str) else secret
        self.rule_notes = rule_notes
        self.connection = _KeptConnection(url)
        self.sleep = sleep
        self.clock = clock
        self._secrets = [url, url.split("?", 1)[0], *self.headers.values()] + (
            [secret] if isinstance(secret, str) else []
        )

    @property
    def max_attempts(self) -> int:
        return self.retry.max_attempts

    @property
    def retry_budget(self) -> float:
        return self.retry.budget

    def describe(self) -> str:
        return f"webhook {url_label(self.url)}"

    def key(self) -> str:
        return url_key("webhook", self.url)

    def redact(self, text: str) -> str:
        return scrub(text, self._secrets)

    # -- keys and bodies

    @staticmethod
    def batch_key(match_ids: Sequence[str]) -> str:
        if len(match_ids) == 1:
            return match_ids[0]
        digest = hashlib.sha256(",".join(sorted(match_ids)).encode("utf-8")).hexdigest()[:32]
        return f"batch-{digest}"

    def requests(self, alerts: Sequence[dict]) -> list[tuple[str, list[dict]]]:
        """(idempotency key, alerts) per request: one per match, or chunks of ``batch_size`` by match id."""
        ordered = sorted(alerts, key=lambda a: a["match_id"] or "")
        chunks = [ordered[i : i + self.batch_size] for i in range(0, len(ordered), self.batch_size)]
        return [(self.batch_key([a["match_id"] for a in chunk]), chunk) for chunk in chunks]

    def payloads(self, alerts: Sequence[dict]) -> list[dict]:
        """The alerts as the receiver gets them: JSON objects with the rule's severity and summary."""
        out = []
        for alert in alerts:
            if "severity" not in alert:  # an alert row; a dead letter keeps the payloads it was given
                notes = (
                    self.rule_notes(alert.get("rule_id"), alert.get("rule_version")) if self.rule_notes else RuleNotes()
                )
                alert = enrich(alert_payload(alert), notes)
            out.append(alert)
        return out

    # -- sending

    def _post(self, key: str, body: bytes) -> None:
        headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT, "Idempotency-Key": key}
        headers.update(self.headers)
        if self.secret is not None:
            headers[SIGNATURE_HEADER] = signature(self.secret, int(time.time()), body)
        deadline = _Deadline(self.timeout)
        try:
            status, reason, answer_headers = self.connection.post(headers, body, deadline, self.timeout)
        except Exception:
            if deadline.expired:
                raise TimeoutError(f"no complete answer within the deadline of {self.timeout:g}s") from None
            raise
        finally:
            deadline.cancel()
        if deadline.expired:
            raise TimeoutError(f"no complete answer within the deadline of {self.timeout:g}s")
        if not 200 <= status < 300:  # as urllib reports it: _attempt tells retried answers from refusals
            raise urllib.error.HTTPError(self.url, status, reason, answer_headers, None)  # type: ignore[arg-type]

    def _attempt(self, key: str, body: bytes) -> tuple[bool, str, float | None]:
        """(ok, error text, Retry-After seconds); raises _Permanent for an answer not worth retrying."""
        try:
            self._post(key, body)
            return True, "", None
        except urllib.error.HTTPError as exc:
            retry_after = None
            try:
                retry_after = (
                    float(exc.headers.get("Retry-After")) if exc.headers and exc.headers.get("Retry-After") else None
                )
            except (TypeError, ValueError):
                retry_after = None
            text = f"HTTP {exc.code} {exc.reason}"
            if 300 <= exc.code < 400:
                location = exc.headers.get("Location") if exc.headers else None
                where = url_label(location) if location else "nowhere (no Location header)"
                return (
                    False,
                    f"{text}: a redirect to {where}, not followed (a moved receiver is a configuration to fix)",
                    retry_after,
                )
            if exc.code >= 500 or exc.code in _RETRY_STATUS:
                return False, text, retry_after
            raise _Permanent(text) from None
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, (TimeoutError, socket.timeout)):
                return False, f"timed out after {self.timeout:g}s", None
            text = f"{type(reason).__name__}: {reason}" if isinstance(reason, BaseException) else str(reason)
            return False, self.redact(text), None
        except TimeoutError as exc:
            return False, str(exc) if "deadline" in str(exc) else f"timed out after {self.timeout:g}s", None
        except (ConnectionError, http.client.HTTPException, OSError) as exc:
            return False, self.redact(f"{type(exc).__name__}: {exc}"), None

    def send(
        self, key: str, alerts: Sequence[dict], *, deadline: float, batch_id: int | None = None
    ) -> tuple[bool, list[str], int]:
        """POST one request with retries; (delivered, errors, retries). Raises ``_Permanent`` when the
        receiver refuses it or its body cannot be made (a template failing on this alert)."""
        try:
            body = self.body_format.body(self.payloads(alerts))
        except ValueError as exc:
            raise _Permanent(str(exc)) from None
        errors: list[str] = []
        for attempt in range(self.max_attempts):
            if attempt > 0 and self.clock() >= deadline:
                errors.append(f"retry budget of {self.retry_budget:g}s for this micro-batch used up")
                return False, errors, attempt - 1
            try:
                ok, error, retry_after = self._attempt(key, body)
            except _Permanent as exc:
                errors.append(f"{exc} (not retried)")
                raise _Permanent("; ".join(errors)) from None
            if ok:
                return True, errors, attempt
            errors.append(error)
            if attempt + 1 == self.max_attempts:
                break
            wait = self.retry.delay(attempt)
            if retry_after is not None:  # the server's wish, within the policy's longest wait
                wait = min(self.retry.max_backoff, max(wait, retry_after))
            wait = min(wait, max(0.0, deadline - self.clock()))
            if wait > 0:
                self.sleep(wait)
        return False, errors, self.max_attempts - 1

    def dead_letter(
        self, key: str, alerts: Sequence[dict], errors: list[str], batch_id: int | None, *, refused: bool = False
    ) -> str:
        attempts = sum(1 for e in errors if "budget" not in e)
        return self.dead_letters.put(
            key, self.payloads(alerts), errors, batch_id=batch_id, refused=refused, attempts=attempts
        ).path

    def deliver(self, alerts: Sequence[dict], batch_id: int) -> Delivery:
        report = Delivery(self.name)
        deadline = self.clock() + self.retry.budget
        exhausted: str | None = None
        # The letters this call wrote. When a later one cannot be written (a full disk), the call raises and
        # the whole micro-batch stays in the outbox, to be delivered again: its letters are taken back, or
        # their alerts would go twice (the batch, then the letters) and count as redelivered, never as
        # dead-lettered.
        written: list[str] = []
        for key, chunk in self.requests(alerts):
            refused = False
            if exhausted is not None:
                errors = [
                    exhausted,
                    f"retry budget of {self.retry_budget:g}s for this micro-batch used up: not attempted",
                ]
                ok, retries = False, 0
            else:
                try:
                    ok, errors, retries = self.send(key, chunk, deadline=deadline, batch_id=batch_id)
                except _Permanent as exc:
                    ok, errors, retries, refused = False, str(exc).split("; "), 0, True
                report.retries += retries
            if ok:
                for alert in chunk:
                    report.delivered[alert["rule_id"]] += 1
                continue
            try:
                written.append(self.dead_letter(key, chunk, errors, batch_id, refused=refused))
            except OSError as exc:  # a full disk: dropping the alert is not an option, so stop the batch
                for path in written:
                    with contextlib.suppress(FileNotFoundError):
                        os.remove(path)
                raise CepSinkError(
                    f"{errors[-1] if errors else 'delivery failed'}, and the dead letter for {key} could not "
                    f"be written to {self.dead_letter_dir}: {exc}; {not_committed(batch_id)}",
                    filename=self.describe(),
                ) from exc
            rules = sorted({str(alert["rule_id"]) for alert in chunk})
            for alert in chunk:
                report.dead_lettered[alert["rule_id"]] += 1
            message = f"{key}: {errors[-1] if errors else 'failed'}"
            report.errors.append(DeliveryError(message, tuple(rules), key, refused=refused))
            if self.clock() >= deadline and exhausted is None:
                exhausted = f"earlier requests failed: {errors[-1] if errors else 'failed'}"
        return report

    # -- dead letters

    def resend(self, letter: DeadLetter) -> Attempt:
        """One try at a dead letter, with the current format, headers and signature.

        A letter can hold more alerts than one request of the current format carries: a batch that failed
        under another format (Alertmanager's 64, then PagerDuty's one event per request), or another
        webhook's letters (``cep deliver --from``). Those go as several requests, each with the key the same
        alerts get on a first delivery; the first that fails fails the try, and the next try sends them all
        again (the receiver deduplicates on the keys). One body of them all would carry only the first alert
        in a format of one event, and the letter would be removed with the others never sent."""
        alerts = self.payloads(list(letter.alerts))
        limit = self.body_format.max_batch
        if limit is None or len(alerts) <= limit:
            parts = [(letter.key, alerts)]
        else:
            chunks = [alerts[i : i + limit] for i in range(0, len(alerts), limit)]
            parts = [(self.batch_key([a["match_id"] for a in chunk]), chunk) for chunk in chunks]
        try:
            for key, chunk in parts:
                ok, error, _ = self._attempt(key, self.body_format.body(chunk))
                if not ok:
                    return Attempt(False, error)
        except (_Permanent, ValueError) as exc:
            return Attempt(False, f"{exc} (not retried)", refused=True)
        return Attempt(True)

    def replay_dead_letters(self) -> tuple[int, int]:
        """Send every dead letter once, refused ones too; remove those delivered. (delivered, still failing)."""
        delivered = failing = 0
        with self.dead_letters.lock():
            for letter in self.dead_letters.letters():
                attempt = self.resend(letter)
                if attempt.ok:
                    self.dead_letters.remove(letter)
                    delivered += 1
                else:
                    self.dead_letters.failed_again(letter, attempt.error, refused=attempt.refused)
                    failing += 1
        return delivered, failing

    def close(self) -> None:
        with self.connection.lock:
            self.connection.close()

    def sample_payload(self) -> dict:
        """An alert as the receiver would get it (checks a template at start-up)."""
        now = _dt.datetime.now(_dt.UTC).replace(tzinfo=None)
        return self.payloads(
            [
                {
                    "rule_id": "example/rule",
                    "rule_version": "0" * 16,
                    "match_id": "0" * 32,
                    "match_status": "MATCHED",
                    "partition_key": json.dumps({"key": "value"}),
                    "first_event_time": now,
                    "last_event_time": now,
                    "measures": json.dumps({"value": 1}),
                    "emit_time": now,
                    "suppressed": False,
                }
            ]
        )[0]
