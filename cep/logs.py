"""What ``cep stream`` writes on stderr: log lines for people or for log shippers, and the status line.

* **text** (default): ``[cep] 2026-11-26T02:17:23Z message``, with ``warning:`` or ``error:`` before a
  message of that level. Control characters in a message are written as escapes, so data can neither
  forge a line nor repaint a terminal.
* **json** (``--log-format json``): one object per line, ``{"time", "level", "logger", "message"}``,
  for journald, Fluent Bit, Vector and the like.
* **the status line** (``batch 12 | rules 3 | alerts 5 | ...``): on a terminal it is rewritten in
  place; otherwise (a log file, journald) it is written as a line when a micro-batch with data has run,
  and at most every ``status_every`` seconds when nothing happens (``--status-every``). In JSON it is
  an object with ``"status": {...}`` fields.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import sys
import time
from typing import IO

from cep.spark_bridge.sinks.safe_text import visible

__all__ = ["StreamLog", "LOG_FORMATS"]

LOG_FORMATS = ("text", "json")
LOGGER = "cep"


def _stamp(created: float) -> str:
    moment = _dt.datetime.fromtimestamp(created, _dt.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class StreamLog(logging.Handler):
    """The ``cep`` logger's handler for ``cep stream``, and its status line (see the module doc)."""

    def __init__(self, stream: IO[str] | None = None, *, fmt: str = "text", status_every: float = 60.0) -> None:
        super().__init__(logging.INFO)
        if fmt not in LOG_FORMATS:
            raise ValueError(f"log format {fmt!r}: use {' or '.join(LOG_FORMATS)}")
        self.stream = stream or sys.stderr
        self.fmt = fmt
        self.status_every = status_every
        self.tty = fmt == "text" and bool(getattr(self.stream, "isatty", lambda: False)())
        self.shown = False
        self.last_status_at = 0.0
        self.last_batches: int | None = None

    def install(self) -> StreamLog:
        logger = logging.getLogger(LOGGER)
        logger.setLevel(logging.INFO)
        logger.propagate = False
        for old in [h for h in logger.handlers if isinstance(h, StreamLog)]:
            logger.removeHandler(old)
        logger.addHandler(self)
        return self

    def uninstall(self) -> None:
        logging.getLogger(LOGGER).removeHandler(self)

    def _write(self, text: str) -> None:
        if self.shown:
            self.stream.write("\r\033[K")
            self.shown = False
        self.stream.write(text + "\n")
        self.stream.flush()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
            if self.fmt == "json":
                self._write(
                    json.dumps(
                        {
                            "time": _stamp(record.created),
                            "level": record.levelname.lower(),
                            "logger": record.name,
                            "message": message,
                        },
                        ensure_ascii=False,
                    )
                )
                return
            level = f"{record.levelname.lower()}: " if record.levelno >= logging.WARNING else ""
            self._write(f"[cep] {_stamp(record.created)} {level}{visible(message)}")
        except Exception:  # noqa: BLE001 - logging must never stop the stream
            self.handleError(record)

    def status(self, line: str, fields: dict, *, batches: int) -> None:
        """The status line: in place on a terminal; as a line after a micro-batch with data, or every
        ``status_every`` seconds."""
        now = time.monotonic()
        if self.tty:
            self.stream.write("\r\033[K" + visible(line))
            self.stream.flush()
            self.shown = True
            return
        new_data = self.last_batches is not None and batches != self.last_batches
        due = now - self.last_status_at >= self.status_every
        self.last_batches = batches
        if not (new_data or due):
            return
        self.last_status_at = now
        if self.fmt == "json":
            self._write(
                json.dumps(
                    {
                        "time": _stamp(time.time()),
                        "level": "info",
                        "logger": "cep.status",
                        "message": line,
                        "status": fields,
                    },
                    ensure_ascii=False,
                )
            )
        else:
            self._write(f"[cep] {_stamp(time.time())} {visible(line)}")

    def clear(self) -> None:
        if self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self.shown = False
