"""The driver's side of a rule set: watching the rules directory, publishing each new set, and saying
what changed.

* Between micro-batches ``RuleWatch.refresh`` compares the files' names, sizes and modification times
  with the last look; when they changed it loads and checks every rule (``rule_set.build_rule_set``),
  publishes the set (``store.RuleStore``) and records what was added, changed, removed or broken.
* **A rule broken by an edit keeps running its last good version** (a typo must not switch an alert off).
* **A rules directory that is missing or unreadable is an outage, not a deletion**: a volume
  remounting, a deploy that replaces the directory, a permission change. The last good rule set keeps
  running with all its state; the outage is logged once and shown in the status (``rules_outage``),
  and the files are read again once the directory is back. Deleting every file of a directory that is
  still there does remove every rule.
* A rule that did not load and now does is logged as fixed.
* **A rule that fails at run time is quarantined on its own** (``quarantine``): E0430 (too many partial
  matches on a key) or any exception in its step. The executors drop its state on the failing key and
  report it; from the next rule set on it is left out (its state on every other key is dropped as for a
  removed rule), shown as ``failed`` with the reason, the key and the time in the status and metrics,
  and run again, with fresh state, once its file changes (an edit, or a ``touch``). The other rules
  keep running. The quarantine is kept in the status file, so a restart does not run it again.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Sequence

from cep.grammar.errors import CepSemanticError
from cep.spark_bridge.alerting import rules as rules_mod
from cep.spark_bridge.alerting import suppress as suppress_mod
from cep.spark_bridge.alerting.rule_set import build_rule_set
from cep.spark_bridge.alerting.status import StatusBook, now_iso, on_key, prune_versions
from cep.spark_bridge.alerting.store import RuleStore
from cep.spark_bridge.engine.durations import parse_duration
from cep.spark_bridge.sinks.payloads import RuleNotes
from cep.spark_bridge.sinks.safe_text import visible
from cep.spark_bridge.spark.inputs import DEFAULT_WATERMARK

__all__ = ["RuleWatch"]


@dataclasses.dataclass(frozen=True)
class _VersionOnly:
    version: str


@dataclasses.dataclass(frozen=True)
class _KeptRule:
    """A rule whose file no longer compiles, still running the version that last did."""

    rule_id: str
    version: str
    path: str
    line: int


def _file_stamp(path: str) -> list | None:
    """What tells that a rule's file changed: its modification time and size (None: it is gone)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size]


