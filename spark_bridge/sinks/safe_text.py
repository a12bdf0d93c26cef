"""Text that is safe to show: secrets left out of sink descriptions and errors, control characters made
visible, option values read from the environment.

Where a sink is described (the start-up line, the status file, ``cep status``, errors, metrics labels):

* a **webhook URL** is a secret (Slack's and PagerDuty's URLs carry their token in the path): it is
  shown as its scheme and host and the first 8 hex digits of the SHA-256 of the whole URL
  (``https://hooks.slack.com/…#5c2e61a0``), enough to tell two URLs apart and to check which one a
  dead letter was meant for;
* a **PostgreSQL connection string** is read by libpq's own parser (through the installed driver), in
  either form libpq takes (a ``postgresql://`` URL, with the password in the user info or as
  ``?password=``, or ``key=value`` pairs), and shown as host, port, database and user: a password
  never reaches the description, whatever its characters;
* **error messages** from a driver or a socket pass through ``scrub`` with the sink's secrets.

``visible(text)`` writes control characters (ANSI escapes, newlines, bidirectional overrides) as
backslash escapes, so that data can neither repaint a terminal nor forge a log line.
"""

from __future__ import annotations

import hashlib
import os
import re
import urllib.parse
from collections.abc import Iterable

__all__ = ["check_url", "expand_env", "scrub", "url_key", "url_label", "visible", "file_safe"]

# C0 and C1 control characters, DEL, and the Unicode format characters that reorder or hide text
# (bidirectional embeddings, overrides and isolates: "Trojan source"; zero-width joiners stay).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_ENV = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
HASH_DIGITS = 8


def visible(text: str) -> str:
    r"""``text`` with every control character written as an escape (``\x1b``, ``\n``, ``\u202e``)."""

    def escape(match: re.Match) -> str:
        char = match.group(0)
        named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(char)
        if named:
            return named
        code = ord(char)
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    return _CONTROL.sub(escape, text)


def file_safe(text: str, limit: int = 60) -> str:
    """A name made of letters, digits, ``.``, ``_`` and ``-`` only (for folders and metric labels)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._")[:limit] or "_"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:HASH_DIGITS]


def check_url(url: str, *, what: str = "webhook URL", schemes: tuple[str, ...] = ("http", "https")) -> None:
    """Raise ``ValueError`` if ``url`` is not an absolute URL of one of ``schemes`` with a host (and a
    valid port); the message names the URL by its label only."""
    if not isinstance(url, str) or not url:
        raise ValueError(f"the {what} is empty")
    if _CONTROL.search(url) or any(c.isspace() for c in url):
        raise ValueError(f"the {what} ({url_label(url)}) holds spaces or control characters")
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port  # raises ValueError for a port that is not a number in range
        host = parts.hostname
    except ValueError as exc:
        raise ValueError(f"the {what} ({url_label(url)}) is not a valid URL: {exc}") from None
    if parts.scheme.lower() not in schemes:
        raise ValueError(
            f"the {what} must start with {' or '.join(s + '://' for s in schemes)} "
            f"(got {visible(parts.scheme) + '://' if parts.scheme else 'no scheme'})"
        )
    if not host:
        raise ValueError(f"the {what} ({url_label(url)}) has no host")
    del port


def url_label(url: str) -> str:
    """``scheme://host[:port]/…#hash``: the URL without its path, query and user info (they may hold a
    token), and the hash of the whole URL."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        host, port = "", None
        parts = urllib.parse.SplitResult(url.split(":", 1)[0] if "://" in url else "", "", "", "", "")
    if ":" in host:
        host = f"[{host}]"
    where = f"{parts.scheme}://{visible(host)}{f':{port}' if port else ''}" if parts.scheme else "?"
    return f"{where}/…#{_digest(url)}"


def url_key(kind: str, url: str) -> str:
    """A stable, file-name-safe id for a sink at ``url``: ``kind-host-hash``."""
    try:
        host = urllib.parse.urlsplit(url).hostname or ""
    except ValueError:
        host = ""
    return f"{kind}-{file_safe(host, 40)}-{_digest(url)}" if host else f"{kind}-{_digest(url)}"


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret (longest first) replaced by ``***``."""
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, "***")
        quoted = urllib.parse.quote(secret, safe="")
        if quoted != secret:
            text = text.replace(quoted, "***")
    return text


def expand_env(value: str, *, what: str) -> str:
    """``$NAME`` and ``${NAME}`` in ``value`` replaced by the environment's values (``$$`` is a ``$``).

    A variable that is not set is an error naming the variable (never a value)."""

    def replace(match: re.Match) -> str:
        name = match.group(1) or match.group(2)
        found = os.environ.get(name)
        if found is None:
            raise ValueError(f"{what}: the environment variable {name} is not set")
        return found

    return "$".join(_ENV.sub(replace, piece) for piece in value.split("$$"))
