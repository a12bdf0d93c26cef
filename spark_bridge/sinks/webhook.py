"""``WebhookSink``: alerts as HTTP POSTs with idempotency keys, retried, and dead-lettered when they still
fail (the package docstring, ``sinks/__init__.py``, has the rules)."""

from __future__ import annotations

import datetime as _dt
import hashlib
import http.client
import json
import os
import re
import socket
import time
import urllib.error
import urllib.request
from typing import Callable, Sequence

from cep.spark_bridge.sinks.alerts import alert_payload, iso_utc
from cep.spark_bridge.sinks.base import AlertSink, CepSinkError, Delivery, RetryPolicy, atomic_write, not_committed



# ----------------------------------------------------------------------------------------- values


# -------------------------------------------------------------------------------------- file sink


# ----------------------------------------------------------------------------------------- webhook

_RETRY_STATUS = {408, 425, 429}


class _Permanent(Exception):
    """An answer that retrying cannot fix (a 4xx other than 408/425/429)."""


def _safe_name(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", key)[:120]


class WebhookSink(AlertSink):
    """POST alerts as JSON with an ``Idempotency-Key``; retries with backoff; dead letters, never drops."""

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
        batch_size: int = 1,
        headers: dict[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        retry: RetryPolicy | None = None,
    ) -> None:
        if not re.match(r"^https?://", url):
            raise ValueError(f"webhook URL must start with http:// or https://, not {url!r}")
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        # One retry policy for every sink (base.RetryPolicy): the keyword arguments are its fields,
        # spelled as before; ``retry`` replaces them all. Per request: max_attempts; per micro-batch: budget.
        try:
            self.retry = retry or RetryPolicy(max_attempts=max_attempts, backoff=backoff, max_backoff=max_backoff,
                                              budget=retry_budget)
        except ValueError as exc:
            raise ValueError(f"webhook retries: {exc}") from None
        self.url = url
        self.dead_letter_dir = dead_letter_dir
        self.timeout = timeout
        self.batch_size = batch_size
        self.headers = dict(headers or {})
        self.sleep = sleep
        self.clock = clock

    @property
    def max_attempts(self) -> int:
        return self.retry.max_attempts

    @property
    def retry_budget(self) -> float:
        return self.retry.budget

    def describe(self) -> str:
        return f"webhook {self.url}"

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

    # -- sending

    def _post(self, key: str, body: bytes) -> None:
        request = urllib.request.Request(self.url, data=body, method="POST")
        request.add_header("Content-Type", "application/json")
        request.add_header("Idempotency-Key", key)
        for name, value in self.headers.items():
            request.add_header(name, value)
        with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310 - http(s) only, checked
            response.read()

    def _attempt(self, key: str, body: bytes) -> tuple[bool, str, float | None]:
        """(ok, error text, Retry-After seconds); raises _Permanent for an answer not worth retrying."""
        try:
            self._post(key, body)
            return True, "", None
        except urllib.error.HTTPError as exc:
            retry_after = None
            try:
                retry_after = float(exc.headers.get("Retry-After")) if exc.headers and exc.headers.get("Retry-After") else None
            except (TypeError, ValueError):
                retry_after = None
            text = f"HTTP {exc.code} {exc.reason}"
            if exc.code >= 500 or exc.code in _RETRY_STATUS:
                return False, text, retry_after
            raise _Permanent(text) from None
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, (TimeoutError, socket.timeout)):
                return False, f"timed out after {self.timeout:g}s", None
            return False, f"{type(reason).__name__}: {reason}" if isinstance(reason, BaseException) else str(reason), None
        except (TimeoutError, socket.timeout):
            return False, f"timed out after {self.timeout:g}s", None
        except (ConnectionError, http.client.HTTPException, OSError) as exc:
            return False, f"{type(exc).__name__}: {exc}", None

    def send(self, key: str, alerts: Sequence[dict], *, deadline: float, batch_id: int | None = None) -> tuple[bool, list[str], int]:
        """POST one request with retries; (delivered, errors, retries)."""
        body = json.dumps({"alerts": [alert_payload(a) for a in alerts]}, ensure_ascii=False).encode("utf-8")
        errors: list[str] = []
        for attempt in range(self.max_attempts):
            if attempt > 0 and self.clock() >= deadline:
                errors.append(f"retry budget of {self.retry_budget:g}s for this micro-batch used up")
                return False, errors, attempt - 1
            try:
                ok, error, retry_after = self._attempt(key, body)
            except _Permanent as exc:
                errors.append(f"{exc} (not retried)")
                return False, errors, attempt
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

    def dead_letter(self, key: str, alerts: Sequence[dict], errors: list[str], batch_id: int | None) -> str:
        os.makedirs(self.dead_letter_dir, exist_ok=True)
        record = {
            "sink": self.name,
            "url": self.url,
            "idempotency_key": key,
            "batch_id": batch_id,
            "attempts": sum(1 for e in errors if "budget" not in e),
            "error": errors[-1] if errors else "unknown",
            "errors": errors,
            "failed_at": iso_utc(_dt.datetime.now(_dt.timezone.utc)),
            "body": {"alerts": [alert_payload(a) for a in alerts]},
        }
        path = os.path.join(self.dead_letter_dir, f"{_safe_name(key)}.json")
        atomic_write(path, json.dumps(record, ensure_ascii=False, indent=1))
        return path

    def deliver(self, alerts: Sequence[dict], batch_id: int) -> Delivery:
        report = Delivery(self.name)
        deadline = self.clock() + self.retry.budget
        exhausted: str | None = None
        for key, chunk in self.requests(alerts):
            if exhausted is not None:
                errors = [exhausted, f"retry budget of {self.retry_budget:g}s for this micro-batch used up: not attempted"]
                ok, retries = False, 0
            else:
                ok, errors, retries = self.send(key, chunk, deadline=deadline, batch_id=batch_id)
                report.retries += retries
            if ok:
                for alert in chunk:
                    report.delivered[alert["rule_id"]] += 1
                continue
            try:
                self.dead_letter(key, chunk, errors, batch_id)
            except OSError as exc:  # a full disk: dropping the alert is not an option, so stop the batch
                raise CepSinkError(f"{errors[-1] if errors else 'delivery failed'}, and the dead letter for {key} could not "
                                f"be written to {self.dead_letter_dir}: {exc}; {not_committed(batch_id)}",
                                filename=self.describe()) from exc
            for alert in chunk:
                report.dead_lettered[alert["rule_id"]] += 1
            report.errors.append(f"{key}: {errors[-1] if errors else 'failed'}")
            if self.clock() >= deadline and exhausted is None:
                exhausted = f"earlier requests failed: {errors[-1] if errors else 'failed'}"
        return report

    def replay_dead_letters(self) -> tuple[int, int]:
        """Send the dead letters again; remove those delivered. Returns (delivered, still failing)."""
        if not os.path.isdir(self.dead_letter_dir):
            return 0, 0
        delivered = failing = 0
        for name in sorted(os.listdir(self.dead_letter_dir)):
            if not name.endswith(".json"):
                continue
            path = os.path.join(self.dead_letter_dir, name)
            with open(path, encoding="utf-8") as fh:
                record = json.load(fh)
            body = json.dumps(record["body"], ensure_ascii=False).encode("utf-8")
            ok, error, _ = self._attempt_safely(record["idempotency_key"], body)
            if ok:
                os.remove(path)
                delivered += 1
            else:
                record["errors"].append(error)
                record["error"] = error
                atomic_write(path, json.dumps(record, ensure_ascii=False, indent=1))
                failing += 1
        return delivered, failing

    def _attempt_safely(self, key: str, body: bytes):
        try:
            return self._attempt(key, body)
        except _Permanent as exc:
            return False, f"{exc} (not retried)", None


# ------------------------------------------------------------------------------------- fan-out