class RuleWatch:
    """The rule set of one stream: loaded from ``path``, published to ``store``, recorded in ``book``."""

    def __init__(
        self,
        path: str,
        store: RuleStore,
        book: StatusBook,
        *,
        input_types: dict[str, str],
        time_column: str | None,
        specs: Sequence[suppress_mod.SuppressSpec] = (),
        session_timeout_us: int | None = None,
        max_pending_rows: int,
        dedup_key: Sequence[str] = (),
        watermark=None,
        event: Callable[[str, str], None],
        before_publish: Callable[[dict], None] | None = None,
    ) -> None:
        self.path = path
        self.store = store
        self.book = book
        self.input_types = input_types
        self.time_column = time_column
        self.specs = list(specs)
        self.session_timeout_us = session_timeout_us
        self.max_pending_rows = max_pending_rows
        self.dedup_key = list(dedup_key)
        self.watermark = watermark
        self.event = event
        self.before_publish = before_publish  # called with each new set from refresh, before it is published
        self.ruleset: rules_mod.RuleSet | None = None
        self.payload: dict | None = None
        self.signature: tuple | None = None
        self.notes: dict[tuple[str, str], RuleNotes] = {}
        # The load errors this process has logged: each is said once while it lasts, and once more by the next
        # process (the status file keeps the errors across a restart, but the restarted service's log must say
        # why a rule is skipped, not only count it in the status line).
        self.said_errors: set[str] = set()
        # Rules failed at run time, by id: version, file stamp, error, key, time (kept in the status file).
        self.quarantined: dict[str, dict] = dict(book.status.get("quarantined") or {})

    # ---------------------------------------------------------------------------------- the files

    def _unreadable(self) -> str | None:
        """Why the rules path cannot be read now (None: it can)."""
        if not os.path.exists(self.path):
            return "it does not exist"
        try:
            if os.path.isdir(self.path):
                os.listdir(self.path)
            else:
                with open(self.path, "rb"):
                    pass
        except OSError as exc:
            return exc.strerror or str(exc)
        return None

    def _files_signature(self) -> tuple:
        signature = []
        for path in rules_mod.rule_files(self.path):
            try:
                st = os.stat(path)
                signature.append((path, st.st_mtime_ns, st.st_size))
            except FileNotFoundError:
                continue
        return tuple(signature)

    def _outage(self, why: str) -> rules_mod.RuleChanges:
        with self.book.lock:
            outage = self.book.status.get("rules_outage")
            if outage is None:
                self.book.status["rules_outage"] = {"since": now_iso(), "since_epoch": time.time(), "error": why}
        if outage is None:
            self.event(
                f"the rules at {visible(self.path)} cannot be read ({why}): the last good rule set keeps running "
                "with its state; the rules are read again once they are back",
                "warning",
            )
        return rules_mod.RuleChanges()

    # ---------------------------------------------------------------------------------- refresh

    def refresh(self, *, force: bool = False) -> rules_mod.RuleChanges:
        """Reload the rules if their files changed; publish the new set for the next micro-batches."""
        why = self._unreadable()
        published = self.payload is not None or self.store.current_id() is not None
        if why is not None and published:
            return self._outage(why)
        try:
            signature = self._files_signature()
        except OSError as exc:
            if published:
                return self._outage(exc.strerror or str(exc))
            signature = ()
        with self.book.lock:
            outage = self.book.status.pop("rules_outage", None)
        if outage is not None:
            unreadable_s = int(time.time() - outage.get("since_epoch", time.time()))
            self.event(
                f"the rules at {visible(self.path)} can be read again (after {unreadable_s}s): reloading them",
                "info",
            )
            force = True
        if not force and signature == self.signature and self.payload is not None:
            return rules_mod.RuleChanges()
        payload, ruleset = build_rule_set(
            self.path,
            input_types=self.input_types,
            time_column=self.time_column,
            suppress=self.specs,
            session_timeout_us=self.session_timeout_us,
            max_pending_rows=self.max_pending_rows,
        )
        if self.time_column is None:
            self.time_column = payload["time_column"]
        if payload["time_column"] is None:
            raise CepSemanticError(
                "cannot tell the stream's event-time column: no rule orders by an input column; "
                "give it explicitly (--time-column)",
                code="E0604",
            )
        if self.dedup_key:  # repeats are remembered for the watermark delay (keyed.KeyedStream)
            payload["dedup_key"] = self.dedup_key
            payload["dedup_horizon_us"] = parse_duration(self.watermark or DEFAULT_WATERMARK, what="watermark")
        # Compare with what ran last, also across a restart (the status file remembers it).
        old_versions = (
            dict(self.book.status.get("active_versions") or {}) if self.ruleset is None else self.ruleset.versions()
        )
        kept = self._keep_last_good(payload, ruleset)
        held = self._hold_quarantined(payload, ruleset)
        previous = rules_mod.RuleSet()
        previous.rules = {
            r: _VersionOnly(v)  # type: ignore[assignment]
            for r, v in old_versions.items()
            if r not in held
        }
        changes = previous.diff(ruleset)
        self.signature = signature
        self.ruleset, self.payload = ruleset, payload
        for entry in payload["rules"]:
            self.notes[(entry["rule_id"], entry["version"])] = RuleNotes.from_options(entry.get("options") or {})
        if self.before_publish is not None:
            self.before_publish(payload)
        set_id = self.store.publish(payload)
        self._record(ruleset, changes, set_id, old_versions)
        for rule_id in kept:
            self.event(
                f"rule {rule_id}: its file has errors (see cep status); "
                f"version {ruleset[rule_id].version} keeps running",
                "warning",
            )
        return changes

    # ---------------------------------------------------------------------------------- quarantine

    def quarantine(self, failures: Sequence[dict]) -> None:
        """Leave out each rule of ``failures`` (``rule_id``, ``version``, ``key``, ``error``: what the
        executors reported) until its file changes, and publish the set without it."""
        fresh = []
        for failure in failures:
            rule_id = failure["rule_id"]
            rule = self.ruleset.rules.get(rule_id) if self.ruleset is not None else None
            if rule_id in self.quarantined or rule is None or rule.version != failure["version"]:
                continue  # already out, or a version that no longer runs
            self.quarantined[rule_id] = {
                "version": rule.version,
                "path": rule.path,
                "file": _file_stamp(rule.path),
                "error": failure["error"],
                "key": failure.get("key"),
                "since": now_iso(),
            }
            fresh.append(rule_id)
        if not fresh:
            return
        for rule_id in fresh:
            record = self.quarantined[rule_id]
            self.event(
                f"rule {rule_id} failed at run time{on_key(record['key'])} and is quarantined (every other rule "
                f"keeps running; it runs again once its file {visible(record['path'])} changes): "
                f"{visible(record['error'].splitlines()[0] if record['error'] else '')}",
                "error",
            )
        self.refresh(force=True)

    def _hold_quarantined(self, payload: dict, ruleset: rules_mod.RuleSet) -> set[str]:
        """Take the quarantined rules out of a set about to be published; lift the quarantine of a rule
        whose file changed or that is gone. Returns the ids held out."""
        held = set()
        for rule_id, record in list(self.quarantined.items()):
            if rule_id not in ruleset.rules or _file_stamp(record["path"]) != record["file"]:
                del self.quarantined[rule_id]
                if rule_id in ruleset.rules:
                    self.event(
                        f"rule {rule_id}: its file changed after it failed; it runs again with fresh state "
                        f"(version {ruleset[rule_id].version})",
                        "info",
                    )
                continue
            ruleset.rules.pop(rule_id)
            payload["rules"] = [entry for entry in payload["rules"] if entry["rule_id"] != rule_id]
            held.add(rule_id)
        with self.book.lock:
            self.book.status["quarantined"] = dict(self.quarantined)
            for rule_id, rule in self.book.status.get("rules", {}).items():
                rule["failed"] = self.quarantined.get(rule_id)
        return held

    def notes_for(self, rule_id: str, version: str) -> RuleNotes:
        """A rule's severity and summary (its version's, else the newest known)."""
        found = self.notes.get((rule_id, version))
        if found is None:
            found = next((n for (r, _), n in reversed(list(self.notes.items())) if r == rule_id), RuleNotes())
        return found

    def _keep_last_good(self, payload: dict, ruleset: rules_mod.RuleSet) -> list[str]:
        """A rule that ran and whose file now fails to compile keeps running its last good version
        (a typo must not silently switch an alert off). Returns the ids kept."""
        previous = self.payload
        if previous is None:
            current = self.store.current_id()
            if current is None:
                return []
            try:
                previous = self.store.load(current)
            except (OSError, ValueError):
                return []
        if (
            previous.get("input_columns") != payload["input_columns"]
            or previous.get("time_column") != payload["time_column"]
        ):
            return []
        broken_ids = {e.rule_id for e in ruleset.errors if e.rule_id}
        broken_files = {os.path.abspath(e.path) for e in ruleset.errors if not e.rule_id}
        kept = []
        for entry in previous.get("rules", []):
            rule_id = entry["rule_id"]
            if rule_id in ruleset.rules:
                continue
            if rule_id in broken_ids or os.path.abspath(entry["path"]) in broken_files:
                payload["rules"].append(entry)
                ruleset.rules[rule_id] = _KeptRule(rule_id, entry["version"], entry["path"], entry["line"])  # type: ignore[assignment]
                kept.append(rule_id)
        return kept

    def _record(
        self, ruleset: rules_mod.RuleSet, changes: rules_mod.RuleChanges, set_id: str, old_versions: dict[str, str]
    ) -> None:
        book = self.book
        broken_before = {e.get("rule_id") for e in book.status.get("errors", []) if e.get("rule_id")}
        broken_now = {e.rule_id for e in ruleset.errors if e.rule_id}
        with book.lock:
            for rule_id, rule_status in book.status["rules"].items():
                rule_status["active"] = False
                if rule_id not in broken_now and rule_status.get("errors"):  # its broken file was deleted (or fixed)
                    rule_status["errors"] = []
            for rule in ruleset:
                entry = book.rule(rule.rule_id)
                entry.update(
                    {
                        "active": True,
                        "version": rule.version,
                        "path": rule.path,
                        "line": rule.line,
                        "suppress_us": next(
                            (r["suppress_us"] for r in self.payload["rules"] if r["rule_id"] == rule.rule_id), None
                        ),
                    }
                )
                entry["errors"] = []
                book.version(entry, rule.version)
                prune_versions(entry, rule.version)
            for error in ruleset.errors:
                if error.rule_id:
                    entry = book.rule(error.rule_id)
                    entry["errors"] = [error.rendered]
                    if error.rule_id in ruleset.rules:
                        entry["errors"][0] += "\n  (the last good version keeps running)"
            book.status["errors"] = [e.as_dict() for e in ruleset.errors]
            book.status["rule_set"] = set_id
            book.status["active_versions"] = ruleset.versions()
            book.status["time_column"] = self.time_column
        for rule_id in sorted(broken_before - broken_now):
            if rule_id in ruleset.rules:
                self.event(f"rule {rule_id} fixed: its file loads again (version {ruleset[rule_id].version})", "info")
            else:
                self.event(f"rule {rule_id}: its broken file is gone; the error is cleared", "info")
        for rule_id in changes.added:
            self.event(f"rule {rule_id} added (version {ruleset[rule_id].version})", "info")
        for rule_id in changes.changed:
            old_version = old_versions.get(rule_id)
            gauges = book.status["rules"][rule_id]["versions"].get(old_version or "", {})
            self.event(
                f"rule {rule_id} changed ({old_version} -> {ruleset[rule_id].version}): it starts with fresh state; "
                f"its {gauges.get('live_partial_matches', 0)} live partial matches and {gauges.get('pending_rows', 0)} "
                f"waiting rows on {gauges.get('keys', 0)} keys are dropped",
                "info",
            )
        for rule_id in changes.removed:
            self.event(f"rule {rule_id} removed; its state is dropped", "info")
        for error in ruleset.errors:
            if error.rendered not in self.said_errors:
                self.event(f"rule skipped: {error.rendered}", "error")
        self.said_errors = {error.rendered for error in ruleset.errors}
